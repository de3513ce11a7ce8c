"""A prepared call: one call shape of any declared operator on device arrays, with per-call work minimal.

Everything that does not change between calls is done once, at preparation:

* the C arguments: aclTensors, aclIntArrays and doubles, made once;
* phase 1 once, with a **repeatable executor** (``plan=True``, an :class:`acl_bindings.calls.ExecutorPlan`):
  each call is then phase 2 on the owner's stream (plus a stream synchronisation unless
  ``sync=False``), and the executor is pointed at new device addresses only when another array
  is passed;
* or, with ``plan=False`` (or when the library refuses repeatable mode), a **one-shot** call: the
  aclTensors and aclIntArrays are made once and kept (phase 1 keeps no reference to them after phase
  2 consumed its executor, cann-abi.md §1.3, §8.5); per call phase 1 on them, phase 2 and the
  synchronisation; a new array gets a new aclTensor;
* a workspace owned by the prepared call, kept between calls.

The C functions are the library namespace's unchecked ones (:meth:`acl_bindings.Lib.unchecked`: the
prototype table's types, no ``errcheck``; the status is checked here); a non-zero status raises the same
:class:`acl_bindings.AclError` (with its code and ``aclGetRecentErrMsg`` text), a NULL handle raises
code 561103.

The *owner* is what the call runs on (a session): it has ``device``, ``stream``, ``_lock`` (held by
every call), ``closed``, ``_sync()`` (synchronise its stream), ``clock`` (an
:class:`acl_bindings.allocator.StreamClock`: when work on the stream is known done) and the
current-context test of :meth:`acl_bindings.Session._device_is_current`.
A tensor value is a device array with ``arg`` (:class:`~acl_bindings.calls.TensorArg`), ``buffer``
and ``_check_open()``.
"""

from __future__ import annotations

import ctypes
import weakref
from ctypes import c_double, c_size_t, c_uint64, c_void_p
from typing import Any, Callable, Optional, Sequence

from ._lib import recent_error_message
from ._percall import Leftovers, c_functions, call_functions, explain_rebind, make_call, point, release_leftovers
from ._resource import releases_allowed
from .calls import ExecutorPlan
from .errors import AclError, ClosedError
from .memory import buffer_closes
from .op import ArgKind, TwoPhaseOp
from .runtime import _check_fork, _forked

__all__ = ["PreparedCall", "c_functions"]


