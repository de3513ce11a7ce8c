"""The numpy reference (upsample3d_grad.reference) against independent slow oracles.

The oracles here are written from the index laws in cann-abi.md §5.3, §6.1 and §6.5
with numpy float32 *scalars* and Python loops, so they share no code with the
vectorised tables and the summation engine (upsample3d_grad.reference._sum_passes
and _sum_plans) under test.  Most data is small integers: every window sum is then
exact in float32 whatever the summation order, so results can be compared exactly
(and index errors cannot hide in a tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upsample3d_grad import reference as R
from upsample3d_grad.reference import _sum_passes as passes
from upsample3d_grad.reference import _sum_plans as plans

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
LAYOUTS = ["NCDHW", "NDHWC"]
CONVENTIONS = ["cann", "torch_cpu"]


# --------------------------------------------------------------------------- slow oracles


def slow_cann_lo(in_size: int, out_size: int, s: float) -> list[int]:
    """lo(i) = min(max(ceil(f32(f32(i)*s) - 0.5), 0), O), one float32 scalar at a time."""
    s32 = np.float32(s)
    res = []
    for i in range(in_size + 1):
        p = np.float32(np.float32(i) * s32)
        q = np.float32(p - np.float32(0.5))
        res.append(min(max(math.ceil(float(q)), 0), out_size))
    return res


def slow_torch_idx(in_size: int, out_size: int, scale: float | None) -> list[int]:
    """min(floor(f32(double(o + 0.5) * double(r))), I - 1), r as PyTorch CPU computes it."""
    r = np.float32(1.0 / scale) if (scale is not None and scale > 0) else np.float32(in_size) / np.float32(out_size)
    res = []
    for o in range(out_size):
        prod = (o + 0.5) * float(r)  # Python float = C double
        res.append(min(math.floor(float(np.float32(prod))), in_size - 1))
    return res


def cann_factors(osz, isz, scales) -> list[float]:
    if all(s is not None and s > 0 for s in scales):
        return [float(np.float32(s)) for s in scales]
    return [float(np.float32(o) / np.float32(i)) for o, i in zip(osz, isz[2:])]


def slow_maps(osz, isz, scales, convention) -> list[list[int]]:
    """For every dim, the gradInput index of each gradOut index (-1: no window)."""
    maps = []
    if convention == "cann":
        for k, s in enumerate(cann_factors(osz, isz, scales)):
            lo = slow_cann_lo(isz[k + 2], osz[k], s)
            owner = [-1] * osz[k]
            for i in range(isz[k + 2]):
                for o in range(lo[i], lo[i + 1]):
                    owner[o] = i
            maps.append(owner)
    else:
        for k in range(3):
            maps.append(slow_torch_idx(isz[k + 2], osz[k], scales[k]))
    return maps


def slow_backward(g_ncdhw: np.ndarray, osz, isz, scales=(None, None, None), convention="cann") -> np.ndarray:
    """Scatter-add (np.add.at) every gradOut element into its gradInput element, in float64 (NCDHW)."""
    maps = [np.array(m, dtype=np.int64) for m in slow_maps(osz, isz, scales, convention)]
    keep = [np.flatnonzero(m >= 0) for m in maps]  # gradOut indices inside some window
    g = g_ncdhw.astype(np.float64)[np.ix_(range(isz[0]), range(isz[1]), *keep)]
    dst = [m[k] for m, k in zip(maps, keep)]
    out = np.zeros(isz, dtype=np.float64)
    np.add.at(out, (slice(None), slice(None), dst[0][:, None, None], dst[1][None, :, None], dst[2][None, None, :]), g)
    return out


def to_layout(a: np.ndarray, layout: str) -> np.ndarray:
    return a if layout == "NCDHW" else a.transpose(0, 2, 3, 4, 1)


def int_data(rng: np.random.Generator, shape, dtype, lo: int = -8, hi: int = 9) -> np.ndarray:
    return rng.integers(lo, hi, size=shape).astype(np.float32).astype(dtype)


@contextmanager
def engine(method: str | None = None, chunks: int | None = None, d_major: bool | None = None) -> Iterator[None]:
    """Force a summation method / chunk count / chunk order in the engine (plans are cached, so clear them).

    ``d_major``: True chunks D-major whenever D is reduced, False never, None as the engine decides."""
    old = (passes._FORCE_METHOD, plans._FORCE_CHUNKS, plans._D_MAJOR_CALLS)
    passes._FORCE_METHOD, plans._FORCE_CHUNKS = method, chunks
    if d_major is not None:
        plans._D_MAJOR_CALLS = -1 if d_major else 1 << 30
    R._plan.cache_clear()
    try:
        yield
    finally:
        passes._FORCE_METHOD, plans._FORCE_CHUNKS, plans._D_MAJOR_CALLS = old
        R._plan.cache_clear()


# --------------------------------------------------------------------------- known answer


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_official_sample(dtype: np.dtype, layout: str) -> None:
    """OCV sample (cann-abi.md §5.6): gradOut 1..32 in (2,2,2,2,2) -> the four block sums."""
    g = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
    res = R.upsample_nearest_exact3d_backward(to_layout(g, layout).astype(dtype), (2, 2, 2), (2, 2, 1, 1, 1),
                                              layout=layout)
    assert res.dtype == dtype
    assert res.shape == to_layout(np.zeros((2, 2, 1, 1, 1)), layout).shape
    assert res.astype(np.float32).ravel().tolist() == [36.0, 100.0, 164.0, 228.0]  # N, C order either way


def test_accumulates_in_float32_and_rounds_once() -> None:
    """Eight bf16 values whose float32 sum rounds differently than a bf16 running sum."""
    vals = np.array([256, 1, 1, 1, 1, 1, 1, 1], dtype=np.float32)  # exact sum 263, a bf16 tie
    g = vals.reshape(1, 1, 2, 2, 2).astype(ml_dtypes.bfloat16)
    res = R.upsample_nearest_exact3d_backward(g, (2, 2, 2), (1, 1, 1, 1, 1))
    assert float(res.ravel()[0]) == float(np.float32(263).astype(ml_dtypes.bfloat16))  # 264
    running = ml_dtypes.bfloat16(0)
    for v in g.ravel():
        running = ml_dtypes.bfloat16(np.float32(running) + np.float32(v))
    assert float(running) == 256.0  # what per-step bf16 rounding would give instead
    g16 = np.array([2048, 1, 1, 1, 1, 1, 1, 1], dtype=np.float16).reshape(1, 1, 2, 2, 2)  # float16 step is 2 here
    res16 = R.upsample_nearest_exact3d_backward(g16, (2, 2, 2), (1, 1, 1, 1, 1))
    assert float(res16.ravel()[0]) == 2056.0  # 2055 rounded once (a running float16 sum would stay 2048)


# --------------------------------------------------------------------------- index tables


PAIRS = [(i, o) for i in range(1, 33) for o in range(1, 70)] + [(2, 41), (27, 8), (300, 7), (7, 300), (1, 50), (50, 1)]


def test_window_starts_cann_matches_float32_emulation() -> None:
    for i, o in PAIRS:
        s = float(np.float32(o) / np.float32(i))
        assert R.window_starts(i, o).tolist() == slow_cann_lo(i, o, s), (i, o)


def test_window_starts_torch_matches_float32_emulation() -> None:
    for i, o in PAIRS:
        assert R.window_starts(i, o, convention="torch_cpu").tolist() == slow_torch_idx(i, o, None), (i, o)


@pytest.mark.parametrize("scale", [0.3, 0.5, 1.5, 2.0, 2.5, 3.3, 7.0, 0.1, 10.0, 1 / 3])
def test_window_starts_with_user_scale(scale: float) -> None:
    for i in range(1, 60):
        o = max(1, math.floor(i * scale))
        assert R.window_starts(i, o, scale).tolist() == slow_cann_lo(i, o, scale), (i, o, scale)
        assert R.window_starts(i, o, scale, convention="torch_cpu").tolist() == slow_torch_idx(i, o, scale)


def test_documented_ties() -> None:
    """cann-abi.md §6.3: I=2, O=41, o=20 and I=27, scale 0.3, O=8, o=7."""
    lo = R.window_starts(2, 41)
    assert lo[1] == 20  # o = 20 opens window 1 under CANN
    assert R.window_starts(2, 41, convention="torch_cpu")[20] == 0
    assert R.tie_mismatches(2, 41) == [(20, 1, 0)]
    lo = R.window_starts(27, 8, 0.3)
    assert lo[24] <= 7 < lo[25]  # CANN: o = 7 belongs to i = 24
    assert R.window_starts(27, 8, 0.3, convention="torch_cpu")[7] == 25
    assert (7, 24, 25) in R.tie_mismatches(27, 8, 0.3)


def test_window_table_properties() -> None:
    for i, o in PAIRS:
        lo = R.window_starts(i, o)
        assert len(lo) == i + 1 and lo.dtype == np.int64
        assert lo[0] == 0 and lo[-1] == o  # size-derived scale: no gradOut index is dropped
        assert np.all(np.diff(lo) >= 0)


def test_resolve_scales_and_mixed() -> None:
    assert R.resolve_scales((4, 8, 12), (2, 2, 2, 4, 8), 2.0, 2.0, 1.5) == (2.0, 2.0, 1.5)
    s = R.resolve_scales((5, 7, 9), (1, 1, 3, 3, 3))
    assert s == tuple(float(np.float32(o) / np.float32(3)) for o in (5, 7, 9))
    assert s[0] != 5 / 3  # float32 division, not double
    assert R.resolve_scales((4, 8, 12), (2, 2, 2, 4, 8), 0.3, 0.0, None) == (2.0, 2.0, 1.5)  # mixed: sizes
    assert R.resolve_scales((5, 7, 9), (3, 3, 3), 0.1, 0.1, 0.1) == (float(np.float32(0.1)),) * 3
    assert R.mixed_scales(1.0, None, 2.0)
    assert R.mixed_scales(0.0, 0.0, 2.0)
    assert not R.mixed_scales(1.0, 1.5, 2.0)
    assert not R.mixed_scales(None, None, None)
    assert not R.mixed_scales(-1.0, 0.0, None)
    assert not R.mixed_scales(float("nan"), None, None)  # NaN > 0 is false, as in C


def test_tie_mismatches_are_exactly_the_differences_and_exact_ties() -> None:
    total = 0
    for i in range(1, 61):
        for o in range(1, 61):
            got = R.tie_mismatches(i, o)
            cann = slow_maps((o, 1, 1), (1, 1, i, 1, 1), (None,) * 3, "cann")[0]
            torch = slow_torch_idx(i, o, None)
            want = [(k, cann[k], torch[k]) for k in range(o) if cann[k] != torch[k]]
            assert got == want, (i, o)
            for k, _, _ in got:
                assert (2 * k + 1) * i % (2 * o) == 0, (i, o, k)  # (k + 0.5) * I / O is an integer
            total += len(got)
    assert total > 0  # the sweep does contain ties


def test_tie_mismatches_with_user_scales_match_emulation() -> None:
    found = 0
    for scale in (0.3, 0.7, 1.1, 2.2, 3.3, 0.45):
        for i in range(1, 120):
            o = math.floor(i * scale)
            if o < 1:
                continue
            got = R.tie_mismatches(i, o, scale)
            lo = slow_cann_lo(i, o, scale)
            cann = [-1] * o
            for a in range(i):
                for b in range(lo[a], lo[a + 1]):
                    cann[b] = a
            torch = slow_torch_idx(i, o, scale)
            assert got == [(k, cann[k], torch[k]) for k in range(o) if cann[k] != torch[k]], (i, o, scale)
            found += len(got)
    assert found > 0


def test_convention_differences_mixed_scales() -> None:
    osz, isz = (6, 9, 15), (1, 1, 2, 3, 7)
    # all three scales: both conventions use them, dim by dim as tie_mismatches does
    assert R.convention_differences(osz, isz, 3.0, 3.0, 15 / 7) == {
        "D": R.tie_mismatches(2, 6, 3.0), "H": R.tie_mismatches(3, 9, 3.0), "W": R.tie_mismatches(7, 15, 15 / 7)}
    # W scale alone: CANN ignores it (size ratio everywhere), PyTorch uses it for W
    d = R.convention_differences(osz, isz, None, None, 2.5)
    assert d["D"] == R.tie_mismatches(2, 6) and d["H"] == R.tie_mismatches(3, 9)
    cann_w = slow_maps(osz, isz, (None, None, 2.5), "cann")[2]
    torch_w = slow_torch_idx(7, 15, 2.5)
    assert d["W"] == [(k, cann_w[k], torch_w[k]) for k in range(15) if cann_w[k] != torch_w[k]]
    assert d["W"]  # 2.5 instead of 15/7 really moves indices


# --------------------------------------------------------------------------- backward vs slow oracle


def random_case(rng: np.random.Generator, max_in: int = 7):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    isz3, osz3 = [], []
    for _ in range(3):
        i = int(rng.integers(1, max_in + 1))
        kind = rng.integers(0, 5)
        if kind == 0:
            o = i  # identity
        elif kind == 1:
            o = i * int(rng.integers(2, 4))  # integer factor
        elif kind == 2:
            o = int(rng.integers(1, i + 1))  # downsampling (windows of 0 or 1 element)
        elif kind == 3:
            o = int(rng.integers(1, 50 * i + 1)) if i <= 2 else int(rng.integers(1, 30))  # ratio up to 50
        else:
            o = int(rng.integers(1, 25))
        isz3.append(i)
        osz3.append(o)
    return (n, c, *isz3), tuple(osz3)


def strided_view(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """The same values as ``a`` behind non-contiguous strides (step, reversed, or Fortran order)."""
    kind = rng.integers(0, 3)
    if kind == 0:
        big = np.zeros((a.shape[0], a.shape[1] * 2, *a.shape[2:4], a.shape[4] * 3), dtype=a.dtype)
        big[:, ::2, :, :, 1::3] = a
        v = big[:, ::2, :, :, 1::3]
    elif kind == 1:
        big = np.ascontiguousarray(a[:, :, ::-1, :, ::-1])
        v = big[:, :, ::-1, :, ::-1]
    else:
        v = np.asfortranarray(a)
    assert np.array_equal(v, a)
    return v


@pytest.mark.parametrize("method,chunks,d_major", [(None, None, None), ("runs", None, None), ("slide", None, None),
                                                   ("matmul", None, None), ("runs", 5, None), ("slide", 3, None),
                                                   ("matmul", 7, True), ("runs", 6, True), (None, 11, None),
                                                   (None, 9, True), (None, 4, False)])
def test_backward_matches_slow_oracle(method: str | None, chunks: int | None, d_major: bool | None) -> None:
    """Random shapes, every dtype, both layouts, both conventions, strided inputs; exact integers."""
    rng = np.random.default_rng(1234 + (chunks or 0) + (0 if method is None else len(method)) + (d_major is True))
    with engine(method, chunks, d_major):
        for t in range(36):
            isz, osz = random_case(rng)
            dtype = DTYPES[t % 3]
            layout = LAYOUTS[(t // 3) % 2]
            convention = CONVENTIONS[(t // 6) % 2]
            g = int_data(rng, (isz[0], isz[1], *osz), dtype)
            want = slow_backward(g, osz, isz, convention=convention)
            gl = to_layout(g, layout)
            if t % 4 == 1:
                gl = strided_view(rng, gl)
            got = R.upsample_nearest_exact3d_backward(gl, osz, isz, layout=layout, convention=convention)
            want_l = to_layout(want, layout).astype(dtype)  # exact sum, rounded once
            assert got.dtype == dtype and got.shape == want_l.shape
            np.testing.assert_array_equal(got.astype(np.float64), want_l.astype(np.float64),
                                          err_msg=f"{isz} {osz} {dtype} {layout} {convention}")


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_backward_with_scales_matches_slow_oracle(convention: str) -> None:
    rng = np.random.default_rng(99)
    for t in range(30):
        n, c = 1, int(rng.integers(1, 3))
        isz3 = [int(v) for v in rng.integers(1, 8, 3)]
        scales = [float(rng.choice([0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.3, 7.0])) for _ in range(3)]
        osz = tuple(max(1, math.floor(i * s)) for i, s in zip(isz3, scales))
        if t % 3 == 2:  # mixed: CANN falls back to sizes for every dim, PyTorch keeps the given ones
            scales[int(rng.integers(0, 3))] = None  # type: ignore[call-overload]
        isz = (n, c, *isz3)
        g = int_data(rng, (n, c, *osz), np.float32)
        want = slow_backward(g, osz, isz, scales, convention)
        got = R.upsample_nearest_exact3d_backward(g, osz, isz, *scales, convention=convention)
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=f"{isz} {osz} {scales}")


@pytest.mark.parametrize("method", ["runs", "slide", "matmul"])
def test_forced_methods_with_empty_and_single_windows(method: str) -> None:
    """Tables mixing empty, one-element and longer windows (a user scale above O / I cuts the tail) through
    both summation methods, on contiguous inputs (flat sliding sums) and strided ones."""
    rng = np.random.default_rng(21)
    isz, osz, scales = (1, 2, 5, 6, 7), (9, 7, 10), (2.5, 1.5, 2.0)
    assert 0 in np.diff(R.window_starts(5, 9, 2.5)) and 1 in np.diff(R.window_starts(6, 7, 1.5))
    with engine(method):
        for convention in CONVENTIONS:
            g = int_data(rng, (1, 2, *osz), np.float32)
            want = slow_backward(g, osz, isz, scales, convention).astype(np.float32)
            for gl in (g, strided_view(rng, g)):
                got = R.upsample_nearest_exact3d_backward(gl, osz, isz, *scales, convention=convention)
                np.testing.assert_array_equal(got, want, err_msg=f"{method} {convention}")


def test_inconsistent_user_scales_drop_or_clamp() -> None:
    """A scale below O/I leaves trailing gradOut outside every CANN window; torch_cpu clamps them to I-1."""
    isz, osz = (1, 1, 4, 1, 1), (10, 1, 1)
    g = np.arange(1, 11, dtype=np.float32).reshape(1, 1, 10, 1, 1)
    cann = R.upsample_nearest_exact3d_backward(g, osz, isz, 1.5, 1.0, 1.0)
    np.testing.assert_array_equal(cann, slow_backward(g, osz, isz, (1.5, 1.0, 1.0)).astype(np.float32))
    assert cann.sum() < g.sum()  # dropped
    torch = R.upsample_nearest_exact3d_backward(g, osz, isz, 1.5, 1.0, 1.0, convention="torch_cpu")
    assert torch.sum() == g.sum()
    np.testing.assert_array_equal(torch, slow_backward(g, osz, isz, (1.5, 1.0, 1.0), "torch_cpu").astype(np.float32))


def test_mixed_scales_cann_ignores_them() -> None:
    rng = np.random.default_rng(5)
    isz, osz = (2, 3, 3, 4, 5), (7, 9, 11)
    g = int_data(rng, (2, 3, *osz), np.float32)
    plain = R.upsample_nearest_exact3d_backward(g, osz, isz)
    np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz, 2.5, None, 2.0), plain)
    np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz, 0.0, 3.0, 2.0), plain)
    torch_mixed = R.upsample_nearest_exact3d_backward(g, osz, isz, 2.5, None, 2.0, convention="torch_cpu")
    np.testing.assert_array_equal(torch_mixed,
                                  slow_backward(g, osz, isz, (2.5, None, 2.0), "torch_cpu").astype(np.float32))
    assert not np.array_equal(torch_mixed, plain)


def test_backward_real_valued_float32() -> None:
    """Non-integer data: same as the float64 oracle within float32 summation error."""
    rng = np.random.default_rng(7)
    for isz, osz in [((2, 3, 5, 6, 7), (11, 13, 17)), ((1, 2, 3, 3, 3), (40, 3, 60)), ((1, 4, 9, 8, 7), (4, 5, 3))]:
        g = rng.standard_normal((isz[0], isz[1], *osz)).astype(np.float32)
        want = slow_backward(g, osz, isz)
        bound = slow_backward(np.abs(g), osz, isz)
        got = R.upsample_nearest_exact3d_backward(g, osz, isz).astype(np.float64)
        window = max(1, math.prod(-(-o // i) + 1 for o, i in zip(osz, isz[2:])))
        assert np.all(np.abs(got - want) <= window * np.finfo(np.float32).eps * bound + 1e-30)


@pytest.mark.parametrize("method,chunks,d_major", [(None, None, None), ("runs", 4, None), ("slide", 6, None),
                                                   ("matmul", 5, True), (None, 8, False)])
def test_benchmark_like_shapes(method: str | None, chunks: int | None, d_major: bool | None) -> None:
    """Bigger shapes that take the fast paths (factor 2/3, identity, downsampling, coprime)."""
    rng = np.random.default_rng(3)
    cases = [((1, 3, 8, 16, 16), (16, 32, 32)), ((1, 2, 4, 12, 12), (12, 36, 36)), ((1, 2, 16, 16, 16), (16, 16, 16)),
             ((1, 2, 16, 32, 32), (8, 16, 16)), ((1, 2, 17, 33, 41), (40, 100, 100))]
    with engine(method, chunks, d_major):
        for isz, osz in cases:
            for layout in LAYOUTS:
                g = int_data(rng, (isz[0], isz[1], *osz), np.float32)
                want = slow_sum(g, osz, isz)
                got = R.upsample_nearest_exact3d_backward(to_layout(g, layout), osz, isz, layout=layout)
                np.testing.assert_array_equal(got, to_layout(want, layout), err_msg=f"{isz} {osz} {layout}")


def slow_sum(g: np.ndarray, osz, isz) -> np.ndarray:
    """Window sums with the emulated tables, one gradInput (d, h, w) at a time (float64 -> float32)."""
    tabs = [slow_cann_lo(isz[k + 2], osz[k], float(np.float32(osz[k]) / np.float32(isz[k + 2]))) for k in range(3)]
    out = np.empty(isz, dtype=np.float64)
    gd = g.astype(np.float64)
    for d in range(isz[2]):
        a = gd[:, :, tabs[0][d] : tabs[0][d + 1]].sum(axis=2)
        for h in range(isz[3]):
            b = a[:, :, tabs[1][h] : tabs[1][h + 1]].sum(axis=2)
            for w in range(isz[4]):
                out[:, :, d, h, w] = b[:, :, tabs[2][w] : tabs[2][w + 1]].sum(axis=2)
    return out.astype(np.float32)


def test_empty_batch() -> None:
    for isz in [(0, 3, 2, 2, 2), (2, 0, 2, 2, 2)]:
        g = np.zeros((isz[0], isz[1], 4, 4, 4), np.float32)
        res = R.upsample_nearest_exact3d_backward(g, (4, 4, 4), isz)
        assert res.shape == isz and res.dtype == np.float32


def test_nonfinite_values_stay_in_their_window() -> None:
    g = np.ones((1, 1, 4, 4, 4), np.float32)
    g[0, 0, 0, 0, 0] = np.inf
    g[0, 0, 3, 3, 3] = np.nan
    for method in ("runs", "slide", "matmul"):
        for dtype in DTYPES:
            with engine(method):
                res = R.upsample_nearest_exact3d_backward(g.astype(dtype), (4, 4, 4), (1, 1, 2, 2, 2))
            res = res.astype(np.float32)
            assert res[0, 0, 0, 0, 0] == np.inf and np.isnan(res[0, 0, 1, 1, 1]), (method, dtype)
            finite = np.isfinite(res)
            assert finite.sum() == 6 and np.all(res[finite] == 8), (method, dtype)


def test_matmul_pass_falls_back_to_exact_sums() -> None:
    """The W pass by 0/1 matmul: exact on finite data; a non-finite value (0 * inf = nan would reach
    every window of its row) or a non-float32 input sends the pass to its additive fallback."""
    rng = np.random.default_rng(8)
    lo = R.window_starts(4, 10)
    info = passes._TableInfo(lo)
    op = passes._AxisOp(4, info, "matmul", True, "runs")
    x = int_data(rng, (1, 2, 3, 3, 10), np.float32)
    want = np.stack([x[..., lo[i] : lo[i + 1]].sum(axis=-1) for i in range(4)], axis=-1)
    out = np.empty((1, 2, 3, 3, 4), np.float32)
    assert op._matmul(x, out) is True
    np.testing.assert_array_equal(out, want)
    x[0, 1, 2, 1, 3] = np.inf
    assert op._matmul(x, out) is False  # the product spread nan beyond the window
    op(x, out)
    win = int(np.searchsorted(lo, 3, side="right")) - 1
    assert out[0, 1, 2, 1, win] == np.inf
    finite = np.isfinite(out)
    assert finite.sum() == out.size - 1
    np.testing.assert_array_equal(out[finite], want[finite])
    x16 = int_data(rng, (1, 2, 3, 3, 10), np.float16)
    op(x16, out)  # float16 rows are not multiplied: summed exactly in float32
    want16 = np.stack([x16.astype(np.float32)[..., lo[i] : lo[i + 1]].sum(axis=-1) for i in range(4)], axis=-1)
    np.testing.assert_array_equal(out, want16)
    with engine("matmul"):
        plan = R._plan((1, 2, 6, 5, 10), "NCDHW", R._dim_keys((6, 5, 10), (1, 2, 3, 3, 4), [None] * 3, "cann"))
        assert ("matmul", "runs") in plan.methods or ("matmul", "slide") in plan.methods


def test_float16_bit_conversion_is_exact_for_every_pattern() -> None:
    """The float16 -> float32 conversion the engine uses, against numpy's cast, on all 65536 bit patterns
    (zeros, subnormals, normals, infinities, nan payloads), contiguous and strided."""
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    for x in (h, h.reshape(256, 256)[::3, ::-2]):
        out = np.empty(x.shape, np.float32)
        plans._f16_to_f32(x, out)
        want = x.astype(np.float32)
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("threads", [2, 3, 16])
def test_threads_give_the_same_bits(threads: int) -> None:
    """Chunks summed on several threads: bit-identical to one thread (random floats, so a different summation
    order would show), across dtypes, layouts, conventions, methods and chunk orders."""
    rng = np.random.default_rng(40 + threads)
    cases = [((2, 3, 5, 6, 7), (11, 13, 17)), ((1, 4, 17, 33, 41), (40, 100, 100)), ((1, 2, 8, 8, 8), (16, 16, 16)),
             ((1, 3, 6, 8, 8), (3, 4, 4))]
    for k, (isz, osz) in enumerate(cases):
        for method, chunks, d_major in ((None, None, None), ("matmul", 6, True), ("slide", 5, False)):
            with engine(method, chunks, d_major):
                dtype = DTYPES[k % 3]
                layout = LAYOUTS[k % 2]
                convention = CONVENTIONS[(k // 2) % 2]
                g = to_layout(rng.standard_normal((isz[0], isz[1], *osz)).astype(np.float32), layout).astype(dtype)
                one = R.upsample_nearest_exact3d_backward(g, osz, isz, layout=layout, convention=convention)
                many = R.upsample_nearest_exact3d_backward(g, osz, isz, layout=layout, convention=convention,
                                                           threads=threads)
                np.testing.assert_array_equal(many.view(np.uint8), one.view(np.uint8))


def test_threads_from_many_callers_and_errors_reach_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several Python threads share the worker pool; an error in a worker's chunk is raised in the caller
    after every worker has finished."""
    import threading

    rng = np.random.default_rng(41)
    isz, osz = (2, 4, 8, 16, 16), (16, 32, 32)
    gs = [rng.standard_normal((2, 4, *osz)).astype(np.float32) for _ in range(4)]
    with engine(None, 8):
        want = [R.upsample_nearest_exact3d_backward(g, osz, isz) for g in gs]
        errors: list[str] = []

        def caller(i: int) -> None:
            for _ in range(5):
                got = R.upsample_nearest_exact3d_backward(gs[i], osz, isz, threads=3)
                if not np.array_equal(got, want[i]):
                    errors.append(f"caller {i}: wrong result")

        ts = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        real = plans._backward_chunk
        done: list[int] = []

        def failing(x, ops, scat, res, scratch):  # type: ignore[no-untyped-def]
            if res.base is not None and res.ctypes.data == want_last:
                raise RuntimeError("chunk failed")
            real(x, ops, scat, res, scratch)
            done.append(1)

        plan = R._plan(gs[0].shape, "NCDHW", R._dim_keys(osz, isz, [None] * 3, "cann"))
        out = np.zeros(isz, np.float32)
        want_last = out[plan.chunks[-1][1]].ctypes.data  # the last chunk runs on a worker thread
        monkeypatch.setattr(plans, "_backward_chunk", failing)
        with pytest.raises(RuntimeError, match="chunk failed"):
            R.upsample_nearest_exact3d_backward(gs[0], osz, isz, out=out, threads=2)
        assert len(done) == len(plan.chunks) - 1  # the other chunks all ran before the raise


