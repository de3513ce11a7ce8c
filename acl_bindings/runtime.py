"""Process init and finalize, devices, contexts and the device guard (docs/design.md, "Sharing the process")."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import sys
import threading
from ctypes import byref, c_int32, c_size_t, c_uint32, c_void_p
from typing import Any

from . import _codes, _loader
from ._lib import failure, lib, raise_for_status, recent_error_message
from ._resource import STATE, Resource, exit_error
from .enums import MemAttr
from .errors import AclError, AclParamError, ClosedError, ProcessForkedError

__all__ = [
    "ensure_initialized", "initialized_first", "finalize", "device_count", "soc_name", "cann_version",
    "acl_version", "current_context", "Device",
]

_log = logging.getLogger("acl_bindings")

_init_lock = threading.Lock()
_initialized = False
_first = False  # this module's aclInit returned 0 (not 100002)
_tls = threading.local()  # .ctx: the context the innermost device guard of this thread made current
_forked = False  # forked after this process initialised ACL (checked on the guard's fast path)


def _after_fork_in_child() -> None:
    global _forked
    _forked = _initialized


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_fork() -> None:
    if STATE.pid is not None and os.getpid() != STATE.pid:
        raise ProcessForkedError(
            "this process was forked after the CANN runtime was initialised in its parent; ACL state does not "
            "survive fork(). Use the 'spawn' start method (multiprocessing.get_context('spawn')) or create "
            "sessions only in the child, before any use in the parent.")


def ensure_initialized() -> None:
    """Call ``aclInit(NULL)`` once per process (thread-safe); 0 and 100002 both hold one reference, given back at
    exit.  After :func:`finalize` it raises :class:`AclError` (100001): nothing made then could be released."""
    global _initialized, _first
    _check_fork()
    if _initialized and not STATE.finalized:
        return
    if STATE.exiting:
        raise exit_error("aclInit")
    with _init_lock:
        if STATE.finalized:  # its handles would never be released: refuse instead of leaking silently
            raise AclError.from_status(
                _codes.ACL_ERROR_UNINITIALIZE, "aclInit",
                "not called again: this process already gave its ACL reference back (acl_bindings.finalize()); "
                "nothing made after that could be released")
        if _initialized:
            return
        _torch_npu_first()
        try:
            lib.aclInit(None)
            _first = True
        except AclError as exc:
            if exc.code != _codes.ACL_ERROR_REPEAT_INITIALIZE:
                raise
            _first = False  # another component initialised first; the count has one more reference
        STATE.pid = os.getpid()  # from now on a forked child must not use ACL
        _initialized = True
        atexit.register(_finalize_at_exit)


def _torch_npu_first() -> None:
    """Where torch_npu is imported already, let it call ``aclInit`` first, with its config (cann-abi.md §9.4)."""
    init = getattr(getattr(sys.modules.get("torch_npu"), "npu", None), "init", None)
    try:
        if init is not None:
            init()
    except Exception as exc:  # torch_npu that cannot start (no device): ours is then the first aclInit
        _log.debug("torch_npu.npu.init() failed before aclInit: %s", exc)


def initialized_first() -> bool:
    """Whether this package's ``aclInit`` was the process's first (it returned 0, not 100002)."""
    return _initialized and _first


def finalize() -> None:
    """Give this process's ACL reference back now (normally done at exit); later releases of handles are skipped.

    ``aclFinalizeReference`` where exported (the runtime goes only with its last user); else ``aclFinalize``, only
    when this package's ``aclInit`` was the first, tearing the runtime down under any other user."""
    _release(at_exit=False)


def _release(at_exit: bool) -> None:
    with _init_lock:
        if not _initialized or STATE.finalized or os.getpid() != STATE.pid:
            return
        STATE.finalized = True  # our reference is gone: none of our handles is released after this
        if lib.has("aclFinalizeReference"):
            lib.aclFinalizeReference(None)
        elif _first and not at_exit:
            lib.aclFinalize()


def _finalize_at_exit() -> None:
    STATE.exiting = True  # (first: a call failing from here on says why, in one error type)
    with contextlib.suppress(AclError, ClosedError):  # nothing useful can be done at exit; never print from here
        _release(at_exit=True)


