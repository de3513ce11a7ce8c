"""The loader's search, in subprocesses (the backend is a once-per-process choice)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acl_bindings import sim
from tests._clean_env import clean_env

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import json, acl_bindings
    from acl_bindings import lib
    b = acl_bindings.load_backend()
    op = b.find_op_symbol("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize")
    print(json.dumps({"kind": b.kind, "runtime": b.runtime.path, "runtime_via": b.runtime.found_via,
                      "nnopbase": b.nnopbase.path, "op": op[1].path if op else None,
                      "op_via": op[1].found_via if op else None, "loaded_at_import": False}))
""")


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(**env),
                          timeout=60, cwd=str(REPO))


def _probe(**env: str) -> dict:
    proc = _run(PROBE, **env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _build(root: Path, **kw: str) -> Path:
    sim_build_module().build(root, **kw)
    return root / "lib64"


def _cc(out: Path, source: str, links: list[str] | None = None) -> Path:
    """Compile *source* into the shared library *out*, linked to ``lib<name>.so`` of *links* in its folder."""
    compiler = sim_build_module().find_compiler()
    if compiler is None:
        pytest.skip("no C compiler to build a fake library")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = [compiler, "-shared", "-fPIC", "-o", str(out), str(src), f"-L{out.parent}", "-Wl,--no-as-needed",
           *(f"-l{name}" for name in links or [])]
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()
    return out


def sim_build_module():  # type: ignore[no-untyped-def]
    """The simulator's build module, loaded by path (as setup.py does)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_simbuild", sim.ROOT / "build.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("trees")
    kinds = {"acl_rt": {"runtime_name": "acl_rt"}, "legacy": {"op_lib_name": "opapi"},
             "custom": {"op_lib_name": "cust_opapi"}}
    with ThreadPoolExecutor(len(kinds)) as pool:  # (each build runs the compiler: the three at once)
        futures = {name: pool.submit(_build, base / name, **kw) for name, kw in kinds.items()}
        return {name: future.result() for name, future in futures.items()}


def test_import_loads_nothing() -> None:
    proc = _run("import sys, acl_bindings, upsample3d_grad; "
                "print(acl_bindings.loaded_backend() is None, 'libascendcl' in open('/proc/self/maps').read())",
                ACL_BINDINGS_BACKEND="sim")
    assert proc.stdout.split() == ["True", "False"], proc.stderr


def test_auto_falls_back_to_the_embedded_simulator() -> None:
    info = _probe()
    assert info["kind"] == "sim"
    assert info["runtime"] == str(sim.LIB64 / "libascendcl.so")
    assert "no CANN install found" in info["runtime_via"]
    assert info["op"].endswith("libopapi_cv.so")


def test_lib_dir_override_exercises_the_real_search() -> None:
    info = _probe(ACL_BINDINGS_LIB_DIR=str(sim.ROOT))  # a root with lib64/
    assert info["kind"] == "sim" and info["runtime_via"] == "ACL_BINDINGS_LIB_DIR"


@pytest.mark.parametrize("var", ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"])
def test_ascend_home_lib64(var: str) -> None:
    info = _probe(**{var: str(sim.ROOT)})
    assert info["runtime_via"] == var and info["runtime"] == str(sim.LIB64 / "libascendcl.so")


def test_arch_linux_layout(tmp_path: Path) -> None:
    import platform

    arch = tmp_path / f"{platform.machine()}-linux"
    arch.mkdir()
    shutil.copytree(sim.LIB64, arch / "lib64")
    info = _probe(ASCEND_HOME_PATH=str(tmp_path))
    assert info["runtime"] == str(arch / "lib64" / "libascendcl.so") and info["runtime_via"] == "ASCEND_HOME_PATH"


def test_ld_library_path() -> None:
    info = _probe(LD_LIBRARY_PATH=str(sim.LIB64))
    assert info["runtime_via"] == "LD_LIBRARY_PATH"


def test_stub_folders_are_never_searched(tmp_path: Path) -> None:
    stub = tmp_path / "lib64" / "stub"
    shutil.copytree(sim.LIB64, stub)
    info = _probe(LD_LIBRARY_PATH=str(stub))
    assert "stub" not in info["runtime"]
    proc = _run("import acl_bindings; b = acl_bindings.load_backend(); "
                "print([r for p, r in b.tried if 'stub' in p])", LD_LIBRARY_PATH=str(stub))
    assert "skipped: a stub folder" in proc.stdout


def test_override_order_lib_dir_before_ascend_home(variants: dict[str, Path]) -> None:
    info = _probe(ACL_BINDINGS_LIB_DIR=str(variants["acl_rt"]), ASCEND_HOME_PATH=str(sim.ROOT))
    assert info["runtime"] == str(variants["acl_rt"] / "libacl_rt.so")


def test_libacl_rt_is_accepted_as_the_runtime(variants: dict[str, Path]) -> None:
    info = _probe(ASCEND_HOME_PATH=str(variants["acl_rt"].parent))
    assert info["runtime"].endswith("libacl_rt.so") and info["kind"] == "sim"
    proc = _run("import numpy as np, upsample3d_grad as u; "
                "print(u.upsample_nearest_exact3d_backward(np.arange(1,33,dtype=np.float32).reshape(2,2,2,2,2),"
                "(2,2,2),(2,2,1,1,1)).ravel().tolist())", ASCEND_HOME_PATH=str(variants["acl_rt"].parent))
    assert proc.stdout.strip() == "[36.0, 100.0, 164.0, 228.0]", proc.stderr


def test_libopapi_fallback_when_no_split_library(variants: dict[str, Path]) -> None:
    info = _probe(ASCEND_HOME_PATH=str(variants["legacy"].parent))
    assert info["op"] == str(variants["legacy"] / "libopapi.so")


def test_libopapi_is_always_the_last_candidate(tmp_path: Path, variants: dict[str, Path]) -> None:
    # nnopbase keeps the built-in libopapi.so after the split libraries (cann-abi.md §8.7)
    tree = tmp_path / "lib64"
    shutil.copytree(sim.LIB64, tree)
    shutil.copy(variants["legacy"] / "libopapi.so", tree / "libopapi.so")
    proc = _run("import acl_bindings; b = acl_bindings.load_backend(); print([p for p, _ in b.op_candidates])",
                ASCEND_HOME_PATH=str(tmp_path))
    candidates = eval(proc.stdout.strip())  # a printed list of paths
    assert candidates == [str(tree / "libopapi_cv.so"), str(tree / "libopapi.so")], proc.stderr


def test_libopapi_serves_what_the_split_libraries_lack(tmp_path: Path, variants: dict[str, Path]) -> None:
    tree = tmp_path / "lib64"
    shutil.copytree(sim.LIB64, tree)
    _cc(tree / "libopapi_cv.so", "int unrelated(void) { return 0; }\n")  # a split library without the operator
    shutil.copy(variants["legacy"] / "libopapi.so", tree / "libopapi.so")
    info = _probe(ASCEND_HOME_PATH=str(tmp_path))
    assert info["op"] == str(tree / "libopapi.so")


def test_builtin_libopapi_of_the_opp_package(tmp_path: Path, variants: dict[str, Path]) -> None:
    import platform

    lib = tmp_path / "opp" / "built-in" / "op_impl" / "ai_core" / "tbe" / "op_api" / "lib" / "linux"
    lib = lib / platform.machine()
    lib.mkdir(parents=True)
    shutil.copy(variants["legacy"] / "libopapi.so", lib / "libopapi.so")
    tree = tmp_path / "root" / "lib64"
    shutil.copytree(sim.LIB64, tree, ignore=shutil.ignore_patterns("libopapi*"))
    info = _probe(ASCEND_HOME_PATH=str(tree.parent), ASCEND_OPP_PATH=str(tmp_path / "opp"))
    assert info["op"] == str(lib / "libopapi.so") and info["op_via"] == "ASCEND_OPP_PATH built-in"


def test_an_operator_library_with_a_missing_dependency_names_it(tmp_path: Path) -> None:
    tree = tmp_path / "lib64"
    shutil.copytree(sim.LIB64, tree, ignore=shutil.ignore_patterns("libopapi*"))
    # libopapi_cv.so needs libopapi_math.so (cann-abi.md §8.7); here the latter is missing
    _cc(tree / "libopapi_math.so", "int math_helper(void) { return 0; }\n")
    _cc(tree / "libopapi_cv.so", "int math_helper(void);\nint aclnnX(void) { return math_helper(); }\n",
        links=["opapi_math"])
    (tree / "libopapi_math.so").unlink()
    code = ("import acl_bindings, upsample3d_grad\n"  # the operator package registers its prototypes
            "from acl_bindings import lib\n"
            "b = acl_bindings.load_backend()\n"
            "print(lib.has('aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize'))\n"
            "print(b.op_failures())\n"
            "lib.aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize\n")
    proc = _run(code, ASCEND_HOME_PATH=str(tmp_path))
    has, failures = proc.stdout.splitlines()[:2]
    assert has == "False"
    assert str(tree / "libopapi_cv.so") in failures and "it needs libopapi_math.so, which was not found" in failures
    assert "MissingSymbolError" in proc.stderr
    assert "libopapi_cv.so failed to load: it needs libopapi_math.so" in proc.stderr
    assert "source CANN's set_env.sh before starting Python" in proc.stderr


def test_the_runtime_with_a_missing_dependency_names_it(tmp_path: Path) -> None:
    tree = tmp_path / "lib64"
    _cc(tree / "libdrv_fake.so", "int drv(void) { return 0; }\n")
    _cc(tree / "libascendcl.so", "int drv(void);\nint aclInit(const char *c) { (void)c; return drv(); }\n",
        links=["drv_fake"])
    _cc(tree / "libnnopbase.so", "void *aclCreateTensor(void) { return 0; }\n")
    (tree / "libdrv_fake.so").unlink()
    proc = _run("import acl_bindings; acl_bindings.load_backend()", ACL_BINDINGS_BACKEND="cann",
                ASCEND_HOME_PATH=str(tmp_path))
    assert proc.returncode != 0
    assert (f"CANN at {tree} failed to load: libascendcl.so: it needs libdrv_fake.so, which was not found"
            in proc.stderr), proc.stderr


def test_fix_hint_says_to_source_set_env_before_python() -> None:
    proc = _run("import acl_bindings; acl_bindings.load_backend()", ACL_BINDINGS_BACKEND="cann")
    assert "source its environment script in the shell before starting Python" in proc.stderr
    assert "or os.environ inside Python, finds the libraries but not those dependencies" in proc.stderr


def test_custom_opp_path_comes_first(tmp_path: Path, variants: dict[str, Path]) -> None:
    pkg = tmp_path / "pkg" / "op_api" / "lib"
    pkg.mkdir(parents=True)
    shutil.copy(variants["custom"] / "libcust_opapi.so", pkg / "libcust_opapi.so")
    info = _probe(ASCEND_HOME_PATH=str(sim.ROOT), ASCEND_CUSTOM_OPP_PATH=f"/nonexistent:{tmp_path / 'pkg'}")
    assert info["op"] == str(pkg / "libcust_opapi.so") and info["op_via"] == "ASCEND_CUSTOM_OPP_PATH"


def test_vendor_config_ini(tmp_path: Path, variants: dict[str, Path]) -> None:
    vendors = tmp_path / "opp" / "vendors"
    lib = vendors / "custom_cv" / "op_api" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(variants["custom"] / "libcust_opapi.so", lib / "libcust_opapi.so")
    (vendors / "config.ini").write_text("load_priority=missing_vendor,custom_cv\n")
    info = _probe(ASCEND_HOME_PATH=str(sim.ROOT), ASCEND_OPP_PATH=str(tmp_path / "opp"))
    assert info["op"] == str(lib / "libcust_opapi.so") and "config.ini" in info["op_via"]


def test_relative_custom_opp_path_is_made_absolute_when_read(tmp_path: Path, variants: dict[str, Path]) -> None:
    pkg = tmp_path / "pkg" / "op_api" / "lib"
    pkg.mkdir(parents=True)
    shutil.copy(variants["custom"] / "libcust_opapi.so", pkg / "libcust_opapi.so")
    code = ("import os, acl_bindings\n"
            "b = acl_bindings.load_backend()\n"
            "print([p for p, _ in b.op_candidates])\n"
            "os.chdir('/')  # a chdir between choosing the libraries and the first operator call\n"
            "print(b.find_op_symbol('aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize')[1].path)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                          env=clean_env(ASCEND_HOME_PATH=str(sim.ROOT), ASCEND_CUSTOM_OPP_PATH="pkg"))
    candidates, op = proc.stdout.splitlines()[:2]
    assert all(os.path.isabs(p) for p in eval(candidates)), candidates  # a printed list of paths
    assert op == str(pkg / "libcust_opapi.so"), proc.stdout + proc.stderr


def test_relative_opp_path_is_made_absolute_when_read(tmp_path: Path, variants: dict[str, Path]) -> None:
    lib = tmp_path / "opp" / "vendors" / "custom_cv" / "op_api" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(variants["custom"] / "libcust_opapi.so", lib / "libcust_opapi.so")
    (tmp_path / "opp" / "vendors" / "config.ini").write_text("load_priority=custom_cv\n")
    code = ("import os, acl_bindings\n"
            "b = acl_bindings.load_backend()\n"
            "os.chdir('/')\n"
            "print(b.find_op_symbol('aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize')[1].path)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                          env=clean_env(ASCEND_HOME_PATH=str(sim.ROOT), ASCEND_OPP_PATH="opp"))
    assert proc.stdout.strip() == str(lib / "libcust_opapi.so"), proc.stdout + proc.stderr


@pytest.mark.parametrize("name", ["../../evil", "../evil", "..", "sub/../../../evil", "/abs/evil"])
def test_vendor_names_that_leave_the_vendors_folder_are_refused(name: str, tmp_path: Path,
                                                                variants: dict[str, Path]) -> None:
    vendors = tmp_path / "opp" / "vendors"
    good = vendors / "custom_cv" / "op_api" / "lib"
    good.mkdir(parents=True)
    shutil.copy(variants["custom"] / "libcust_opapi.so", good / "libcust_opapi.so")
    for evil in {(vendors / name).resolve(), tmp_path / "evil", Path("/abs/evil")}:
        if str(evil).startswith(str(tmp_path)):  # never write outside the test's folder
            (evil / "op_api" / "lib").mkdir(parents=True, exist_ok=True)
            shutil.copy(variants["custom"] / "libcust_opapi.so", evil / "op_api" / "lib" / "libcust_opapi.so")
    (vendors / "config.ini").write_text(f"load_priority={name},custom_cv\n")
    proc = _run(PROBE, ASCEND_HOME_PATH=str(sim.ROOT), ASCEND_OPP_PATH=str(tmp_path / "opp"))
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["op"] == str(good / "libcust_opapi.so"), proc.stderr
    assert "LoaderWarning" in proc.stderr and f"vendor name {name!r} is not a single folder name" in proc.stderr
    assert str(vendors / "config.ini") in proc.stderr


def test_backend_cann_fails_clearly_without_cann() -> None:
    proc = _run("import acl_bindings; acl_bindings.load_backend()", ACL_BINDINGS_BACKEND="cann")
    assert proc.returncode != 0
    assert "LibraryNotFoundError" in proc.stderr
    assert "Tried:" in proc.stderr and "libascendcl.so: not found" in proc.stderr
    assert "set_env.sh" in proc.stderr and "ACL_BINDINGS_LIB_DIR" in proc.stderr


def test_backend_cann_refuses_the_simulator() -> None:
    proc = _run("import acl_bindings; acl_bindings.load_backend()", ACL_BINDINGS_BACKEND="cann",
                ACL_BINDINGS_LIB_DIR=str(sim.ROOT))
    assert proc.returncode != 0 and "only the CPU simulator was found" in proc.stderr


def test_bad_backend_value() -> None:
    proc = _run("import acl_bindings; acl_bindings.load_backend()", ACL_BINDINGS_BACKEND="gpu")
    assert proc.returncode != 0 and "ACL_BINDINGS_BACKEND must be one of auto, cann, sim" in proc.stderr


def test_python_m_acl_bindings_says_simulator() -> None:
    proc = subprocess.run([sys.executable, "-m", "acl_bindings"], capture_output=True, text=True, timeout=60,
                          env=clean_env(), cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("backend:       sim - CPU simulator")
    assert "SoC name:      CANN-Simulator" in proc.stdout and "simulator:     yes" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "acl_bindings"], capture_output=True, text=True, timeout=60,
                          env=clean_env(ACL_BINDINGS_BACKEND="cann"), cwd=str(REPO))
    assert proc.returncode == 3 and "Tried:" in proc.stdout and "set_env.sh" in proc.stdout  # as the CLI's 3


def test_missing_symbol_is_a_clear_error_when_called() -> None:
    proc = _run("from acl_bindings import lib, TwoPhaseOp\n"
                "op = TwoPhaseOp('NoSuchOperator', ())\n"
                "print(op.available())\n"
                "op.get_workspace_size()", ACL_BINDINGS_BACKEND="sim")
    assert proc.stdout.strip() == "False"
    assert "MissingSymbolError" in proc.stderr and "aclnnNoSuchOperatorGetWorkspaceSize is not exported" in proc.stderr


def test_concurrent_first_loads_choose_once() -> None:
    code = textwrap.dedent("""
        import threading, acl_bindings
        from acl_bindings import _loader
        seen = []
        def go():
            seen.append(id(acl_bindings.load_backend()))
        ts = [threading.Thread(target=go) for _ in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(len(set(seen)), len(seen))
    """)
    proc = _run(code, ACL_BINDINGS_BACKEND="sim")
    assert proc.stdout.split() == ["1", "8"], proc.stderr


def test_simulator_unavailable_message(tmp_path: Path) -> None:
    # a copy of the package whose simulator could not be built (no compiler): clear message, no crash
    pkg = tmp_path / "acl_bindings"
    shutil.copytree(REPO / "acl_bindings", pkg, ignore=shutil.ignore_patterns("lib64", "__pycache__"))
    (pkg / "sim" / "BUILD_ERROR.txt").write_text("no C compiler found (tried cc, gcc, clang)\n")
    env = clean_env(ACL_BINDINGS_BACKEND="sim")
    env["PYTHONPATH"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "acl_bindings"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 3  # no library loads: the CLI's code
    assert "simulator is unavailable: no C compiler found" in proc.stdout
    # the fix once, and no advice to ask for the simulator that was asked for
    assert proc.stdout.lower().count("install a c compiler") == 1, proc.stdout
    assert "What to do: install a C compiler" in proc.stdout and "ACL_BINDINGS_BACKEND=sim" not in proc.stdout


# ------------------------------------------------------------------------------- two runtimes (issue 25 item 9)

FIRST_CLIENT = textwrap.dedent("""
    import ctypes, json, os, sys
    # another client (torch_npu does this through LD_LIBRARY_PATH) loaded its runtime first
    ctypes.CDLL(os.environ["FIRST_RUNTIME"], mode=ctypes.RTLD_GLOBAL)
    import acl_bindings
    try:
        b = acl_bindings.load_backend()
    except acl_bindings.TwoRuntimesError as exc:
        print(json.dumps({"refused": str(exc), "is_not_found": isinstance(exc, acl_bindings.LibraryNotFoundError)}))
        sys.exit(0)
    print(json.dumps({"runtime": b.runtime.path, "kind": b.kind}))
""")


def test_a_runtime_loaded_first_from_another_file_is_refused_naming_both(tmp_path: Path) -> None:
    other = tmp_path / "other" / "lib64"
    shutil.copytree(sim.LIB64, other)
    proc = _run(FIRST_CLIENT, FIRST_RUNTIME=str(other / "libascendcl.so"), ACL_BINDINGS_LIB_DIR=str(sim.ROOT))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["is_not_found"], got
    text = got["refused"]
    assert str(other / "libascendcl.so") in text and str(sim.LIB64 / "libascendcl.so") in text, text
    assert f"ACL_BINDINGS_LIB_DIR={other}" in text, text


LATER_CLIENT = textwrap.dedent("""
    import ctypes, json, os
    import acl_bindings
    b = acl_bindings.load_backend()
    b.check_one_runtime()                                  # alone: nothing to refuse
    # another client (torch_npu imported after the package's load) maps another runtime of that name
    ctypes.CDLL(os.environ["LATER_RUNTIME"], mode=ctypes.RTLD_LOCAL)
    try:
        b.check_one_runtime()
    except acl_bindings.TwoRuntimesError as exc:
        print(json.dumps({"refused": str(exc)}))
""")


def test_a_runtime_loaded_later_from_another_file_is_refused_naming_both(tmp_path: Path) -> None:
    other = tmp_path / "other" / "lib64"
    shutil.copytree(sim.LIB64, other)
    proc = _run(LATER_CLIENT, LATER_RUNTIME=str(other / "libascendcl.so"), ACL_BINDINGS_LIB_DIR=str(sim.ROOT))
    assert proc.returncode == 0, proc.stderr
    text = json.loads(proc.stdout.strip().splitlines()[-1])["refused"]
    assert str(other / "libascendcl.so") in text and str(sim.LIB64 / "libascendcl.so") in text, text
    assert f"ACL_BINDINGS_LIB_DIR={other}" in text, text


def test_the_same_runtime_loaded_first_is_shared(tmp_path: Path) -> None:
    link = tmp_path / "lib64"
    link.symlink_to(sim.LIB64, target_is_directory=True)  # another path to the same file
    proc = _run(FIRST_CLIENT, FIRST_RUNTIME=str(link / "libascendcl.so"), ACL_BINDINGS_LIB_DIR=str(sim.ROOT))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"runtime": str(sim.LIB64 / "libascendcl.so"), "kind": "sim"}, got
