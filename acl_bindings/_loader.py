"""Finding and loading the CANN libraries, or the simulator.

Nothing is loaded at import.  The first raw call (or :func:`load`) chooses the
backend under a lock, once per process.

Runtime (``libascendcl.so``, else ``libacl_rt.so``) and ``libnnopbase.so`` are
looked for in these folders, in order; a folder on a path with a ``stub``
component is never searched (CANN ships link-time stubs there):

1. ``$ACL_BINDINGS_LIB_DIR`` (the folder itself, then its ``lib64``);
2. ``$ASCEND_HOME_PATH``, then ``$ASCEND_TOOLKIT_HOME``: ``<p>/lib64`` and
   ``<p>/<arch>-linux/lib64`` (8.x ``ascend-toolkit`` and 8.5+/9.x ``cann`` layouts);
3. each entry of ``$LD_LIBRARY_PATH``;
4. the default roots ``/usr/local/Ascend/cann`` and
   ``/usr/local/Ascend/ascend-toolkit/latest`` (``lib64``, ``<arch>-linux/lib64``).

Operator symbols are looked up per symbol, in this order (cann-abi.md §4.1):

1. custom operator packages: ``<e>/op_api/lib/libcust_opapi.so`` for each entry of
   ``$ASCEND_CUSTOM_OPP_PATH``;
2. vendor packages: ``$ASCEND_OPP_PATH/vendors/<v>/op_api/lib/libcust_opapi.so`` for
   each ``v`` of the ``load_priority=`` line of ``vendors/config.ini``;
3. ``libopapi_cv.so``, then ``libopapi_math.so``, ``libopapi_nn.so``,
   ``libopapi_transformer.so``, ``libopapi_legacy.so``: in the runtime's folder first,
   then in the other folders above;
4. ``libopapi.so``, only where no ``libopapi_*.so`` exists (the two are never mixed).

Backend choice (``ACL_BINDINGS_BACKEND``): ``auto`` uses real CANN when the runtime
is found and falls back to the simulator built in ``acl_bindings/sim/lib64``;
``cann`` requires real CANN; ``sim`` uses the embedded simulator.  A library that
exports ``cannsimVersion`` is the simulator, wherever it was found, and is
reported as such.
"""

from __future__ import annotations

import configparser
import ctypes
import logging
import os
import platform
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import _config
from .errors import LibraryNotFoundError, SimulatorUnavailableError

__all__ = ["LibraryInfo", "Backend", "load", "loaded", "SIM_ROOT"]

_log = logging.getLogger("acl_bindings")

#: The embedded simulator's root (its libraries are in ``SIM_ROOT / "lib64"``).
SIM_ROOT = Path(__file__).resolve().parent / "sim"

RUNTIME_NAMES = ("libascendcl.so", "libacl_rt.so")
NNOPBASE_NAME = "libnnopbase.so"
OPAPI_SPLIT = ("libopapi_cv.so", "libopapi_math.so", "libopapi_nn.so", "libopapi_transformer.so",
               "libopapi_legacy.so")
OPAPI_LEGACY = "libopapi.so"
CUSTOM_OPAPI = os.path.join("op_api", "lib", "libcust_opapi.so")
DEFAULT_ROOTS = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")

FIX_HINT = (
    "To use a real CANN install, run `source /usr/local/Ascend/cann/set_env.sh` (CANN 8.5+/9.x) or "
    "`source /usr/local/Ascend/ascend-toolkit/set_env.sh` (CANN 8.x), or set ASCEND_HOME_PATH to the install "
    "root, or ACL_BINDINGS_LIB_DIR to the folder holding libascendcl.so and libnnopbase.so. "
    "To use the CPU simulator instead, set ACL_BINDINGS_BACKEND=sim (or auto)."
)


@dataclass(frozen=True)
class LibraryInfo:
    """One loaded library: its role, file name, absolute path and how it was found."""

    role: str
    name: str
    path: str
    found_via: str


