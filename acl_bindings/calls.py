"""One bound call of any declared operator: phase 1 once, addresses rebound, phase 2, as a plan or one-shot.

An operator is declared once, by name and argument schema (:class:`acl_bindings.TwoPhaseOp`).
A call's *values* follow the schema, one per argument:

* a tensor argument (input or output): a :class:`TensorArg`, the description of memory the call
  does not own, or an object with an ``arg`` attribute holding one and a ``tensor`` attribute
  holding its own :class:`~acl_bindings.Tensor` (a session's device array);
* an int array: a tuple of ints;
* a double: a float.

:func:`launch` runs one call.  With a :class:`PlanCache`, phase 1 of a call shape runs once, with a
repeatable executor (:class:`ExecutorPlan`); later calls of that shape only point the executor's
input and output *k* at the new addresses (``aclSetInputTensorAddr`` / ``aclSetOutputTensorAddr``,
*k* counted over the schema's input and output tensors) and run phase 2.  Without one, or when the
library refuses repeatable mode, :func:`run_once` runs both phases.  Every handle is owned by a
:class:`~acl_bindings._resource.Resource` from the moment C returns it, on error paths too.

nnopbase's op cache (cann-abi.md §8.6) answers phase 1 of a call shape that already ran one-shot
with a cache wrapper, which ``aclSetAclOpExecutorRepeatable`` refuses (561000).  The op cache keys
on each tensor's storage shape (OPB ``common/utils/op_cache.cpp``), so a plan's tensors declare
their storage with a leading 1 (:func:`plan_storage`): the very elements of the one-shot
description, under a key of their own.  A plan therefore still serves a shape whose first call was
one-shot.  When the library refuses repeatable mode all the same, the refused executor is
destroyed unrun (so the plan's description never enters the op cache) and the call runs one-shot;
the refusal is remembered for :attr:`PlanCache.retry_after` calls of that key, in a table of at
most :attr:`PlanCache.refused_capacity` keys, and its reason is kept in :attr:`PlanCache.last_refusal`.
"""

from __future__ import annotations

from collections import OrderedDict
from ctypes import c_uint64, c_void_p
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from ._lib import lib, raise_for_status
from .enums import Format
from .errors import AclError, ClosedError
from .meta import IntArray, Tensor
from .op import ArgKind, Executor, TwoPhaseOp, Workspace

__all__ = ["TensorArg", "PlanKey", "plan_key", "plan_storage", "borrowed_tensor", "ExecutorPlan", "PlanCache",
           "run_once", "launch", "run_all"]


class TensorArg(NamedTuple):
    """How a tensor argument is described to the library: an aclTensor over memory the call does not own.

    *strides* and *offset* are in elements, *address* is the start of the storage (the view starts
    *offset* elements in), *format* an ``aclFormat``, *storage_dims* the storage shape.
    """

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


#: The fields of a :class:`TensorArg` phase 1 depends on (all but the address)
_LAYOUT = slice(0, 6)


class PlanKey(NamedTuple):
    """Everything phase 1 depends on, except the device addresses (the storage dims too, as nnopbase's op cache)."""

    op: str
    #: each argument in schema order: a tensor's :class:`TensorArg` without its address, an int array, a double
    args: tuple[Any, ...]


def plan_key(op: TwoPhaseOp, values: Sequence[Any]) -> PlanKey:
    """The :class:`PlanKey` of one call of *op*."""
    return PlanKey(op.name, tuple([v.arg[_LAYOUT] if tensor else v for tensor, v in zip(op.tensor_flags, values)]))


def plan_storage(storage_dims: tuple[int, ...]) -> tuple[int, ...]:
    """A plan's storage description: the same elements as *storage_dims*, with a leading 1 (see the module doc)."""
    return (1, *storage_dims)


def borrowed_tensor(desc: TensorArg, plan: bool = True) -> Tensor:
    """An aclTensor over *desc*'s memory, which it does not own, in a plan's own storage description when
    *plan* (see the module doc), else *desc*'s."""
    storage = plan_storage(desc.storage_dims) if plan else tuple(desc.storage_dims)
    return Tensor(desc.shape, desc.dtype, strides=desc.strides, offset=desc.offset, format=Format(desc.format),
                  storage_dims=storage, address=desc.address)


