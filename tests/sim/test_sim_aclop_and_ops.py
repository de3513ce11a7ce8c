"""The aclop entry points of the STUB libacl_op_compiler (src/stubs/stub_library.c), called raw through ctypes in a
child process, and ``python -m acl_bindings.sim ops`` (issue 38; docs/fidelity.md, "torch_npu on the simulator").

The stub models CANN's op compiler (hicann/ge api/acl/acl_op_compiler/single_op/op_compiler.cpp) but for the one
thing it cannot do: every entry that would compile or run an aclop operator answers ACL_ERROR_OP_NOT_FOUND (100024)
naming the operator.  torch_npu's use of it is tests/torch_npu/test_clear_errors.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acl_bindings import sim
from acl_bindings.sim.__main__ import operators
from tests.sim._raw import run_raw

RAW = r"""
import ctypes as C, json, sys
lib = sys.argv[1]
rt = C.CDLL(lib + "/libascendcl.so")
oc = C.CDLL(lib + "/libacl_op_compiler.so")
rt.aclGetRecentErrMsg.restype = C.c_char_p
def msg():
    m = rt.aclGetRecentErrMsg()
    return m.decode().strip() if m else ""
out = {}
buf = C.create_string_buffer(300)

oc.aclSetCompileopt.argtypes = [C.c_int, C.c_char_p]
oc.aclGetCompileoptSize.restype = C.c_size_t
oc.aclGetCompileoptSize.argtypes = [C.c_int]
oc.aclGetCompileopt.argtypes = [C.c_int, C.c_char_p, C.c_size_t]
def get(opt, n, into=buf):
    rc = oc.aclGetCompileopt(opt, into, n)
    return [rc, buf.value.decode() if rc == 0 else msg()]

# ACL_OP_DEBUG_OPTION (16) read before any set; then set, sized, read (exact length, one byte short)
out["debug_unset"] = get(16, 300)
out["debug"] = [oc.aclSetCompileopt(16, b"oom"), oc.aclGetCompileoptSize(16), get(16, 4), get(16, 3)]
# ACL_PRECISION_MODE (0): stored and sized, but not readable
out["precision"] = [oc.aclSetCompileopt(0, b"must_keep_origin_dtype"), oc.aclGetCompileoptSize(0), get(0, 300)]
out["unset_size"] = [oc.aclGetCompileoptSize(5), oc.aclGetCompileoptSize(2), oc.aclGetCompileoptSize(17),
                     oc.aclGetCompileoptSize(-1)]
# ACL_OP_JIT_COMPILE (10): 256 bytes; the read is the SoC's default, whatever was set
out["jit"] = [oc.aclGetCompileoptSize(10), get(10, 256), oc.aclSetCompileopt(10, b"enable"), get(10, 256),
              get(10, 7), get(10, 8, None)]
out["set_bad"] = []
for opt, value in ((0, None), (2, b"tune"), (17, b"x"), (-1, b"x")):
    out["set_bad"].append([oc.aclSetCompileopt(opt, value), msg()])

# graph-dump options: created and destroyed; NULL is 100000
oc.aclCreateGraphDumpOpt.restype = C.c_void_p
oc.aclDestroyGraphDumpOpt.argtypes = [C.c_void_p]
dump = oc.aclCreateGraphDumpOpt()
out["dump_opt"] = [bool(dump), oc.aclDestroyGraphDumpOpt(dump), oc.aclDestroyGraphDumpOpt(None), msg()]

# the entries that would compile or run an operator
P = C.c_void_p
oc.aclopCompileAndExecute.argtypes = [C.c_char_p, C.c_int, P, P, C.c_int, P, P, P, C.c_int, C.c_int, C.c_char_p, P]
oc.aclopCompileAndExecuteV2.argtypes = oc.aclopCompileAndExecute.argtypes
oc.aclGenGraphAndDumpForOp.argtypes = [C.c_char_p, C.c_int, P, P, C.c_int, P, P, P, C.c_int, C.c_char_p, P]
def run(name, op_type, n_in=2, n_out=1, flag=0, path=None):
    rc = getattr(oc, name)(op_type, n_in, None, None, n_out, None, None, None, 0, flag, path, None)
    return [rc, msg()]
