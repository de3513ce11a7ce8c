"""tests/npu, unchanged, against torch_npu-on-simulator: its opt-in ``UPSAMPLE3D_NPU_TIER_ON_SIM=1``.

One child process, started by a shell after ``eval "$(python -m acl_bindings.sim env)"``, runs
``python -m pytest tests/npu`` in that mode (the whole tier: a few seconds).  Every test must pass but those
tests/npu/conftest.py says need what the simulator does not model, each skipped with its own reason (not the
tier's blanket "needs --backend=npu"); the simulator's exit report shows how the runtime was torn down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: the tier's tests that cannot run on the simulator (tests/npu/conftest.py, NOT_ON_SIM)
NOT_ON_SIM = {"test_doctor_is_healthy", "test_smoke_cli_on_every_device"}
#: tests/npu's size today: 429 tests (test_npu_smoke.py 353, test_npu_forward.py 76)
PASSED = 427
BLANKET = "the npu tier needs --backend=npu"


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The child's run: ``proc``, ``cases`` (name, outcome, skip reason) from its JUnit XML, and its exit ``report``."""
    tmp = tmp_path_factory.mktemp("npu_tier")
    junit, report = tmp / "junit.xml", tmp / "report.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "CANN_SIM_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD",
                                                                     "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(UPSAMPLE3D_NPU_TIER_ON_SIM="1", CANN_SIM_REPORT=str(report))
    py = sys.executable
    cmd = (f'eval "$("{py}" -m acl_bindings.sim env)" && exec "{py}" -m pytest -q -p no:cacheprovider '
           f'--backend=sim --junitxml="{junit}" tests/npu')
    proc = subprocess.run(["bash", "-c", cmd], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, \
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-8000:]}\nstderr:\n{proc.stderr[-4000:]}"
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, reason = "passed", None
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, reason = child.tag, child.get("message")
        cases.append({"name": case.get("name"), "outcome": outcome, "reason": reason})
    return {"proc": proc, "cases": cases, "report": json.loads(report.read_text())}


def test_the_npu_tier_runs_on_torch_npu_on_the_simulator(tier: dict[str, Any]) -> None:
    cases = tier["cases"]
    outcomes = [c["outcome"] for c in cases]
    assert outcomes.count("failure") == outcomes.count("error") == 0, [c for c in cases if c["outcome"] != "passed"]
    assert outcomes.count("passed") == PASSED and len(cases) == PASSED + len(NOT_ON_SIM), (len(cases), outcomes)
    assert f"{PASSED} passed, {len(NOT_ON_SIM)} skipped" in tier["proc"].stdout


def test_each_skip_on_the_simulator_says_what_it_needs(tier: dict[str, Any]) -> None:
    skipped = {c["name"]: c["reason"] for c in tier["cases"] if c["outcome"] == "skipped"}
    assert set(skipped) == NOT_ON_SIM, skipped
    for name, reason in skipped.items():
        assert reason.startswith("not on the simulator: needs "), (name, reason)
        assert BLANKET not in reason, (name, reason)
    assert "real CANN" in skipped["test_doctor_is_healthy"] and "--require-npu" in skipped[
        "test_smoke_cli_on_every_device"]


def test_the_package_released_its_handles_and_the_runtime_went_once(tier: dict[str, Any]) -> None:
    """torch_npu initialised first, at collection; the package took a second reference (100002).  At the end the
    only live handles were torch_npu's own of its start; the package gave its reference back, then torch_npu's
    exit hook finalized the runtime, once, with no reference torn down under anyone."""
    proc, report = tier["proc"], tier["report"]
    assert "simulator accounting after the run: no live handle but another library's {" in proc.stdout
    assert "LEAK" not in proc.stdout
    assert report["aclInit"] == 2 and report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 1, report
    assert report["initialized_at_exit"] is False and report["references_torn_down_by_aclFinalize"] == 0
    assert report["used_after_torn_down_under_them"] == 0
    assert all(n == 0 for n in report["live"].values()), report["live"]
    assert report["calls"]["aclnnUpsampleNearestExact3dBackward"] > 0 and report["calls"]["aclnnUpsampleNearestExact3d"]
    assert "cannsim:" not in proc.stderr, proc.stderr[-4000:]
