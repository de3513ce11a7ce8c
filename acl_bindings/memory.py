"""Device buffers and pinned host buffers.  Wraps: aclrtMalloc, aclrtFree, aclrtMallocHost, aclrtFreeHost,
aclrtMemcpy[Async], aclrtMemset[Async]."""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from ._lib import lib
from ._resource import in_use
from .enums import MemcpyKind, MemMallocPolicy, as_dtype
from .runtime import Device
from .streams import Stream, _OnDevice
from .values import index_arg, int32_arg

__all__ = ["DeviceBuffer", "HostBuffer", "host_span", "host_bytes"]

_SIZE_LIMIT = 1 << 64  # ctypes would silently truncate a larger size_t


def host_span(array: np.ndarray) -> tuple[int, int]:
    """``(address, nbytes)`` of the smallest byte range holding every element of *array* (gaps of a strided view
    included); ValueError for negative strides."""
    if array.size == 0:
        return int(array.ctypes.data), 0
    if any(s < 0 for s in array.strides):
        raise ValueError(f"array: negative strides {array.strides} are not supported; "
                         "pass np.ascontiguousarray(array) or a view with positive strides")
    extent = sum((n - 1) * s for n, s in zip(array.shape, array.strides)) + array.itemsize
    return int(array.ctypes.data), int(extent)


def host_bytes(address: int, nbytes: int) -> np.ndarray:
    """The *nbytes* bytes of host memory at *address* as a uint8 array (a view: no copy; the caller keeps the
    memory alive while it is used)."""
    raw = (ctypes.c_char * nbytes).from_address(address)
    return np.frombuffer(memoryview(raw), np.uint8)


def _check_nbytes(nbytes: object) -> None:
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not 0 < nbytes < _SIZE_LIMIT:
        raise ValueError(f"nbytes: expected a positive int below 2**64 (a size_t), got {nbytes!r}")


class DeviceBuffer(_OnDevice):
    """*nbytes* (> 0) of device memory on *device* (kept alive), allocated with the ``aclrtMemMallocPolicy``
    *policy* (default ``HUGE_FIRST``, as the official sample)."""

    _what = "device buffer"
    _funcs = ("aclrtMalloc", "aclrtFree")
    _attr = "ptr"
    _passed_as_itself = True
    ptr: int

    def __init__(self, device: Device, nbytes: int, policy: MemMallocPolicy = MemMallocPolicy.HUGE_FIRST) -> None:
        _check_nbytes(nbytes)
        self.nbytes = int(nbytes)
        # collected without close(): wait for queued work that may still use it, then free
        self._make(device, self.nbytes, int(policy), before=device.synchronize)

    def _range(self, offset: object, nbytes: object, what: str) -> tuple[int, int]:
        """``(offset, nbytes)`` as ints, checked to lie inside this buffer."""
        self._check_open()
        offset, nbytes = index_arg(f"{what} offset", offset), index_arg(f"{what} nbytes", nbytes)
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"{what}: range [{offset}, {offset + nbytes}) is outside this "
                             f"{self.nbytes}-byte buffer")
        return offset, nbytes

    @in_use
    def upload(self, array: np.ndarray, offset: int = 0, stream: Stream | None = None) -> None:
        """Copy *array*'s bytes (its :func:`host_span`) to ``ptr + offset``; with *stream* the copy is queued
        (``aclrtMemcpyAsync``), and *array* must stay alive and unchanged until the stream is synchronised."""
        addr, n = host_span(np.asarray(array))
        offset, n = self._range(offset, n, "upload")
        if n == 0:
            return
        with self.device.active():
            if stream is None:
                lib.aclrtMemcpy(self.ptr + offset, self.nbytes - offset, addr, n, MemcpyKind.HOST_TO_DEVICE)
            else:
                lib.aclrtMemcpyAsync(self.ptr + offset, self.nbytes - offset, addr, n, MemcpyKind.HOST_TO_DEVICE,
                                     stream)

    @in_use
    def download(self, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Copy bytes at ``ptr + offset`` into *out*'s :func:`host_span` (synchronous) and return *out*; work queued on
        streams is not waited for: synchronise the stream first."""
        if not out.flags.writeable:
            raise ValueError("out: the array is read-only")
        addr, n = host_span(out)
        offset, n = self._range(offset, n, "download")
        if n:
            with self.device.active():
                lib.aclrtMemcpy(addr, n, self.ptr + offset, n, MemcpyKind.DEVICE_TO_HOST)
        return out

    @in_use
    def copy_from(self, src: DeviceBuffer, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """Device-to-device copy of *nbytes* (default: all of *src*) into this buffer."""
        _, n = src._range(0, src.nbytes if nbytes is None else nbytes, "copy_from source")
        self._range(0, n, "copy_from destination")
        with self.device.active():
            if stream is None:
                lib.aclrtMemcpy(self.ptr, self.nbytes, src.ptr, n, MemcpyKind.DEVICE_TO_DEVICE)
            else:
                lib.aclrtMemcpyAsync(self.ptr, self.nbytes, src.ptr, n, MemcpyKind.DEVICE_TO_DEVICE, stream)

    @in_use
    def memset(self, value: int = 0, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """Set *nbytes* (default: all) bytes to *value* (an ``int32_t`` in the C API)."""
        v = int32_arg("memset value", value)
        _, n = self._range(0, self.nbytes if nbytes is None else nbytes, "memset")
        with self.device.active():
            if stream is None:
                lib.aclrtMemset(self.ptr, self.nbytes, v, n)
            else:
                lib.aclrtMemsetAsync(self.ptr, self.nbytes, v, n, stream)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.ptr:#x}"
        return f"<DeviceBuffer {self.nbytes} bytes {state} on device {self.device.id}>"


class HostBuffer(_OnDevice):
    """*nbytes* of pinned host memory; :meth:`array` views it as numpy (a view keeps it alive, and ``close()``
    raises :class:`BufferError` while views exist)."""

    _what = "host buffer"
    _funcs = ("aclrtMallocHost", "aclrtFreeHost")
    _attr = "ptr"
    ptr: int

    def __init__(self, device: Device, nbytes: int) -> None:
        _check_nbytes(nbytes)
        self.nbytes = int(nbytes)
        self._views: list[weakref.ref] = []  # the ctypes arrays the numpy views are made from
        self._make(device, self.nbytes, before=device.synchronize)

    @in_use
    def array(self, dtype: Any = np.uint8, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A numpy view of the buffer (no copy); it keeps this buffer alive."""
        dt = as_dtype(dtype)
        raw = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        raw._owner = self  # type: ignore[attr-defined]  # every view's base chain ends here
        self._views = [ref for ref in self._views if ref() is not None] + [weakref.ref(raw)]
        flat = np.frombuffer(memoryview(raw), dtype=dt, count=self.nbytes // dt.itemsize)
        return flat if shape is None else flat[: int(np.prod(shape))].reshape(shape)

    def close(self) -> None:
        """Free the memory now; :class:`BufferError` while numpy views of it exist (delete them first)."""
        live = sum(1 for ref in getattr(self, "_views", ()) if ref() is not None)
        if live:
            raise BufferError(f"host buffer: {live} numpy view(s) of it still exist; using one after close() would "
                              "read freed memory, so delete them before close()")
        super().close()
