"""The module functions (PyTorch's signatures and the graph-IR forms, numpy in and out) on a process-wide default
session, and the torch-tensor entry points."""

from __future__ import annotations

import atexit
import contextlib
import numbers
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

from acl_bindings import AclnnParamError, AclTypeError
from acl_bindings.torch import is_tensor, numpy_to_tensor, tensor_to_numpy

from ._env import default_device
from ._torch_host import host_view
from .forward import OP as FORWARD
from .forward import PHASE1 as FORWARD_PHASE1
from .op import OP, PHASE1
from .session import Session
from .torch_interop import _backward_npu, _forward_npu, kept_npu_call, release_npu_calls

__all__ = ["upsample_nearest_exact3d_backward", "UpsampleNearestExact3dGrad", "upsample_nearest_exact3d",
           "UpsampleNearestExact3d", "default_session", "close_default_session", "backward_torch", "forward_torch"]

#: re-entrant: on CPython 3.9 an interrupt can come after a ``with`` block and before its lock's release, and the
#: interrupted thread then goes on holding it (bpo-29988; 3.10 checks for signals only after calls)
_lock = threading.RLock()


class _Token:
    """One module-level call on a session."""

    __slots__ = ("__weakref__",)


_default: Optional[Session] = None
#: the module-level calls running on each session, one token each (weak: a call that an interrupt cut short before
#: it uncounted itself is uncounted when its frame goes, and a session no longer default goes with its last call)
_in_flight: weakref.WeakKeyDictionary[Session, weakref.WeakSet[_Token]] = weakref.WeakKeyDictionary()
_at_exit: list[bool] = []  # whether close_default_session is registered with atexit


def _current() -> Session:
    """The default session, created when there is none (the caller holds ``_lock``)."""
    global _default
    if _default is None or _default.closed:
        _default = Session(default_device())
        if not _at_exit:
            atexit.register(close_default_session)
            _at_exit.append(True)
    return _default


def default_session() -> Session:
    """The process-wide session used by the module-level functions (created on first use)."""
    with _lock:
        session = _current()  # (stored, not returned from inside the with: an interrupt then still unlocks)
    return session


def close_default_session() -> None:
    """Close the default session, if any (runs at exit), and release the plans kept for NPU tensors
    (:func:`upsample3d_grad.torch_interop.release_npu_calls`); safe while other threads call the module functions:
    calls already running finish on it, the last of them closes it, and later calls get a fresh one."""
    global _default
    with _lock:
        session, _default = _default, None
        busy = session is not None and bool(_in_flight.get(session, ()))
    if session is not None and not busy:
        with contextlib.suppress(Exception):  # at exit nothing useful can be done; never print
            session.close()
    release_npu_calls()


class _OnDefaultSession:
    """``with _OnDefaultSession() as session``: the default session, kept open for the duration of one
    module-level call (a class, not a generator: the module functions' steady calls are a few microseconds)."""

    __slots__ = ("token", "session")

    def __enter__(self) -> Session:
        self.token, self.session = _Token(), None
        try:
            with _lock:
                session = self.session = _current()
                calls = _in_flight.get(session)
                if calls is None:
                    calls = _in_flight[session] = weakref.WeakSet()
                calls.add(self.token)
        except BaseException:  # (an interrupt as the with exits must still uncount the call: else no one closes
            self.__exit__()  # a session that close_default_session() retired meanwhile)
            raise
        return session

    def __exit__(self, *exc: object) -> None:
        session = self.session
        if session is None:
            return
        with _lock:
            calls = _in_flight.get(session)
            if calls is not None:
                calls.discard(self.token)  # (not there when an interrupt came before the count)
            retired = not calls and session is not _default
        if retired:  # close_default_session() ran meanwhile: the last call on it closes it
            with contextlib.suppress(Exception):
                session.close()


