"""The pieces of a prepared call (:mod:`acl_bindings.prepared`): its C functions, C arguments built once, and
the cells that hold a one-shot call's handles.

The C functions are the library namespace's own unchecked functions (:meth:`acl_bindings.Lib.unchecked`: the
table's argtypes, handle pointers as ``c_void_p``, no ``errcheck``): the caller checks each status.
"""

from __future__ import annotations

import logging
from ctypes import c_int64, c_uint64, c_void_p
from typing import Any, Sequence

from ._lib import lib, raise_for_status
from ._resource import releases_allowed
from .calls import TensorArg
from .enums import dtype_to_acl
from .op import TwoPhaseOp

__all__ = ["c_functions", "call_functions", "CallFunctions", "TensorSource", "ArraySource", "Leftovers",
           "release_leftovers"]

_log = logging.getLogger("acl_bindings")


def c_functions(op: TwoPhaseOp) -> tuple[str, ...]:
    """The C functions a prepared call of *op* uses."""
    return ("aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray", "aclDestroyIntArray", "aclDestroyAclOpExecutor",
            "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclrtSynchronizeStream", op.phase1_name,
            op.phase2_name)


class CallFunctions:
    """The unchecked functions (:meth:`acl_bindings.Lib.unchecked`) a prepared call of one operator uses, by
    C name, plus ``phase1`` and ``phase2``."""

    def __init__(self, op: TwoPhaseOp) -> None:
        for name in c_functions(op):
            setattr(self, name, lib.unchecked(name))
        self.phase1 = getattr(self, op.phase1_name)
        self.phase2 = getattr(self, op.phase2_name)

    def __getattr__(self, name: str) -> Any:  # (for the type checker: set in __init__)
        raise AttributeError(name)


def call_functions(op: TwoPhaseOp) -> CallFunctions:
    """The :class:`CallFunctions` of *op* on the loaded backend."""
    return CallFunctions(op)


def _c_array(values: Sequence[int]) -> Any:
    return (c_int64 * len(values))(*values)


class TensorSource:
    """The aclCreateTensor arguments of a tensor argument, as ready ctypes objects (``args``)."""

    __slots__ = ("dims", "ndim", "dtype", "strides", "offset", "format", "storage", "nstorage", "address", "args")

    def __init__(self, arg: TensorArg) -> None:
        self.dims = _c_array(arg.shape)
        self.ndim = c_uint64(len(arg.shape))
        self.dtype = int(dtype_to_acl(arg.dtype))  # C int (enums are ints, cann-abi.md §2): passed as a Python int
        self.strides = _c_array(arg.strides)
        self.offset = c_int64(arg.offset)
        self.format = int(arg.format)  # C int (aclFormat)
        self.set_storage(arg.storage_dims)
        self.set_address(arg.address)

    def set_storage(self, storage_dims: Sequence[int]) -> None:
        self.storage = _c_array(storage_dims)
        self.nstorage = c_uint64(len(storage_dims))

    def set_address(self, address: int) -> None:
        self.address = c_void_p(address)
        self.args = (self.dims, self.ndim, self.dtype, self.strides, self.offset, self.format, self.storage,
                     self.nstorage, self.address)


class ArraySource:
    """The aclCreateIntArray arguments of an int array (``args``)."""

    __slots__ = ("args",)

    def __init__(self, values: Sequence[int]) -> None:
        self.args = (_c_array(values), c_uint64(len(values)))


class Leftovers:
    """The per-call handles of a lean one-shot call, in cells the finalizer net can read.

    ``cells`` hold the call's aclTensors and aclIntArrays while it runs (``names``: their destroy
    functions), ``ex`` the executor phase 1 wrote; ``refused`` the handles whose destroy the library
    refused (or that an interrupted call left behind), as ``(destroy function name, handle)``.
    """

    __slots__ = ("cells", "names", "ex", "refused")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.cells: list[Any] = [None] * len(self.names)
        self.ex = c_void_p()
        self.refused: list[tuple[str, Any]] = []

    def busy(self) -> bool:
        """Whether any handle is still held."""
        return bool(self.refused or self.ex or any(self.cells))

    def salvage(self) -> None:
        """Move whatever the cells still hold to ``refused`` (each in one statement: never lost, never twice)."""
        for k, name in enumerate(self.names):
            if self.cells[k]:
                self.refused, self.cells[k] = [*self.refused, (name, self.cells[k])], None
        if self.ex:
            self.refused, self.ex.value = [*self.refused, ("aclDestroyAclOpExecutor", c_void_p(self.ex.value))], None

    def destroy(self, fns: Any) -> None:
        """Destroy every handle in ``refused`` (and the cells); keep those refused again, raise the first error."""
        self.salvage()
        first, name = 0, ""
        for entry in list(self.refused):
            self.refused = [e for e in self.refused if e is not entry] if not (
                rc := getattr(fns, entry[0])(entry[1])) else self.refused
            if rc and not first:
                first, name = rc, entry[0]
        if first:
            raise_for_status(first, name)


def release_leftovers(fns: CallFunctions, left: Leftovers, device: Any) -> None:
    """The finalizer net of a prepared call's per-call handles (errors are logged, never raised)."""
    if not left.busy() or not releases_allowed():
        return
    try:
        with device.active():
            left.destroy(fns)
    except Exception as exc:
        _log.debug("release of a prepared call's handles by finalizer failed: %s", exc)
