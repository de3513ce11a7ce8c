"""The backward's index laws, CANN's float32 windows and PyTorch CPU's scatter map, as tables of window starts
``lo`` per dim (gradInput element ``i`` sums gradOut ``[lo[i], lo[i + 1])``), and their comparison."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._validate import _DIM_NAMES, CONVENTIONS, Scales, _check_args, _check_choice, _check_dim, _check_scale, _given

_F32 = np.float32


def _cann_factor(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """CANN's float32 factor of one dim: ``f32(scale)`` when given, else ``f32(O) / f32(I)``."""
    return _F32(scale) if _given(scale) else _F32(out_size) / _F32(in_size)


def _cann_factors(osz: Sequence[int], isz: Sequence[int], scales: Scales) -> list[np.float32]:
    """The three factors: user scales only when all three are > 0 (cann-abi.md §5.2)."""
    use = all(_given(s) for s in scales)
    return [_cann_factor(isz[k + 2], osz[k], scales[k] if use else None) for k in range(3)]


def _cann_lo(in_size: int, out_size: int, s: np.float32) -> np.ndarray:
    """CANN window starts ``lo(0..I) = min(max(ceil(f32(f32(i) * s) - 0.5), 0), O)``, int64."""
    i = np.arange(in_size + 1, dtype=np.int64).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        c = np.ceil(i * _F32(s) - _F32(0.5))  # two float32 roundings (Muls, Adds)
    return np.clip(c, 0, out_size).astype(np.int64)  # inf -> O


def _torch_idx(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """PyTorch CPU's input index of every output index (cann-abi.md §6.1, ``r`` its ``compute_scales_value``)."""
    with np.errstate(over="ignore", divide="ignore"):
        r = _F32(1.0 / float(scale)) if _given(scale) else _F32(in_size) / _F32(out_size)  # type: ignore[arg-type]
    v = (np.arange(out_size, dtype=np.float64) + 0.5) * np.float64(r)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.floor(v.astype(_F32))
    return np.minimum(f, in_size - 1).astype(np.int64)


def _torch_lo(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """Window starts equivalent to PyTorch CPU's (monotone) scatter map."""
    idx = _torch_idx(in_size, out_size, scale)
    return np.searchsorted(idx, np.arange(in_size + 1), side="left").astype(np.int64)


def _owner(lo: np.ndarray, out_size: int) -> np.ndarray:
    """The input index whose window ``[lo[i], lo[i + 1])`` holds each output index (-1 where none does)."""
    owner = np.full(out_size, -1, dtype=np.int64)
    owner[lo[0] : lo[-1]] = np.repeat(np.arange(len(lo) - 1, dtype=np.int64), np.diff(lo))
    return owner


def _differences(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int, int]]:
    """``(o, a[o], b[o])`` for every ``o`` where two index maps differ."""
    return [(int(o), int(a[o]), int(b[o])) for o in np.nonzero(a != b)[0]]


def _mismatches(i: int, o: int, cann_scale: float | None, torch_scale: float | None) -> list[tuple[int, int, int]]:
    return _differences(_owner(_cann_lo(i, o, _cann_factor(i, o, cann_scale)), o), _torch_idx(i, o, torch_scale))


def mixed_scales(scales_d: float | None = None, scales_h: float | None = None, scales_w: float | None = None) -> bool:
    """True when some but not all three scales are > 0: CANN then uses size ratios in every dim, PyTorch decides
    per dim (cann-abi.md §5.2, §6.4)."""
    flags = [_given(s) for s in (scales_d, scales_h, scales_w)]
    return any(flags) and not all(flags)


def resolve_scales(output_size: Sequence[int], input_size: Sequence[int], scales_d: float | None = None,
                   scales_h: float | None = None, scales_w: float | None = None) -> tuple[float, float, float]:
    """The float32 factors ``s_k`` of the CANN kernel (cann-abi.md §5.2) as exact floats; *output_size* is ``(oD,
    oH, oW)``, *input_size* ``(N, C, iD, iH, iW)`` or ``(iD, iH, iW)``."""
    if len(input_size) == 3:
        input_size = (1, 1, *input_size)
    osz, isz, scales = _check_args(output_size, input_size, scales_d, scales_h, scales_w)
    return tuple(float(s) for s in _cann_factors(osz, isz, scales))  # type: ignore[return-value]


def window_starts(in_size: int, out_size: int, scale: float | None = None, *, convention: str = "cann") -> np.ndarray:
    """The int64 index table of one dim (sizes ``I`` of gradInput, ``O`` of gradOut): ``"cann"``, the window starts
    ``lo(0..I)``; ``"torch_cpu"``, the input index of every output index.  *scale* is the dim's resolved scale
    (:func:`resolve_scales`), used when > 0."""
    convention = _check_choice("convention", convention, CONVENTIONS)
    i, o = _check_dim(in_size, out_size)
    s = _check_scale("scale", scale)
    return _cann_lo(i, o, _cann_factor(i, o, s)) if convention == "cann" else _torch_idx(i, o, s)


def tie_mismatches(in_size: int, out_size: int, scale: float | None = None) -> list[tuple[int, int, int]]:
    """``(o, cann_input_index, torch_input_index)`` for each output index of one dim that the two conventions send
    to different inputs (*scale* used by both when > 0); the CANN index is -1 where ``o`` is in no window."""
    i, o = _check_dim(in_size, out_size)
    s = _check_scale("scale", scale)
    return _mismatches(i, o, s, s)


def convention_differences(output_size: Sequence[int], input_size: Sequence[int], scales_d: float | None = None,
                           scales_h: float | None = None, scales_w: float | None = None
                           ) -> dict[str, list[tuple[int, int, int]]]:
    """Per dim (``"D"``, ``"H"``, ``"W"``), :func:`tie_mismatches` in 3-D, with CANN's all-or-none scale rule and
    PyTorch's per-dim one (so mixed scales show up)."""
    osz, isz, raw = _check_args(output_size, input_size, scales_d, scales_h, scales_w)
    cann = _cann_factors(osz, isz, raw)
    return {name: _mismatches(isz[k + 2], osz[k], float(cann[k]), raw[k]) for k, name in enumerate(_DIM_NAMES)}
