"""torch_npu 2.13.0, as published, runs nearest-exact 3-D upsampling on the simulator (issue 26).

Two child processes, one per order of first initialisation, each started by a shell after
``eval "$(python -m acl_bindings.sim env)"``.  Each prints a JSON record of what it saw; the simulator's call
counters (``acl_bindings.sim.call_count``, read in the child: one runtime library serves torch_npu and this
package) prove that the aclnn operators ran, not op-plugin's CPU fallback (which computes on the host with
aclrtMemcpy and still returns NPU tensors), and its exit report (``CANN_SIM_REPORT``) how the runtime was torn
down.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

# Shared by both children: counters, and the package's reference.
_PRELUDE = r"""
import json, sys
import numpy as np

def counters(sim, names):
    return {n: sim.call_count(n) for n in names}

def delta(sim, before):
    return {n: sim.call_count(n) - v for n, v in before.items()}

WATCH = ["aclrtMemcpy", "aclrtMemcpyAsync", "aclrtSynchronizeStream", "aclnnInplaceCopy", "aclnnInplaceFillScalar",
         "aclnnReduceSum", "aclnnUpsampleNearestExact3d", "aclnnUpsampleNearestExact3dBackward"]
"""

# torch_npu first: it initialises ACL; the package only borrows its runtime (and later takes a reference).
TORCH_NPU_FIRST = _PRELUDE + r"""
import torch, torch_npu
import torch.nn.functional as F
from acl_bindings import sim
from upsample3d_grad.reference import upsample_nearest_exact3d_backward as ref_bwd
from upsample3d_grad.reference.forward import upsample_nearest_exact3d_forward as ref_fwd
from upsample3d_grad.functional import backward_torch, forward_torch, upsample_nearest_exact3d_backward

out = {"available": bool(torch.npu.is_available())}
gen = torch.Generator().manual_seed(26)
x = torch.randn(2, 3, 4, 5, 6, generator=gen)
size = (5, 7, 9)

# round trip and the current stream
xn = x.npu()
out["roundtrip"] = bool(torch.equal(xn.cpu(), x)) and str(xn.device) == "npu:0"
s = torch_npu.npu.current_stream()
out["stream"] = [str(s.device), int(s.npu_stream) != 0]

# F.interpolate forward, then backward(g), through op-plugin
xr = x.npu().requires_grad_(True)
c = counters(sim, WATCH)
y = F.interpolate(xr, size=size, mode="nearest-exact")
torch.npu.synchronize()
out["fwd_calls"] = delta(sim, c)
out["fwd_equal"] = bool(np.array_equal(y.detach().cpu().numpy(), ref_fwd(x.numpy(), size)))
g = torch.randn(y.shape, generator=gen)
gn = g.npu()
c = counters(sim, WATCH)
y.backward(gn)
torch.npu.synchronize()
out["bwd_calls"] = delta(sim, c)
want = ref_bwd(g.numpy(), size, x.shape)
out["bwd_maxdiff"] = float(np.max(np.abs(xr.grad.cpu().numpy() - want)))
out["bwd_scale"] = float(np.max(np.abs(want)))

# in three dtypes: the cast on the device (op-plugin's .to(dtype) on an NPU tensor is aclnnInplaceCopy; float32 is
# already the dtype, no copy), the forward bit for bit against the reference, and y.sum().backward()
from upsample3d_grad.torch_interop import tensor_to_numpy
out["sum"] = {}
for dt in (torch.float32, torch.float16, torch.bfloat16):
    xn = x.npu()  # (a fresh float32 leaf: for float32, xn.to(dt) is xn itself)
    torch.npu.synchronize()
    c = counters(sim, WATCH)
    xr = xn.to(dt)
    torch.npu.synchronize()
    cast_calls = delta(sim, c)
    x_dt = tensor_to_numpy(x.to(dt))  # torch's CPU cast: round to nearest even
    cast_equal = tensor_to_numpy(xr.cpu()).tobytes() == x_dt.tobytes()
    xr.requires_grad_(True)
    c = counters(sim, WATCH)
    y = F.interpolate(xr, size=size, mode="nearest-exact")
    torch.npu.synchronize()
    fwd_calls = delta(sim, c)
    fwd_bits = tensor_to_numpy(y.detach().cpu()).tobytes() == ref_fwd(x_dt, size).tobytes()
    c = counters(sim, WATCH)
    y.sum().backward()
    torch.npu.synchronize()
    calls = {n: v + fwd_calls[n] for n, v in delta(sim, c).items()}
    ones = np.ones((2, 3) + size, dtype=np.float32)
    want = ref_bwd(ones, size, x.shape)
    got = xr.grad.float().cpu().numpy()
    out["sum"][str(dt)] = {"calls": calls, "equal": bool(np.array_equal(got, want)), "dtype": str(xr.grad.dtype),
                           "cast_calls": cast_calls, "cast_equal": cast_equal, "cast_dtype": str(xr.dtype),
                           "fwd_calls": fwd_calls, "fwd_bits_equal": fwd_bits}

