"""The numpy reference against PyTorch CPU (optional dependency).

``convention="torch_cpu"`` must reproduce ``torch.ops.aten._upsample_nearest_exact3d_backward``
and the forward of ``F.interpolate(mode="nearest-exact")``.  ``convention="cann"`` must agree
with PyTorch wherever the two index laws agree, and differ exactly at the ties that
``tie_mismatches`` / ``convention_differences`` predict (cann-abi.md §6.2, §6.3).
Data are small integers, so float32 sums are exact and comparisons can be exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from upsample3d_grad import reference as R

torch = pytest.importorskip("torch")
F = torch.nn.functional


def torch_backward(g: np.ndarray, osz, isz, scales=(None, None, None)) -> np.ndarray:
    with torch.no_grad():
        res = torch.ops.aten._upsample_nearest_exact3d_backward(torch.from_numpy(np.ascontiguousarray(g)), list(osz),
                                                                list(isz), *scales)
    return res.numpy()


def int_data(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-8, 9, size=shape).astype(np.float32)


def random_sizes(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    isz = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *(int(v) for v in rng.integers(1, 9, 3)))
    osz = tuple(int(rng.integers(1, 4 * i + 3)) for i in isz[2:])
    return isz, osz


def test_torch_cpu_convention_equals_torch_backward_sizes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(60):
        isz, osz = random_sizes(rng)
        g = int_data(rng, (isz[0], isz[1], *osz))
        got = R.upsample_nearest_exact3d_backward(g, osz, isz, convention="torch_cpu")
        np.testing.assert_array_equal(got, torch_backward(g, osz, isz), err_msg=f"{isz} {osz}")


def test_torch_cpu_convention_equals_torch_backward_scales() -> None:
    rng = np.random.default_rng(1)
    choices = [0.3, 0.45, 0.5, 0.7, 1.0, 1.1, 1.5, 2.0, 2.2, 2.5, 3.3, 4.0, 7.0]
    for t in range(60):
        isz = (1, int(rng.integers(1, 4)), *(int(v) for v in rng.integers(2, 12, 3)))
        scales = [float(rng.choice(choices)) for _ in range(3)]
        osz = tuple(max(1, math.floor(i * s)) for i, s in zip(isz[2:], scales))
        if t % 4 == 3:
            scales[t % 3] = None  # type: ignore[call-overload]  # PyTorch decides per dim
        g = int_data(rng, (isz[0], isz[1], *osz))
        got = R.upsample_nearest_exact3d_backward(g, osz, isz, *scales, convention="torch_cpu")
        np.testing.assert_array_equal(got, torch_backward(g, osz, isz, scales), err_msg=f"{isz} {osz} {scales}")


def test_torch_cpu_convention_bfloat16_and_ndhwc() -> None:
    import ml_dtypes

    rng = np.random.default_rng(2)
    isz, osz = (2, 3, 5, 4, 3), (11, 9, 7)
    g = int_data(rng, (2, 3, *osz))
    want = torch_backward(g, osz, isz)
    got = R.upsample_nearest_exact3d_backward(np.ascontiguousarray(g.transpose(0, 2, 3, 4, 1)), osz, isz,
                                              layout="NDHWC", convention="torch_cpu")
    np.testing.assert_array_equal(got.transpose(0, 4, 1, 2, 3), want)
    gb = g.astype(ml_dtypes.bfloat16)
    tb = torch.from_numpy(g).to(torch.bfloat16)
    want_b = torch.ops.aten._upsample_nearest_exact3d_backward(tb, list(osz), list(isz)).float().numpy()
    got_b = R.upsample_nearest_exact3d_backward(gb, osz, isz, convention="torch_cpu").astype(np.float32)
    np.testing.assert_array_equal(got_b, want_b)  # sums of small integers are exact in bfloat16 here


def tie_free(isz, osz, scales=(None, None, None)) -> bool:
    return not any(R.convention_differences(osz, isz, *scales).values())


def test_cann_equals_torch_without_ties() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 40:
        isz, osz = random_sizes(rng)
        if not tie_free(isz, osz):
            continue
        g = int_data(rng, (isz[0], isz[1], *osz))
        np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz), torch_backward(g, osz, isz),
                                      err_msg=f"{isz} {osz}")
        checked += 1


def test_cann_equals_torch_without_ties_user_scales() -> None:
    rng = np.random.default_rng(4)
    checked = 0
    while checked < 25:
        isz = (1, 2, *(int(v) for v in rng.integers(2, 12, 3)))
        scales = tuple(float(rng.choice([0.5, 0.7, 1.5, 2.0, 2.5, 3.0])) for _ in range(3))
        osz = tuple(max(1, math.floor(i * s)) for i, s in zip(isz[2:], scales))
        if not tie_free(isz, osz, scales):
            continue
        g = int_data(rng, (1, 2, *osz))
        np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz, *scales),
                                      torch_backward(g, osz, isz, scales), err_msg=f"{isz} {osz} {scales}")
        checked += 1


@pytest.mark.parametrize(
    "dim,isz,osz,scales",
    [
        (2, (1, 2, 3, 4, 2), (5, 6, 41), (None, None, None)),  # W: I=2, O=41, o=20 (cann-abi.md §6.3)
        (0, (2, 1, 27, 3, 2), (8, 6, 4), (0.3, 2.0, 2.0)),  # D: I=27, scale 0.3, O=8, o=7
        (1, (1, 3, 2, 14, 3), (4, 57, 6), (None, None, None)),  # H: I=14, O=57, o=28: CANN 6, torch 7
    ],
)
def test_cann_differs_from_torch_exactly_at_predicted_ties(dim, isz, osz, scales) -> None:
    diffs = R.convention_differences(osz, isz, *scales)
    name = "DHW"[dim]
    assert diffs[name] and all(not v for k, v in diffs.items() if k != name)
    rng = np.random.default_rng(5)
    g = int_data(rng, (isz[0], isz[1], *osz)) + 20  # no zero entries: every slab is visible
    ax = 2 + dim
    moved = [o for o, _, _ in diffs[name]]
    # without the predicted slabs, the conventions agree exactly
    g_rest = g.copy()
    g_rest[(slice(None),) * ax + (moved,)] = 0
    np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g_rest, osz, isz, *scales),
                                  torch_backward(g_rest, osz, isz, scales))
    # each predicted slab lands in the predicted gradInput slab under each convention
    for o, i_cann, i_torch in diffs[name]:
        g_one = np.zeros_like(g)
        g_one[(slice(None),) * ax + (o,)] = g[(slice(None),) * ax + (o,)]
        ours = R.upsample_nearest_exact3d_backward(g_one, osz, isz, *scales)
        theirs = torch_backward(g_one, osz, isz, scales)
        assert i_cann != i_torch
        nz_ours = np.flatnonzero(np.abs(ours).sum(axis=tuple(a for a in range(5) if a != ax)))
        nz_theirs = np.flatnonzero(np.abs(theirs).sum(axis=tuple(a for a in range(5) if a != ax)))
        assert nz_ours.tolist() == [i_cann] and nz_theirs.tolist() == [i_torch]
        np.testing.assert_array_equal(np.take(ours, i_cann, axis=ax), np.take(theirs, i_torch, axis=ax))
    # and the full results differ by exactly those moved slabs
    full_ours = R.upsample_nearest_exact3d_backward(g, osz, isz, *scales)
    full_theirs = torch_backward(g, osz, isz, scales)
    assert not np.array_equal(full_ours, full_theirs)
    assert full_ours.sum() == full_theirs.sum() == g.sum()


def test_forward_matches_torch_interpolate() -> None:
    rng = np.random.default_rng(6)
    for _ in range(40):
        isz, osz = random_sizes(rng)
        x = int_data(rng, isz)
        want = F.interpolate(torch.from_numpy(x), size=osz, mode="nearest-exact").numpy()
        np.testing.assert_array_equal(R.upsample_nearest_exact3d(x, osz, convention="torch_cpu"), want)
        if tie_free(isz, osz):
            np.testing.assert_array_equal(R.upsample_nearest_exact3d(x, osz), want)


def test_forward_matches_torch_interpolate_scale_factor() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        isz = (1, 2, *(int(v) for v in rng.integers(2, 10, 3)))
        scales = tuple(float(rng.choice([0.5, 0.7, 1.5, 2.0, 2.5, 3.3])) for _ in range(3))
        x = int_data(rng, isz)
        want = F.interpolate(torch.from_numpy(x), scale_factor=scales, mode="nearest-exact").numpy()
        osz = want.shape[2:]
        assert osz == tuple(math.floor(i * s) for i, s in zip(isz[2:], scales))
        np.testing.assert_array_equal(R.upsample_nearest_exact3d(x, osz, *scales, convention="torch_cpu"), want)


def test_backward_is_the_autograd_of_interpolate() -> None:
    """The same as autograd through F.interpolate (the ops-cv ST reference, cann-abi.md §5.6)."""
    rng = np.random.default_rng(8)
    isz, osz = (2, 2, 3, 5, 4), (7, 11, 10)
    x = torch.zeros(isz, requires_grad=True)
    y = F.interpolate(x, size=osz, mode="nearest-exact")
    g = int_data(rng, y.shape)
    y.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(R.upsample_nearest_exact3d_backward(g, osz, isz, convention="torch_cpu"),
                                  x.grad.numpy())
