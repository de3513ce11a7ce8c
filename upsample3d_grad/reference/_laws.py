"""The index laws of the numpy reference: CANN's float32 window law and PyTorch CPU's scatter map.

Both are monotone maps of one dim, and both reduce to a table of window starts ``lo``
(gradInput element ``i`` sums gradOut positions ``[lo[i], lo[i + 1])``).  The public
functions here compare the two conventions and resolve CANN's scales; the 3-D reference
(:mod:`upsample3d_grad.reference`) builds its tables from the private ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._validate import (
    _DIM_NAMES,
    CONVENTIONS,
    _as_int,
    _check_choice,
    _check_scale,
    _check_scales,
    _check_sizes,
    _given,
)


def mixed_scales(scales_d: float | None = None, scales_h: float | None = None, scales_w: float | None = None) -> bool:
    """Tell whether only some of the three scales are supplied.

    Parameters
    ----------
    scales_d, scales_h, scales_w : float or None
        Forward scale factors; a scale counts as supplied when it is > 0.

    Returns
    -------
    bool
        True when at least one but not all scales are > 0.  CANN then falls
        back to size ratios for every dim while PyTorch decides per dim
        (cann-abi.md §5.2, §6.4), so the two conventions usually differ.
    """
    flags = [_given(s) for s in (scales_d, scales_h, scales_w)]
    return any(flags) and not all(flags)


def resolve_scales(
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> tuple[float, float, float]:
    """Return the float32 factors ``s_k`` the CANN kernel uses (cann-abi.md §5.2).

    Parameters
    ----------
    output_size : sequence of int
        ``(oD, oH, oW)``, the gradOut spatial sizes.
    input_size : sequence of int
        ``(N, C, iD, iH, iW)``; a 3-sequence ``(iD, iH, iW)`` is accepted too.
    scales_d, scales_h, scales_w : float or None
        Forward scale factors (output/input).

    Returns
    -------
    tuple of float
        ``f32(scale_k)`` for every dim when all three scales are > 0,
        otherwise ``f32(O_k) / f32(I_k)`` for every dim (float32 division).
        The values are exactly representable float32 numbers.
    """
    if len(input_size) == 3:
        input_size = (1, 1, *input_size)
    osz, isz = _check_sizes(output_size, input_size)
    scales = _check_scales(scales_d, scales_h, scales_w)
    if all(_given(s) for s in scales):
        return tuple(float(np.float32(s)) for s in scales)  # type: ignore[return-value]
    return tuple(float(np.float32(o) / np.float32(i)) for o, i in zip(osz, isz[2:]))  # type: ignore[return-value]


def _cann_lo(in_size: int, out_size: int, s: np.float32) -> np.ndarray:
    """CANN window starts ``lo(0..in_size)`` for the float32 factor ``s``."""
    i = np.arange(in_size + 1, dtype=np.int64).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = i * np.float32(s)  # one float32 rounding (Muls)
        q = p - np.float32(0.5)  # second float32 rounding (Adds)
        c = np.ceil(q)
    c = np.clip(c, 0, out_size)  # max(., 0) then min(., O); inf -> O
    return c.astype(np.int64)


def _torch_r(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """PyTorch CPU's float32 inverse factor ``compute_scales_value<float>`` (cann-abi.md §6.1)."""
    with np.errstate(over="ignore", divide="ignore"):
        if scale is not None and scale > 0:
            r = np.float32(1.0 / float(scale))  # reciprocal in double, rounded to float
        else:
            r = np.float32(in_size) / np.float32(out_size)
    return r