# torch.zeros, zeros_like and zero_ on the device: op-plugin's aclnnInplaceZero, nothing through the host
out["zeros"] = {}
for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool):
    xn = torch.arange(1, 7).reshape(2, 3).to(dt).npu()
    torch.npu.synchronize()
    c = counters(sim, ["aclnnInplaceZero", "aclrtMemcpy", "aclrtMemcpyAsync"])
    made = [torch.zeros(2, 3, dtype=dt, device="npu"), torch.zeros_like(xn), xn.zero_()]
    torch.npu.synchronize()
    calls = delta(sim, c)
    out["zeros"][str(dt)] = {"calls": calls, "all_zero": all(bool((t.cpu() == 0).all()) for t in made),
                             "dtypes": [str(t.dtype) for t in made], "devices": [str(t.device) for t in made]}

# a tensor times or plus a Python number, and a broadcast tensor: op-plugin's aclnnMuls, aclnnAdds, aclnnMul, aclnnAdd
ag = torch.Generator().manual_seed(27)
g, b = torch.randn(2, 3, 4, generator=ag), torch.randn(3, 1, generator=ag)
gn, bn = g.npu(), b.npu()
torch.npu.synchronize()
c = counters(sim, ["aclnnMul", "aclnnMuls", "aclnnAdd", "aclnnAdds", "aclrtMemcpy", "aclrtMemcpyAsync"])
got = [gn * 3.0 + 1.0, gn * bn, gn + bn, torch.add(gn, bn, alpha=-2)]
torch.npu.synchronize()
out["arith_calls"] = delta(sim, c)
want = [g * 3.0 + 1.0, g * b, g + b, torch.add(g, b, alpha=-2)]
out["arith_equal"] = [bool(torch.equal(r.cpu(), w)) for r, w in zip(got, want)]

# mixed dtypes: CANN's type promotion; each case's dtype and bits against torch's CPU result, and the operator run
def bits(t):
    ints = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float64: torch.int64}
    return t.view(ints[t.dtype]) if t.dtype in ints else t
h = torch.tensor([1.0009765625, 3.0, 0.333, -1000.5, 7.77], dtype=torch.float16)
f = torch.tensor([0.1, 2.5, -3.7, 1e-3, 1 / 3])
i32 = torch.tensor([1, -2, 3, 7, 2 ** 24 + 1], dtype=torch.int32)
PROMO = {
    "int64_times_float": lambda d: torch.arange(5).to(d) * 0.5,
    "int32_plus_float": lambda d: i32.to(d) + 0.5,
    "float32_times_int32": lambda d: f.to(d) * i32.to(d),
    "float16_times_0dim_float32": lambda d: h.to(d) * torch.tensor(0.1).to(d),
    "float16_plus_float32": lambda d: h.to(d) + f.to(d),
    "float16_times_host_0dim_float32": lambda d: h.to(d) * torch.tensor(2.5),
    "bfloat16_times_float": lambda d: h.bfloat16().to(d) * 0.1,
}
out["promo"] = {}
for name, fn in PROMO.items():
    want = fn("cpu")
    c = counters(sim, ["aclnnMul", "aclnnMuls", "aclnnAdd", "aclnnAdds"])
    got = fn("npu").cpu()
    out["promo"][name] = {"calls": {k: v for k, v in delta(sim, c).items() if v}, "dtype": [str(got.dtype),
                          str(want.dtype)], "bits_equal": bool(torch.equal(bits(got), bits(want)))}
# a host 0-dim tensor (or a Python float) times a float16 tensor is aclnnMuls, whose compute dtype is float16: the
# scalar is cast to float16 first (torch's CPU kernel keeps it in float32)
got = (h.npu() * torch.tensor(0.1)).cpu()
out["promo_half_scalar"] = [bool(torch.equal(bits(got), bits(h * torch.tensor(0.1).half()))),
                            bool(torch.equal(bits(got), bits(h * torch.tensor(0.1))))]

