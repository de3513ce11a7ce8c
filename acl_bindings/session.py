"""The generic Session: a device, its stream, a reusable workspace, a caching allocator and the device arrays it
makes; it runs any declared operator (docs/design.md)."""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any, Callable, Optional, Sequence, TypeVar

import numpy as np

from ._lib import lib, raise_for_status
from ._loader import load as load_backend
from ._resource import releases_allowed, run_all
from .allocator import CachingAllocator, PooledBuffer, StreamClock
from .arrays import DeviceArray, check_extent, offset_in_base, positive_strides
from .engine import Call, CallCache, check_values, plan_key
from .enums import MemcpyKind
from .errors import AclnnParamError, ClosedError
from .memory import host_bytes, host_span
from .meta import contiguous_strides
from .op import ArgKind, TwoPhaseOp, Workspace
from .prepared import PreparedCall
from .runtime import Device
from .streams import Stream
from .values import int_tuple

__all__ = ["Session", "PreparedCall", "DeviceArray", "check_extent"]

_A = TypeVar("_A", bound="DeviceArray")
_S = TypeVar("_S", bound="Session")


class Session:
    """Owns device *device_id*, one stream on it, a reusable workspace, a caching allocator and the arrays it makes.

    *plans*: keep a repeatable executor per call shape and only update addresses on later calls; False: every
    call runs both phases.  A context manager: ``close()`` releases everything it created, in reverse order,
    after the stream has finished.  ``repr()`` names the backend (real CANN or the simulator)."""

    #: The class of the arrays the session makes
    array_type: type[DeviceArray] = DeviceArray

    def __init__(self, device_id: int = 0, *, plans: bool = True) -> None:
        self._closed = True
        self.use_plans = plans
        #: The kept :class:`~acl_bindings.engine.Call` of each call shape (plans, and one-shot calls)
        self.plans = CallCache()
        self._arrays: weakref.WeakSet[DeviceArray] = weakref.WeakSet()
        self._prepared: set[Any] = set()  # owned until their close() or the session's (dropped ones too)
        self._host: dict[Any, tuple[Any, Call]] = {}  # a host call's key -> its plan key and kept Call (_keep_host)
        self._lock = threading.RLock()
        #: When work on the stream is known done (the caching allocator reuses blocks by it)
        self.clock = StreamClock()
        self.backend = load_backend()
        self.device = Device(device_id)
        self.device._lock = self._lock  # (what the session owns is used under its lock: acl_bindings._resource)
        #: The device memory of the session's arrays and temporaries, cached between calls
        self.allocator = CachingAllocator(self.device, lock=self._lock)
        try:
            # stored before its handle is made: an interrupt anywhere after finds it, to close it before the device
            # (a stream made but not yet stored would outlive the reset that destroys it: docs/design.md, Ctrl-C)
            self.stream = Stream.__new__(Stream)
            self.stream._make(self.device)
            self.stream._lock = self._lock
            self.clock.synchronize = _synchronizer(self.stream)
            self.workspace = Workspace(self.device, self.stream, allocator=self.allocator, clock=self.clock)
        except BaseException:
            if isinstance(self.__dict__.get("stream"), Stream):
                self.stream.close()  # (closed already when it was never made)
            self.device.close()
            raise
        self._closed = False
        self.calls = 0
        self.last_workspace_size = 0
        #: Which path the latest call took: ``"plan"`` (a repeatable executor) or ``"one-shot"`` (both phases)
        self.last_path = ""

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this Session is closed")

    def _active(self) -> Any:
        """The device guard of a public call (:meth:`acl_bindings.Device.active`); ClosedError once closed."""
        self._check_open()
        return self.device.active()

    def close(self) -> None:
        """Synchronise, then release prepared calls, arrays, plans, workspace, stream and device; idempotent.  Every
        release is attempted (the first error is raised), the device reset only once nothing needs it: after a
        failure another ``close()`` finishes the job."""
        with self._lock:
            if self._closed and self.device.closed:
                return
            # (after aclFinalize, or in a forked child: nothing to wait for, nothing is released)
            steps: list[Callable[[], Any]] = ([] if self.stream.closed or not releases_allowed()
                                              else [self.stream.synchronize])
            steps += [call.close for call in list(self._prepared)]
            steps += [arr.close for arr in list(self._arrays)]
            steps += [self._mark_closed, self.plans.clear, self.workspace.release, self.allocator.release_all,
                      self.stream.close, self._reset_device]
            run_all(steps)

    def _mark_closed(self) -> None:
        self._closed = True
        self.clock.done = self.clock.launched  # (synchronised by close() first)

    def _reset_device(self) -> None:
        # a stream, workspace or array the library refused to release still needs the device
        if (self.stream.closed and self.workspace.buffer is None and not self.allocator.holds_memory
                and all(a.closed for a in list(self._arrays))
                and all(call._call.closed for call in list(self._prepared))):
            self.device.close()

    def __enter__(self: _S) -> _S:
        self._check_open()  # (a closed session refuses with)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "simulator" if self.backend.is_simulator else "CANN"
        state = "closed" if self._closed else "open"
        return f"<Session device={self.device.id} backend={self.backend.kind} ({kind}) {state}>"

    def synchronize(self) -> None:
        """Wait for all work queued on the session's stream (under its lock: the stream cannot close under it)."""
        with self._lock, self._active():
            self.clock.sync()

    def _sync(self) -> None:
        with self.device.active():  # (inside a call's own guard: a thread-local test, no C call)
            self.clock.sync()

    def empty_cache(self) -> None:
        """Release the device memory kept for reuse, the workspace included (after the stream used it)."""
        with self._lock, self._active():
            self._sync()
            self.workspace.release()  # (kept between calls: it is memory no call uses now)
            self._host.clear()
            # the arrays kept for host calls (_keep_host) go back first
            run_all([arr.close for call in self.plans.calls.values() for arr in call.take_kept()])
            self.allocator.empty_cache()

    def _sync_if_pending(self) -> None:
        if self.clock.pending:
            self._sync()

    def _upload_host(self, array: np.ndarray, layout: str, param: str, func: str) -> DeviceArray:
        """Copy the numpy *array* up with its strides and offset, from its base's start where that prefix is no
        larger than its span (no host copy); errors name *func*."""
        strides = positive_strides(array, param, func)
        addr, nbytes = host_span(array)
        item = array.itemsize
        if addr % item:
            raise AclnnParamError(161002, func,
                                  f"{param}: data address {addr:#x} is not aligned to its item size {item}")
        lead = offset_in_base(array, addr)
        if lead > nbytes or lead % item:
            lead = 0
        total = max(lead + nbytes, item)
        buf = self.allocator.allocate(total, self.clock)
        try:
            if nbytes:
                buf.upload(host_bytes(addr - lead, lead + nbytes))
        except BaseException:
            buf.close()
            raise
        return self._adopt(buf, tuple(int(n) for n in array.shape), array.dtype, layout, strides, lead // item)

    def _adopt(self, buf: PooledBuffer, shape: tuple[int, ...], dtype: Any, layout: str, strides: tuple[int, ...],
               offset: int) -> DeviceArray:
        """Wrap *buf* in a DeviceArray the session owns (the buffer is closed if that fails)."""
        try:
            arr = self.array_type(self, buf, shape, dtype, layout, strides, offset)
        except BaseException:
            buf.close()
            raise
        with self._lock:
            self._arrays.add(arr)
        return arr

    def _empty_contiguous(self, shape: tuple[int, ...], dtype: np.dtype, layout: str) -> DeviceArray:
        """A contiguous, uninitialised device array (*shape* checked by the caller)."""
        nbytes = max(math.prod(shape) * dtype.itemsize, dtype.itemsize)
        return self._adopt(self.allocator.allocate(nbytes, self.clock), shape, dtype, layout,
                           contiguous_strides(shape), 0)

    def run(self, op: TwoPhaseOp, *values: Any) -> int:
        """Queue one call of any declared operator *op* on the session's stream (no host checks, no sync); returns
        the workspace size.  *values* in schema order: a :class:`DeviceArray` of this session per tensor, a
        sequence of ints per int array, a float per double (:meth:`values_of`)."""
        with self._lock, self._active():
            size = self._run(op, self.values_of(op, values)).workspace_size
        return size

    def values_of(self, op: TwoPhaseOp, values: Sequence[Any]) -> list[Any]:
        """*values* checked against *op*'s schema: open device arrays of this session for the tensors (161002
        naming the argument otherwise), tuples of ints, floats."""
        check_values(op, values)
        converted: list[Any] = []
        for arg, value in zip(op.schema, values):
            if arg.is_tensor:
                self.own_array(value, arg.name, op.phase1_name)
                converted.append(value)
            elif arg.kind is ArgKind.INT_ARRAY:
                converted.append(int_tuple(value, arg.name, op.phase1_name))
            else:
                converted.append(float(value))
        return converted

    def own_array(self, value: Any, param: str, func: str) -> None:
        """161002 naming *param* unless *value* is an open :class:`DeviceArray` of this session (ClosedError when
        it is closed)."""
        if not isinstance(value, DeviceArray):
            raise AclnnParamError(161002, func, f"{param}: expected a DeviceArray, got {type(value).__name__}")
        value._check_open()
        if value.session is not self:
            raise AclnnParamError(161002, func, f"{param}: this DeviceArray belongs to another Session (device "
                                                f"{value.session.device.id}); upload the data to this one")

    def _run(self, op: TwoPhaseOp, values: Sequence[Any], call: Optional[Call] = None) -> Call:
        """Run *call*, else the kept (or a new) Call of the values' shape; lock held, device current."""
        if call is None:
            key = plan_key(op, values)
            call = self.plans.get(key)
            if call is None:
                call = self.plans.add(key, Call(op, values, plan=self.use_plans, lock=self._lock),
                                      self._sync_if_pending)
        size = call.run(values, self.workspace, self.stream, self.clock)
        self.calls += 1
        self.last_workspace_size = size
        self.last_path = "plan" if call.plan else "one-shot"
        return call

    def _host_repeat(self, key: Any, op: TwoPhaseOp, array: np.ndarray) -> Optional[np.ndarray]:
        """A repeat of a one-call form on a C-contiguous numpy *array* (numpy out) whose *key* (everything its host
        checks read) passed them before: the kept call and arrays (:meth:`_keep_host`), one copy up, the launch,
        one copy down.  None when nothing is kept for *key*: the caller runs the full call."""
        entry = self._host.get(key)
        if entry is None:
            return None
        addr, nbytes = array.__array_interface__["data"][0], array.nbytes  # (C-contiguous: the key says so)
        if addr % array.itemsize:  # (not in the key: the full call refuses it, naming the address)
            return None
        with self._lock, self._active():
            pkey, call = entry
            values = call.kept
            if values is None or self.plans.get(pkey) is not call:  # evicted or emptied: its arrays went with it
                del self._host[key]
                return None
            self._sync_if_pending()  # (an interrupted call's queued work may still read the kept input)
            if nbytes:
                lib.aclrtMemcpy(values[op.inputs[0]].buffer.ptr, nbytes, addr, nbytes, MemcpyKind.HOST_TO_DEVICE)
            self._run(op, values, call=call)
            dst = values[op.outputs[0]]
            result = np.empty(dst.shape, dst.dtype)  # (a new C-contiguous array, as the full call returns)
            self.clock.sync()
            if result.nbytes:
                lib.aclrtMemcpy(result.__array_interface__["data"][0], result.nbytes, dst.buffer.ptr, result.nbytes,
                                MemcpyKind.DEVICE_TO_HOST)
        return result

    def _keep_host(self, key: Any, op: TwoPhaseOp, call: Call, values: Sequence[Any]) -> bool:
        """After a one-call form passed its host checks and ran on *values* (its own new contiguous arrays): keep
        them with *call* for :meth:`_host_repeat` of *key*; False when the call keeps other arrays of its shape
        already (the caller releases its own; *key* repeats on those)."""
        if len(self._host) >= 2 * self.plans.capacity:  # (entries of evicted calls)
            self._host = {k: e for k, e in self._host.items() if e[1].kept is not None}
        self._host[key] = (plan_key(op, values), call)
        if call.kept is not None:
            return False
        call.kept = tuple(values)
        return True

    def prepare_call(self, op: TwoPhaseOp, values: Sequence[Any], *, plan: bool = True,
                     sync: bool = True) -> PreparedCall:
        """A :class:`PreparedCall` of *op* on *values* (:meth:`values_of`), owned by the caller."""
        return PreparedCall(self, op, values, plan=plan, sync=sync)

    @staticmethod
    def _track(arr: _A, owned: list[_A]) -> _A:
        owned.append(arr)
        return arr


def _synchronizer(stream: Stream) -> Callable[[], None]:
    """The session's one way to wait for its stream (its clock's), called with the lock held and the device
    current: ``aclrtSynchronizeStream`` on the raw handle, and nothing that refers back to the session."""
    synchronize, handle = lib.unchecked("aclrtSynchronizeStream"), stream.handle

    def run() -> None:
        rc = synchronize(handle)
        if rc:
            raise_for_status(rc, "aclrtSynchronizeStream")

    return run
