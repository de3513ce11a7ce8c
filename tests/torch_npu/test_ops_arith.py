"""torch_npu's element-wise arithmetic on the simulator (issue 38): the training-step pieces that op-plugin runs
as aclnnMul(s), aclnnAdd(s), aclnnSub(s), aclnnDiv(s) and their in-place forms (ops/mul_add.c, ops/sub.c,
ops/div.c), against torch CPU.  One child process in the simulator's environment; the simulator's call counters
prove the aclnn operators ran (op-plugin falls back to the host silently where one is missing)."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acl_bindings import sim

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json
import torch, torch_npu
import torch.nn.functional as F
from acl_bindings import sim

OPS = ["aclnnMul", "aclnnMuls", "aclnnAdd", "aclnnAdds", "aclnnSub", "aclnnSubs", "aclnnDiv", "aclnnDivs",
       "aclnnInplaceMul", "aclnnInplaceMuls", "aclnnInplaceAdd", "aclnnInplaceAdds", "aclnnInplaceSub",
       "aclnnInplaceSubs", "aclnnInplaceDiv", "aclnnInplaceDivs", "aclnnMean", "aclnnUpsampleNearestExact3dBackward"]
out = {}

def ran(fn):
    before = {n: sim.call_count(n) for n in OPS}
    got = fn()
    torch.npu.synchronize()
    return got, {n: sim.call_count(n) - v for n, v in before.items() if sim.call_count(n) != v}

def cmp(a, b):  # max abs difference and exact equality, on the host
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return {"equal": bool(torch.equal(a, b)), "diff": float((a - b).abs().max()), "shape": list(a.shape),
            "scale": float(b.abs().max())}

gen = torch.Generator().manual_seed(38)
for dt in (torch.float32, torch.float16):
    name = str(dt).split(".")[1]
    x = torch.randn(2, 3, 2, 3, 2, generator=gen).to(dt)
    y = torch.randn(2, 3, 2, 3, 2, generator=gen).to(dt) + 3
    w0 = torch.randn(1, 3, 1, 1, 1, generator=gen).to(dt)
    g0 = torch.randn(1, 3, 1, 1, 1, generator=gen).to(dt)
    xn, yn = x.npu(), y.npu()
    r = {}

    def accum(dev):
        w = torch.nn.Parameter(w0.to(dev))
        xd = x.to(dev)
        for _ in range(2):
            F.interpolate(xd * w, scale_factor=2, mode="nearest-exact").sum().backward()
        return w.grad
    got, calls = ran(lambda: accum("npu"))
    r["accum_npu_once"] = cmp(accum("npu"), accum("npu"))
    once = torch.nn.Parameter(w0.clone())
    F.interpolate(x * once, scale_factor=2, mode="nearest-exact").sum().backward()
    r["accum"] = {**cmp(got, accum("cpu")), "calls": calls, "twice_once": cmp(got, 2 * once.grad)}

    for key, fn in (("div_scalar", lambda a, b: a / 2), ("div_tensor", lambda a, b: a / b),
                    ("sub", lambda a, b: b - a), ("sub_alpha", lambda a, b: torch.sub(b, a, alpha=0.5)),
                    ("sub_scalar", lambda a, b: a - 1.5), ("mul_tensor", lambda a, b: a * b),
                    ("add_tensor", lambda a, b: a + b)):
        got, calls = ran(lambda: fn(xn, yn))
        r[key] = {**cmp(got, fn(x, y)), "calls": calls}

    def inplace(a, b):
        z = a.clone()
        z.mul_(2); z.add_(1); z.mul_(b); z.add_(b); z.sub_(b); z.div_(b); z.div_(4); z.sub_(0.25)
        return z
    got, calls = ran(lambda: inplace(xn, yn))
    r["inplace"] = {**cmp(got, inplace(x, y)), "calls": calls}

    for key, kw in (("sgd", {}), ("sgd_momentum", {"momentum": 0.9})):
        def sgd(dev):
            w = torch.nn.Parameter(w0.to(dev))
            opt = torch.optim.SGD([w], lr=0.1, foreach=False, **kw)
            for _ in range(2):
                w.grad = g0.to(dev)
                opt.step()
            return w
        got, calls = ran(lambda: sgd("npu"))
        r[key] = {**cmp(got, sgd("cpu")), "calls": calls}

    def mean_bwd(dev):
        w = torch.nn.Parameter(w0.to(dev))
        (x.to(dev) * w).mean().backward()
        return w.grad
    try:
        got, calls = ran(lambda: mean_bwd("npu"))
        r["mean_backward"] = {**cmp(got, mean_bwd("cpu")), "calls": calls}
    except RuntimeError as exc:  # aclnnMean not simulated in this tree: op-plugin's aclop fallback fails
        r["mean_backward"] = {"error": str(exc).splitlines()[0]}
    out[name] = r
print("RESULT " + json.dumps(out))
"""


