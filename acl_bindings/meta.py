"""aclTensor and aclIntArray handles (nnopbase).  Wraps: aclCreateTensor, aclDestroyTensor, aclCreateIntArray,
aclDestroyIntArray."""

from __future__ import annotations

import math
from ctypes import c_int64, cast
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from ._lib import destroy, lib, null_handle_error
from ._resource import Resource
from ._types import aclIntArray_p, aclTensor_p
from .enums import _ITEM_SIZES, DataType, Format, acl_to_dtype, dtype_to_acl
from .memory import DeviceBuffer
from .values import int64_values

__all__ = ["Tensor", "IntArray", "TensorArg", "contiguous_strides", "view_extent", "overlap_problem"]


class TensorArg(NamedTuple):
    """How a tensor argument is described to the library, an aclTensor over memory the call does not own: *strides*
    and *offset* in elements, *address* the storage's start (the view starts *offset* elements in), *format* an
    ``aclFormat``, *storage_dims* the storage shape."""

    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    offset: int
    format: int
    storage_dims: tuple[int, ...]
    address: int

    @property
    def arg(self) -> TensorArg:
        """Itself (a device array's ``arg`` is its description)."""
        return self


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of *shape*."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def view_extent(shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> int:
    """Elements from the storage's start to one past the last element a view reaches (0 for an empty view): the
    smallest 1-D storage that covers it (nnopbase's ``Validate``, cann-abi.md §8.1)."""
    if any(int(n) == 0 for n in shape):
        return 0
    return int(offset) + sum(max(0, int(st) * (int(n) - 1)) for n, st in zip(shape, strides)) + 1


def _check_inside(shape: tuple[int, ...], strides: tuple[int, ...], offset: int, itemsize: int, nbytes: int) -> None:
    """Refuse a view outside its buffer: CANN never checks an output's extent (cann-abi.md §8.1)."""
    if any(n == 0 for n in shape):
        return
    low = offset + sum(min(0, st * (n - 1)) for n, st in zip(shape, strides))
    high = view_extent(shape, strides, offset)
    if low < 0 or high * itemsize > nbytes:
        raise ValueError(f"shape, strides, offset: the view {list(shape)} (strides {list(strides)}, offset {offset}) "
                         f"reaches elements {low} to {high - 1}, outside its buffer of {nbytes} bytes "
                         f"({nbytes // itemsize} elements): it must lie inside (CANN does not check an output's "
                         "extent: it would write past the buffer)")


_EXACT_OVERLAP_LIMIT = 1 << 22  # elements: above this, a layout the quick rule cannot clear is refused


def overlap_problem(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> Optional[str]:
    """Why two elements of an array with these byte *strides* share memory, or None (docs/design.md, "Handle
    objects")."""
    if any(n == 0 for n in shape):
        return None
    for k, (n, s) in enumerate(zip(shape, strides)):
        if n > 1 and s == 0:
            return f"stride 0 in dim {k} (size {n}) makes its elements overlap (strides {tuple(strides)})"
    extent = itemsize
    for s, n in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if s < extent:
            break
        extent += (n - 1) * s
    else:
        return None
    size = math.prod(shape)
    if size > _EXACT_OVERLAP_LIMIT:
        return (f"strides {tuple(strides)} with shape {list(shape)} may make elements overlap (a stride is smaller "
                "than the span of the dims below it)")
    offsets = np.zeros(1, np.int64)
    for n, s in zip(shape, strides):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).ravel()
    offsets.sort()
    if offsets.size > 1 and int(np.diff(offsets).min()) < itemsize:
        return f"strides {tuple(strides)} with shape {list(shape)} make elements overlap"
    return None


def _int64_array(values: Sequence[int], what: str) -> Any:
    ints = int64_values(values, what)
    return (c_int64 * len(ints))(*ints)


class _Handle(Resource):
    """An nnopbase handle that one C function makes and another destroys."""

    def _create(self, func: str, release: str, kind: Any, *args: Any) -> None:
        """Make the handle: ``func(*args)``, a *kind* pointer (NULL raises), destroyed by the C function *release*."""
        create = lib.unchecked(func)
        cell = self._arm(destroy, release)
        try:
            cell.value = create(*args)  # stored in the statement of the call: owned from the moment it returns
            if not cell.value:
                raise null_handle_error(func)
            self.handle = cast(cell, kind)
            self._as_parameter_ = self.handle
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise


class Tensor(_Handle):
    """An ``aclTensor`` of view *shape* and *dtype* (numpy's, or a :class:`DataType`) over device memory.

    *buffer* is the :class:`DeviceBuffer` holding the data (kept alive; the view must lie inside it, else
    ``ValueError``: CANN never checks an output's extent, cann-abi.md §8.1), or None with a raw, borrowed
    *address*.  *strides* (default contiguous) and *offset* are in elements, *format* an ``aclFormat`` (default ND);
    *storage_dims* defaults to 1-D, as torch_npu's: the buffer's element count, or the elements the view reaches
    (:func:`view_extent`).
    """

    _what = "tensor"

    def __init__(self, shape: Sequence[int], dtype: Any, buffer: DeviceBuffer | None = None, *,
                 strides: Sequence[int] | None = None, offset: int = 0, format: Format = Format.ND,
                 storage_dims: Sequence[int] | None = None, address: int | None = None) -> None:
        self.shape = tuple(map(int, shape))
        self.acl_dtype = DataType(dtype) if isinstance(dtype, DataType) else dtype_to_acl(dtype)
        self.strides = tuple(map(int, strides)) if strides is not None else contiguous_strides(self.shape)
        if len(self.strides) != len(self.shape):
            raise ValueError(f"strides: expected {len(self.shape)} values for shape {self.shape}, got {self.strides}")
        self.offset = int(offset)
        self.format = Format(format)
        if buffer is not None:
            buffer._check_open()
            _check_inside(self.shape, self.strides, self.offset, _ITEM_SIZES.get(self.acl_dtype, 1), buffer.nbytes)
            address = buffer.ptr
        if storage_dims is not None:
            self.storage_dims = tuple(map(int, storage_dims))
        elif buffer is not None:
            self.storage_dims = (buffer.nbytes // _ITEM_SIZES.get(self.acl_dtype, 1),)
        else:
            self.storage_dims = (view_extent(self.shape, self.strides, self.offset),)
        self.buffer = buffer
        self.address = int(address or 0)
        dims = _int64_array(self.shape, "shape")
        st = _int64_array(self.strides, "strides")
        storage = _int64_array(self.storage_dims, "storage_dims")
        self._create("aclCreateTensor", "aclDestroyTensor", aclTensor_p, dims, len(self.shape), int(self.acl_dtype),
                     st, self.offset, int(self.format), storage, len(self.storage_dims), self.address or None)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype."""
        return acl_to_dtype(self.acl_dtype)

    def __repr__(self) -> str:
        return (f"<Tensor shape={self.shape} dtype={self.acl_dtype.name} strides={self.strides} "
                f"offset={self.offset} format={self.format.name}{' closed' if self.closed else ''}>")


class IntArray(_Handle):
    """An ``aclIntArray`` holding a copy of *values*."""

    _what = "int array"

    def __init__(self, values: Sequence[int]) -> None:
        arr = _int64_array(list(values), "values")
        self.values = tuple(arr)
        self._create("aclCreateIntArray", "aclDestroyIntArray", aclIntArray_p, arr, len(self.values))

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"<IntArray {list(self.values)}{' closed' if self.closed else ''}>"
