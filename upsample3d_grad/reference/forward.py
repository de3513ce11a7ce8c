"""Pure-numpy reference of the forward ``aclnnUpsampleNearestExact3d`` (its law: docs/cann-forward-facts.md §4, §3.5;
torch CPU's: §6.1) and of its adjoint residual with the backward (§6.2)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._laws import _cann_factors, _cann_lo, _differences, _owner, _torch_idx, window_starts
from ._validate import (
    _DIM_NAMES,
    CONVENTIONS,
    LAYOUTS,
    Scales,
    _check_args,
    _check_array,
    _check_choice,
    _given,
    _logical,
    _phys,
    spatial_axes,
)

__all__ = ["FORWARD_CONVENTIONS", "SOCS", "adjoint_mismatches", "adjoint_residual", "backward_owner", "forward_index",
           "forward_ratios", "soc_family", "source_indices", "torch_cpu_forward_index",
           "upsample_nearest_exact3d_forward"]

SOCS: tuple[str, ...] = ("a2a3", "ascend950")  # the kernel variants whose scale handling differs (facts §3.5)
FORWARD_CONVENTIONS: tuple[str, ...] = CONVENTIONS  # the index conventions of upsample_nearest_exact3d_forward
_F32 = np.float32
Maps = list[np.ndarray]


def soc_family(soc_name: str) -> str:
    """The kernel variant of an ``aclrtGetSocName`` answer: ``"ascend950"`` for an Ascend950 name (CANN's regbase
    SoC, cann-forward-facts.md §2.1), else ``"a2a3"``."""
    return "ascend950" if str(soc_name).startswith("Ascend950") else "a2a3"


def _ratios(osz: Sequence[int], isz: Sequence[int], scales: Scales, soc: str) -> list[np.float32]:
    r = [_F32(isz[k + 2]) / _F32(osz[k]) for k in range(3)]
    with np.errstate(over="ignore", divide="ignore"):
        if soc == "ascend950":
            narrowed = [_F32(s) if s is not None else _F32(0) for s in scales]
            r = [_F32(1.0) / narrowed[k] if narrowed[k] > 0 else r[k] for k in range(3)]
        elif all(_given(s) for s in scales):
            r = [_F32(1.0 / float(s)) for s in scales]  # type: ignore[arg-type]
    return r


def forward_ratios(output_size: Sequence[int], input_size: Sequence[int], scales_d: float | None = None,
                   scales_h: float | None = None, scales_w: float | None = None, *, soc: str = "a2a3"
                   ) -> tuple[float, float, float]:
    """The float32 ratios ``r_D, r_H, r_W`` the forward kernel of *soc* multiplies by (cann-forward-facts.md §3.5),
    as exact floats; *input_size* is ``(N, C, iD, iH, iW)``, a scale (output over input) counts when > 0."""
    soc = _check_choice("soc", soc, SOCS)
    osz, isz, scales = _check_args(output_size, input_size, scales_d, scales_h, scales_w)
    return tuple(float(v) for v in _ratios(osz, isz, scales, soc))  # type: ignore[return-value]


def forward_index(in_size: int, out_size: int, ratio: float) -> np.ndarray:
    """The kernel's input index (int64, non-decreasing) of every output index of one dim,
    ``min(floor(f32(f32(o + 0.5) * r)), I - 1)``, *ratio* ``r`` a float32 value from :func:`forward_ratios`."""
    o = np.arange(out_size, dtype=np.int64).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.floor((o + _F32(0.5)) * _F32(ratio))  # Adds(+0.5), then Muls(r): two float32 roundings
    return np.clip(f, 0, in_size - 1).astype(np.int64)  # Mins(I - 1); inf -> I - 1


def torch_cpu_forward_index(in_size: int, out_size: int, scale: float | None = None) -> np.ndarray:
    """torch CPU's forward input index of every output index of one dim, as the torch build of
    cann-forward-facts.md §6.1 computes it (a fused multiply-add); *scale* used when > 0."""
    with np.errstate(over="ignore", divide="ignore"):
        r = _F32(1.0 / scale) if _given(scale) else _F32(in_size) / _F32(out_size)  # type: ignore[operator]
    a = np.arange(out_size, dtype=np.float64) + 0.5
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.maximum((np.float64(r) * a - 0.5).astype(_F32), _F32(0))
        f = np.floor((t.astype(np.float64) + 0.5).astype(_F32))
    return np.minimum(f, in_size - 1).astype(np.int64)


def _source_maps(osz: Sequence[int], isz: Sequence[int], scales: Scales, convention: str, soc: str) -> Maps:
    if convention == "torch_cpu":
        return [torch_cpu_forward_index(isz[k + 2], osz[k], scales[k]) for k in range(3)]
    r = _ratios(osz, isz, scales, soc)
    return [forward_index(isz[k + 2], osz[k], float(r[k])) for k in range(3)]


def _backward_maps(osz: Sequence[int], isz: Sequence[int], scales: Scales, convention: str = "cann") -> Maps:
    """Per dim, the input ``b(o)`` each output goes to in the backward (-1 where no window holds it)."""
    if convention == "torch_cpu":
        return [_torch_idx(isz[k + 2], osz[k], scales[k]) for k in range(3)]
    f = _cann_factors(osz, isz, scales)
    return [_owner(_cann_lo(isz[k + 2], osz[k], f[k]), osz[k]) for k in range(3)]


def source_indices(output_size: Sequence[int], input_size: Sequence[int], scales_d: float | None = None,
                   scales_h: float | None = None, scales_w: float | None = None, *, convention: str = "cann",
                   soc: str = "a2a3") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forward's input index of every output index, per dim (D, H, W), under *convention* (and *soc*)."""
    convention = _check_choice("convention", convention, FORWARD_CONVENTIONS)
    soc = _check_choice("soc", soc, SOCS)
    osz, isz, scales = _check_args(output_size, input_size, scales_d, scales_h, scales_w)
    return tuple(_source_maps(osz, isz, scales, convention, soc))  # type: ignore[return-value]


