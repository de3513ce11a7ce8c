"""Enumerations of the CANN ABI (values from cann-abi.md §3)."""

from __future__ import annotations

from enum import IntEnum

import ml_dtypes
import numpy as np

__all__ = ["enum_name", "DataType", "Format", "MemcpyKind", "MemMallocPolicy", "MemAttr", "BFLOAT16",
           "dtype_to_acl", "acl_to_dtype", "dtype_name"]


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


#: numpy's bfloat16 (from ml_dtypes), the dtype of ``aclDataType`` BF16
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def dtype_to_acl(dtype: np.dtype | type | str) -> DataType:
    """Map a numpy dtype (float32, float16, bfloat16 from ml_dtypes, int64) to its ``aclDataType``; TypeError
    for any other, naming it."""
    dt = np.dtype(dtype)
    if dt == np.float32:
        return DataType.FLOAT
    if dt == np.float16:
        return DataType.FLOAT16
    if dt == np.int64:
        return DataType.INT64
    if dt == BFLOAT16:
        return DataType.BF16
    raise TypeError(f"dtype: expected float32, float16, bfloat16 or int64, got {dt}")


def acl_to_dtype(acl: int) -> np.dtype:
    """Inverse of :func:`dtype_to_acl`."""
    table: dict[int, np.dtype] = {DataType.FLOAT: np.dtype(np.float32), DataType.FLOAT16: np.dtype(np.float16),
             DataType.INT64: np.dtype(np.int64)}
    if acl in table:
        return table[DataType(acl)]
    if acl == DataType.BF16:
        return BFLOAT16
    raise TypeError(f"aclDataType {acl} has no numpy equivalent here")


#: numpy's spelling of each ``aclDataType`` that has a numpy (or ml_dtypes) counterpart.
_DTYPE_NAMES = {DataType.FLOAT: "float32", DataType.FLOAT16: "float16", DataType.INT8: "int8",
                DataType.INT32: "int32", DataType.UINT8: "uint8", DataType.INT16: "int16", DataType.UINT16: "uint16",
                DataType.UINT32: "uint32", DataType.INT64: "int64", DataType.UINT64: "uint64",
                DataType.DOUBLE: "float64", DataType.BOOL: "bool", DataType.COMPLEX64: "complex64",
                DataType.COMPLEX128: "complex128", DataType.BF16: "bfloat16"}


def dtype_name(acl: int) -> str:
    """The one spelling of an ``aclDataType`` in messages and reports: numpy's name (``float32``,
    ``bfloat16``, ``int8``, ...), else ``aclDataType <n> (<enum name>)``."""
    try:
        return _DTYPE_NAMES[DataType(acl)]
    except (ValueError, KeyError):
        return f"aclDataType {acl} ({enum_name(DataType, acl)})"
