"""A torch_npu training step around this operator runs on the simulator, equal to torch CPU's (issue 38).

Each case is a child process started after ``eval "$(python -m acl_bindings.sim env)"``: the example
``examples/torch_npu_train_step.py`` as a user runs it (every combination, float32 and float16, ten steps), and
the same steps imported from it with the simulator's call counters read around them, which prove that the aclnn
operators ran on the simulated device: no aclop compilation was asked for and nothing was computed on the host.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.torch_npu.test_torch_npu_on_sim import REPO, _finish, _start

EXAMPLE = REPO / "examples" / "torch_npu_train_step.py"

# The steps of the example, imported, with the counters around each combination.
COUNTED = r"""
import json, sys
import torch, torch_npu
from acl_bindings import sim
sys.path.insert(0, EXAMPLE_DIR)
import torch_npu_train_step as ex

WATCH = ["aclnnMul", "aclnnInplaceAdd", "aclnnMseLoss", "aclnnMseLossBackward", "aclnnSub", "aclnnPowTensorScalar",
         "aclnnMean", "aclnnForeachAddListV2", "aclnnForeachMulScalarV2", "aclnnUpsampleNearestExact3d",
         "aclnnUpsampleNearestExact3dBackward", "aclopCompileAndExecute", "aclopCompileAndExecuteV2", "aclrtMemcpy"]
out = {}
CASES = [("package", "mse", "sgd"), ("torch", "manual", "sgd-loop"), ("package", "manual", "sgd-momentum")]
for op, loss, optim in CASES:
    before = {n: sim.call_count(n) for n in WATCH}
    got, w = ex.train("npu", ex.upsample(op), loss, optim, torch.float32, 3)
    ran = {n: sim.call_count(n) - v for n, v in before.items() if sim.call_count(n) != v}
    want, w_cpu = ex.train("cpu", ex.upsample("torch"), loss, optim, torch.float32, 3)
    out[f"{op}/{loss}/{optim}"] = {"ran": ran, "losses": [got, want], "w": [w.flatten().tolist(),
                                                                            w_cpu.flatten().tolist()]}

# the accumulation: w.grad after two backward() calls is the sum of both micro-batches' gradients
xs, ts, w0 = ex.data(torch.float32)
grads = {}
for device in ("npu", "cpu"):
    w = torch.nn.Parameter(w0.to(device))
    interp = ex.upsample("package" if device == "npu" else "torch")
    for x, t in zip(xs, ts):
        ((interp(x.to(device) * w) - t.to(device)) ** 2).mean().backward()
    grads[device] = w.grad.cpu().flatten().tolist()
single = torch.nn.Parameter(w0.clone())
ex.upsample("torch")(xs[0] * single).sub(ts[0]).pow(2).mean().backward()
out["accumulation"] = {"npu": grads["npu"], "cpu": grads["cpu"], "first": single.grad.flatten().tolist()}
print("RESULT " + json.dumps(out))
"""


def _run_example(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "CANN_SIM_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD",
                                                                     "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["PYTHONPATH"] = str(REPO)
    py = sys.executable
    quoted = " ".join(args)
    cmd = f'eval "$("{py}" -m acl_bindings.sim env)" && exec "{py}" "{EXAMPLE}" {quoted}'
    return subprocess.run(["bash", "-c", cmd], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_the_example_trains_as_the_cpu_does_in_every_combination(tmp_path) -> None:
    proc = _run_example(tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = [ln for ln in proc.stdout.splitlines() if "steps:" in ln]
    assert len(rows) == 2 * 2 * 3 * 2, proc.stdout  # ops x losses x optimisers x dtypes
    assert all(ln.endswith(" ok") and " 10 steps:" in ln for ln in rows), proc.stdout
    assert "Traceback" not in proc.stderr and "Feature is not supported" not in proc.stderr, proc.stderr


def test_the_example_refuses_a_bad_step_count(tmp_path) -> None:
    proc = _run_example(tmp_path, "--steps", "0")
    assert proc.returncode == 2 and "--steps: at least 1, got 0" in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    script = f"EXAMPLE_DIR = {str(EXAMPLE.parent)!r}\n" + COUNTED
    return _finish(*_start(script, tmp_path_factory.mktemp("counted")))[1]


@pytest.mark.parametrize("case", ["package/mse/sgd", "torch/manual/sgd-loop", "package/manual/sgd-momentum"])
def test_the_steps_run_the_aclnn_operators_and_match_the_cpu(counted, case: str) -> None:
    rec = counted[case]
    (got, want), (w, w_cpu) = rec["losses"], rec["w"]
    assert got == pytest.approx(want, rel=1e-5) and w == pytest.approx(w_cpu, rel=1e-5), rec
    ran = rec["ran"]
    assert "aclopCompileAndExecute" not in ran and "aclopCompileAndExecuteV2" not in ran, ran
    # 3 steps x 2 micro-batches: one loss.item() each; the uploads of 2 x, 2 t and w; w read back: no other host copy
    assert ran.get("aclrtMemcpy", 0) == 3 * 2 + 4 + 2, ran
    loss_ops = {"aclnnMseLoss", "aclnnMseLossBackward"} if "/mse/" in case else {"aclnnSub", "aclnnPowTensorScalar",
                                                                               "aclnnMean"}
    step_ops = {"sgd": {"aclnnForeachAddListV2"}, "sgd-loop": {"aclnnInplaceAdd"},
                "sgd-momentum": {"aclnnForeachMulScalarV2", "aclnnForeachAddListV2"}}[case.split("/")[2]]
    upsample_ops = {"aclnnUpsampleNearestExact3d", "aclnnUpsampleNearestExact3dBackward"}
    want_ops = loss_ops | step_ops | upsample_ops | {"aclnnMul", "aclnnInplaceAdd"}  # x * w; w.grad accumulates
    assert want_ops <= set(ran), sorted(want_ops - set(ran))
    assert all(ran[n] >= 3 for n in loss_ops | upsample_ops), ran  # every step, not once


def test_gradients_accumulate_over_two_micro_batches(counted) -> None:
    rec = counted["accumulation"]
    assert rec["npu"] == pytest.approx(rec["cpu"], rel=1e-5), rec
    assert rec["npu"] != pytest.approx(rec["first"], rel=1e-3), rec  # the second micro-batch was added
