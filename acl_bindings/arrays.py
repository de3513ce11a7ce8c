"""Device arrays (a session's device memory, the view in it and its aclTensor), and the host-side rules of uploads
and downloads: positive element strides, the view within its buffer, a writable ``out`` of disjoint elements."""

from __future__ import annotations

import math
from typing import Any, Optional, TypeVar

import numpy as np

from ._resource import releases_allowed, run_all
from .allocator import PooledBuffer
from .enums import Format
from .errors import AclnnParamError, ClosedError
from .memory import DeviceBuffer
from .meta import Tensor, TensorArg, contiguous_strides, overlap_problem
from .values import index_arg

__all__ = ["DeviceArray", "check_extent", "positive_strides", "offset_in_base"]

_A = TypeVar("_A", bound="DeviceArray")


def positive_strides(array: np.ndarray, param: str, func: str) -> tuple[int, ...]:
    """*array*'s strides in elements; 161002 naming *param* when one is negative or not a multiple of the item size."""
    if any(s < 0 for s in array.strides):
        raise AclnnParamError(161002, func, f"{param}: negative strides {array.strides} are not supported; "
                                            "pass np.ascontiguousarray(...)")
    if any(s % array.itemsize for s in array.strides):
        raise AclnnParamError(161002, func, f"{param}: strides {array.strides} are not multiples of the item size "
                                            f"{array.itemsize}")
    return tuple(s // array.itemsize for s in array.strides)


class DeviceArray:
    """An array in device memory of the *session* that made it: a :class:`~acl_bindings.DeviceBuffer` or a
    :class:`~acl_bindings.allocator.PooledBuffer`, with *shape* (physical, in the layout's order), *dtype*,
    *layout* (an ``aclFormat`` name, :meth:`layout_format`), element *strides* and *offset* in the buffer, and
    :attr:`tensor` (made when first read; the session's calls describe the memory themselves)."""

    def __init__(self, session: Any, buffer: DeviceBuffer | PooledBuffer, shape: tuple[int, ...], dtype: np.dtype,
                 layout: str, strides: tuple[int, ...], offset: int) -> None:
        self.session = session
        self.buffer = buffer
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.layout = layout
        self.strides = strides
        self.offset = offset
        check_extent(buffer, shape, self.dtype, strides, offset)
        self.acl_format = self.layout_format(layout)
        #: The storage the aclTensor declares: 1-D, the buffer's whole element count (cann-abi.md §8.1)
        self.storage_dims = (buffer.nbytes // self.dtype.itemsize,)
        #: How the operator's calls describe this array (:class:`acl_bindings.meta.TensorArg`)
        self.arg = TensorArg(shape, self.dtype, strides, offset, int(self.acl_format), self.storage_dims, buffer.ptr)
        #: What a call shape's key holds of it (``engine.plan_key``): the description but its address, made once
        self.key = self.arg[:-1]
        self._tensor: Optional[Tensor] = None

    @property
    def tensor(self) -> Tensor:
        """The :class:`~acl_bindings.Tensor` over this array (made once, on first use)."""
        tensor = self._tensor
        if tensor is None:
            self._check_open()
            # over the buffer's address: the array keeps the buffer (and closes the tensor first)
            tensor = self._tensor = Tensor(self.shape, self.dtype, strides=self.strides, offset=self.offset,
                                           format=self.acl_format, storage_dims=self.storage_dims,
                                           address=self.buffer.ptr)
        return tensor

    @property
    def closed(self) -> bool:
        """True once released."""
        return self.buffer.closed

    @staticmethod
    def layout_format(layout: str) -> Format:
        """The ``aclFormat`` of a layout name (``Format[layout]``; a subclass may narrow it); ValueError otherwise."""
        try:
            return Format[layout]
        except (KeyError, TypeError):
            raise ValueError(f"layout: expected an aclFormat name, got {layout!r}") from None

    def download(self, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Synchronise the session's stream and copy to host: a new C-contiguous array, or into *out* (same shape
        and dtype, any strides of disjoint elements; returned).  Racing a ``close()``, it completes first or
        raises :class:`~acl_bindings.ClosedError`."""
        with self.session._lock:
            self._check_open()
            if out is not None:
                _check_download_out(out, self.shape, self.dtype)
            self.session._sync()
            contiguous = self.offset == 0 and self.strides == contiguous_strides(self.shape)
            if out is None and contiguous:
                out = self.buffer.download(np.empty(self.shape, self.dtype))
            elif out is None:
                raw = np.empty(self.buffer.nbytes // self.dtype.itemsize, self.dtype)
                self.buffer.download(raw)
                out = np.array(np.lib.stride_tricks.as_strided(
                    raw[self.offset:], self.shape, tuple(s * self.dtype.itemsize for s in self.strides)))
            elif contiguous and out.flags.c_contiguous:
                self.buffer.download(out)
            else:
                out[...] = self.download()  # honour both layouts: one copy through a host array
        return out  # (after the with: docs/design.md, Ctrl-C)

    def close(self) -> None:
        """Release the aclTensor, then the device memory (after the stream finished with it), under the session's
        lock.  Every step is attempted (the first error is raised); a refused release is retried by close()."""
        with self.session._lock:
            tensor = self._tensor
            if self.buffer.closed and (tensor is None or tensor.closed):
                return
            run_all([*([] if tensor is None else [tensor.close]), self._sync_before_free, self.buffer.close])

    def _sync_before_free(self) -> None:
        # the stream clock orders the session's own calls; raw two-phase work on the tensor, or memory going back to
        # the library now, may still be read: wait for the stream (unless nothing is released)
        if not self.session.closed and not self.buffer.closed and (
                self._tensor is not None or not isinstance(self.buffer, PooledBuffer)) and releases_allowed():
            self.session._sync()

    def _check_open(self) -> None:
        tensor = self._tensor
        # (a released buffer's ptr is 0; a closed tensor with an open buffer: a close() that failed halfway)
        if not self.buffer.ptr or (tensor is not None and tensor.closed):
            raise ClosedError("this device array is closed")
        if self.session.closed:
            raise ClosedError("this device array's Session is closed")

    def __enter__(self: _A) -> _A:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<DeviceArray shape={self.shape} dtype={self.dtype} layout={self.layout} "
                f"strides={self.strides} offset={self.offset}{' closed' if self.closed else ''}>")


def check_extent(buffer: DeviceBuffer | PooledBuffer, shape: tuple[int, ...], dtype: np.dtype,
                  strides: tuple[int, ...], offset: int) -> None:
    """ValueError unless every element of the view (*shape*, element *strides*, element *offset*) lies in *buffer*."""
    if len(strides) != len(shape):
        raise ValueError(f"strides: expected {len(shape)} values (one per dim of shape {shape}), got {strides}")
    dims = [index_arg("shape", n) for n in shape]
    steps = [index_arg("strides", st) for st in strides]
    first = index_arg("offset", offset)
    if any(n < 0 for n in dims):
        raise ValueError(f"shape: dims must be >= 0, got {shape}")
    if any(st < 0 for st in steps):
        raise ValueError(f"strides: element strides must be >= 0, got {strides}")
    if first < 0:
        raise ValueError(f"offset: the element offset must be >= 0, got {offset}")
    count = first + 1 + sum((n - 1) * st for n, st in zip(dims, steps)) if math.prod(dims) else first
    if count * dtype.itemsize > buffer.nbytes:
        raise ValueError(f"shape {shape}, strides {strides}, offset {offset}: the view spans {count} {dtype} elements "
                         f"({count * dtype.itemsize} bytes), more than this {buffer.nbytes}-byte buffer holds")


def _check_download_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"out: expected shape {shape} dtype {dtype}, got {out.shape} {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out: the array is read-only")
    problem = overlap_problem(out.shape, out.strides, out.itemsize)
    if problem is not None:
        raise ValueError(f"out: {problem}; every element needs its own memory")


def offset_in_base(array: np.ndarray, addr: int) -> int:
    """Byte offset of *array*'s first element from the start of the numpy array it views (0 if none)."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is array:
        return 0
    start = int(root.ctypes.data)
    return addr - start if 0 <= addr - start < root.nbytes else 0
