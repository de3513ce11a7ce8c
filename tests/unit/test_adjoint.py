"""The adjoint check on the references: it passes for the two kernels' laws (ties included, where the residual
is not zero) and fails for a wrong forward law, wrong scale handling and wrong layout handling."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from upsample3d_grad import reference
from upsample3d_grad.adjoint import adjoint_check, random_pair
from upsample3d_grad.reference import forward as reference_forward

DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
# (input NCDHW dims D, H, W; output size; scales): a tie shape from the facts (§6.4), a scaled tie, no tie
SHAPES = [
    ((2, 3, 2), (41, 7, 5), (None, None, None)),
    ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),
    ((3, 4, 5), (7, 9, 11), (None, None, None)),
]


def _phys(layout: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, d, h, w = shape
    return shape if layout == "NCDHW" else (n, d, h, w, c)


def _device(x: np.ndarray, g: np.ndarray, out: tuple[int, ...], scales: Any, layout: str,
            soc: str = "a2a3") -> tuple[np.ndarray, np.ndarray]:
    """What a correct device gives: the two kernels' laws (the forward's is a bit copy)."""
    n = x.shape[0]
    c = x.shape[1] if layout == "NCDHW" else x.shape[4]
    dhw = x.shape[2:] if layout == "NCDHW" else x.shape[1:4]
    fx = reference_forward.upsample_nearest_exact3d_forward(x, out, *scales, layout=layout, soc=soc)
    bg = reference.upsample_nearest_exact3d_backward(g, out, (n, c, *dhw), *scales, layout=layout)
    return fx, bg.astype(x.dtype)


def _pair(dhw: tuple[int, ...], out: tuple[int, ...], layout: str, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    return random_pair(_phys(layout, (2, 3, *dhw)), _phys(layout, (2, 3, *out)), dtype, seed=7)


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("shape", SHAPES, ids=["ties", "scaled ties", "no ties"])
def test_a_correct_device_passes(shape: Any, layout: str, dtype: Any) -> None:
    dhw, out, scales = shape
    x, g = _pair(dhw, out, layout, dtype)
    fx, bg = _device(x, g, out, scales, layout)
    result = adjoint_check(x, g, fx, bg, out, *scales, layout=layout)
    assert result.passed, result.describe()
    if shape is SHAPES[2]:
        assert result.mismatched == 0 and result.predicted == 0.0
    else:  # at ties the laws differ: the residual is predicted, and it is not zero
        assert result.mismatched > 0 and abs(result.predicted) > 100 * result.bound, result.describe()
        assert abs(result.residual - result.predicted) <= result.bound


def test_a_wrong_forward_law_fails() -> None:
    dhw, out, scales = SHAPES[0]
    x, g = _pair(dhw, out, "NCDHW", np.float32)
    _, bg = _device(x, g, out, scales, "NCDHW")
    r = reference_forward.forward_ratios(out, (2, 3, *dhw))
    maps = [np.minimum(np.ceil((np.arange(o, dtype=np.float32) + np.float32(0.5)) * np.float32(rk)), i - 1)
            .astype(np.int64) for o, rk, i in zip(out, r, dhw)]
    fx = x[:, :, maps[0]][:, :, :, maps[1]][:, :, :, :, maps[2]]  # ceil instead of floor
    result = adjoint_check(x, g, fx, bg, out, *scales)
    assert not result.passed, result.describe()


def test_ignoring_the_all_or_none_scale_rule_fails() -> None:
    # mixed scales: CANN uses the size ratio in every dim; a forward that used scalesD anyway is caught
    dhw, out, scales = (5, 4, 3), (11, 8, 6), (2.3, None, None)
    x, g = _pair(dhw, out, "NCDHW", np.float32)
    _, bg = _device(x, g, out, scales, "NCDHW")
    fx_wrong = reference_forward.upsample_nearest_exact3d_forward(x, out, *scales, soc="ascend950")
    assert not np.array_equal(fx_wrong, reference_forward.upsample_nearest_exact3d_forward(x, out, *scales))
    assert not adjoint_check(x, g, fx_wrong, bg, out, *scales).passed


def test_wrong_layout_handling_fails() -> None:
    dhw, out, scales = (3, 4, 5), (7, 9, 11), (None, None, None)
    x, g = _pair(dhw, out, "NDHWC", np.float32)
    fx, bg = _device(x, g, out, scales, "NDHWC")
    # a backward that read the NDHWC gradient as NCDHW data (same bytes, wrong dims)
    n, od, oh, ow, c = g.shape
    g_as_ncdhw = np.ascontiguousarray(g).reshape(n, c, od, oh, ow)
    wrong = reference.upsample_nearest_exact3d_backward(g_as_ncdhw, out, (n, c, *dhw))
    bg_wrong = np.ascontiguousarray(wrong).reshape(bg.shape)
    assert adjoint_check(x, g, fx, bg, out, layout="NDHWC").passed
    assert not adjoint_check(x, g, fx, bg_wrong, out, layout="NDHWC").passed


def test_a_backward_off_by_rounding_beyond_its_dtype_fails() -> None:
    dhw, out, scales = SHAPES[2]
    x, g = _pair(dhw, out, "NCDHW", np.float32)
    fx, bg = _device(x, g, out, scales, "NCDHW")
    bad = bg.copy()
    bad.flat[5] += np.float32(1e-3)  # one element wrong by far more than float32 rounding
    assert not adjoint_check(x, g, fx, bad, out).passed


def test_shapes_and_dtypes_are_checked() -> None:
    x, g = random_pair((1, 1, 2, 2, 2), (1, 1, 4, 4, 4), np.float32)
    with pytest.raises(ValueError, match="fx: shape"):
        adjoint_check(x, g, x, x, (4, 4, 4))
    with pytest.raises(TypeError, match="float64"):
        adjoint_check(x.astype(np.float64), g, g, x, (4, 4, 4))
