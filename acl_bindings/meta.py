"""aclTensor and aclIntArray handles (nnopbase).

A :class:`Tensor` describes device memory: view shape, dtype, element strides,
element offset, format and storage dims, over an address it does not own.  It
keeps the :class:`~acl_bindings.DeviceBuffer` it describes alive.

Wraps: aclCreateTensor, aclDestroyTensor, aclCreateIntArray, aclDestroyIntArray.
"""

from __future__ import annotations

from ctypes import c_int64, c_void_p, cast
from typing import Any, Sequence

import numpy as np

from ._lib import lib, null_handle_error, raise_for_status
from ._resource import ClosedParameter, Resource, release_cell
from ._types import aclIntArray_p, aclTensor_p
from .enums import DataType, Format, acl_to_dtype, dtype_to_acl
from .memory import DeviceBuffer

__all__ = ["Tensor", "IntArray", "contiguous_strides"]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of *shape*."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def _int64_array(values: Sequence[int], what: str) -> Any:
    try:
        ints = [int(v) for v in values]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: expected a sequence of ints, got {values!r}") from exc
    for v, orig in zip(ints, values):
        if isinstance(orig, bool) or (isinstance(orig, float) and orig != v):
            raise TypeError(f"{what}: expected ints, got {orig!r}")
        if not -(2 ** 63) <= v < 2 ** 63:
            raise ValueError(f"{what}: {v} does not fit in int64")
    return (c_int64 * len(ints))(*ints)


def _destroy_tensor(cell: c_void_p) -> None:
    raise_for_status(release_cell(cell, lib.unchecked("aclDestroyTensor")), "aclDestroyTensor")


class Tensor(Resource):
    """An ``aclTensor`` over device memory.

    Parameters
    ----------
    shape:
        View dims.
    dtype:
        numpy dtype (float32, float16, ml_dtypes.bfloat16, int64) or a :class:`DataType`.
    buffer:
        The :class:`DeviceBuffer` holding the data (kept alive), or None with *address*.
    strides:
        Element strides of the view (default: contiguous).
    offset:
        Element offset of the view's first element from the address.
    format:
        The ``aclFormat`` (default ND).
    storage_dims:
        Storage shape (default: the view shape, as in the official sample).
    address:
        Raw device address, when no *buffer* is given (borrowed memory).
    """

    _what = "tensor"

    def __init__(self, shape: Sequence[int], dtype: Any, buffer: DeviceBuffer | None = None, *,
                 strides: Sequence[int] | None = None, offset: int = 0, format: Format = Format.ND,
                 storage_dims: Sequence[int] | None = None, address: int | None = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.acl_dtype = DataType(dtype) if isinstance(dtype, DataType) else dtype_to_acl(dtype)
        self.strides = tuple(int(s) for s in strides) if strides is not None else contiguous_strides(self.shape)
        if len(self.strides) != len(self.shape):
            raise ValueError(f"strides: expected {len(self.shape)} values for shape {self.shape}, got {self.strides}")
        self.offset = int(offset)
        self.format = Format(format)
        self.storage_dims = tuple(int(s) for s in storage_dims) if storage_dims is not None else self.shape
        if buffer is not None:
            buffer._check_open()
            address = buffer.ptr
        self.buffer = buffer
        self.address = int(address or 0)
        dims = _int64_array(self.shape, "shape")
        st = _int64_array(self.strides, "strides")
        storage = _int64_array(self.storage_dims, "storage_dims")
        create = lib.unchecked("aclCreateTensor")
        cell = self._arm(_destroy_tensor)
        try:
            # stored in the statement of the call: owned from the moment it returns
            cell.value = create(dims, len(self.shape), int(self.acl_dtype), st, self.offset, int(self.format), storage,
                                len(self.storage_dims), self.address or None)
            if not cell.value:
                raise null_handle_error("aclCreateTensor")
            self.handle = cast(cell, aclTensor_p)
            self._as_parameter_ = self.handle
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    _as_parameter_ = ClosedParameter()

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype."""
        return acl_to_dtype(self.acl_dtype)

    def __repr__(self) -> str:
        return (f"<Tensor shape={self.shape} dtype={self.acl_dtype.name} strides={self.strides} "
                f"offset={self.offset} format={self.format.name}{' closed' if self.closed else ''}>")


def _destroy_int_array(cell: c_void_p) -> None:
    raise_for_status(release_cell(cell, lib.unchecked("aclDestroyIntArray")), "aclDestroyIntArray")


class IntArray(Resource):
    """An ``aclIntArray`` holding a copy of *values*."""

    _what = "int array"

    def __init__(self, values: Sequence[int]) -> None:
        arr = _int64_array(list(values), "values")
        self.values = tuple(arr)
        create = lib.unchecked("aclCreateIntArray")
        cell = self._arm(_destroy_int_array)
        try:
            cell.value = create(arr, len(self.values))  # stored in the statement of the call: owned once it returns
            if not cell.value:
                raise null_handle_error("aclCreateIntArray")
            self.handle = cast(cell, aclIntArray_p)
            self._as_parameter_ = self.handle
        except BaseException:
            self._undo()  # made but not finished: released now, not left to the garbage collector
            raise

    _as_parameter_ = ClosedParameter()

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"<IntArray {list(self.values)}{' closed' if self.closed else ''}>"
