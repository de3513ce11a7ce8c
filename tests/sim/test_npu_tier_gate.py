"""The NPU tier, run as a user runs it on a machine without an NPU (nested pytest, in a subprocess).

``--backend=npu`` asks for an NPU, so without one the run fails, with the reason; the
default run (the simulator) skips that tier, with the reason, and passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "ACL_BINDINGS_", "CANN_SIM_", "UPSAMPLE3D_")) and k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/npu", *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=str(REPO))


def test_backend_npu_without_an_npu_fails_with_the_reason() -> None:
    proc = _pytest("--backend=npu")
    assert proc.returncode == 1, proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert "error" in last and "passed" not in last and "skipped" not in last, last
    assert "npu tier: " in proc.stdout and "tests did not run: --backend=npu, but no real CANN device" in proc.stdout


def test_default_run_skips_the_npu_tier_with_the_reason() -> None:
    proc = _pytest()
    assert proc.returncode == 0, proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert "skipped" in last and "error" not in last and "failed" not in last, last
    assert "the npu tier needs --backend=npu (this run uses the CPU simulator)" in proc.stdout


def test_a_bad_device_variable_is_named() -> None:
    proc = _pytest(UPSAMPLE3D_GRAD_DEVICE="first")
    assert proc.returncode != 0
    assert "UPSAMPLE3D_GRAD_DEVICE must be a device id (an integer >= 0), got 'first'" in proc.stdout + proc.stderr
