"""Pure-numpy reference of the forward ``aclnnUpsampleNearestExact3d``, and its adjoint residual.

The forward copies, for every output element, one input element (docs/cann-forward-facts.md §4)::

    f_k(o) = min(floor(f32(f32(o + 0.5) * r_k)), I_k - 1)       (float32: add 0.5, one rounded multiply, floor)
    out[n, c, od, oh, ow] = x[n, c, f_D(od), f_H(oh), f_W(ow)]  (a copy: bit-exact in every dtype)

The float32 ratio ``r_k`` (input over output) depends on the SoC (facts §3.5):

``"a2a3"`` (Atlas A2/A3, and the 310P)
    ``f32(1.0 / scale_k)`` (reciprocal in double) for every dim when all three scales are > 0, otherwise
    ``f32(I_k) / f32(O_k)`` for every dim.
``"ascend950"``
    per dim: ``1.0f / f32(scale_k)`` (reciprocal in float) where that dim's ``f32(scale_k)`` is > 0, otherwise
    ``f32(I_k) / f32(O_k)``.

``convention="torch_cpu"`` is what torch CPU's ``F.interpolate(mode="nearest-exact")`` computes on the torch build
these facts were measured on (facts §6.1): ``t = r * (o + 0.5) - 0.5`` with one rounding (a fused multiply-add),
clamped at 0, then ``floor(f32(t + 0.5))`` clamped to ``I - 1``, with ``r = f32(1.0 / scale_k)`` per dim or
``f32(I_k) / f32(O_k)``.  It differs from the kernel's law only at exact ties.

With F the forward and B the backward (:func:`upsample3d_grad.reference.upsample_nearest_exact3d_backward`),
``<F(x), g> - <x, B(g)>`` is not 0 where the forward's floor index and the backward's ceil window disagree (float32
ties, facts §6.2).  :func:`adjoint_residual` predicts it exactly from the two laws::

    R = sum over (n, c) and over o in M of g[n, c, o] * (x[n, c, f(o)] - x[n, c, b(o)])

M the outputs where ``f(o) != b(o)`` in at least one dim, ``b(o)`` the input whose backward window holds ``o``
(``x[b(o)] = 0`` when ``o`` lies in no window).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._laws import resolve_scales, window_starts
from ._validate import _check_array, _check_choice, _check_scales, _check_sizes, _given, _phys

__all__ = [
    "FORWARD_CONVENTIONS",
    "SOCS",
    "adjoint_mismatches",
    "adjoint_residual",
    "backward_owner",
    "forward_index",
    "forward_ratios",
    "soc_family",
    "source_indices",
    "torch_cpu_forward_index",
    "upsample_nearest_exact3d_forward",
]

SOCS: tuple[str, ...] = ("a2a3", "ascend950")
"""The kernel variants whose scale handling differs (facts §3.5)."""

FORWARD_CONVENTIONS: tuple[str, ...] = ("cann", "torch_cpu")
"""Index conventions of :func:`upsample_nearest_exact3d_forward`."""

_F32 = np.float32
_DIMS = ("D", "H", "W")


def soc_family(soc_name: str) -> str:
    """The kernel variant of an ``aclrtGetSocName`` answer: ``"ascend950"`` for an Ascend950 name, else ``"a2a3"``.

    The Ascend950 is CANN's regbase SoC (``IsRegBase``, facts §2.1); every other SoC that supports the operator
    takes the A2/A3 scale handling.
    """
    return "ascend950" if str(soc_name).startswith("Ascend950") else "a2a3"


def forward_ratios(
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    soc: str = "a2a3",
) -> tuple[float, float, float]:
    """The float32 ratios ``r_D, r_H, r_W`` the forward kernel multiplies by (facts §3.5).

    Parameters
    ----------
    output_size : sequence of int
        ``(oD, oH, oW)``.
    input_size : sequence of int
        ``(N, C, iD, iH, iW)``.
    scales_d, scales_h, scales_w : float or None
        The forward's scales (output over input); a scale counts when it is > 0.
    soc : {"a2a3", "ascend950"}
        The kernel variant.

    Returns
    -------
    tuple of float
        Exactly representable float32 values.
    """
    soc = _check_choice("soc", soc, SOCS)
    osz, isz = _check_sizes(output_size, input_size)
    scales = _check_scales(scales_d, scales_h, scales_w)
    sizes = [_F32(isz[k + 2]) / _F32(osz[k]) for k in range(3)]
    with np.errstate(over="ignore", divide="ignore"):
        if soc == "ascend950":
            narrowed = [_F32(s) if s is not None else _F32(0) for s in scales]
            r = [_F32(1.0) / narrowed[k] if narrowed[k] > 0 else sizes[k] for k in range(3)]
        elif all(_given(s) for s in scales):
            r = [_F32(1.0 / float(s)) for s in scales]  # type: ignore[arg-type]
        else:
            r = sizes
    return tuple(float(v) for v in r)  # type: ignore[return-value]


def forward_index(in_size: int, out_size: int, ratio: float) -> np.ndarray:
    """The kernel's input index of every output index of one dim: ``min(floor(f32(f32(o + 0.5) * r)), I - 1)``.

    Parameters
    ----------
    in_size, out_size : int
        ``I`` and ``O`` of the dim (> 0).
    ratio : float
        ``r``, a float32 value from :func:`forward_ratios`.

    Returns
    -------
    numpy.ndarray of int64
        Length ``O``, values in ``[0, I - 1]``, non-decreasing.
    """
    o = np.arange(out_size, dtype=np.int64).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = (o + _F32(0.5)) * _F32(ratio)  # Adds(+0.5), then Muls(r): two float32 roundings
        f = np.floor(p)
    return np.clip(f, 0, in_size - 1).astype(np.int64)  # Mins(I - 1); inf -> I - 1


def torch_cpu_forward_index(in_size: int, out_size: int, scale: float | None = None) -> np.ndarray:
    """torch CPU's forward input index of every output index of one dim (facts §6.1, this torch build).

    ``t = r * (o + 0.5) - 0.5`` rounded once to float32 (the fused multiply-add the build contracts it to), clamped
    at 0, then ``min(floor(f32(t + 0.5)), I - 1)``; ``r = f32(1.0 / scale)`` when *scale* > 0, else
    ``f32(I) / f32(O)``.
    """
    with np.errstate(over="ignore", divide="ignore"):
        r = _F32(1.0 / scale) if scale is not None and _given(scale) else _F32(in_size) / _F32(out_size)
    a = np.arange(out_size, dtype=np.float64) + 0.5
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.maximum((np.float64(r) * a - 0.5).astype(_F32), _F32(0))
        u = (t.astype(np.float64) + 0.5).astype(_F32)
        f = np.floor(u)
    return np.minimum(f, in_size - 1).astype(np.int64)


def source_indices(
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    convention: str = "cann",
    soc: str = "a2a3",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forward's input index of every output index, per dim (D, H, W), under *convention* (and *soc*)."""
    convention = _check_choice("convention", convention, FORWARD_CONVENTIONS)
    osz, isz = _check_sizes(output_size, input_size)
    scales = _check_scales(scales_d, scales_h, scales_w)
    if convention == "torch_cpu":
        return tuple(torch_cpu_forward_index(isz[k + 2], osz[k], scales[k]) for k in range(3))  # type: ignore
    r = forward_ratios(osz, isz, *scales, soc=soc)
    return tuple(forward_index(isz[k + 2], osz[k], r[k]) for k in range(3))  # type: ignore[return-value]


