"""The diagnostics report of ``python -m acl_bindings``."""

from __future__ import annotations

from typing import Any

from . import _loader
from .errors import AclError, LibraryNotFoundError

__all__ = ["collect", "format_report"]


def collect() -> dict[str, Any]:
    """Load the backend and gather what it says about itself.

    Raises :class:`LibraryNotFoundError` when no library could be loaded.
    """
    from . import runtime
    from .runtime import Device

    backend = _loader.load()
    info: dict[str, Any] = {
        "backend": backend.kind,
        "simulator": backend.is_simulator,
        "requested": backend.requested,
        "libraries": [{"role": i.role, "path": i.path, "found_via": i.found_via}
                      for i in (backend.runtime, backend.nnopbase, *backend.op_libraries)],
        "op_candidates": [p for p, _ in backend.op_candidates],
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
        from .sim import version

        info["simulator_version"] = version()
    return info


def format_report(info: dict[str, Any]) -> str:
    """Human-readable lines for :func:`collect`'s result."""
    kind = "CPU simulator (no NPU is used)" if info["simulator"] else "real CANN"
    lines = [f"backend:       {info['backend']} - {kind} (ACL_BINDINGS_BACKEND={info['requested']})"]
    if info.get("simulator_version"):
        lines.append(f"simulator:     yes - {info['simulator_version']}")
    else:
        lines.append("simulator:     no")
    for lib in info["libraries"]:
        lines.append(f"{lib['role'] + ':':<14} {lib['path']}  [found via {lib['found_via']}]")
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


def main() -> int:
    """Print the report; exit status 0 when healthy, 1 otherwise."""
    try:
        info = collect()
    except LibraryNotFoundError as exc:
        print(f"backend:       none - {exc}")
        return 1
    print(format_report(info))
    return 1 if info.get("error") else 0
