"""Every example and every CLI command, run as a user would, in subprocesses on the simulator.

Each run gets ``ACL_BINDINGS_BACKEND=sim`` and a simulator report
(``CANN_SIM_REPORT``) where the leak accounting at exit is checked.
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

from upsample3d_grad.tools import _schema, smoke
from upsample3d_grad.tools.adjoint_cases import adjoint_matrix

REPO = Path(__file__).resolve().parents[2]
EXPECTED = ["36", "100", "164", "228"]


def run(args: list[str], tmp_path: Path, *, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the repository root on the simulator."""
    full = os.environ.copy()
    for var in ("CANN_SIM_FAULT", "CANN_SIM_DEFER", "CANN_SIM_DELAY_MS", "ACL_BINDINGS_LOG_CALLS"):
        full.pop(var, None)
    full.update({"ACL_BINDINGS_BACKEND": "sim", "CANN_SIM_DEVICE_COUNT": "2",
                 "CANN_SIM_REPORT": str(tmp_path / "sim_report.json"),
                 "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])})
    full.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=timeout)


def first_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.splitlines()[0] if proc.stdout else ""


def assert_no_leaks(tmp_path: Path) -> dict[str, Any]:
    report = json.loads((tmp_path / "sim_report.json").read_text())
    assert not any(report["live"].values()), report["live"]
    return report


# --------------------------------------------------------------------------- examples

def test_sample_port(tmp_path: Path) -> None:
    proc = run(["examples/sample_port.py"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "simulator" in first_line(proc)
    results = re.findall(r"^result\[(\d)\] = ([\d.]+)$", proc.stdout, re.M)
    assert [(int(i), float(v)) for i, v in results] == [(k, float(v)) for k, v in enumerate(EXPECTED)]
    report = assert_no_leaks(tmp_path)
    # everything was released by the script itself, before its own finalize (aclFinalizeReference)
    assert not any(report["released_by_finalize"].values()), report["released_by_finalize"]
    assert report["aclInit"] == 1 and report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 0
    assert report["calls"]["aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"] == 1
    assert report["calls"]["aclnnUpsampleNearestExact3dBackward"] == 1
    assert report["calls"]["aclDestroyIntArray"] == 2  # the C++ sample leaks these two


def test_sample_port_reports_a_wrong_result(tmp_path: Path) -> None:
    """The check is real: with the kernel faulted, the script fails instead of printing OK."""
    proc = run(["examples/sample_port.py"], tmp_path,
               env={"CANN_SIM_FAULT": "aclnnUpsampleNearestExact3dBackward:1:507015"})
    assert proc.returncode == 1
    assert "507015" in proc.stderr and "OK" not in proc.stdout
    assert_no_leaks(tmp_path)


@pytest.mark.parametrize("script", ["examples/session_api.py", "examples/timing_events.py"])
def test_examples_run(tmp_path: Path, script: str) -> None:
    proc = run([script], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "simulator" in first_line(proc)
    assert "FAIL" not in proc.stdout and "WRONG" not in proc.stdout
    assert_no_leaks(tmp_path)


# --------------------------------------------------------------------------- the CLI

def test_help(tmp_path: Path) -> None:
    proc = run(["-m", "upsample3d_grad", "--help"], tmp_path)
    assert proc.returncode == 0
    for command in ("doctor", "run", "smoke", "bench", "compare"):
        assert command in proc.stdout
    proc = run(["-m", "upsample3d_grad"], tmp_path)
    assert proc.returncode == 2 and "usage" in proc.stdout


def test_doctor(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    proc = run(["-m", "upsample3d_grad", "doctor", "--json", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert first_line(proc).startswith("upsample3d-grad doctor: backend sim")
    assert "CANN-Simulator - supported (simulated)" in text
    assert "CANN version:   8.5.0-cannsim" in text
    assert re.search(r"^devices:\s+2$", text, re.M)
    assert len(re.findall(r"^  device \d: .* GiB free of .* GiB$", text, re.M)) == 2
    assert "libopapi_cv.so [found via" in text
    assert "sample run:     ok" in text and "verdict:        healthy" in text
    data = json.loads(out.read_text())
    assert data["healthy"] and data["sample"]["result"] == [float(v) for v in EXPECTED]
    assert_no_leaks(tmp_path)


def test_doctor_unhealthy_when_the_sample_fails(tmp_path: Path) -> None:
    proc = run(["-m", "upsample3d_grad", "doctor"], tmp_path,
               env={"CANN_SIM_FAULT": "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize:1:561003"})
    assert proc.returncode == 1
    assert "NOT healthy" in proc.stdout and "561003" in proc.stdout


def test_doctor_without_cann_gives_the_fix(tmp_path: Path) -> None:
    if Path("/usr/local/Ascend").exists():
        pytest.skip("a CANN install exists on this machine")
    empty = tmp_path / "nothing"
    empty.mkdir()
    proc = run(["-m", "upsample3d_grad", "doctor"], tmp_path,
               env={"ACL_BINDINGS_BACKEND": "cann", "ASCEND_HOME_PATH": str(empty), "ASCEND_TOOLKIT_HOME": "",
                    "ACL_BINDINGS_LIB_DIR": "", "LD_LIBRARY_PATH": ""})
    assert proc.returncode == 3
    assert first_line(proc).startswith("upsample3d-grad doctor: backend cann - not available")
    assert "set_env.sh" in proc.stderr and "ACL_BINDINGS_BACKEND=sim" in proc.stderr
    assert str(empty) in proc.stderr  # says where it looked


def test_run(tmp_path: Path) -> None:
    proc = run(["-m", "upsample3d_grad", "run"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert first_line(proc).startswith("upsample3d-grad run: backend sim")
    assert re.findall(r"^result\[\d\] = (\d+)$", proc.stdout, re.M) == EXPECTED
    assert_no_leaks(tmp_path)


def _check_report(path: Path, devices: int, quick: bool) -> dict[str, Any]:
    data = json.loads(path.read_text())
    _schema.validate(data)
    per_device = len(smoke.build_matrix(quick)) + len(smoke.bad_cases()) + len(adjoint_matrix(quick))
    assert data["summary"] == {"total": per_device * devices, "passed": per_device * devices, "failed": 0,
                               "errors": 0, "skipped": 0, "ok": True}
    assert [d["id"] for d in data["devices"]] == list(range(devices))
    env = data["environment"]
    assert env["backend"] == "sim" and env["soc_name"] == "CANN-Simulator" and env["cann_version"]
    assert env["determinism"] == smoke.DETERMINISM_SIM
    assert {lib["role"] for lib in env["libraries"]} == {"runtime", "nnopbase", "opapi"}
    for case in data["cases"]:
        if case["kind"] == "compute":
            assert case["workspace_size"] is not None and case["time_ms"] is not None
            assert case["max_abs_err"] is not None
    return data


def test_smoke_quick_json(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    proc = run(["-m", "upsample3d_grad", "smoke", "--quick", "--json", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert first_line(proc).startswith("upsample3d-grad smoke: backend sim")
    total = len(smoke.build_matrix(True)) + len(smoke.bad_cases()) + len(adjoint_matrix(True))
    rows = re.findall(rf"^\[\s*(\d+)/{total}\] PASS ", proc.stdout, re.M)
    assert [int(r) for r in rows] == list(range(1, total + 1))  # one progress line per case, in order
    data = _check_report(out, 1, True)
    assert data["quick"] and data["plans"]
    assert_no_leaks(tmp_path)


def test_smoke_all_devices(tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    proc = run(["-m", "upsample3d_grad", "smoke", "--devices", "all", "--quick", "--no-plans", "--json", str(out)],
               tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert first_line(proc).startswith("upsample3d-grad smoke: backend sim")
    assert "[device 0] [  1/" in proc.stdout and "[device 1] [  1/" in proc.stdout
    data = _check_report(out, 2, True)
    assert not data["plans"]
    assert {c["device"] for c in data["cases"]} == {0, 1}


def test_smoke_full_matrix_is_fast(tmp_path: Path) -> None:
    out = tmp_path / "full.json"
    proc = run(["-m", "upsample3d_grad", "smoke", "--devices", "1", "--json", str(out)], tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    data = json.loads(out.read_text())
    _schema.validate(data)
    assert data["summary"]["ok"] and {c["device"] for c in data["cases"]} == {1}
    assert sum(c["time_ms"] for c in data["cases"]) < 20_000


def test_smoke_fails_on_a_failed_case(tmp_path: Path) -> None:
    out = tmp_path / "fail.json"
    proc = run(["-m", "upsample3d_grad", "smoke", "--quick", "--json", str(out)], tmp_path,
               env={"CANN_SIM_FAULT": "aclnnUpsampleNearestExact3dBackward:3:507015"})
    assert proc.returncode == 1
    data = json.loads(out.read_text())
    _schema.validate(data)
    bad = [c for c in data["cases"] if c["status"] != "pass"]
    assert len(bad) == 1 and bad[0]["status"] == "error" and bad[0]["got_code"] == 507015
    assert data["summary"]["ok"] is False and data["devices"][0]["status"] == "fail"
    assert re.search(r"^\[\s*3/\d+\] ERROR ", proc.stdout, re.M)


def test_smoke_require_npu_fails_on_the_simulator(tmp_path: Path) -> None:
    proc = run(["-m", "upsample3d_grad", "smoke", "--quick", "--require-npu"], tmp_path)
    assert proc.returncode == 2
    assert first_line(proc).startswith("upsample3d-grad smoke: backend sim")
    assert "--require-npu" in proc.stderr
    assert "[  1/" not in proc.stdout  # nothing ran


def test_smoke_rejects_a_missing_device(tmp_path: Path) -> None:
    proc = run(["-m", "upsample3d_grad", "smoke", "--devices", "5"], tmp_path)
    assert proc.returncode == 2 and "out of range" in proc.stderr


def test_bench(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = run(["-m", "upsample3d_grad", "bench", "--repeat", "3", "--warmup", "1", "--input-size", "1,2,4,6,8",
                "--json", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert first_line(proc).startswith("upsample3d-grad bench: backend sim")
    assert re.search(r"^device time \(events, 3 runs\): min [\d.]+ ms, median [\d.]+ ms$", proc.stdout, re.M)
    assert "GB/s" in proc.stdout and "host overhead per call" in proc.stdout
    data = json.loads(out.read_text())
    assert len(data["device_ms"]) == 3 and len(data["host_us"]) == 3
    assert data["grad_out_shape"] == [1, 2, 8, 12, 16] and data["scales"] == [2.0, 2.0, 2.0]
    moved = data["bytes_read"] + data["bytes_written"]
    assert moved == (1 * 2 * 8 * 12 * 16 + 1 * 2 * 4 * 6 * 8) * 4
    assert data["gbps_min_time"] == pytest.approx(moved / (data["device_ms_min"] * 1e-3) / 1e9)
    assert_no_leaks(tmp_path)


# --------------------------------------------------------------------------- stream order, as users run them

@pytest.mark.parametrize("args", [
    ["examples/sample_port.py"], ["examples/session_api.py"], ["examples/timing_events.py"],
    ["-m", "upsample3d_grad", "run"], ["-m", "upsample3d_grad", "doctor"],
    ["-m", "upsample3d_grad", "smoke", "--quick"],
    ["-m", "upsample3d_grad", "bench", "--repeat", "2", "--warmup", "1", "--input-size", "1,2,4,6,8"],
    ["benchmarks/run.py", "--tiny", "--no-torch", "--only", "b", "--out", "{tmp}"],
], ids=["sample_port", "session_api", "timing_events", "run", "doctor", "smoke", "bench", "benchmarks"])
@pytest.mark.parametrize("mode", ["CANN_SIM_DEFER", "CANN_SIM_SYNC"])
def test_examples_and_commands_in_every_stream_mode(tmp_path: Path, args: list[str], mode: str) -> None:
    """Every example and command also works when stream work runs only at a synchronisation (a read, free or
    overwrite that does not wait for it fails with 908401 there) and when it runs before each call returns."""
    proc = run([a.replace("{tmp}", str(tmp_path)) for a in args], tmp_path, env={mode: "1"}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "908401" not in proc.stdout + proc.stderr
    assert_no_leaks(tmp_path)