# the package's own torch paths on torch_npu tensors: zero-copy, on torch_npu's current stream
xn = x.npu()
gn = torch.randn((2, 3) + size, generator=gen).npu()
torch.npu.synchronize()
c = counters(sim, WATCH)
yp = forward_torch(xn, size)
gp = backward_torch(gn, size, tuple(x.shape))
out["pkg_calls"] = delta(sim, c)  # before anything reads the results back
out["pkg_devices"] = [str(yp.device), str(gp.device)]
out["pkg_fwd_equal"] = bool(np.array_equal(yp.cpu().numpy(), ref_fwd(x.numpy(), size)))
want = ref_bwd(gn.cpu().numpy(), size, x.shape)
out["pkg_bwd_maxdiff"] = float(np.max(np.abs(gp.cpu().numpy() - want)))
# on a user stream, in the simulator's deferred mode (work runs only at a synchronisation): torch_npu's sum reads
# the package's result on the current stream; had the package queued its kernel on another stream, that read of
# memory still being written there would fail (908401)
side = torch_npu.npu.Stream()
previous = sim.set_stream_mode("deferred")
with torch_npu.npu.stream(side):
    yp = forward_torch(xn, size)
    total = yp.sum()
    out["pkg_side_stream_sum"] = float(total.cpu())
sim.set_stream_mode(previous)
out["pkg_side_stream_want"] = float(ref_fwd(x.numpy(), size).astype(np.float64).sum())

# then the package takes its own reference (a numpy call: its own session, aclInit answers 100002)
r = upsample_nearest_exact3d_backward(np.ones((1, 1, 4, 4, 4), np.float32), (4, 4, 4), (1, 1, 2, 2, 2))
out["pkg_numpy_sum"] = float(np.asarray(r).sum())

# tests/npu's proof that torch_npu ran the kernels: on the simulator it must find no CPU computation
import acl_bindings
from tests._kernel_proof import cpu_fallback_evidence
from upsample3d_grad.reference.forward import soc_family
c = counters(sim, WATCH)
out["cpu_fallback_evidence"] = cpu_fallback_evidence(torch, "npu:0", soc_family(acl_bindings.soc_name()))
out["proof_calls"] = delta(sim, c)
print("RESULT " + json.dumps(out))
"""

# The package first: it initialises ACL; torch_npu's aclInit then answers 100002.
PACKAGE_FIRST = _PRELUDE + r"""
from upsample3d_grad.functional import upsample_nearest_exact3d_backward
r = upsample_nearest_exact3d_backward(np.ones((1, 1, 4, 4, 4), np.float32), (4, 4, 4), (1, 1, 2, 2, 2))
out = {"pkg_numpy_sum": float(np.asarray(r).sum())}
import torch, torch_npu
import torch.nn.functional as F
from acl_bindings import sim
from upsample3d_grad.functional import forward_torch
from upsample3d_grad.reference.forward import upsample_nearest_exact3d_forward as ref_fwd
x = torch.randn(1, 2, 3, 4, 5, generator=torch.Generator().manual_seed(1))
xn = x.npu()
c = counters(sim, WATCH)
y = F.interpolate(xn, size=(4, 5, 6), mode="nearest-exact")
torch.npu.synchronize()
out["fwd_calls"] = delta(sim, c)
out["fwd_equal"] = bool(np.array_equal(y.cpu().numpy(), ref_fwd(x.numpy(), (4, 5, 6))))
import warnings
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    out["pkg_fwd_equal"] = bool(np.array_equal(forward_torch(xn, (4, 5, 6)).cpu().numpy(), y.cpu().numpy()))
    forward_torch(xn, (4, 5, 6))  # (said once)
out["warnings"] = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
print("RESULT " + json.dumps(out))
"""

# torch_npu imported, not used yet, when the package makes its first call: the package lets torch_npu initialise
# ACL first (with its config), and its own aclInit answers 100002.
TORCH_NPU_IMPORTED = _PRELUDE + r"""
import torch, torch_npu
import acl_bindings
from acl_bindings import sim
from upsample3d_grad.functional import upsample_nearest_exact3d_backward
before = sim.call_count("aclInit")
r = upsample_nearest_exact3d_backward(np.ones((1, 1, 4, 4, 4), np.float32), (4, 4, 4), (1, 1, 2, 2, 2))
out = {"pkg_numpy_sum": float(np.asarray(r).sum()), "inits": sim.call_count("aclInit") - before,
       "package_first": acl_bindings.runtime.initialized_first()}
