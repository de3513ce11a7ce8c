"""The per-call runs of a prepared call (:mod:`acl_bindings.prepared`): its C functions, the cell of a one-shot
call's executor, and the closures that make one call as a plan or one-shot.

The C functions are the library namespace's own unchecked functions (:meth:`acl_bindings.Lib.unchecked`: the
table's argtypes, handle pointers as ``c_void_p``, no ``errcheck``): the caller checks each status.
"""

from __future__ import annotations

import logging
from ctypes import c_void_p
from typing import Any, Callable

from ._lib import lib, raise_for_status, recent_error_message
from ._resource import releases_allowed
from .op import TwoPhaseOp

__all__ = ["c_functions", "call_functions", "CallFunctions", "Leftovers", "release_leftovers", "make_oneshot",
           "make_plan_run"]

_log = logging.getLogger("acl_bindings")


def c_functions(op: TwoPhaseOp) -> tuple[str, ...]:
    """The C functions a prepared call of *op* uses per call (it makes its tensors and arrays with
    :mod:`acl_bindings.meta`)."""
    return ("aclDestroyAclOpExecutor", "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclrtSynchronizeStream",
            "aclrtGetCurrentContext", op.phase1_name, op.phase2_name)


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

    ``ex`` holds the executor phase 1 wrote until phase 2 takes it; ``refused`` the executors whose destroy the
    library refused (or that an interrupted call left behind), as ``(destroy function name, handle)``.
    """

    __slots__ = ("ex", "refused")

    def __init__(self) -> None:
        self.ex = c_void_p()
        self.refused: list[tuple[str, Any]] = []

    def busy(self) -> bool:
        """Whether any handle is still held."""
        return bool(self.refused or self.ex)

    def salvage(self) -> None:
        """Move the executor the cell still holds to ``refused`` (in one statement: never lost, never twice)."""
        if self.ex:
            self.refused, self.ex.value = [*self.refused, ("aclDestroyAclOpExecutor", c_void_p(self.ex.value))], None

    def destroy(self, fns: Any) -> None:
        """Destroy every handle in ``refused`` (and the cell); keep those refused again, raise the first error."""
        self.salvage()
        first, name = 0, ""
        for entry in list(self.refused):
            self.refused = [e for e in self.refused if e is not entry] if not (
                rc := getattr(fns, entry[0])(entry[1])) else self.refused
            if rc and not first:
                first, name = rc, entry[0]
        if first:
            raise_for_status(first, name)


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


def _synchronizer(call: Any) -> Callable[[], None]:
    """The end of a call with ``sync``: one stream synchronisation, and the clock told."""
    synchronize, stream, clock = call._synchronize, call._stream, call._clock

    def synchronized() -> None:
        rc = synchronize(stream)
        if rc:
            raise_for_status(rc, "aclrtSynchronizeStream")
        clock.epoch, clock.pending = clock.epoch + 1, False  # (StreamClock.synchronized, inline)

    return synchronized


def make_plan_run(call: Any) -> Callable[[], None]:
    """A call of the prepared call *call* (:class:`acl_bindings.prepared.PreparedCall`) on its repeatable executor:
    phase 2 (its plan's :meth:`~acl_bindings.calls.ExecutorPlan.launch`), then the synchronisation unless
    ``sync=False``."""
    launch, stream, clock = call._plan.launch, call._stream, call._clock
    synchronized = _synchronizer(call) if call.sync else None

    def run() -> None:
        clock.pending = True  # before the work is queued: an interrupt after it must not leave the clock unaware
        launch(call._ws_ptr, stream)
        if synchronized is not None:
            synchronized()

    return run


def make_oneshot(call: Any) -> Callable[[], None]:
    """A one-shot call of the prepared call *call*: phase 1 on its kept tensors and arrays (``call._phase1_args``),
    the workspace grown when phase 1 asks for more, phase 2, then the synchronisation unless ``sync=False``."""
    f, op = call._fns, call.op
    destroy_executor = f.aclDestroyAclOpExecutor
    phase1, phase2 = f.phase1, f.phase2
    phase1_name, phase2_name = op.phase1_name, op.phase2_name
    args = call._phase1_args  # (a list: a rebound tensor's cell replaces its slot)
    size_out, ex, left = call._size_out, call._left.ex, call._left
    stream, clock = call._stream, call._clock
    synchronized = _synchronizer(call) if call.sync else None

    def run() -> None:
        if ex:
            left.salvage()  # an earlier call was interrupted: its executor is destroyed by close()
        rc = phase1(*args)
        if rc:
            raise_for_status(rc, phase1_name)
        if not ex:
            return
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
                    recent_error_message()  # the workspace's error is the one raised: this one's must not linger
                raise
        clock.pending = True  # before the work is queued (an interrupt after it: the clock knows)
        # phase 2 consumes a single-use executor, whether or not it succeeds (§1.3): forgotten before the call
        # (see release_cell)
        ws, executor = call._ws_ptr if size else None, c_void_p(ex.value)  # (no call between taking it and
        ex.value = None  # phase 2's)
        rc = phase2(ws, size_out, executor, stream)
        if rc:
            raise_for_status(rc, phase2_name)
        if synchronized is not None:
            synchronized()

    return run
