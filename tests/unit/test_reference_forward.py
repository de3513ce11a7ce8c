"""The numpy reference of the forward (``upsample3d_grad.reference.forward``).

- The kernel's law (docs/cann-forward-facts.md §4, §3.5) on the facts' worked examples, both SoC variants.
- ``convention="torch_cpu"`` against torch CPU's ``F.interpolate(mode="nearest-exact")`` bit for bit, and the
  kernel's law against it on shapes without ties and, at ties, exactly where the two laws predict a difference.
- The adjoint residual: predicted exactly, against brute force ``<F(x), g> - <x, B(g)>`` with the backward
  reference.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from upsample3d_grad import reference
from upsample3d_grad.reference import forward as rf

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BF16)


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, ...]:
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)


def _tie(i: int, o: int, k: int) -> bool:
    """Output k of a size-only dim sits exactly on a boundary: (k + 0.5) * I / O is an integer."""
    return ((2 * k + 1) * i) % (2 * o) == 0


# ------------------------------------------------------------------------------- the kernel's law

def test_the_doc_sample() -> None:
    # DOC: self [2,2,2,2,3] holding 1..48, outputSize (1,1,1): each (n, c) takes its element [1,1,1] (facts §1)
    x = np.arange(1, 49, dtype=np.float32).reshape(2, 2, 2, 2, 3)
    assert rf.upsample_nearest_exact3d_forward(x, (1, 1, 1)).ravel().tolist() == [11.0, 23.0, 35.0, 47.0]


def test_the_two_reciprocals() -> None:
    # facts §3.5: A2/A3 takes f32(1.0 / s) (double), the 950 1.0f / f32(s) (float); they differ for 1.1
    a2 = rf.forward_ratios((17, 1, 1), (1, 1, 16, 1, 1), 1.1, 1.0, 1.0)
    a950 = rf.forward_ratios((17, 1, 1), (1, 1, 16, 1, 1), 1.1, 1.0, 1.0, soc="ascend950")
    assert np.float32(a2[0]).view(np.uint32) == 0x3F68BA2F
    assert np.float32(a950[0]).view(np.uint32) == 0x3F68BA2E
    assert rf.forward_index(16, 17, a2[0])[16] == 15 and rf.forward_index(16, 17, a950[0])[16] == 14
    assert rf.forward_ratios((8, 1, 1), (1, 1, 27, 1, 1), 0.3, 1, 1)[0] == rf.forward_ratios(
        (8, 1, 1), (1, 1, 27, 1, 1), 0.3, 1, 1, soc="ascend950")[0]  # 0.3: the two agree


def test_scales_all_or_none_on_a2a3_per_dim_on_the_950() -> None:
    sizes = rf.forward_ratios((3, 5, 7), (1, 1, 4, 4, 4))
    assert rf.forward_ratios((3, 5, 7), (1, 1, 4, 4, 4), 0.5, 0.0, None) == sizes  # mixed: none count
    r950 = rf.forward_ratios((3, 5, 7), (1, 1, 4, 4, 4), 0.5, 0.0, None, soc="ascend950")
    assert r950 == (2.0, sizes[1], sizes[2])
    # NaN and negative scales do not count (> 0 is false)
    assert rf.forward_ratios((3, 5, 7), (1, 1, 4, 4, 4), float("nan"), -1.0, 2.0, soc="ascend950")[:2] == sizes[:2]


def test_the_law_is_add_then_multiply_then_floor_in_float32() -> None:
    # I=2, O=41: r = f32(2)/f32(41) lies below 2/41, so 20.5 * r = 0.99999994 and f(20) = 0 (exact answer 1)
    r = rf.forward_ratios((41, 1, 1), (1, 1, 2, 1, 1))[0]
    assert np.float32((np.float32(20) + np.float32(0.5)) * np.float32(r)) == np.float32(0.99999994)
    f = rf.forward_index(2, 41, r)
    assert f[20] == 0 and f[21] == 1 and f.min() == 0 and f.max() == 1
    assert np.all(np.diff(f) >= 0)
    # the clamp to I - 1, and a zero or infinite ratio
    assert rf.forward_index(3, 4, 10.0).tolist() == [2, 2, 2, 2]
    assert rf.forward_index(3, 4, 0.0).tolist() == [0, 0, 0, 0]
    assert rf.forward_index(3, 2, float("inf")).tolist() == [2, 2]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_the_forward_is_a_gather_of_bit_copies(dtype: np.dtype, layout: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(_phys(layout, 2, 3, 4, 5, 6)).astype(np.float32).astype(dtype)
    x.view(np.uint16 if dtype.itemsize == 2 else np.uint32).ravel()[:7] = 0x7FC1  # NaN payloads must survive
    y = rf.upsample_nearest_exact3d_forward(x, (7, 3, 11), layout=layout)
    maps = rf.source_indices((7, 3, 11), (2, 3, 4, 5, 6))
    ncdhw = x if layout == "NCDHW" else np.moveaxis(x, 4, 1)
    want = ncdhw[:, :, maps[0]][:, :, :, maps[1]][:, :, :, :, maps[2]]
    got = y if layout == "NCDHW" else np.moveaxis(y, 4, 1)
    bits = np.uint16 if dtype.itemsize == 2 else np.uint32
    assert y.dtype == dtype and y.flags.c_contiguous
    assert np.array_equal(got.view(bits), want.view(bits))


@pytest.mark.parametrize("bad, match", [
    ({"layout": "NCHW"}, "layout"), ({"soc": "910"}, "soc"), ({"convention": "exact"}, "convention"),
])
def test_bad_arguments_are_named(bad: dict[str, str], match: str) -> None:
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match=match):
        rf.upsample_nearest_exact3d_forward(x, (3, 3, 3), **bad)


def test_bad_sizes_are_named() -> None:
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match=r"output_size\[1\] \(H\) must be > 0"):
        rf.upsample_nearest_exact3d_forward(x, (3, 0, 3))
    with pytest.raises(ValueError, match="x dtype must be one of"):
        rf.upsample_nearest_exact3d_forward(x.astype(np.float64), (3, 3, 3))
    with pytest.raises(ValueError, match="g shape must be"):
        rf.adjoint_residual(x, np.zeros((1, 1, 3, 3, 2), np.float32), (3, 3, 3))


def test_soc_family_of_soc_names() -> None:
    assert rf.soc_family("Ascend950PR_9599") == "ascend950"
    assert rf.soc_family("Ascend910B3") == "a2a3" and rf.soc_family("CANN-Simulator") == "a2a3"


# ------------------------------------------------------------------------------- against torch CPU

try:
    import torch
    import torch.nn.functional as tf
except ImportError:  # torch is optional: its tests are skipped
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch (CPU) is not installed")


def _to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == BF16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def _from_torch(y: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    y = y.contiguous()
    return y.view(torch.int16).numpy().view(BF16) if dtype == BF16 else y.numpy()


def _torch_forward(x: np.ndarray, size: tuple[int, int, int] | None, scales: tuple[float, float, float] | None,
                   layout: str) -> np.ndarray:
    """torch CPU's F.interpolate(mode="nearest-exact") of x (in layout), as numpy in the same layout."""
    t = _to_torch(x)
    if layout == "NDHWC":  # torch's channels-last 3-D memory format: the same bytes as NDHWC
        t = t.permute(0, 4, 1, 2, 3)
        assert t.is_contiguous(memory_format=torch.channels_last_3d)
    y = tf.interpolate(t, size=size, scale_factor=scales, mode="nearest-exact",
                       recompute_scale_factor=False if scales else None)
    if layout == "NDHWC":
        y = y.permute(0, 2, 3, 4, 1)
    return _from_torch(y, x.dtype)


