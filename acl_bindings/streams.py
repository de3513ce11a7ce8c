"""Streams and events on a device; each owns its handle and keeps its device alive."""

from __future__ import annotations

from ctypes import byref, c_float, c_int, c_void_p
from typing import Any, Callable

from ._lib import destroy, lib
from ._resource import Resource, in_use
from .runtime import Device
from .values import int32_arg

__all__ = ["Stream", "Event"]

_STREAM_COMPLETE = 0  # ACL_STREAM_STATUS_COMPLETE (acl_rt.h aclrtStreamStatus)
_EVENT_COMPLETE = 1  # ACL_EVENT_RECORDED_STATUS_COMPLETE (acl_rt.h aclrtEventRecordedStatus)


def _status(obj: Any, func: str) -> int:
    """``func(handle, &status)`` on *obj*'s device: the status enum's value."""
    status = c_int()
    with obj.device.active():
        getattr(lib, func)(obj.handle, byref(status))
    return status.value


def _destroy(cell: c_void_p, device: Device, func: str) -> None:
    with device.active():
        destroy(cell, func)


class _OnDevice(Resource):
    """A handle made on *device* by the C function ``_funcs[0]``, released by ``_funcs[1]``; keeps the device alive."""

    _funcs = ("", "")
    _attr = "handle"  # the int attribute that holds the handle
    _passed_as_itself = False  # whether the object is passed to C as its handle (``_as_parameter_``)

    def __init__(self, device: Device) -> None:
        self._make(device)

    def _make(self, device: Device, *args: Any, before: Callable[[], Any] | None = None) -> None:
        """``_funcs[0](&handle, *args)`` on *device*; *before* runs before a release by the finalizer."""
        self.device = device
        cell = self._arm(_destroy, device, self._funcs[1], before=before)
        try:
            with device.active():
                getattr(lib, self._funcs[0])(byref(cell), *args)  # owned from the moment it returns
            setattr(self, self._attr, int(cell.value or 0))
            if self._passed_as_itself:
                self._as_parameter_ = c_void_p(cell.value)
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    def close(self) -> None:
        """As :meth:`Resource.close <acl_bindings._resource.Resource.close>`; the handle attribute reads 0 once
        released (a call refuses a buffer at 0: acl_bindings.engine.Call.run)."""
        super().close()
        if self.closed:
            setattr(self, self._attr, 0)


class Stream(_OnDevice):
    """A stream on *device*.  Keeps the device alive.  Wraps: aclrtCreateStream, aclrtDestroyStream."""

    _what = "stream"
    _funcs = ("aclrtCreateStream", "aclrtDestroyStream")
    _passed_as_itself = True
    handle: int

    @in_use
    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Wait for the stream's work; with *timeout_ms* (-1: no limit, 0: poll), fail with 507046 past it."""
        if timeout_ms is None:
            with self.device.active():
                lib.aclrtSynchronizeStream(self.handle)
        else:
            ms = int32_arg("timeout_ms", timeout_ms, -1, "-1 (no limit), 0 (poll) or a positive int32 of milliseconds")
            with self.device.active():
                lib.aclrtSynchronizeStreamWithTimeout(self.handle, ms)

    @in_use
    def wait(self, event: Event) -> None:
        """Make the work queued on this stream from now on start after *event*'s latest record has completed
        (aclrtStreamWaitEvent).  The host does not wait; the event may be recorded on another stream."""
        event._check_open()
        with self.device.active():
            lib.aclrtStreamWaitEvent(self.handle, event.handle)

    @in_use
    def query(self) -> bool:
        """Whether all work queued on the stream has completed (aclrtStreamQuery); does not wait."""
        return _status(self, "aclrtStreamQuery") == _STREAM_COMPLETE

    def __repr__(self) -> str:
        return f"<Stream {self.handle:#x} on device {self.device.id}{' closed' if self.closed else ''}>"


class Event(_OnDevice):
    """An event (``aclrtCreateEvent``): a point in a stream's queue, for timing and for ordering another stream
    after it (:meth:`Stream.wait`).  Keeps the device alive."""

    _what = "event"
    _funcs = ("aclrtCreateEvent", "aclrtDestroyEvent")
    handle: int

    @in_use
    def record(self, stream: Stream) -> None:
        """Record the event on *stream*."""
        with self.device.active():
            lib.aclrtRecordEvent(self.handle, stream)

    @in_use
    def query(self) -> bool:
        """Whether the event's latest record has completed (aclrtQueryEventStatus; False if never recorded)."""
        return _status(self, "aclrtQueryEventStatus") == _EVENT_COMPLETE

    @in_use
    def synchronize(self) -> None:
        """Wait until the event has completed."""
        with self.device.active():
            lib.aclrtSynchronizeEvent(self.handle)

    @in_use
    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from *start* to this event (both recorded on one stream and completed)."""
        start._check_open()
        ms = c_float()
        with self.device.active():
            lib.aclrtEventElapsedTime(byref(ms), start.handle, self.handle)
        return float(ms.value)
