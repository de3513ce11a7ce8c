"""Reusable plans: one repeatable executor per call shape, with addresses updated per call.

A plan is phase 1 done once.  Its executor is made repeatable
(``aclSetAclOpExecutorRepeatable``); later calls with the same shapes, strides,
sizes and scales only point the executor at the new device addresses
(``aclSetInputTensorAddr`` / ``aclSetOutputTensorAddr``) and run phase 2 with the
session's kept workspace.  When the library refuses repeatable mode, the key is
remembered and those calls stay one-shot.

Whether executor reuse is supported for this operator on real CANN is not
confirmed by public sources (cann-abi.md §0, "Executor reuse"); ``Session(plans=False)``
turns plans off, and tests/npu compares both paths on hardware.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Optional

from acl_bindings import AclError, Executor, IntArray, Tensor

from ._api import OP

if TYPE_CHECKING:
    from .session import DeviceArray

__all__ = ["Plan", "PlanCache", "plan_key"]

PlanKey = tuple[Any, ...]


def plan_key(go: DeviceArray, gi: DeviceArray, output_size: tuple[int, ...], input_size: tuple[int, ...],
             scales: tuple[float, float, float]) -> PlanKey:
    """Everything phase 1 depends on, except the device addresses (the storage dims too, as nnopbase's op cache)."""
    return (go.shape, go.dtype.str, go.layout, go.strides, go.offset, gi.shape, gi.dtype.str, gi.layout, gi.strides,
            gi.offset, output_size, input_size, scales, go.tensor.storage_dims, gi.tensor.storage_dims)


def _borrowed_tensor(arr: DeviceArray) -> Tensor:
    # the same description as the array's own tensor: 1-D storage of the whole buffer (cann-abi.md §8.1)
    return Tensor(arr.shape, arr.dtype, strides=arr.strides, offset=arr.offset, format=arr.tensor.format,
                  storage_dims=arr.tensor.storage_dims, address=arr.buffer.ptr)


class Plan:
    """Phase 1 of one call shape, with a repeatable executor (build with :meth:`PlanCache.get`)."""

    def __init__(self, go: DeviceArray, gi: DeviceArray, output_size: tuple[int, ...], input_size: tuple[int, ...],
                 scales: tuple[float, float, float]) -> None:
        self.go_tensor: Optional[Tensor] = None
        self.gi_tensor: Optional[Tensor] = None
        self.arrays: tuple[IntArray, ...] = ()
        self.executor: Optional[Executor] = None
        try:  # a failure at any step releases what the earlier steps created
            self.go_tensor = _borrowed_tensor(go)
            self.gi_tensor = _borrowed_tensor(gi)
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
    """At most *capacity* plans, least recently used evicted first."""

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self.plans: OrderedDict[PlanKey, Plan] = OrderedDict()
        self.refused: set[PlanKey] = set()
        self.hits = 0
        self.misses = 0

    def get(self, key: PlanKey, build: Callable[[], Plan], before_evict: Callable[[], None]) -> tuple[Plan, bool]:
        """The plan for *key*; ``(plan, repeatable)``.  A non-repeatable plan is for one call only."""
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
            self.hits += 1
            return plan, True
        self.misses += 1
        plan = build()
        if key in self.refused:
            return plan, False
        try:
            plan.make_repeatable()
        except AclError:
            self.refused.add(key)  # the library refuses reuse here: this key stays one-shot
            return plan, False
        if len(self.plans) >= self.capacity:
            before_evict()
            _, old = self.plans.popitem(last=False)
            old.close()
        self.plans[key] = plan
        return plan, True

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