def run_all(steps: Sequence[Callable[[], Any]]) -> None:
    """Run every step even when one fails, then raise the first error (a failed release must not leak the rest)."""
    first: Optional[Exception] = None
    for step in steps:
        try:
            step()
        except Exception as exc:
            if first is None:
                first = exc
    if first is not None:
        try:
            raise first
        finally:
            first = None  # no cycle through this frame: what is left is released by reference counting


def _check_values(op: TwoPhaseOp, values: Sequence[Any]) -> None:
    if len(values) != len(op.schema):
        raise TypeError(f"{op.phase1_name}: expected {len(op.schema)} arguments "
                        f"({', '.join(a.name for a in op.schema)}), got {len(values)}")


def _phase1_args(op: TwoPhaseOp, values: Sequence[Any], made: list[Any], plan: bool, reuse: bool) -> list[Any]:
    """Phase 1's C arguments for *values*; the aclTensors and aclIntArrays made are appended to *made*, one at a
    time (when a later one fails, the earlier ones are already there to close).  Tensors are described in a
    plan's storage when *plan*; with *reuse*, a value's own aclTensor is used (a device array's)."""
    args: list[Any] = []
    for arg, v in zip(op.schema, values):
        if arg.is_tensor:
            if not reuse or type(v) is TensorArg:
                made.append(borrowed_tensor(v.arg, plan))
                args.append(made[-1])
            else:
                args.append(v.tensor)  # the object's own aclTensor (a device array's)
        elif arg.kind is ArgKind.INT_ARRAY:
            made.append(IntArray(v))
            args.append(made[-1])
        else:
            args.append(float(v))
    return args


