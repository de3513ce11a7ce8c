"""Every operator the simulator lacks fails in torch_npu with an error that names it (issue 38), each case in its own
child process started after ``eval "$(python -m acl_bindings.sim env)"`` (torch_npu stops running a process's later
work after such an error, so one case would poison the next).

Two ways to miss an operator (docs/sim-ops.md):
- op-plugin finds no aclnn operator and falls back to torch_npu's aclop path: the simulator's
  ``aclopCompileAndExecute`` answers ACL_ERROR_OP_NOT_FOUND (100024) with a message naming the aclop operator type,
  saying that the simulator implements aclnn operators only and pointing to ``python -m acl_bindings.sim ops``;
  torch_npu's RuntimeError carries that message, on the task queue (the default, ExecFunc) and with
  ``ASCEND_LAUNCH_BLOCKING=1`` (InnerRun, OPS_CHECK_ERROR);
- op-plugin has no fallback: its own RuntimeError names the aclnn operator ("aclnnXxx or aclnnXxxGetWorkspaceSize
  not in libopapi.so"); op-plugin builds that text alone (op_api_common.h EXEC_NPU_CMD), so the simulator cannot
  add the pointer there, and the test checks instead that ``ops`` does not list the operator.

The cases were chosen with the DLSYM tracer as operators nobody is adding: ``F.conv3d`` (aclnnConvolution missing,
aclop Conv3D), an Adam step without foreach (aclnnInplaceLerps missing, aclop Lerp), ``torch.argsort(stable=True)``
(aclnnSort missing, no fallback).  Each process must exit 0 after the error, with no Python traceback and no crash.
"""

from __future__ import annotations

import pytest

from acl_bindings.sim.__main__ import operators
from tests.torch_npu.test_torch_npu_on_sim import _finish, _start

_PRELUDE = r"""
import json
import torch, torch_npu
import torch.nn.functional as F
out = {"step": "start"}
gen = torch.Generator().manual_seed(38)
"""

_EPILOGUE = r"""
try:
    run()
    torch.npu.synchronize()
    out["step"] = "done"
except Exception as exc:
    out["error"] = [type(exc).__name__, str(exc)]
from acl_bindings import sim
out["aclop_calls"] = sim.call_count("aclopCompileAndExecute") + sim.call_count("aclopCompileAndExecuteV2")
print("RESULT " + json.dumps(out))
"""

CASES = {
    # the aclop fallback, through torch_npu's task queue (ExecFunc; on by default)
    "conv3d": ("Conv3D", r"""
def run():
    x = torch.randn(1, 2, 4, 4, 4, generator=gen).npu()
    w = torch.randn(3, 2, 2, 2, 2, generator=gen).npu()
    out["step"] = "op"
    F.conv3d(x, w).cpu()
"""),
    # the same, with the task queue off: OpCommand's InnerRun and OPS_CHECK_ERROR
    "conv3d_blocking": ("Conv3D", r"""
def run():
    x = torch.randn(1, 2, 4, 4, 4, generator=gen).npu()
    w = torch.randn(3, 2, 2, 2, 2, generator=gen).npu()
    out["step"] = "op"
    F.conv3d(x, w).cpu()
"""),
    # an optimiser step: the first operator op-plugin cannot find is the lerp of the first moment
    "adam": ("Lerp", r"""
def run():
    p = torch.nn.Parameter(torch.randn(4, generator=gen).npu())
    p.grad = torch.randn(4, generator=gen).npu()
    opt = torch.optim.Adam([p], foreach=False)
    out["step"] = "op"
    opt.step()
    p.detach().cpu()
"""),
    # Adam as users write it (foreach by default on NPU tensors): the same lerp; with the task queue off, because
    # on the queue torch_npu itself aborted this step in 3 of 8 runs (std::terminate on its "The process exits for
    # this inner error" runtime_error, while opt.step() went on queueing), exit -6 instead of a RuntimeError
    "adam_default_blocking": ("Lerp", r"""
def run():
    p = torch.nn.Parameter(torch.randn(4, generator=gen).npu())
    p.grad = torch.randn(4, generator=gen).npu()
    opt = torch.optim.Adam([p])
    out["step"] = "op"
    opt.step()
    p.detach().cpu()
"""),
    # a missing aclnn operator without an aclop fallback: op-plugin's own error
    "argsort": ("aclnnSort", r"""
def run():
    x = torch.randn(2, 5, generator=gen).npu()
    out["step"] = "op"
    torch.argsort(x, dim=-1, stable=True).cpu()
"""),
}
_BLOCKING = "import os\nos.environ['ASCEND_LAUNCH_BLOCKING'] = '1'  # read by torch_npu at import\n"
_POINTER = "`python -m acl_bindings.sim ops`"


@pytest.fixture(scope="module")
def _children(tmp_path_factory: pytest.TempPathFactory):
    children = {}
    for name, (_, body) in CASES.items():
        script = (_BLOCKING if name.endswith("_blocking") else "") + _PRELUDE + body + _EPILOGUE
        children[name] = _start(script, tmp_path_factory.mktemp(name))
    yield children
    for proc, _ in children.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "argsort"))
def test_an_aclop_fallback_names_the_operator_and_points_to_the_list(_children, case: str) -> None:
    """torch_npu raises at the operator's call (or its copy back), and the message is the simulator's: the entry
    point reached (the aclop path), the aclop type, that only aclnn operators exist, the command that lists them."""
    op_type = CASES[case][0]
    done, out, _ = _finish(*_children[case])  # exit 0, no traceback
    assert out["step"] == "op" and "error" in out, (out, done.stderr[-3000:])
    kind, text = out["error"]
    assert kind == "RuntimeError", out
    assert f"aclopCompileAndExecute: aclop operator {op_type} not found" in text, text
    assert "implements aclnn operators only" in text and _POINTER in text and "docs/sim-ops.md" in text, text
    assert "Failed to find function" not in text, text
    assert out["aclop_calls"] == 1, out  # the one fallback, refused; nothing ran after it
    # its clean-up (aclDestroyDataBuffer per operand) succeeds: no "[WARN] ... Feature is not supported" line
    assert "Feature is not supported" not in done.stderr, done.stderr[-3000:]
    if case.endswith("_blocking"):  # InnerRun: OPS_CHECK_ERROR names the code and CANN's reading of it
        assert "error code is 100024" in text and "Single operator not found" in text, text


@pytest.fixture(scope="module")
def argsort(_children):
    return _finish(*_children["argsort"])


def test_op_plugins_error_names_the_missing_aclnn_operator(argsort) -> None:
    """Without an aclop fallback, op-plugin raises before any launch, naming the aclnn operator it looked up; that
    operator is indeed not in ``python -m acl_bindings.sim ops`` (the names there are the ones the error uses)."""
    done, out, _ = argsort
    assert out["step"] == "op" and "error" in out, (out, done.stderr[-3000:])
    kind, text = out["error"]
    assert kind == "RuntimeError", out
    assert "aclnnSort or aclnnSortGetWorkspaceSize not in libopapi.so" in text, text
    assert out["aclop_calls"] == 0, out
    names = {op.name for op in operators()}
    assert "aclnnSort" not in names and "aclnnInplaceCopy" in names, names