@dataclass
class Backend:
    """The libraries in use by this process.

    ``kind`` is ``"cann"`` or ``"sim"``; ``requested`` is the ``ACL_BINDINGS_BACKEND``
    value; ``tried`` lists every ``(path, reason)`` looked at while choosing.
    """

    kind: str
    requested: str
    runtime: LibraryInfo
    nnopbase: LibraryInfo
    handles: dict[str, ctypes.CDLL]
    op_candidates: list[tuple[str, str]]
    tried: list[tuple[str, str]] = field(default_factory=list)
    op_libraries: list[LibraryInfo] = field(default_factory=list)
    _op_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def is_simulator(self) -> bool:
        """True when the libraries in use are the CPU simulator."""
        return self.kind == "sim"

    def handle(self, role: str) -> ctypes.CDLL:
        """The CDLL of ``runtime`` or ``nnopbase``."""
        info = self.runtime if role == "runtime" else self.nnopbase
        return self.handles[info.path]

    def find_op_symbol(self, symbol: str) -> tuple[ctypes.CDLL, LibraryInfo] | None:
        """Find *symbol* in the operator libraries, loading them in search order as needed."""
        with self._op_lock:
            for path, via in self.op_candidates:
                dll = self.handles.get(path)
                if dll is None:
                    try:
                        dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    except OSError as exc:
                        self.tried.append((path, f"failed to load: {exc}"))
                        _log.debug("operator library %s failed to load: %s", path, exc)
                        continue
                    self.handles[path] = dll
                    self.op_libraries.append(LibraryInfo("opapi", os.path.basename(path), path, via))
                    _log.debug("loaded operator library %s (%s)", path, via)
                if hasattr(dll, symbol):
                    info = next(i for i in self.op_libraries if i.path == path)
                    return dll, info
        return None

    def describe(self) -> str:
        """A few lines saying which backend is in use and where each library came from."""
        label = "CPU simulator (no NPU is used)" if self.is_simulator else "real CANN"
        lines = [f"backend: {self.kind} - {label} (ACL_BINDINGS_BACKEND={self.requested})"]
        for info in (self.runtime, self.nnopbase, *self.op_libraries):
            lines.append(f"  {info.role:<9} {info.path}  [found via {info.found_via}]")
        if not self.op_libraries:
            lines.append("  opapi     (loaded on first operator call) candidates: "
                         + ", ".join(p for p, _ in self.op_candidates[:6]))
        return "\n".join(lines)


_lock = threading.Lock()
_backend: Backend | None = None


def loaded() -> Backend | None:
    """The backend if libraries were already loaded, else None (never loads)."""
    return _backend


def load() -> Backend:
    """Load the libraries once (thread-safe) and return the :class:`Backend`."""
    global _backend
    if _backend is not None:
        return _backend
    with _lock:
        if _backend is None:
            _backend = _choose()
            _log.info("%s", _backend.describe())
    return _backend


# --------------------------------------------------------------------------- search steps

def _is_stub(folder: str) -> bool:
    return "stub" in Path(folder).parts


def _arch_dirs(root: str) -> list[str]:
    arch = platform.machine() or "x86_64"
    return [os.path.join(root, "lib64"), os.path.join(root, f"{arch}-linux", "lib64")]


def search_folders() -> list[tuple[str, str]]:
    """The ordered ``(folder, found_via)`` list searched for the runtime and nnopbase."""
    folders: list[tuple[str, str]] = []
    override = _config.lib_dir()
    if override:
        folders += [(override, "ACL_BINDINGS_LIB_DIR"), (os.path.join(override, "lib64"), "ACL_BINDINGS_LIB_DIR")]
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        root = _config.env(var)
        if root:
            folders += [(d, var) for d in _arch_dirs(root)]
    for entry in (_config.env("LD_LIBRARY_PATH") or "").split(":"):
        if entry:
            folders.append((entry, "LD_LIBRARY_PATH"))
    for root in DEFAULT_ROOTS:
        folders += [(d, f"default root {root}") for d in _arch_dirs(root)]
    seen: set[str] = set()
    unique = []
    for folder, via in folders:
        key = os.path.normpath(folder)
        if key not in seen:
            seen.add(key)
            unique.append((folder, via))
    return unique


def _find_one(names: tuple[str, ...], folders: list[tuple[str, str]], tried: list[tuple[str, str]],
              role: str) -> tuple[LibraryInfo, ctypes.CDLL] | None:
    for folder, via in folders:
        if _is_stub(folder):
            tried.append((folder, "skipped: a stub folder holds link-time stubs only"))
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                tried.append((path, "not found"))
                continue
            try:
                dll = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                tried.append((path, f"failed to load: {exc}"))
                continue
            return LibraryInfo(role, name, os.path.abspath(path), via), dll
    return None


def _vendor_dirs() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for entry in (_config.env("ASCEND_CUSTOM_OPP_PATH") or "").split(":"):
        if entry:
            out.append((os.path.join(entry, CUSTOM_OPAPI), "ASCEND_CUSTOM_OPP_PATH"))
    opp = _config.env("ASCEND_OPP_PATH")
    if opp:
        ini = os.path.join(opp, "vendors", "config.ini")
        if os.path.isfile(ini):
            parser = configparser.ConfigParser()
            try:
                with open(ini, encoding="utf-8", errors="replace") as fh:
                    parser.read_string("[top]\n" + fh.read())
                vendors = parser.get("top", "load_priority", fallback="")
            except configparser.Error as exc:
                _log.warning("could not parse %s: %s", ini, exc)
                vendors = ""
            for vendor in (v.strip() for v in vendors.split(",")):
                if vendor:
                    out.append((os.path.join(opp, "vendors", vendor, CUSTOM_OPAPI), f"{ini} load_priority"))
    return out


