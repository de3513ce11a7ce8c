"""Pure-numpy reference of ``aclnnUpsampleNearestExact3dBackward`` (and, in :mod:`.forward`, of the forward): the
kernels' index laws (:mod:`._laws`) and one summation engine (docs/operators.md, "The numpy reference")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Optional

import numpy as np

from . import _laws
from ._laws import convention_differences, mixed_scales, resolve_scales, tie_mismatches, window_starts
from ._sum_plans import Dim, SumPlan, run_backward
from ._validate import (
    CONVENTIONS,
    LAYOUTS,
    SUPPORTED_DTYPES,
    Scales,
    _as_int,
    _check_args,
    _check_array,
    _check_choice,
    _given,
    _phys,
)
from .forward import (
    FORWARD_CONVENTIONS,
    SOCS,
    adjoint_mismatches,
    adjoint_residual,
    backward_owner,
    forward_index,
    forward_ratios,
    soc_family,
    source_indices,
    torch_cpu_forward_index,
    upsample_nearest_exact3d,
    upsample_nearest_exact3d_forward,
)

__all__ = [
    "CONVENTIONS", "LAYOUTS", "SUPPORTED_DTYPES", "convention_differences", "mixed_scales", "resolve_scales",
    "tie_mismatches", "upsample_nearest_exact3d", "upsample_nearest_exact3d_backward", "window_starts",
    # the forward operator's reference (:mod:`upsample3d_grad.reference.forward`)
    "FORWARD_CONVENTIONS", "SOCS", "adjoint_mismatches", "adjoint_residual", "backward_owner", "forward_index",
    "forward_ratios", "soc_family", "source_indices", "torch_cpu_forward_index", "upsample_nearest_exact3d_forward",
]

_DimKey = tuple[int, int, Optional[float], str]


@functools.lru_cache(maxsize=512)
def _dim(in_size: int, out_size: int, key: float | None, convention: str) -> Dim:
    if convention == "cann":
        return Dim(_laws._cann_lo(in_size, out_size, np.float32(key)), out_size)
    return Dim(_laws._torch_lo(in_size, out_size, key), out_size)


def _dim_keys(osz: Sequence[int], isz: Sequence[int], scales: Scales, convention: str) -> tuple[_DimKey, ...]:
    """Cache keys of the three dims: the float32 factor (cann) or the per-dim scale (torch_cpu)."""
    return _keys(tuple(osz), tuple(isz), tuple(scales), convention)


@functools.lru_cache(maxsize=512)  # (numpy's scalar arithmetic would cost half a tiny call)
def _keys(osz: tuple[int, ...], isz: tuple[int, ...], scales: tuple[Optional[float], ...], convention: str
          ) -> tuple[_DimKey, ...]:
    if convention == "cann":
        factors = _laws._cann_factors(osz, isz, scales)
        return tuple((isz[k + 2], osz[k], float(f), convention) for k, f in enumerate(factors))
    return tuple((isz[k + 2], osz[k], float(s) if _given(s) else None, convention)  # type: ignore[arg-type]
                 for k, s in enumerate(scales))


@functools.lru_cache(maxsize=128)
def _plan(shape: tuple[int, ...], layout: str, keys: tuple[_DimKey, ...]) -> SumPlan:
    return SumPlan(shape, layout, tuple(_dim(*k) for k in keys))  # type: ignore[arg-type]


def upsample_nearest_exact3d_backward(grad_output: np.ndarray, output_size: Sequence[int], input_size: Sequence[int],
                                      scales_d: float | None = None, scales_h: float | None = None,
                                      scales_w: float | None = None, *, layout: str = "NCDHW", convention: str = "cann",
                                      out: np.ndarray | None = None, threads: int = 1) -> np.ndarray:
    """Reference gradient of 3-D nearest-exact upsampling, summed in float32 and rounded once to *grad_output*'s dtype.

    *grad_output*: float32/float16/bfloat16, any strides, physical dims of *layout*; *output_size* ``(oD, oH, oW)``,
    *input_size* ``(N, C, iD, iH, iW)`` in every layout; scales used when > 0 (under ``"cann"`` only when all three
    are); *convention* ``"cann"`` (the kernel's float32 windows) or ``"torch_cpu"`` (PyTorch CPU's scatter, scales
    per dim); *out*: a writeable result of the right shape and dtype, not overlapping *grad_output*; *threads* sum
    the chunks without changing the result.  Raises ``ValueError`` naming the bad argument.
    """
    layout = _check_choice("layout", layout, LAYOUTS)
    convention = _check_choice("convention", convention, CONVENTIONS)
    g = _check_array("grad_output", grad_output)
    osz, isz, scales = _check_args(output_size, input_size, scales_d, scales_h, scales_w)
    threads = _as_int("threads", threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    n, c = isz[0], isz[1]
    expect_in = _phys(layout, n, c, *osz)
    if g.shape != expect_in:
        raise ValueError(f"grad_output shape must be {expect_in} ({layout} from input_size N, C and output_size), "
                         f"got {g.shape}")
    expect_out = _phys(layout, n, c, *isz[2:])
    plan = _plan(g.shape, layout, _dim_keys(osz, isz, scales, convention))
    if out is None:
        # a scatter leaves gaps of zeros: np.zeros gets them from calloc instead of a second pass
        return run_backward(g, plan, (np.zeros if plan.scatter else np.empty)(expect_out, dtype=g.dtype), threads)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != expect_out:
        raise ValueError(f"out shape must be {expect_out} ({layout}), got {out.shape}")
    if out.dtype != g.dtype:
        raise ValueError(f"out dtype must equal grad_output dtype {g.dtype}, got {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    if np.may_share_memory(out, g):
        raise ValueError("out must not overlap grad_output in memory")
    if plan.scatter:
        out.fill(0)
    return run_backward(g, plan, out, threads)
