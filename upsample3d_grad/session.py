"""The operator's Session: the generic :class:`acl_bindings.session.Session` with the operator's entry points and
host checks (CANN's codes; 5-D arrays in NCDHW or NDHWC).  Usage: docs/api.md."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, NamedTuple, Optional, Sequence, cast

import numpy as np

from acl_bindings import Event
from acl_bindings import session as _generic
from acl_bindings.engine import plan_key, run_all
from acl_bindings.torch import numpy_to_tensor, tensor_to_numpy
from acl_bindings.values import int32_arg, int_tuple

from . import checks
from . import forward as _forward
from ._torch_host import host_view, is_tensor
from .arguments import param_label, plain_key
from .arrays import EMPTY, UPLOAD, ArrayLike, DeviceArray, check_out_memory, empty_dtype
from .fastpath import PreparedCall
from .op import OP

__all__ = ["Session", "DeviceArray"]

class _Names(NamedTuple):
    """How the one-call form names an operator's input and output (errors, the torch views) and its phase 1."""

    in_param: str
    in_label: str
    out_param: str
    out_label: str
    func: str


_BACKWARD_NAMES = _Names("gradOut", "gradOut (grad_output)", "gradInput", "gradInput (out)", checks.PHASE1)
_FORWARD_NAMES = _Names("self", "self (input)", "out", "out", _forward.PHASE1)


