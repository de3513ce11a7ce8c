"""``ACL_BINDINGS_BACKEND=auto`` with a CANN install that is present but does not load.

Each case is a fake CANN tree built in a temporary folder (a C compiler builds tiny
libraries that have the real names and a few of the real symbols): a missing
dependency, another architecture, a partial install, a file that is not a library, a
library that is not what its name says, and an nnopbase that does not load.  Every
command must say on its first line that CANN did not load and that the simulator is
used; ``run``, ``smoke`` and ``bench`` then refuse to run (exit 3) unless the simulator is asked
for, and ``doctor`` and ``python -m acl_bindings`` must call that unhealthy (exit 1).  Only a
machine without any CANN falls back quietly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from acl_bindings.sim import build as sim_build
from tests._clean_env import clean_env

REPO = Path(__file__).resolve().parents[2]

RUNTIME_SRC = """
int fake_driver_call(void);
int aclInit(const char *config) { (void)config; return fake_driver_call(); }
int aclrtSetDevice(int device) { (void)device; return 0; }
"""
NNOPBASE_SRC = """
int fake_driver_call(void);
void *aclCreateTensor(void) { (void)fake_driver_call(); return 0; }
"""
DRIVER_SRC = "int fake_driver_call(void) { return 0; }\n"
OTHER_SRC = "int unrelated(void) { return 0; }\n"


def cc(out: Path, source: str, *, needs_driver: bool = False, soname: str | None = None) -> Path:
    """Compile *source* into the shared library *out* (linked to a fake driver library when asked)."""
    compiler = sim_build.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler to build the fake CANN libraries")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = [compiler, "-shared", "-fPIC", "-o", str(out), str(src)]
    if needs_driver:
        drv = out.parent / "libfake_driver.so"
        if not drv.exists():
            cc(drv, DRIVER_SRC)
        cmd += [f"-L{out.parent}", "-Wl,--no-as-needed", "-lfake_driver"]
    if soname:
        cmd.append(f"-Wl,-soname,{soname}")
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()
    return out


def _missing_dependency(lib64: Path) -> str:
    cc(lib64 / "libascendcl.so", RUNTIME_SRC, needs_driver=True, soname="libascendcl.so")
    cc(lib64 / "libnnopbase.so", NNOPBASE_SRC, needs_driver=True, soname="libnnopbase.so")
    (lib64 / "libfake_driver.so").unlink()  # the driver is not installed (or not on LD_LIBRARY_PATH)
    return "libascendcl.so: it needs libfake_driver.so, which was not found"


def _other_architecture(lib64: Path) -> str:
    cc(lib64 / "libascendcl.so", RUNTIME_SRC + DRIVER_SRC)
    cc(lib64 / "libnnopbase.so", NNOPBASE_SRC + DRIVER_SRC)
    machine = 0x3E if _this_machine() == 0xB7 else 0xB7  # x86_64 on aarch64, aarch64 elsewhere
    with open(lib64 / "libascendcl.so", "r+b") as fh:
        fh.seek(18)  # e_machine, little-endian on both
        fh.write(machine.to_bytes(2, "little"))
    return "libascendcl.so: built for another architecture"


def _partial(lib64: Path) -> str:
    cc(lib64 / "libascendcl.so", RUNTIME_SRC + DRIVER_SRC, soname="libascendcl.so")
    return "libnnopbase.so not found beside libascendcl.so"


def _not_a_library(lib64: Path) -> str:
    lib64.mkdir(parents=True)
    (lib64 / "libascendcl.so").write_bytes(b"\x7fELF" + b"\0" * 8)  # a truncated download
    cc(lib64 / "libnnopbase.so", NNOPBASE_SRC + DRIVER_SRC)
    return "libascendcl.so: not a shared library"


def _wrong_library(lib64: Path) -> str:
    cc(lib64 / "libascendcl.so", OTHER_SRC)
    cc(lib64 / "libnnopbase.so", NNOPBASE_SRC + DRIVER_SRC)
    return "libascendcl.so: it loads but does not export aclInit, aclrtSetDevice"


def _nnopbase_fails(lib64: Path) -> str:
    # the runtime loads (with the soname of the simulator's runtime) and is then given up
    cc(lib64 / "libascendcl.so", RUNTIME_SRC + DRIVER_SRC, soname="libascendcl.so")
    cc(lib64 / "libnnopbase.so", NNOPBASE_SRC, needs_driver=True, soname="libnnopbase.so")
    (lib64 / "libfake_driver.so").unlink()
    return "libnnopbase.so: it needs libfake_driver.so, which was not found"


def _this_machine() -> int:
    with open(sys.executable, "rb") as fh:
        return int.from_bytes(fh.read(20)[18:20], "little")


BROKEN: dict[str, Callable[[Path], str]] = {
    "missing-dependency": _missing_dependency,
    "other-architecture": _other_architecture,
    "partial": _partial,
    "not-a-library": _not_a_library,
    "wrong-library": _wrong_library,
    "nnopbase-fails": _nnopbase_fails,
}


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=clean_env(**env), timeout=120,
                          cwd=str(REPO))


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each broken case: ``(install root, what the reason must say)``."""
    out = {}
    for name, make in BROKEN.items():
        root = tmp_path_factory.mktemp(name)
        out[name] = (root, make(root / "lib64"))
    return out


