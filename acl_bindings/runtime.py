"""Process init, devices, streams and events.

* :func:`ensure_initialized` calls ``aclInit`` once per process.  A 100002 because
  another component (torch_npu, say) initialised first counts as success; then that
  component owns finalisation.  When this module initialised, ``aclFinalize`` runs
  once, at exit.
* :class:`Device` sets a device on the creating thread and remembers its context;
  :meth:`Device.activate` makes that context current on whatever thread calls it.
* :class:`Stream` and :class:`Event` own their handles.

Wraps: aclInit, aclFinalize, aclrtSetDevice, aclrtResetDevice, aclrtGetCurrentContext,
aclrtSetCurrentContext, aclrtGetDeviceCount, aclrtGetSocName, aclrtGetMemInfo,
aclrtCreateStream, aclrtDestroyStream, aclrtSynchronizeStream(WithTimeout),
aclrtSynchronizeDevice, aclrtCreateEvent, aclrtRecordEvent, aclrtSynchronizeEvent,
aclrtEventElapsedTime, aclrtDestroyEvent, aclsysGetVersionStr, aclsysGetCANNVersion,
aclrtGetVersion.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from ctypes import byref, c_float, c_int32, c_size_t, c_uint32, c_void_p

from . import _codes
from ._lib import lib, raise_for_status
from ._resource import STATE, ClosedParameter, Resource, release_cell
from ._types import int32_arg
from .enums import MemAttr
from .errors import AclError, ProcessForkedError

__all__ = [
    "ensure_initialized", "finalize", "device_count", "soc_name", "cann_version", "acl_version",
    "Device", "Stream", "Event",
]

_init_lock = threading.Lock()
_initialized = False
_owner = False
_tls = threading.local()
_generation = [0]  # bumped whenever a device is reset, so thread caches of contexts expire
_forked = [False]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forked.__setitem__(0, True))


def _check_fork() -> None:
    if os.getpid() != STATE.pid:
        raise ProcessForkedError(
            "this process was forked after the CANN runtime was initialised in its parent; ACL state does not "
            "survive fork(). Use the 'spawn' start method (multiprocessing.get_context('spawn')) or create "
            "sessions only in the child, before any use in the parent.")


def ensure_initialized() -> None:
    """Call ``aclInit(NULL)`` once per process (thread-safe).  Wraps: aclInit."""
    global _initialized, _owner
    _check_fork()
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        try:
            lib.aclInit(None)
            _owner = True
        except AclError as exc:
            if exc.code != _codes.ACL_ERROR_REPEAT_INITIALIZE:
                raise
            _owner = False  # another component initialised first and owns aclFinalize
        _initialized = True
        if _owner:
            atexit.register(_finalize_at_exit)


def finalize() -> None:
    """Call ``aclFinalize`` now, if this module initialised ACL.  Later releases are skipped.

    Normally not needed: it runs once at exit.  Wraps: aclFinalize.
    """
    global _initialized
    with _init_lock:
        if not _initialized or STATE.finalized or os.getpid() != STATE.pid:
            return
        STATE.finalized = True
        if _owner:
            lib.aclFinalize()


def _finalize_at_exit() -> None:
    try:
        finalize()
    except AclError:
        pass  # nothing useful can be done at interpreter exit; never print from here


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
    _generation[0] += 1
    raise_for_status(release_cell(cell, _reset_of, device_id), "aclrtResetDevice")


def _reset_of(_set: int, device_id: int) -> int:
    return int(lib.unchecked("aclrtResetDevice")(device_id))


class Device(Resource):
    """A device set on the creating thread, with its context.

    ``close()`` pairs the ``aclrtSetDevice`` with ``aclrtResetDevice``.

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
        cell = self._arm(_reset_device, device_id)  # the cell holds 1 while the device is set
        try:
            cell.value = None if (rc := lib.unchecked("aclrtSetDevice")(device_id)) else 1
            raise_for_status(rc, "aclrtSetDevice")
            ctx = c_void_p()
            lib.aclrtGetCurrentContext(byref(ctx))
            self.context: int = int(ctx.value or 0)
            _tls.current = (_generation[0], self.context)
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    def activate(self) -> None:
        """Make this device's context current on the calling thread (cached per thread).

        Wraps: aclrtSetCurrentContext.
        """
        _check_fork()
        self._check_open()
        key = (_generation[0], self.context)
        if getattr(_tls, "current", None) != key:
            lib.aclrtSetCurrentContext(self.context)
            _tls.current = key

    def is_current(self) -> bool:
        """Whether this device's context is already current on the calling thread (cheap; no C call).

        False in a forked child, so that :meth:`activate` then raises there.
        """
        return not _forked[0] and getattr(_tls, "current", None) == (_generation[0], self.context)

    def synchronize(self) -> None:
        """Wait for all work on this device.  Wraps: aclrtSynchronizeDevice."""
        self.activate()
        lib.aclrtSynchronizeDevice()

    def mem_info(self, attr: MemAttr = MemAttr.HBM_MEM) -> tuple[int, int]:
        """``(free, total)`` bytes of device memory.  Wraps: aclrtGetMemInfo."""
        self.activate()
        free, total = c_size_t(), c_size_t()
        lib.aclrtGetMemInfo(int(attr), byref(free), byref(total))
        return int(free.value), int(total.value)

    def __repr__(self) -> str:
        from ._loader import loaded

        backend = loaded()
        kind = backend.kind if backend else "?"
        state = "closed" if self.closed else "open"
        return f"<Device {self.id} backend={kind} {state}>"