class ExecutorPlan:
    """Phase 1 of one call shape of *op*, with an executor to make repeatable (build with :meth:`PlanCache.get`).

    It owns an aclTensor per tensor argument (in a plan's storage description unless *plan_storage* is
    False) and an aclIntArray per int array, made from *values*, and the executor.  When phase 1 fails,
    what was made is closed, and what the library refused to release is appended to *leftovers*.
    """

    def __init__(self, op: TwoPhaseOp, values: Sequence[Any], *, plan_storage: bool = True,
                 leftovers: Optional[list[Any]] = None) -> None:
        _check_values(op, values)
        self.op = op
        self.objects: list[Any] = []  # tensors and int arrays, in schema order
        self.executor: Optional[Executor] = None
        self.workspace_size = 0
        try:  # a failure at any step releases what the earlier steps created
            args = _phase1_args(op, values, self.objects, plan_storage, False)
            # the executor keeps the tensors and arrays it refers to alive (if the plan is dropped unclosed)
            self.workspace_size, self.executor = op.get_workspace_size(*args, keep=tuple(self.objects))
        except BaseException:
            try:
                self.close()
            finally:
                if leftovers is not None:
                    leftovers += self.still_open()
            raise
        #: phase 1's arguments in schema order (the tensors and arrays of ``objects``, the doubles)
        self.args = args
        self._index_tensors()
        self._phase2: Any = None  # lib.unchecked(phase 2), once the executor is repeatable
        #: phase 2's executor and workspace size arguments, ready (once the executor is repeatable)
        self.phase2_executor = c_void_p()
        self.phase2_size = c_uint64(0)
        self._cell = c_void_p()  # the executor's cell (empty once it is closed), once repeatable
        self.runs = 0

    def _index_tensors(self) -> None:
        op, args = self.op, self.args
        #: the executor's input and output tensors, in order (input / output index k)
        self.inputs = tuple(args[i] for i in op.inputs)
        self.outputs = tuple(args[i] for i in op.outputs)
        #: ``(schema position, tensor)`` of every input, then every output
        self._tensors = (*zip(op.inputs, self.inputs), *zip(op.outputs, self.outputs))

    def discard_executor(self) -> None:
        """Destroy the executor unrun (cann-abi.md §1.3) and keep the tensors and arrays, for a caller that runs
        phase 1 on them again per call (a one-shot :class:`acl_bindings.prepared.PreparedCall`)."""
        if self.executor is not None:
            self.executor.close()  # (refused: raises, and it stays owned)
            self.executor = None

    def replace_tensor(self, pos: int, tensor: Tensor) -> Tensor:
        """Use *tensor* for the tensor argument at schema position *pos* from now on (no executor may refer to the
        one it replaces: see :meth:`discard_executor`); returns the replaced tensor, which the caller closes."""
        assert self.executor is None
        old, k = self.args[pos], sum(1 for a in self.op.schema[:pos] if a.kind is not ArgKind.DOUBLE)
        self.args[pos], self.objects[k] = tensor, tensor  # (one statement: both or neither)
        self._index_tensors()
        return old

    def still_open(self) -> list[Any]:
        """The executor, tensors and arrays not released yet."""
        return [obj for obj in (self.executor, *self.objects) if obj is not None and not obj.closed]

    def make_repeatable(self) -> None:
        """Ask the library for a repeatable executor (raises AclError when it refuses)."""
        assert self.executor is not None
        self.executor.make_repeatable()
        self._phase2 = lib.unchecked(self.op.phase2_name)
        cell = self.executor._cell
        assert cell is not None
        self.phase2_executor = c_void_p(cell.value)
        self.phase2_size = c_uint64(self.workspace_size)
        self._cell = cell

    def rebind(self, pos: int, address: int) -> None:
        """Point the tensor at schema position *pos* at *address* (aclSetInputTensorAddr / aclSetOutputTensorAddr)."""
        executor = self.executor
        assert executor is not None
        op = self.op
        if pos in op.inputs:
            k = op.inputs.index(pos)
            executor.set_input_address(k, self.inputs[k], address)
        else:
            k = op.outputs.index(pos)
            executor.set_output_address(k, self.outputs[k], address)

    def run(self, values: Sequence[Any], workspace: Workspace, stream: Any, clock: Any = None) -> int:
        """Point the executor at *values*' addresses and queue phase 2 on *stream* (a :class:`~acl_bindings.Stream`
        whose device is current).  Returns the workspace size."""
        for pos, tensor in self._tensors:
            address = values[pos].arg.address
            if address != tensor.address:
                self.rebind(pos, address)
        self.launch(workspace.reserve(self.workspace_size), stream.handle, clock)
        return self.workspace_size

    def launch(self, workspace: Any, stream: Any, clock: Any = None) -> None:
        """Phase 2 of the repeatable executor, at the addresses it points at: *workspace* (an address, or None
        when the size is 0) and *stream* (a raw ``aclrtStream``) as phase 2 takes them; the device of the stream
        must be current.  The phase 2 of :meth:`run`; a :class:`acl_bindings.prepared.PreparedCall` makes its
        own call with the plan's :attr:`phase2_size` and :attr:`phase2_executor` (its closure,
        :func:`acl_bindings._percall.make_call`)."""
        if not self._cell.value:  # (closed: its cell is empty; never repeatable: an empty cell of its own)
            raise ClosedError("this plan's executor is closed" if self._phase2 is not None
                              else "this plan's executor is not repeatable (make_repeatable() first)")
        if clock is not None:
            clock.queued()  # (the statement right before the C call: see StreamClock)
        rc = self._phase2(workspace, self.phase2_size, self.phase2_executor, stream)
        self.runs += 1
        if rc:
            raise_for_status(rc, self.op.phase2_name)

    def close(self) -> None:
        """Destroy the executor, then the tensors and arrays it refers to (each attempted; first error raised)."""
        run_all([obj.close for obj in (self.executor, *self.objects) if obj is not None])