def upsample_nearest_exact3d_forward(
    x: np.ndarray,
    output_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    layout: str = "NCDHW",
    convention: str = "cann",
    soc: str = "a2a3",
) -> np.ndarray:
    """Forward nearest-exact 3-D upsampling as the CANN kernel computes it (or as torch CPU does).

    Parameters
    ----------
    x : numpy.ndarray
        float32/float16/bfloat16, ``(N, C, iD, iH, iW)`` for ``"NCDHW"`` or ``(N, iD, iH, iW, C)`` for ``"NDHWC"``.
    output_size : sequence of int
        ``(oD, oH, oW)``, each > 0.
    scales_d, scales_h, scales_w : float or None
        The forward's scales (output over input), each counting when > 0.
    layout : {"NCDHW", "NDHWC"}
        Physical dim order of ``x`` and of the result.
    convention : {"cann", "torch_cpu"}
        The kernel's float32 law, or torch CPU's (see the module docstring).
    soc : {"a2a3", "ascend950"}
        The kernel variant (``"cann"`` only): how scales become ratios.

    Returns
    -------
    numpy.ndarray
        Same dtype and layout as ``x``; every element a bit copy of an element of ``x``.
    """
    layout = _check_choice("layout", layout, ("NCDHW", "NDHWC"))
    x = _check_array("x", x)
    n, c, d, h, w = x.shape if layout == "NCDHW" else (x.shape[0], x.shape[4], *x.shape[1:4])
    maps = source_indices(output_size, (n, c, d, h, w), scales_d, scales_h, scales_w, convention=convention, soc=soc)
    return _gather(x, maps, layout)


