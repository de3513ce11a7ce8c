"""The packages' layout rules: the numpy reference imports no binding, modules stay small, imports go one way
(no cycle, none hidden in a function), the operator package makes no ctypes call and the generic layer names no
operator."""

from __future__ import annotations

import ast
import subprocess
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


@pytest.mark.parametrize("folder", ["acl_bindings", "upsample3d_grad"])
def test_package_modules_are_small(folder: str) -> None:
    """Every module of both packages (subpackages too) stays within MAX_LINES, but for those listed in
    ALLOWED_LARGE."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / folder).rglob("*.py")}
    too_big = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in ALLOWED_LARGE}
    assert sizes and not too_big, too_big
    small_again = {name for name in ALLOWED_LARGE if name in sizes and sizes[name] <= MAX_LINES}
    assert not small_again, f"{sorted(small_again)} are small now: remove them from ALLOWED_LARGE"


# --------------------------------------------------------------------------- imports: one direction, no dodges

PACKAGES = ("acl_bindings", "upsample3d_grad")
#: the only modules imported inside functions: optional ones (torch, torch_npu) and a platform one (fcntl),
#: imported where they are used so that the packages import without them
LOCAL_IMPORTS_ALLOWED = {"torch", "torch_npu", "fcntl", "ml_dtypes"}  # ml_dtypes: most of a second to import


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run when the module is imported, or when the type checker reads it (into if/try
    blocks, ``if TYPE_CHECKING:`` ones included, never into functions)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                out += _module_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                out += _module_level(handler.body)
        elif isinstance(node, ast.ClassDef):
            out += _module_level(node.body)
        else:
            out.append(node)
    return out


def _import_edges(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of both packages that importing *name* imports at module level."""
    edges: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _module_level(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    edges.add(f"{target}.{alias.name}")
                elif target in known:
                    edges.add(target)
    edges.discard(name)
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_module_graph_has_no_import_cycle() -> None:
    """Layers depend in one direction: no module imports, at import time, one that imports it back
    (imports for the type checker alone, under ``if TYPE_CHECKING:``, count too: a cycle there is one still)."""
    known = _modules()
    graph = {name: _import_edges(name, path, known) for name, path in known.items()}
    assert graph["upsample3d_grad.session"] and "acl_bindings._lib" in graph["acl_bindings.runtime"]  # (it reads)
    assert not any(m.startswith("upsample3d_grad") for edges in
                   (graph[n] for n in graph if n.startswith("acl_bindings")) for m in edges)
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # (the finder finds)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_local_import_but_of_an_optional_module(package: str) -> None:
    """An import inside a function hides a dependency (or dodges a cycle): only the optional, platform and slow
    modules of LOCAL_IMPORTS_ALLOWED are imported where they are used."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import):
                        names = {alias.name.split(".")[0] for alias in sub.names}
                    elif isinstance(sub, ast.ImportFrom):
                        names = {"." * sub.level + (sub.module or "")}
                    else:
                        continue
                    if not names <= LOCAL_IMPORTS_ALLOWED:
                        found.append(f"{path.relative_to(ROOT)}:{sub.lineno}: {ast.unparse(sub)}")
    assert not found, found


def test_the_operator_package_makes_no_ctypes_call() -> None:
    """The operator package declares and checks; every C call goes through acl_bindings."""
    found = {str(path.relative_to(ROOT)): names & {"ctypes", "_ctypes"}
             for path in sorted(PKG.rglob("*.py")) if (names := _imports(path)) & {"ctypes", "_ctypes"}}
    assert not found, found


def _code_words(path: Path) -> set[str]:
    """The identifiers and string constants of *path*, docstrings left out."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.add(node.value)
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.add(node.name)
        elif isinstance(node, ast.alias):
            words.add(node.asname or node.name)
    return words


def test_the_generic_layer_names_no_operator() -> None:
    """acl_bindings is generic: its code (docstrings aside) names no operator; operators are declared by their
    packages through its schema."""
    found = {str(path.relative_to(ROOT)): sorted(w for w in words if "upsample" in w.lower()
                                                 or "nearest" in w.lower())
             for path in sorted((ROOT / "acl_bindings").rglob("*.py")) if (words := _code_words(path))}
    found = {k: v for k, v in found.items() if v}
    assert not found, found
    assert "UpsampleNearestExact3d" in str(_code_words(PKG / "forward.py"))  # (the scan reads an operator's name)


def test_the_command_line_starts_without_ml_dtypes_and_bfloat16_still_maps() -> None:
    """ml_dtypes takes most of a second to import: the package and its command line load it only for bfloat16."""
    code = ("import sys, upsample3d_grad, upsample3d_grad.tools.cli\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported at start-up'\n"
            "from acl_bindings.enums import acl_to_dtype, dtype_name, dtype_to_acl\n"
            "assert dtype_name(27) == 'bfloat16' and 'ml_dtypes' not in sys.modules\n"
            "import ml_dtypes\n"
            "assert dtype_to_acl('bfloat16') == dtype_to_acl(ml_dtypes.bfloat16) == 27\n"
            "assert acl_to_dtype(27) == ml_dtypes.bfloat16\n")
    # the name "bfloat16" is accepted before ml_dtypes is imported (Session.empty's dtype)
    code_by_name = ("import sys\nfrom upsample3d_grad.arrays import empty_dtype\n"
                    "assert 'ml_dtypes' not in sys.modules\nassert empty_dtype('bfloat16').name == 'bfloat16'\n")
    done = subprocess.run([sys.executable, "-c", code_by_name], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
