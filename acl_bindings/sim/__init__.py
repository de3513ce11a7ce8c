"""The CPU simulator of the CANN libraries (C sources in ``src/``, built into ``lib64/``), and its sim-only controls.

The controls raise RuntimeError when the loaded backend is not the simulator.  What it enforces, and its
``CANN_SIM_*`` switches: docs/fidelity.md.
"""

from __future__ import annotations

from pathlib import Path

from .. import _loader
from .._codes import CANNSIM_ERR_STALE_HANDLE
from .._lib import lib
from ..values import int32_arg

__all__ = ["ROOT", "LIB64", "HANDLE_KINDS", "STALE_HANDLE", "STREAM_MODES", "is_built", "live_handles",
           "call_count", "set_fault", "set_defer", "set_delay", "set_stream_mode", "worker_threads", "set_op_cache",
           "op_cache_entries", "set_repeatable", "version"]

ROOT = Path(__file__).resolve().parent
LIB64 = ROOT / "lib64"
#: The simulator's own status code (CANNSIM_ERR_STALE_HANDLE in src/cannsim.h, outside CANN's code space).
STALE_HANDLE = CANNSIM_ERR_STALE_HANDLE
#: The simulator's stream modes, by their C value (cannsimSetStreamMode).
STREAM_MODES = ("async", "deferred", "sync")
HANDLE_KINDS = ("device_buffer", "host_buffer", "tensor", "int_array", "executor", "stream", "event", "context",
                "device_ref", "tensor_list", "data_buffer")


def is_built() -> bool:
    """Whether the simulator's libraries exist in :data:`LIB64`."""
    return all((LIB64 / name).is_file() for name in ("libascendcl.so", "libnnopbase.so", "libopapi_cv.so"))


def _lib():
    backend = _loader.load()
    if not backend.is_simulator:
        raise RuntimeError("the loaded backend is real CANN, not the simulator: sim-only controls are unavailable")
    return lib


def version() -> str:
    """The simulator's version string (``cannsimVersion``)."""
    return _lib().cannsimVersion().decode()


def live_handles() -> dict[str, int]:
    """Live handles by kind, as counted by the simulator."""
    lib = _lib()
    return {kind: int(lib.cannsimLiveHandles(kind.encode())) for kind in HANDLE_KINDS}


def call_count(func: str) -> int:
    """How many times the C function *func* was called in this process."""
    return int(_lib().cannsimCallCount(func.encode()))


def set_fault(spec: str | None) -> None:
    """Make the Nth call of a function fail: ``"aclrtMalloc:2:207001"``; None or "" clears."""
    _lib().cannsimSetFault(spec.encode() if spec else None)


def set_defer(on: bool) -> bool:
    """Turn the deferred stream mode on, or off (the asynchronous mode); returns whether it was on."""
    return bool(_lib().cannsimSetDefer(1 if on else 0))


def set_delay(ms: int) -> int:
    """Add *ms* of simulated device time to each kernel run; returns the previous value."""
    return int(_lib().cannsimSetDelay(int32_arg("ms", ms, 0, "a delay in [0, 2**31) milliseconds")))


def set_op_cache(on: bool) -> bool:
    """Turn the simulated nnopbase op cache on or off; returns the previous setting."""
    return bool(_lib().cannsimSetOpCache(1 if on else 0))


def op_cache_entries() -> int:
    """Entries in the simulated op cache (pending and usable, all threads)."""
    return int(_lib().cannsimOpCacheEntries())


def set_repeatable(on: bool) -> bool:
    """Whether aclSetAclOpExecutorRepeatable accepts executors (False: 561000 for all); returns the previous."""
    return bool(_lib().cannsimSetRepeatable(1 if on else 0))


def set_stream_mode(mode: str) -> str:
    """Set when queued stream work runs: ``"async"`` (default), ``"deferred"`` or ``"sync"``; returns the previous."""
    if mode not in STREAM_MODES:
        raise ValueError(f"mode: expected one of {', '.join(map(repr, STREAM_MODES))}, got {mode!r}")
    return STREAM_MODES[int(_lib().cannsimSetStreamMode(STREAM_MODES.index(mode)))]


def worker_threads() -> int:
    """How many stream worker threads the simulator runs now (each is joined when its stream goes)."""
    return int(_lib().cannsimWorkerThreads())