def _fallback_line(root: Path, reason: str) -> str:
    return f"CANN at {root / 'lib64'} failed to load: {reason}"


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_run_refuses_a_broken_cann_on_its_first_line(case: str, trees: dict[str, tuple[Path, str]]) -> None:
    root, reason = trees[case]
    proc = _run(["-m", "upsample3d_grad", "run"], ASCEND_HOME_PATH=str(root))
    assert proc.returncode == 3, proc.stdout + proc.stderr  # no green run on a broken machine
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"upsample3d-grad run: error: {_fallback_line(root, reason)}"), first
    assert "; using the simulator, so this run would test the simulator, not CANN" in first
    assert "--backend sim" in first  # how to ask for the simulator
    assert "result[" not in proc.stdout  # nothing ran
    assert "Traceback" not in proc.stderr and "BackendFallbackWarning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("how", ["--backend", "env"])
def test_the_simulator_asked_for_runs_beside_a_broken_cann(how: str, trees: dict[str, tuple[Path, str]]) -> None:
    root, _ = trees["missing-dependency"]
    if how == "--backend":
        proc = _run(["-m", "upsample3d_grad", "run", "--backend", "sim"], ASCEND_HOME_PATH=str(root))
    else:
        proc = _run(["-m", "upsample3d_grad", "run"], ASCEND_HOME_PATH=str(root), ACL_BINDINGS_BACKEND="sim")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("upsample3d-grad run: backend sim"), proc.stdout
    assert "failed to load" not in proc.stdout and "OK: matches the expected [36, 100, 164, 228]" in proc.stdout


