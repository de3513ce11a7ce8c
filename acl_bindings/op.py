"""Generic two-phase aclnn operators: :class:`TwoPhaseOp` declares both phases (``prototypes.two_phase_prototypes``)
from a name and an argument schema; its :class:`Executor` and :class:`Workspace` (how they run: docs/design.md)."""

from __future__ import annotations

import contextlib
import functools
from ctypes import c_double, c_uint64, c_void_p, cast, pointer
from enum import Enum
from typing import Any, NamedTuple, Sequence

from ._lib import destroy, lib, raise_for_status
from ._resource import Resource, lock_of, releases_allowed
from ._types import aclIntArray_p, aclOpExecutor_p, aclTensor_p
from .errors import ClosedError
from .memory import DeviceBuffer
from .meta import Tensor
from .prototypes import two_phase_prototypes
from .runtime import Device
from .streams import Stream

__all__ = ["TwoPhaseOp", "Executor", "Workspace", "Arg", "ArgKind", "input_tensor", "output_tensor", "int_array",
           "double"]


class ArgKind(Enum):
    """What one phase-1 argument is."""

    INPUT = "input tensor"  #: ``const aclTensor *``, input *k* of the executor (aclSetInputTensorAddr)
    OUTPUT = "output tensor"  #: ``aclTensor *``, output *k* of the executor (aclSetOutputTensorAddr)
    INT_ARRAY = "int array"  #: ``const aclIntArray *``
    DOUBLE = "double"  #: ``double``


#: The C type each kind of argument is passed as (cann-abi.md §1.2)
_CTYPES = {ArgKind.INPUT: aclTensor_p, ArgKind.OUTPUT: aclTensor_p, ArgKind.INT_ARRAY: aclIntArray_p,
           ArgKind.DOUBLE: c_double}


class Arg(NamedTuple):
    """One phase-1 argument of an operator's schema: its C name and kind."""

    name: str
    kind: ArgKind

    @property
    def is_tensor(self) -> bool:
        """Whether it is an aclTensor (input or output)."""
        return self.kind in (ArgKind.INPUT, ArgKind.OUTPUT)


def input_tensor(name: str) -> Arg:
    """An input ``const aclTensor *`` argument."""
    return Arg(name, ArgKind.INPUT)


def output_tensor(name: str) -> Arg:
    """An output ``aclTensor *`` argument."""
    return Arg(name, ArgKind.OUTPUT)


def int_array(name: str) -> Arg:
    """A ``const aclIntArray *`` argument."""
    return Arg(name, ArgKind.INT_ARRAY)


def double(name: str) -> Arg:
    """A ``double`` argument."""
    return Arg(name, ArgKind.DOUBLE)


class Executor(Resource):
    """An ``aclOpExecutor`` returned by phase 1, consumed by its first phase-2 run unless :meth:`make_repeatable`
    was called; ``close()`` destroys one never consumed."""

    _what = "executor"

    def __init__(self, handle: Any = None, workspace_size: int = 0, keep: tuple[Any, ...] = (), *,
                 slot: bool = False) -> None:
        self.workspace_size = int(workspace_size)
        self.repeatable = False
        #: A one-shot call's executor object, reused by each phase 1 (phase 2 empties it; ``close()`` ends it);
        #: internal to its call, so never passed to C as itself
        self.slot = slot
        self.runs = 0
        self._keep = keep  # tensors and arrays the executor refers to stay alive with it
        cell = self._arm(destroy, "aclDestroyAclOpExecutor")
        #: the executor as its pointer type: a view of the cell, so it shows what phase 1 writes there
        self.handle: Any = aclOpExecutor_p.from_buffer(cell)
        #: where phase 1 writes the executor (``aclOpExecutor **``): owned from the moment it returns
        self.out = pointer(self.handle)
        if handle:
            cell.value = cast(handle, c_void_p).value
        self._adopted()

    def _adopted(self) -> None:
        """The cell now holds the executor (or nothing): it is passed as itself from now on (not a slot)."""
        if not self.slot and self._cell is not None and self._cell.value:
            self._as_parameter_ = self.handle

    def make_repeatable(self) -> None:
        """Allow repeated phase-2 runs.  Wraps: aclSetAclOpExecutorRepeatable."""
        self._check_open()
        lib.aclSetAclOpExecutorRepeatable(self.handle)
        self.repeatable = True

    def set_input_address(self, index: int, tensor: Tensor, address: int) -> None:
        """Point input *index* (and *tensor*) at *address*.  Wraps: aclSetInputTensorAddr."""
        self._set_address("aclSetInputTensorAddr", index, tensor, address)

    def set_output_address(self, index: int, tensor: Tensor, address: int) -> None:
        """Point output *index* (and *tensor*) at *address*.  Wraps: aclSetOutputTensorAddr."""
        self._set_address("aclSetOutputTensorAddr", index, tensor, address)

    def _set_address(self, func: str, index: int, tensor: Tensor, address: int) -> None:
        # (a kept call re-points its plan on most calls: the unchecked function, its status checked here)
        cell = self._cell
        if cell is None or not cell.value:
            raise ClosedError(f"this {self._what} is closed")
        rc = lib.unchecked(func)(cell, index, tensor, address)
        if rc:
            raise_for_status(rc, func)
        tensor.address = int(address)

    def _consumed(self) -> None:
        """Phase 2 freed the executor (launch emptied its cell): forget it (a slot waits for the next one)."""
        if self.slot:
            return
        self.close()
        self._keep = ()

    def _drop(self) -> None:
        """Destroy an executor that will not run (a slot stays usable for the next phase 1)."""
        if not self.slot:
            self.close()
            return
        if self._cell is not None and self._cell.value:
            # (refused: it stays, and the next phase 1 into this slot retries it)
            destroy(self._cell, "aclDestroyAclOpExecutor")


