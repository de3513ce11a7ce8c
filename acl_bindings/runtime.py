"""Process init, devices and contexts.

* :func:`ensure_initialized` calls ``aclInit`` once per process; a 100002 (another component,
  torch_npu say, initialised first) is success and still holds one reference (cann-abi.md §8.2),
  released at exit with ``aclFinalizeReference`` where the runtime exports it, never with a plain
  ``aclFinalize`` that would tear the runtime down under every other user (see :func:`finalize`).
* :class:`Device` sets a device and remembers its context.  :meth:`Device.active` is the
  device guard: it makes the device's context current on the calling thread and, on every
  exit path, makes the thread's previous context current again (cann-abi.md §8.3: other
  libraries, torch_npu among them, rely on theirs staying current).

Streams and events are in :mod:`acl_bindings.streams`.

Wraps: aclInit, aclFinalize, aclFinalizeReference, aclrtSetDevice, aclrtResetDevice,
aclrtGetCurrentContext, aclrtSetCurrentContext, aclrtGetDeviceCount, aclrtGetSocName,
aclrtGetMemInfo, aclrtSynchronizeDevice, aclsysGetVersionStr, aclsysGetCANNVersion,
aclrtGetVersion.
"""

from __future__ import annotations

import atexit
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
_forked = [False]  # forked after this process initialised ACL (checked on the guard's fast path)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forked.__setitem__(0, _initialized))


def _check_fork() -> None:
    if STATE.pid is not None and os.getpid() != STATE.pid:
        raise ProcessForkedError(
            "this process was forked after the CANN runtime was initialised in its parent; ACL state does not "
            "survive fork(). Use the 'spawn' start method (multiprocessing.get_context('spawn')) or create "
            "sessions only in the child, before any use in the parent.")


def ensure_initialized() -> None:
    """Call ``aclInit(NULL)`` once per process (thread-safe).  Wraps: aclInit.

    Both 0 and 100002 (initialised already, by another component) hold one reference,
    released at exit (see the module docstring).  Where torch_npu is imported already, it
    initialises first (``torch_npu.npu.init()``), with its own config.  After :func:`finalize` it raises
    :class:`AclError` (100001): nothing made then could be released.
    """
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
    """Where torch_npu is imported already, let it initialise ACL first: it calls ``aclInit`` with its own
    config (acl.json) at its first device use, and a 100002 there would lose that config (cann-abi.md §9.4)."""
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
    """Release this process's ACL reference now; later releases of handles are skipped.

    ``aclFinalizeReference`` where the runtime exports it: the runtime is torn down only when
    no other user (torch_npu, say) still holds a reference.  Otherwise ``aclFinalize``, and
    only when this module's ``aclInit`` was the first (returned 0): it then tears the runtime
    down at once, whoever else uses it.  Normally not needed: the reference is released at
    exit.  Wraps: aclFinalizeReference, aclFinalize.
    """
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
    try:
        _release(at_exit=True)
    except (AclError, ClosedError):
        pass  # nothing useful can be done at interpreter exit; never print from here


_get_current: Any = None  # lib.unchecked("aclrtGetCurrentContext") (bound on first use)
_ctx_out = threading.local()  # .v: this thread's c_void_p for the result (passed itself: see Lib.unchecked)


def _bind_get_current() -> Any:
    global _get_current
    _get_current = lib.unchecked("aclrtGetCurrentContext")
    return _get_current


def current_context() -> int:
    """The calling thread's current context, read from the runtime; 0 when none is current.

    Raises :class:`AclError` for any other failure (100001 after finalisation, for example).
    Wraps: aclrtGetCurrentContext.
    """
    fn = _get_current or _bind_get_current()
    try:
        out = _ctx_out.v
    except AttributeError:
        out = _ctx_out.v = c_void_p()
    rc = fn(out)
    if not rc:
        return out.value or 0
    if rc == _codes.ACL_ERROR_RT_CONTEXT_NULL:
        recent_error_message()  # (read on this thread: no context is not an error here)
        return 0
    raise failure(rc, "aclrtGetCurrentContext")


def _set_current(ctx: int) -> None:
    lib.aclrtSetCurrentContext(ctx)