xn = torch.ones(1, 1, 2, 2, 2).npu()
out["npu_sum"] = float(torch.nn.functional.interpolate(xn, size=(4, 4, 4), mode="nearest-exact").sum().cpu())
print("RESULT " + json.dumps(out))
"""


#: The mark of the documents' torch_npu blocks, which this tier runs unchanged on the simulator
DOC_MARK = "<!-- not run: needs torch_npu and an NPU (tests/torch_npu runs it on the simulator) -->"


def doc_block(doc: str) -> str:
    """The one python block of *doc* that carries :data:`DOC_MARK`."""
    text = (REPO / doc).read_text(encoding="utf-8")
    found = re.findall(re.escape(DOC_MARK) + r"\n```python\n(.*?)```", text, re.S)
    assert len(found) == 1, f"{doc}: expected one python block after {DOC_MARK!r}, found {len(found)}"
    return found[0]


# The documents' torch_npu blocks, run as written (each in its own namespace), then what their comments say.
DOCS = r"""
import json
import numpy as np
out = {}
ns = {}
exec(compile(README, "README.md", "exec"), ns)
out["readme"] = {"device": str(ns["gi"].device), "values": ns["gi"].flatten().cpu().tolist()}
ns = {}
exec(compile(API, "docs/api.md", "exec"), ns)
gi, gi_host = ns["gi"], ns["gi_host"]
out["api"] = {"device": str(gi.device), "host": type(gi_host).__name__,
              "same": bool(np.array_equal(gi.cpu().numpy(), gi_host))}
print("RESULT " + json.dumps(out))
"""


def _start(script: str, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """Start *script* in a child process in the simulator's environment; returns it and its report's path."""
    path = tmp_path / "scenario.py"
    path.write_text(script)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "CANN_SIM_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD",
                                                                     "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["CANN_SIM_REPORT"] = str(report)
    py = sys.executable
    cmd = f'eval "$("{py}" -m acl_bindings.sim env)" && exec "{py}" "{path}"'
    proc = subprocess.Popen(["bash", "-c", cmd], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, report


def _finish(proc: subprocess.Popen, report: Path) -> tuple[subprocess.CompletedProcess, dict[str, Any],
                                                              dict[str, Any]]:
    """Wait for a child of :func:`_start`; its completed process, its RESULT line and its simulator report."""
    try:
        stdout, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert "Traceback" not in stderr, stderr
    return done, json.loads(lines[-1][len("RESULT "):]), json.loads(report.read_text())


@pytest.fixture(scope="module")
def _children(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.Popen, Path]]:
    """The three scenarios' child processes, started together (each imports torch and torch_npu: seconds)."""
    docs = f"README = {doc_block('README.md')!r}\nAPI = {doc_block('docs/api.md')!r}\n" + DOCS
    scripts = {"torch_npu_first": TORCH_NPU_FIRST, "torch_npu_imported": TORCH_NPU_IMPORTED,
               "package_first": PACKAGE_FIRST, "docs": docs}
    children = {name: _start(script, tmp_path_factory.mktemp(name)) for name, script in scripts.items()}
    yield children
    for proc, _ in children.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def torch_npu_first(_children):
    return _finish(*_children["torch_npu_first"])


@pytest.fixture(scope="module")
def torch_npu_imported(_children):
    return _finish(*_children["torch_npu_imported"])


@pytest.fixture(scope="module")
def package_first(_children):
    return _finish(*_children["package_first"])


def test_the_documents_torch_npu_blocks_run_as_written(_children) -> None:
    _, out, _ = _finish(*_children["docs"])
    said = re.search(r"# an NPU tensor: \[([0-9., ]+)\]", doc_block("README.md"))
    assert said, "README's torch_npu block no longer says its result"
    assert out["readme"] == {"device": "npu:0", "values": [float(v) for v in said.group(1).split(",")]}
    assert out["api"] == {"device": "npu:0", "host": "ndarray", "same": True}


def test_env_makes_torch_npu_see_the_simulator(torch_npu_first) -> None:
    _, out, _ = torch_npu_first
    assert out["available"] is True
    assert out["roundtrip"] is True
    assert out["stream"] == ["npu:0", True]


