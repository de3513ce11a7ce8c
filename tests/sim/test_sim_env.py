"""``python -m acl_bindings.sim env``: the export lines that point torch_npu at the simulator (tests/torch_npu
runs torch_npu under them)."""

from __future__ import annotations

import subprocess
import sys

from acl_bindings import sim


def _env(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acl_bindings.sim", "env", *args], capture_output=True, text=True,
                          timeout=60)


def test_env_prints_the_cann_layout_of_the_simulator() -> None:
    proc = _env()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [
        f"export ASCEND_HOME_PATH={sim.ROOT}",
        f"export ASCEND_OPP_PATH={sim.ROOT / 'opp'}",
        f"export LD_LIBRARY_PATH={sim.LIB64}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
        "export CANN_SIM_SOC=Ascend910B1",
    ]
    for folder in ("runtime", "compiler", "opp"):  # torch_npu's _cann_package_check wants them
        assert (sim.ROOT / folder).is_dir()
    for stub in ("hccl", "ge_runner", "graph", "acl_tdt_channel", "atb", "acl_op_compiler"):
        assert (sim.LIB64 / f"lib{stub}.so").is_file()


def test_env_names_a_bad_soc() -> None:
    proc = _env("--soc", "")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "--soc" in proc.stderr and "''" in proc.stderr
    proc = _env("--soc", "Ascend950PR_9579")
    assert proc.returncode == 0 and "export CANN_SIM_SOC=Ascend950PR_9579" in proc.stdout
