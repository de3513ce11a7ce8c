"""The one-shot run of a prepared call (:mod:`acl_bindings.prepared`) and its pieces: the C functions, the C
arguments built once, and the cells that hold a one-shot call's handles.

The C functions are the library namespace's own unchecked functions (:meth:`acl_bindings.Lib.unchecked`: the
table's argtypes, handle pointers as ``c_void_p``, no ``errcheck``): the caller checks each status.
"""

from __future__ import annotations

import logging
from ctypes import POINTER, c_int, c_int64, c_uint64, c_void_p, cast
from typing import Any, Callable, Sequence

from ._lib import lib, null_handle_error, raise_for_status, recent_error_message
from ._resource import releases_allowed
from .calls import TensorArg
from .enums import dtype_to_acl
from .op import TwoPhaseOp

__all__ = ["c_functions", "call_functions", "CallFunctions", "TensorSource", "ArraySource", "Leftovers",
           "release_leftovers", "make_oneshot"]

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
    """An ``int64_t *`` over a new array of *values*: an argument of exactly the parameter's type, which ctypes
    passes without converting it (the pointer keeps the array alive)."""
    return cast((c_int64 * len(values))(*values), POINTER(c_int64))


class TensorSource:
    """The aclCreateTensor arguments of a tensor argument, as ready ctypes objects of exactly the parameters' types
    (``args``)."""

    __slots__ = ("dims", "ndim", "dtype", "strides", "offset", "format", "storage", "nstorage", "address", "args")

    def __init__(self, arg: TensorArg) -> None:
        self.dims = _c_array(arg.shape)
        self.ndim = c_uint64(len(arg.shape))
        self.dtype = c_int(int(dtype_to_acl(arg.dtype)))  # C int (enums are ints, cann-abi.md §2)
        self.strides = _c_array(arg.strides)
        self.offset = c_int64(arg.offset)
        self.format = c_int(int(arg.format))  # C int (aclFormat)
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


def make_oneshot(call: Any) -> Callable[[], None]:
    """The one-shot run of the prepared call *call* (:class:`acl_bindings.prepared.PreparedCall`), as a closure over
    everything that does not change between its calls."""
    f, op = call._fns, call.op
    tensor = [op.schema[pos].is_tensor for pos in call._where]
    creates = tuple(f.aclCreateTensor if t else f.aclCreateIntArray for t in tensor)
    create_names = tuple("aclCreateTensor" if t else "aclCreateIntArray" for t in tensor)
    destroys = tuple(f.aclDestroyTensor if t else f.aclDestroyIntArray for t in tensor)
    destroy_names = call._left.names
    destroy_executor = f.aclDestroyAclOpExecutor
    phase1, phase2, synchronize = f.phase1, f.phase2, f.aclrtSynchronizeStream
    phase1_name, phase2_name = op.phase1_name, op.phase2_name
    sources = call._sources  # their .args change when arrays are rebound
    template, where, slots = call._phase1_args, call._where, range(len(call._where))
    backwards = range(len(call._where) - 1, -1, -1)
    size_out, ex = call._size_out, call._ex_out
    stream = call._stream
    sync, clock = call.sync, call.session.clock

    left = call._left
    cells = left.cells  # the handles of the call, in schema order

    def run() -> None:
        if ex or any(cells):
            left.salvage()  # an earlier call was interrupted: its handles are destroyed by close()
        done = False
        failed, failed_name = 0, ""
        try:
            for k in slots:
                create = creates[k]
                # each handle is stored in the statement that creates it: a cell the finalizer net reads
                cells[k] = create(*sources[k].args)
                if not cells[k]:
                    raise null_handle_error(create_names[k])
            args = list(template)
            for k in slots:
                args[where[k]] = cells[k]
            rc = phase1(*args)
            if rc:
                raise_for_status(rc, phase1_name)
            if ex:
                size = size_out.value
                if size > call._ws_cap:
                    try:
                        call._ensure_workspace(size)
                    except BaseException:
                        # never run: destroy it (cann-abi.md §1.3)
                        handle, ex.value = ex.value, None  # (taken before the call: see release_cell)
                        if destroy_executor(handle):
                            ex.value = handle
                        left.salvage()
                        raise
                clock.pending = True  # before the work is queued (an interrupt after it: the clock knows)
                # phase 2 consumes a single-use executor, whether or not it succeeds (§1.3): forgotten
                # before the call (see release_cell)
                ws, executor = call._ws_ptr if size else None, c_void_p(ex.value)  # (no call between
                ex.value = None  # taking it and phase 2's)
                rc = phase2(ws, size_out, executor, stream)
                if rc:
                    raise_for_status(rc, phase2_name)
                if sync:
                    rc = synchronize(stream)
                    if rc:
                        raise_for_status(rc, "aclrtSynchronizeStream")
                    clock.epoch, clock.pending = clock.epoch + 1, False  # (StreamClock.synchronized, inline)
            done = True
        finally:
            # reverse order of creation; every handle is destroyed, on error paths too; each is taken
            # out of its cell before its destroy and put back when refused (see release_cell)
            for k in backwards:
                if cells[k]:
                    handle, cells[k] = cells[k], None
                    if rc := destroys[k](handle):
                        cells[k] = handle
                        if not failed:
                            failed, failed_name = rc, destroy_names[k]
            if failed:  # still live: kept, and destroyed again by close()
                left.salvage()
                if not done:
                    recent_error_message()  # another error is being raised: this one's message must not linger
        # reached only when nothing above raised: a refused destroy is then the error to report
        if failed:
            raise_for_status(failed, failed_name)

    return run