def op_candidates(runtime_dir: str, folders: list[tuple[str, str]],
                  include_custom: bool = True) -> list[tuple[str, str]]:
    """Operator library paths in lookup order (see the module docstring)."""
    out = [(p, via) for p, via in (_vendor_dirs() if include_custom else []) if os.path.isfile(p)]
    dirs = [(runtime_dir, "beside the runtime")] + [(f, v) for f, v in folders
                                                    if os.path.normpath(f) != os.path.normpath(runtime_dir)]
    split = []
    for name in OPAPI_SPLIT:
        for folder, via in dirs:
            path = os.path.join(folder, name)
            if not _is_stub(folder) and os.path.isfile(path):
                split.append((os.path.abspath(path), via))
                break
    out += split
    if not split:
        for folder, via in dirs:
            path = os.path.join(folder, OPAPI_LEGACY)
            if not _is_stub(folder) and os.path.isfile(path):
                out.append((os.path.abspath(path), via))
                break
    return out


def _load_from(folders: list[tuple[str, str]], tried: list[tuple[str, str]], requested: str,
               include_custom: bool = True) -> Backend | None:
    runtime = _find_one(RUNTIME_NAMES, folders, tried, "runtime")
    if runtime is None:
        return None
    rt_info, rt_dll = runtime
    rt_dir = os.path.dirname(rt_info.path)
    nn_folders = [(rt_dir, rt_info.found_via)] + folders
    nnop = _find_one((NNOPBASE_NAME,), nn_folders, tried, "nnopbase")
    if nnop is None:
        tried.append((rt_dir, f"{NNOPBASE_NAME} not found beside {rt_info.name} or in any search folder"))
        return None
    nn_info, nn_dll = nnop
    kind = "sim" if hasattr(rt_dll, "cannsimVersion") else "cann"
    return Backend(kind=kind, requested=requested, runtime=rt_info, nnopbase=nn_info,
                   handles={rt_info.path: rt_dll, nn_info.path: nn_dll},
                   op_candidates=op_candidates(rt_dir, folders, include_custom), tried=tried)


def simulator_status() -> tuple[bool, str]:
    """``(available, explanation)`` for the embedded simulator, building it if it was never built."""
    lib64 = SIM_ROOT / "lib64"
    err = SIM_ROOT / "BUILD_ERROR.txt"
    if not (lib64 / RUNTIME_NAMES[0]).is_file() and not err.is_file() and (SIM_ROOT / "build.py").is_file():
        _log.info("the simulator is not built yet: building it in %s", lib64)
        _build_simulator()
    if (lib64 / RUNTIME_NAMES[0]).is_file() and (lib64 / NNOPBASE_NAME).is_file():
        return True, f"simulator built in {lib64}"
    reason = err.read_text(errors="replace").strip() if err.is_file() else f"no libraries in {lib64}"
    return False, ("the CPU simulator is unavailable: " + reason +
                   "\nInstall a C compiler (gcc or clang) and reinstall the package, or run "
                   "`python -m acl_bindings.sim.build`.")


def _build_simulator() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_acl_bindings_sim_build", SIM_ROOT / "build.py")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.build(SIM_ROOT, check=False)
    except Exception as exc:  # the build writes BUILD_ERROR.txt itself; anything else is reported here
        (SIM_ROOT / "BUILD_ERROR.txt").write_text(f"building the simulator failed: {exc}\n")


def _tried_text(tried: list[tuple[str, str]]) -> str:
    return "\n".join(f"  - {path}: {reason}" for path, reason in tried) or "  (nothing)"


def _choose() -> Backend:
    requested = _config.backend()
    tried: list[tuple[str, str]] = []
    if requested in ("auto", "cann"):
        found = _load_from(search_folders(), tried, requested)
        if found is not None and (requested == "auto" or found.kind == "cann"):
            return found
        if requested == "cann":
            why = ("only the CPU simulator was found at " + found.runtime.path
                   if found is not None else "no CANN runtime library was found")
            raise LibraryNotFoundError(
                f"ACL_BINDINGS_BACKEND=cann, but {why}.\nTried:\n{_tried_text(tried)}\n{FIX_HINT}", tried)
    ok, why = simulator_status()
    if not ok:
        raise SimulatorUnavailableError(
            f"No CANN install was found and {why}\nTried:\n{_tried_text(tried)}\n{FIX_HINT}", tried)
    via = "ACL_BINDINGS_BACKEND=sim" if requested == "sim" else "fallback: no CANN install found"
    sim = _load_from([(str(SIM_ROOT / "lib64"), f"embedded simulator ({via})")], tried, requested,
                     include_custom=False)
    if sim is None or sim.kind != "sim":
        raise SimulatorUnavailableError(
            f"The embedded simulator in {SIM_ROOT / 'lib64'} could not be loaded.\nTried:\n{_tried_text(tried)}",
            tried)
    return sim