def test_d_major_chunks_cover_every_window_once() -> None:
    """D-major chunking (irregular D windows) splits D into blocks over groups of (N, C) units."""
    rng = np.random.default_rng(13)
    isz, osz = (2, 3, 17, 5, 6), (40, 9, 11)
    g = int_data(rng, (2, 3, *osz), np.float32)
    want = slow_sum(g, osz, isz)
    for chunks in (2, 5, 17, 40):
        with engine(None, chunks, True):
            plan = R._plan(g.shape, "NCDHW", R._dim_keys(osz, isz, [None] * 3, "cann"))
            assert len(plan.chunks) > 1
            assert any(gi[2] != slice(None) for gi, _, _, _ in plan.chunks)  # D is split
            got = R.upsample_nearest_exact3d_backward(g, osz, isz)
        np.testing.assert_array_equal(got, want, err_msg=str(chunks))


def test_pure_scatter_chunks() -> None:
    """A pure scatter of slices (regular windows) is one chunk; with index arrays (irregular
    windows) it is chunked, so that the gathered temporary stays chunk-sized.  Both exact."""
    rng = np.random.default_rng(17)
    for isz, osz, one in [((1, 8, 32, 64, 64), (16, 32, 32), True), ((1, 8, 45, 45, 45), (16, 17, 19), False)]:
        g = int_data(rng, (1, 8, *osz), np.float32)
        plan = R._plan(g.shape, "NCDHW", R._dim_keys(osz, isz, [None] * 3, "cann"))
        assert plan.order == () and (len(plan.chunks) == 1) == one, (isz, len(plan.chunks))
        np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz), slow_sum(g, osz, isz))