def _gather(x: np.ndarray, maps: Sequence[np.ndarray], layout: str) -> np.ndarray:
    axes = (2, 3, 4) if layout == "NCDHW" else (1, 2, 3)
    y = x
    for ax, m in zip(axes, maps):
        y = np.take(y, m, axis=ax)
    return np.ascontiguousarray(y)


def backward_owner(in_size: int, out_size: int, scale: float) -> np.ndarray:
    """The input index whose backward window holds each output index of one dim, or -1 where none does.

    *scale* is the backward's resolved float32 factor of the dim
    (:func:`upsample3d_grad.reference.resolve_scales`); the windows are the backward kernel's
    ``[lo(i), lo(i + 1))`` (:func:`upsample3d_grad.reference.window_starts`).
    """
    lo = window_starts(in_size, out_size, scale)
    owner = np.full(out_size, -1, dtype=np.int64)
    owner[lo[0]:lo[-1]] = np.repeat(np.arange(in_size, dtype=np.int64), np.diff(lo))
    return owner


def _maps(
    output_size: Sequence[int], input_size: Sequence[int], scales: Sequence[float | None], soc: str
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    osz, isz = _check_sizes(output_size, input_size)
    fwd = list(source_indices(osz, isz, *scales, soc=soc))
    s = resolve_scales(osz, isz, *scales)
    bwd = [backward_owner(isz[k + 2], osz[k], s[k]) for k in range(3)]
    return fwd, bwd


def adjoint_mismatches(
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    soc: str = "a2a3",
) -> dict[str, list[tuple[int, int, int]]]:
    """Per dim, the outputs where the forward's index and the backward's window disagree.

    Both operators get the same scales.  Returns ``{"D": [(o, f(o), b(o)), ...], "H": ..., "W": ...}``, with
    ``b(o) = -1`` where ``o`` lies in no backward window.  All empty means ``<F(x), g> = <x, B(g)>`` exactly.
    """
    fwd, bwd = _maps(output_size, input_size, (scales_d, scales_h, scales_w), soc)
    return {name: [(int(o), int(f[o]), int(b[o])) for o in np.nonzero(f != b)[0]]
            for name, f, b in zip(_DIMS, fwd, bwd)}


def adjoint_residual(
    x: np.ndarray,
    g: np.ndarray,
    output_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    layout: str = "NCDHW",
    soc: str = "a2a3",
) -> float:
    """The exact ``<F(x), g> - <x, B(g)>`` the two kernels' index laws imply, in float64.

    Parameters
    ----------
    x : numpy.ndarray
        The forward's input (and the backward's gradInput shape), in *layout*.
    g : numpy.ndarray
        The forward's output shape (the backward's gradOut), in *layout*.
    output_size, scales_d, scales_h, scales_w :
        The arguments both operators get.
    layout : {"NCDHW", "NDHWC"}
        Physical dim order of both arrays.
    soc : {"a2a3", "ascend950"}
        The forward kernel's variant (the backward's windows are the A2/A3 kernel's).

    Returns
    -------
    float
        ``sum over (n, c), o in M of g[o] * (x[f(o)] - x[b(o)])`` (``x[b(o)] = 0`` where ``o`` is in no window):
        0.0 when the two laws agree everywhere.  The sum is over the products in float64; on a device, F(x) is
        exact and B(g) carries float32 rounding, so compare with a tolerance from B's rounding.
    """
    layout = _check_choice("layout", layout, ("NCDHW", "NDHWC"))
    x, g = _check_array("x", x), _check_array("g", g)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    if layout == "NDHWC":
        x64, g64 = np.moveaxis(x64, 4, 1), np.moveaxis(g64, 4, 1)
    n, c = x64.shape[:2]
    isz = (n, c, *x64.shape[2:])
    osz, _ = _check_sizes(output_size, isz)
    expect = _phys(layout, n, c, *osz)
    if g.shape != expect:
        raise ValueError(f"g shape must be {expect} ({layout} from x's N, C and output_size), got {g.shape}")
    fwd, bwd = _maps(osz, isz, (scales_d, scales_h, scales_w), soc)
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