def _gather(x: np.ndarray, maps: Maps, layout: str) -> np.ndarray:
    """``x`` read at the index maps of D, H, W (0 where a map holds -1), C-contiguous."""
    y = x
    for ax, m in zip(spatial_axes(layout), maps):
        y = np.take(y, np.maximum(m, 0), axis=ax)
        missing = np.flatnonzero(m < 0)
        if missing.size:
            y[(slice(None),) * ax + (missing,)] = 0
    return np.ascontiguousarray(y)


def _checked(x: Any, output_size: Any, scales: tuple[Any, Any, Any], layout: Any, convention: Any
             ) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...], Scales, str, str]:
    layout = _check_choice("layout", layout, LAYOUTS)
    convention = _check_choice("convention", convention, CONVENTIONS)
    x = _check_array("x", x)
    osz, isz, s = _check_args(output_size, _logical(x, layout), *scales)
    return x, osz, isz, s, layout, convention


def upsample_nearest_exact3d_forward(x: np.ndarray, output_size: Sequence[int], scales_d: float | None = None,
                                     scales_h: float | None = None, scales_w: float | None = None, *,
                                     layout: str = "NCDHW", convention: str = "cann", soc: str = "a2a3") -> np.ndarray:
    """Forward nearest-exact 3-D upsampling as the CANN kernel of *soc* computes it (or as torch CPU does).

    *x*: float32/float16/bfloat16 in the physical dims of *layout*; the scales (output over input) count when > 0;
    *convention* ``"cann"`` (the kernel's float32 law) or ``"torch_cpu"``; *soc* ``"a2a3"`` or ``"ascend950"``
    (how scales become ratios).  The result, in *x*'s dtype and layout, is bit copies of elements of *x*.
    """
    soc = _check_choice("soc", soc, SOCS)
    x, osz, isz, s, layout, convention = _checked(x, output_size, (scales_d, scales_h, scales_w), layout, convention)
    return _gather(x, _source_maps(osz, isz, s, convention, soc), layout)


