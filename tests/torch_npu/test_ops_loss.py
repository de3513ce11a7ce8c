"""torch_npu runs the MSE losses of issue 38 on the simulator: ``F.mse_loss(y, t)`` and ``((y - t) ** 2).mean()``
with their backward, on 5-D NPU tensors in float32 and float16, against torch CPU.

One child process in the simulator's environment (tests/torch_npu/test_torch_npu_on_sim.py's ``_start``); the
simulator's call counters prove that op-plugin called the aclnn operators (aclnnMseLoss, aclnnMseLossBackward,
aclnnPowTensorScalar, aclnnMean; the hand-written loss also aclnnSub and mean's backward aclnnDivs, src/ops/sub.c
and div.c) and copied nothing through the host.  Pow and its backward, and mean, are also checked on their own.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.torch_npu.test_torch_npu_on_sim import _finish, _start

SCRIPT = r"""
import json
import torch, torch_npu
import torch.nn.functional as F
from acl_bindings import sim

WATCH = ["aclnnMseLoss", "aclnnMseLossBackward", "aclnnPowTensorScalar", "aclnnMean", "aclnnSub", "aclnnDivs",
         "aclnnMuls", "aclnnMul", "aclnnAdd", "aclnnReduceSum", "aclnnInplaceFillScalar", "aclrtMemcpy",
         "aclrtMemcpyAsync"]

def counters():
    return {n: sim.call_count(n) for n in WATCH}

def delta(before):
    return {n: sim.call_count(n) - v for n, v in before.items() if sim.call_count(n) != v}

def diff(a, b):
    dtypes = [str(a.dtype), str(b.dtype)]
    a, b = a.detach().cpu().double(), b.detach().double()
    return {"maxdiff": float((a - b).abs().max()), "scale": float(b.abs().max()), "dtypes": dtypes,
            "npu": a.flatten()[:3].tolist(), "cpu": b.flatten()[:3].tolist()}

out = {}
gen = torch.Generator().manual_seed(38)
for dt in (torch.float32, torch.float16):
    rec = out[str(dt)] = {}
    yc = torch.randn(2, 3, 4, 5, 6, generator=gen).to(dt)
    tc = torch.randn(2, 3, 4, 5, 6, generator=gen).to(dt)
    gc = torch.randn(2, 3, 4, 5, 6, generator=gen).to(dt)
    t = tc.npu()
    torch.npu.synchronize()

    def step(name, loss_fn, grad=None):
        y = yc.npu().requires_grad_(True)
        yr = yc.clone().requires_grad_(True)
        gn = None if grad is None else grad.npu()  # the copies up before the counters
        torch.npu.synchronize()
        c = counters()
        loss = loss_fn(y, t)
        torch.npu.synchronize()
        fwd = delta(c)
        c = counters()
        loss.backward(gn)
        torch.npu.synchronize()
        bwd = delta(c)
        lr = loss_fn(yr, tc)
        lr.backward(grad)
        rec[name] = {"fwd": fwd, "bwd": bwd, "loss": diff(loss, lr), "grad": diff(y.grad, yr.grad),
                     "device": str(loss.device)}

    step("mse_mean", lambda y, t: F.mse_loss(y, t))
    step("mse_sum", lambda y, t: F.mse_loss(y, t, reduction="sum"))
    step("mse_none", lambda y, t: F.mse_loss(y, t, reduction="none"), grad=gc)
    step("hand_mean", lambda y, t: ((y - t) ** 2).mean())
    # pow on its own (y + (-1) * t is aclnnAdd), and a non-integral exponent
    step("pow_sum", lambda y, t: (torch.add(y, t, alpha=-1) ** 2).sum())
    step("pow_float_exp", lambda y, t: (y + 6) ** 2.5, grad=gc)  # Pow with 2.5, its backward Pow with 1.5
    for name, fn in (("mean_all", lambda v: v.mean()), ("mean_dims", lambda v: v.mean(dim=(1, 4), keepdim=True)),
                     ("mean_to_f32", lambda v: v.mean(dtype=torch.float32))):
        yn = yc.npu()
        torch.npu.synchronize()
        c = counters()
        m = fn(yn)
        torch.npu.synchronize()
        rec[name] = {"fwd": delta(c), "loss": diff(m, fn(yc))}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The child's record."""
    _, out, _ = _finish(*_start(SCRIPT, tmp_path_factory.mktemp("loss")))
    return dict(out)


DTYPES = ["torch.float32", "torch.float16"]


def _close(rec: dict[str, Any], dtype: str, ulps: float = 2.0) -> None:
    # float32: summation order (the device's is not modelled); float16: a rounding or two at float16's epsilon
    eps = 2.0 ** -23 if dtype == "torch.float32" else 2.0 ** -10
    assert rec["dtypes"] == [dtype, dtype], rec  # the NPU's result and torch CPU's
    assert rec["maxdiff"] <= ulps * eps * max(rec["scale"], 1e-30) * (8 if dtype == "torch.float32" else 1), rec


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_forward_and_backward(run: dict[str, Any], dtype: str, reduction: str) -> None:
    rec = run[dtype][f"mse_{reduction}"]
    assert rec["device"] == "npu:0"
    # op-plugin called the aclnn operators, once each, and copied nothing through the host
    assert rec["fwd"] == {"aclnnMseLoss": 1}, rec["fwd"]
    fill = {} if reduction == "none" else {"aclnnInplaceFillScalar": 1}  # backward()'s ones for a 0-d loss
    assert rec["bwd"] == {"aclnnMseLossBackward": 1, **fill}, rec["bwd"]
    _close(rec["loss"], dtype)
    _close(rec["grad"], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hand_written_mean_squared_error(run: dict[str, Any], dtype: str) -> None:
    rec = run[dtype]["hand_mean"]
    assert rec["fwd"] == {"aclnnSub": 1, "aclnnPowTensorScalar": 1, "aclnnMean": 1}, rec["fwd"]
    # mean's backward: the ones, / n (Divs); pow's: 2 * y ** 1.0 (Pow with 1.0, Muls), times the gradient (Mul)
    assert rec["bwd"] == {"aclnnInplaceFillScalar": 1, "aclnnDivs": 1, "aclnnPowTensorScalar": 1, "aclnnMuls": 1,
                          "aclnnMul": 1}, rec["bwd"]
    _close(rec["loss"], dtype)
    _close(rec["grad"], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_and_its_backward(run: dict[str, Any], dtype: str) -> None:
    rec = run[dtype]["pow_sum"]
    assert rec["fwd"] == {"aclnnAdd": 1, "aclnnPowTensorScalar": 1, "aclnnReduceSum": 1}, rec["fwd"]
    assert rec["bwd"] == {"aclnnInplaceFillScalar": 1, "aclnnPowTensorScalar": 1, "aclnnMuls": 1, "aclnnMul": 1}, \
        rec["bwd"]
    _close(rec["loss"], dtype)
    _close(rec["grad"], dtype)
    rec = run[dtype]["pow_float_exp"]
    assert rec["fwd"].get("aclnnPowTensorScalar") == 1 and "aclrtMemcpy" not in rec["fwd"], rec["fwd"]
    _close(rec["loss"], dtype, ulps=4)
    _close(rec["grad"], dtype, ulps=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["mean_all", "mean_dims", "mean_to_f32"])
def test_mean(run: dict[str, Any], dtype: str, case: str) -> None:
    rec = run[dtype][case]
    assert rec["fwd"] == {"aclnnMean": 1}, rec["fwd"]
    _close(rec["loss"], "torch.float32" if case == "mean_to_f32" else dtype)