@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
def test_chunks_reuse_their_work_arrays(monkeypatch: pytest.MonkeyPatch, dtype: type) -> None:
    """The chunks of one call share one work array per pass (and one for the float16 copy):
    every chunk asks for each slot, the memory is allocated once, and no pass writes the slot
    it reads.  Chunks of unequal size (D-major blocks) use a prefix of the slot."""
    rng = np.random.default_rng(19)
    seen: list[tuple[object, int, np.ndarray]] = []  # holds every scratch and buffer: no address is reused
    real = plans._Scratch.get

    def get(self, slot, shape):  # type: ignore[no-untyped-def]
        arr = real(self, slot, shape)
        seen.append((self, slot, arr.base))
        return arr

    monkeypatch.setattr(plans._Scratch, "get", get)
    for isz, osz, chunks, d_major in [((2, 4, 8, 16, 16), (16, 32, 32), 8, False),
                                      ((2, 3, 17, 5, 6), (40, 9, 11), 17, True)]:
        g = int_data(rng, (isz[0], isz[1], *osz), dtype)
        seen.clear()
        with engine(None, chunks, d_major):
            plan = R._plan(g.shape, "NCDHW", R._dim_keys(osz, isz, [None] * 3, "cann"))
            got = R.upsample_nearest_exact3d_backward(g, osz, isz)
        np.testing.assert_array_equal(got, slow_sum(g, osz, isz).astype(dtype))
        slots = {slot for _, slot, _ in seen}
        assert len({id(run) for run, _, _ in seen}) == 1  # one scratch for the whole call
        assert len(seen) == len(plan.chunks) * len(slots) and len(plan.chunks) > 1
        for slot in slots:
            # one allocation, plus one per growth when a later chunk is bigger
            assert len({id(buf) for _, s, buf in seen if s == slot}) <= 2, slot
        assert (0 in slots) == (dtype == np.float16)


