"""Build the CPU simulator of the CANN libraries from the C sources in ``src/`` into ``<root>/lib64/``.

No package-relative imports: ``setup.py`` loads this file by path.  Run ``python acl_bindings/sim/build.py`` or
``python -m acl_bindings.sim.build`` (``--help``).  What it builds: docs/design.md, "The simulator's build".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"

CFLAGS = ["-O2", "-fPIC", "-shared", "-std=gnu11", "-pthread", "-fvisibility=hidden", "-Wall"]
LDFLAGS = ["-Wl,--no-undefined", "-Wl,-rpath,$ORIGIN"]
SANITIZE_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
SANITIZE_DIR = "lib64-sanitize"

__all__ = ["build", "find_compiler", "library_names", "main", "not_built_notice"]


def library_names(runtime_name: str = "ascendcl", op_lib_name: str = "opapi_cv") -> dict[str, str]:
    """The file names of the three libraries, by ``"runtime"``, ``"nnopbase"`` and ``"op"`` (``"libascendcl.so"``)."""
    return {"runtime": f"lib{runtime_name}.so", "nnopbase": "libnnopbase.so", "op": f"lib{op_lib_name}.so"}


def find_compiler(cc: str | None = None) -> str | None:
    """The full path of a C compiler: *cc* (name or path), else ``$CC``, ``cc``, ``gcc``, ``clang``; None if none."""
    candidates = [cc] if cc else [os.environ.get("CC", "").strip(), "cc", "gcc", "clang"]
    for cand in filter(None, candidates):
        found = shutil.which(cand.split()[0] if cand.split() else cand)
        if found:
            return found
    return None


RUNTIME_SOURCES = ("sim_core.c", "streams.c", "events.c", "runtime.c", "rt_memory.c", "rt_torch_npu.c")
NNOPBASE_SOURCES = ("nnopbase.c", "nnopbase_scalar.c")
#: STUB libraries, for torch_npu only (src/stubs/stub_library.c): it links them; they simulate nothing.
STUB_LIBRARIES = ("hccl", "ge_runner", "graph", "acl_tdt_channel", "atb", "acl_op_compiler")
#: The folders of a CANN install that torch_npu wants under ASCEND_HOME_PATH (python -m acl_bindings.sim env).
LAYOUT_DIRS = ("runtime", "compiler", "opp")
OPAPI_SOURCES = ("opapi.c", "ws_plan.c")
#: The SoC facts (kernel directories, the simulator's SoC, the fixed workspace), one file for C and Python: build.py
#: writes them into cannsim_socs.h for the C sources; acl_bindings.socs reads the file itself.
SOCS_JSON = SRC / "socs.json"


def _sources() -> dict[str, list[Path]]:
    """The C files of each library; the operator library takes every file of ``src/ops/`` and ``src/kernels/``."""
    return {
        "runtime": [SRC / n for n in RUNTIME_SOURCES],
        "nnopbase": [SRC / n for n in NNOPBASE_SOURCES],
        "op": [SRC / n for n in OPAPI_SOURCES] + sorted((SRC / "ops").glob("*.c"))
        + sorted((SRC / "kernels").glob("*.c")),
    }


_REGISTER = re.compile(r"^[ \t]*CANNSIM_REGISTER_OP\(([^)]*)\)", re.M)
_NAME = re.compile(r'^"([A-Za-z_][A-Za-z0-9_]*)"$')


def _op_function_names(op_sources: list[Path]) -> list[str]:
    """The entry points the operator files declare with ``CANNSIM_REGISTER_OP("name", ...)``, in file order."""
    names: list[str] = []
    for path in op_sources:
        if path.parent.name != "ops":
            continue
        found = _REGISTER.findall(path.read_text())
        if len(found) != 1:
            raise _BuildError(f"reading {path}", f"An operator file declares its entry points with exactly one "
                              f"CANNSIM_REGISTER_OP(\"name\", ...) line; found {len(found)}.")
        for item in found[0].split(","):
            m = _NAME.match(item.strip())
            if not m:
                raise _BuildError(f"reading {path}",
                                  f"CANNSIM_REGISTER_OP takes string literals of C names; got {item.strip()!r}.")
            if m.group(1) in names:
                raise _BuildError(f"reading {path}", f"the entry point {m.group(1)} is declared twice.")
            names.append(m.group(1))
    return names


def _c_string(text: str) -> str:
    if not all(ch.isalnum() or ch in "_-. " for ch in text):
        raise _BuildError(f"reading {SOCS_JSON}", f"a name may use letters, digits, '_', '-', '.', ' '; got {text!r}")
    return f'"{text}"'


def socs_header(path: Path = SOCS_JSON) -> str:
    """The C header of *path*'s SoC facts (cannsim_socs.h): the tables as C initialisers, the rest as macros."""
    try:
        data = json.loads(path.read_text())
        pairs = [(k, v) for k, v in data["soc_kernel_dirs"].items() if k != "source"]
        prefixes = [(k, v) for k, v in data["soc_kernel_dir_prefixes"].items() if k != "source"]
        ops = [(k, v) for k, v in data["operator_kernel_dirs"].items() if k != "source"]
        simulated, own = data["simulated_kernel_dirs"]["dirs"], data["simulator_soc"]
        mib = int(data["fixed_workspace_mib"]["value"])
        products = data["products"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _BuildError(f"reading {path}", f"{type(exc).__name__}: {exc}") from exc

    def table(rows: list[tuple[str, str]]) -> str:
        return ", ".join(f"{{{_c_string(a)}, {_c_string(b)}}}" for a, b in rows)

    lines = [f"/* generated by build.py from {path.name}: edit that file, not this one */",
             f"#define CANNSIM_SOC_DIRS {table(pairs)}",
             f"#define CANNSIM_SOC_DIR_PREFIXES {table(prefixes)}",
             f"#define CANNSIM_SOC_PRODUCTS {table(sorted(products.items()))}",
             f"#define CANNSIM_OP_KERNEL_DIRS {table([(op, ' '.join(dirs)) for op, dirs in ops])}",
             f"#define CANNSIM_SIMULATED_DIRS {_c_string(' '.join(simulated))}",
             f"#define CANNSIM_SIM_SOC_NAME {_c_string(own['name'])}",
             f"#define CANNSIM_SIM_SOC_DIR {_c_string(own['kernel_dir'])}",
             f"#define CANNSIM_FIXED_WORKSPACE_BYTES ((uint64_t){mib} << 20)"]
    return "\n".join(lines) + "\n"


def _up_to_date(lib_dir: Path, names: dict[str, str], finalize_reference: bool = True) -> bool:
    libs = [lib_dir / n for n in [*names.values(), *_stub_names(names)]]
    if not all(p.is_file() for p in libs):
        return False
    try:
        built_with = json.loads((lib_dir / "BUILD_INFO.json").read_text()).get("finalize_reference", True)
    except (OSError, ValueError, AttributeError):
        built_with = True
    if built_with != finalize_reference:
        return False
    try:
        inputs = [Path(__file__).resolve(), SOCS_JSON]
        for folder in (SRC, SRC / "ops", SRC / "kernels", SRC / "stubs"):
            inputs += [*folder.glob("*.c"), *folder.glob("*.h")]
        newest_input = max(p.stat().st_mtime for p in inputs)
    except (OSError, ValueError):
        return False
    oldest_lib = min(p.stat().st_mtime for p in libs)
    return oldest_lib >= newest_input


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise builds of one tree across processes (no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class _BuildError(Exception):
    """A build step failed: its ``args`` are what failed and how."""


def _compile_all(lib_dir: Path, names: dict[str, str], runtime_name: str, cc: str | None, quiet: bool,
                 finalize_reference: bool = True, sanitize: bool = False) -> dict:
    """Compile the three libraries and publish them into lib_dir; returns BUILD_INFO content."""
    compiler = find_compiler(cc)
    if compiler is None:
        raise _BuildError("no C compiler found", f"Looked for: {cc or os.environ.get('CC') or 'cc, gcc, clang'}.")
    srcs = _sources()
    op_names = _op_function_names(srcs["op"])
    commands: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix=".build-", dir=lib_dir) as tmp:
        tmp_dir = Path(tmp)
        # the operators' entry points, known to the runtime from its load on (sim_core.c)
        (tmp_dir / "cannsim_op_names.h").write_text(
            "/* generated by build.py from the CANNSIM_REGISTER_OP lines of src/ops/ */\n"
            "#define CANNSIM_OP_NAMES " + ", ".join(f'"{n}"' for n in op_names) + "\n")
        (tmp_dir / "cannsim_socs.h").write_text(socs_header())
        flags = CFLAGS + SANITIZE_FLAGS if sanitize else CFLAGS
        _compile_steps(compiler, srcs, tmp_dir, names, runtime_name, quiet, finalize_reference, commands, flags)
        # publish: each rename is atomic, so no reader ever sees a half-written library
        for name in [names[k] for k in ("runtime", "nnopbase", "op")] + _stub_names(names):
            os.replace(tmp_dir / name, lib_dir / name)
    for folder in LAYOUT_DIRS if _stub_names(names) else ():  # the rest of a CANN layout (ASCEND_HOME_PATH)
        (lib_dir.parent / folder).mkdir(exist_ok=True)
    return {"compiler": compiler, "cflags": flags, "ldflags": LDFLAGS, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "libraries": names, "finalize_reference": finalize_reference, "operator_functions": op_names,
            "commands": commands}


def _compile_steps(compiler: str, srcs: dict[str, list[Path]], tmp_dir: Path, names: dict[str, str],
                   runtime_name: str, quiet: bool, finalize_reference: bool, commands: list[list[str]],
                   cflags: list[str] = CFLAGS) -> None:
    """Compile the three libraries into tmp_dir, appending each command to commands."""
    steps = [
        ("runtime", ["-DCANNSIM_HAVE_OP_NAMES", f"-I{tmp_dir}"]
         + ([] if finalize_reference else ["-DCANNSIM_NO_FINALIZE_REFERENCE"])),
        ("nnopbase", [f"-l{runtime_name}"]),
        ("op", [f"-I{tmp_dir}", "-lnnopbase", f"-l{runtime_name}", "-lm"]),
    ]
    srcs, names = dict(srcs), dict(names)
    for stub in _stub_names(names):  # the STUB libraries: one source; libacl_op_compiler NEEDs the runtime
        srcs[stub], names[stub] = [SRC / "stubs" / "stub_library.c"], stub
        steps.append((stub, [f"-DCANNSIM_STUB_NAME={stub[3:-3]}"] + (
            ["-DCANNSIM_STUB_OP_COMPILER", "-Wl,--no-as-needed", f"-l{runtime_name}"] if "compiler" in stub else [])))
    for key, libs in steps:
        cmd = [compiler, *cflags, f"-I{SRC}", "-o", str(tmp_dir / names[key]), *[str(x) for x in srcs[key]],
               f"-L{tmp_dir}", *libs, f"-Wl,-soname,{names[key]}", *LDFLAGS]
        commands.append(cmd)
        if not quiet:
            print(" ".join(cmd), file=sys.stderr)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise _BuildError(f"running the compiler {compiler}", str(exc)) from exc
        if proc.returncode != 0:
            raise _BuildError(
                f"compiling {names[key]} (exit status {proc.returncode})",
                "Command:\n  " + " ".join(cmd) + "\n\nCompiler output:\n" + proc.stdout + proc.stderr,
            )
        if not quiet and (proc.stdout or proc.stderr):
            print(proc.stdout + proc.stderr, file=sys.stderr)


def _stub_names(names: dict[str, str]) -> list[str]:
    """The stub libraries a tree gets: only the default one (libascendcl, as torch_npu links it) needs them."""
    return [f"lib{n}.so" for n in STUB_LIBRARIES] if names["runtime"] == "libascendcl.so" else []


def build(root: Path | str | None = None, *, runtime_name: str = "ascendcl", op_lib_name: str = "opapi_cv",
          cc: str | None = None, quiet: bool = True, force: bool = False, check: bool = True,
          finalize_reference: bool = True, sanitize: bool = False) -> dict:
    """Compile the simulator libraries into ``<root>/lib64/`` (default *root*: this file's folder) unless up to date.

    *runtime_name* (``"ascendcl"`` or ``"acl_rt"``) and *op_lib_name* (``"opapi_cv"`` or ``"opapi"``) name the
    libraries; *cc* as :func:`find_compiler`; *quiet* False prints the commands; *force* rebuilds anyway;
    *finalize_reference* False leaves ``aclFinalizeReference`` out, as older CANN releases (cann-abi.md §8.2);
    *sanitize* builds with ASan and UBSan into ``<root>/lib64-sanitize/``.  Returns ``ok``, ``rebuilt``, ``root``,
    ``lib_dir``, ``libraries`` (name to path), ``compiler`` and ``error``; a failure raises RuntimeError when
    *check*, else it is in the result and ``<root>/BUILD_ERROR.txt``.
    """
    root_path = Path(root).resolve() if root is not None else HERE
    lib_dir = root_path / (SANITIZE_DIR if sanitize else "lib64")
    names = library_names(runtime_name, op_lib_name)
    err_file = root_path / "BUILD_ERROR.txt"
    result: dict = {"ok": False, "rebuilt": False, "root": str(root_path), "lib_dir": str(lib_dir),
                    "libraries": {k: str(lib_dir / v) for k, v in names.items()}, "compiler": None, "error": None}

    def succeed(rebuilt: bool) -> dict:
        result["ok"] = True
        result["rebuilt"] = rebuilt
        with contextlib.suppress(OSError):
            err_file.unlink()
        return result

    try:
        for label, value in (("runtime_name", runtime_name), ("op_lib_name", op_lib_name)):
            if not value or not all(ch.isalnum() or ch in "_-" for ch in value):
                raise _BuildError(f"invalid {label} {value!r}", "Library base names may use letters, digits, '_', '-'.")
        if not force and _up_to_date(lib_dir, names, finalize_reference):  # fast path, also read-only trees
            return succeed(False)
        missing = [str(p) for srcs in _sources().values() for p in srcs if not p.is_file()]
        if missing:
            raise _BuildError("missing source files", "Not found:\n  " + "\n  ".join(missing))
        try:
            lib_dir.mkdir(parents=True, exist_ok=True)
            lock = _file_lock(root_path / ".build.lock")
            lock.__enter__()
        except OSError as exc:
            raise _BuildError(f"cannot write to {root_path}", str(exc)) from exc
        try:
            if not force and _up_to_date(lib_dir, names, finalize_reference):  # built meanwhile
                return succeed(False)
            info = _compile_all(lib_dir, names, runtime_name, cc, quiet, finalize_reference, sanitize)
            result["compiler"] = info["compiler"]
            tmp_info = lib_dir / f".BUILD_INFO.json.{os.getpid()}"
            tmp_info.write_text(json.dumps(info, indent=2) + "\n")
            os.replace(tmp_info, lib_dir / "BUILD_INFO.json")
        except OSError as exc:
            raise _BuildError(f"writing into {lib_dir}", str(exc)) from exc
        finally:
            lock.__exit__(None, None, None)
        return succeed(True)
    except _BuildError as exc:
        what, detail = exc.args
        text = ("The CANN simulator (acl_bindings/sim) could not be built.\n\n"
                f"What failed: {what}\n\n"
                f"{detail.strip()}\n\n"
                "What to do: install a C compiler (for example `apt-get install gcc` or `dnf install gcc`),\n"
                "or point the CC environment variable at one, then reinstall the package or run\n"
                "    python -m acl_bindings.sim.build --force\n"
                "(or `python acl_bindings/sim/build.py --force` from a source checkout).\n")
        with contextlib.suppress(OSError):
            root_path.mkdir(parents=True, exist_ok=True)
            err_file.write_text(text)
        result["error"] = text
        if check:
            raise RuntimeError(text) from None
        return result


def not_built_notice(error_text: str) -> str:
    """The one line that says the simulator was not built, from the build's report *error_text* (BUILD_ERROR.txt):
    the install's warning, the first import's and ``doctor``'s."""
    what = next((line[len("What failed: "):] for line in error_text.splitlines() if line.startswith("What failed: ")),
                "see acl_bindings/sim/BUILD_ERROR.txt")
    return (f"the CPU simulator was not built ({what}): install a C compiler (gcc or clang) and reinstall to use it; "
            "real CANN works without it")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(description="Build the CPU simulator of the CANN libraries.")
    parser.add_argument("--root", default=None, help="tree to build (libraries go to ROOT/lib64)")
    parser.add_argument("--runtime-name", default="ascendcl", help="runtime library base name (ascendcl or acl_rt)")
    parser.add_argument("--op-lib", default="opapi_cv", help="operator library base name (opapi_cv or opapi)")
    parser.add_argument("--cc", default=None, help="C compiler (default: $CC, cc, gcc, clang)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--verbose", action="store_true", help="print compiler commands")
    parser.add_argument("--no-finalize-reference", action="store_true",
                        help="model CANN releases without aclFinalizeReference (the runtime does not export it)")
    parser.add_argument("--sanitize", action="store_true", help="ASan+UBSan build into ROOT/lib64-sanitize")
    args = parser.parse_args(argv)
    res = build(args.root, runtime_name=args.runtime_name, op_lib_name=args.op_lib, cc=args.cc, quiet=not args.verbose,
                force=args.force, check=False, finalize_reference=not args.no_finalize_reference,
                sanitize=args.sanitize)
    if not res["ok"]:
        print(res["error"], file=sys.stderr)
        return 1
    state = "built" if res["rebuilt"] else "up to date"
    print(f"CANN simulator {state}: {res['lib_dir']} ({', '.join(Path(p).name for p in res['libraries'].values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