class PreparedCall:
    """One call shape of *op* on device arrays, prepared once (see the module docstring).

    Parameters
    ----------
    owner:
        What the call runs on (a session): its device, stream and lock are used.
    op:
        The declared operator.
    values:
        One value per schema argument (see :mod:`acl_bindings.calls`); tensors are device arrays.
    plan:
        Phase 1 once with a repeatable executor (default).  False: a one-shot call each
        time.  When the library refuses repeatable mode, the call falls back to one-shot,
        :attr:`fallback` says why, and every :attr:`retry_after` calls it asks again.
    sync:
        Synchronise the stream after each call (default).  False: only queue the work.

    Attributes
    ----------
    plan:
        Whether a repeatable executor is in use.
    fallback:
        The error text when repeatable mode was refused, else None.
    workspace_size:
        Bytes of workspace phase 1 asked for (at preparation).
    calls:
        Completed calls.
    retry_after:
        One-shot calls after a refused plan before the next request (class attribute, 64).
    """

    retry_after = 64

    def __init__(self, owner: Any, op: TwoPhaseOp, values: Sequence[Any], *, plan: bool = True,
                 sync: bool = True) -> None:
        self._closed = True
        self._plan: Optional[ExecutorPlan] = None  # the repeatable executor's (plan mode)
        self._bound: Optional[ExecutorPlan] = None  # the tensors and arrays of a one-shot call (no executor)
        self._ws: Any = None  # a block of the owner's allocator
        self._ws_ptr: Optional[c_void_p] = None
        self._ws_cap = 0
        self._stale: list[Any] = []  # objects of a failed plan retry whose release was refused
        self._released = True  # nothing owned yet
        self.session = owner
        self.op = op
        self.sync = bool(sync)
        self.calls = 0
        self.plan = False
        self.fallback: Optional[str] = None
        self._retry_left = 0  # one-shot calls left before a refused plan is asked for again
        self.workspace_size = 0
        schema = op.schema
        self._tensor_positions = tuple(pos for pos, a in enumerate(schema) if a.is_tensor)
        self._left = Leftovers()  # a one-shot call's executor, and executors whose destroy was refused
        #: the one-shot's ExecutorPlan, whose tensors and arrays those may refer to (held by the finalizer net)
        self._keep: list[Any] = [None]
        with owner._lock:
            owner._check_open()
            self._values = list(values)
            self._buffers: tuple[Any, ...] = ()
            self._result: Any = None
            self._closes_seen = -1  # the arrays are checked (and _buffers, _result set) at the first call
            self._fns = call_functions(op)
            self._synchronize = self._fns.aclrtSynchronizeStream
            self._stream = c_void_p(owner.stream.handle)
            self._device = owner.device
            self._clock = owner.clock
            # the device check of every call: the owner's (its _device_is_current, inline: calls hold its lock)
            self._get_context, self._context_out = owner._get_context, owner._context_out
            self._lock = owner._lock
            self._size_out = c_uint64()
            self._phase1_args: list[Any] = []  # a one-shot call's (see _use_oneshot)
            self._fast: Callable[..., Any] = self._closed_call  # (make_call, once prepared)
            # the garbage collector's net for a one-shot call's executor (never self: see Leftovers)
            fin = weakref.finalize(self, release_leftovers, self._fns, self._left, owner.device, self._keep)
            fin.atexit = False
            self._released = False
            owner._register_prepared(self)  # from here on, the owner's close() releases what this call owns
            try:
                with self._device.active():
                    self._prepare(bool(plan))
            except BaseException:
                self._closed = True
                try:
                    self._release()
                except Exception:
                    pass  # the first error is the one to report; close() retries what is left
                raise
            self._closed = False

    # ------------------------------------------------------------------ preparation
    def _prepare(self, plan: bool) -> None:
        """Phase 1 once: learn the workspace size; keep a repeatable executor when *plan*."""
        # a plan's own storage description (acl_bindings.calls: the op cache)
        prep = self._plan = ExecutorPlan(self.op, self._values, plan_storage=plan)
        self.workspace_size = prep.workspace_size
        self._ensure_workspace(prep.workspace_size)
        if plan and prep.executor is not None and prep.executor.handle is not None:
            try:
                prep.make_repeatable()
            except AclError as exc:
                self.fallback = str(exc)
                self._retry_left = self.retry_after
            else:
                self.plan = True
        if self.plan:
            self._use_plan()
            return
        if plan:  # refused: the one-shot calls describe the storage as the one-shot path does (acl_bindings.calls)
            prep.close()  # (refused: raises, and the plan stays owned)
            self._plan = None
            prep = ExecutorPlan(self.op, self._values, plan_storage=False)
        self._plan = None
        self._bound = prep
        self._keep[0] = prep
        prep.discard_executor()  # an executor phase 2 never ran is destroyed (cann-abi.md §1.3)
        self._use_oneshot()

    def _use_oneshot(self) -> None:
        """Calls run phase 1 and phase 2 on the kept tensors and arrays from now on."""
        bound = self._bound
        assert bound is not None
        self._phase1_args[:] = [c_double(v) if a.kind is ArgKind.DOUBLE else v._cell
                                for a, v in zip(self.op.schema, bound.args)]
        self._phase1_args += [self._size_out, self._left.ex]  # (the out cells themselves: Lib.unchecked)
        self._fast = make_call(self)

    def _use_plan(self) -> None:
        """Calls run phase 2 of the plan's repeatable executor from now on."""
        plan = self._plan
        assert plan is not None and plan.executor is not None
        self._ex = ctypes.cast(plan.executor.handle, c_void_p)
        f, op = self._fns, self.op
        #: per tensor position: the address setter, its name, the index k, the tensor's handle, the tensor
        self._setters = {pos: (f.aclSetInputTensorAddr if which is op.inputs else f.aclSetOutputTensorAddr,
                               "aclSetInputTensorAddr" if which is op.inputs else "aclSetOutputTensorAddr",
                               c_size_t(k), ctypes.cast(tensor.handle, c_void_p), tensor)
                         for which, tensors in ((op.inputs, plan.inputs), (op.outputs, plan.outputs))
                         for k, (pos, tensor) in enumerate(zip(which, tensors))}
        self._fast = make_call(self)

    def _retry_plan(self) -> None:
        """Ask again for a repeatable executor, :attr:`retry_after` one-shot calls after a refusal.

        On success the call uses it from now on (and :attr:`fallback` is None again); a refusal
        (any :class:`~acl_bindings.AclError`) keeps the one-shot path and schedules the next try.
        """
        try:
            with self._device.active():
                plan = ExecutorPlan(self.op, self._values, leftovers=self._stale)
                try:
                    plan.make_repeatable()
                    self._ensure_workspace(plan.workspace_size)
                except BaseException:
                    try:
                        plan.close()
                    except Exception:
                        pass
                    self._stale += plan.still_open()  # refused: close() retries them
                    raise
        except AclError as exc:
            self.fallback = str(exc)
            self._retry_left = self.retry_after
            return
        self._plan = plan
        self.workspace_size = plan.workspace_size
        self.plan, self.fallback = True, None
        self._use_plan()
        bound, self._bound = self._bound, None  # the one-shot's tensors and arrays
        if bound is not None:
            try:
                self._left.destroy(self._fns)  # an interrupted call's executor first: it may refer to them
                bound.close()
            except AclError:
                self._stale += bound.still_open()  # refused: close() retries them (and reports it)

    def _ensure_workspace(self, size: int) -> None:
        if size <= (self._ws.nbytes if self._ws is not None else 0):
            return
        if self._ws is not None:
            self._ws.close()  # (back to the allocator's cache, stream-ordered)
            self._ws = None
            self._ws_ptr = None
            self._ws_cap = 0
        self._ws = self.session.allocator.allocate(size, self._clock)
        self._ws_ptr = c_void_p(self._ws.ptr)
        self._ws_cap = size

    # ------------------------------------------------------------------ calling
    def _guarded(self, rc: int) -> Any:
        """The call inside the device guard: the device was not current on this thread (or reading it failed)."""
        if rc:
            recent_error_message()  # (read and cleared on this thread: the guard asks again)
        with self._device.active():
            # (stored, then returned after the with: an interrupt just after the call is then inside the with
            # block, never in its exit's opening instructions, which its exception handler does not cover)
            result = self._fast(True, True)  # (guarded; the lock is held)
        return result

    def _closed_call(self) -> Any:
        """Raise the ClosedError of a call on a closed prepared call or owner."""
        raise ClosedError(f"this {type(self).__name__} is closed" if self._closed else
                          f"this {type(self.session).__name__} is closed")

    def _check_buffers(self) -> None:
        """Raise ClosedError when the call, its owner, an array or its buffer is closed, and ProcessForkedError
        in a forked child (no C call there); else remember they were open at this count.

        After new arrays (or a rebind an interrupt or error cut short), the executor or the one-shot's
        aclTensors are first made to match the current arrays (nothing is called when they do).
        """
        if self._closed or self.session._closed:
            self._closed_call()
        if _forked[0]:
            _check_fork()  # (raises: a forked child never reaches the count below)
        seen = buffer_closes[0]  # (read first: a close during the check changes it)
        values = self._values
        self._use_values()
        for buffer in self._buffers:
            if buffer.closed:
                for pos in self._tensor_positions:
                    values[pos]._check_open()  # (raises ClosedError)
        for pos in self._tensor_positions:
            point(self, pos, values[pos].arg)
        self._closes_seen = seen

    def _use_values(self) -> None:
        """Remember the buffers of the current arrays, and the array a call returns."""
        values = self._values
        self._buffers = tuple(values[pos].buffer for pos in self._tensor_positions)
        self._result = values[self.op.outputs[0]] if self.op.outputs else None

    def _count_retry(self) -> None:
        self._retry_left -= 1
        if not self._retry_left:
            self._retry_plan()

    def _call(self, replace: Sequence[tuple[int, Any]]) -> Any:
        """Run the operator, first using the arrays of *replace* (``(schema position, array or None)``) from now
        on; returns the first output tensor's array."""
        with self._lock:
            if self._closed or self.session._closed:
                self._closed_call()
            values, seen = self._values, None
            for pos, arr in replace:
                if arr is not None and arr is not values[pos]:
                    if seen is None:
                        # until the rebinds are done, the next call checks the arrays and makes the executor or the
                        # aclTensors match them (_check_buffers): one that an interrupt or an error cuts short is
                        # completed or undone then
                        seen, self._closes_seen = self._closes_seen, -1
                    self._rebind(pos, arr)
            if seen is not None:
                self._use_values()
                # done: the other arrays were open at the count seen, the new ones now (a close since changed it)
                self._closes_seen = seen
            result = self._fast(False, True)  # (the lock is held)
        return result

    def _check_value(self, arr: Any, param: str) -> None:
        """Raise unless *arr* may be a tensor argument named *param* (an open device array of the owner)."""
        arr._check_open()

    def _rebind(self, pos: int, arr: Any) -> None:
        """Use *arr* for the tensor at schema position *pos* from now on: same layout as before, new address."""
        old = self._values[pos]
        others = [self._values[p] for p in self._tensor_positions if p != pos]
        try:
            same = (arr.session is self.session and arr.arg[:5] == old.arg[:5] and not arr.buffer.closed
                    and all(arr.buffer is not o.buffer for o in others))
        except AttributeError:
            same = False
        if not same:
            explain_rebind(self, pos, arr, old, others)
        point(self, pos, arr.arg)  # (the caller marked the arrays for a check: see _call)
        self._values[pos] = arr

    # ------------------------------------------------------------------ lifetime
    @property
    def closed(self) -> bool:
        """True after :meth:`close` (or once the owner closed it)."""
        return self._closed

    @property
    def _refused(self) -> list[int]:
        """One-shot executors whose destroy the library refused (destroyed again by :meth:`close`)."""
        return self._left.refused

    def close(self) -> None:
        """Synchronise the stream, then release the executor, handles and workspace.

        Idempotent, and retryable: when a step fails, the error is raised and what is not released
        yet stays owned, so another ``close()`` (or the owner's) finishes the job.  The call is
        closed for use from the first ``close()`` on.
        """
        with self.session._lock:
            self._closed = True
            self._closes_seen = -1  # the next call checks, and raises ClosedError (see _percall.make_call)
            if self._released:
                return
            if not self.session.closed and releases_allowed():  # (after finalize, or in a forked child: no)
                self.session._sync()  # (fails: nothing was released, queued work may still use it)
            self._release()
            self._released = True

    def _release(self) -> None:
        """Release everything still owned; what fails stays owned (first error raised)."""
        errors: list[BaseException] = []

        def attempt(release: Callable[[], None]) -> bool:
            try:
                release()
            except Exception as exc:  # keep releasing the rest
                errors.append(exc)
                return False
            return True

        if self._left.busy():
            attempt(lambda: self._left.destroy(self._fns))
        if self._plan is not None and attempt(self._plan.close):
            self._plan = None
        if self._bound is not None and not self._left.busy() and attempt(self._bound.close):
            self._bound = None  # (after the executors that may refer to its tensors)
        for obj in self._stale:
            attempt(obj.close)
        self._stale = [obj for obj in self._stale if not obj.closed]
        if self._ws is not None and attempt(self._ws.close):
            self._ws, self._ws_ptr, self._ws_cap = None, None, 0
        if errors:
            try:
                raise errors[0]
            finally:
                errors.clear()  # no cycle through this frame

    def __enter__(self) -> PreparedCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        state = "closed" if self._closed else "open"
        values = getattr(self, "_values", ())
        arrays = " ".join(f"{a.name}={tuple(v)}" for a, v in zip(self.op.schema, values)
                          if a.kind is ArgKind.INT_ARRAY)
        return f"<{type(self).__name__} {mode} {arrays} {state}>"
