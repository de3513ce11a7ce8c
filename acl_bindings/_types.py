"""C types of the CANN ABI as ctypes objects (cann-abi.md §2); each opaque nnopbase struct has its own pointer type,
so that ctypes refuses an ``aclIntArray*`` for an ``aclTensor*``."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_int32, c_void_p

aclError = c_int
aclnnStatus = c_int32
c_enum = c_int  # every C enum (aclDataType, aclFormat, aclrtMemcpyKind, ...)
aclrtStream = c_void_p
aclrtContext = c_void_p
aclrtEvent = c_void_p


class aclTensor(ctypes.Structure):
    """Opaque ``struct aclTensor``."""


class aclIntArray(ctypes.Structure):
    """Opaque ``struct aclIntArray``."""


class aclOpExecutor(ctypes.Structure):
    """Opaque ``struct aclOpExecutor``."""


aclTensor_p = POINTER(aclTensor)
aclIntArray_p = POINTER(aclIntArray)
aclOpExecutor_p = POINTER(aclOpExecutor)


class c_int_result(ctypes.c_int):
    """An ``int`` result that is a value, not a status (sim-only setters return the previous value)."""


#: ``const char *`` results that the library owns (never freed by us).
c_str = c_char_p

#: Status return types: a non-zero value is an error code.
STATUS_TYPES = (aclError, aclnnStatus)
#: Constructor return types: NULL is a failure.
HANDLE_TYPES = (aclTensor_p, aclIntArray_p)

__all__ = [
    "aclError", "aclnnStatus", "c_enum", "aclrtStream", "aclrtContext", "aclrtEvent",
    "aclTensor", "aclIntArray", "aclOpExecutor", "aclTensor_p", "aclIntArray_p", "aclOpExecutor_p",
    "c_str", "c_int_result", "STATUS_TYPES", "HANDLE_TYPES", "c_int32",
]
