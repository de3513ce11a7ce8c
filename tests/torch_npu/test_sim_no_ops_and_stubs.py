"""What the simulator gives torch_npu only so that it loads and starts: the documented no-ops of src/rt_torch_npu.c
and the STUB libraries (src/stubs/stub_library.c, ``build.STUB_LIBRARIES``), called raw through ctypes in a child
process (docs/fidelity.md, "torch_npu on the simulator").  The functions the simulator models for torch_npu are
tests/sim/test_torch_npu_runtime.py; torch_npu's own use of all of them is test_torch_npu_on_sim.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from acl_bindings import sim
from acl_bindings.sim.build import STUB_LIBRARIES

#: What libacl_op_compiler exports besides its cannsimStub_ function: the aclop entry points torch_npu looks up
#: (PTA AclOpCompileInterface.cpp TORCH_NPU_LOAD_FUNC lines) and aclopCompileAndExecute (OpParamMaker.cpp).
OP_COMPILER_ENTRIES = ("aclSetCompileopt", "aclGetCompileoptSize", "aclGetCompileopt", "aclGenGraphAndDumpForOp",
                       "aclCreateGraphDumpOpt", "aclDestroyGraphDumpOpt", "aclopCompileAndExecuteV2",
                       "aclopCompileAndExecute")

RAW = r"""
import ctypes as C, json, os, sys, time
lib = sys.argv[1]
rt = C.CDLL(lib + "/libascendcl.so")
rt.aclGetRecentErrMsg.restype = C.c_char_p
def msg():
    m = rt.aclGetRecentErrMsg()
    return m.decode() if m else ""
out = {}

# aclAppLog: printed on stderr only with ASCEND_SLOG_PRINT_TO_STDOUT=1
rt.aclAppLog.restype = None
def app_log(level, text):
    rt.aclAppLog(C.c_int(level), b"fn", b"file.c", C.c_uint32(12), b"%s=%d", text, C.c_int(7))
    sys.stderr.flush()
app_log(1, b"unset")
os.environ["ASCEND_SLOG_PRINT_TO_STDOUT"] = "1"
app_log(3, b"printed")
os.environ["ASCEND_SLOG_PRINT_TO_STDOUT"] = "0"
app_log(2, b"zero")

# Msprof*: 0, nothing profiled; the hash id a string hash, the cycle time the monotonic clock in ns
for name in ("MsprofRegisterCallback", "MsprofReportApi", "MsprofReportCompactInfo", "MsprofReportAdditionalInfo"):
    getattr(rt, name).restype = C.c_int32
out["msprof"] = [rt.MsprofRegisterCallback(C.c_uint32(1), None), rt.MsprofReportApi(C.c_uint32(0), None),
                 rt.MsprofReportCompactInfo(C.c_uint32(0), None, C.c_uint32(0)),
                 rt.MsprofReportAdditionalInfo(C.c_uint32(0), None, C.c_uint32(0))]
rt.MsprofGetHashId.restype = C.c_uint64
rt.MsprofGetHashId.argtypes = [C.c_char_p, C.c_size_t]
out["hash"] = [rt.MsprofGetHashId(b"aclnnAdd", 8), rt.MsprofGetHashId(b"aclnnAdd", 8),
               rt.MsprofGetHashId(b"aclnnAdd", 5), rt.MsprofGetHashId(b"aclnnAde", 8)]
rt.MsprofSysCycleTime.restype = C.c_uint64
t0, m0 = rt.MsprofSysCycleTime(), time.monotonic_ns()
time.sleep(0.02)
t1, m1 = rt.MsprofSysCycleTime(), time.monotonic_ns()
out["cycle"] = [t0, m0, t1, m1]

# the aclop descriptor functions that are no-ops (the others answer 207000: tests/sim/test_torch_npu_runtime.py)
rt.aclDestroyTensorDesc.restype = rt.aclSetTensorDescName.restype = rt.aclopDestroyAttr.restype = None
rt.aclDestroyTensorDesc(None); rt.aclSetTensorDescName(None, b"x"); rt.aclopDestroyAttr(None)
rt.aclGetTensorDescNumDims.restype = C.c_size_t
out["desc"] = [rt.aclGetTensorDescNumDims(None), rt.aclGetTensorDescType(None), rt.aclGetTensorDescFormat(None)]

# rt* (torch_npu's inductor MLIR path): not supported
out["rt"] = []
for name, args in (("rtDevBinaryRegister", (None, None)), ("rtFunctionRegister", (None, None, None, None, 0)),
                   ("rtKernelLaunch", (None, 1, None, 0, None, None)), ("rtGetC2cCtrlAddr", (None, None))):
    f = getattr(rt, name)
    f.restype = C.c_int32
    out["rt"].append([f(*args), msg()])