# --------------------------------------------------------------------------- out=


def test_out_is_written_in_place_and_returned() -> None:
    rng = np.random.default_rng(11)
    isz, osz = (2, 3, 3, 4, 5), (7, 8, 10)
    g = int_data(rng, (2, 3, *osz), np.float32)
    want = R.upsample_nearest_exact3d_backward(g, osz, isz)
    out = np.full(isz, -1.0, np.float32)
    assert R.upsample_nearest_exact3d_backward(g, osz, isz, out=out) is out
    np.testing.assert_array_equal(out, want)
    # a strided view inside a bigger buffer: only the view is written
    for method in ("runs", "slide", None):
        with engine(method, 3 if method else None):
            big = np.full((2, 3, 6, 4, 10), 7.0, np.float32)
            view = big[:, :, ::2, :, 1::2]
            R.upsample_nearest_exact3d_backward(g, osz, isz, out=view)
            np.testing.assert_array_equal(view, want)
            assert np.all(big[:, :, 1::2] == 7.0) and np.all(big[..., 0::2] == 7.0)


@pytest.mark.parametrize("dtype", DTYPES[1:], ids=str)
def test_out_reduced_precision_and_ndhwc(dtype: np.dtype) -> None:
    rng = np.random.default_rng(12)
    isz, osz = (1, 4, 3, 3, 3), (6, 7, 9)
    g = to_layout(int_data(rng, (1, 4, *osz), dtype), "NDHWC")
    out = np.empty((1, 3, 3, 3, 4), dtype)
    res = R.upsample_nearest_exact3d_backward(g, osz, isz, layout="NDHWC", out=out)
    assert res is out
    np.testing.assert_array_equal(out, R.upsample_nearest_exact3d_backward(np.ascontiguousarray(g), osz, isz,
                                                                           layout="NDHWC"))


