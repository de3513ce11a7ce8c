"""torch's SGD (foreach=True, the default for NPU parameters) runs on the simulator through op-plugin's foreach
operators (issue 38): ``torch._foreach_add_(params, grads, alpha=-lr)`` is aclnnForeachAddListV2 and, with momentum,
``torch._foreach_mul_(bufs, momentum)`` aclnnForeachMulScalarV2 (the first step's buffers are ``grad.clone()``:
aclnnInplaceCopy).  One child process in the simulator's environment runs each case for several steps beside torch's
CPU SGD with the same gradients; the simulator's call counters, read around the steps only, prove the foreach aclnn
operators ran and nothing went through the host (op-plugin's CPU fallback copies with aclrtMemcpy); the counters are
read after ``torch.npu.synchronize()``, since torch_npu's task queue makes the aclnn calls on a thread of its own."""

from __future__ import annotations

import numpy as np
import pytest

from tests.torch_npu.test_torch_npu_on_sim import _finish, _start

SCENARIO = r"""
import json
import numpy as np
import torch, torch_npu
from acl_bindings import sim

WATCH = ["aclnnForeachAddListV2", "aclnnForeachMulScalarV2", "aclnnInplaceCopy", "aclrtMemcpy", "aclrtMemcpyAsync",
         "aclCreateTensorList", "aclDestroyTensorList"]
SHAPES = {"one": [(1, 6, 1, 1, 1)], "three": [(3, 4), (1, 6, 1, 1, 1), (5,)],
          "thirty": [(k % 4 + 1, 2) for k in range(30)]}  # more than op-plugin's 24 a call: split in two
STEPS = 4

def model(p0, grads, momentum, dt):
    # CANN's arithmetic (src/ops/foreach_*.c): the scalar cast to the dtype, each product and sum rounded to it
    r = lambda v: np.asarray(v, dtype=dt)
    lr, mom, one = r(-0.1), r(momentum), r(1.0)
    ps, bufs = [r(p) for p in p0], None
    for k, gs in enumerate(grads):
        gs = [r(g) for g in gs]
        if momentum:
            bufs = [g.copy() for g in gs] if k == 0 else [r(r(b * mom) + r(g * one)) for b, g in zip(bufs, gs)]
            gs = bufs
        ps = [r(p + r(g * lr)) for p, g in zip(ps, gs)]
    return ps

out = {}
for dtype in ("float32", "float16"):
    dt = getattr(torch, dtype)
    for size, shapes in SHAPES.items():
        for momentum in (0.0, 0.9):
            gen = torch.Generator().manual_seed(38)
            p0 = [torch.randn(*s, generator=gen).to(dt) for s in shapes]
            grads = [[torch.randn(*s, generator=gen).to(dt) for s in shapes] for _ in range(STEPS)]
            cpu = [torch.nn.Parameter(p.clone()) for p in p0]
            npu = [torch.nn.Parameter(p.clone().npu()) for p in p0]
            npu_grads = [[g.npu() for g in gs] for gs in grads]
            kw = {"lr": 0.1, "momentum": momentum} if momentum else {"lr": 0.1}
            opt_cpu, opt_npu = torch.optim.SGD(cpu, **kw), torch.optim.SGD(npu, **kw)
            torch.npu.synchronize()
            live0 = sim.live_handles()
            calls = dict.fromkeys(WATCH, 0)
            for k in range(STEPS):
                for p, g in zip(cpu, grads[k]):
                    p.grad = g.clone()
                for p, g in zip(npu, npu_grads[k]):
                    p.grad = g
                opt_cpu.step()
                torch.npu.synchronize()  # torch_npu's task queue runs the aclnn calls on its own thread
                before = {n: sim.call_count(n) for n in WATCH}
                opt_npu.step()
                torch.npu.synchronize()
                for n in WATCH:
                    calls[n] += sim.call_count(n) - before[n]
            torch.npu.synchronize()
            live1 = sim.live_handles()
            got = [p.detach().cpu() for p in npu]
            want = model([p.numpy() for p in p0], [[g.numpy() for g in gs] for gs in grads], momentum,
                         np.float32 if dtype == "float32" else np.float16)
            out[f"{dtype}-{size}-{momentum}"] = {
                "calls": calls,
                "devices": sorted({str(p.device) for p in npu}),
                "dtypes": sorted({str(p.dtype) for p in npu}),
                "max_err_vs_cpu": max(float((g.double() - c.detach().double()).abs().max()) for g, c in zip(got, cpu)),
                "max_abs": max(float(c.detach().double().abs().max()) for c in cpu),
                "model_equal": all(np.array_equal(g.numpy(), w) for g, w in zip(got, want)),
                "moved": all(not torch.equal(g, p) for g, p in zip(got, p0)),
                "lists_left": live1["tensor_list"] - live0["tensor_list"],
                "tensors_left": live1["tensor"] - live0["tensor"],
            }
print("RESULT " + json.dumps(out))
"""

CASES = [f"{dt}-{size}-{m}" for dt in ("float32", "float16") for size in ("one", "three", "thirty")
         for m in (0.0, 0.9)]
NPARAMS = {"one": 1, "three": 3, "thirty": 30}
STEPS = 4


@pytest.fixture(scope="module")
def sgd(tmp_path_factory: pytest.TempPathFactory):
    """The child's record, per case."""
    _, out, _ = _finish(*_start(SCENARIO, tmp_path_factory.mktemp("foreach_sgd")))
    return out


@pytest.mark.parametrize("case", CASES)
def test_sgd_runs_the_foreach_operators_and_matches_torch_cpu(sgd, case: str) -> None:
    rec = sgd[case]
    dtype, size, momentum = case.split("-")
    nparams = NPARAMS[size]
    adds, muls = -(-nparams // 24), -(-nparams // 48)  # op-plugin's calls per list: at most 24 (48) tensors in place
    calls = rec["calls"]
    if float(momentum):
        # step 1: buf = grad.clone() per parameter, then params += -lr * buf; later: buf *= m; buf += grad; params
        want = {"aclnnForeachAddListV2": adds * (1 + 2 * (STEPS - 1)), "aclnnForeachMulScalarV2": muls * (STEPS - 1),
                "aclnnInplaceCopy": nparams}
    else:
        want = {"aclnnForeachAddListV2": adds * STEPS, "aclnnForeachMulScalarV2": 0, "aclnnInplaceCopy": 0}
    assert {k: calls[k] for k in want} == want, calls
    assert calls["aclrtMemcpy"] == calls["aclrtMemcpyAsync"] == 0, calls  # no CPU fallback
    assert calls["aclCreateTensorList"] == calls["aclDestroyTensorList"] > 0, calls
    assert rec["lists_left"] == 0 and rec["tensors_left"] == 0, rec  # op-plugin destroys what it made
    assert rec["devices"] == ["npu:0"] and rec["dtypes"] == [f"torch.{dtype}"]
    assert rec["moved"] is True
    assert rec["model_equal"] is True, rec  # bit for bit CANN's arithmetic (the scalar in the lists' dtype)
    # torch's CPU SGD: float32 within rounding; float16 within a few float16 steps (CPU computes in float32)
    tol = 1e-6 if dtype == "float32" else 4 * float(np.finfo(np.float16).eps)
    assert rec["max_err_vs_cpu"] <= tol * max(1.0, rec["max_abs"]), rec