def _torch_map(in_size: int, out_size: int) -> np.ndarray:
    x = torch.arange(in_size, dtype=torch.float32).reshape(1, 1, in_size)
    return tf.interpolate(x, size=out_size, mode="nearest-exact").reshape(-1).numpy().astype(np.int64)


@needs_torch
def test_torch_cpu_convention_is_torch_cpu_bit_for_bit_in_1d() -> None:
    differ = ties = 0
    for i in range(1, 49):
        for o in range(1, 129):
            got = _torch_map(i, o)
            assert np.array_equal(got, rf.torch_cpu_forward_index(i, o)), (i, o)
            law = rf.forward_index(i, o, rf.forward_ratios((o, 1, 1), (1, 1, i, 1, 1))[0])
            for k in np.nonzero(law != got)[0]:  # the kernel's law departs from torch CPU only at exact ties
                assert _tie(i, o, int(k)), (i, o, k)
                differ += 1
            ties += sum(_tie(i, o, k) for k in range(o))
    assert 0 < differ < ties  # some ties go each way (facts §6.1: 39 of 2,105,344 in a larger sweep)


NO_TIE = [((3, 4, 5), (7, 9, 11), None), ((5, 6, 7), (2, 3, 4), None), ((4, 3, 2), (9, 8, 7), None),
          ((6, 5, 4), (6, 5, 4), None), ((3, 4, 5), None, (2.5, 1.75, 3.0)), ((7, 5, 9), None, (0.5, 1.5, 0.75))]


