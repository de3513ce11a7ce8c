"""Reusable plans: one repeatable executor per call shape, with addresses updated per call.

A plan is phase 1 done once.  Its executor is made repeatable
(``aclSetAclOpExecutorRepeatable``); later calls with the same shapes, strides,
sizes and scales only point the executor at the new device addresses
(``aclSetInputTensorAddr`` / ``aclSetOutputTensorAddr``) and run phase 2 with the
session's kept workspace.

nnopbase's op cache (cann-abi.md §8.6) answers phase 1 of a call shape that already ran
one-shot with a cache wrapper, which ``aclSetAclOpExecutorRepeatable`` refuses (561000).
The op cache keys on each tensor's storage shape (OPB ``common/utils/op_cache.cpp``), so a
plan's tensors declare their storage 2-D, ``(1, n)``: the very elements of the one-shot
description ``(n,)``, under a key of their own.  A plan therefore still serves a shape whose
first call was one-shot.  When the library refuses repeatable mode all the same, the refused
executor is destroyed unrun (so the plan's description never enters the op cache) and the call
runs one-shot; the refusal is remembered for :attr:`PlanCache.retry_after` calls of that key,
in a table of at most :attr:`PlanCache.refused_capacity` keys, and its reason is kept in
:attr:`PlanCache.last_refusal`.

Whether executor reuse is supported for this operator on real CANN is not
confirmed by public sources (cann-abi.md §0, "Executor reuse"); ``Session(plans=False)``
turns plans off, and tests/npu compares both paths on hardware.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from acl_bindings import AclError, Executor, IntArray, Tensor

from ._api import OP

if TYPE_CHECKING:
    from .session import DeviceArray

__all__ = ["ExecutorPlan", "PlanCache", "PlanKey", "plan_key", "plan_storage", "borrowed_tensor"]


class PlanKey(NamedTuple):
    """Everything phase 1 depends on, except the device addresses (the storage dims too, as nnopbase's op cache)."""

    grad_out: tuple[Any, ...]
    grad_in: tuple[Any, ...]
    output_size: tuple[int, ...]
    input_size: tuple[int, ...]
    scales: tuple[float, float, float]


def _array_key(arr: DeviceArray) -> tuple[Any, ...]:
    return (arr.shape, arr.dtype.str, arr.layout, arr.strides, arr.offset, arr.storage_dims)


def plan_key(go: DeviceArray, gi: DeviceArray, output_size: tuple[int, ...], input_size: tuple[int, ...],
             scales: tuple[float, float, float]) -> PlanKey:
    """The :class:`PlanKey` of one call."""
    return PlanKey(_array_key(go), _array_key(gi), output_size, input_size, scales)


def plan_storage(storage_dims: tuple[int, ...]) -> tuple[int, ...]:
    """A plan's storage description: the same elements as *storage_dims*, with a leading 1 (see the module doc)."""
    return (1, *storage_dims)


def borrowed_tensor(arr: DeviceArray, plan: bool = True) -> Tensor:
    """An aclTensor over *arr*'s memory, which it does not own: the array's whole buffer (cann-abi.md §8.1),
    in a plan's own storage description when *plan* (see the module doc), else the array's."""
    storage = plan_storage(arr.storage_dims) if plan else tuple(arr.storage_dims)
    return Tensor(arr.shape, arr.dtype, strides=arr.strides, offset=arr.offset, format=arr.acl_format,
                  storage_dims=storage, address=arr.buffer.ptr)


class ExecutorPlan:
    """Phase 1 of one call shape, with a repeatable executor (build with :meth:`PlanCache.get`)."""

    def __init__(self, go: DeviceArray, gi: DeviceArray, output_size: tuple[int, ...], input_size: tuple[int, ...],
                 scales: tuple[float, float, float]) -> None:
        self.go_tensor: Optional[Tensor] = None
        self.gi_tensor: Optional[Tensor] = None
        self.arrays: tuple[IntArray, ...] = ()
        self.executor: Optional[Executor] = None
        try:  # a failure at any step releases what the earlier steps created
            self.go_tensor = borrowed_tensor(go)
            self.gi_tensor = borrowed_tensor(gi)
            self.arrays = (IntArray(output_size),)
            self.arrays += (IntArray(input_size),)
            self.workspace_size, self.executor = OP.get_workspace_size(
                self.go_tensor, self.arrays[0], self.arrays[1], *scales, self.gi_tensor)
        except BaseException:
            self.close()
            raise
        self.runs = 0

    def make_repeatable(self) -> None:
        """Ask the library for a repeatable executor (raises AclError when it refuses)."""
        assert self.executor is not None
        self.executor.make_repeatable()

    def run(self, go: DeviceArray, gi: DeviceArray, workspace: Any, stream: Any) -> int:
        """Point the executor at *go* and *gi* and queue phase 2.  Returns the workspace size."""
        assert self.executor is not None and self.go_tensor is not None and self.gi_tensor is not None
        if go.buffer.ptr != self.go_tensor.address:
            self.executor.set_input_address(0, self.go_tensor, go.buffer.ptr)
        if gi.buffer.ptr != self.gi_tensor.address:
            self.executor.set_output_address(0, self.gi_tensor, gi.buffer.ptr)
        OP.execute(workspace.reserve(self.workspace_size), self.workspace_size, self.executor, stream)
        self.runs += 1
        return self.workspace_size

    def close(self) -> None:
        """Destroy the executor, then the tensors and arrays it refers to (each attempted; first error raised)."""
        first: Optional[Exception] = None
        for obj in (self.executor, self.go_tensor, self.gi_tensor, *self.arrays):
            try:
                if obj is not None:
                    obj.close()
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


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

    def get(self, key: PlanKey, build: Callable[[], ExecutorPlan],
            before_evict: Callable[[], None]) -> Optional[ExecutorPlan]:
        """The plan for *key*, or None when this call must run one-shot (the library refused a plan)."""
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
            self.hits += 1
            return plan
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