def upsample_nearest_exact3d_backward(grad_output: Any, output_size: Sequence[int], input_size: Sequence[int],
                                      scales_d: Optional[float] = None, scales_h: Optional[float] = None,
                                      scales_w: Optional[float] = None, *, layout: str = "NCDHW",
                                      out: Any = None, strict: bool = True) -> Any:
    """gradInput of ``F.interpolate(x, mode="nearest-exact")`` on a 5-D tensor, computed by the operator.

    Arguments as ``torch.ops.aten._upsample_nearest_exact3d_backward``; numpy in, numpy out (a CPU torch tensor
    in, one out), on :func:`default_session`; *out* (numpy or a CPU torch tensor) is written and returned.
    """
    with _OnDefaultSession() as session:
        result = session.backward(grad_output, output_size, input_size, scales_d, scales_h, scales_w,
                                  layout=layout, out=out, strict=strict)
    assert out is None or result is out
    return result


def UpsampleNearestExact3dGrad(grad_output: Any, input_size: Sequence[int],
                               output_size: Sequence[int] = (0, 0, 0),
                               scales: Sequence[float] = (0.0, 0.0, 0.0), *, layout: str = "NCDHW",
                               strict: bool = True) -> np.ndarray:
    """The graph-IR form (attrs ``input_size``, ``output_size``, ``scales``; cann-abi.md §5.1): ``output_size=(0, 0,
    0)`` takes (D, H, W) from *grad_output*'s shape, ``scales`` of 0 are "not given"."""
    g = host_view(grad_output, "gradOut (grad_output)")
    out_sz: Any = output_size  # anything but (0, 0, 0) goes to the checks as given
    if _all_zero_ints(output_size) and isinstance(g, np.ndarray) and g.ndim == 5:
        out_sz = tuple(g.shape[1:4]) if layout == "NDHWC" else tuple(g.shape[2:5])
    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__len__"):
        raise AclTypeError(161002, PHASE1, f"scales: expected 3 values (D, H, W), got {type(scales).__name__} "
                                           f"{scales!r}")
    if len(scales) != 3:
        raise AclnnParamError(161002, PHASE1, f"scales: expected 3 values (D, H, W), got {scales!r}")
    sc = [None if _is_zero(s) else s for s in scales]  # 0 means "not given"
    return upsample_nearest_exact3d_backward(g, out_sz, input_size, *sc, layout=layout, strict=strict)


def _is_zero(value: Any) -> bool:
    return (isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_))
            and value == 0)


def _all_zero_ints(values: Any) -> bool:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) != 3:
        return False
    return all(isinstance(v, (numbers.Integral, np.integer)) and _is_zero(v) for v in values)


def upsample_nearest_exact3d(input: Any, output_size: Sequence[int], scales_d: Optional[float] = None,
                             scales_h: Optional[float] = None, scales_w: Optional[float] = None, *,
                             layout: str = "NCDHW", out: Any = None, strict: bool = True) -> Any:
    """``F.interpolate(x, size=output_size, mode="nearest-exact")`` on a 5-D tensor, computed by the operator:
    arguments as ``torch.ops.aten._upsample_nearest_exact3d``, numpy in, numpy out, on the default session."""
    with _OnDefaultSession() as session:
        result = session.forward(input, output_size, scales_d, scales_h, scales_w, layout=layout, out=out,
                                 strict=strict)
    return result


def UpsampleNearestExact3d(x: Any, output_size: Sequence[int], scale_d: float = 0.0, scale_h: float = 0.0,
                           scale_w: float = 0.0, *, layout: str = "NCDHW", strict: bool = True) -> Any:
    """The graph-IR form (``REG_OP(UpsampleNearestExact3d)``, attrs ``output_size``, ``scale_d/h/w``), its attrs
    taken as the aclnn API's scales (output over input; 0 "not given") on every SoC (cann-forward-facts.md §5)."""
    scales: list[Optional[float]] = []
    for name, s in (("scale_d", scale_d), ("scale_h", scale_h), ("scale_w", scale_w)):
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (numbers.Real, np.floating, np.integer)):
            raise AclTypeError(161002, FORWARD_PHASE1, f"{name}: expected a float, got {type(s).__name__} {s!r}")
        scales.append(None if s == 0 else float(s))
    return upsample_nearest_exact3d(x, output_size, *scales, layout=layout, strict=strict)