class PlanCache:
    """At most *capacity* plans, least recently used evicted first.

    Attributes
    ----------
    refused:
        Keys whose repeatable executor the library refused, each with the number of calls left
        before a plan is tried again (at most *refused_capacity* keys, oldest dropped first).
    last_refusal:
        The error text of the latest refusal, or None.
    """

    def __init__(self, capacity: int = 32, refused_capacity: int = 256, retry_after: int = 64) -> None:
        self.capacity = capacity
        self.refused_capacity = refused_capacity
        self.retry_after = retry_after
        self.plans: OrderedDict[PlanKey, ExecutorPlan] = OrderedDict()
        self.refused: OrderedDict[PlanKey, int] = OrderedDict()
        self.last_refusal: Optional[str] = None
        self.hits = 0
        self.misses = 0

    def hit(self, key: PlanKey) -> Optional[ExecutorPlan]:
        """The kept plan for *key* (now the most recently used), or None."""
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
            self.hits += 1
        return plan

    def get(self, key: PlanKey, build: Callable[[], ExecutorPlan],
            before_evict: Callable[[], None]) -> Optional[ExecutorPlan]:
        """The plan for *key*, or None when this call must run one-shot (the library refused a plan)."""
        return self.hit(key) or self.miss(key, build, before_evict)

    def miss(self, key: PlanKey, build: Callable[[], ExecutorPlan],
             before_evict: Callable[[], None]) -> Optional[ExecutorPlan]:
        """:meth:`get` for a *key* that :meth:`hit` did not find: a new plan from *build* (kept, the least
        recently used one evicted when full), or None when the library refused one recently or now."""
        self.misses += 1
        left = self.refused.get(key)
        if left is not None and left > 1:  # refused recently: one-shot, without asking again
            self.refused[key] = left - 1
            return None
        self.refused.pop(key, None)
        plan = build()
        try:
            plan.make_repeatable()
        except AclError as exc:
            plan.close()  # destroyed unrun: its description never enters the op cache
            self.last_refusal = str(exc)
            self.refused[key] = self.retry_after
            while len(self.refused) > self.refused_capacity:
                self.refused.popitem(last=False)
            return None
        if len(self.plans) >= self.capacity:
            before_evict()
            _, old = self.plans.popitem(last=False)
            old.close()
        self.plans[key] = plan
        return plan

    def clear(self) -> None:
        """Close every plan (the caller synchronised the stream first)."""
        first: Optional[Exception] = None
        while self.plans:
            _, plan = self.plans.popitem()
            try:
                plan.close()
            except Exception as exc:  # a refused release stays owned by its object (garbage collector net)
                first = first or exc
        if first is not None:
            raise first


def run_once(op: TwoPhaseOp, values: Sequence[Any], workspace: Callable[[int], Optional[int]], stream: Any,
             clock: Any = None) -> int:
    """Both phases of *op* once: phase 1, *workspace(size)* (an address of at least *size* bytes, or None),
    phase 2 on *stream*.  Returns the workspace size.

    *stream* is an :class:`~acl_bindings.Stream`, a raw ``aclrtStream`` (an int is its address), or a
    function returning one, called right before phase 2.  The aclTensors and aclIntArrays made for the
    call are destroyed after phase 2 is queued (phase 1 copied what it needs, cann-abi.md §1.3); an
    executor phase 2 never ran is destroyed.  Nothing is synchronised.
    """
    _check_values(op, values)
    made: list[Any] = []
    try:
        args = _phase1_args(op, values, made, False, True)
        keep = (*made, *(v for arg, v in zip(op.schema, values) if arg.is_tensor and type(v) is not TensorArg))
        size, executor = op.get_workspace_size(*args, keep=keep)
        try:
            address = workspace(size) if size > 0 else None
            raw = stream() if callable(stream) else stream
            op.execute(address, size, executor, c_void_p(raw) if isinstance(raw, int) else raw, clock=clock)
        finally:
            executor.close()  # only destroys an executor that phase 2 did not consume
    finally:
        run_all([obj.close for obj in reversed(made)])  # descriptors only: the memory belongs to the caller
    return size


def launch(op: TwoPhaseOp, values: Sequence[Any], *, plans: Optional[PlanCache], workspace: Workspace, stream: Any,
           before_evict: Callable[[], None], key: Optional[PlanKey] = None, clock: Any = None) -> tuple[int, str]:
    """One call of *op* on *stream*: a kept plan from *plans* (None: one-shot), else both phases.

    *before_evict* runs before a plan is evicted (it synchronises the stream when work may still use
    it).  *key* is ``plan_key(op, values)`` when the caller knows it already.  Returns ``(workspace
    size, path)``, the path being ``"plan"`` or ``"one-shot"``.
    """
    if plans is not None:
        if key is None:
            key = plan_key(op, values)
        plan = plans.hit(key) or plans.miss(key, lambda: ExecutorPlan(op, values), before_evict)
        if plan is not None:
            return plan.run(values, workspace, stream, clock), "plan"
    return run_once(op, values, workspace.reserve, stream, clock), "one-shot"
