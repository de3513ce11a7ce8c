"""Finding and loading the CANN libraries, or the simulator: once per process, on first use (docs/design.md,
"Finding and loading the libraries")."""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import importlib.util
import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import _config, _dlerror
from ._search import NNOPBASE_NAME, RUNTIME_NAMES, _locate, _orphans, op_candidates, search_folders
from .errors import (
    BackendFallbackWarning,
    LibraryNotFoundError,
    SimulatorNotBuiltWarning,
    SimulatorUnavailableError,
    TwoRuntimesError,
)

__all__ = ["LibraryInfo", "Backend", "load", "loaded", "SIM_ROOT"]

_log = logging.getLogger("acl_bindings")

#: The embedded simulator's root (its libraries are in ``SIM_ROOT / "lib64"``).
SIM_ROOT = Path(__file__).resolve().parent / "sim"

#: Symbols without which a library is not the one its name says (cann-abi.md §4.1).
RUNTIME_ESSENTIAL = ("aclInit", "aclrtSetDevice")
NNOPBASE_ESSENTIAL = ("aclCreateTensor",)

FIX_HINT = (
    "To use a real CANN install, source its environment script in the shell before starting Python: "
    "`source /usr/local/Ascend/cann/set_env.sh` (CANN 8.5+/9.x) or `source /usr/local/Ascend/ascend-toolkit/"
    "set_env.sh` (CANN 8.x). It sets LD_LIBRARY_PATH, which the dynamic linker reads only when a process starts and "
    "through which CANN's libraries find the ones they need (the driver's, libc_sec.so, each other): setting "
    "ASCEND_HOME_PATH or ACL_BINDINGS_LIB_DIR (a folder holding libascendcl.so and libnnopbase.so), or os.environ "
    "inside Python, finds the libraries but not those dependencies."
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
    """The libraries in use by this process: ``kind`` is ``"cann"`` or ``"sim"``, ``requested`` the
    ``ACL_BINDINGS_BACKEND`` value, ``tried`` every ``(path, reason)`` looked at while choosing."""

    kind: str
    requested: str
    runtime: LibraryInfo
    nnopbase: LibraryInfo
    handles: dict[str, ctypes.CDLL]
    op_candidates: list[tuple[str, str]]
    tried: list[tuple[str, str]] = field(default_factory=list)
    op_libraries: list[LibraryInfo] = field(default_factory=list)
    #: ``"CANN at X failed to load: <reason>; using the simulator"`` when ``auto`` fell back from a
    #: CANN install that is present but does not load; empty otherwise.
    fallback: str = ""
    _op_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def is_simulator(self) -> bool:
        """True when the libraries in use are the CPU simulator."""
        return self.kind == "sim"

    def check_one_runtime(self) -> None:
        """Raise :class:`TwoRuntimesError` when another file of this runtime's name is now mapped into the
        process (a torch_npu imported after the load, say); reads ``/proc/self/maps``."""
        others = mapped_libraries(os.path.basename(self.runtime.path)) - {os.path.realpath(self.runtime.path)}
        if others:
            raise _two_runtimes(sorted(others)[0], self.runtime.path, self.runtime.found_via, list(self.tried))

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
                    if any(p == path for p, _ in self.op_failures()):
                        continue
                    try:
                        dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    except OSError as exc:
                        why = _dlerror.explain(path, str(exc))
                        self.tried.append((path, f"{_FAILED}{why}"))
                        _log.warning("operator library %s failed to load: %s", path, why)
                        continue
                    self.handles[path] = dll
                    self.op_libraries.append(LibraryInfo("opapi", os.path.basename(path), path, via))
                    _log.debug("loaded operator library %s (%s)", path, via)
                if hasattr(dll, symbol):
                    return dll, next(i for i in self.op_libraries if i.path == path)
        return None

    def op_failures(self) -> list[tuple[str, str]]:
        """``(path, reason)`` of each operator library that was found but did not load."""
        paths = {p for p, _ in self.op_candidates}
        return [(p, r[len(_FAILED):]) for p, r in self.tried if p in paths and r.startswith(_FAILED)]

    def describe(self) -> str:
        """A few lines saying which backend is in use and where each library came from."""
        label = "CPU simulator (no NPU is used)" if self.is_simulator else "real CANN"
        lines = [f"backend: {self.kind} - {label} (ACL_BINDINGS_BACKEND={self.requested})"]
        for info in (self.runtime, self.nnopbase, *self.op_libraries):
            lines.append(f"  {info.role:<9} {info.path}  [found via {info.found_via}]")
        for path, why in self.op_failures():
            lines.append(f"  opapi     {path}  FAILED TO LOAD: {why}")
        if not self.op_libraries:
            lines.append("  opapi     (loaded on first operator call) candidates: "
                         + ", ".join(p for p, _ in self.op_candidates[:6]))
        return "\n".join(lines)


_FAILED = "failed to load: "
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


def _open(path: str, symbols: tuple[str, ...], tried: list[tuple[str, str]],
          broken: list[tuple[str, str]]) -> ctypes.CDLL | None:
    """*path* loaded, or None when it does not load or does not export every symbol of *symbols* (then unloaded);
    a failure is said in *tried* and *broken*."""
    try:
        dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        why = _dlerror.explain(path, str(exc))
    else:
        missing = [name for name in symbols if not hasattr(dll, name)]
        if not missing:
            return dll
        why = (f"it loads but does not export {', '.join(missing)} (not a CANN {os.path.basename(path)}: a "
               "link-time stub, or another library of that name)")
        _unload(dll)
    tried.append((path, f"{_FAILED}{why}"))
    broken.append((os.path.dirname(path), f"{os.path.basename(path)}: {why}"))
    return None


def _unload(dll: ctypes.CDLL) -> None:
    """dlclose an unused library: left loaded, it would stand in for the simulator's library of that soname."""
    with contextlib.suppress(OSError, AttributeError):
        _ctypes.dlclose(dll._handle)  # type: ignore[attr-defined]


def mapped_libraries(name: str) -> set[str]:
    """Real paths of the libraries called *name* (``libascendcl.so``) mapped into this process (Linux's
    ``/proc/self/maps``; empty elsewhere)."""
    found: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(path := parts[5].strip()) == name:
                found.add(os.path.realpath(path))
    return found


def _two_runtimes(other: str, ours: str, via: str, tried: list[tuple[str, str]]) -> TwoRuntimesError:
    return TwoRuntimesError(
        f"{os.path.basename(ours)} is loaded in this process from {other} (by torch_npu or another library), and "
        f"the loader chose {ours} ({via}): two CANN runtimes in one process share no devices, streams "
        f"or memory. Set ACL_BINDINGS_LIB_DIR={os.path.dirname(other)} (or source the set_env.sh of that "
        "install) before the first use", tried)


def _load_from(folders: list[tuple[str, str]], tried: list[tuple[str, str]], requested: str,
               broken: list[tuple[str, str]], include_custom: bool = True) -> Backend | None:
    """The first runtime of *folders* that loads with its nnopbase, or None; *broken* gets what is there but fails."""
    runtimes = _locate(RUNTIME_NAMES, folders, tried)
    if not runtimes:
        broken.extend(_orphans(folders))
        return None
    for rt_path, rt_name, rt_via in runtimes:
        rt_dir = os.path.dirname(rt_path)
        # only beside the runtime (cann-abi.md §4.2): an nnopbase of another install would bind to the wrong one
        nn_found = _locate((NNOPBASE_NAME,), [(rt_dir, rt_via)], None)
        if not nn_found:
            why = f"{NNOPBASE_NAME} not found beside {rt_name} (a partial install)"
            tried.append((rt_dir, why))
            broken.append((rt_dir, why))
            continue
        present = mapped_libraries(os.path.basename(rt_path))  # another file of that name (cann-abi.md §9.4)
        if present and os.path.realpath(rt_path) not in present:
            raise _two_runtimes(sorted(present)[0], rt_path, rt_via, tried)
        rt_dll = _open(rt_path, RUNTIME_ESSENTIAL, tried, broken)
        if rt_dll is None:
            continue
        nn_path, _, nn_via = nn_found[0]
        nn_dll = _open(nn_path, NNOPBASE_ESSENTIAL, tried, broken)
        if nn_dll is None:
            _unload(rt_dll)
            continue
        rt_info = LibraryInfo("runtime", rt_name, rt_path, rt_via)
        nn_info = LibraryInfo("nnopbase", NNOPBASE_NAME, nn_path, nn_via)
        kind = "sim" if hasattr(rt_dll, "cannsimVersion") else "cann"
        return Backend(kind=kind, requested=requested, runtime=rt_info, nnopbase=nn_info,
                       handles={rt_info.path: rt_dll, nn_info.path: nn_dll},
                       op_candidates=op_candidates(rt_dir, folders, include_custom), tried=tried)
    return None


def _sim_build():
    """``sim/build.py``, loaded from its file (not as ``acl_bindings.sim.build``: that package imports this one,
    and setup.py loads the same file the same way)."""
    spec = importlib.util.spec_from_file_location("_acl_bindings_sim_build", SIM_ROOT / "build.py")
    assert spec is not None and spec.loader is not None  # (a .py file has a source loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulator_status() -> tuple[bool, str]:
    """``(available, explanation)`` for the embedded simulator, building it if it was never built."""
    lib64 = SIM_ROOT / "lib64"
    err = SIM_ROOT / "BUILD_ERROR.txt"
    if not (lib64 / RUNTIME_NAMES[0]).is_file() and not err.is_file() and (SIM_ROOT / "build.py").is_file():
        _log.info("the simulator is not built yet: building it in %s", lib64)
        try:
            _sim_build().build(SIM_ROOT, check=False)
        except Exception as exc:  # the build writes BUILD_ERROR.txt itself; anything else is reported here
            err.write_text(f"building the simulator failed: {exc}\n")
    if (lib64 / RUNTIME_NAMES[0]).is_file() and (lib64 / NNOPBASE_NAME).is_file():
        return True, f"simulator built in {lib64}"
    reason = err.read_text(errors="replace").strip() if err.is_file() else f"no libraries in {lib64}"
    if "What to do:" not in reason:  # (the build's own report says what to do; anything else gets it here)
        reason += ("\nWhat to do: install a C compiler (gcc or clang) and reinstall the package, or run "
                   "`python -m acl_bindings.sim.build --force`.")
    return False, "the CPU simulator is unavailable: " + reason


def simulator_not_built() -> str | None:
    """The one-line notice (``sim/build.py``'s) where the simulator's build failed at install, else None."""
    err = SIM_ROOT / "BUILD_ERROR.txt"
    if (SIM_ROOT / "lib64" / RUNTIME_NAMES[0]).is_file() or not err.is_file():
        return None
    return _sim_build().not_built_notice(err.read_text(errors="replace"))


def warn_if_simulator_not_built() -> None:
    """At the first import: :class:`SimulatorNotBuiltWarning` where the simulator was not built and no CANN runtime
    is in a folder the search looks at (a few stat calls; nothing is loaded).  Older pips do not show the install's
    warning, so this is where a user without a compiler first hears of it."""
    notice = simulator_not_built()
    if notice is None:
        return
    with contextlib.suppress(ValueError):  # (a bad ACL_BINDINGS_BACKEND is reported by the first call)
        requested = _config.backend()
        if requested == "cann" or (requested == "auto" and _locate(RUNTIME_NAMES, search_folders(), None)):
            return
        warnings.warn_explicit(notice, SimulatorNotBuiltWarning, "acl_bindings", 0)


def _tried_text(tried: list[tuple[str, str]]) -> str:
    return "\n".join(f"  - {path}: {reason}" for path, reason in tried) or "  (nothing)"


def _failure_text(broken: list[tuple[str, str]]) -> str:
    """``"CANN at X failed to load: <reason>"`` for the first CANN library that is present and does not load."""
    where, why = broken[0]
    return f"CANN at {where} failed to load: {why}"


def _choose() -> Backend:
    requested = _config.backend()
    tried: list[tuple[str, str]] = []
    broken: list[tuple[str, str]] = []
    if requested in ("auto", "cann"):
        found = _load_from(search_folders(), tried, requested, broken)
        if found is not None and (requested == "auto" or found.kind == "cann"):
            if found.kind == "sim" and broken:
                found.fallback = _announce(broken)
            return found
        if requested == "cann":
            if found is not None:
                why = "only the CPU simulator was found at " + found.runtime.path
            elif broken:
                why = _failure_text(broken)
            else:
                why = "no CANN runtime library was found"
            raise LibraryNotFoundError(
                f"ACL_BINDINGS_BACKEND=cann, but {why}.\nTried:\n{_tried_text(tried)}\n{FIX_HINT} To use the CPU "
                "simulator instead, set ACL_BINDINGS_BACKEND=sim (or auto).", tried)
    ok, why = simulator_status()
    if not ok:
        head = f"{_failure_text(broken)}, and" if broken else "No CANN install was found and"
        raise SimulatorUnavailableError(f"{head} {why}\nTried:\n{_tried_text(tried)}\n{FIX_HINT}", tried)
    if requested == "sim":
        via = "ACL_BINDINGS_BACKEND=sim"
    else:
        via = "fallback: CANN failed to load" if broken else "fallback: no CANN install found"
    sim = _load_from([(str(SIM_ROOT / "lib64"), f"embedded simulator ({via})")], tried, requested, [],
                     include_custom=False)
    if sim is None or sim.kind != "sim":
        raise SimulatorUnavailableError(
            f"The embedded simulator in {SIM_ROOT / 'lib64'} could not be loaded.\nTried:\n{_tried_text(tried)}",
            tried)
    if broken:
        sim.fallback = _announce(broken)
    return sim


def _announce(broken: list[tuple[str, str]]) -> str:
    """Log and warn (:class:`BackendFallbackWarning`) that the CANN of *broken* did not load; return the notice."""
    notice = f"{_failure_text(broken)}; using the simulator"
    _log.warning("%s", notice)
    warnings.warn(notice, BackendFallbackWarning, stacklevel=4)
    return notice
