"""The packages' layout rules: the numpy reference imports no binding, and modules stay small."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "upsample3d_grad"
#: what the numpy reference may import besides the standard library and itself
REFERENCE_MAY_IMPORT = {"numpy", "ml_dtypes"}
MAX_LINES = 400
#: modules allowed over MAX_LINES while they are being split, as "package/module.py" (none at present)
ALLOWED_LARGE: set[str] = set()


def _imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports of *path* (relative imports are left out)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((PKG / "reference").glob("*.py")), ids=lambda p: p.name)
def test_the_reference_is_numpy_only(path: Path) -> None:
    """No acl_bindings, ctypes or torch in the reference: it runs where no library loads."""
    names = _imports(path)
    assert not names & {"acl_bindings", "ctypes", "torch", "upsample3d_grad"}, (path.name, names)
    stdlib = getattr(sys, "stdlib_module_names", None)  # Python >= 3.10
    if stdlib is not None:
        foreign = {n for n in names if n not in stdlib and n != "__future__"}
        assert foreign <= REFERENCE_MAY_IMPORT, (path.name, foreign)


@pytest.mark.parametrize("folder", ["reference", "tools"])
def test_modules_are_small(folder: str) -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (PKG / folder).glob("*.py")}
    assert sizes and all(n <= MAX_LINES for n in sizes.values()), sizes


@pytest.mark.parametrize("folder", ["acl_bindings", "upsample3d_grad"])
def test_package_modules_are_small(folder: str) -> None:
    """The top-level modules of both packages stay within MAX_LINES, but for those listed in ALLOWED_LARGE."""
    sizes = {f"{folder}/{p.name}": len(p.read_text().splitlines()) for p in (ROOT / folder).glob("*.py")}
    too_big = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in ALLOWED_LARGE}
    assert sizes and not too_big, too_big
    small_again = {name for name in ALLOWED_LARGE if name in sizes and sizes[name] <= MAX_LINES}
    assert not small_again, f"{sorted(small_again)} are small now: remove them from ALLOWED_LARGE"


def _returned_calls_in_with_blocks(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and sub.value is not None and any(
                        isinstance(part, ast.Call) for part in ast.walk(sub.value)):
                    found.append(f"{path.relative_to(ROOT)}:{sub.lineno}: {ast.unparse(sub)[:60]}")
    return found


@pytest.mark.parametrize("folder", ["acl_bindings", "upsample3d_grad"])
def test_no_call_is_returned_from_inside_a_with_block(folder: str) -> None:
    """``return f()`` inside a ``with`` block: an interrupt just after ``f`` returns skips the block's exit in
    CPython 3.11+ (a lock stays held, a device guard does not restore the caller's context), because the exit's
    first instructions are outside the block's exception handler.  The result is stored first (README, Tests)."""
    found = [hit for path in sorted((ROOT / folder).rglob("*.py")) for hit in _returned_calls_in_with_blocks(path)]
    assert not found, found
