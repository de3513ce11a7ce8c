"""The adjoint check with both operators on the simulator: it passes for the whole matrix (every dtype, both
layouts, with and without scales, tie and non-tie shapes, both SoC families) and fails when the simulator's
forward is given a wrong index law (``CANN_SIM_TEST_FORWARD_LAW=ceil``, a test-only switch)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from acl_bindings import Device, Stream
from tests.sim.test_forward_sim import SOC_950, forward
from upsample3d_grad import Session
from upsample3d_grad.adjoint import adjoint_check, random_pair

DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
# (input D, H, W; output size; scales (all three or none: the backward's and forward's scale rules then agree))
SHAPES = {
    "ties": ((2, 3, 2), (41, 7, 5), (0.0, 0.0, 0.0)),
    "scaled ties": ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),
    "no ties": ((3, 4, 5), (7, 9, 11), (0.0, 0.0, 0.0)),
    "scaled, no ties": ((2, 2, 3), (4, 6, 3), (2.0, 3.0, 1.0)),
}
#: scale 1.1: the A2/A3 forward's double reciprocal and the 950's float one differ by an ulp (facts §3.5)
SHAPE_950 = ((16, 2, 2), (17, 2, 2), (1.1, 1.0, 1.0))


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, ...]:
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)


def _check(session: Session, device: Device, stream: Stream, name: str, layout: str, dtype: Any,
           soc: str = "a2a3") -> Any:
    dhw, out, scales = SHAPES[name] if name in SHAPES else SHAPE_950
    x, g = random_pair(_phys(layout, 2, 3, *dhw), _phys(layout, 2, 3, *out), dtype, seed=11)
    fx, _ = forward(device, stream, x, out, scales, layout)
    bg = session.backward(g, out, (2, 3, *dhw), *(s or None for s in scales), layout=layout)
    return adjoint_check(x, g, fx, bg, out, *(s or None for s in scales), layout=layout, soc=soc)


@pytest.fixture()
def both(no_leaks: None) -> Any:
    with Session(0) as session, Device(0) as device, Stream(device) as stream:
        yield session, device, stream


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_adjoint_check_passes_on_the_simulator(both: Any, name: str, layout: str, dtype: Any) -> None:
    result = _check(*both, name, layout, dtype)
    assert result.passed, result.describe()
    if "no ties" in name:
        assert result.mismatched == 0 and result.predicted == 0.0
    else:  # the residual is there, and predicted
        assert result.mismatched > 0 and result.predicted != 0.0 and result.residual == pytest.approx(
            result.predicted, abs=result.bound)


def test_the_950_forward_passes_with_its_own_reciprocal(both: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANN_SIM_SOC", SOC_950)
    result = _check(*both, "950", "NCDHW", np.float32, soc="ascend950")
    assert result.passed and result.mismatched > 0, result.describe()
    # read with the A2/A3 forward's law instead, the same device answer does not pass
    assert not _check(*both, "950", "NCDHW", np.float32, soc="a2a3").passed
    monkeypatch.delenv("CANN_SIM_SOC")
    assert _check(*both, "950", "NCDHW", np.float32, soc="a2a3").passed


@pytest.mark.parametrize("name", ["ties", "no ties", "scaled ties"])
def test_a_wrong_forward_law_fails_the_check(both: Any, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("CANN_SIM_TEST_FORWARD_LAW", "ceil")  # test-only: ceil instead of floor
    result = _check(*both, name, "NCDHW", np.float32)
    assert not result.passed, result.describe()
