"""The prototype table against the documented C declarations (``tests/data/cann_facts.json``, each with its
public source: hicann/runtime ``acl_rt.h``, hicann/opbase ``acl_meta.h``, hicann/ops-cv op header)."""

from __future__ import annotations

import pytest

from acl_bindings.prototypes import OPTIONAL, PROTOTYPES, SIM_ONLY, two_phase_prototypes
from tests._cdecl import c_type_key, ctypes_key
from tests._facts import declarations, facts

REQUIRED = """aclInit aclFinalize aclGetRecentErrMsg aclrtSetDevice aclrtResetDevice aclrtGetDevice aclrtGetDeviceCount
aclrtGetSocName aclrtCreateContext aclrtDestroyContext aclrtSetCurrentContext aclrtGetCurrentContext aclrtCreateStream
aclrtDestroyStream aclrtSynchronizeStream aclrtSynchronizeStreamWithTimeout aclrtSynchronizeDevice aclrtMalloc aclrtFree
aclrtMallocHost aclrtFreeHost aclrtMemcpy aclrtMemcpyAsync aclrtMemset aclrtGetMemInfo aclrtCreateEvent
aclrtRecordEvent aclrtSynchronizeEvent aclrtEventElapsedTime aclrtDestroyEvent aclsysGetVersionStr
aclsysGetCANNVersion aclrtGetVersion aclCreateTensor aclDestroyTensor aclCreateIntArray aclDestroyIntArray
aclSetAclOpExecutorRepeatable aclDestroyAclOpExecutor aclSetInputTensorAddr aclSetOutputTensorAddr""".split()


def _doc() -> dict[str, tuple[str, tuple[str, ...]]]:
    return declarations()


def test_every_documented_declaration_parses_and_names_its_source() -> None:
    table = facts()["prototypes"]
    assert set(_doc()) == set(table)
    for name, entry in table.items():
        assert entry["source"].startswith(("hicann/runtime ", "hicann/opbase ", "hicann/ops-cv ")), name


def test_table_has_every_required_function() -> None:
    missing = [name for name in REQUIRED if name not in PROTOTYPES]
    assert not missing


def test_version_queries_are_optional() -> None:
    assert {"aclsysGetVersionStr", "aclsysGetCANNVersion", "aclrtGetVersion"} <= OPTIONAL


def test_roles() -> None:
    for name, (role, _, _) in PROTOTYPES.items():
        expected = "nnopbase" if name.startswith(("aclCreate", "aclDestroy", "aclSet")) else "runtime"
        assert role == expected, name


@pytest.mark.parametrize("name", sorted(PROTOTYPES))
def test_prototype_matches_documented_declaration(name: str) -> None:
    doc = _doc()
    assert name in doc, f"{name} is not declared in tests/data/cann_facts.json"
    ret, args = doc[name]
    _, restype, argtypes = PROTOTYPES[name]
    if name == "aclsysGetCANNVersion":  # we pass a 512-byte buffer for aclCANNPackageVersion*
        assert facts()["structs"]["aclCANNPackageVersion"]["size"] == 512
        assert args == ("int32", "ptr(struct aclCANNPackageVersion)")
        assert [ctypes_key(t) for t in argtypes] == ["int32", "void*"]
        return
    assert ctypes_key(restype) == ret
    assert tuple(ctypes_key(t) for t in argtypes) == args


def test_operator_prototypes_match_documented_declaration() -> None:
    from acl_bindings._lib import lib
    from upsample3d_grad.op import OP  # noqa: F401  (declares the operator's prototypes)

    doc = _doc()
    for name in ("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward"):
        role, restype, argtypes = lib._prototype(name)
        assert role == "opapi"
        ret, args = doc[name]
        assert ctypes_key(restype) == ret
        assert tuple(ctypes_key(t) for t in argtypes) == args


def test_two_phase_shape() -> None:
    table = two_phase_prototypes("Foo", ())
    assert set(table) == {"aclnnFooGetWorkspaceSize", "aclnnFoo"}
    assert [ctypes_key(t) for t in table["aclnnFoo"][2]] == ["void*", "uint64", "ptr(struct aclOpExecutor)", "void*"]


def test_c_type_keys() -> None:
    assert c_type_key("const int64_t *") == "ptr(int64)"
    assert c_type_key("aclOpExecutor **") == "ptr(ptr(struct aclOpExecutor))"
    assert c_type_key("const char *") == "char*"
    assert c_type_key("aclrtStream *") == "ptr(void*)"
    assert c_type_key("aclrtMemcpyKind") == "int32"


def test_sim_only_symbols_are_not_in_the_cann_table() -> None:
    assert not set(SIM_ONLY) & set(PROTOTYPES)
