"""Error types and messages a user meets first: wrong Python types, the function named, dtype
spellings, bad environment variables, and ``python -m acl_bindings``'s own command line."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import upsample3d_grad as u
from acl_bindings import AclnnParamError, AclTypeError, DataType
from acl_bindings.enums import dtype_name
from upsample3d_grad import Session, _env, checks
from upsample3d_grad.tools import smoke

REPO = Path(__file__).resolve().parents[2]
X = np.ones((1, 1, 2, 2, 2), np.float32)
SIZES = ((2, 2, 2), (1, 1, 1, 1, 1))

WRONG_TYPES: dict[str, Callable[[], Any]] = {
    "list for grad_output": lambda: u.upsample_nearest_exact3d_backward(X.tolist(), *SIZES),
    "str output_size": lambda: u.upsample_nearest_exact3d_backward(X, "222", SIZES[1]),
    "str in input_size": lambda: u.upsample_nearest_exact3d_backward(X, SIZES[0], (1, 1, "1", 1, 1)),
    "int output_size": lambda: u.upsample_nearest_exact3d_backward(X, 2, SIZES[1]),
    "str scales": lambda: u.upsample_nearest_exact3d_backward(X, *SIZES, "2", "2", "2"),
    "graph-IR str scales": lambda: u.UpsampleNearestExact3dGrad(X, SIZES[1], SIZES[0], scales="222"),
    "list for out": lambda: u.upsample_nearest_exact3d_backward(X, *SIZES, out=[0.0]),
    "int layout": lambda: u.upsample_nearest_exact3d_backward(X, *SIZES, layout=5),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("what", sorted(WRONG_TYPES))
def test_a_wrong_python_type_is_a_type_error_with_canns_code(what: str) -> None:
    with pytest.raises(TypeError) as info:
        WRONG_TYPES[what]()
    err = info.value
    assert isinstance(err, AclTypeError) and isinstance(err, AclnnParamError) and isinstance(err, ValueError)
    assert err.code == 161002 and err.func == checks.PHASE1, err
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is AclTypeError and again.code == 161002 and str(again) == str(err)


def test_a_wrong_value_is_still_not_a_type_error() -> None:
    with pytest.raises(AclnnParamError) as info:
        u.upsample_nearest_exact3d_backward(X, (2, 2), SIZES[1])
    assert not isinstance(info.value, TypeError)


@pytest.mark.parametrize("call, param", [
    (lambda s: s.upload(X.tolist()), "gradOut (grad_output): "),
    (lambda s: s.upload(X.astype(np.float64)), "gradOut (grad_output): "),
    (lambda s: s.upload(X[0]), "gradOut (grad_output): "),
    (lambda s: s.upload(X[:, :, ::-1]), "gradOut (grad_output): negative strides"),
    (lambda s: s.upload(X, "NCHW"), "layout"),
], ids=["list", "float64", "4-D", "negative strides", "layout"])
def test_upload_errors_name_upload(session: Session, call: Callable[[Session], Any], param: str) -> None:
    # each message names the parameter as every other error does: the C name, then the Python one
    with pytest.raises(AclnnParamError) as info:
        call(session)
    assert info.value.func == "Session.upload" and info.value.detail.startswith(param), info.value
    assert str(info.value).startswith("Session.upload failed: ACLNN_ERR_PARAM_INVALID (161002)")


@pytest.mark.parametrize("call, type_error", [
    (lambda s: s.empty("abc"), True),
    (lambda s: s.empty((1, "2")), True),
    (lambda s: s.empty((1, 2), np.float64), True),
    (lambda s: s.empty((1, 2), "floaty"), True),
    (lambda s: s.empty((-1, 2)), False),
    (lambda s: s.empty((1, 2), np.float32, "NCHW"), False),
], ids=["str shape", "str dim", "float64", "unknown dtype", "negative dim", "layout"])
def test_empty_errors_name_empty(session: Session, call: Callable[[Session], Any], type_error: bool) -> None:
    with pytest.raises(AclnnParamError) as info:
        call(session)
    assert info.value.func == "Session.empty" and info.value.code == 161002, info.value
    assert isinstance(info.value, TypeError) == type_error


def test_backward_negative_strides_name_the_parameter_as_every_error_does(session: Session) -> None:
    with pytest.raises(AclnnParamError) as info:
        session.backward(X[:, :, ::-1], *SIZES)
    assert info.value.func == checks.PHASE1, info.value
    assert info.value.detail.startswith("gradOut (grad_output): negative strides"), info.value


def test_backward_errors_still_name_phase_1(session: Session) -> None:
    # backward uploads its numpy arguments itself: its errors are phase 1's, as CANN's would be
    with pytest.raises(AclnnParamError) as info:
        session.backward(X.astype(np.float64), *SIZES)
    assert info.value.func == checks.PHASE1


def test_one_dtype_spelling_in_messages_and_reports(session: Session) -> None:
    with pytest.raises(AclnnParamError) as info:
        checks.check_params(checks.TensorSpec((1, 1, 2, 2, 2), int(DataType.INT8)), *SIZES, None, None, None,
                            checks.TensorSpec((1, 1, 1, 1, 1), int(DataType.INT8)))
    assert "dtype must be float32, float16 or bfloat16, got int8" in str(info.value)
    with pytest.raises(AclnnParamError) as info:
        session.backward(X.astype(np.int8), *SIZES)
    assert "dtype must be float32, float16 or bfloat16, got int8" in str(info.value)
    bad = next(c for c in smoke.bad_cases() if c.grad_out is not None and c.grad_out.dtype == DataType.DOUBLE)
    assert smoke.run_bad_case(session, bad)["dtype"] == "float64" == str(np.dtype(np.float64))
    assert [dtype_name(d) for d in (DataType.FLOAT, DataType.FLOAT16, DataType.BF16)] == [
        str(np.dtype(t)) for t in (np.float32, np.float16, ml_dtypes.bfloat16)]


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "0x1"])
def test_a_bad_device_variable_is_named(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSAMPLE3D_GRAD_DEVICE", value)
    with pytest.raises(ValueError, match=f"UPSAMPLE3D_GRAD_DEVICE must be a device id .* got '{value}'"):
        _env.default_device()


@pytest.mark.parametrize("value, device", [("", 0), (" 1 ", 1), ("0", 0)])
def test_good_device_values(value: str, device: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSAMPLE3D_GRAD_DEVICE", value)
    assert _env.default_device() == device


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("ASCEND_", "ACL_BINDINGS_", "CANN_SIM_", "UPSAMPLE3D_")) and k != "LD_LIBRARY_PATH"}
    full["PYTHONPATH"] = str(REPO)
    full.update(env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=full, timeout=120,
                          cwd=str(REPO))


def test_module_functions_name_a_bad_device_variable() -> None:
    proc = _run(["-c", "import numpy as np, upsample3d_grad as u; "
                       "u.upsample_nearest_exact3d_backward(np.ones((1,1,2,2,2), np.float32), (2,2,2), (1,1,1,1,1))"],
                UPSAMPLE3D_GRAD_DEVICE="gpu0")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("ValueError: UPSAMPLE3D_GRAD_DEVICE must be a device id "
                                                    "(an integer >= 0), got 'gpu0'")


@pytest.mark.parametrize("command", [["-m", "acl_bindings"], ["-m", "upsample3d_grad", "run"]],
                         ids=["acl_bindings", "cli"])
def test_a_bad_backend_variable_is_named_with_exit_code_3(command: list[str]) -> None:
    proc = _run(command, ACL_BINDINGS_BACKEND="gpu")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "ACL_BINDINGS_BACKEND must be one of auto, cann, sim; got 'gpu'" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_m_acl_bindings_help_and_usage() -> None:
    proc = _run(["-m", "acl_bindings", "--help"])
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m acl_bindings"), proc.stderr
    assert "3 no library could be loaded" in " ".join(proc.stdout.split())
    proc = _run(["-m", "acl_bindings", "--no-such-option"])
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-option" in proc.stderr
