"""``upsample3d-grad doctor`` (the setup, checked) and ``upsample3d-grad run`` (the official sample)."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from acl_bindings import AclError, simulator_not_built

from ..session import Session
from . import hostinfo, smoke
from ._cli_shared import (
    _RUN,
    EXIT_FAIL,
    EXIT_NO_LIBRARY,
    EXIT_OK,
    PROG,
    _check_device,
    _error,
    _gib,
    _load,
    _no_library_reason,
    _one_line,
    _unavailable_environment,
    _write_json,
)
from .smoke import SAMPLE_EXPECTED, SCHEMA_VERSION

SAMPLE_GRAD_OUT_SHAPE = (2, 2, 2, 2, 2)
SAMPLE_OUTPUT_SIZE = (2, 2, 2)
SAMPLE_INPUT_SIZE = (2, 2, 1, 1, 1)


def _sample(device_id: int) -> tuple[list[float], int]:
    """Run the official sample on *device_id*: ``(the result as a flat list, the workspace size)``."""
    with Session(device_id) as s:
        out = s.backward(np.arange(1, 33, dtype=np.float32).reshape(SAMPLE_GRAD_OUT_SHAPE), SAMPLE_OUTPUT_SIZE,
                         SAMPLE_INPUT_SIZE)
        assert isinstance(out, np.ndarray)
        return out.ravel().tolist(), s.last_workspace_size


def _doctor_report(args: argparse.Namespace, env: dict[str, Any], devices: list[dict[str, Any]],
                   problems: list[str], sample: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "tool": f"{PROG} doctor", "created_utc": args.started_utc,
            "argv": args.argv, "command_line": hostinfo.command_line(args.argv), "interrupted": False,
            "healthy": not problems, "problems": problems, "environment": env, "devices": devices,
            "sample": sample}


def _doctor(args: argparse.Namespace) -> int:
    backend = _load("doctor", refuse_fallback=False)  # a fallback is reported as a problem below
    if backend is None:
        if args.json:
            reason = _no_library_reason()
            _write_json(args.json, _doctor_report(args, _unavailable_environment(reason), [],
                                                  [f"no library could be loaded: {reason}"], {"ran": False}))
        return EXIT_NO_LIBRARY

    if not args.no_run:
        _check_device(args)
    problems: list[str] = [backend.fallback] if backend.fallback else []
    try:
        env, devices = smoke.environment_and_devices()
    except AclError as exc:
        _error("doctor", f"the runtime failed while gathering facts: {_one_line(exc)}")
        return EXIT_FAIL
    _RUN.report = _doctor_report(args, env, devices, ["interrupted"], {"ran": False})
    print(f"host:           {env['hostname']} at {args.started_utc}")
    print(f"driver:         {env['driver_version']} ({env['driver_version_source']})")
    print(backend.describe())
    if env.get("simulator_version"):
        print(f"simulator:      {env['simulator_version']}")
    elif simulator_not_built():  # (real CANN in use: a note, not a problem)
        print(f"simulator:      {simulator_not_built()}")
    print(f"CANN version:   {env['cann_version'] or 'unknown (this CANN exports no version query)'}")
    if env.get("acl_version"):
        print(f"ACL API:        {env['acl_version']}")
    print(f"SoC:            {env['soc_name'] or '?'} - {env['soc_note']}")
    if env["soc_supported"] is False:
        problems.append(f"the SoC {env['soc_name']} is not supported by the operator (it has no kernel for it: "
                        "a call's phase 2 fails with 561000)")
    count = env["device_count"]
    print(f"devices:        {count}")
    for dev in devices:
        print(f"  device {dev['id']}: {_gib(dev['free_bytes'])} free of {_gib(dev['total_bytes'])}")
    if count == 0:
        problems.append("no device is visible (check the driver: npu-smi info)")
    if env.get("error"):
        problems.append(f"runtime error: {env['error']}")
    if env["operator_found"]:
        lib = next((i for i in env["libraries"] if i["path"] == env["operator_library"]), None)
        via = f" [found via {lib['found_via']}]" if lib else ""
        print(f"operator:       {env['operator_symbol']} found in {env['operator_library']}{via}")
    else:
        searched = ", ".join(p for p, _ in backend.op_candidates) or "no operator library was found"
        print(f"operator:       {env['operator_symbol']} NOT FOUND (searched: {searched})")
        problems += [f"{path} failed to load: {why}" for path, why in backend.op_failures()]
        problems.append("the operator is not exported by any operator library: install the CANN ops package "
                        "(it provides libopapi_cv.so / libopapi.so), then source set_env.sh")
    sample: dict[str, Any] = {"ran": False}
    if args.no_run:
        print("sample run:     skipped (--no-run)")
    elif count == 0 or not env["operator_found"]:
        print("sample run:     skipped (no device or no operator)")
    else:
        sample = _run_sample(args.device)
        if sample["ok"]:
            print(f"sample run:     ok on device {args.device}: {[int(v) for v in sample['result']]} "
                  f"(workspace {sample['workspace_size']} bytes)")
        else:
            print(f"sample run:     FAILED on device {args.device}: {sample['error']}")
            problems.append(f"the official sample failed: {sample['error']}")
    print(f"determinism:    {env['determinism']}")
    healthy = not problems
    if env["soc_supported"] is None and healthy:
        print(f"warning:        {env['soc_note']}")
    print("verdict:        healthy" if healthy else "verdict:        NOT healthy")
    for p in problems:
        print(f"  - {p}")
    if args.json and not _write_json(args.json, _doctor_report(args, env, devices, problems, sample)):
        return EXIT_FAIL
    return EXIT_OK if healthy else EXIT_FAIL


def _run_sample(device_id: int) -> dict[str, Any]:
    try:
        result, size = _sample(device_id)
    except (AclError, OSError, ValueError) as exc:
        return {"ran": True, "ok": False, "error": " | ".join(str(exc).splitlines()), "result": None}
    ok = result == SAMPLE_EXPECTED
    return {"ran": True, "ok": ok, "result": result, "workspace_size": size,
            "error": "" if ok else f"expected {SAMPLE_EXPECTED}, got {result}"}


# --------------------------------------------------------------------------- run

def _run(args: argparse.Namespace) -> int:
    backend = _load("run")
    if backend is None:
        return EXIT_NO_LIBRARY
    _check_device(args)
    print("official sample (cann-abi.md §5.6): gradOut [2,2,2,2,2] = 1..32 (float32, NCDHW), "
          "outputSize [2,2,2], inputSize [2,2,1,1,1], scales 0")
    try:
        values, size = _sample(args.device)
    except AclError as exc:
        _error("run", f"FAILED: {_one_line(exc)}")
        return EXIT_FAIL
    print(f"device {args.device}, workspace {size} bytes")
    for i, v in enumerate(values):
        print(f"result[{i}] = {v:g}")
    if values == SAMPLE_EXPECTED:
        print(f"OK: matches the expected {[int(v) for v in SAMPLE_EXPECTED]}")
        return EXIT_OK
    _error("run", f"WRONG: expected {[int(v) for v in SAMPLE_EXPECTED]}, got {values}")
    return EXIT_FAIL