@needs_torch
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", NO_TIE, ids=[f"{a}->{b or c}" for a, b, c in NO_TIE])
def test_the_kernel_law_is_torch_cpu_where_there_is_no_tie(case: tuple, dtype: np.dtype, layout: str) -> None:
    (d, h, w), size, scales = case
    out3 = size or tuple(int(np.floor(i * s)) for i, s in zip((d, h, w), scales))
    sc = scales or (None, None, None)
    for k, (i, o) in enumerate(zip((d, h, w), out3)):  # the case has no tie under either law
        assert np.array_equal(rf.source_indices(out3, (1, 1, d, h, w), *sc)[k],
                              rf.source_indices(out3, (1, 1, d, h, w), *sc, convention="torch_cpu")[k]), (i, o)
    x = np.random.default_rng(5).standard_normal(_phys(layout, 2, 3, d, h, w)).astype(np.float32).astype(dtype)
    want = _torch_forward(x, size, scales, layout)
    for soc in rf.SOCS:
        got = rf.upsample_nearest_exact3d_forward(x, out3, *sc, layout=layout, soc=soc)
        assert np.array_equal(got.view(np.uint16 if dtype.itemsize == 2 else np.uint32),
                              want.view(np.uint16 if dtype.itemsize == 2 else np.uint32))


@needs_torch
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_at_ties_torch_cpu_differs_exactly_where_predicted(dtype: np.dtype, layout: str) -> None:
    # in (2,3,2) -> out (41,7,5): D's o = 20 is a tie the two laws send to 0 (CANN) and 1 (torch CPU)
    x = np.arange(2 * 2 * 3 * 2, dtype=np.float32).reshape(_phys(layout, 1, 2, 2, 3, 2)).astype(dtype)
    cann = rf.upsample_nearest_exact3d_forward(x, (41, 7, 5), layout=layout)
    torch_law = rf.upsample_nearest_exact3d_forward(x, (41, 7, 5), layout=layout, convention="torch_cpu")
    got = _torch_forward(x, (41, 7, 5), None, layout)
    assert np.array_equal(got.astype(np.float32), torch_law.astype(np.float32))
    fc, ft = (rf.source_indices((41, 7, 5), (1, 2, 2, 3, 2), convention=c) for c in ("cann", "torch_cpu"))
    predicted = [np.nonzero(a != b)[0].tolist() for a, b in zip(fc, ft)]
    assert predicted == [[20], [], []]
    differs = np.argwhere(cann.astype(np.float32) != got.astype(np.float32))
    d_axis = 2 if layout == "NCDHW" else 1
    assert sorted(set(differs[:, d_axis].tolist())) == [20]
    assert len(differs) == 2 * 7 * 5  # every (c, oh, ow) at od = 20, and nothing else


# ------------------------------------------------------------------------------- the adjoint residual