def test_interpolate_forward_and_backward_run_the_aclnn_operators(torch_npu_first) -> None:
    _, out, _ = torch_npu_first
    assert out["fwd_equal"] is True  # bit for bit against the package's reference
    assert out["fwd_calls"]["aclnnUpsampleNearestExact3d"] == 1
    assert out["fwd_calls"]["aclrtMemcpy"] == 0 and out["fwd_calls"]["aclrtMemcpyAsync"] == 0  # no CPU fallback
    assert out["bwd_calls"]["aclnnUpsampleNearestExact3dBackward"] == 1
    assert out["bwd_calls"]["aclrtMemcpy"] == 0 and out["bwd_calls"]["aclrtMemcpyAsync"] == 0
    assert out["bwd_maxdiff"] <= 1e-5 * max(1.0, out["bwd_scale"])


@pytest.mark.parametrize("dtype", ["torch.float32", "torch.float16", "torch.bfloat16"])
def test_cast_and_forward_on_the_device_in_each_dtype(torch_npu_first, dtype: str) -> None:
    """``.to(dtype)`` of an NPU tensor is op-plugin's aclnnInplaceCopy on the device (none for float32, already the
    dtype), equal bit for bit to torch's CPU cast; the forward then runs in that dtype on the device, equal bit for
    bit to the package's numpy reference (upsample3d_grad.reference)."""
    _, out, _ = torch_npu_first
    rec = out["sum"][dtype]
    cast = rec["cast_calls"]
    assert rec["cast_dtype"] == dtype
    assert cast["aclnnInplaceCopy"] == (0 if dtype == "torch.float32" else 1), cast
    assert cast["aclrtMemcpy"] == cast["aclrtMemcpyAsync"] == 0, cast  # on the device, not through the host
    assert rec["cast_equal"] is True
    fwd = rec["fwd_calls"]
    assert fwd["aclnnUpsampleNearestExact3d"] == 1 and fwd["aclnnInplaceCopy"] == 0, fwd
    assert fwd["aclrtMemcpy"] == fwd["aclrtMemcpyAsync"] == 0, fwd
    assert rec["fwd_bits_equal"] is True


@pytest.mark.parametrize("dtype", ["torch.float32", "torch.float16", "torch.bfloat16"])
def test_sum_backward_in_each_dtype(torch_npu_first, dtype: str) -> None:
    _, out, _ = torch_npu_first
    rec = out["sum"][dtype]
    assert rec["dtype"] == dtype
    assert rec["equal"] is True  # window counts: exact in every dtype
    calls = rec["calls"]
    for op in ("aclnnUpsampleNearestExact3d", "aclnnReduceSum", "aclnnInplaceFillScalar",
               "aclnnUpsampleNearestExact3dBackward"):
        assert calls[op] >= 1, (op, calls)
    assert calls["aclrtMemcpy"] == 0 and calls["aclrtMemcpyAsync"] == 0, calls


@pytest.mark.parametrize("dtype", ["torch.float32", "torch.float16", "torch.bfloat16", "torch.int64", "torch.bool"])
def test_zeros_on_the_device_in_each_dtype(torch_npu_first, dtype: str) -> None:
    _, out, _ = torch_npu_first
    rec = out["zeros"][dtype]
    calls = rec["calls"]
    assert calls["aclnnInplaceZero"] == 3, calls  # torch.zeros, zeros_like, zero_: each one aclnnInplaceZero
    assert calls["aclrtMemcpy"] == calls["aclrtMemcpyAsync"] == 0, calls
    assert rec["all_zero"] is True
    assert rec["dtypes"] == [dtype] * 3 and rec["devices"] == ["npu:0"] * 3


def test_arithmetic_on_the_device(torch_npu_first) -> None:
    _, out, _ = torch_npu_first
    assert out["arith_calls"] == {"aclnnMul": 1, "aclnnMuls": 1, "aclnnAdd": 2, "aclnnAdds": 1, "aclrtMemcpy": 0,
                                  "aclrtMemcpyAsync": 0}, out["arith_calls"]
    assert out["arith_equal"] == [True] * 4  # bit for bit torch's CPU result


PROMO_CALLS = {"int64_times_float": "aclnnMuls", "int32_plus_float": "aclnnAdds", "float32_times_int32": "aclnnMul",
               "float16_times_0dim_float32": "aclnnMul", "float16_plus_float32": "aclnnAdd",
               "float16_times_host_0dim_float32": "aclnnMuls", "bfloat16_times_float": "aclnnMuls"}


