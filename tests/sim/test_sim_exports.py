"""The simulator exports every prototype of the table, with the same C signature."""

from __future__ import annotations

import ctypes
import re

import pytest

from acl_bindings import sim
from acl_bindings._lib import lib
from acl_bindings.prototypes import PROTOTYPES, SIM_ONLY
from tests._cdecl import ctypes_key, parse_declarations
from upsample3d_grad.op import OP

_DEF = re.compile(r"CANNSIM_API\s+([\w\s\*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*\{")


def _definitions() -> dict[str, tuple[str, tuple[str, ...]]]:
    text = "\n".join(p.read_text() for p in sorted((sim.ROOT / "src").rglob("*.c")))
    decls = ";\n".join(f"{ret} {name}({args})" for ret, name, args in _DEF.findall(text))
    return parse_declarations(decls)


OPERATOR = {OP.phase1_name: lib._prototype(OP.phase1_name), OP.phase2_name: lib._prototype(OP.phase2_name)}
ALL = {**PROTOTYPES, **OPERATOR, **SIM_ONLY}


@pytest.mark.parametrize("name", sorted(ALL))
def test_exported(name: str) -> None:
    assert lib.has(name), f"the simulator does not export {name}"


#: Each role's library in the simulator's default tree, in link order: each depends on the ones before it
_LIBRARIES = {"runtime": "libascendcl.so", "nnopbase": "libnnopbase.so", "opapi": "libopapi_cv.so"}


@pytest.mark.parametrize("name", sorted(ALL))
def test_exported_by_the_library_of_its_role(name: str) -> None:
    """Every symbol is defined in the library its role names (cann-abi.md §4.1): found through that library's
    handle, and not through the handle of any library before it (dlsym also searches a library's
    dependencies, so a symbol of a later library reached that way would be defined in an earlier one)."""
    role = ALL[name][0]
    order = list(_LIBRARIES)
    dlls = {r: ctypes.CDLL(str(sim.LIB64 / _LIBRARIES[r])) for r in order}
    assert hasattr(dlls[role], name), f"{name} is not exported by {_LIBRARIES[role]} ({role})"
    for earlier in order[:order.index(role)]:
        assert not hasattr(dlls[earlier], name), f"{name} ({role}) is defined in {_LIBRARIES[earlier]}"


@pytest.mark.parametrize("name", sorted(ALL))
def test_same_c_signature(name: str) -> None:
    defs = _definitions()
    assert name in defs, f"no CANNSIM_API definition of {name} found in acl_bindings/sim/src"
    ret, args = defs[name]
    _, restype, argtypes = ALL[name]
    if name == "aclsysGetCANNVersion":  # the binding passes a 512-byte buffer as void*
        assert args[1] == "ptr(struct aclCANNPackageVersion)"
        return
    assert ret == ctypes_key(restype)
    assert args == tuple(ctypes_key(t) for t in argtypes)


def test_identity() -> None:
    assert lib.aclrtGetSocName() == b"CANN-Simulator"
    assert lib.has("cannsimVersion") and b"cannsim" in lib.cannsimVersion()