# --------------------------------------------------------------------------- validation


def _g(shape=(1, 1, 2, 2, 2), dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(grad_output=_g((1, 2, 2, 2))), r"grad_output must be 5-D, got 4-D"),
        (dict(grad_output=_g(dtype=np.float64)), r"grad_output dtype must be one of .*got float64"),
        (dict(grad_output=_g(dtype=np.int32)), r"grad_output dtype .*got int32"),
        (dict(output_size=(2, 2)), r"output_size must have length 3 .*got length 2"),
        (dict(input_size=(1, 1, 1, 1)), r"input_size must have length 5 .*got length 4"),
        (dict(output_size=(2, 0, 2)), r"output_size\[1\] \(H\) must be > 0, got 0"),
        (dict(input_size=(1, 1, 1, 1, 0)), r"input_size\[4\] \(W\) must be > 0, got 0"),
        (dict(input_size=(1, -1, 1, 1, 1)), r"input_size\[1\] \(C\) must be >= 0, got -1"),
        (dict(input_size=(1, 2, 1, 1, 1)), r"grad_output shape must be \(1, 2, 2, 2, 2\).*got \(1, 1, 2, 2, 2\)"),
        (dict(output_size=(2, 2, 3)), r"grad_output shape must be \(1, 1, 2, 2, 3\)"),
        (dict(layout="NHWC"), r"layout must be one of \('NCDHW', 'NDHWC'\), got 'NHWC'"),
        (dict(convention="cuda"), r"convention must be one of \('cann', 'torch_cpu'\), got 'cuda'"),
        (dict(output_size=(2, 2.5, 2)), r"output_size\[1\] must be an integer, got 2.5"),
        (dict(input_size=[1, True, 1, 1, 1]), r"input_size\[1\] must be an integer, got True"),
        (dict(input_size=(1, 1, 1, np.float32(1), 1)), r"input_size\[3\] must be an integer, got np.float32\(1.0\)"),
        (dict(scales_d=float("inf")), r"scales_d must be finite in float32 when > 0, got inf"),
        (dict(scales_h=1e39), r"scales_h must be finite in float32"),
        (dict(scales_w="2"), r"scales_w must be a real number or None, got '2'"),
        (dict(out=np.zeros((1, 1, 1, 1, 2), np.float32)), r"out shape must be \(1, 1, 1, 1, 1\)"),
        (dict(out=np.zeros((1, 1, 1, 1, 1), np.float16)), r"out dtype must equal grad_output dtype float32, got f"),
        (dict(threads=0), r"threads must be >= 1, got 0"),
        (dict(threads=2.0), r"threads must be an integer, got 2.0"),
        (dict(threads=True), r"threads must be an integer, got True"),
    ],
)
def test_validation_messages(kwargs: dict, match: str) -> None:
    args = dict(grad_output=_g(), output_size=(2, 2, 2), input_size=(1, 1, 1, 1, 1))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        R.upsample_nearest_exact3d_backward(**args)