@pytest.mark.parametrize("case", sorted(PROMO_CALLS))
def test_mixed_dtypes_promote_as_torch_does(torch_npu_first, case: str) -> None:
    """CANN's promotion (mul_add.c): dtype and bits of torch's CPU result, through the aclnn operator."""
    _, out, _ = torch_npu_first
    rec = out["promo"][case]
    assert rec["calls"] == {PROMO_CALLS[case]: 1}, rec
    assert rec["dtype"][0] == rec["dtype"][1], rec
    assert rec["bits_equal"] is True, rec


def test_a_float16_tensor_times_a_scalar_rounds_the_scalar_to_float16(torch_npu_first) -> None:
    """aclnnMuls computes a float16 self in float16 on Atlas A2/A3: not torch's CPU result for 0.1."""
    _, out, _ = torch_npu_first
    assert out["promo_half_scalar"] == [True, False]


def test_package_torch_paths_are_zero_copy_on_the_current_stream(torch_npu_first) -> None:
    _, out, _ = torch_npu_first
    calls = out["pkg_calls"]
    assert calls["aclnnUpsampleNearestExact3d"] == 1 and calls["aclnnUpsampleNearestExact3dBackward"] == 1
    assert calls["aclrtMemcpy"] == calls["aclrtMemcpyAsync"] == calls["aclnnInplaceCopy"] == 0, calls
    assert calls["aclrtSynchronizeStream"] == 0, calls  # queued on the stream, not waited for
    assert out["pkg_devices"] == ["npu:0", "npu:0"]
    assert out["pkg_fwd_equal"] is True
    assert out["pkg_bwd_maxdiff"] <= 1e-4
    assert out["pkg_side_stream_sum"] == pytest.approx(out["pkg_side_stream_want"], rel=1e-5)


def test_the_npu_tiers_kernel_proof_passes_where_the_aclnn_kernels_ran(torch_npu_first) -> None:
    """tests/npu's proof (tests/_kernel_proof.py) finds no CPU computation where the counters show the kernels ran."""
    _, out, _ = torch_npu_first
    assert out["cpu_fallback_evidence"] == []
    calls = out["proof_calls"]
    assert calls["aclnnUpsampleNearestExact3d"] == 1 and calls["aclnnUpsampleNearestExact3dBackward"] == 1, calls


def test_torch_npu_first_exits_cleanly_torn_down_once(torch_npu_first) -> None:
    proc, out, report = torch_npu_first
    assert out["pkg_numpy_sum"] == 64.0
    assert report["aclInit"] == 2  # torch_npu's, then the package's (100002, a second reference)
    assert report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 1  # the package's, then torch_npu's
    assert report["initialized_at_exit"] is False
    assert report["references_torn_down_by_aclFinalize"] == 0
    assert report["used_after_torn_down_under_them"] == 0
    assert "cannsim:" not in proc.stderr, proc.stderr


def test_package_first_exits_cleanly(package_first) -> None:
    proc, out, report = package_first
    assert out["pkg_numpy_sum"] == 64.0
    assert out["fwd_equal"] is True and out["pkg_fwd_equal"] is True
    assert out["fwd_calls"]["aclnnUpsampleNearestExact3d"] == 1 and out["fwd_calls"]["aclrtMemcpy"] == 0
    # torch_npu's aclInit answered 100002, so by its own rule (npu_sys_ctrl.cpp) it never calls aclFinalize: the
    # package gives its reference back and torch_npu's stays held until the process ends
    assert report["aclInit"] == 2
    assert report["aclFinalize"] == 0 and report["aclFinalizeReference"] == 1
    assert report["initialized_at_exit"] is True and report["init_references_at_exit"] == 1
    assert report["used_after_torn_down_under_them"] == 0
    assert "cannsim:" not in proc.stderr, proc.stderr
    # torch_npu's config was lost: said once, with the fix
    assert len(out["warnings"]) == 1 and "import torch_npu before the first call" in out["warnings"][0], out


def test_with_torch_npu_imported_torch_npu_initialises_first(torch_npu_imported) -> None:
    proc, out, report = torch_npu_imported
    assert out["pkg_numpy_sum"] == 64.0
    assert out["inits"] == 2 and out["package_first"] is False  # torch_npu's aclInit, then ours (100002)
    assert out["npu_sum"] == 64.0
    assert report["aclFinalize"] == 1 and report["aclFinalizeReference"] == 1  # torch_npu owns the runtime
    assert report["used_after_torn_down_under_them"] == 0
    assert "cannsim:" not in proc.stderr, proc.stderr