def test_a_broken_cann_smoke_report_is_not_ok_in_compare(trees: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    root, reason = trees["missing-dependency"]
    broken, good = tmp_path / "broken.json", tmp_path / "good.json"
    proc = _run(["-m", "upsample3d_grad", "smoke", "--quick", "--json", str(broken)], ASCEND_HOME_PATH=str(root))
    assert proc.returncode == 3 and proc.stdout.startswith("upsample3d-grad smoke: error: CANN at"), proc.stdout
    data = json.loads(broken.read_text())
    assert data["environment"]["fallback"].startswith(_fallback_line(root, reason)) and data["cases"] == []
    assert data["summary"]["ok"] is False
    proc = _run(["-m", "upsample3d_grad", "smoke", "--quick", "--backend", "sim", "--json", str(good)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # a report of an older version that ran the cases on the fallback: all pass, still not ok
    ran = json.loads(good.read_text())
    ran["environment"]["fallback"] = data["environment"]["fallback"]
    ran_path = tmp_path / "ran.json"
    ran_path.write_text(json.dumps(ran))
    proc = _run(["-m", "upsample3d_grad", "compare", str(good), str(ran_path), str(broken), "--json", "-"])
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["ok"] is False, proc.stderr
    assert [r["ok"] for r in doc["reports"]] == [True, False, False]


@pytest.mark.parametrize("case", ["missing-dependency", "partial", "other-architecture"])
def test_doctor_calls_a_broken_cann_unhealthy(case: str, trees: dict[str, tuple[Path, str]]) -> None:
    root, reason = trees[case]
    proc = _run(["-m", "upsample3d_grad", "doctor", "--no-run"], ASCEND_HOME_PATH=str(root))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"upsample3d-grad doctor: error: {_fallback_line(root, reason)}"), lines[0]
    assert "verdict:        NOT healthy" in proc.stdout
    problems = lines[lines.index("verdict:        NOT healthy") + 1:]
    assert problems and problems[0].startswith(f"  - {_fallback_line(root, reason)}"), problems


@pytest.mark.parametrize("command", [["-m", "upsample3d_grad", "smoke", "--quick"],
                                     ["-m", "upsample3d_grad", "bench", "--input-size", "1,1,2,2,2", "--repeat", "1",
                                      "--warmup", "0"],
                                     ["-m", "acl_bindings"]],
                         ids=["smoke", "bench", "acl_bindings"])
def test_every_command_says_it_first(command: list[str], trees: dict[str, tuple[Path, str]]) -> None:
    root, reason = trees["missing-dependency"]
    proc = _run(command, ASCEND_HOME_PATH=str(root))
    if command[1] == "acl_bindings":
        assert proc.stdout.splitlines()[0].startswith(_fallback_line(root, reason)), proc.stdout + proc.stderr
        assert proc.returncode == 1, proc.stdout  # unhealthy, as doctor says
    else:
        first = f"upsample3d-grad {command[2]}: error: {_fallback_line(root, reason)}"
        assert proc.stdout.splitlines()[0].startswith(first), proc.stdout + proc.stderr
        assert proc.returncode == 3, proc.stdout + proc.stderr  # refused: not a green run
        assert "passed" not in proc.stdout and "device time" not in proc.stdout


def test_library_users_get_a_warning(trees: dict[str, tuple[Path, str]]) -> None:
    root, reason = trees["missing-dependency"]
    code = ("import warnings, acl_bindings\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always')\n"
            "    b = acl_bindings.load_backend()\n"
            "print(b.kind)\n"
            "print([type(w.message).__name__ for w in seen])\n"
            "print(b.fallback)")
    proc = _run(["-c", code], ASCEND_HOME_PATH=str(root))
    kind, categories, fallback = proc.stdout.splitlines()[:3]
    assert kind == "sim" and categories == "['BackendFallbackWarning']", proc.stdout + proc.stderr
    assert fallback.startswith(_fallback_line(root, reason)) and fallback.endswith("; using the simulator")


@pytest.mark.parametrize("case", ["nnopbase-fails", "wrong-library"])
def test_a_runtime_given_up_is_unloaded(case: str, trees: dict[str, tuple[Path, str]]) -> None:
    # left mapped, its exported symbols would come before the simulator's in the global scope
    root, _ = trees[case]
    code = ("import acl_bindings\n"
            "b = acl_bindings.load_backend()\n"
            "print(b.kind, any(str(line).find('" + str(root) + "') >= 0 for line in open('/proc/self/maps')))\n")
    proc = _run(["-W", "ignore", "-c", code], ASCEND_HOME_PATH=str(root))
    assert proc.stdout.split() == ["sim", "False"], proc.stdout + proc.stderr


def test_backend_cann_names_the_failure(trees: dict[str, tuple[Path, str]]) -> None:
    root, reason = trees["missing-dependency"]
    proc = _run(["-m", "acl_bindings"], ASCEND_HOME_PATH=str(root), ACL_BINDINGS_BACKEND="cann")
    assert proc.returncode == 3, proc.stdout
    assert f"ACL_BINDINGS_BACKEND=cann, but {_fallback_line(root, reason)}" in proc.stdout
    assert "before starting Python" in proc.stdout


def test_no_cann_at_all_falls_back_quietly() -> None:
    proc = _run(["-m", "upsample3d_grad", "doctor", "--no-run"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("upsample3d-grad doctor: backend sim")
    assert "failed to load" not in proc.stdout + proc.stderr and "verdict:        healthy" in proc.stdout
    proc = _run(["-m", "acl_bindings"])
    assert proc.returncode == 0 and proc.stdout.startswith("backend:       sim"), proc.stdout + proc.stderr


def test_an_install_variable_naming_an_empty_folder_is_not_quiet(tmp_path: Path) -> None:
    proc = _run(["-m", "upsample3d_grad", "run"], ASCEND_HOME_PATH=str(tmp_path))
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"upsample3d-grad run: error: CANN at {tmp_path} failed to load: ASCEND_HOME_PATH "
                            "names it, but no runtime"), first
    assert proc.returncode == 3


def test_a_simulator_found_after_a_broken_cann_is_announced(trees: dict[str, tuple[Path, str]]) -> None:
    # a broken install first on the search path, a simulator's libraries later (LD_LIBRARY_PATH): not quiet
    root, reason = trees["partial"]
    proc = _run(["-c", "import acl_bindings; b = acl_bindings.load_backend(); print(b.runtime.found_via); "
                       "print(b.fallback)"],
                ASCEND_HOME_PATH=str(root), LD_LIBRARY_PATH=str(REPO / "acl_bindings" / "sim" / "lib64"))
    via, fallback = proc.stdout.splitlines()[:2]
    assert via == "LD_LIBRARY_PATH" and fallback.startswith(_fallback_line(root, reason)), proc.stdout + proc.stderr
