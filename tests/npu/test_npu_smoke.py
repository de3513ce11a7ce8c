"""The smoke matrix on a real NPU, the CLI there, and torch_npu interop.

* Every compute case of :func:`upsample3d_grad.tools.smoke.build_matrix` against the numpy
  reference, through a Session with executor reuse (plans) and without it.
* Every bad-input case CANN checks, through the faithful phase 1: CANN's own code.
* ``upsample3d-grad doctor`` / ``smoke --devices all --require-npu`` / the sample port.
* With torch_npu: our result against torch_npu's own ``_upsample_nearest_exact3d_backward``
  on the same data, and :func:`upsample3d_grad.functional.backward_torch` on NPU
  tensors (in place, strided, on a side stream, into ``out``).

Skipped with the reason on the simulator; failed with the reason under --backend=npu without a
real NPU (see conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from upsample3d_grad import Session, reference
from upsample3d_grad._env import default_device
from upsample3d_grad.functional import backward_torch
from upsample3d_grad.tools import _schema, smoke
from upsample3d_grad.torch_interop import numpy_to_tensor, tensor_to_numpy

DEVICE = default_device()  # as tests/npu/conftest.py

pytestmark = pytest.mark.npu

CASES = smoke.build_matrix(quick=False)
BAD = smoke.bad_cases()


@pytest.fixture(scope="module")
def sessions(npu_backend: Any) -> Any:
    """A session with executor reuse (plans) and one without, on :data:`DEVICE`."""
    with Session(DEVICE) as with_plans, Session(DEVICE, plans=False) as one_shot:
        yield {"plans": with_plans, "one-shot": one_shot}


def _explain(entry: dict[str, Any]) -> str:
    return (f"{entry['name']}: {entry['status']} {entry['message']} (max abs {entry['max_abs_err']}, "
            f"max rel {entry['max_rel_err']}, tolerance {entry['tolerance']})")


# --------------------------------------------------------------------------- the matrix

def _check_path(session: Session, mode: str, record_property: Any) -> str:
    """Report which path the latest call took, and assert it is the one this mode and CANN's answer imply.

    With plans, CANN may refuse a repeatable executor (cann-abi.md §8.6: not confirmed for this operator);
    the call then runs one-shot and the refusal's text is reported.
    """
    path = session.last_path
    record_property("path", path)
    refusal = session.plans.last_refusal
    if mode == "one-shot":
        assert path == "one-shot", path
    elif path != "plan":
        assert path == "one-shot" and refusal, (path, refusal)
        record_property("plan_refused", refusal)
    print(f"path: {path}" + (f" (plan refused: {refusal})" if path != "plan" and refusal else ""))
    return path


@pytest.mark.parametrize("mode", ["plans", "one-shot"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_compute_case(sessions: Any, case: smoke.SmokeCase, mode: str, record_property: Any) -> None:
    session = sessions[mode]
    calls = session.calls
    entry = smoke.run_compute_case(session, case)
    assert entry["status"] == "pass", _explain(entry)
    assert session.calls > calls
    _check_path(session, mode, record_property)


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.label)
def test_bad_input_gives_cann_code(sessions: Any, soc: str, case: Any) -> None:
    entry = smoke.run_bad_case(sessions["plans"], case, soc)
    if entry["status"] == "skip":
        pytest.skip(entry["message"])
    assert entry["status"] == "pass", _explain(entry)


@pytest.mark.parametrize("name", ["ut-scales-fp32-NCDHW-contig", "nonint-sizes-bf16-NDHWC-permuted",
                                  "down-scales-fp16-NCDHW-sliced"])
def test_plan_reuse_with_new_data(sessions: Any, name: str, record_property: Any) -> None:
    """The repeatable-executor path: same shapes, new buffers and values each call."""
    case = next(c for c in CASES if c.name == name)
    s = sessions["plans"]
    window = smoke.window_size(case)
    rng = np.random.default_rng(11)
    for _ in range(3):
        g = smoke.make_grad_output(case)
        g = (g.astype(np.float32) * rng.uniform(0.5, 2.0)).astype(case.np_dtype)
        got = s.backward(g, case.output_size, case.input_size, *case.scale_args, layout=case.layout)
        want = reference.upsample_nearest_exact3d_backward(g, case.output_size, case.input_size, *case.scale_args,
                                                           layout=case.layout)
        assert smoke.compare(got, want, case.dtype, window)[2]
        _check_path(s, "plans", record_property)


def test_mixed_scales_above_the_tiling_limit_fail_at_launch_on_a2_a3(sessions: Any, soc: str) -> None:
    """scalesD = 10 alone, outputSize/inputSize = 60 in D: phase 1 passes (it checks the given scale), the kernel
    gets 60, and the Atlas A2/A3 tiling refuses it when phase 2 launches (561103); the 950's tiling has no such
    check, so there the call runs (cann-abi.md §5.2).  The simulator models the A2/A3 answer."""
    import warnings

    from acl_bindings import AclError

    g = np.ones((1, 1, 60, 2, 2), np.float32)
    for s in sessions.values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the mixed-scales warning)
            if soc.startswith("Ascend950"):
                got = s.backward(g, (60, 2, 2), (1, 1, 1, 2, 2), 10.0, None, None, strict=False)
                assert got.ravel().tolist() == [60.0] * 4
            else:
                with pytest.raises(AclError) as info:
                    s.backward(g, (60, 2, 2), (1, 1, 1, 2, 2), 10.0, None, None, strict=False)
                assert info.value.code == 561103 and "aclnnUpsampleNearestExact3dBackward" in str(info.value)


def test_repeat_is_bit_identical(sessions: Any) -> None:
    """CANN documents this operator as deterministic by default (cann-abi.md §5.5)."""
    for case in CASES[1:4]:
        assert smoke.repeat_identical(sessions["one-shot"], case) is True, case.name


# --------------------------------------------------------------------------- the CLI and the sample on the NPU

def test_doctor_is_healthy(npu_backend: Any, run_cli: Any) -> None:
    proc = run_cli(["-m", "upsample3d_grad", "doctor", "--device", str(DEVICE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("upsample3d-grad doctor: backend cann - real CANN")
    assert "supported:" in proc.stdout and "verdict:        healthy" in proc.stdout


def test_smoke_cli_on_every_device(npu_backend: Any, run_cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    proc = run_cli(["-m", "upsample3d_grad", "smoke", "--devices", "all", "--quick", "--require-npu",
                    "--json", str(out)])
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr
    data = json.loads(out.read_text())
    _schema.validate(data)
    env = data["environment"]
    assert env["backend"] == "cann" and env["soc_supported"] is True
    assert env["determinism"] == smoke.DETERMINISM_CANN
    assert len(data["devices"]) == env["device_count"] and data["summary"]["ok"]


def test_sample_port_example(npu_backend: Any, run_cli: Any) -> None:
    proc = run_cli(["examples/sample_port.py"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result[3] = 228.000000" in proc.stdout


# --------------------------------------------------------------------------- torch_npu

@pytest.fixture(scope="module")
def torch(torch_on_npu: Any) -> Any:
    return torch_on_npu


def test_torch_npu_runs_the_aclnn_kernels_on_the_npu(torch_npu_mod: Any, npu_backend: Any, soc: str) -> None:
    """At a tie torch_npu's result is the NPU kernels' law, not torch's CPU one: op-plugin's CPU fallback did not
    run (tests/_kernel_proof.py), so the comparisons with torch_npu below are between two NPU runs."""
    if torch_npu_mod is None:
        pytest.skip("torch_npu is not installed")
    import torch as torch_module

    from tests._kernel_proof import cpu_fallback_evidence
    from upsample3d_grad.reference.forward import soc_family

    assert cpu_fallback_evidence(torch_module, f"npu:{DEVICE}", soc_family(soc)) == []


def _npu(torch: Any, a: np.ndarray) -> Any:
    return numpy_to_tensor(np.ascontiguousarray(a)).to(f"npu:{DEVICE}")


TORCH_CASES = [c for c in CASES if c.layout == "NCDHW" and c.ratio != "empty"]


@pytest.mark.parametrize("case", TORCH_CASES, ids=lambda c: c.name)
def test_matches_torch_npu(sessions: Any, torch: Any, case: smoke.SmokeCase) -> None:
    """Our call and torch_npu's aten op run the same aclnn operator on the same data."""
    g = smoke.make_grad_output(case)
    ours = sessions["plans"].backward(g, case.output_size, case.input_size, *case.scale_args)
    theirs = torch.ops.aten._upsample_nearest_exact3d_backward(
        _npu(torch, g), list(case.output_size), list(case.input_size), *case.scale_args)
    theirs_np = tensor_to_numpy(theirs.cpu())
    max_abs, max_rel, ok = smoke.compare(ours, theirs_np, case.dtype, smoke.window_size(case))
    assert ok, f"max abs {max_abs}, max rel {max_rel}"


