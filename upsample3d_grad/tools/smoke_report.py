"""The smoke report (``smoke_schema.json``) and the machine's facts in it: empty, per device, summarised, merged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from acl_bindings import AclError, Device, load_backend, runtime, sim, socs

from ..op import OP
from . import hostinfo
from .smoke_cases import tolerances

SCHEMA_VERSION = 2
DETERMINISM_CANN = "deterministic by default per CANN docs (cann-abi.md §5.5)"
REFERENCE_TEXT = "upsample3d_grad.reference, convention 'cann' (float32 window law, cann-abi.md §6.5)"
DETERMINISM_SIM = "deterministic (the simulator's kernel sums in a fixed order)"

#: The L0 kernel of the backward, whose kernel directories decide where it runs (acl_bindings.socs)
KERNEL = "UpsampleNearestExact3dGrad"


def soc_support(soc: str, is_simulator: bool = False) -> tuple[bool | None, str]:
    """``(supported, note)`` for the backward on this SoC, as CANN's kernel lookup decides it, and on the simulator as
    the simulator does (``acl_bindings.socs``; cann-abi.md §11; None: a name CANN's table does not know)."""
    return socs.kernel_support(KERNEL, soc, simulator=is_simulator)


def environment() -> dict[str, Any]:
    """The report's facts about the machine (loads the backend and the operator library, opens no device;
    :class:`acl_bindings.LibraryNotFoundError` when no library loads)."""
    return environment_and_devices(memory=False)[0]


def environment_and_devices(memory: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`environment`, and with *memory* each device's memory (which sets and resets every device once)."""
    backend = load_backend()
    op_found = OP.available()  # loads the operator library, so it is listed below
    info: dict[str, Any] = {}
    devices: list[dict[str, Any]] = []
    try:
        runtime.ensure_initialized()
        info["soc_name"] = runtime.soc_name()
        info["cann_version"] = runtime.cann_version()
        info["acl_version"] = runtime.acl_version()
        info["device_count"] = runtime.device_count()
        for dev_id in range(info["device_count"] if memory else 0):
            with Device(dev_id) as dev:
                free, total = dev.mem_info()
            devices.append({"id": dev_id, "free_bytes": free, "total_bytes": total})
    except AclError as exc:
        info["error"] = " | ".join(str(exc).splitlines())
    supported, note = soc_support(str(info.get("soc_name", "")), backend.is_simulator)
    where = backend.find_op_symbol(OP.phase1_name)
    acl_ver = info.get("acl_version")
    env = {
        "backend": backend.kind,
        "backend_label": "CPU simulator (no NPU is used)" if backend.is_simulator else "real CANN",
        "requested": backend.requested,
        "fallback": backend.fallback or None,
        "simulator_version": sim.version() if backend.is_simulator else None,
        "libraries": [{"role": i.role, "name": i.name, "path": i.path, "found_via": i.found_via}
                      for i in (backend.runtime, backend.nnopbase, *backend.op_libraries)],
        "operator_symbol": OP.phase1_name,
        "operator_found": bool(op_found),
        "operator_library": where[1].path if where else None,
        **_cann_version(info.get("cann_version"), "the runtime library (aclsysGetVersionStr or aclsysGetCANNVersion)"),
        "acl_version": ".".join(str(v) for v in acl_ver) if acl_ver else None,
        "soc_name": str(info.get("soc_name", "")),
        "soc_supported": supported,
        "soc_note": note,
        "device_count": int(info.get("device_count", 0)),
        "determinism": DETERMINISM_SIM if backend.is_simulator else DETERMINISM_CANN,
        "reference": REFERENCE_TEXT,
        **hostinfo.host_facts(),
        "error": info.get("error"),
    }
    return env, devices


def _cann_version(from_library: str | None, library_source: str) -> dict[str, Any]:
    """``cann_version`` and where it was read: the library's answer, else the toolkit's install record."""
    if from_library:
        return {"cann_version": from_library, "cann_version_source": library_source}
    record = hostinfo.toolkit_version()
    if record is not None:
        return {"cann_version": record["version"], "cann_version_source": record["source"]}
    return {"cann_version": None, "cann_version_source": "unknown: no version query answered and no "
                                                         "ascend_toolkit_install.info under $ASCEND_HOME_PATH"}


def unavailable_environment(reason: str, requested: str) -> dict[str, Any]:
    """The environment entry of a machine where no library loads: the host facts and *reason*."""
    return {
        "backend": None, "backend_label": "no library could be loaded", "requested": requested, "fallback": None,
        "simulator_version": None, "libraries": [], "operator_symbol": OP.phase1_name, "operator_found": False,
        "operator_library": None, **_cann_version(None, ""), "acl_version": None, "soc_name": "", "soc_supported": None,
        "soc_note": "unknown: no library could be loaded", "device_count": 0, "determinism": "unknown",
        "reference": REFERENCE_TEXT,
        **hostinfo.host_facts(),
        "error": reason,
    }


def device_report(device_id: int, results: Sequence[dict[str, Any]], mem: tuple[int, int],
                  identical: bool | None) -> dict[str, Any]:
    """The per-device entry of the report."""
    counts = summarize(results)
    return {"id": device_id, "mem_free_bytes": mem[0], "mem_total_bytes": mem[1],
            "cases": counts["total"], "passed": counts["passed"], "failed": counts["failed"] + counts["errors"],
            "skipped": counts["skipped"], "repeat_identical": identical, "status": "pass" if counts["ok"] else "fail"}


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts by status; ``ok`` when nothing failed or errored."""
    by = Counter(r["status"] for r in results)
    return {"total": len(results), "passed": by["pass"], "failed": by["fail"], "errors": by["error"],
            "skipped": by["skip"], "ok": by["fail"] == 0 and by["error"] == 0 and len(results) > 0}


def new_report(env: dict[str, Any], quick: bool, argv: Sequence[str], plans: bool = True) -> dict[str, Any]:
    """An empty report for *env*."""
    return {"schema_version": SCHEMA_VERSION, "tool": "upsample3d-grad smoke", "created_utc": hostinfo.utc_now(),
            "argv": list(argv), "command_line": hostinfo.command_line(argv), "interrupted": False, "quick": bool(quick),
            "plans": bool(plans), "environment": env, "tolerances": tolerances(), "devices": [],
            "summary": summarize([]), "cases": []}


def merge_reports(reports: Sequence[dict[str, Any]], argv: Sequence[str]) -> dict[str, Any]:
    """One report from the per-device reports of ``--devices all`` (environment of the first)."""
    if not reports:
        raise ValueError("no report to merge")
    merged = new_report(reports[0]["environment"], bool(reports[0]["quick"]), argv, bool(reports[0]["plans"]))
    for rep in reports:
        merged["devices"].extend(rep["devices"])
        merged["cases"].extend(rep["cases"])
    merged["summary"] = summarize(merged["cases"])
    merged["interrupted"] = any(bool(rep.get("interrupted")) for rep in reports)
    if not all(d["status"] == "pass" for d in merged["devices"]) or merged["interrupted"]:
        merged["summary"]["ok"] = False
    return merged
