"""What the raw simulator tests share (tests/sim/test_sim_ops_*.py, test_torch_npu_runtime.py,
test_sim_aclop_and_ops.py): a child-process script calls the simulator's libraries through ctypes and prints one
JSON record, which the tests then check.

``PRELUDE`` is the start of such a script: the three libraries (``rt``, ``nn``, ``op``) loaded from the folder in
``sys.argv[1]``, nnopbase's tensor / scalar / int-array prototypes and ``msg()``, the recent error message.
``RUN_OP`` adds ``run(name, *args)``: an operator's phase 1, phase 2 and the stream's synchronisation, for the
files whose scenarios use that form.  Each test file adds its own operators' prototypes and helpers after these.
``run_raw`` runs a script on the simulator's build: ``lib64-sanitize/`` (ASan+UBSan) when ``SIM_SANITIZE=1``, as
.ci/run's sanitizer step sets, else ``lib64/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from acl_bindings import sim

PRELUDE = r"""
import ctypes as C, json, struct, sys
lib = sys.argv[1]
rt = C.CDLL(lib + "/libascendcl.so")
nn = C.CDLL(lib + "/libnnopbase.so")
op = C.CDLL(lib + "/libopapi_cv.so")
rt.aclGetRecentErrMsg.restype = C.c_char_p
nn.aclCreateTensor.restype = C.c_void_p
nn.aclCreateTensor.argtypes = [C.POINTER(C.c_int64), C.c_uint64, C.c_int, C.POINTER(C.c_int64), C.c_int64, C.c_int,
                               C.POINTER(C.c_int64), C.c_uint64, C.c_void_p]
nn.aclDestroyTensor.argtypes = [C.c_void_p]
nn.aclCreateScalar.restype = C.c_void_p
nn.aclCreateScalar.argtypes = [C.c_void_p, C.c_int]
nn.aclDestroyScalar.argtypes = [C.c_void_p]
nn.aclCreateIntArray.restype = C.c_void_p
nn.aclCreateIntArray.argtypes = [C.POINTER(C.c_int64), C.c_uint64]
nn.aclDestroyIntArray.argtypes = [C.c_void_p]
def msg():
    m = rt.aclGetRecentErrMsg()
    return m.decode() if m else ""
"""

RUN_OP = r"""
def run(name, *args):  # an aclnn operator's two phases on the default stream: [rc, msg()] or [rc, sync's rc]
    ws = C.c_uint64(0); ex = C.c_void_p()
    rc = getattr(op, name + "GetWorkspaceSize")(*args, C.byref(ws), C.byref(ex))
    if rc: return [rc, msg()]
    rc = getattr(op, name)(None, 0, ex, None)
    return [rc, rt.aclrtSynchronizeStream(None)]
"""


def run_raw(script_text: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """Write *script_text* (dedented) to *tmp_path*/raw.py and run it in a child Python whose environment is this
    one's without ``CANN_SIM_*`` and ``ASCEND_*``, plus *env*; its arguments are the simulator's library folder,
    then *args*.  Asserts that it exits 0 (showing its stderr otherwise) and returns the JSON it printed."""
    script = tmp_path / "raw.py"
    script.write_text(textwrap.dedent(script_text))
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("CANN_SIM_", "ASCEND_"))}
    child_env.update(env or {})
    lib = sim.ROOT / "lib64-sanitize" if os.environ.get("SIM_SANITIZE") == "1" else sim.LIB64
    proc = subprocess.run([sys.executable, str(script), str(lib), *args], env=child_env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