#: Workspaces above 1 MiB grow in steps of 2 MiB: the Atlas A2/A3 backward asks for 16 MiB and a few bytes more
#: that vary with the shape (cann-abi.md §10.8), and regrowing for each would leave a block per size behind.
#: (torch_npu's caching allocator carves such blocks from segments of 2 MiB units too: PTA NPUCachingAllocator.cpp
#: kSmallSize, kRoundLarge, get_allocation_size.)
WORKSPACE_STEP = 2 << 20


def workspace_bytes(n: int) -> int:
    """The size a workspace of at least *n* bytes is made with: *n*, or above 1 MiB a multiple of
    :data:`WORKSPACE_STEP`."""
    return -(-n // WORKSPACE_STEP) * WORKSPACE_STEP if n > WORKSPACE_STEP // 2 else n


class Workspace:
    """A grow-only device workspace, ordered with one stream, of :func:`workspace_bytes`.

    With an *allocator* (a session's :class:`~acl_bindings.allocator.CachingAllocator`, and the stream's *clock*)
    an outgrown buffer goes back to its cache stream-ordered, and out of memory frees its idle blocks and retries.
    Without one, the buffer is a :class:`DeviceBuffer`, freed when outgrown after the stream was synchronised."""

    def __init__(self, device: Device, stream: Stream, *, allocator: Any = None, clock: Any = None) -> None:
        self.device = device
        self.stream = stream
        self.allocator = allocator
        self.clock = clock
        self.buffer: Any = None

    @property
    def nbytes(self) -> int:
        """Current capacity in bytes."""
        return 0 if self.buffer is None or self.buffer.closed else self.buffer.nbytes

    def reserve(self, n: int) -> int | None:
        """An address with at least *n* bytes, or None when *n* is 0."""
        if n <= 0:
            return None
        if self.buffer is not None and not self.buffer.closed and self.buffer.nbytes >= n:
            return self.buffer.ptr
        self.release()
        n = workspace_bytes(n)
        self.buffer = (DeviceBuffer(self.device, n) if self.allocator is None
                       else self.allocator.allocate(n, self.clock))
        return self.buffer.ptr

    def release(self) -> None:
        """Give the buffer back: to the allocator's cache (stream-ordered), or freed after the stream finished."""
        if self.buffer is not None and not self.buffer.closed:
            if self.allocator is None and not self.stream.closed and releases_allowed():
                self.stream.synchronize()  # (after aclFinalize or in a forked child: no)
            self.buffer.close()
        self.buffer = None


class TwoPhaseOp:
    """An aclnn two-phase operator: *name* without ``aclnn`` (``"UpsampleNearestExact3dBackward"``), *schema*
    phase 1's arguments in C order (:class:`Arg`) without the trailing ``workspaceSize`` and ``executor``.

    ``inputs``, ``outputs``: the schema positions of the input and output tensors; the *k*-th of each is the
    executor's input or output *k* (aclSetInputTensorAddr / aclSetOutputTensorAddr)."""

    def __init__(self, name: str, schema: Sequence[Arg]) -> None:
        self.name = name
        self.schema = tuple(schema)
        for arg in self.schema:
            if not isinstance(arg, Arg):
                raise TypeError(f"schema of {name}: expected Arg values (input_tensor(...), int_array(...), ...), "
                                f"got {arg!r}")
        #: for each argument, whether it is a tensor (read on every call: no property lookups)
        self.tensor_flags = tuple(a.is_tensor for a in self.schema)
        self.inputs = tuple(i for i, a in enumerate(self.schema) if a.kind is ArgKind.INPUT)
        self.outputs = tuple(i for i, a in enumerate(self.schema) if a.kind is ArgKind.OUTPUT)
        self.phase1_name = f"aclnn{name}GetWorkspaceSize"
        self.phase2_name = f"aclnn{name}"
        lib.declare(two_phase_prototypes(name, tuple(_CTYPES[a.kind] for a in self.schema)))

    def available(self) -> bool:
        """Whether the loaded operator libraries export both phases."""
        return lib.has(self.phase1_name) and lib.has(self.phase2_name)

    def get_workspace_size(self, *args: Any, keep: tuple[Any, ...] = ()) -> tuple[int, Executor]:
        """Phase 1: ``(workspace_size, executor)``, the executor keeping *keep* alive; AclError on a non-zero status."""
        size = c_uint64()
        executor = Executor(None, 0, keep)  # its cell is owned before phase 1 writes the handle into it
        try:
            with lock_of(args):  # (the handles' close() waits for it)
                getattr(lib, self.phase1_name)(*args, size, executor.out)  # (size: the cell itself)
            executor._adopted()
        except BaseException:
            executor._undo()  # (an interrupt after phase 1 wrote it: destroyed now)
            raise
        return self._result(int(size.value), executor)

    def refill(self, slot: Executor, args: Sequence[Any], size: c_uint64) -> tuple[int, Executor]:
        """Phase 1 into a one-shot call's *slot* on *args*, the C values of descriptors the caller owns (holding
        their lock), writing the workspace size into *size*.  As :meth:`get_workspace_size`."""
        slot._drop()  # (one that an interrupt left unrun)
        rc = self._phase1(*args, size, slot._cell)  # (the cells themselves: written in place)
        if rc:
            with contextlib.suppress(Exception):  # (phase 1's error is reported; the next phase 1 retries the drop)
                slot._drop()
            raise_for_status(rc, self.phase1_name)
        return self._result(int(size.value), slot)

    @staticmethod
    def _result(size: int, executor: Executor) -> tuple[int, Executor]:
        if executor.closed:  # phase 1 succeeded with nothing to run
            return size, _NullExecutor(size)
        executor.workspace_size = size
        return size, executor

    def execute(self, workspace: int | None, workspace_size: int, executor: Executor, stream: Stream | Any, *,
                clock: Any = None) -> None:
        """Phase 2 on *stream*, from any thread: a :class:`~acl_bindings.Stream`'s device is made current for it (a
        raw stream is passed as it is).  See :meth:`launch`."""
        if isinstance(stream, Stream):
            with lock_of((executor, stream)), stream.device.active():
                stream._check_open()
                self.launch(workspace, workspace_size, executor, stream._as_parameter_, clock)
        else:
            with lock_of((executor,)):
                self.launch(workspace, workspace_size, executor, stream, clock)

    def launch(self, workspace: int | None, workspace_size: int | c_uint64, executor: Executor, stream: Any,
               clock: Any = None) -> None:
        """The package's one phase-2 call; the caller holds the executor's lock, with the raw *stream*'s device
        current.  A single-use executor is consumed, success or not.  *clock* (a StreamClock) counts the work."""
        cell = executor._cell
        if cell is None:  # phase 1 gave nothing to run (a _NullExecutor)
            return
        if not cell.value:  # (under its lock: a close() on another thread went first)
            raise ClosedError("this executor is closed")
        if clock is not None:
            clock.queued()
        address = workspace or None  # (an int for the void*: ctypes converts it)
        if executor.repeatable:  # it outlives the call: its close() waits for the lock
            rc = self._phase2(address, workspace_size, cell, stream)
        else:  # consumed whether or not it succeeds: forgotten right before the call (as in release_cell)
            phase2, handle, called = self._phase2, cell.value, False
            try:
                cell.value = None
                called = True
                rc = phase2(address, workspace_size, handle, stream)
            except BaseException:
                if not called:  # (interrupted before the call: still owned, destroyed unrun by its close)
                    cell.value = handle
                raise
            executor._consumed()
        executor.runs += 1
        if rc:
            raise_for_status(rc, self.phase2_name)

    @functools.cached_property
    def _phase1(self) -> Any:
        """Phase 1's unchecked C function (bound on first use)."""
        return lib.unchecked(self.phase1_name)

    @functools.cached_property
    def _phase2(self) -> Any:
        """Phase 2's unchecked C function (bound on first use)."""
        return lib.unchecked(self.phase2_name)

    def __repr__(self) -> str:
        return f"<TwoPhaseOp aclnn{self.name}>"


class _NullExecutor(Executor):
    """Phase 1 succeeded without an executor (nothing to run)."""

    def __init__(self, workspace_size: int) -> None:  # noqa: D107 - no handle to own
        self.handle = None
        self.workspace_size = workspace_size
        self.repeatable = True
        self.runs = 0
        self._keep = ()