for name in ("aclopCompileAndExecute", "aclopCompileAndExecuteV2"):
    out[name] = [run(name, b"RealDiv"), run(name, b"Conv3D", flag=1, path=b"/opp"), run(name, None),
                 run(name, b"RealDiv", n_in=-1), run(name, b"RealDiv", flag=2), run(name, b"RealDiv", flag=1)]
def gen(op_type=b"Conv3D", path=b"/tmp/dump", opt=None, n_in=1):
    rc = oc.aclGenGraphAndDumpForOp(op_type, n_in, None, None, 1, None, None, None, 0, path, opt)
    return [rc, msg()]
out["gen"] = [gen(), gen(opt=C.c_void_p(8)), gen(path=None), gen(op_type=None), gen(n_in=-1)]

# the runtime's aclDataBuffer, which torch_npu's aclop path makes per operand and destroys after the refusal
rt.aclCreateDataBuffer.restype = rt.aclGetDataBufferAddr.restype = C.c_void_p
rt.aclCreateDataBuffer.argtypes = [C.c_void_p, C.c_size_t]
rt.aclDestroyDataBuffer.argtypes = rt.aclGetDataBufferAddr.argtypes = rt.aclGetDataBufferSizeV2.argtypes = [P]
rt.aclGetDataBufferSizeV2.restype = C.c_size_t
rt.cannsimLiveHandles.restype = C.c_int64
def live():
    return rt.cannsimLiveHandles(b"data_buffer")
