"""Wheels: with a C compiler the wheel carries the simulator and is tagged for the platform; without one the
build still succeeds, the wheel is pure, and the simulator then explains itself."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


#: The line the install (pip 26+) and the first import give without a compiler.
NOTICE = ("the CPU simulator was not built (no C compiler found): install a C compiler (gcc or clang) and reinstall "
          "to use it; real CANN works without it")


def _pip_major() -> int:
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[1].split(".")[0])


def _copy_sources(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            dest = src / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes((REPO / rel).read_bytes())
    return src


@pytest.mark.slow
def test_wheel_with_the_simulator_is_a_platform_wheel(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    assert not (src / "acl_bindings" / "sim" / "lib64").exists()  # built by the wheel build itself
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    assert wheel.name.startswith("upsample3d_grad-") and not wheel.name.endswith("-any.whl"), wheel.name
    assert wheel.name.split("-")[2:4] == ["py3", "none"] and "linux" in wheel.name.split("-")[4], wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert {"acl_bindings/sim/lib64/libascendcl.so", "acl_bindings/sim/lib64/libnnopbase.so",
            "acl_bindings/sim/lib64/libopapi_cv.so"} <= set(names)
    assert "Root-Is-Purelib: false" in meta
    assert "upsample3d_grad/tools/doctor_schema.json" in names and "upsample3d_grad/tools/smoke_schema.json" in names
    assert {"upsample3d_grad/reference/__init__.py", "upsample3d_grad/reference/_sum_plans.py",
            "upsample3d_grad/tools/__init__.py", "upsample3d_grad/tools/cli.py"} <= set(names)  # the subpackages
    with zipfile.ZipFile(wheel) as zf:
        scripts = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "upsample3d-grad = upsample3d_grad_cli:main" in scripts and "upsample3d_grad_cli.py" in names


@pytest.mark.slow
def test_wheel_builds_without_a_compiler(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env.update(PATH=str(empty), PIP_DISABLE_PIP_VERSION_CHECK="1")  # no cc, gcc or clang to be found
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "simulator was not built" in line]
    # at install time, pip 26 and newer show the build hook's warning; the pips that `python3 -m venv` brings
    # (23.0.1 to 25.x) keep a successful build's output to themselves (README, "Install")
    assert len(said) == (1 if _pip_major() >= 26 else 0), said
    assert all(NOTICE in line for line in said), said
    wheel = next((tmp_path / "dist").glob("*.whl"))
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name  # no binaries: a pure wheel
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert not [n for n in names if n.endswith(".so")]
        error = zf.read("acl_bindings/sim/BUILD_ERROR.txt").decode()
    assert "compiler" in error.lower()
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "ACL_BINDINGS_", "LD_LIBRARY"))}
    env.update(PYTHONPATH=str(site))
    # on every pip, the first import says it, in one line (a SimulatorNotBuiltWarning) ...
    proc = subprocess.run([sys.executable, "-c", "import upsample3d_grad"], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=60)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"acl_bindings:0: SimulatorNotBuiltWarning: {NOTICE}"], proc.stderr
    # ... but not where a CANN runtime is found or asked for (CANN works without the simulator)
    for extra in ({"ACL_BINDINGS_BACKEND": "cann"}, {"ACL_BINDINGS_LIB_DIR": str(REPO / "acl_bindings/sim/lib64")}):
        proc = subprocess.run([sys.executable, "-c", "import upsample3d_grad"], capture_output=True, text=True,
                              env={**env, **extra}, cwd=str(tmp_path), timeout=60)
        assert proc.returncode == 0 and proc.stdout + proc.stderr == "", (extra, proc.stdout + proc.stderr)
    # the installed package then reports the simulator unavailable, with the reason and the fix
    env.update(ACL_BINDINGS_BACKEND="sim")
    proc = subprocess.run([sys.executable, "-m", "acl_bindings"], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=60)
    assert proc.returncode == 3  # no library loads: the CLI's exit code
    assert "simulator is unavailable" in proc.stdout and "What to do: install a C compiler" in proc.stdout
    assert proc.stdout.lower().count("install a c compiler") == 1, proc.stdout  # the fix once
    assert "ACL_BINDINGS_BACKEND=sim" not in proc.stdout, proc.stdout  # (it is set: no advice to set it)


def test_run_without_a_compiler_says_the_fix_in_a_few_lines(tmp_path: Path) -> None:
    from acl_bindings.sim import build as sim_build

    site = tmp_path / "site"
    for rel in ("acl_bindings", "upsample3d_grad"):
        for path in (REPO / rel).rglob("*"):
            if path.is_file() and "lib64" not in path.parts and "__pycache__" not in path.parts:
                dest = site / path.relative_to(REPO)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(path.read_bytes())
    (site / "upsample3d_grad_cli.py").write_bytes((REPO / "upsample3d_grad_cli.py").read_bytes())
    result = sim_build.build(site / "acl_bindings" / "sim", cc=str(tmp_path / "no-such-cc"), check=False)
    assert not result["ok"] and (site / "acl_bindings" / "sim" / "BUILD_ERROR.txt").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "ACL_BINDINGS_", "LD_LIBRARY"))}
    env.update(PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable, "-m", "upsample3d_grad_cli", "run"], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), timeout=60)
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 3 and 1 <= len(lines) <= 5, lines
    assert lines[0] == "upsample3d-grad run: backend auto - not available: no usable library was found", lines
    text = "\n".join(lines)
    assert "the CPU simulator is not built: no C compiler found" in text
    assert "install a C compiler" in text and "python -m acl_bindings.sim.build --force" in text
    errors = proc.stderr.splitlines()  # every error line names the subcommand
    assert len(errors) == 2 and errors[0].startswith("upsample3d-grad run: error: "), errors
    assert errors[1].startswith("upsample3d-grad run: fix: install a C compiler"), errors