@pytest.mark.parametrize("tdtype", ["float32", "float16", "bfloat16"])
def test_backward_torch_on_npu_tensors_in_place(torch: Any, tdtype: str) -> None:
    dev = torch.device(f"npu:{DEVICE}")
    dt = getattr(torch, tdtype)
    big = torch.randn(3, 3, 6, 8, 20, generator=torch.Generator().manual_seed(5)).to(dt).to(dev)
    g = big[1:, :, :, :, ::2]  # storage offset and a stride of 2: no copy is made of it
    assert g.storage_offset() > 0 and not g.is_contiguous()
    out = torch.empty((2, 3, 3, 4, 5), dtype=dt, device=dev)
    address = out.data_ptr()
    res = backward_torch(g, (6, 8, 10), (2, 3, 3, 4, 5), out=out)
    assert res is out and res.data_ptr() == address and res.device == dev
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g.cpu()), (6, 8, 10), (2, 3, 3, 4, 5))
    assert smoke.compare(tensor_to_numpy(res.cpu()), want, tdtype, 8)[2]


def test_backward_torch_on_npu_allocates_and_returns_numpy(torch: Any) -> None:
    dev = torch.device(f"npu:{DEVICE}")
    g = torch.randn(2, 4, 8, 12, 3, generator=torch.Generator().manual_seed(6)).to(dev)  # NDHWC
    res = backward_torch(g, (4, 8, 12), (2, 3, 2, 4, 8), 2.0, 2.0, 1.5, layout="NDHWC")
    assert res.device == dev and tuple(res.shape) == (2, 2, 4, 8, 3)
    as_numpy = backward_torch(g, (4, 8, 12), (2, 3, 2, 4, 8), 2.0, 2.0, 1.5, layout="NDHWC", return_type="numpy")
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g.cpu()), (4, 8, 12), (2, 3, 2, 4, 8),
                                                       2.0, 2.0, 1.5, layout="NDHWC")
    window = 2 * 2 * 2
    assert smoke.compare(tensor_to_numpy(res.cpu()), want, "float32", window)[2]
    assert isinstance(as_numpy, np.ndarray) and smoke.compare(as_numpy, want, "float32", window)[2]