# --------------------------------------------------------------------------- torch tensors in and out

def backward_torch(grad_output: Any, output_size: Sequence[int], input_size: Sequence[int],
                   scales_d: float | None = None, scales_h: float | None = None,
                   scales_w: float | None = None, *, layout: str = "NCDHW", out: Any = None,
                   return_type: str = "torch", strict: bool = True, session: Any = None) -> Any:
    """gradInput of nearest-exact 3-D upsampling for torch tensors (CPU, or NPU with torch_npu) or numpy arrays.

    Other arguments as :meth:`upsample3d_grad.Session.backward`; *out* is on *grad_output*'s device (written and
    returned with ``return_type="torch"``); ``return_type="numpy"`` copies an NPU result to the host (waiting for
    the stream); *session* serves CPU inputs (default: the process-wide one).
    """
    scales = (scales_d, scales_h, scales_w)
    if out is None:  # a repeat on NPU tensors: the plan kept for its key
        got = kept_npu_call(OP, grad_output, (output_size, input_size), scales, strict, layout, return_type)
        if got is not None:
            return got
    return _torch_call(
        "grad_output", grad_output, out, return_type, session,
        lambda: _backward_npu(grad_output, output_size, input_size, scales, layout, out, return_type, strict),
        lambda s, g, o: s.backward(g, output_size, input_size, *scales, layout=layout, out=o, strict=strict))


def forward_torch(input: Any, output_size: Sequence[int], scales_d: float | None = None,
                  scales_h: float | None = None, scales_w: float | None = None, *, layout: str = "NCDHW",
                  out: Any = None, return_type: str = "torch", strict: bool = True, session: Any = None) -> Any:
    """The forward for torch tensors, as :func:`backward_torch` for the backward (other arguments as
    :meth:`upsample3d_grad.Session.forward`)."""
    scales = (scales_d, scales_h, scales_w)
    if out is None:
        got = kept_npu_call(FORWARD, input, (output_size,), scales, strict, layout, return_type)
        if got is not None:
            return got
    return _torch_call(
        "input", input, out, return_type, session,
        lambda: _forward_npu(input, output_size, scales, layout, out, return_type, strict),
        lambda s, x, o: s.forward(x, output_size, *scales, layout=layout, out=o, strict=strict))


def _torch_call(name: str, x: Any, out: Any, return_type: str, session: Any, on_npu: Callable[[], Any],
                call: Callable[[Session, Any, Any], Any]) -> Any:
    """*on_npu()* for an NPU tensor *x*, else ``call(session, host array, host out)`` (default session if None)."""
    if return_type not in ("torch", "numpy"):
        raise ValueError(f"return_type: expected 'torch' or 'numpy', got {return_type!r}")
    host = x
    if is_tensor(x):
        if not x.is_cpu:
            if x.device.type != "npu":
                raise TypeError(f"{name} is on {x.device}: only CPU and NPU (torch_npu) tensors are supported")
            return on_npu()
        host = tensor_to_numpy(x)
    out_np = None
    if out is not None:
        if not (is_tensor(out) or isinstance(out, np.ndarray)):
            raise TypeError(f"out: expected a CPU torch tensor or a numpy array, got {type(out).__name__}")
        out_np = host_view(out, "out", writable=True)  # a tensor shares memory (one it cannot share: TypeError)
    if session is None:
        with _OnDefaultSession() as on:  # (kept open while this call runs on it)
            result = call(on, host, out_np)
    else:
        result = call(session, host, out_np)
    if return_type == "numpy":
        return result
    if out is not None and is_tensor(out):
        return out
    return numpy_to_tensor(result)
