"""The per-call work of a prepared call (:mod:`acl_bindings.prepared`): its C functions, the cell of a one-shot
call's executor, the closure that makes one call, and the rebinding to new arrays.

The C functions are the library namespace's own unchecked functions (:meth:`acl_bindings.Lib.unchecked`: the
table's argtypes, handle pointers as ``c_void_p``, no ``errcheck``): the caller checks each status.
"""

from __future__ import annotations

import logging
from ctypes import c_void_p
from typing import Any, Callable, Sequence

from ._lib import lib, raise_for_status, recent_error_message
from ._resource import releases_allowed
from .calls import borrowed_tensor
from .errors import AclError, AclnnParamError
from .memory import buffer_closes
from .op import TwoPhaseOp

__all__ = ["c_functions", "call_functions", "CallFunctions", "Leftovers", "release_leftovers", "make_call", "point",
           "explain_rebind"]

_log = logging.getLogger("acl_bindings")


def c_functions(op: TwoPhaseOp) -> tuple[str, ...]:
    """The C functions a prepared call of *op* uses per call (it makes its tensors and arrays with
    :mod:`acl_bindings.meta`, and tests the current context with its owner's function)."""
    return ("aclDestroyAclOpExecutor", "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclrtSynchronizeStream",
            op.phase1_name, op.phase2_name)


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


class Leftovers:
    """The executor of a one-shot call, in a cell the finalizer net can read.

    ``ex`` holds the executor phase 1 wrote until phase 2 takes it; ``refused`` the executors (handles) whose
    destroy the library refused, or that an interrupted call left behind.
    """

    __slots__ = ("ex", "refused")

    def __init__(self) -> None:
        self.ex = c_void_p()
        self.refused: list[int] = []

    def busy(self) -> bool:
        """Whether any handle is still held."""
        return bool(self.refused or self.ex)

    def salvage(self) -> None:
        """Move the executor the cell still holds to ``refused`` (in one statement: never lost, never twice)."""
        handle = self.ex.value
        if handle:
            self.refused, self.ex.value = [*self.refused, handle], None

    def destroy(self, fns: Any) -> None:
        """Destroy every executor in ``refused`` (and the cell's); keep those refused again, raise the first error."""
        self.salvage()
        first = 0
        for handle in list(self.refused):
            self.refused = [h for h in self.refused if h != handle] if not (
                rc := fns.aclDestroyAclOpExecutor(handle)) else self.refused
            first = first or rc
        if first:
            raise_for_status(first, "aclDestroyAclOpExecutor")


def release_leftovers(fns: CallFunctions, left: Leftovers, device: Any, keep: Any) -> None:
    """The finalizer net of a prepared call's executors (errors are logged, never raised).  *keep* holds the
    tensors and arrays they refer to, alive until they are destroyed (cann-abi.md §8.5)."""
    if not left.busy() or not releases_allowed():
        return
    try:
        with device.active():
            left.destroy(fns)
    except Exception as exc:
        _log.debug("release of a prepared call's handles by finalizer failed: %s", exc)


