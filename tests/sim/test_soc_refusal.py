"""Issue 37: a SoC without the operator's kernels is refused as CANN refuses it (cann-abi.md §11).

nnopbase maps the SoC name to a kernel directory (hicann/opbase ``op_kernel_lib.cpp`` socOpMap); the operator has
kernels in the directories of its ``*_def.cpp`` AddConfig lines (hicann/ops-cv).  Elsewhere the L0 ignores the failed
lookup, so phase 1 succeeds (no tiling ran) and phase 2 fails with 561000; the lookup's error stays in the
thread's messages.  One table says all this for the simulator's C and the package (``acl_bindings/sim/src/socs.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import acl_bindings as ab
from acl_bindings import socs
from tests.sim.test_examples_cli import run
from upsample3d_grad import Session, reference

#: one name of each family without the backward's kernels, and a name outside nnopbase's table
UNSUPPORTED = ["Ascend310P3", "Ascend310B1", "Ascend910ProA", "Ascend910B", "NotASocName"]
SUPPORTED = ["Ascend910B3", "Ascend910_9391", "Ascend950PR_9579", ""]  # "": the simulator's own name


@pytest.mark.parametrize("soc", UNSUPPORTED + SUPPORTED)
def test_raw_the_backward_runs_only_where_it_has_a_kernel(raw, soc: str) -> None:
    raw("""
        import os
        soc = os.environ.get("CANN_SIM_SOC") or "CANN-Simulator"
        assert rt.aclrtGetSocName().decode() == soc
        init(0)
        s = stream()
        smp = Sample(np)
        assert err() is None
        rc, ws, ex = phase1(smp.go, smp.osz, smp.isz, smp.gi)
        ok(rc)                                             # the L0 ignores a failed kernel lookup
        if soc in SUPPORTED:
            assert err() is None, err()
            w = malloc(ws)
            ok(phase2(w, ws, ex, s))
            ok(rt.aclrtSynchronizeStream(s))
            assert smp.result() == [36.0, 100.0, 164.0, 228.0]
            ok(rt.aclrtFree(w))
        else:
            assert ws == 0, ws                             # no tiling ran: no kernel workspace
            rc = phase2(None, 0, ex, s)
            msg = err()
            assert rc == 561000, (rc, msg)
            # every message since the last read, oldest first: phase 1's failed lookup, then phase 2's refusal
            first, second = msg.split("\\n")
            assert first.startswith("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize: the kernel lookup of "
                                    "UpsampleNearestExact3dGrad failed for SoC " + soc), msg
            assert second.startswith("aclnnUpsampleNearestExact3dBackward: UpsampleNearestExact3dGrad has no "
                                     "kernel binary for SoC " + soc), msg
            assert ("not in nnopbase's SoC table" in second) == (soc == "NotASocName"), msg
            ok(rt.aclrtSynchronizeStream(s))
            assert smp.result() == [0.0, 0.0, 0.0, 0.0]    # nothing was written
            assert live("executor") == 0                   # the failed run consumed it
        smp.release()
        ok(rt.aclrtDestroyStream(s))
    """.replace("SUPPORTED", repr([s or "CANN-Simulator" for s in SUPPORTED])), env={"CANN_SIM_SOC": soc})


def test_raw_a_float16_call_without_a_kernel_still_plans_the_casts(raw) -> None:
    """On Atlas 310P the Casts around the kernel have kernels: their float32 tensors are in phase 1's workspace,
    the missing kernel's tiling ask is not (it never ran)."""
    raw("""
        init(0)
        smp = Sample(np, FLOAT16, np.float16)
        rc, ws, ex = phase1(smp.go, smp.osz, smp.isz, smp.gi)
        ok(rc)
        assert 0 < ws < (1 << 20), ws                      # the Cast outputs, not the tiling's 16 MiB
        ok(nn.aclDestroyAclOpExecutor(ex))
        smp.release()
    """, env={"CANN_SIM_SOC": "Ascend310P3"})


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend310B1", "Ascend910ProB", "Ascend910B2"])
def test_binding_backward_and_forward_follow_the_kernel_table(no_leaks, monkeypatch, soc: str) -> None:
    """Through the binding: 561000 naming the SoC where the table has no kernel; the forward has the 310P's."""
    monkeypatch.setenv("CANN_SIM_SOC", soc)
    go = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    folder = socs.kernel_dir(soc)
    with Session(0) as s:
        if folder in socs.operator_kernel_dirs("UpsampleNearestExact3dGrad"):
            np.testing.assert_array_equal(s.backward(go, (2, 2, 2), (2, 2, 1, 1, 1)),
                                          reference.upsample_nearest_exact3d_backward(go, (2, 2, 2), (2, 2, 1, 1, 1)))
        else:
            with pytest.raises(ab.AclError) as info:
                s.backward(go, (2, 2, 2), (2, 2, 1, 1, 1))
            assert info.value.code == 561000
            detail = info.value.detail.splitlines()
            assert "kernel lookup of UpsampleNearestExact3dGrad failed for SoC " + soc in detail[0], detail
            assert "no kernel binary for SoC " + soc in detail[-1] and f"{folder}/" in detail[-1], detail
        if folder in socs.operator_kernel_dirs("UpsampleNearestExact3d", simulator=True):
            assert s.forward(x, (3, 3, 3)).shape == (1, 1, 3, 3, 3)
        else:
            with pytest.raises(ab.AclError, match="UpsampleNearestExact3d has no kernel binary for SoC " + soc) as e:
                s.forward(x, (3, 3, 3))
            assert e.value.code == 561000


@pytest.mark.parametrize("soc, why", [
    ("Ascend310P3", "Atlas 310P (kernel directory ascend310p/)"),
    ("Ascend310B4", "Atlas 310B (kernel directory ascend310b/)"),
    ("Ascend910PremiumA", "the legacy Ascend910 training series (kernel directory ascend910/)"),
    ("Ascend910B1", None),
])
def test_doctor_says_what_the_sample_run_shows(tmp_path: Path, soc: str, why: str | None) -> None:
    proc = run(["-m", "upsample3d_grad", "doctor", "--json", str(tmp_path / "d.json")], tmp_path,
               env={"CANN_SIM_SOC": soc})
    lines = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in proc.stdout.splitlines() if ":" in ln}
    report = json.loads((tmp_path / "d.json").read_text())
    env = report["environment"]
    assert env["backend"] == "sim" and env["soc_name"] == soc
    if why is None:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert lines["SoC"] == f"{soc} - supported (simulated): Atlas A2 ({soc}, ascend910b/)", lines["SoC"]
        assert lines["sample run"].startswith("ok") and lines["verdict"] == "healthy"
        assert env["soc_supported"] is True and report["healthy"] is True
        return
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["SoC"].startswith(f"{soc} - not supported (simulated): {soc} is {why}, for which "
                                   "UpsampleNearestExact3dGrad has no kernel"), lines["SoC"]
    assert "phase 2 fails with 561000" in lines["SoC"]
    assert lines["sample run"].startswith("FAILED") and "(561000)" in lines["sample run"]
    assert "no kernel binary for SoC " + soc in lines["sample run"]
    assert lines["verdict"] == "NOT healthy"
    assert env["soc_supported"] is False and report["healthy"] is False and report["sample"]["ok"] is False
    assert any(p.startswith(f"the SoC {soc} is not supported by the operator") for p in report["problems"])
