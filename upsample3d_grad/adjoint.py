"""The adjoint check ``<F(x), g> = <x, B(g)>`` between the forward and the backward on a device, up to the residual
the two index laws predict (docs/cann-forward-facts.md §6.2, docs/operators.md, "The adjoint check")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

import numpy as np

from . import reference
from .reference._validate import _logical, _phys

__all__ = ["AdjointResult", "adjoint_check", "device_adjoint_check", "random_pair"]

_UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # by dtype name
_F64_SUMS = 64 * 2.0 ** -53  # pairwise float64 summation of the products (far more than log2 of any size)


@dataclass(frozen=True)
class AdjointResult:
    """What :func:`adjoint_check` found.  ``passed`` is ``abs(residual - predicted) <= bound``."""

    lhs: float  #: <F(x), g>, in float64
    rhs: float  #: <x, B(g)>, in float64
    residual: float  #: lhs - rhs
    predicted: float  #: the residual the two index laws imply
    bound: float  #: the rounding allowance of B(g) and of the sums
    mismatched: int  #: outputs (per N, C) where the forward's index and the backward's window differ
    passed: bool

    def as_dict(self) -> dict[str, Any]:
        """The fields, for a JSON report."""
        return asdict(self)

    def describe(self) -> str:
        """One line: the figures and the verdict."""
        verdict, sign = ("pass", "<=") if self.passed else ("FAIL", ">")
        return (f"adjoint {verdict}: <F(x),g> - <x,B(g)> = {self.residual:.6g}, predicted {self.predicted:.6g} "
                f"({self.mismatched} tie outputs), |difference| {abs(self.residual - self.predicted):.3g} "
                f"{sign} bound {self.bound:.3g}")


def _f64(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.name not in _UNIT_ROUNDOFF:
        raise TypeError(f"{name}: expected float32, float16 or bfloat16, got {arr.dtype}")
    return arr.astype(np.float64)


def _window_max(output_size: Sequence[int], input_size: Sequence[int], scales: Sequence[Optional[float]]) -> int:
    """The largest number of outputs one input element sums (the product of the longest window per dim)."""
    resolved = reference.resolve_scales(output_size, input_size, *scales)
    starts = (reference.window_starts(int(input_size[2 + k]), int(output_size[k]), resolved[k]) for k in range(3))
    return math.prod(max(1, int(np.diff(lo).max())) for lo in starts)


def adjoint_check(x: np.ndarray, g: np.ndarray, fx: np.ndarray, bg: np.ndarray, output_size: Sequence[int],
                  scales_d: Optional[float] = None, scales_h: Optional[float] = None,
                  scales_w: Optional[float] = None, *, layout: str = "NCDHW", soc: str = "a2a3") -> AdjointResult:
    """Compare ``<fx, g>`` with ``<x, bg>`` where ``fx = F(x)`` and ``bg = B(g)`` came from the device.

    *x* and *g* are the inputs of F and B (of B's and F's result shapes), *fx* and *bg* the device's results in
    their dtype, all four in *layout*; *output_size* and the scales are what both operators got; *soc* is the
    forward's variant, ``"a2a3"`` or ``"ascend950"`` (:func:`upsample3d_grad.reference.forward.soc_family`).
    """
    x64, g64, fx64, bg64 = _f64(x, "x"), _f64(g, "g"), _f64(fx, "fx"), _f64(bg, "bg")
    if fx64.shape != g64.shape:
        raise ValueError(f"fx: shape must be g's {g64.shape}, got {fx64.shape}")
    if bg64.shape != x64.shape:
        raise ValueError(f"bg: shape must be x's {x64.shape}, got {bg64.shape}")
    predicted = reference.adjoint_residual(x, g, output_size, scales_d, scales_h, scales_w, layout=layout, soc=soc)
    isz = _logical(x64, layout)  # (adjoint_residual has checked x and layout)
    mismatches = reference.adjoint_mismatches(output_size, isz, scales_d, scales_h, scales_w, soc=soc)
    osz = [int(v) for v in output_size]
    kept = [osz[k] - len(mismatches["DHW"[k]]) for k in range(3)]
    mismatched = math.prod(osz) - math.prod(kept)
    lhs_terms, rhs_terms = fx64 * g64, x64 * bg64
    lhs, rhs = float(np.sum(lhs_terms)), float(np.sum(rhs_terms))
    sums = _F64_SUMS * (float(np.sum(np.abs(lhs_terms))) + float(np.sum(np.abs(rhs_terms))))
    m = _window_max(osz, isz, (scales_d, scales_h, scales_w))
    dtype = np.asarray(bg).dtype
    ax = np.abs(x64)
    if np.all(g64 == np.round(g64)) and m * float(np.max(np.abs(g64), initial=0.0)) < 2.0 ** 24:
        # integer data (random_pair's): B's float32 window sums are exact, so the device's B(g) is the exact
        # sum rounded once to the dtype, and that one rounding is known here
        exact = reference.upsample_nearest_exact3d_backward(np.asarray(g, np.float32), osz, isz, scales_d,
                                                            scales_h, scales_w, layout=layout).astype(np.float64)
        rounded = exact.astype(np.float32).astype(dtype).astype(np.float64)
        bound = float(np.sum(ax * np.abs(exact - rounded))) + sums
    else:
        # B(g): float32 window sums (m terms, each adding at most m * u32 * sum |g| of error), then one rounding
        # to the output dtype; the float64 products are exact, their summation is not
        abs_bg = reference.upsample_nearest_exact3d_backward(np.abs(g64).astype(np.float32), osz, isz, scales_d,
                                                             scales_h, scales_w, layout=layout).astype(np.float64)
        bound = (m * 2.0 ** -24 * float(np.sum(ax * abs_bg))
                 + _UNIT_ROUNDOFF[dtype.name] * float(np.sum(ax * np.abs(bg64))) + sums)
    residual = lhs - rhs
    passed = bool(abs(residual - predicted) <= bound)
    return AdjointResult(lhs, rhs, residual, predicted, bound, mismatched, passed)


def random_pair(input_shape: Sequence[int], output_shape: Sequence[int], dtype: Any,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random x (*input_shape*) and g (*output_shape*) in *dtype* from *seed*: small integers (x in [-8, 8], g in
    [-2, 2]), exact in every dtype, so that the check is as sharp in bfloat16 as in float32."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-8, 9, tuple(input_shape)).astype(np.float32).astype(dtype)
    g = rng.integers(-2, 3, tuple(output_shape)).astype(np.float32).astype(dtype)
    return x, g


def device_adjoint_check(session: Any, input_size: Sequence[int], output_size: Sequence[int],
                         scales: Sequence[Optional[float]] = (None, None, None), *, dtype: Any = np.float32,
                         layout: str = "NCDHW", seed: int = 0, soc: str = "a2a3") -> AdjointResult:
    """Run F and B on *session*'s device with :func:`random_pair` data and check them against each other
    (*input_size* ``(N, C, D, H, W)`` in every layout; *scales* go to both; *soc* as for :func:`adjoint_check`)."""
    n, c, d, h, w = (int(v) for v in input_size)
    od, oh, ow = (int(v) for v in output_size)
    x, g = random_pair(_phys(layout, n, c, d, h, w), _phys(layout, n, c, od, oh, ow), dtype, seed)
    fx = session.forward(x, (od, oh, ow), *scales, layout=layout)
    bg = session.backward(g, (od, oh, ow), (n, c, d, h, w), *scales, layout=layout)
    return adjoint_check(x, g, fx, bg, (od, oh, ow), *scales, layout=layout, soc=soc)
