"""The simulator's list of aclnn operators (``python -m acl_bindings.sim ops``) and its table, docs/sim-ops.md: one
source, the ``CANNSIM_REGISTER_OP(...)`` lines of acl_bindings/sim/src/ops/*.c, read as build.py reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from acl_bindings.sim.__main__ import Operator, operators, ops_markdown, ops_text

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_table_is_not_stale() -> None:
    """docs/sim-ops.md is generated; after adding an operator run
    ``python -m acl_bindings.sim ops --markdown > docs/sim-ops.md``."""
    table = (REPO / "docs" / "sim-ops.md").read_text()
    assert table == ops_markdown(operators()), (
        "docs/sim-ops.md is stale: run `python -m acl_bindings.sim ops --markdown > docs/sim-ops.md`")


def test_the_table_is_linked_from_the_docs() -> None:
    assert "sim-ops.md" in (REPO / "docs" / "fidelity.md").read_text()


def _ops_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ops"  # (build.py reads the declarations of a folder named ops)
    folder.mkdir()
    return folder


def test_a_phase_pair_is_one_operator_and_a_lone_entry_its_own(tmp_path: Path) -> None:
    tmp_path = _ops_dir(tmp_path)
    (tmp_path / "b.c").write_text('x\nCANNSIM_REGISTER_OP("aclnnBGetWorkspaceSize", "aclnnB",\n'
                                  '                    "aclnnLone")\n')
    (tmp_path / "a.c").write_text('  CANNSIM_REGISTER_OP("aclnnAGetWorkspaceSize", "aclnnA")\n')
    assert operators(tmp_path) == [
        Operator("aclnnA", ("aclnnAGetWorkspaceSize", "aclnnA"), "a.c"),
        Operator("aclnnB", ("aclnnBGetWorkspaceSize", "aclnnB"), "b.c"),
        Operator("aclnnLone", ("aclnnLone",), "b.c"),
    ]
    text = ops_text(operators(tmp_path))
    assert text.splitlines()[0].split() == ["aclnnA", "aclnnAGetWorkspaceSize", "+", "aclnnA", "(a.c)"]
    assert text.splitlines()[-1].startswith("3 aclnn operators")
    md = ops_markdown(operators(tmp_path))
    assert "| `aclnnLone` | `aclnnLone` | `b.c` |" in md


def test_a_malformed_declaration_is_the_builds_error(tmp_path: Path) -> None:
    tmp_path = _ops_dir(tmp_path)
    (tmp_path / "bad.c").write_text("CANNSIM_REGISTER_OP(aclnnX)\n")
    with pytest.raises(RuntimeError, match="string literals"):
        operators(tmp_path)
    (tmp_path / "bad.c").write_text("/* no declaration */\n")
    with pytest.raises(RuntimeError, match="exactly one"):
        operators(tmp_path)


def test_the_real_list_has_the_known_operators() -> None:
    ops = {op.name: op for op in operators()}
    assert ops["aclnnMul"] == Operator("aclnnMul", ("aclnnMulGetWorkspaceSize", "aclnnMul"), "src/ops/mul_add.c")
    assert all(not name.endswith("GetWorkspaceSize") for name in ops)