def _destroy_stream(cell: c_void_p, device: Device) -> None:
    device.activate()
    raise_for_status(release_cell(cell, lib.unchecked("aclrtDestroyStream")), "aclrtDestroyStream")


class Stream(Resource):
    """A stream on *device*.  Keeps the device alive.  Wraps: aclrtCreateStream, aclrtDestroyStream."""

    _what = "stream"

    def __init__(self, device: Device) -> None:
        device.activate()
        self.device = device
        cell = self._arm(_destroy_stream, device)
        try:
            lib.aclrtCreateStream(byref(cell))  # owned from the moment it returns
            self.handle: int = int(cell.value or 0)
            self._as_parameter_ = c_void_p(self.handle)
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    _as_parameter_ = ClosedParameter()

    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Wait for the stream's work; with *timeout_ms*, fail with 507046 past it.

        Wraps: aclrtSynchronizeStream, aclrtSynchronizeStreamWithTimeout.
        """
        self._check_open()
        self.device.activate()
        if timeout_ms is None:
            lib.aclrtSynchronizeStream(self.handle)
        else:
            ms = int32_arg("timeout_ms", timeout_ms, -1, "-1 (no limit), 0 (poll) or a positive int32 of milliseconds")
            lib.aclrtSynchronizeStreamWithTimeout(self.handle, ms)

    def __repr__(self) -> str:
        return f"<Stream {self.handle:#x} on device {self.device.id}{' closed' if self.closed else ''}>"


def _destroy_event(cell: c_void_p, device: Device) -> None:
    device.activate()
    raise_for_status(release_cell(cell, lib.unchecked("aclrtDestroyEvent")), "aclrtDestroyEvent")


class Event(Resource):
    """An event for timing.  Wraps: aclrtCreateEvent, aclrtRecordEvent, aclrtSynchronizeEvent,
    aclrtEventElapsedTime, aclrtDestroyEvent.
    """

    _what = "event"

    def __init__(self, device: Device) -> None:
        device.activate()
        self.device = device
        cell = self._arm(_destroy_event, device)
        try:
            lib.aclrtCreateEvent(byref(cell))  # owned from the moment it returns
            self.handle: int = int(cell.value or 0)
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    def record(self, stream: Stream) -> None:
        """Record the event on *stream*."""
        self._check_open()
        self.device.activate()
        lib.aclrtRecordEvent(self.handle, stream)

    def synchronize(self) -> None:
        """Wait until the event has completed."""
        self._check_open()
        self.device.activate()
        lib.aclrtSynchronizeEvent(self.handle)

    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from *start* to this event (both recorded on one stream and completed)."""
        self._check_open()
        start._check_open()
        self.device.activate()
        ms = c_float()
        lib.aclrtEventElapsedTime(byref(ms), start.handle, self.handle)
        return float(ms.value)