def _torch_idx(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """PyTorch CPU's input index of every output index (length ``out_size``)."""
    r = _torch_r(in_size, out_size, scale)
    v = (np.arange(out_size, dtype=np.float64) + 0.5) * np.float64(r)  # double product
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.floor(v.astype(np.float32))  # implicit float conversion, then floorf
    f = np.minimum(f, in_size - 1)
    return f.astype(np.int64)


def _torch_lo(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """Window starts equivalent to PyTorch CPU's (monotone) scatter map."""
    idx = _torch_idx(in_size, out_size, scale)
    return np.searchsorted(idx, np.arange(in_size + 1), side="left").astype(np.int64)


def _owner(lo: np.ndarray, out_size: int) -> np.ndarray:
    """Input index owning every output index under window table ``lo`` (-1 if none)."""
    owner = np.full(out_size, -1, dtype=np.int64)
    counts = np.diff(lo)
    owner[lo[0] : lo[-1]] = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return owner


def _check_1d(in_size: Any, out_size: Any, scale: Any) -> tuple[int, int, float | None]:
    i = _as_int("in_size", in_size)
    o = _as_int("out_size", out_size)
    if i <= 0:
        raise ValueError(f"in_size must be > 0, got {i}")
    if o <= 0:
        raise ValueError(f"out_size must be > 0, got {o}")
    return i, o, _check_scale("scale", scale)


def window_starts(in_size: int, out_size: int, scale: float | None = None, *, convention: str = "cann") -> np.ndarray:
    """Index table of one dim.

    Parameters
    ----------
    in_size : int
        gradInput size ``I`` of the dim (forward input).
    out_size : int
        gradOut size ``O`` of the dim (forward output).
    scale : float or None
        Forward scale of the dim; used when > 0.  For ``"cann"`` this is the
        dim's already-resolved scale: in 3-D, CANN only uses user scales when
        all three are > 0 (see :func:`resolve_scales`).
    convention : {"cann", "torch_cpu"}
        Index law.

    Returns
    -------
    numpy.ndarray of int64
        ``"cann"``: ``lo(0..I)`` (length ``I + 1``); window ``i`` is
        ``[lo(i), lo(i + 1))``.  ``"torch_cpu"``: the input index of every
        output index (length ``O``).
    """
    convention = _check_choice("convention", convention, CONVENTIONS)
    i, o, s = _check_1d(in_size, out_size, scale)
    if convention == "cann":
        sf = np.float32(s) if _given(s) else np.float32(o) / np.float32(i)
        return _cann_lo(i, o, sf)
    return _torch_idx(i, o, s)


def _mismatches(i: int, o: int, cann_scale: float | None, torch_scale: float | None) -> list[tuple[int, int, int]]:
    sf = np.float32(cann_scale) if _given(cann_scale) else np.float32(o) / np.float32(i)
    cann = _owner(_cann_lo(i, o, sf), o)
    torch = _torch_idx(i, o, torch_scale)
    diff = np.nonzero(cann != torch)[0]
    return [(int(k), int(cann[k]), int(torch[k])) for k in diff]


def tie_mismatches(in_size: int, out_size: int, scale: float | None = None) -> list[tuple[int, int, int]]:
    """Output indices that the two conventions send to different inputs (one dim).

    Parameters
    ----------
    in_size, out_size : int
        ``I`` and ``O`` of the dim.
    scale : float or None
        Forward scale of the dim, used by both conventions when > 0.

    Returns
    -------
    list of tuple of int
        ``(o, cann_input_index, torch_input_index)`` sorted by ``o``.  The CANN
        index is -1 when ``o`` lies in no CANN window (only possible with a
        user scale below ``O / I``).
    """
    i, o, s = _check_1d(in_size, out_size, scale)
    return _mismatches(i, o, s, s)


def convention_differences(
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> dict[str, list[tuple[int, int, int]]]:
    """Per-dim differences between the ``"cann"`` and ``"torch_cpu"`` conventions in 3-D.

    Unlike :func:`tie_mismatches`, this applies CANN's all-or-none scale rule
    while PyTorch decides per dim, so mixed scales show up here.

    Parameters
    ----------
    output_size : sequence of int
        ``(oD, oH, oW)``.
    input_size : sequence of int
        ``(N, C, iD, iH, iW)``.
    scales_d, scales_h, scales_w : float or None
        Forward scale factors.

    Returns
    -------
    dict
        Keys ``"D"``, ``"H"``, ``"W"``; values as in :func:`tie_mismatches`.
    """
    osz, isz = _check_sizes(output_size, input_size)
    raw = _check_scales(scales_d, scales_h, scales_w)
    cann = resolve_scales(osz, isz, *raw)
    return {name: _mismatches(isz[k + 2], osz[k], cann[k], raw[k]) for k, name in enumerate(_DIM_NAMES)}