def upsample_nearest_exact3d(x: np.ndarray, output_size: Sequence[int], scales_d: float | None = None,
                             scales_h: float | None = None, scales_w: float | None = None, *, layout: str = "NCDHW",
                             convention: str = "cann") -> np.ndarray:
    """The exact adjoint of the reference backward under *convention*: output ``o`` reads the input whose backward
    window holds it (0 where none does); arguments as for :func:`upsample_nearest_exact3d_forward`."""
    x, osz, isz, s, layout, convention = _checked(x, output_size, (scales_d, scales_h, scales_w), layout, convention)
    return _gather(x, _backward_maps(osz, isz, s, convention), layout)


def backward_owner(in_size: int, out_size: int, scale: float) -> np.ndarray:
    """The input index whose backward window holds each output index of one dim, or -1 where none does (*scale*:
    the backward's resolved factor, :func:`upsample3d_grad.reference.resolve_scales`)."""
    return _owner(window_starts(in_size, out_size, scale), operator.index(out_size))


def _maps(output_size: Any, input_size: Any, scales: tuple[Any, Any, Any], soc: Any) -> tuple[Maps, Maps]:
    """The checked forward and backward index maps of both operators (the same scales)."""
    soc = _check_choice("soc", soc, SOCS)
    osz, isz, s = _check_args(output_size, input_size, *scales)
    return _source_maps(osz, isz, s, "cann", soc), _backward_maps(osz, isz, s)


def adjoint_mismatches(output_size: Sequence[int], input_size: Sequence[int], scales_d: float | None = None,
                       scales_h: float | None = None, scales_w: float | None = None, *, soc: str = "a2a3"
                       ) -> dict[str, list[tuple[int, int, int]]]:
    """Per dim, ``{"D": [(o, f(o), b(o)), ...], ...}`` where the forward's index and the backward's window
    disagree (``b(o) = -1``: in no window); all empty means ``<F(x), g> = <x, B(g)>`` exactly."""
    fwd, bwd = _maps(output_size, input_size, (scales_d, scales_h, scales_w), soc)
    return {name: _differences(f, b) for name, f, b in zip(_DIM_NAMES, fwd, bwd)}


def adjoint_residual(x: np.ndarray, g: np.ndarray, output_size: Sequence[int], scales_d: float | None = None,
                     scales_h: float | None = None, scales_w: float | None = None, *, layout: str = "NCDHW",
                     soc: str = "a2a3") -> float:
    """The exact ``<F(x), g> - <x, B(g)>`` the two kernels' index laws imply, in float64 (0.0 where they agree).

    *x* is the forward's input, *g* of its output's shape, both in *layout*; both operators get *output_size* and
    the scales; *soc* is the forward kernel's variant (the backward's windows are the A2/A3 kernel's).
    """
    layout = _check_choice("layout", layout, LAYOUTS)
    x, g = _check_array("x", x), _check_array("g", g)
    n, c, *dhw = _logical(x, layout)
    fwd, bwd = _maps(output_size, (n, c, *dhw), (scales_d, scales_h, scales_w), soc)
    expect = _phys(layout, n, c, *(m.size for m in fwd))
    if g.shape != expect:
        raise ValueError(f"g shape must be {expect} ({layout} from x's N, C and output_size), got {g.shape}")
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    if layout == "NDHWC":
        x64, g64 = np.moveaxis(x64, 4, 1), np.moveaxis(g64, 4, 1)
    od, oh, ow = np.meshgrid(*(np.arange(m.size) for m in fwd), indexing="ij")
    sel = (fwd[0][od] != bwd[0][od]) | (fwd[1][oh] != bwd[1][oh]) | (fwd[2][ow] != bwd[2][ow])
    od, oh, ow = od[sel], oh[sel], ow[sel]
    if od.size == 0:
        return 0.0
    xf = x64[:, :, fwd[0][od], fwd[1][oh], fwd[2][ow]]
    bd, bh, bw = bwd[0][od], bwd[1][oh], bwd[2][ow]
    inside = (bd >= 0) & (bh >= 0) & (bw >= 0)
    xb = np.where(inside, x64[:, :, np.maximum(bd, 0), np.maximum(bh, 0), np.maximum(bw, 0)], 0.0)
    return float(np.sum(g64[:, :, od, oh, ow] * (xf - xb)))