_get_current: Any = None  # lib.unchecked("aclrtGetCurrentContext"), bound on first use (no context is no error here)


def current_context() -> int:
    """The calling thread's current context (``aclrtGetCurrentContext``); 0 when none is current.  Raises
    :class:`AclError` for any other failure (100001 after finalisation, say)."""
    global _get_current
    if _get_current is None:
        _get_current = lib.unchecked("aclrtGetCurrentContext")
    out = c_void_p()
    rc = _get_current(out)  # (the out-parameter: the cell itself)
    if not rc:
        return out.value or 0
    if rc == _codes.ACL_ERROR_RT_CONTEXT_NULL:
        recent_error_message()  # (read on this thread: no context is not an error here)
        return 0
    raise failure(rc, "aclrtGetCurrentContext")


def _set_current(ctx: int) -> None:
    lib.aclrtSetCurrentContext(ctx)


def _restore(ctx: int) -> None:
    """Make *ctx* current while another exception (an interrupt) is on its way; a failure is not reported (the
    exception on its way is; a refusal's message was read when it was raised)."""
    with contextlib.suppress(Exception):
        _set_current(ctx)


class _Guard:
    """The device guard of :meth:`Device.active` (one object per use, so that guards nest)."""

    __slots__ = ("_device", "_outer", "_prev")

    def __init__(self, device: Device) -> None:
        self._device = device
        self._outer: Any = None  # None: an enclosing guard of this thread made the same context current

    def __enter__(self) -> Device:
        device = self._device
        ctx = device.context
        try:
            outer = _tls.ctx
        except AttributeError:
            outer = 0
        if outer == ctx and ctx:
            return device  # nested in a guard of the same context: it is current, and stays so
        if _forked:
            _check_fork()
        prev = current_context()
        if prev != ctx:
            device._check_open()
            _tls.ctx = 0  # unknown while it switches: a finalizer running meanwhile reads the runtime
            try:
                _set_current(ctx)
            except BaseException:
                if prev:  # (an interrupt may come after the switch: the caller's context is made current again)
                    _restore(prev)
                _tls.ctx = outer
                raise
        self._outer = outer
        self._prev = prev
        _tls.ctx = ctx
        return device

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        outer = self._outer
        if outer is None:
            return
        prev = self._prev
        if not prev or prev == self._device.context:
            # (no previous context: none to restore, aclrtSetCurrentContext refuses NULL; this one stays current)
            _tls.ctx = outer if prev else 0
            return
        _tls.ctx = 0  # unknown until the previous context is current again
        try:
            _set_current(prev)
        except AclError:
            if exc_type is None:
                raise
            return
        except BaseException:  # an interrupt, before or after the switch: try once more, then let it go on
            _restore(prev)
            raise
        _tls.ctx = outer


def device_count() -> int:
    """Number of devices.  Wraps: aclrtGetDeviceCount."""
    ensure_initialized()
    n = c_uint32()
    lib.aclrtGetDeviceCount(byref(n))
    return int(n.value)


def soc_name() -> str:
    """The SoC name (``"CANN-Simulator"`` on the simulator)."""
    ensure_initialized()
    raw = lib.aclrtGetSocName()
    return raw.decode("utf-8", "replace") if raw else ""


def cann_version() -> str | None:
    """The installed CANN version string, or None: ``aclsysGetVersionStr`` (packages ``cann``, ``toolkit``,
    ``runtime``), then ``aclsysGetCANNVersion``, each probed."""
    ensure_initialized()
    if lib.has("aclsysGetVersionStr"):
        for pkg in (b"cann", b"toolkit", b"runtime"):
            buf = ctypes.create_string_buffer(128)
            try:
                lib.aclsysGetVersionStr(pkg, buf)
            except AclError:
                continue
            if buf.value:
                return buf.value.decode("utf-8", "replace")
    if lib.has("aclsysGetCANNVersion"):
        buf = ctypes.create_string_buffer(512)  # aclCANNPackageVersion: version[128] first
        try:
            lib.aclsysGetCANNVersion(0, buf)  # ACL_PKG_NAME_CANN = 0
        except AclError:
            return None
        return buf.value.decode("utf-8", "replace") or None
    return None


