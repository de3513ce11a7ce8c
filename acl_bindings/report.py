"""The diagnostics report of ``python -m acl_bindings``; its exit codes are the ``upsample3d-grad`` command's."""

from __future__ import annotations

import argparse
import warnings
from typing import Any, Sequence

from . import _config, _loader, runtime
from .errors import AclError, BackendFallbackWarning, LibraryNotFoundError
from .runtime import Device
from .sim import version as sim_version

__all__ = ["collect", "format_report", "main", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_NO_LIBRARY"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_LIBRARY = 0, 1, 2, 3


def collect() -> dict[str, Any]:
    """Load the backend and gather what it says about itself (:class:`LibraryNotFoundError` if nothing loads)."""
    backend = _loader.load()
    info: dict[str, Any] = {
        "fallback": backend.fallback,
        "backend": backend.kind,
        "simulator": backend.is_simulator,
        "requested": backend.requested,
        "libraries": [{"role": i.role, "path": i.path, "found_via": i.found_via}
                      for i in (backend.runtime, backend.nnopbase, *backend.op_libraries)],
        "op_candidates": [p for p, _ in backend.op_candidates],
        "op_failures": [{"path": p, "reason": r} for p, r in backend.op_failures()],
    }
    try:
        runtime.ensure_initialized()
        info["soc_name"] = runtime.soc_name()
        info["cann_version"] = runtime.cann_version()
        info["acl_version"] = runtime.acl_version()
        count = runtime.device_count()
        info["device_count"] = count
        devices = []
        for dev_id in range(count):
            with Device(dev_id) as dev:
                free, total = dev.mem_info()
            devices.append({"id": dev_id, "free_bytes": free, "total_bytes": total})
        info["devices"] = devices
    except AclError as exc:
        info["error"] = str(exc)
    if backend.is_simulator:
        info["simulator_version"] = sim_version()
    return info


def format_report(info: dict[str, Any]) -> str:
    """Human-readable lines for :func:`collect`'s result."""
    kind = "CPU simulator (no NPU is used)" if info["simulator"] else "real CANN"
    lines = [info["fallback"]] if info.get("fallback") else []
    lines.append(f"backend:       {info['backend']} - {kind} (ACL_BINDINGS_BACKEND={info['requested']})")
    version = info.get("simulator_version")
    lines.append(f"simulator:     yes - {version}" if version else "simulator:     no")
    for lib in info["libraries"]:
        lines.append(f"{lib['role'] + ':':<14} {lib['path']}  [found via {lib['found_via']}]")
    for failure in info.get("op_failures", []):
        lines.append(f"{'opapi:':<14} {failure['path']}  FAILED TO LOAD: {failure['reason']}")
    if len(info["libraries"]) == 2:
        lines.append(f"{'opapi:':<14} loaded on first operator call; candidates: "
                     + (", ".join(info["op_candidates"]) or "none found"))
    lines.append(f"CANN version:  {info.get('cann_version') or 'unknown (no version query exported)'}")
    if info.get("acl_version"):
        lines.append("ACL API:       " + ".".join(str(v) for v in info["acl_version"]))
    lines.append(f"SoC name:      {info.get('soc_name', '?')}")
    lines.append(f"devices:       {info.get('device_count', '?')}")
    for dev in info.get("devices", []):
        lines.append(f"  device {dev['id']}: {dev['total_bytes'] / 2**30:.1f} GiB total, "
                     f"{dev['free_bytes'] / 2**30:.1f} GiB free")
    if info.get("error"):
        lines.append(f"error:         {info['error']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m acl_bindings``."""
    return argparse.ArgumentParser(
        prog="python -m acl_bindings",
        description="Which backend this process would use (real CANN or the CPU simulator), which libraries, "
                    "how each was found, the CANN version, the SoC and the devices.",
        epilog="Backend: ACL_BINDINGS_BACKEND=auto (default: real CANN if it loads, else the simulator) | cann | "
               "sim. Exit codes: 0 healthy, 1 unhealthy (a runtime error, or CANN present but not loading), "
               "2 usage, 3 no library could be loaded.")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report; return the exit code (``EXIT_*``, as the parser's epilog says)."""
    build_parser().parse_args(argv)
    try:
        _config.backend()
    except ValueError as exc:  # a bad ACL_BINDINGS_BACKEND value, named in the message
        print(f"backend:       none - {exc}")
        return EXIT_NO_LIBRARY
    try:
        with warnings.catch_warnings():  # the fallback notice is the report's first line instead
            warnings.simplefilter("ignore", BackendFallbackWarning)
            info = collect()
    except LibraryNotFoundError as exc:
        print(f"backend:       none - {exc}")
        return EXIT_NO_LIBRARY
    print(format_report(info))
    return EXIT_FAIL if info.get("error") or info.get("fallback") or info.get("op_failures") else EXIT_OK