def make_call(call: Any) -> Callable[..., Any]:
    """A whole call of the prepared call *call* (:class:`acl_bindings.prepared.PreparedCall`) on its current arrays,
    in its present mode, as one closure: the lock, the checks, the C calls, the count.

    With a plan: phase 2 of its repeatable executor.  One-shot: phase 1 on the kept tensors and arrays
    (``call._phase1_args``), the workspace grown when phase 1 asks for more, then phase 2 of that executor.
    Then the synchronisation unless ``sync=False``.  When the device is not current on the calling thread,
    the call runs again inside the device guard (*guarded*).  *held*: the caller holds the owner's lock (the
    guarded call, and a call with new arrays), so the closure neither takes nor releases it.

    One test stands for every state change a call must notice: the count of closes
    (:data:`acl_bindings.memory.buffer_closes`) against the one the call last checked at.  A close of a buffer
    bumps the count, a fork bumps it in the child, and closing the call forgets the count it checked at; then
    ``call._check_buffers()`` raises (closed call, closed owner, forked child) or checks the arrays again.

    The owner's lock is taken by ``acquire()`` inside the ``try`` and released after it, not by a ``with``
    statement, which costs about 0.1 us more per call.  Since CPython 3.11 an interrupt comes only at the end of
    a call instruction (the eval-breaker check): one just after ``acquire()`` returns is inside the ``try``, whose
    handler releases the lock.  Where the lock is not held when the handler runs (an ``acquire()`` cut short
    while another thread holds the lock, by a signal handler that raised; before 3.11, an interrupt inside the
    ``try`` before ``acquire()`` ran), ``release()`` raises RuntimeError, which the handler drops.  Nested calls
    pass *held* and never touch the lock, so that handler can never release a hold of an outer frame.  Nothing
    is returned from inside the ``try``: an interrupt just after ``release()`` leaves nothing held.
    """
    f, op = call._fns, call.op
    acquire, release, device = call._lock.acquire, call._lock.release, call._device
    get_context, context_out, closes = call._get_context, call._context_out, buffer_closes
    phase2, synchronize, stream, clock, sync = f.phase2, call._synchronize, call._stream, call._clock, call.sync
    phase1_name, phase2_name = op.phase1_name, op.phase2_name
    if call.plan:
        phase1 = None
        plan_size, plan_executor = call._plan.phase2_size, call._plan.phase2_executor
    else:
        phase1, destroy_executor = f.phase1, f.aclDestroyAclOpExecutor
        args = call._phase1_args  # (a list: a new array's aclTensor replaces its slot)
        size_out, left = call._size_out, call._left
        ex = left.ex

    def run(guarded: bool = False, held: bool = False) -> Any:
        try:
            if not held:
                acquire()
            if closes[0] != call._closes_seen:  # (a close, a fork, new arrays: see above)
                call._check_buffers()
            # the device is current (read from the runtime): nothing to switch, nothing to restore; else the
            # device guard
            if not guarded and ((rc := get_context(context_out)) or context_out.value != device.context):
                result = call._guarded(rc)
            else:
                executor: Any = None
                if phase1 is None:  # a plan
                    ws, size, executor = call._ws_ptr, plan_size, plan_executor
                else:
                    if ex:
                        left.salvage()  # an earlier call was interrupted: its executor is destroyed by close()
                    rc = phase1(*args)
                    if rc:
                        raise_for_status(rc, phase1_name)
                    if ex:
                        nbytes = size_out.value
                        if nbytes > call._ws_cap:
                            try:
                                call._ensure_workspace(nbytes)
                            except BaseException:
                                # never run: destroy it (cann-abi.md §1.3)
                                handle, ex.value = ex.value, None  # (taken before the call: see release_cell)
                                if destroy_executor(handle):
                                    ex.value = handle
                                    left.salvage()
                                    # the workspace's error is raised: this one's must not linger
                                    recent_error_message()
                                raise
                        # phase 2 consumes a single-use executor, whether or not it succeeds (§1.3): forgotten
                        # before the call (see release_cell)
                        ws, size, executor = call._ws_ptr if nbytes else None, size_out, c_void_p(ex.value)
                        ex.value = None
                if executor is not None:
                    clock.launched += 1  # (StreamClock.queued, right before the C call)
                    rc = phase2(ws, size, executor, stream)
                    if rc:
                        raise_for_status(rc, phase2_name)
                    if sync:
                        mark = clock.launched
                        rc = synchronize(stream)
                        if rc:
                            raise_for_status(rc, "aclrtSynchronizeStream")
                        clock.done = mark  # (StreamClock.sync, inline)
                call.calls += 1
                if call._retry_left:  # a plan was refused: ask again now and then
                    call._count_retry()
                result = call._result
        except BaseException:
            if not held:
                try:
                    release()
                except RuntimeError:
                    pass  # not held: its acquire() was cut short, or had not run (see above)
            raise
        if not held:
            release()
        return result

    return run


def point(call: Any, pos: int, new: Any) -> None:
    """Make the tensor at schema position *pos* describe *new* (a :class:`~acl_bindings.calls.TensorArg`).

    A plan points its executor at the new address (its phase-1 storage covers the same view: only phase 1
    checks it, cann-abi.md §8.1); a one-shot call makes a new aclTensor and destroys the old one.
    """
    if call.plan:
        setter, name, k, handle, tensor = call._setters[pos]
        if new.address != tensor.address:
            tensor.address = -1  # unknown until the library confirms the new one
            rc = setter(call._ex, k, handle, c_void_p(new.address))
            if rc:
                raise_for_status(rc, name)
            tensor.address = new.address
        return
    bound = call._bound
    assert bound is not None
    old = bound.args[pos]
    if call._phase1_args[pos] is old._cell and (old.address, old.storage_dims) == (new.address,
                                                                                 new.storage_dims):
        return
    call._left.destroy(call._fns)  # an interrupted call's executor first: it may refer to the old one
    with call._device.active():
        tensor = borrowed_tensor(new, plan=False)
        bound.replace_tensor(pos, tensor)
        call._phase1_args[pos] = tensor._cell
        try:
            old.close()
        except AclError:
            call._stale.append(old)  # refused: close() retries it
            raise


def explain_rebind(call: Any, pos: int, arr: Any, old: Any, others: Sequence[Any]) -> None:
    """Raise the error that says why *arr* cannot replace *old*."""
    param = call.op.schema[pos].name
    call._check_value(arr, param)
    for other in others:
        if arr.buffer is other.buffer:
            names = " and ".join(a.name for a in call.op.schema if a.is_tensor)
            raise AclnnParamError(161002, call.op.phase1_name,
                                  f"{names} share one device buffer; they must not overlap")
    want, got = old.arg, arr.arg
    raise AclnnParamError(
        161002, call.op.phase1_name,
        f"{param}: a prepared call takes arrays like the one it was prepared with: shape {want.shape} "
        f"dtype {want.dtype} layout {getattr(old, 'layout', want.format)} strides {want.strides} offset "
        f"{want.offset}; got shape {got.shape} dtype {got.dtype} layout {getattr(arr, 'layout', got.format)} "
        f"strides {got.strides} offset {got.offset}")