def acl_version() -> tuple[int, int, int] | None:
    """The ACL API version ``(major, minor, patch)``, or None.  Wraps: aclrtGetVersion (probed)."""
    ensure_initialized()
    if not lib.has("aclrtGetVersion"):
        return None
    parts = [c_int32(), c_int32(), c_int32()]
    lib.aclrtGetVersion(*(byref(p) for p in parts))
    return (parts[0].value, parts[1].value, parts[2].value)


def _reset_device(cell: c_void_p, device_id: int) -> None:
    # as release_cell, but the C call takes the id; no Python function runs between the take and the call
    # (CPython checks for a signal at each function's entry: an interrupt there would lose the reference).
    # The default context stays (and stays current) while others hold it.
    reset = lib.unchecked("aclrtResetDevice")
    if not cell.value:
        return
    called = False
    try:
        cell.value = None
        called = True
        rc = reset(device_id)
    except BaseException:
        if not called:  # (an interrupt before the call: still set, still owned)
            cell.value = 1
        raise
    if rc:
        cell.value = 1
    raise_for_status(rc, "aclrtResetDevice")


class Device(Resource):
    """Device *device_id* (``0 <= device_id < device_count()``, ``aclrtSetDevice``) and its context; ``close()``
    resets it (``aclrtResetDevice``).  Both leave the thread's current context, when one was, as they found it."""

    _what = "device"

    def __init__(self, device_id: int = 0) -> None:
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise TypeError(f"device_id: expected an int, got {type(device_id).__name__}")
        if not -(2 ** 31) <= device_id < 2 ** 31:  # ctypes would silently truncate it to an int32
            raise AclError.from_status(107001, "aclrtSetDevice",  # ACL_ERROR_RT_INVALID_DEVICEID
                                       f"device id {device_id} does not fit in an int32")
        ensure_initialized()
        self.id = device_id
        prev = current_context()
        cell = self._arm(_reset_device, device_id)  # the cell holds 1 while the device is set
        try:
            # owned before the call, and no Python function runs from the store to the C call: an interrupt
            # finds the device set or not owned (one before the call gives the cell back, as in release_cell)
            set_device, called = lib.unchecked("aclrtSetDevice"), False
            try:
                cell.value = 1
                called = True
                rc = set_device(device_id)
            except BaseException:
                if not called:
                    cell.value = None
                raise
            if rc:
                cell.value = None
            raise_for_status(rc, "aclrtSetDevice")
            try:
                ctx = c_void_p()
                lib.aclrtGetCurrentContext(byref(ctx))
                self.context: int = int(ctx.value or 0)
            finally:
                if prev and prev != getattr(self, "context", 0):  # aclrtSetDevice made this device's context current
                    with contextlib.suppress(AclParamError):  # (refused: that context is gone, its device reset)
                        _set_current(prev)
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    def active(self) -> _Guard:
        """The device guard: ``with device.active():`` runs its body with this device's context current on the
        calling thread, then makes the previous one current again on every exit path (docs/design.md, Devices)."""
        return _Guard(self)

    def activate(self) -> None:
        """Make this device's context current on the calling thread and leave it so (for raw-function code)."""
        _check_fork()
        self._check_open()
        if current_context() != self.context:
            _set_current(self.context)

    def is_current(self) -> bool:
        """Whether this device's context is the thread's current one; False in a forked child (activate raises)."""
        try:
            return not _forked and current_context() == self.context
        except AclError:
            return False

    def synchronize(self) -> None:
        """Wait for all work on this device."""
        with self.active():
            lib.aclrtSynchronizeDevice()

    def mem_info(self, attr: MemAttr = MemAttr.HBM_MEM) -> tuple[int, int]:
        """``(free, total)`` bytes of device memory."""
        free, total = c_size_t(), c_size_t()
        with self.active():
            lib.aclrtGetMemInfo(int(attr), byref(free), byref(total))
        return int(free.value), int(total.value)

    def __repr__(self) -> str:
        backend = _loader.loaded()
        kind = backend.kind if backend else "?"
        return f"<Device {self.id} backend={kind} {'closed' if self.closed else 'open'}>"
