"""The call engine: one :class:`Call` per call shape of a declared operator, the bounded :class:`CallCache`, and
:func:`run_once` (both phases on memory the caller owns).  Plans, one-shot runs, the op cache: docs/design.md."""

from __future__ import annotations

from collections import OrderedDict
from ctypes import c_double, c_uint64, c_void_p
from typing import Any, Callable, Optional, Protocol, Sequence

from ._resource import run_all
from .enums import Format
from .errors import AclError, ClosedError
from .meta import IntArray, Tensor, TensorArg
from .op import ArgKind, Executor, TwoPhaseOp

__all__ = ["Call", "CallCache", "plan_key", "plan_storage", "borrowed_tensor", "run_once", "run_all",
           "check_values"]

class Reserves(Protocol):
    """Where a run's workspace comes from: a session's :class:`~acl_bindings.op.Workspace`, or a borrowed one."""

    def reserve(self, n: int) -> Optional[int]:
        """An address of at least *n* bytes, stream-ordered with the run's stream, or None for 0."""


def plan_key(op: TwoPhaseOp, values: Sequence[Any]) -> tuple[Any, ...]:
    """The key of one call shape of *op*: its name, then each value in schema order, a device array's as its
    ``key`` (everything phase 1 reads of it but the address: the storage dims too, as nnopbase's op cache)."""
    return (op.name, *[v.key if tensor else v for tensor, v in zip(op.tensor_flags, values)])


def plan_storage(storage_dims: tuple[int, ...]) -> tuple[int, ...]:
    """A plan's storage description: *storage_dims* with a leading 1 (its own op-cache key: docs/design.md)."""
    return (1, *storage_dims)


def borrowed_tensor(desc: TensorArg, plan: bool = True) -> Tensor:
    """An aclTensor over *desc*'s memory (not owned), in a plan's storage description when *plan*, else *desc*'s."""
    storage = plan_storage(desc.storage_dims) if plan else tuple(desc.storage_dims)
    return Tensor(desc.shape, desc.dtype, strides=desc.strides, offset=desc.offset, format=Format(desc.format),
                  storage_dims=storage, address=desc.address)


def check_values(op: TwoPhaseOp, values: Sequence[Any]) -> None:
    """TypeError unless *values* has one value per argument of *op*'s schema."""
    if len(values) != len(op.schema):
        raise TypeError(f"{op.phase1_name}: expected {len(op.schema)} arguments "
                        f"({', '.join(a.name for a in op.schema)}), got {len(values)}")


def _owned(obj: Any, lock: Any) -> Any:
    """*obj*, used under its owner's *lock* from now on (None: the process lock)."""
    if lock is not None:
        obj._lock = lock
    return obj


class _Descriptors:
    """One call shape's aclTensors and aclIntArrays, and phase 1's arguments; a failure closes what was made."""

    def __init__(self, op: TwoPhaseOp, values: Sequence[Any], plan: bool, lock: Any = None) -> None:
        self.objects: list[Any] = []  # tensors and int arrays, in schema order
        self.args: list[Any] = []
        self.lock = lock
        try:
            for arg, v in zip(op.schema, values):
                if arg.is_tensor:
                    self.objects.append(borrowed_tensor(v.arg, plan))
                elif arg.kind is ArgKind.INT_ARRAY:
                    self.objects.append(IntArray(v))
                else:
                    self.args.append(float(v))
                    continue
                self.args.append(_owned(self.objects[-1], lock))
            #: phase 1's C values (what ctypes passes for each argument): a one-shot run converts nothing
            self.raw = [c_double(a) if isinstance(a, float) else a._as_parameter_ for a in self.args]
        except BaseException:
            self.close()
            raise

    def replace(self, pos: int, tensor: Tensor) -> Tensor:
        """Use *tensor* at schema position *pos*; returns the replaced one (the caller closes it)."""
        old = self.args[pos]
        self.args[pos], self.objects[self.objects.index(old)] = tensor, _owned(tensor, self.lock)
        self.raw[pos] = tensor._as_parameter_
        return old

    def close(self) -> None:
        """Close every descriptor (a refused one stays owned: closing again retries it)."""
        run_all([obj.close for obj in reversed(self.objects)])


