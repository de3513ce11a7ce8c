"""The Session: a device, its stream, a reusable workspace, and the tensors it creates.

>>> import numpy as np
>>> from upsample3d_grad import Session
>>> g = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
>>> with Session(0) as s:
...     s.backward(g, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist()
[36.0, 100.0, 164.0, 228.0]

Arrays go up with :meth:`Session.upload` (numpy strides and offset become the
aclTensor's strides and offset; nothing is copied on the host) and come back with
:meth:`DeviceArray.download`.  :meth:`Session.backward` is the one-call form: numpy
(or device arrays) in, numpy (or a device array) out.

Every public method makes the session's context current on the calling thread for
the call, and the caller's current context current again afterwards (the device
guard, :meth:`acl_bindings.Device.active`), so a session made on one thread works
on another, and other libraries' devices stay as they set them.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from acl_bindings import (
    AclTypeError,
    ClosedError,
    Device,
    DeviceBuffer,
    Event,
    Format,
    IntArray,
    Stream,
    Tensor,
    Workspace,
    dtype_to_acl,
    host_span,
    load_backend,
)
from acl_bindings._resource import releases_allowed
from acl_bindings._types import index_arg, int32_arg

from . import checks
from ._api import OP
from .fastpath import PreparedCall, cached_check_params
from .plans import Plan, PlanCache, plan_key
from .torch_interop import host_view, is_tensor

__all__ = ["Session", "DeviceArray"]

#: The function named by errors of :meth:`Session.upload` and :meth:`Session.empty` (not phase 1's).
UPLOAD, EMPTY = "Session.upload", "Session.empty"


def _run_all(steps: Sequence[Callable[[], Any]]) -> None:
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
            first = None  # no cycle through this frame: what the steps left is released by reference counting


def _positive_strides(array: np.ndarray, param: str, func: str) -> tuple[int, ...]:
    if any(s < 0 for s in array.strides):
        raise checks.AclnnParamError(161002, func,
                                     f"{param}: negative strides {array.strides} are not supported; "
                                     "pass np.ascontiguousarray(...)")
    if any(s % array.itemsize for s in array.strides):
        raise checks.AclnnParamError(161002, func,
                                     f"{param}: strides {array.strides} are not multiples of the item size "
                                     f"{array.itemsize}")
    return tuple(s // array.itemsize for s in array.strides)


class DeviceArray:
    """An array in device memory: a :class:`~acl_bindings.DeviceBuffer` plus its aclTensor.

    Attributes
    ----------
    shape, dtype, layout:
        Physical shape (``[N,C,D,H,W]`` for NCDHW, ``[N,D,H,W,C]`` for NDHWC), numpy dtype, layout.
    strides, offset:
        Element strides and element offset of the view inside :attr:`buffer`.
    tensor:
        The :class:`~acl_bindings.Tensor` (aclTensor) describing it.
    """

    def __init__(self, session: Session, buffer: DeviceBuffer, shape: tuple[int, ...], dtype: np.dtype,
                 layout: str, strides: tuple[int, ...], offset: int) -> None:
        self.session = session
        self.buffer = buffer
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.layout = layout
        self.strides = strides
        self.offset = offset
        _check_extent(buffer, shape, self.dtype, strides, offset)
        self.tensor = Tensor(shape, self.dtype, buffer, strides=strides, offset=offset,
                             format=checks.layout_format(layout), storage_dims=None)

    @property
    def closed(self) -> bool:
        """True once released."""
        return self.buffer.closed

    def spec(self) -> checks.TensorSpec:
        """What phase 1 sees of this array."""
        spec = self.__dict__.get("_spec")
        if spec is None:  # shape, dtype and layout never change: build it once
            spec = self._spec = checks.TensorSpec(self.shape, int(dtype_to_acl(self.dtype)),
                                                  int(checks.layout_format(self.layout)))
        return spec

    def download(self, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Synchronise the session's stream and copy to host: a new C-contiguous array, or into *out*
        (same shape and dtype, any strides whose elements do not overlap; written and returned).

        Holds the session's lock: a download racing ``Session.close()`` (or this array's
        ``close()``) either completes first or raises :class:`~acl_bindings.ClosedError`.
        """
        with self.session._lock:
            return self._download(out)

    def _download(self, out: Optional[np.ndarray]) -> np.ndarray:
        self._check_open()
        if out is not None:
            _check_download_out(out, self.shape, self.dtype)
        self.session._sync()
        contiguous = self.offset == 0 and self.strides == _contiguous(self.shape)
        if out is not None:
            if contiguous and out.flags.c_contiguous:
                self.buffer.download(out)
            else:
                out[...] = self.download()  # honour both layouts: one copy through a host array
            return out
        if contiguous:
            out = np.empty(self.shape, self.dtype)
            return self.buffer.download(out)
        raw = np.empty(self.buffer.nbytes // self.dtype.itemsize, self.dtype)
        self.buffer.download(raw[: self.buffer.nbytes // self.dtype.itemsize])
        view = np.lib.stride_tricks.as_strided(
            raw[self.offset:], self.shape, tuple(s * self.dtype.itemsize for s in self.strides))
        return np.array(view)

    def close(self) -> None:
        """Release the aclTensor, then the device memory (after the stream finished with it).

        Every step is attempted even when one fails (the first error is raised); a release
        the library refused stays owned, and another ``close()`` retries it.  Holds the
        session's lock, so that it never frees memory under a call running on another thread.
        """
        with self.session._lock:
            if self.buffer.closed and self.tensor.closed:
                return
            _run_all((self.tensor.close, self._sync_before_free, self.buffer.close))

    def _sync_before_free(self) -> None:
        if not self.session.closed and not self.buffer.closed:
            # always: work queued through the raw two-phase API may still read this buffer
            if not releases_allowed():
                return  # after aclFinalize, or in a forked child: nothing to wait for, nothing is released
            self.session._sync()

    def _check_open(self) -> None:
        if self.buffer.closed or self.tensor.closed:  # (half-closed: a close() that failed midway)
            raise ClosedError("this device array is closed")
        if self.session.closed:
            raise ClosedError("this device array's Session is closed")

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<DeviceArray shape={self.shape} dtype={self.dtype} layout={self.layout} "
                f"strides={self.strides} offset={self.offset}{' closed' if self.closed else ''}>")


def _check_extent(buffer: DeviceBuffer, shape: tuple[int, ...], dtype: np.dtype, strides: tuple[int, ...],
                  offset: int) -> None:
    """ValueError unless every element of the view (*shape*, element *strides*, element *offset*) lies in *buffer*."""
    if len(shape) != 5:
        raise ValueError(f"shape: expected 5 dims (NCDHW or NDHWC), got {len(shape)}: {shape}")
    if len(strides) != len(shape):
        raise ValueError(f"strides: expected {len(shape)} values (one per dim of shape {shape}), got {strides}")
    dims = [index_arg("shape", n) for n in shape]
    steps = [index_arg("strides", st) for st in strides]
    first = index_arg("offset", offset)
    if any(n < 0 for n in dims):
        raise ValueError(f"shape: dims must be >= 0, got {shape}")
    if any(st < 0 for st in steps):
        raise ValueError(f"strides: element strides must be >= 0, got {strides}")
    if first < 0:
        raise ValueError(f"offset: the element offset must be >= 0, got {offset}")
    count = first + 1 + sum((n - 1) * st for n, st in zip(dims, steps)) if math.prod(dims) else first
    if count * dtype.itemsize > buffer.nbytes:
        raise ValueError(f"shape {shape}, strides {strides}, offset {offset}: the view spans {count} {dtype} elements "
                         f"({count * dtype.itemsize} bytes), more than this {buffer.nbytes}-byte buffer holds")


def _check_out_memory(out: ArrayLike) -> None:
    """161002 when elements of gradInput (*out*, numpy or device) share memory."""
    if isinstance(out, DeviceArray):
        item = out.dtype.itemsize
        checks.check_output_memory(out.shape, tuple(st * item for st in out.strides), item)
    elif isinstance(out, np.ndarray):
        checks.check_output_memory(out.shape, out.strides, out.itemsize)


def _check_download_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"out: expected shape {shape} dtype {dtype}, got {out.shape} {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out: the array is read-only")
    problem = checks.overlap_problem(out.shape, out.strides, out.itemsize)
    if problem is not None:
        raise ValueError(f"out: {problem}; every element needs its own memory")


def _offset_in_base(array: np.ndarray, addr: int) -> int:
    """Byte offset of *array*'s first element from the start of the numpy array it views (0 if none)."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is array:
        return 0
    start = int(root.ctypes.data)
    return addr - start if 0 <= addr - start < root.nbytes else 0


def _empty_dtype(dtype: Any) -> np.dtype:
    """*dtype* for :meth:`Session.empty`: a wrong one is an :class:`acl_bindings.AclTypeError` naming it."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise AclTypeError(161002, EMPTY, f"dtype: expected {checks.SUPPORTED_NAMES} (or int64), got {dtype!r}") \
            from None
    try:
        dtype_to_acl(dt)
    except TypeError:
        raise AclTypeError(161002, EMPTY, f"dtype: expected {checks.SUPPORTED_NAMES} (or int64), got {dt}") \
            from None
    return dt


def _contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    from acl_bindings import contiguous_strides

    return contiguous_strides(shape)


ArrayLike = Union[np.ndarray, DeviceArray]


class Session:
    """Owns a device (by id), one stream on it, a reusable workspace and the arrays it uploads.

    Parameters
    ----------
    device_id:
        The device to use (``aclrtSetDevice``).
    plans:
        Keep a repeatable executor per call shape and only update addresses on later
        calls (see :mod:`upsample3d_grad.plans`).  ``False``: every call runs both phases.

    A context manager: ``close()`` releases everything it created, in reverse order,
    after the stream has finished.  ``repr()`` names the backend (real CANN or the
    simulator).
    """

    def __init__(self, device_id: int = 0, *, plans: bool = True) -> None:
        self._closed = True
        self.use_plans = plans
        self.plans = PlanCache()
        self._arrays: weakref.WeakSet[DeviceArray] = weakref.WeakSet()
        self._prepared: weakref.WeakSet[PreparedCall] = weakref.WeakSet()
        self._lock = threading.RLock()
        self._pending = False
        self.backend = load_backend()
        self.device = Device(device_id)
        try:
            self.stream = Stream(self.device)
            self.workspace = Workspace(self.device, self.stream)
        except BaseException:
            if isinstance(self.__dict__.get("stream"), Stream):
                self.stream.close()  # (interrupted after the stream was made: it needs the device)
            self.device.close()
            raise
        self._closed = False
        self.calls = 0
        self.last_workspace_size = 0
        #: Which path the latest call took: ``"plan"`` (a repeatable executor) or ``"one-shot"`` (both phases)
        self.last_path = ""

    # ------------------------------------------------------------------ lifecycle
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
        """Synchronise, then release arrays, plans, workspace, stream and device.  Idempotent.

        Every release is attempted even when one fails (the first error is raised).  The
        device is reset only after everything that needs it was released, so after such a
        failure another ``close()`` finishes the job.
        """
        with self._lock:
            if self._closed and self.device.closed:
                return
            steps: list[Callable[[], Any]] = [] if self.stream.closed else [self._sync_for_close]
            steps += [call.close for call in list(self._prepared)]
            steps += [arr.close for arr in list(self._arrays)]
            steps += [self._mark_closed, self.plans.clear, self.workspace.release, self.stream.close,
                      self._reset_device]
            _run_all(steps)

    def _sync_for_close(self) -> None:
        if not releases_allowed():
            return  # after aclFinalize, or in a forked child: nothing to wait for, nothing is released
        self.stream.synchronize()

    def _mark_closed(self) -> None:
        self._closed = True
        self._pending = False

    def _reset_device(self) -> None:
        # a stream, workspace or array the library refused to release still needs the device
        if (self.stream.closed and self.workspace.buffer is None and all(a.closed for a in list(self._arrays))
                and all(call._released for call in list(self._prepared))):
            self.device.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "simulator" if self.backend.is_simulator else "CANN"
        state = "closed" if self._closed else "open"
        return f"<Session device={self.device.id} backend={self.backend.kind} ({kind}) {state}>"

    def synchronize(self) -> None:
        """Wait for all work queued on the session's stream."""
        self._check_open()
        self._sync()

    def _sync(self) -> None:
        self.stream.synchronize()
        self._pending = False

    def _sync_if_pending(self) -> None:
        if self._pending:
            self._sync()

    # ------------------------------------------------------------------ arrays
    def upload(self, array: np.ndarray, layout: str = "NCDHW", param: str = "gradOut") -> DeviceArray:
        """Copy *array* (numpy, or a CPU torch tensor) to the device, keeping its strides and offset (no host copy).

        For a view into a larger numpy array, the bytes from the base array's start (when
        that prefix is no larger than the view's own span) to the view's last element go
        up as they are: the aclTensor gets the numpy strides and the view's element offset
        in its base.  Otherwise the bytes from the first to the last element go up, with
        offset 0.
        """
        return self._upload(array, layout, param, UPLOAD)

    def _upload(self, array: np.ndarray, layout: str, param: str, func: str) -> DeviceArray:
        """:meth:`upload`, its errors naming *func* (phase 1 when :meth:`backward` uploads its arguments)."""
        self._check_open()
        array = host_view(array, param)  # a CPU torch tensor: its numpy view (TypeError for another device)
        spec = checks.spec_of(array, layout, param, func)  # 161002: not a numpy array, dtype, layout
        if spec is None:
            raise checks.AclnnParamError(161001, func, f"{param}: expected a numpy array but got None")
        if spec.dtype not in checks.SUPPORTED:
            raise checks.AclnnParamError(161002, func, f"{param}: dtype must be {checks.SUPPORTED_NAMES}, got "
                                                         f"{array.dtype}")
        if array.ndim != 5:
            raise checks.AclnnParamError(161002, func, f"{param}: expected a 5-D array ({layout}), got "
                                                         f"{array.ndim} dims {list(array.shape)}")
        strides = _positive_strides(array, param, func)
        addr, nbytes = host_span(array)
        item = array.itemsize
        if addr % item:
            raise checks.AclnnParamError(161002, func,
                                         f"{param}: data address {addr:#x} is not aligned to its item size {item}")
        lead = _offset_in_base(array, addr)
        if lead > nbytes or lead % item:
            lead = 0
        total = max(lead + nbytes, item)
        buf = DeviceBuffer(self.device, total)
        try:
            if nbytes:
                raw = (ctypes.c_char * (lead + nbytes)).from_address(addr - lead)
                buf.upload(np.frombuffer(memoryview(raw), np.uint8))
        except BaseException:
            buf.close()
            raise
        return self._adopt(buf, tuple(int(n) for n in array.shape), array.dtype, layout, strides, lead // item)

    def _adopt(self, buf: DeviceBuffer, shape: tuple[int, ...], dtype: Any, layout: str, strides: tuple[int, ...],
               offset: int) -> DeviceArray:
        """Wrap *buf* in a DeviceArray the session owns (the buffer is closed if that fails)."""
        try:
            arr = DeviceArray(self, buf, shape, dtype, layout, strides, offset)
        except BaseException:
            buf.close()
            raise
        with self._lock:
            self._arrays.add(arr)
        return arr

    def empty(self, shape: Sequence[int], dtype: Any = np.float32, layout: str = "NCDHW") -> DeviceArray:
        """A contiguous, uninitialised device array."""
        self._check_open()
        shape = tuple(checks.int_sequence(shape, "shape", EMPTY))
        dt = _empty_dtype(dtype)
        checks.layout_format(layout, EMPTY)
        nbytes = math.prod(shape) * dt.itemsize  # exact: np.prod would wrap around silently
        if any(n < 0 for n in shape) or nbytes >= 2 ** 63:
            raise checks.AclnnParamError(161002, EMPTY, f"shape {list(shape)}: not a tensor of {dt} "
                                                        "(negative, or more bytes than 64-bit sizes hold)")
        nbytes = max(nbytes, dt.itemsize)
        return self._adopt(DeviceBuffer(self.device, nbytes), shape, dt, layout, _contiguous(shape), 0)

    # ------------------------------------------------------------------ the operator
    def backward(self, grad_output: ArrayLike, output_size: Sequence[int], input_size: Sequence[int],
                 scales_d: Optional[float] = None, scales_h: Optional[float] = None,
                 scales_w: Optional[float] = None, *, layout: str = "NCDHW",
                 out: Optional[ArrayLike] = None, strict: bool = True) -> ArrayLike:
        """gradInput of nearest-exact 3-D upsampling (``aclnnUpsampleNearestExact3dBackward``).

        Parameters
        ----------
        grad_output:
            numpy array (float32, float16, bfloat16), CPU torch tensor or :class:`DeviceArray`;
            ``[N,C,oD,oH,oW]`` for NCDHW, ``[N,oD,oH,oW,C]`` for NDHWC.  Any positive strides.
        output_size, input_size:
            ``(oD, oH, oW)`` and ``(N, C, iD, iH, iW)`` (always NCDHW order).
        scales_d, scales_h, scales_w:
            Forward scale factors; CANN uses them only when all three are > 0.
        layout:
            ``"NCDHW"`` or ``"NDHWC"``.
        out:
            Preallocated result (numpy, CPU torch tensor or :class:`DeviceArray`), written and returned.
        strict:
            Enforce the documented limits CANN leaves unchecked (see :mod:`upsample3d_grad.checks`).

        Returns
        -------
        *out* when given; else a numpy array when *grad_output* is numpy or a CPU tensor (after a
        stream sync), a :class:`DeviceArray` when it is one.  A torch tensor on another device than
        the CPU raises :class:`TypeError`.
        """
        out_tensor = out if is_tensor(out) else None
        grad_output = host_view(grad_output, "gradOut (grad_output)")
        out = host_view(out, "gradInput (out)", writable=True)
        with self._lock, self._active():
            self._check_device_arrays(grad_output, out)
            if isinstance(out, np.ndarray) and not out.flags.writeable:
                raise checks.AclnnParamError(161002, checks.PHASE1, "gradInput (out): the numpy array is read-only")
            go_spec = grad_output.spec() if isinstance(grad_output, DeviceArray) else checks.spec_of(
                grad_output, layout, "gradOut")
            if go_spec is None:
                raise checks.AclnnParamError(161001, checks.PHASE1, "gradOut (grad_output): expected a value but "
                                                                    "got None (a null pointer)")
            in_shape = self._result_shape(input_size, layout)
            gi_spec: Optional[checks.TensorSpec]
            if out is None:
                gi_spec = checks.TensorSpec(in_shape, go_spec.dtype, go_spec.format)
            elif isinstance(out, DeviceArray):
                gi_spec = out.spec()
            else:
                gi_spec = checks.spec_of(out, layout, "gradInput")
            # raises with CANN's code; CANN itself receives the user's scales (and applies the all-or-none rule)
            cached_check_params(go_spec, output_size, input_size, scales_d, scales_h, scales_w, gi_spec,
                                strict=strict)
            if out is not None:
                _check_out_memory(out)
            sd, sh, sw = checks.normalize_scales(scales_d, scales_h, scales_w)
            owned: list[DeviceArray] = []
            result: ArrayLike
            try:
                go = grad_output if isinstance(grad_output, DeviceArray) else self._track(
                    self._upload(grad_output, layout, "gradOut", checks.PHASE1), owned)
                if isinstance(out, DeviceArray):
                    gi = out
                elif out is not None:
                    gi = self._track(self._upload(out, layout, "gradInput", checks.PHASE1), owned)
                else:
                    gi = self._track(self.empty(in_shape, go.dtype, layout), owned)
                self._launch(go, output_size, input_size, (sd, sh, sw), gi)
                if isinstance(grad_output, DeviceArray) and out is None:
                    owned.remove(gi)
                    result = gi
                elif isinstance(out, DeviceArray):
                    result = out
                elif out is not None:
                    result = gi.download(out)
                else:
                    result = gi.download()
            except BaseException:
                # report the first error; a release refused here stays owned and is retried by close()
                for arr in owned:
                    try:
                        arr.close()
                    except Exception:
                        pass
                raise
            _run_all([arr.close for arr in owned])
            return out_tensor if out_tensor is not None else result

    def prepare(self, grad_output: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *, out: DeviceArray, plan: bool = True,
                sync: bool = True, strict: bool = True) -> PreparedCall:
        """Prepare one call shape on device arrays for fast repeated calls (see :mod:`upsample3d_grad.fastpath`).

        The host checks, the C arguments and phase 1 (with a repeatable executor when *plan*;
        else a lean one-shot call each time) are done here, once.  Calling the returned
        :class:`~upsample3d_grad.fastpath.PreparedCall` runs the operator (and synchronises the
        stream unless *sync* is False); it may be given other device arrays of the same layout.
        It is closed with the session, or by its own ``close()``.
        """
        return PreparedCall(self, grad_output, output_size, input_size, scales, out=out, plan=plan, sync=sync,
                            strict=strict)

    def _register_prepared(self, call: PreparedCall) -> None:
        self._prepared.add(call)

    def _check_device_arrays(self, *arrays: Any) -> None:
        """Device arrays passed in must be open and belong to this session (same device and stream)."""
        for arr, param in zip(arrays, ("gradOut", "gradInput")):
            if isinstance(arr, DeviceArray):
                arr._check_open()
                if arr.session is not self:
                    raise checks.AclnnParamError(
                        161002, checks.PHASE1, f"{param}: this DeviceArray belongs to another Session (device "
                                               f"{arr.session.device.id}); upload the data to this one")

    @staticmethod
    def _track(arr: DeviceArray, owned: list[DeviceArray]) -> DeviceArray:
        owned.append(arr)
        return arr

    @staticmethod
    def _result_shape(input_size: Any, layout: str) -> tuple[int, ...]:
        try:
            n, c, d, h, w = (int(v) for v in input_size)
        except (TypeError, ValueError):
            return (-1,)  # check_params reports the real problem with its code
        return (n, d, h, w, c) if layout == "NDHWC" else (n, c, d, h, w)

    def _launch(self, go: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                scales: tuple[float, float, float], gi: DeviceArray) -> int:
        """Phase 1 (or a kept plan), workspace, phase 2 on the session's stream.  Returns the workspace size."""
        plan: Optional[Plan] = None
        if self.use_plans:
            key = plan_key(go, gi, tuple(int(v) for v in output_size), tuple(int(v) for v in input_size), scales)
            plan = self.plans.get(key, lambda: Plan(go, gi, key[10], key[11], scales), self._sync_if_pending)
        if plan is not None:
            size = plan.run(go, gi, self.workspace, self.stream)
            self.last_path = "plan"
        else:
            with IntArray(list(output_size)) as out_arr, IntArray(list(input_size)) as in_arr:
                size = OP(go.tensor, out_arr, in_arr, *scales, gi.tensor, stream=self.stream,
                          workspace=self.workspace, keep=(go, gi, out_arr, in_arr))
            self.last_path = "one-shot"
        self._pending = True
        self.calls += 1
        self.last_workspace_size = size
        return size

    def timed_backward(self, grad_output: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                       scales: tuple[float, float, float] = (0.0, 0.0, 0.0), *, out: DeviceArray,
                       repeat: int = 1) -> list[float]:
        """Run *repeat* times on device arrays; return each run's device time in ms (events)."""
        with self._lock, self._active():  # plans and the workspace are shared with backward() on other threads
            for arr, param in ((grad_output, "gradOut"), (out, "gradInput")):
                if not isinstance(arr, DeviceArray):
                    raise checks.AclnnParamError(161002, checks.PHASE1, f"{param}: timed_backward takes device "
                                                                        f"arrays, got {type(arr).__name__}")
            self._check_device_arrays(grad_output, out)
            checks.check_params(grad_output.spec(), output_size, input_size, *scales, out.spec())
            _check_out_memory(out)
            runs = int32_arg("repeat", repeat, 1, "a positive int (the number of timed runs)")
            times = []
            with Event(self.device) as start, Event(self.device) as end:
                for _ in range(runs):
                    start.record(self.stream)
                    self._launch(grad_output, output_size, input_size, scales, out)
                    end.record(self.stream)
                    end.synchronize()
                    times.append(end.elapsed_ms(start))
            self._sync()
            return times


def _format_of(layout: str) -> Format:
    return checks.layout_format(layout)