def test_backward_torch_runs_on_the_current_stream(torch: Any) -> None:
    """Work queued by torch on a side stream is done before our kernel reads its output."""
    dev = torch.device(f"npu:{DEVICE}")
    g = torch.randn(4, 16, 32, 64, 64, generator=torch.Generator().manual_seed(7)).to(dev)
    side = torch.npu.Stream(dev)
    side.wait_stream(torch.npu.current_stream(dev))
    with torch.npu.stream(side):
        x = g * 3.0 + 1.0  # queued on the side stream (through torch_npu's task queue)
        res = backward_torch(x, (32, 64, 64), (4, 16, 16, 32, 32), 2.0, 2.0, 2.0)
    side.synchronize()
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g.cpu() * 3.0 + 1.0), (32, 64, 64),
                                                       (4, 16, 16, 32, 32), 2.0, 2.0, 2.0)
    assert smoke.compare(tensor_to_numpy(res.cpu()), want, "float32", 8)[2]


def test_backward_torch_matches_torch_npu(torch: Any) -> None:
    dev = torch.device(f"npu:{DEVICE}")
    g = torch.randn(2, 3, 7, 11, 10, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16).to(dev)
    ours = backward_torch(g, (7, 11, 10), (2, 3, 3, 5, 7))
    theirs = torch.ops.aten._upsample_nearest_exact3d_backward(g, [7, 11, 10], [2, 3, 3, 5, 7])
    assert smoke.compare(tensor_to_numpy(ours.cpu()), tensor_to_numpy(theirs.cpu()), "bfloat16", 12)[2]