def _has_symbol(name: str) -> bool:
    return hasattr(ctypes.CDLL(str(sim.LIB64 / "libopapi_cv.so")), name)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("arith")
    path = tmp / "scenario.py"
    path.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "CANN_SIM_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD",
                                                                     "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    py = sys.executable
    cmd = f'eval "$("{py}" -m acl_bindings.sim env)" && exec "{py}" "{path}"'
    proc = subprocess.run(["bash", "-c", cmd], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


DTYPES = ["float32", "float16"]
#: float16 tolerances: one or two float16 ulps of the values these steps reach
TOL = {"float32": 1e-6, "float16": 2e-2}


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_accumulation_adds_in_place(result: dict, dtype: str) -> None:
    """Two backward calls: w.grad is the first gradient plus the second (AccumulateGrad's add_: aclnnInplaceAdd)."""
    r = result[dtype]["accum"]
    # the sums behind each gradient are reduced in another order than torch CPU's: equal within rounding
    for got in (r, r["twice_once"]):
        assert got["diff"] <= TOL[dtype] * got["scale"], r
    assert r["calls"].get("aclnnInplaceAdd") == 1, r["calls"]  # the second backward's add_
    assert r["calls"].get("aclnnMul") == 4 and r["calls"].get("aclnnUpsampleNearestExact3dBackward") == 2, r
    assert result[dtype]["accum_npu_once"]["equal"]  # deterministic on the device


CALLS = {"div_scalar": "aclnnDivs", "div_tensor": "aclnnDiv", "sub": "aclnnSub", "sub_alpha": "aclnnSub",
         "sub_scalar": "aclnnSubs", "mul_tensor": "aclnnMul", "add_tensor": "aclnnAdd"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CALLS))
def test_out_of_place_arithmetic_matches_torch_cpu(result: dict, dtype: str, case: str) -> None:
    r = result[dtype][case]
    assert r["calls"] == {CALLS[case]: 1}, r["calls"]
    exact = dtype == "float32" or case in ("div_scalar", "sub", "add_tensor", "mul_tensor", "div_tensor")
    if exact:  # one correctly rounded operation (float32's 24 bits round float16's results innocuously)
        assert r["equal"], r
    else:  # float16 with a Python scalar: CANN computes in float16 with the scalar rounded, torch in float32
        assert r["diff"] <= TOL[dtype], r


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_arithmetic_matches_torch_cpu(result: dict, dtype: str) -> None:
    r = result[dtype]["inplace"]
    assert r["diff"] <= TOL[dtype] * 4, r
    if dtype == "float32":
        assert r["equal"], r
    want = {"aclnnInplaceMuls": 1, "aclnnInplaceAdds": 1, "aclnnInplaceMul": 1, "aclnnInplaceAdd": 1,
            "aclnnInplaceSub": 1, "aclnnInplaceDiv": 1, "aclnnInplaceDivs": 1, "aclnnInplaceSubs": 1}
    assert r["calls"] == want, r["calls"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_steps_match_torch_cpu(result: dict, dtype: str) -> None:
    """SGD(foreach=False): param.add_(grad, alpha=-lr); with momentum, buf.mul_(m).add_(grad) first."""
    plain, mom = result[dtype]["sgd"], result[dtype]["sgd_momentum"]
    assert plain["calls"] == {"aclnnInplaceAdd": 2}, plain["calls"]
    assert mom["calls"] == {"aclnnInplaceAdd": 3, "aclnnInplaceMuls": 1}, mom["calls"]
    for r in (plain, mom):
        assert r["equal"] if dtype == "float32" else r["diff"] <= TOL[dtype], r


@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_backward_divides_on_the_device(result: dict, dtype: str) -> None:
    """mean's backward is grad.expand(...) / numel: aclnnDivs (the forward needs aclnnMean, branch h-loss)."""
    if not _has_symbol("aclnnMeanGetWorkspaceSize"):
        pytest.skip("aclnnMean is not simulated in this tree (branch h-loss)")
    r = result[dtype]["mean_backward"]
    assert "error" not in r, r
    assert r["calls"].get("aclnnDivs") == 1 and r["calls"].get("aclnnMean") == 1, r["calls"]
    assert r["diff"] <= TOL[dtype], r