class Session(_generic.Session):
    """The generic :class:`acl_bindings.session.Session` (``device_id``, ``plans``; a context manager) that runs the
    operator: :meth:`backward`, :meth:`forward`, :meth:`prepare`, :meth:`timed_backward`."""

    array_type = DeviceArray

    def upload(self, array: np.ndarray, layout: str = "NCDHW", param: str = "gradOut") -> DeviceArray:
        """Copy *array* (numpy, or a CPU torch tensor) to the device, keeping its strides and offset (no host copy).

        A view into a larger numpy array goes up from its base's start (when that prefix is no larger than the
        view's own span) to its last element, the aclTensor's offset being its element offset in the base;
        otherwise from its first to its last element, offset 0.  Errors (161001, 161002) name ``Session.upload``."""
        return self._upload(array, layout, param, UPLOAD)

    def _upload(self, array: np.ndarray, layout: str, param: str, func: str) -> DeviceArray:
        """:meth:`upload`, its errors naming *func*."""
        self._check_open()
        array = host_view(array, param)  # a CPU torch tensor: its numpy view (TypeError for another device)
        spec = checks.spec_of(array, layout, param, func)  # 161002: not a numpy array, dtype, layout
        label = param_label(param)  # (gradOut (grad_output), as every message names it)
        if spec is None:
            raise checks.AclnnParamError(161001, func, f"{label}: expected a numpy array but got None")
        if spec.dtype not in checks.SUPPORTED:
            raise checks.AclnnParamError(161002, func, f"{label}: dtype must be {checks.SUPPORTED_NAMES}, got "
                                                         f"{array.dtype}")
        if array.ndim != 5:
            raise checks.AclnnParamError(161002, func, f"{label}: expected a 5-D array ({layout}), got "
                                                         f"{array.ndim} dims {list(array.shape)}")
        return cast(DeviceArray, self._upload_host(array, layout, label, func))

    def empty(self, shape: Sequence[int], dtype: Any = np.float32, layout: str = "NCDHW") -> DeviceArray:
        """A contiguous, uninitialised device array; 161002 naming ``Session.empty`` for a bad shape, dtype, layout."""
        self._check_open()
        shape = tuple(checks.int_sequence(shape, "shape", EMPTY))
        dt = empty_dtype(dtype)
        checks.layout_format(layout, EMPTY)
        nbytes = math.prod(shape) * dt.itemsize  # exact: np.prod would wrap around silently
        if any(n < 0 for n in shape) or nbytes >= 2 ** 63:
            raise checks.AclnnParamError(161002, EMPTY, f"shape {list(shape)}: not a tensor of {dt} "
                                                        "(negative, or more bytes than 64-bit sizes hold)")
        return cast(DeviceArray, self._empty_contiguous(shape, dt, layout))

    def forward(self, input: Any, output_size: Sequence[int], scales_d: Optional[float] = None,
                scales_h: Optional[float] = None, scales_w: Optional[float] = None, *, layout: str = "NCDHW",
                out: Any = None, strict: bool = True) -> Any:
        """Nearest-exact 3-D upsampling (``aclnnUpsampleNearestExact3d``, :mod:`upsample3d_grad.forward`).

        Parameters
        ----------
        input:
            numpy (float32, float16, bfloat16), CPU torch tensor or device array of this session; ``[N,C,D,H,W]``
            for NCDHW, ``[N,D,H,W,C]`` for NDHWC (*layout*, of the result too).
        output_size:
            ``(oD, oH, oW)``, each > 0.
        scales_d, scales_h, scales_w:
            Output over input; None or 0 is "not given".  With all three, each outputSize value must lie in CANN's
            band around ``trunc(I*s)`` (with *strict*, equal ``floor(I*s)``).
        out, strict:
            A result to write and return (numpy, CPU torch tensor or device array); enforce the documented
            constraints CANN leaves unchecked (:mod:`upsample3d_grad.forward_checks`).

        Returns *out* when given; else numpy for numpy, a CPU torch tensor for one (its dtype), a device array for one.
        """
        output_size = _once(output_size)
        key, result = self._repeat_host(_forward.OP, input, out, layout, (output_size,),
                                        (scales_d, scales_h, scales_w), strict)
        if result is not None:
            return result

        def check(x_spec: checks.TensorSpec, y_spec: Optional[checks.TensorSpec]) -> tuple[int, ...]:
            return _forward.check(x_spec, y_spec, output_size, scales_d, scales_h, scales_w, strict=strict)

        def launch(x: DeviceArray, y: DeviceArray) -> tuple[Any, Sequence[Any]]:
            scales = checks.normalize_scales(scales_d, scales_h, scales_w, _forward.PHASE1)
            values = self.values_of(_forward.OP, (x, tuple(int(v) for v in output_size), *scales, y))
            return self._run(_forward.OP, values), values

        return self._one_call(input, out, layout, _FORWARD_NAMES, check, launch, key, _forward.OP)

    def backward(self, grad_output: ArrayLike, output_size: Sequence[int], input_size: Sequence[int],
                 scales_d: Optional[float] = None, scales_h: Optional[float] = None,
                 scales_w: Optional[float] = None, *, layout: str = "NCDHW",
                 out: Optional[ArrayLike] = None, strict: bool = True) -> ArrayLike:
        """gradInput of nearest-exact 3-D upsampling (``aclnnUpsampleNearestExact3dBackward``).

        Parameters
        ----------
        grad_output:
            numpy (float32, float16, bfloat16), CPU torch tensor or :class:`DeviceArray`, any positive strides;
            ``[N,C,oD,oH,oW]`` for NCDHW, ``[N,oD,oH,oW,C]`` for NDHWC (*layout*).
        output_size, input_size:
            ``(oD, oH, oW)`` and ``(N, C, iD, iH, iW)`` (always NCDHW order).
        scales_d, scales_h, scales_w:
            Forward scale factors; CANN uses them only when all three are > 0.
        out, strict:
            A result to write and return (numpy, CPU torch tensor or :class:`DeviceArray`); enforce the documented
            limits CANN leaves unchecked (:mod:`upsample3d_grad.checks`).

        Returns *out* when given; else numpy for numpy, a CPU torch tensor for one (its dtype; after a stream sync),
        a :class:`DeviceArray` for one.  A torch tensor on another device than the CPU raises :class:`TypeError`.
        """
        output_size, input_size = _once(output_size), _once(input_size)  # (converted once: checked as passed)
        if type(grad_output) is DeviceArray and type(out) is DeviceArray and strict is True and \
                self._repeat(grad_output, output_size, input_size, (scales_d, scales_h, scales_w), out):
            return out
        key, result = self._repeat_host(OP, grad_output, out, layout, (output_size, input_size),
                                        (scales_d, scales_h, scales_w), strict)
        if result is not None:
            return result
        in_shape = checks.result_shape(input_size, layout)

        def check(go_spec: checks.TensorSpec, gi_spec: Optional[checks.TensorSpec]) -> tuple[int, ...]:
            if gi_spec is None:
                gi_spec = checks.TensorSpec(in_shape, go_spec.dtype, go_spec.format)
            # raises with CANN's code; CANN itself receives the user's scales (and applies the all-or-none rule)
            checks.check_params(go_spec, output_size, input_size, scales_d, scales_h, scales_w, gi_spec,
                                strict=strict)
            return in_shape

        def launch(go: DeviceArray, gi: DeviceArray) -> tuple[Any, Sequence[Any]]:
            values = self._values(go, output_size, input_size, (scales_d, scales_h, scales_w), gi)
            call = self._run(OP, values)
            if strict is True:
                call.checked = True  # the strict host checks passed for this call shape: a repeat skips them
            return call, values

        return self._one_call(grad_output, out, layout, _BACKWARD_NAMES, check, launch, key, OP)

    def _repeat(self, go: DeviceArray, output_size: Any, input_size: Any, scales: tuple[Any, Any, Any],
                gi: DeviceArray) -> bool:
        """Run a backward on device arrays whose kept call passed the strict checks; False: the full call runs."""
        with self._lock, self._active():
            self.own_array(go, "gradOut", checks.PHASE1)
            self.own_array(gi, "gradInput", checks.PHASE1)
            values = self._values(go, output_size, input_size, scales, gi)
            if 0 < (values[3] > 0) + (values[4] > 0) + (values[5] > 0) < 3:
                return False
            call = self.plans.get(plan_key(OP, values))
            if call is None or not call.checked:
                return False
            self._run(OP, values, call=call)
        return True

    def _repeat_host(self, op: Any, inp: Any, out: Any, layout: Any, sizes: tuple[Any, ...],
                     scales: tuple[Any, ...], strict: Any) -> tuple[Any, Any]:
        """``(key, result)``: the result of a repeat on the arrays kept for the call's key (:func:`_host_input`),
        as the full call returns it; result None when nothing is kept (key None when the call has none)."""
        key, host = _host_input(op, inp, out, layout, sizes, scales, strict)
        result = None if key is None else self._host_repeat(key, op, host)
        if result is not None and host is not inp:
            result = numpy_to_tensor(result)  # (a CPU tensor in: one out)
        return key, result

    def _one_call(self, inp: Any, out: Any, layout: str, names: _Names,
                  check: Callable[[checks.TensorSpec, Optional[checks.TensorSpec]], tuple[int, ...]],
                  launch: Callable[[DeviceArray, DeviceArray], tuple[Any, Sequence[Any]]],
                  key: Any = None, op: Any = None) -> Any:
        """The one-call form of a one-input, one-output operator: *check* (host checks, giving the result's shape),
        uploads, *launch* (giving its call and values); the arrays made here are closed afterwards, on error paths
        too, but where *key* (:func:`_host_input`) is given: they are kept with the call for its repeats."""
        out_tensor = out if is_tensor(out) else None
        in_tensor = is_tensor(inp)
        inp = host_view(inp, names.in_label)
        out = host_view(out, names.out_label, writable=True)
        with self._lock, self._active():
            for arr, param in ((inp, names.in_param), (out, names.out_param)):
                if isinstance(arr, DeviceArray):
                    self.own_array(arr, param, names.func)
            if isinstance(out, np.ndarray) and not out.flags.writeable:
                raise checks.AclnnParamError(161002, names.func, f"{names.out_label}: the numpy array is read-only")
            in_spec = inp.spec() if isinstance(inp, DeviceArray) else checks.spec_of(inp, layout, names.in_param,
                                                                                     names.func)
            if in_spec is None:
                raise checks.AclnnParamError(161001, names.func, f"{names.in_label}: expected a value but got None "
                                                                 "(a null pointer)")
            out_spec = (None if out is None else out.spec() if isinstance(out, DeviceArray)
                        else checks.spec_of(out, layout, names.out_param, names.func))
            out_shape = check(in_spec, out_spec)
            if out is not None:
                check_out_memory(out, names.out_param)
            owned: list[DeviceArray] = []
            result: ArrayLike
            try:
                src = inp if isinstance(inp, DeviceArray) else self._track(
                    self._upload(inp, layout, names.in_param, names.func), owned)
                dst = out if isinstance(out, DeviceArray) else self._track(
                    self.empty(out_shape, src.dtype, layout) if out is None
                    else self._upload(out, layout, names.out_param, names.func), owned)
                call, values = launch(src, dst)
                if isinstance(inp, DeviceArray) and out is None:
                    owned.remove(dst)  # (a device array in: the new result stays on the device)
                if key is not None and src.offset == 0 and self._keep_host(key, op, call, values):
                    owned.remove(src)  # kept with the call for the next call of this key
                    owned.remove(dst)
                    result = dst.download()
                else:
                    result = dst.download(out) if dst in owned else dst  # (into *out*, else a new array)
            except BaseException:
                # report the first error; a release refused here stays owned and is retried by close()
                with contextlib.suppress(Exception):
                    run_all([arr.close for arr in reversed(owned)])
                raise
            # reverse order: the blocks go back so that the next call gets each of them for the same role
            run_all([arr.close for arr in reversed(owned)])
        if out_tensor is not None:  # (after the with block: docs/design.md, Ctrl-C)
            return out_tensor
        return numpy_to_tensor(result) if in_tensor and isinstance(result, np.ndarray) else result

    def prepare(self, grad_output: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *, out: DeviceArray, plan: bool = True,
                sync: bool = True, strict: bool = True) -> PreparedCall:
        """Prepare one call shape on device arrays for repeated calls: host checks, C arguments and phase 1 (with a
        repeatable executor when *plan*, else one-shot calls) once.  Calling the returned
        :class:`~upsample3d_grad.fastpath.PreparedCall` runs the operator (and synchronises unless *sync* is False),
        optionally on other device arrays of the same layout; it is closed with the session or by ``close()``."""
        return PreparedCall(self, grad_output, output_size, input_size, scales, out=out, plan=plan, sync=sync,
                            strict=strict)

    @staticmethod
    def _values(go: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                user_scales: tuple[Any, Any, Any], gi: DeviceArray) -> tuple[Any, ...]:
        """The values in schema order; sizes and *user_scales* (None: not given) converted here (161002 if wrong)."""
        scales = checks.normalize_scales(*user_scales)
        return (go, int_tuple(output_size, "outputSize", checks.PHASE1),
                int_tuple(input_size, "inputSize", checks.PHASE1), *scales, gi)

    def timed_backward(self, grad_output: DeviceArray, output_size: Sequence[int], input_size: Sequence[int],
                       scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *, out: DeviceArray,
                       repeat: int = 1) -> list[float]:
        """Run *repeat* times on device arrays; return each run's device time in ms (events)."""
        with self._lock, self._active():  # plans and the workspace are shared with backward() on other threads
            self.own_array(grad_output, "gradOut", checks.PHASE1)
            self.own_array(out, "gradInput", checks.PHASE1)
            sd, sh, sw = checks.scale_triple(scales)
            checks.check_params(grad_output.spec(), output_size, input_size, sd, sh, sw, out.spec())
            check_out_memory(out)
            runs = int32_arg("repeat", repeat, 1, "a positive int (the number of timed runs)")
            times = []
            with Event(self.device) as start, Event(self.device) as end:
                for _ in range(runs):
                    start.record(self.stream)
                    self._run(OP, self._values(grad_output, output_size, input_size, (sd, sh, sw), out))
                    end.record(self.stream)
                    end.synchronize()
                    times.append(end.elapsed_ms(start))
            self._sync()
            return times