def test_sizes_accept_any_integer_type() -> None:
    """Lists, tuples and numpy arrays of ints or numpy integers all give the same result."""
    g = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    want = R.upsample_nearest_exact3d_backward(g, (2, 2, 2), (1, 1, 1, 1, 1))
    assert want.ravel().tolist() == [36.0]
    for osz, isz in [([2, 2, 2], [1, 1, 1, 1, 1]), (np.array([2, 2, 2]), np.array([1, 1, 1, 1, 1], np.int32)),
                     ((np.int64(2), 2, np.uint8(2)), (1, np.int16(1), 1, 1, 1))]:
        np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz), want)


def test_validation_ndhwc_shape_and_overlap() -> None:
    with pytest.raises(ValueError, match=r"shape must be \(1, 2, 2, 2, 3\) \(NDHWC"):
        R.upsample_nearest_exact3d_backward(_g((1, 3, 2, 2, 2)), (2, 2, 2), (1, 3, 1, 1, 1), layout="NDHWC")
    g = np.zeros((1, 1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="out must not overlap grad_output"):
        R.upsample_nearest_exact3d_backward(g, (2, 2, 2), (1, 1, 1, 1, 1), out=g[:, :, :1, :1, :1])
    with pytest.raises(ValueError, match="in_size must be > 0, got 0"):
        R.window_starts(0, 3)
    with pytest.raises(ValueError, match="convention must be one of"):
        R.window_starts(2, 3, convention="exact")
    with pytest.raises(ValueError, match=r"x must be 5-D"):
        R.upsample_nearest_exact3d(np.zeros((2, 2, 2), np.float32), (2, 2, 2))


# --------------------------------------------------------------------------- properties


sizes = st.integers(1, 6)
out_sizes = st.integers(1, 20)
scale_st = st.one_of(st.none(), st.sampled_from([0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.4]))


@settings(max_examples=50, deadline=None)
@given(i=st.tuples(sizes, sizes, sizes), o=st.tuples(out_sizes, out_sizes, out_sizes),
       nc=st.tuples(st.integers(1, 2), st.integers(1, 3)), scales=st.tuples(scale_st, scale_st, scale_st),
       convention=st.sampled_from(CONVENTIONS), layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**32 - 1))