# the stub libraries: each says what it is; only libacl_op_compiler reaches the runtime, through its dependency
out["stubs"] = {}
for name in sys.argv[2].split(","):
    d = C.CDLL(f"{lib}/lib{name}.so")
    who = getattr(d, "cannsimStub_" + name)
    who.restype = C.c_char_p
    out["stubs"][name] = [who().decode(), hasattr(d, "aclrtGetSysParamOpt"), hasattr(d, "aclInit")]
oc = C.CDLL(lib + "/libacl_op_compiler.so")
oc.aclopCompileAndExecute.restype = C.c_int
v = C.c_int64(-1)
out["op_compiler"] = [oc.aclopCompileAndExecute(b"Add", 0, None, None, 0, None, None, None, 0, 0, None, None), msg(),
                      oc.aclrtGetSysParamOpt(0, C.byref(v)), v.value]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    script = tmp_path_factory.mktemp("raw") / "raw.py"
    script.write_text(textwrap.dedent(RAW))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANN_SIM_", "ASCEND_"))}
    proc = subprocess.run([sys.executable, str(script), str(sim.LIB64), ",".join(STUB_LIBRARIES)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_app_log_prints_only_when_asked(raw) -> None:
    """aclAppLog writes CANN's log files; the simulator prints the line on stderr with ASCEND_SLOG_PRINT_TO_STDOUT=1
    (CANN's switch for printing its logs), else drops it."""
    _, stderr = raw
    lines = [ln for ln in stderr.splitlines() if "aclAppLog" in ln]
    assert lines == ["[cannsim aclAppLog 3] fn (file.c:12): printed=7"], stderr


def test_msprof_functions_are_no_ops(raw) -> None:
    """Nothing is profiled: the report functions answer 0; the hash id is the 64-bit FNV-1a hash of the given bytes
    (the same bytes give the same id; the length counts), the cycle time the monotonic clock in ns."""
    out, _ = raw
    assert out["msprof"] == [0, 0, 0, 0]
    h = out["hash"]
    assert h[0] == h[1] and len(set(h[1:])) == 3, h
    fnv = 0xCBF29CE484222325  # FNV-1a: the offset basis, then per byte xor and multiply by the FNV prime
    for byte in b"aclnnAdd":
        fnv = (fnv ^ byte) * 0x100000001B3 % 2**64
    assert h[0] == fnv
    t0, m0, t1, m1 = out["cycle"]
    assert t0 <= m0 <= t1 <= m1 and t1 - t0 >= 20_000_000


def test_aclop_descriptor_no_ops(raw) -> None:
    """The aclop descriptor functions with nothing to answer do nothing: the destroy and name setters return (on
    NULL too), and the getters give 0 dimensions, ACL_DT_UNDEFINED and ACL_FORMAT_UNDEFINED (-1)."""
    out, _ = raw
    assert out["desc"] == [0, -1, -1]


def test_rt_functions_answer_not_supported(raw) -> None:
    out, _ = raw
    for rc, message in out["rt"]:
        assert rc == 207000 and "not supported by the CANN simulator" in message, (rc, message)


def test_the_stub_libraries_simulate_nothing(raw) -> None:
    """Each STUB library exports only its cannsimStub_<name> (libacl_op_compiler also OP_COMPILER_ENTRIES) and
    says that it simulates nothing; only libacl_op_compiler NEEDs the runtime, so that torch_npu's lookups of the
    aclrt*SysParamOpt functions through its handle resolve."""
    out, _ = raw
    assert set(out["stubs"]) == {"hccl", "ge_runner", "graph", "acl_tdt_channel", "atb", "acl_op_compiler"}
    for name, (text, sys_param, acl_init) in out["stubs"].items():
        assert text == f"lib{name}.so: a stub library of the CANN simulator (it simulates nothing)"
        assert sys_param is acl_init is (name == "acl_op_compiler"), name  # (dlsym searches only its dependencies)
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed: the exported symbols were not listed")
    for name in STUB_LIBRARIES:
        lib = Path(sim.LIB64) / f"lib{name}.so"
        proc = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
        exported = sorted(ln.split()[-1] for ln in proc.stdout.splitlines() if ln.strip())
        want = sorted([f"cannsimStub_{name}"] + (list(OP_COMPILER_ENTRIES) if name == "acl_op_compiler" else []))
        assert exported == want, (name, exported)


def test_the_op_compiler_stub_has_no_ge_compiler(raw) -> None:
    """Compiling an operator through the stub is ACL_ERROR_OP_NOT_FOUND (100024, not 207000: torch_npu only warns
    about that one), naming it; its other rules are tests/sim/test_sim_aclop_and_ops.py."""
    out, _ = raw
    rc, message, sys_param_rc, value = out["op_compiler"]
    assert rc == 100024 and "aclopCompileAndExecute: aclop operator Add not found" in message, (rc, message)
    assert (sys_param_rc, value) == (0, 0)  # the runtime's aclrtGetSysParamOpt, through the stub's handle