def _host_input(op: Any, inp: Any, out: Any, layout: Any, sizes: tuple[Any, ...], scales: tuple[Any, ...],
                strict: Any) -> tuple[Optional[tuple[Any, ...]], Any]:
    """``(key, host array)`` of a one-call form on a C-contiguous numpy array or CPU torch tensor with no *out*: the
    key holds everything the host checks read (shape, dtype, strides, and :func:`plain_key`'s sizes, scales,
    strict, layout); None for any other call, which always runs in full.  A key that passed its checks once
    repeats on the arrays kept with its call (:meth:`acl_bindings.session.Session._host_repeat`)."""
    host = inp
    if type(inp) is not np.ndarray:
        if out is not None or not is_tensor(inp) or inp.device.type != "cpu":
            return None, inp
        host = tensor_to_numpy(inp)
    plain = plain_key(sizes, scales, strict, layout) if out is None and host.flags.c_contiguous else None
    if plain is None:
        return None, inp
    return (op.name, host.shape, host.dtype, host.strides, plain), host


def _once(sizes: Any) -> Any:
    """A size argument read once (an iterable but a str becomes a tuple): the checks and the C call see the same."""
    if isinstance(sizes, (tuple, str, bytes)) or not hasattr(sizes, "__iter__"):
        return sizes
    return tuple(sizes)
