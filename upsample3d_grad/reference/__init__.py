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

Both conventions are monotone maps (:mod:`._laws`), so both reduce to a table
of window starts and share one summation engine.  Sums are accumulated in float32 and
rounded once to the result dtype (float16 / bfloat16 included).

The summation engine (:mod:`._sum_passes`, one pass; :mod:`._sum_plans`, one call) sums gradOut over
those tables: separably, one pass per reduced dim, in cache-sized chunks,
with a fast path for identity and pure-scatter dims.  Only the window indices
are exact; float32 summation order may differ between its methods by a few
ulps.  Window tables and plans are cached per call shape, so repeated calls
with the same sizes and scales skip the planning.  One BLAS matmul method
runs on as many threads as the BLAS library is set to use
(``OPENBLAS_NUM_THREADS``); everything else runs on the calling thread unless
``threads`` says otherwise.

The forward operator's reference, :mod:`upsample3d_grad.reference.forward` (the kernel's
law per SoC and the adjoint residual), is importable from here too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ._laws import (
    _cann_lo,
    _owner,
    _torch_idx,
    _torch_lo,
    convention_differences,
    mixed_scales,
    resolve_scales,
    tie_mismatches,
    window_starts,
)
from ._sum_plans import Dim, SumPlan, run_backward, spatial_axes
from ._validate import (
    CONVENTIONS,
    LAYOUTS,
    SUPPORTED_DTYPES,
    _as_int,
    _check_array,
    _check_choice,
    _check_scales,
    _check_sizes,
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
    upsample_nearest_exact3d_forward,
)

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
    # the forward operator's reference (:mod:`upsample3d_grad.reference.forward`)
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
def _plan(shape: tuple[int, ...], layout: str, keys: tuple[tuple[int, int, float | None, str], ...]) -> SumPlan:
    return SumPlan(shape, layout, tuple(_dim(*k) for k in keys))  # type: ignore[arg-type]


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