def test_adjoint_identity(i, o, nc, scales, convention, layout, seed) -> None:
    """<forward(x), g> == <x, backward(g)> (exact with integer data and float64 dot products)."""
    rng = np.random.default_rng(seed)
    isz = (*nc, *i)
    x = to_layout(int_data(rng, isz, np.float32), layout)
    g = to_layout(int_data(rng, (*nc, *o), np.float32), layout)
    y = R.upsample_nearest_exact3d(x, o, *scales, layout=layout, convention=convention)
    assert y.shape == g.shape
    gi = R.upsample_nearest_exact3d_backward(g, o, isz, *scales, layout=layout, convention=convention)
    lhs = np.dot(y.astype(np.float64).ravel(), g.astype(np.float64).ravel())
    rhs = np.dot(x.astype(np.float64).ravel(), gi.astype(np.float64).ravel())
    assert lhs == rhs


@settings(max_examples=50, deadline=None)
@given(i=st.tuples(sizes, sizes, sizes), o=st.tuples(out_sizes, out_sizes, out_sizes),
       convention=st.sampled_from(CONVENTIONS), layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**32 - 1))
def test_sum_is_conserved_when_no_window_is_cut(i, o, convention, layout, seed) -> None:
    """Size-derived scales: every gradOut element lands in exactly one gradInput element."""
    rng = np.random.default_rng(seed)
    isz = (1, 2, *i)
    g = to_layout(int_data(rng, (1, 2, *o), np.float32), layout)
    gi = R.upsample_nearest_exact3d_backward(g, o, isz, convention=convention, layout=layout)
    assert gi.astype(np.float64).sum() == g.astype(np.float64).sum()
    ones = R.upsample_nearest_exact3d_backward(np.ones_like(g), o, isz, convention=convention, layout=layout)
    assert ones.sum() == math.prod(o) * 2  # every element counted once


