"""An operator is one file in the simulator's ``src/ops/``: the build picks it up and its entry points are
exported, counted and fault-injectable, with no other source file edited."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[2] / "acl_bindings" / "sim"


def _find_compiler() -> str | None:
    spec = importlib.util.spec_from_file_location("_sim_build_for_registry", SIM / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_compiler()

ECHO_OP = """\
/* A test operator: phase 1 echoes its argument, phase 2 adds one. */
#include "opapi.h"

CANNSIM_REGISTER_OP("aclnnCannsimEchoGetWorkspaceSize", "aclnnCannsimEcho")

CANNSIM_API aclnnStatus aclnnCannsimEchoGetWorkspaceSize(int64_t x, int64_t *y) {
    int rc = cannsim_enter("aclnnCannsimEchoGetWorkspaceSize");
    if (rc) return rc;
    if (!y) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnCannsimEchoGetWorkspaceSize: y is NULL");
    *y = x;
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclnnCannsimEcho(int64_t *v) {
    int rc = cannsim_enter("aclnnCannsimEcho");
    if (rc) return rc;
    *v += 1;
    return ACLNN_SUCCESS;
}
"""

PROBE = """\
import ctypes as C, json, sys
lib64 = sys.argv[1]
rt = C.CDLL(lib64 + "/libascendcl.so")
rt.cannsimCallCount.restype = C.c_int64
rt.cannsimCallCount.argtypes = [C.c_char_p]
before_load = rt.cannsimCallCount(b"aclnnCannsimEcho")  # known before the operator library is loaded
C.CDLL(lib64 + "/libnnopbase.so")
op = C.CDLL(lib64 + "/libopapi_cv.so")
rt.cannsimSetFault.argtypes = [C.c_char_p]
rt.aclGetRecentErrMsg.restype = C.c_char_p
op.aclnnCannsimEchoGetWorkspaceSize.argtypes = [C.c_int64, C.POINTER(C.c_int64)]
op.aclnnCannsimEcho.argtypes = [C.POINTER(C.c_int64)]
out = {"rc1": [], "rc2": [], "msgs": [], "before_load": before_load}
y = C.c_int64(0)
for i in range(3):
    out["rc1"].append(op.aclnnCannsimEchoGetWorkspaceSize(40 + i, C.byref(y)))
    out["rc2"].append(op.aclnnCannsimEcho(C.byref(y)))
    out["msgs"].append((rt.aclGetRecentErrMsg() or b"").decode())
out["y"] = y.value
out["counts"] = [rt.cannsimCallCount(b"aclnnCannsimEchoGetWorkspaceSize"), rt.cannsimCallCount(b"aclnnCannsimEcho")]
if "--set-fault" in sys.argv:
    out["set_fault"] = rt.cannsimSetFault(b"aclnnCannsimEchoGetWorkspaceSize:1:161002")
    out["after_set"] = op.aclnnCannsimEchoGetWorkspaceSize(7, C.byref(y))
    out["bad_set"] = rt.cannsimSetFault(b"aclnnCannsimNoSuchOp:1:161002")
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def echo_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the simulator's build script and sources with one operator file added, built."""
    if _find_compiler() is None:
        pytest.skip("no C compiler (cc/gcc/clang) to build the simulator")
    root = tmp_path_factory.mktemp("registry") / "sim"
    root.mkdir()
    shutil.copy2(SIM / "build.py", root / "build.py")
    shutil.copytree(SIM / "src", root / "src")
    (root / "src" / "ops" / "cannsim_echo.c").write_text(ECHO_OP)
    proc = subprocess.run([sys.executable, str(root / "build.py"), "--root", str(root), "--force"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_only_the_operator_file_was_added(echo_tree: Path) -> None:
    def files(base: Path) -> dict[str, bytes]:
        return {str(p.relative_to(base / "src")): p.read_bytes() for p in (base / "src").rglob("*") if p.is_file()}

    original, copy = files(SIM), files(echo_tree)
    assert set(copy) - set(original) == {"ops/cannsim_echo.c"}
    assert {k: v for k, v in copy.items() if k in original} == original
    commands = json.loads((echo_tree / "lib64" / "BUILD_INFO.json").read_text())["commands"]
    op_command = next(c for c in commands if c[c.index("-o") + 1].endswith("libopapi_cv.so"))
    assert str(echo_tree / "src" / "ops" / "cannsim_echo.c") in op_command


def _probe(tree: Path, tmp_path: Path, env_extra: dict[str, str], *args: str) -> tuple[dict, str, dict]:
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    env.update(env_extra, CANN_SIM_REPORT=str(report))
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tree / "lib64"), *args], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout), proc.stderr, json.loads(report.read_text())


def test_new_operator_is_exported_and_counted(echo_tree: Path, tmp_path: Path) -> None:
    out, stderr, report = _probe(echo_tree, tmp_path, {}, "--set-fault")
    assert out["rc1"] == [0, 0, 0] and out["rc2"] == [0, 0, 0]
    assert out["y"] == 43
    assert out["before_load"] == 0
    assert out["counts"] == [3, 3]
    assert report["calls"]["aclnnCannsimEchoGetWorkspaceSize"] == 4
    assert report["calls"]["aclnnCannsimEcho"] == 3
    assert report["calls"]["aclnnUpsampleNearestExact3dBackward"] == 0  # the other operators are still there
    # the API sets a fault on the new name, and refuses a name nobody registered
    assert out["set_fault"] == 0 and out["after_set"] == 161002
    assert out["bad_set"] == 100000
    assert stderr == ""


def test_new_operator_faults_from_the_environment(echo_tree: Path, tmp_path: Path) -> None:
    # CANN_SIM_FAULT is read when the runtime loads, before the operator library is loaded
    out, stderr, _ = _probe(echo_tree, tmp_path, {"CANN_SIM_FAULT": "aclnnCannsimEcho:2:507015"})
    assert out["rc1"] == [0, 0, 0]
    assert out["rc2"] == [0, 507015, 0]
    assert "aclnnCannsimEcho: injected fault (code 507015) by CANN_SIM_FAULT" in out["msgs"][1]
    assert out["counts"] == [3, 3]
    assert stderr == ""


def test_fault_on_a_name_nothing_declares_is_refused(echo_tree: Path, tmp_path: Path) -> None:
    out, stderr, _ = _probe(echo_tree, tmp_path, {"CANN_SIM_FAULT": "aclnnCannsimEcho:1:507015,aclnnNoSuchOp:1:5"})
    assert out["rc2"] == [0, 0, 0]  # a malformed spec is ignored as a whole
    assert "ignoring malformed CANN_SIM_FAULT" in stderr and "'aclnnNoSuchOp' is not a function exported" in stderr


def test_the_shipped_tree_has_no_test_operator() -> None:
    assert not (SIM / "src" / "ops" / "cannsim_echo.c").exists()
    text = "\n".join(p.read_text() for p in (SIM / "src").glob("*.[ch]"))
    for name in ("UpsampleNearest", "us3d_"):  # generic code names no operator
        assert name not in text, name