ADJOINT = [
    ((2, 3, 2), (41, 7, 5), (0.0, 0.0, 0.0), "a2a3"),          # a size tie in D
    ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5), "a2a3"),         # a scale tie in D
    ((3, 4, 5), (7, 9, 11), (0.0, 0.0, 0.0), "a2a3"),          # no tie: R = 0
    ((16, 3, 2), (17, 5, 4), (1.1, 5 / 3, 2.0), "ascend950"),  # the 950's float reciprocal moves a tie
    ((4, 3, 2), (3, 3, 2), (1.0, 0.0, 0.0), "ascend950"),      # 950 mixed scales: the forward alone uses scalesD
    ((100000, 1, 1), (100001, 1, 1), (1.0, 1.0, 1.0), "a2a3"),  # inside the band, o = 100000 in no window
]


def _brute(x: np.ndarray, g: np.ndarray, out3: tuple[int, int, int], scales: tuple[float, float, float],
           layout: str, soc: str) -> float:
    isz = (x.shape[0], x.shape[1 if layout == "NCDHW" else 4], *(x.shape[2:] if layout == "NCDHW" else x.shape[1:4]))
    fx = rf.upsample_nearest_exact3d_forward(x, out3, *scales, layout=layout, soc=soc)
    bg = reference.upsample_nearest_exact3d_backward(g, out3, isz, *scales, layout=layout)
    return float(np.sum(fx.astype(np.float64) * g.astype(np.float64))
                 - np.sum(x.astype(np.float64) * bg.astype(np.float64)))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
@pytest.mark.parametrize("case", ADJOINT, ids=[f"{a}->{b}-{s}" for a, b, _, s in ADJOINT])
def test_the_residual_is_predicted_exactly(case: tuple, dtype: np.dtype, layout: str) -> None:
    (d, h, w), out3, scales, soc = case
    rng = np.random.default_rng(7)
    # small integers: every product and float32 window sum is exact, so brute force has no rounding at all
    x = rng.integers(-8, 9, _phys(layout, 2, 3, d, h, w)).astype(dtype)
    g = rng.integers(-8, 9, _phys(layout, 2, 3, *out3)).astype(dtype)
    predicted = rf.adjoint_residual(x, g, out3, *scales, layout=layout, soc=soc)
    assert predicted == _brute(x, g, out3, scales, layout, soc)
    mism = rf.adjoint_mismatches(out3, (2, 3, d, h, w), *scales, soc=soc)
    assert (predicted != 0.0) == any(mism.values())  # (these x, g do not cancel by chance)


def test_the_mismatch_sets_of_the_facts() -> None:
    assert rf.adjoint_mismatches((41, 7, 5), (1, 2, 2, 3, 2)) == {"D": [(20, 0, 1)], "H": [], "W": []}
    assert rf.adjoint_mismatches((8, 9, 3), (1, 2, 27, 4, 2), 0.3, 2.25, 1.5)["D"] == [(7, 25, 24)]
    assert rf.adjoint_mismatches((7, 9, 11), (1, 2, 3, 4, 5)) == {"D": [], "H": [], "W": []}
    # a trailing output that lies in no backward window (b = -1) still counts, with x[b] = 0
    trailing = rf.adjoint_mismatches((3, 1, 1), (1, 1, 2, 1, 1), 1.0, 1.0, 1.0)["D"]
    assert trailing == [(2, 1, -1)]


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_the_residual_on_random_data_is_within_the_backwards_rounding(layout: str) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal(_phys(layout, 2, 3, 2, 3, 2)).astype(np.float32)
    g = rng.standard_normal(_phys(layout, 2, 3, 41, 7, 5)).astype(np.float32)
    predicted = rf.adjoint_residual(x, g, (41, 7, 5), layout=layout)
    brute = _brute(x, g, (41, 7, 5), (0.0, 0.0, 0.0), layout, "a2a3")
    # B(g) sums windows of at most 21 * 3 * 3 elements in float32, each sum within m * 2^-23 * sum|g| of exact
    abs_bg = reference.upsample_nearest_exact3d_backward(np.abs(g), (41, 7, 5), (2, 3, 2, 3, 2), layout=layout)
    bound = 21 * 3 * 3 * 2.0 ** -23 * float(np.sum(np.abs(x.astype(np.float64)) * abs_bg))
    assert abs(predicted) > 10 * bound  # the tie's share is far above the rounding
    assert abs(brute - predicted) <= bound
