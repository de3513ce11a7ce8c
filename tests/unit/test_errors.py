"""Exceptions keyed by code; pickling; builtin mix-ins (no library needed)."""

from __future__ import annotations

import pickle

import pytest

from acl_bindings import _codes
from acl_bindings.enums import DataType, Format, MemAttr, MemcpyKind, MemMallocPolicy
from acl_bindings.errors import (
    AclError,
    AclMemoryError,
    AclnnInnerError,
    AclParamError,
    AclRuntimeError,
    AclStateError,
    ClosedError,
    LibraryNotFoundError,
    SimulatorUnavailableError,
    error_class_for,
)
from tests._facts import facts


@pytest.mark.parametrize("code,cls", [
    (100000, AclParamError), (161001, AclParamError), (161002, AclParamError), (107000, AclParamError),
    (200000, AclMemoryError), (207001, AclMemoryError), (207018, AclMemoryError),
    (100001, AclStateError), (100002, AclStateError), (107002, AclStateError),
    (507015, AclRuntimeError), (361001, AclRuntimeError), (207004, AclRuntimeError), (500001, AclRuntimeError),
    (561003, AclnnInnerError), (561103, AclnnInnerError), (561999, AclnnInnerError),
])
def test_class_by_code(code: int, cls: type) -> None:
    err = AclError.from_status(code, "aclFoo", "detail text")
    assert type(err) is cls
    assert error_class_for(code) is cls
    assert err.code == code and err.func == "aclFoo" and err.detail == "detail text"


def test_builtin_mixins() -> None:
    assert isinstance(AclError.from_status(161002), ValueError)
    assert isinstance(AclError.from_status(207001), MemoryError)
    assert not isinstance(AclError.from_status(507015), ValueError)
    assert issubclass(LibraryNotFoundError, OSError) and not issubclass(LibraryNotFoundError, AclError)
    assert issubclass(ClosedError, ValueError)


def test_message_names_code_function_explanation_and_detail() -> None:
    err = AclError.from_status(161002, "aclnnFooGetWorkspaceSize", "gradOut: expected 5-D")
    text = str(err)
    assert text.startswith("aclnnFooGetWorkspaceSize failed: ACLNN_ERR_PARAM_INVALID (161002): ")
    assert "gradOut: expected 5-D" in text
    assert err.name == "ACLNN_ERR_PARAM_INVALID"
    assert err.explanation == _codes.CODES[161002][1]


def test_unknown_codes_get_a_family_name() -> None:
    assert AclError.from_status(507777).name == "ACL_ERROR_RT_<5070xx>"
    assert AclError.from_status(12345).name == "UNKNOWN"


@pytest.mark.parametrize("code", [161001, 207001, 507015, 561003, 100002, 42])
def test_errors_pickle(code: int) -> None:
    err = AclError.from_status(code, "aclrtMalloc", "why")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert (back.code, back.func, back.detail, back.name, str(back)) == (err.code, err.func, err.detail, err.name,
                                                                         str(err))


def test_library_errors_pickle() -> None:
    err = SimulatorUnavailableError("no sim", [("/x/libascendcl.so", "not found")])
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SimulatorUnavailableError and back.tried == err.tried and str(back) == str(err)


def test_documented_codes_are_in_the_table() -> None:
    # every code in tests/data/cann_facts.json (acl_base_rt.h, rt_error_codes.h, op_errno.h) has its CANN name
    codes = facts()["codes"]
    assert len(codes) >= 15
    for name, entry in codes.items():
        assert entry["source"].startswith(("hicann/runtime ", "hicann/opbase ")), name
        assert _codes.CODES[entry["value"]][0] == name


@pytest.mark.parametrize("enum_name,cls,prefix", [
    ("aclDataType", DataType, "ACL_"), ("aclFormat", Format, "ACL_FORMAT_"),
    ("aclrtMemcpyKind", MemcpyKind, "ACL_MEMCPY_"), ("aclrtMemMallocPolicy", MemMallocPolicy, "ACL_MEM_MALLOC_"),
    ("aclrtMemAttr", MemAttr, "ACL_"),
])
def test_enum_values_match_the_documented_ones(enum_name: str, cls: type, prefix: str) -> None:
    documented = facts()["enums"][enum_name]["values"]
    ours = {f"{prefix}{m.name}": int(m) for m in cls}
    assert ours == documented