def _restore(ctx: int) -> None:
    """Make *ctx* current while another exception (an interrupt) is on its way; a failure here is not reported."""
    try:
        _set_current(ctx)
    except Exception:
        pass  # (the exception on its way is the one to report; a refusal's message was read when it was raised)


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
        if _forked[0]:
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
            # (with no previous context there is none to restore: aclrtSetCurrentContext refuses NULL,
            # RT src/acl/aclrt_impl/context.cpp; this device's context stays current)
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
    """The SoC name (``"CANN-Simulator"`` on the simulator).  Wraps: aclrtGetSocName."""
    ensure_initialized()
    raw = lib.aclrtGetSocName()
    return raw.decode("utf-8", "replace") if raw else ""


def cann_version() -> str | None:
    """The installed CANN version string, or None when no version query is exported.

    Probes ``aclsysGetVersionStr`` (packages ``cann``, ``toolkit``, ``runtime``), then
    ``aclsysGetCANNVersion``.  Never requires either.
    """
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
    # the default context stays (and stays current) while others hold it.  As release_cell, but the C call
    # takes the id, not the cell's 1; no Python function runs between the take and the call (CPython checks
    # for a signal at each function's entry: an interrupt there would lose the reference).
    reset = lib.unchecked("aclrtResetDevice")
    if not cell.value:
        return
    cell.value = None
    if rc := reset(device_id):
        cell.value = 1
    raise_for_status(rc, "aclrtResetDevice")


class Device(Resource):
    """A device (``aclrtSetDevice``) and its context.

    ``close()`` pairs the ``aclrtSetDevice`` with ``aclrtResetDevice``.  Creating and closing
    it leave the calling thread's current context as they found it (when one was current).

    Parameters
    ----------
    device_id:
        The device index, ``0 <= device_id < device_count()``.
    """

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
            # owned before the call: no Python function runs from the store to the C call (CPython delivers a
            # Ctrl-C at a function's entry or as a call returns), so an interrupt finds the device set or not owned
            set_device = lib.unchecked("aclrtSetDevice")
            cell.value = 1
            if rc := set_device(device_id):
                cell.value = None
            raise_for_status(rc, "aclrtSetDevice")
            try:
                ctx = c_void_p()
                lib.aclrtGetCurrentContext(byref(ctx))
                self.context: int = int(ctx.value or 0)
            finally:
                if prev and prev != getattr(self, "context", 0):
                    try:
                        _set_current(prev)  # aclrtSetDevice made this device's context current
                    except AclParamError:
                        pass  # the previous context is gone (its device was reset on another thread): none to restore
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    def active(self) -> _Guard:
        """The device guard: ``with device.active():`` runs its body with this device's context
        current on the calling thread, then makes the thread's previous context current again,
        on every exit path.

        The current context is read from the runtime (``aclrtGetCurrentContext``) on entry;
        the switch is skipped when it already is this one, and inside an enclosing guard of
        the same context nothing is called at all.  When no context was current, none can be
        made current again (``aclrtSetCurrentContext`` refuses NULL), so this one stays.
        Wraps: aclrtGetCurrentContext, aclrtSetCurrentContext.
        """
        return _Guard(self)

    def activate(self) -> None:
        """Make this device's context current on the calling thread, and leave it so (for code that calls
        the raw functions itself; this package uses :meth:`active`).  Wraps: aclrtSetCurrentContext."""
        _check_fork()
        self._check_open()
        if current_context() != self.context:
            _set_current(self.context)

    def is_current(self) -> bool:
        """Whether this device's context is the calling thread's current one (read from the runtime);
        False in a forked child, so that :meth:`activate` then raises there."""
        try:
            return not _forked[0] and current_context() == self.context
        except AclError:
            return False

    def synchronize(self) -> None:
        """Wait for all work on this device.  Wraps: aclrtSynchronizeDevice."""
        with self.active():
            lib.aclrtSynchronizeDevice()

    def mem_info(self, attr: MemAttr = MemAttr.HBM_MEM) -> tuple[int, int]:
        """``(free, total)`` bytes of device memory.  Wraps: aclrtGetMemInfo."""
        free, total = c_size_t(), c_size_t()
        with self.active():
            lib.aclrtGetMemInfo(int(attr), byref(free), byref(total))
        return int(free.value), int(total.value)

    def __repr__(self) -> str:
        backend = _loader.loaded()
        kind = backend.kind if backend else "?"
        state = "closed" if self.closed else "open"
        return f"<Device {self.id} backend={kind} {state}>"