@settings(max_examples=40, deadline=None)
@given(i=st.integers(1, 40), o=st.integers(1, 400), scale=st.one_of(st.none(), st.floats(0.05, 60.0)))
def test_window_tables_match_emulation_property(i, o, scale) -> None:
    s = float(np.float32(scale)) if scale is not None else float(np.float32(o) / np.float32(i))
    assert R.window_starts(i, o, scale).tolist() == slow_cann_lo(i, o, s)
    assert R.window_starts(i, o, scale, convention="torch_cpu").tolist() == slow_torch_idx(i, o, scale)


def test_forward_known_values() -> None:
    x = np.arange(2, dtype=np.float32).reshape(1, 1, 1, 1, 2)
    y = R.upsample_nearest_exact3d(x, (1, 1, 41))
    assert y[0, 0, 0, 0].tolist() == [0.0] * 20 + [1.0] * 21  # CANN: o = 20 belongs to window 1
    yt = R.upsample_nearest_exact3d(x, (1, 1, 41), convention="torch_cpu")
    assert yt[0, 0, 0, 0].tolist() == [0.0] * 21 + [1.0] * 20  # torch CPU: o = 20 -> 0
    # inconsistent user scale: outputs in no CANN window read 0
    x4 = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 4, 1, 1)
    y4 = R.upsample_nearest_exact3d(x4, (10, 1, 1), 1.5, 1.0, 1.0)
    assert y4.ravel().tolist() == [1, 2, 2, 3, 4, 4, 0, 0, 0, 0]  # windows [0,1) [1,3) [3,4) [4,6)


def _numpy_rows_view(a: np.ndarray) -> np.ndarray | None:
    """numpy's own answer: ``a.reshape(-1, last)`` as a view, or None where that needs a copy."""
    try:
        return np.reshape(a, (-1, a.shape[-1]), copy=False)
    except ValueError:
        return None


@pytest.mark.skipif(tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1),
                    reason="reshape(copy=False) is numpy 2.1+")
@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=5),
       steps=st.lists(st.sampled_from([1, 1, 2, -1]), min_size=5, max_size=5),
       starts=st.lists(st.integers(0, 1), min_size=5, max_size=5),
       order=st.permutations(range(5)), seed=st.integers(0, 2**16))
def test_as_rows_is_a_view_exactly_where_numpy_has_one(shape, steps, starts, order, seed) -> None:
    """The engine's 2-D view of the innermost rows (used by the matmul method, also as its output) is a view of
    the same memory, equal to ``reshape(-1, last)``, and exists exactly where numpy's no-copy reshape does."""
    base = np.random.default_rng(seed).standard_normal([n * 2 + 1 for n in shape]).astype(np.float32)
    view = base[tuple(slice(s, s + n * abs(k), k) if k > 0 else slice(s + n - 1, None if s == 0 else s - 1, -1)
                      for n, k, s in zip(shape, steps, starts))]
    view = view.transpose([p for p in order if p < view.ndim])
    got, want = passes._as_rows(view), _numpy_rows_view(view)
    assert (got is None) == (want is None), (view.shape, view.strides)
    if got is not None:
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, view.reshape(-1, view.shape[-1]))
        assert np.shares_memory(got, view)
        got[...] = 7.0  # (writeable, and writes land in the array's own memory)
        assert (view == 7.0).all()
