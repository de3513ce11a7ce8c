"""The CPU simulator of the CANN libraries (C sources in ``src/``, built into ``lib64/``).

It exports the runtime, nnopbase and operator symbols with the documented C
signatures and error codes, and says what it is: ``aclrtGetSocName()`` returns
``"CANN-Simulator"`` (unless ``CANN_SIM_SOC`` names another SoC) and it alone
exports ``cannsimVersion``.  The helpers here read its sim-only controls
(live-handle accounting, call counts, fault injection, stream modes) through
the same loaded libraries; they raise when the backend in use is not the
simulator.

Stream work is asynchronous, as on a device: each stream's work runs on its own
worker thread after the call that queued it returned.  ``aclrtFree``, ``aclrtMemcpy``
and ``aclrtMemset`` do not wait for it; freeing or overwriting memory that queued work
uses, or reading memory that it writes (from the host, or by work queued on another
stream: streams are not ordered), fails with the simulator-only code 908401
(``CANNSIM_ERR_QUEUED_WORK``, which real CANN never returns: a device corrupts the
memory silently).  :func:`set_stream_mode` switches to ``"deferred"`` (work runs only
when a synchronisation asks for it: every missing sync is caught) or ``"sync"``
(each call that queues work waits for it: for debugging).

Environment variables read by the simulator itself:

``CANN_SIM_DEVICE_COUNT`` (default 2), ``CANN_SIM_MEM_BYTES`` (device memory per device),
``CANN_SIM_DEFER=1`` (deferred stream mode), ``CANN_SIM_SYNC=1`` (synchronous stream mode), ``CANN_SIM_FAULT`` (make the
Nth call of a function fail: ``"func:nth:code[,...]"``), ``CANN_SIM_REPORT=<path>`` (JSON
report of live handles and init/finalize counts at exit), ``CANN_SIM_OP_CACHE=0`` (or CANN's own
``DISABLE_L2_CACHE``: no op cache; ``ACLNN_CACHE_LIMIT`` bounds it), ``CANN_SIM_REPEATABLE=0``
(``aclSetAclOpExecutorRepeatable`` refuses every executor, 561000), ``CANN_SIM_SOC=<name>`` (the SoC name
``aclrtGetSocName`` answers, read on every call; a name starting with ``Ascend950`` makes phase 1 skip the
INT32_MAX dim check as CANN does there; the simulator still exports ``cannsimVersion``).

``aclInit`` is reference-counted and ``aclFinalizeReference`` exported as in CANN (cann-abi.md
§8.2).  A runtime used after a plain ``aclFinalize`` tore it down while other references were held
answers 100001 with a message saying so, prints the first such use on stderr and counts them in the
report.  Releases without ``aclFinalizeReference`` are modelled by a tree built with
``build(root, finalize_reference=False)`` (``build.py --no-finalize-reference``), whose runtime does
not export it; point ``ACL_BINDINGS_LIB_DIR`` at it.

Simulator-only status code: :data:`STALE_HANDLE` (990101), where the device would silently read
freed memory or stale addresses: a tensor or int array destroyed between the phases, or an address
update that an op-cache wrapper would ignore.  Device memory of another device than the one a copy,
memset or kernel runs on fails with the simulator-only 908402 (``CANNSIM_ERR_OTHER_DEVICE``, cann-abi.md
§8.3).
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
                "device_ref")


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
    """Set when queued stream work runs: ``"async"`` (the default), ``"deferred"`` or ``"sync"``.

    Returns the previous mode.
    """
    if mode not in STREAM_MODES:
        raise ValueError(f"mode: expected one of {', '.join(map(repr, STREAM_MODES))}, got {mode!r}")
    return STREAM_MODES[int(_lib().cannsimSetStreamMode(STREAM_MODES.index(mode)))]


def worker_threads() -> int:
    """How many stream worker threads the simulator runs now (each is joined when its stream goes)."""
    return int(_lib().cannsimWorkerThreads())
