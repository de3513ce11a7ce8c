"""Pure-numpy reference of ``aclnnUpsampleNearestExact3dBackward``.

The backward of 3-D nearest-exact upsampling sums, for every gradInput
element, the gradOut elements that the forward copied from it.  Two index
conventions are provided:

``"cann"`` (default)
    The float32 window law of the CANN kernel (cann-abi.md §5.2, §5.3, §6.5)::

        s      = f32(scale_k)            if all three scales are given and > 0
               = f32(O_k) / f32(I_k)     otherwise (for every dim)
        lo(i)  = min(max(ceil(f32(f32(i) * s) - 0.5), 0), O_k)
        gradInput[i] = sum(gradOut[o] for o in [lo(i), lo(i + 1)))

``"torch_cpu"``
    PyTorch CPU's scatter (cann-abi.md §6.1, §6.3): gradOut index ``o`` goes
    to input index ``min(floor(f32(double(o + 0.5) * double(r))), I - 1)``
    with ``r = f32(1.0 / scale)`` when that dim's scale is given and > 0
    (decided per dim) and ``r = f32(I) / f32(O)`` otherwise.

Both conventions are monotone maps, so both reduce to a table of window
starts and share one summation engine.  Sums are accumulated in float32 and
rounded once to the result dtype (float16 / bfloat16 included).

The summation engine (:mod:`upsample3d_grad._window_sums`) sums gradOut over
those tables: separably, one pass per reduced dim, in cache-sized chunks,
with a fast path for identity and pure-scatter dims.  Only the window indices
are exact; float32 summation order may differ between its methods by a few
ulps.  Window tables and plans are cached per call shape, so repeated calls
with the same sizes and scales skip the planning.  One BLAS matmul method
runs on as many threads as the BLAS library is set to use
(``OPENBLAS_NUM_THREADS``); everything else runs on the calling thread unless
``threads`` says otherwise.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ._window_sums import Dim, Plan, run_backward, spatial_axes

__all__ = [
    "CONVENTIONS",
    "LAYOUTS",
    "SUPPORTED_DTYPES",
    "convention_differences",
    "mixed_scales",
    "resolve_scales",
    "tie_mismatches",
    "upsample_nearest_exact3d",
    "upsample_nearest_exact3d_backward",
    "window_starts",
]

LAYOUTS: tuple[str, ...] = ("NCDHW", "NDHWC")
"""Supported memory layouts (physical dim orders)."""

CONVENTIONS: tuple[str, ...] = ("cann", "torch_cpu")
"""Supported index conventions."""

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
SUPPORTED_DTYPES: tuple[np.dtype, ...] = (_F32, np.dtype(np.float16), _BF16)
"""dtypes accepted for gradOut (cann-abi.md §5.1 step 3.2)."""

_DIM_NAMES = ("D", "H", "W")

# --------------------------------------------------------------------------
# Scalar helpers and validation
# --------------------------------------------------------------------------


def _given(scale: float | None) -> bool:
    """True when a scale counts as supplied: not None and > 0 (NaN is not)."""
    return scale is not None and scale > 0


def _check_scale(name: str, scale: Any) -> float | None:
    """Validate one scale argument and return it as a float (or None)."""
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number or None, got {scale!r}")
    value = float(scale)
    if value > 0:
        with np.errstate(over="ignore"):
            as_f32 = np.float32(value)
        if not math.isfinite(value) or not np.isfinite(as_f32):
            raise ValueError(f"{name} must be finite in float32 when > 0, got {scale!r}")
    return value


def _check_scales(scales_d: Any, scales_h: Any, scales_w: Any) -> list[float | None]:
    """Validate the three scale arguments (``scales_d``, ``scales_h``, ``scales_w``)."""
    return [_check_scale(f"scales_{m.lower()}", s) for m, s in zip(_DIM_NAMES, (scales_d, scales_h, scales_w))]

def _as_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _int_tuple(name: str, values: Any) -> tuple[int, ...]:
    """*values* as a tuple of ints; an error names the element (``name[k]``)."""
    if all(type(v) is int for v in values):  # the usual case, without building every element's name
        return tuple(values)
    return tuple(_as_int(f"{name}[{k}]", v) for k, v in enumerate(values))


def _check_sizes(output_size: Any, input_size: Any) -> tuple[tuple[int, int, int], tuple[int, int, int, int, int]]:
    """Validate ``output_size`` (3 ints > 0) and ``input_size`` (N, C >= 0; D, H, W > 0)."""
    if isinstance(output_size, (str, bytes)) or not isinstance(output_size, (Sequence, np.ndarray)):
        raise ValueError(f"output_size must be a sequence of 3 integers, got {output_size!r}")
    if len(output_size) != 3:
        raise ValueError(f"output_size must have length 3 (oD, oH, oW), got length {len(output_size)}: {output_size!r}")
    if isinstance(input_size, (str, bytes)) or not isinstance(input_size, (Sequence, np.ndarray)):
        raise ValueError(f"input_size must be a sequence of 5 integers, got {input_size!r}")
    if len(input_size) != 5:
        raise ValueError(
            f"input_size must have length 5 (N, C, iD, iH, iW), got length {len(input_size)}: {input_size!r}"
        )
    osz, isz = _int_tuple("output_size", output_size), _int_tuple("input_size", input_size)
    for k in range(3):
        if osz[k] <= 0:
            raise ValueError(f"output_size[{k}] ({_DIM_NAMES[k]}) must be > 0, got {osz[k]}")
        if isz[k + 2] <= 0:
            raise ValueError(f"input_size[{k + 2}] ({_DIM_NAMES[k]}) must be > 0, got {isz[k + 2]}")
    for k in range(2):
        if isz[k] < 0:
            raise ValueError(f"input_size[{k}] ({'NC'[k]}) must be >= 0, got {isz[k]}")
    return osz, isz  # type: ignore[return-value]


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _check_array(name: str, arr: Any) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} dtype must be one of float32, float16, bfloat16, got {arr.dtype}")
    if arr.ndim != 5:
        raise ValueError(f"{name} must be 5-D, got {arr.ndim}-D with shape {arr.shape}")
    return arr


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, int, int, int, int]:
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)


# --------------------------------------------------------------------------
# Index laws
# --------------------------------------------------------------------------


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
            return np.float32(1.0 / float(scale))  # reciprocal in double, rounded to float
        return np.float32(in_size) / np.float32(out_size)


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


# --------------------------------------------------------------------------
# Forward (used for the adjoint identity)
# --------------------------------------------------------------------------


def upsample_nearest_exact3d(
    x: np.ndarray,
    output_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    layout: str = "NCDHW",
    convention: str = "cann",
) -> np.ndarray:
    """Forward nearest-exact 3-D resampling under the chosen index convention.

    Parameters
    ----------
    x : numpy.ndarray
        Input, float32/float16/bfloat16; shape ``(N, C, iD, iH, iW)`` for
        ``"NCDHW"`` or ``(N, iD, iH, iW, C)`` for ``"NDHWC"``.
    output_size : sequence of int
        ``(oD, oH, oW)``.
    scales_d, scales_h, scales_w : float or None
        Forward scale factors, interpreted as by the backward.
    layout : {"NCDHW", "NDHWC"}
        Physical dim order of ``x`` and of the result.
    convention : {"cann", "torch_cpu"}
        ``"cann"``: output ``o`` takes the input whose CANN window contains it
        (0 when no window does).  ``"torch_cpu"``: PyTorch CPU's index map.

    Returns
    -------
    numpy.ndarray
        The resampled array, same dtype and layout as ``x``.  It is the
        adjoint of :func:`upsample_nearest_exact3d_backward`.
    """
    layout = _check_choice("layout", layout, LAYOUTS)
    convention = _check_choice("convention", convention, CONVENTIONS)
    x = _check_array("x", x)
    if layout == "NCDHW":
        n, c, d, h, w = x.shape
    else:
        n, d, h, w, c = x.shape
    osz, isz = _check_sizes(output_size, (n, c, d, h, w))
    scales = _check_scales(scales_d, scales_h, scales_w)
    y = x
    for k, ax in enumerate(spatial_axes(layout)):
        if convention == "cann":
            src = _owner(_lo_tables(osz, isz, scales, "cann")[k], osz[k])
        else:
            src = _torch_idx(isz[k + 2], osz[k], scales[k])
        y = np.take(y, np.maximum(src, 0), axis=ax)
        missing = np.nonzero(src < 0)[0]
        if missing.size:
            y[(slice(None),) * ax + (missing,)] = 0
    return np.ascontiguousarray(y)


# --------------------------------------------------------------------------
# Window tables and plans (cached per sizes, scales and convention)
# --------------------------------------------------------------------------

@functools.lru_cache(maxsize=512)
def _dim(in_size: int, out_size: int, key: float | None, convention: str) -> Dim:
    if convention == "cann":
        assert key is not None
        return Dim(_cann_lo(in_size, out_size, np.float32(key)), out_size)
    return Dim(_torch_lo(in_size, out_size, key), out_size)


def _dim_keys(
    osz: tuple[int, ...], isz: tuple[int, ...], scales: Sequence[float | None], convention: str
) -> tuple[tuple[int, int, float | None, str], ...]:
    """Cache keys of the three dims: the float32 factor (cann) or the per-dim scale (torch_cpu)."""
    return _dim_keys_of(osz, isz, tuple(scales), convention)


@functools.lru_cache(maxsize=512)
def _dim_keys_of(
    osz: tuple[int, ...], isz: tuple[int, ...], scales: tuple[float | None, ...], convention: str
) -> tuple[tuple[int, int, float | None, str], ...]:
    if convention == "cann":
        use = all(_given(s) for s in scales)
        keys = []
        for k in range(3):
            i, o = isz[k + 2], osz[k]
            sf = np.float32(scales[k]) if use else np.float32(o) / np.float32(i)  # type: ignore[arg-type]
            keys.append((i, o, float(sf), convention))
        return tuple(keys)
    return tuple(
        (isz[k + 2], osz[k], float(scales[k]) if _given(scales[k]) else None, convention)  # type: ignore[arg-type]
        for k in range(3)
    )


def _lo_tables(
    osz: tuple[int, ...], isz: tuple[int, ...], scales: list[float | None], convention: str
) -> list[np.ndarray]:
    """Read-only window-start tables of D, H, W."""
    return [_dim(*key).lo for key in _dim_keys(osz, isz, scales, convention)]


@functools.lru_cache(maxsize=128)
def _plan(shape: tuple[int, ...], layout: str, keys: tuple[tuple[int, int, float | None, str], ...]) -> Plan:
    return Plan(shape, layout, tuple(_dim(*k) for k in keys))  # type: ignore[arg-type]


def upsample_nearest_exact3d_backward(
    grad_output: np.ndarray,
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_d: float | None = None,
    scales_h: float | None = None,
    scales_w: float | None = None,
    *,
    layout: str = "NCDHW",
    convention: str = "cann",
    out: np.ndarray | None = None,
    threads: int = 1,
) -> np.ndarray:
    """Reference gradient of 3-D nearest-exact upsampling.

    Parameters
    ----------
    grad_output : numpy.ndarray
        gradOut, float32/float16/bfloat16 (``ml_dtypes.bfloat16``), any
        strides.  Shape ``(N, C, oD, oH, oW)`` for ``"NCDHW"`` or the
        physical ``(N, oD, oH, oW, C)`` for ``"NDHWC"``.
    output_size : sequence of int
        ``(oD, oH, oW)``.
    input_size : sequence of int
        ``(N, C, iD, iH, iW)`` whatever the layout (cann-abi.md §5.6).
    scales_d, scales_h, scales_w : float or None
        Forward scale factors (output/input); a scale is used when > 0.
    layout : {"NCDHW", "NDHWC"}
        Physical dim order of ``grad_output`` and of the result.
    convention : {"cann", "torch_cpu"}
        ``"cann"``: the CANN kernel's float32 windows, where user scales only
        count when all three are > 0.  ``"torch_cpu"``: PyTorch CPU's scatter
        map, scales decided per dim.
    out : numpy.ndarray, optional
        Preallocated result (right shape and dtype, no overlap with
        ``grad_output``); written in place and returned.
    threads : int
        Threads that sum the cache-sized chunks (default 1: the calling
        thread only); e.g. ``os.cpu_count()`` for large inputs.  Calls
        with nothing to sum (identity, pure scatter) use one thread.  The
        result does not depend on it: every chunk is summed the same way.

    Returns
    -------
    numpy.ndarray
        gradInput, dtype of ``grad_output``: ``(N, C, iD, iH, iW)`` or, for
        ``"NDHWC"``, ``(N, iD, iH, iW, C)``.  Sums are accumulated in float32
        and rounded once.

    Raises
    ------
    ValueError
        On a bad rank, size list, shape mismatch, dtype, layout, convention,
        scale, ``out`` array or thread count.
    """
    layout = _check_choice("layout", layout, LAYOUTS)
    convention = _check_choice("convention", convention, CONVENTIONS)
    g = _check_array("grad_output", grad_output)
    osz, isz = _check_sizes(output_size, input_size)
    scales = _check_scales(scales_d, scales_h, scales_w)
    threads = _as_int("threads", threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    n, c = isz[0], isz[1]
    expect_in = _phys(layout, n, c, *osz)
    if g.shape != expect_in:
        raise ValueError(
            f"grad_output shape must be {expect_in} ({layout} from input_size N, C and output_size), got {g.shape}"
        )
    expect_out = _phys(layout, n, c, *isz[2:])
    plan = _plan(g.shape, layout, _dim_keys(osz, isz, scales, convention))
    if out is None:
        # A scatter leaves gaps of zeros: np.zeros gets them from calloc (memory the kernel or the
        # allocator hands out zeroed) instead of a second pass over the whole result.
        res = np.zeros(expect_out, dtype=g.dtype) if plan.scatter else np.empty(expect_out, dtype=g.dtype)
    else:
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
        res = out
        if plan.scatter:
            res.fill(0)
    run_backward(g, plan, res, threads)
    return res