b = rt.aclCreateDataBuffer(4096, 64)
out["data_buffer"] = [bool(b), rt.aclGetDataBufferAddr(b), rt.aclGetDataBufferSizeV2(b), live(),
                      rt.aclDestroyDataBuffer(b), live(), [rt.aclDestroyDataBuffer(b), msg()],
                      [rt.aclDestroyDataBuffer(None), msg()], rt.aclGetDataBufferAddr(None),
                      rt.aclGetDataBufferSizeV2(None)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return dict(run_raw(RAW, tmp_path_factory.mktemp("aclop")))


def test_raw_compile_options_are_a_store_with_canns_checks(raw) -> None:
    """aclSetCompileopt stores; aclGetCompileoptSize is the value's length + 1 (0 unset, outside the enum or
    ACL_AUTO_TUNE_MODE; 256 for ACL_OP_JIT_COMPILE); aclGetCompileopt reads only ACL_OP_DEBUG_OPTION (never set →
    200001) and ACL_OP_JIT_COMPILE, whose answer is the SoC's default ("disable" on Atlas A2), a buffer shorter
    than the value + 1 → 500001, NULL → 100000; any other option → 200001.  Setting: NULL value → 100000,
    ACL_AUTO_TUNE_MODE → 200006, an option outside the enum → 500000."""
    assert raw["debug_unset"][0] == 200001 and "never set" in raw["debug_unset"][1]
    assert raw["debug"][:3] == [0, 4, [0, "oom"]]
    assert raw["debug"][3][0] == 500001 and "length 3" in raw["debug"][3][1]
    assert raw["precision"][:2] == [0, len("must_keep_origin_dtype") + 1]
    assert raw["precision"][2][0] == 200001 and "option 0 cannot be read" in raw["precision"][2][1]
    assert raw["unset_size"] == [0, 0, 0, 0]
    size, first, set_rc, again, short, null = raw["jit"]
    assert (size, first, set_rc, again) == (256, [0, "disable"], 0, [0, "disable"])
    assert short[0] == 500001 and null[0] == 100000 and "value is NULL" in null[1]
    assert [rc for rc, _ in raw["set_bad"]] == [100000, 200006, 500000, 500000], raw["set_bad"]
    assert "value is NULL" in raw["set_bad"][0][1] and "ACL_AUTO_TUNE_MODE" in raw["set_bad"][1][1]
    assert "option 17 is not an aclCompileOpt" in raw["set_bad"][2][1]


def test_raw_data_buffers_are_created_read_and_destroyed_once(raw) -> None:
    """aclCreateDataBuffer keeps an address and a length (RT data_buffer.cpp), counted as a live handle until
    aclDestroyDataBuffer; destroying NULL is 100000 (ACL_REQUIRES_NOT_NULL), and so is destroying one twice
    (stricter: CANN deletes it twice); the getters answer NULL and 0 for NULL."""
    made, addr, size, live, rc, live_after, twice, null, null_addr, null_size = raw["data_buffer"]
    assert (made, addr, size, live, rc, live_after) == (True, 4096, 64, 1, 0, 0), raw["data_buffer"]
    assert twice[0] == 100000 and "not a live aclDataBuffer" in twice[1], twice
    assert null[0] == 100000 and "dataBuffer is NULL" in null[1], null
    assert (null_addr, null_size) == (None, 0)


def test_raw_graph_dump_options_are_created_and_destroyed(raw) -> None:
    created, rc, null_rc, text = raw["dump_opt"]
    assert (created, rc, null_rc) == (True, 0, 100000) and "graphDumpOpt is NULL" in text


@pytest.mark.parametrize("name", ["aclopCompileAndExecute", "aclopCompileAndExecuteV2"])
def test_raw_compiling_an_operator_is_op_not_found_naming_it(raw, name: str) -> None:
    """CANN's checks first (op_compiler.cpp CheckInput, ConstructAclOp: NULL opType or a negative count → 100000,
    a compile type other than 0 or 1 → 200001, ACL_COMPILE_UNREGISTERED without opPath → 100000); then
    ACL_ERROR_OP_NOT_FOUND with the operator's type, that only aclnn operators exist, and where they are listed."""
    found, unregistered, null_type, negative, bad_flag, no_path = raw[name]
    for rc, text, op_type in (found + ["RealDiv"], unregistered + ["Conv3D"]):
        assert rc == 100024, text
        assert text.startswith(f"{name}: aclop operator {op_type} not found"), text
        assert "implements aclnn operators only" in text and "`python -m acl_bindings.sim ops`" in text, text
    assert null_type[0] == 100000 and "opType is NULL" in null_type[1]
    assert negative[0] == 100000 and "numInputs -1" in negative[1]
    assert bad_flag[0] == 200001 and "compile type 2" in bad_flag[1]
    assert no_path[0] == 100000 and "opPath is NULL" in no_path[1]


def test_raw_gen_graph_and_dump_is_op_not_found_after_its_checks(raw) -> None:
    """aclGenGraphAndDumpForOp (torch_npu's AOE mode): graphDumpOpt must be NULL, opType and graphDumpPath not,
    the counts non-negative (100000); then the operator cannot be found either (100024)."""
    found, with_opt, no_path, no_type, negative = raw["gen"]
    assert found[0] == 100024 and found[1].startswith("aclGenGraphAndDumpForOp: aclop operator Conv3D not found")
    assert [r[0] for r in (with_opt, no_path, no_type, negative)] == [100000] * 4
    assert "graphDumpOpt must be NULL" in with_opt[1] and "graphDumpPath is NULL" in no_path[1]
    assert "opType is NULL" in no_type[1] and "numInputs -1" in negative[1]


def _ops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acl_bindings.sim", "ops", *args], capture_output=True, text=True,
                          timeout=60)


def test_ops_lists_each_aclnn_operator_once_with_both_phases() -> None:
    """``python -m acl_bindings.sim ops``: one line per operator (a phase-1 / phase-2 pair is one), its entry
    points and file, then the count; the same list the build collects (BUILD_INFO.json's operator_functions)."""
    proc = _ops()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    ops = operators()
    assert len(lines) == len(ops) + 1 and lines[-1].startswith(f"{len(ops)} aclnn operators")
    mul = next(ln for ln in lines if ln.split()[0] == "aclnnMul")
    assert mul.split()[1:] == ["aclnnMulGetWorkspaceSize", "+", "aclnnMul", "(src/ops/mul_add.c)"], mul
    assert not any(ln.split()[0].endswith("GetWorkspaceSize") for ln in lines[:-1]), lines
    info = json.loads((sim.LIB64 / "BUILD_INFO.json").read_text())
    assert sorted(e for op in ops for e in op.entry_points) == sorted(info["operator_functions"])


def test_ops_markdown_is_the_docs_table() -> None:
    proc = _ops("--markdown")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (Path(__file__).resolve().parents[2] / "docs" / "sim-ops.md").read_text()