class Call:
    """One call shape of *op*, made from *values* (in schema order); the caller holds its owner's lock, with the
    device current, for every method.

    Attributes: ``plan`` (a repeatable executor, else one-shot), ``fallback`` (a refused plan's error, else None),
    ``workspace_size`` (the latest phase 1's), ``calls`` (completed runs), ``checked`` (set by an operator package
    whose host checks passed: a repeat may skip them), ``kept`` (values whose arrays it keeps), ``retry_after``
    (one-shot runs before a refused plan is asked for again, 64)."""

    retry_after = 64

    def __init__(self, op: TwoPhaseOp, values: Sequence[Any], *, plan: bool = True, probe: bool = False,
                 lock: Any = None) -> None:
        check_values(op, values)
        self.op = op
        self._lock = lock  # the owner's: the objects it makes are used under it
        self.plan = False
        self.fallback: Optional[str] = None
        self._size = c_uint64()  # the latest phase 1's workspace size, passed to phase 2 as itself
        self.calls = 0
        self.checked = False
        #: values (schema order) the owner keeps with this call shape for its next call of it, or None; the device
        #: arrays among them are closed with the call
        self.kept: Optional[tuple[Any, ...]] = None
        self._retry_left = 0
        self._values = [v.arg if tensor else v for tensor, v in zip(op.tensor_flags, values)]
        self._descriptors: Optional[_Descriptors] = None
        self._executor: Optional[Executor] = None  # the plan's, or the one-shot runs' slot
        self._stale: list[Any] = []  # objects whose release the library refused: close() retries them
        self._positions = tuple(op.inputs) + tuple(op.outputs)
        if plan:
            self._make_plan()
        if not self.plan:
            self._make_oneshot(probe)

    def _make_plan(self) -> None:
        """Plan descriptors, phase 1, a repeatable executor; a refusal sets fallback (executor destroyed unrun)."""
        made = _Descriptors(self.op, self._values, True, self._lock)
        executor: Optional[Executor] = None
        try:
            size, executor = self.op.get_workspace_size(*made.args, keep=tuple(made.objects))
            _owned(executor, self._lock)
            if not executor.repeatable:  # (phase 1 with nothing to run gives an executor that needs no mode)
                executor.make_repeatable()
        except BaseException as exc:
            run_all([*([executor.close] if executor is not None else []), made.close])
            if executor is None or not isinstance(exc, AclError):
                raise
            self.fallback = str(exc)  # a refused plan (phase 1 gave an executor)
            self._retry_left = self.retry_after
            return
        old = [self._executor, self._descriptors]
        self._descriptors, self._executor = made, executor
        self._size.value, self.plan, self.fallback = size, True, None
        self._stale += [obj for obj in old if obj is not None]
        self._release_stale()

    def _make_oneshot(self, probe: bool) -> None:
        """Descriptors in the values' own storage; with *probe*, phase 1 once, its executor destroyed unrun."""
        made = _Descriptors(self.op, self._values, False, self._lock)
        slot = _owned(Executor(keep=(made,), slot=True), self._lock)
        if probe:
            try:
                _, executor = self.op.refill(slot, made.raw, self._size)
                executor._drop()
            except BaseException:
                run_all([slot.close, made.close])
                raise
        self._descriptors, self._executor = made, slot

    def _release_stale(self, caught: type[Exception] = AclError) -> Optional[Exception]:
        """Close what was replaced; one whose release fails with *caught* (a refusal) stays, for :meth:`close`.
        Returns the first such error."""
        first: Optional[Exception] = None
        for obj in list(self._stale):
            try:
                obj.close()
            except caught as exc:
                first = first or exc
                continue
            self._stale.remove(obj)
        return first

    def run(self, values: Sequence[Any], workspace: Reserves, stream: Any, clock: Any = None) -> int:
        """Queue one run on *values* (this shape; device arrays at any addresses, ClosedError for one whose memory
        was released) on the open *stream*; returns the workspace size."""
        descriptors, slot = self._descriptors, self._executor
        assert descriptors is not None and slot is not None, "closed"
        if self.plan:  # (as run_at, inline: the hot path of plans and kept calls)
            args = descriptors.args
            for pos in self._positions:
                address = values[pos].buffer.ptr
                if address != args[pos].address:
                    self._repoint(pos, args[pos], address)
            size = self._size.value
            self.op.launch(workspace.reserve(size), self._size, slot, stream._as_parameter_, clock)
            self.calls += 1
            return size
        for pos in self._positions:
            if values[pos].buffer.ptr != descriptors.args[pos].address:
                self._renew(pos, values[pos])
        size, executor = self.op.refill(slot, descriptors.raw, self._size)
        try:
            address = workspace.reserve(size)
        except BaseException:
            executor._drop()  # never run: destroyed (cann-abi.md §1.3)
            raise
        self.op.launch(address, self._size, executor, stream._as_parameter_, clock)
        self.calls += 1
        if self._retry_left:  # a plan was refused: asked again after retry_after one-shot runs
            self._retry_left -= 1
            if not self._retry_left:
                self._retry_plan()
        return size

    def run_at(self, addresses: Sequence[int], workspace: Reserves, stream: Any, clock: Any = None) -> int:
        """:meth:`run` of a plan (``plan`` true) with its tensors, inputs then outputs, at device *addresses*
        (ClosedError for 0); a kept caller's repeat, which has the addresses and no device arrays."""
        descriptors, executor = self._descriptors, self._executor
        assert descriptors is not None and executor is not None and self.plan, "not an open plan"
        for pos, address in zip(self._positions, addresses):
            tensor = descriptors.args[pos]
            if address != tensor.address:  # (the tensor's is 0 once its memory was released)
                self._repoint(pos, tensor, address)
        size = self._size.value
        self.op.launch(workspace.reserve(size), self._size, executor, stream._as_parameter_, clock)
        self.calls += 1
        return size

    def _repoint(self, pos: int, tensor: Tensor, address: int) -> None:
        """Point the plan's tensor at *pos* at *address* (ClosedError for 0: memory released)."""
        if not address:
            raise ClosedError(f"{self.op.schema[pos].name}: this device array is closed")
        assert self._executor is not None
        tensor.address = -1  # unknown until the library confirms the new one
        if pos in self.op.inputs:
            self._executor.set_input_address(self.op.inputs.index(pos), tensor, address)
        else:
            self._executor.set_output_address(self.op.outputs.index(pos), tensor, address)

    def _renew(self, pos: int, array: Any) -> None:
        """A one-shot call's tensor at *pos*, made anew over *array*'s memory (ClosedError once it was released)."""
        descriptors = self._descriptors
        assert descriptors is not None
        if not array.buffer.ptr:
            raise ClosedError(f"{self.op.schema[pos].name}: this device array is closed")
        new = array.arg
        old = descriptors.replace(pos, borrowed_tensor(new, plan=False))
        self._values[pos] = new
        try:
            old.close()
        except AclError:
            self._stale.append(old)
            raise

    def _retry_plan(self) -> None:
        try:
            self._make_plan()
        except AclError as exc:  # not only a refusal: the one-shot path still works
            self.fallback = str(exc)
            self._retry_left = self.retry_after

    @property
    def workspace_size(self) -> int:
        """Bytes of workspace the latest phase 1 asked for."""
        return int(self._size.value)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` released everything."""
        return self._descriptors is None and self._executor is None and not self._stale

    def take_kept(self) -> list[Any]:
        """Forget ``kept``; returns the device arrays among its values (the tensors that can be closed), for the
        caller to close."""
        kept, self.kept = self.kept or (), None
        return [v for tensor, v in zip(self.op.tensor_flags, kept) if tensor and hasattr(v, "close")]

    def close(self) -> None:
        """Destroy the executor, then the descriptors, then the kept arrays; a refused release stays owned for the
        next close() to retry.  Raises the first error."""
        self._stale += [obj for obj in (self._executor, self._descriptors) if obj is not None] + self.take_kept()
        self._executor = self._descriptors = None
        first = self._release_stale(Exception)
        if first is not None:
            raise first


class CallCache:
    """At most *capacity* :class:`Call` objects by :func:`plan_key`, least recently used evicted first.

    Attributes: ``capacity``, ``hits``, ``misses``, ``last_refusal`` (the latest refused plan's error text)."""

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self.calls: OrderedDict[tuple[Any, ...], Call] = OrderedDict()
        self.last_refusal: Optional[str] = None
        self.hits = 0
        self.misses = 0

    @property
    def retry_after(self) -> int:
        """One-shot runs of a refused plan before it is asked for again (:attr:`Call.retry_after`)."""
        return Call.retry_after

    def get(self, key: tuple[Any, ...]) -> Optional[Call]:
        """The kept call for *key* (now the most recently used), or None."""
        call = self.calls.get(key)
        if call is not None:
            if call._descriptors is None:  # (its close began: an interrupted clear() left it for the next one)
                return None
            self.calls.move_to_end(key)
            self.hits += 1
        return call

    def add(self, key: tuple[Any, ...], call: Call, before_evict: Callable[[], None]) -> Call:
        """Keep *call* for *key*; when full, *before_evict* runs (it synchronises the stream when work may still
        use the evicted call's executor), then the least recently used call is closed."""
        self.misses += 1
        if call.fallback is not None:
            self.last_refusal = call.fallback
        while len(self.calls) >= self.capacity:
            before_evict()
            self._drop(next(iter(self.calls)))
        self.calls[key] = call
        return call

    def _drop(self, key: tuple[Any, ...]) -> None:
        """Close the call of *key*, then let it go.  It is closed while it is still here (an interrupt leaves it
        for the next eviction or clear()); a refused release stays with the call, to retry, and the cache lets it
        go."""
        try:
            self.calls[key].close()
        except Exception:
            del self.calls[key]
            raise
        del self.calls[key]

    def __len__(self) -> int:
        return len(self.calls)

    def clear(self) -> None:
        """Close every call (the caller synchronised the stream first); the first error is raised.  Each call leaves
        the cache once its close ran: after an interrupt, the rest are still here for the next clear()."""
        first: Optional[Exception] = None
        for key in list(self.calls):
            try:
                self._drop(key)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


def run_once(op: TwoPhaseOp, values: Sequence[Any], workspace: Callable[[int], Optional[int]], stream: Any,
             clock: Any = None) -> int:
    """Both phases of *op* once, on memory the caller owns: phase 1, *workspace(size)* (an address of at least
    *size* bytes, or None), phase 2 on *stream*; nothing is synchronised.  Returns the workspace size.

    *stream* is an :class:`~acl_bindings.Stream`, a raw ``aclrtStream`` (an int is its address), or a function
    returning one, called right before phase 2."""
    check_values(op, values)
    made = _Descriptors(op, values, False)
    try:
        size, executor = op.get_workspace_size(*made.args, keep=tuple(made.objects))
        try:
            address = workspace(size) if size > 0 else None
            raw = stream() if callable(stream) else stream
            op.execute(address, size, executor, c_void_p(raw) if isinstance(raw, int) else raw, clock=clock)
        finally:
            executor.close()  # only destroys an executor that phase 2 did not consume
    finally:
        made.close()
    return size
