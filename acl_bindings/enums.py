"""Enumerations of the CANN ABI (values from cann-abi.md §3)."""

from __future__ import annotations

import functools
from enum import IntEnum

import numpy as np

__all__ = ["enum_name", "DataType", "Format", "MemcpyKind", "MemMallocPolicy", "MemAttr", "bfloat16",
           "is_bfloat16", "as_dtype", "dtype_to_acl", "acl_to_dtype", "dtype_name"]


class DataType(IntEnum):
    """``aclDataType`` (acl_base_rt.h)."""

    DT_UNDEFINED = -1
    FLOAT = 0
    FLOAT16 = 1
    INT8 = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 6
    UINT16 = 7
    UINT32 = 8
    INT64 = 9
    UINT64 = 10
    DOUBLE = 11
    BOOL = 12
    STRING = 13
    COMPLEX64 = 16
    COMPLEX128 = 17
    BF16 = 27


class Format(IntEnum):
    """``aclFormat`` (acl_base_rt.h); only the values this project uses or reports."""

    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    NDHWC = 27
    NCDHW = 30
    NCL = 47


class MemcpyKind(IntEnum):
    """``aclrtMemcpyKind`` (acl_rt.h)."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4


class MemMallocPolicy(IntEnum):
    """``aclrtMemMallocPolicy`` (acl_rt.h)."""

    HUGE_FIRST = 0
    HUGE_ONLY = 1
    NORMAL_ONLY = 2


class MemAttr(IntEnum):
    """``aclrtMemAttr`` for ``aclrtGetMemInfo`` (acl_rt.h)."""

    DDR_MEM = 0
    HBM_MEM = 1


def enum_name(enum: type[IntEnum], value: int) -> str:
    """The member name of *value* in *enum*, or the number itself when it names no member."""
    try:
        return enum(value).name
    except ValueError:
        return str(value)


@functools.cache
def bfloat16() -> np.dtype:
    """numpy's bfloat16 (from ml_dtypes), the dtype of ``aclDataType`` BF16.  ml_dtypes is imported on first use:
    it takes most of a second to import, which every command and child process would pay otherwise."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether the numpy *dtype* is ml_dtypes' bfloat16, importing nothing: such a dtype exists only once its
    library was imported (a test of its kind, then of numpy's Python-level name)."""
    return dtype.kind == "V" and dtype.name == "bfloat16"


def as_dtype(dtype: np.dtype | type | str) -> np.dtype:
    """``np.dtype(dtype)``, where the name ``"bfloat16"`` is ml_dtypes' (imported then)."""
    return bfloat16() if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype)


#: The numpy dtype of each ``aclDataType`` that numpy has (BF16's is :func:`bfloat16`).
_NUMPY_DTYPES = {acl: np.dtype(dt) for acl, dt in (
    (DataType.FLOAT, np.float32), (DataType.FLOAT16, np.float16), (DataType.INT8, np.int8),
    (DataType.INT32, np.int32), (DataType.UINT8, np.uint8), (DataType.INT16, np.int16), (DataType.UINT16, np.uint16),
    (DataType.UINT32, np.uint32), (DataType.INT64, np.int64), (DataType.UINT64, np.uint64),
    (DataType.DOUBLE, np.float64), (DataType.BOOL, np.bool_), (DataType.COMPLEX64, np.complex64),
    (DataType.COMPLEX128, np.complex128))}
#: numpy's name and item size of each of those, and of BF16.
_NAMES = {**{acl: dt.name for acl, dt in _NUMPY_DTYPES.items()}, DataType.BF16: "bfloat16"}
_ITEM_SIZES = {**{acl: dt.itemsize for acl, dt in _NUMPY_DTYPES.items()}, DataType.BF16: 2}
#: The ``aclDataType`` values :func:`dtype_to_acl` and :func:`acl_to_dtype` map.
_SUPPORTED = (DataType.FLOAT, DataType.FLOAT16, DataType.INT64, DataType.BF16)


def dtype_to_acl(dtype: np.dtype | type | str) -> DataType:
    """Map a numpy dtype (float32, float16, bfloat16 from ml_dtypes, int64) to its ``aclDataType``; TypeError
    for any other, naming it."""
    if isinstance(dtype, np.dtype):  # (numpy's dtype.name is a Python-level property: the answers are kept)
        known = _ACL_OF.get(dtype)
        if known is not None:
            return known
    dt = as_dtype(dtype)
    if is_bfloat16(dt) and dt == bfloat16():
        _ACL_OF[dt] = DataType.BF16
        return DataType.BF16
    for acl in _SUPPORTED:
        if acl != DataType.BF16 and dt == _NUMPY_DTYPES[acl]:
            _ACL_OF[dt] = acl
            return acl
    raise TypeError(f"dtype: expected float32, float16, bfloat16 or int64, got {dt}")


#: the dtypes :func:`dtype_to_acl` mapped, and their answers
_ACL_OF: dict[np.dtype, DataType] = {}


def acl_to_dtype(acl: int) -> np.dtype:
    """Inverse of :func:`dtype_to_acl`."""
    if acl == DataType.BF16:
        return bfloat16()
    if acl in _SUPPORTED:
        return _NUMPY_DTYPES[DataType(acl)]
    raise TypeError(f"aclDataType {acl} has no numpy equivalent here")


def dtype_name(acl: int) -> str:
    """The one spelling of an ``aclDataType`` in messages and reports: numpy's name (``float32``,
    ``bfloat16``, ``int8``, ...), else ``aclDataType <n> (<enum name>)``."""
    try:
        return _NAMES[DataType(acl)]
    except (ValueError, KeyError):
        return f"aclDataType {acl} ({enum_name(DataType, acl)})"
