"""``upsample3d-grad smoke``: the smoke matrix on one device, a list, or all of them (one process per device)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Sequence

from acl_bindings import AclError, device_count, loaded_backend

from . import smoke
from ._cli_shared import (
    _RUN,
    EXIT_FAIL,
    EXIT_NO_LIBRARY,
    EXIT_OK,
    EXIT_USAGE,
    _error,
    _gib,
    _hold_sigint,
    _load,
    _no_library_reason,
    _one_line,
    _unavailable_environment,
    _write_json,
)


def _row(k: int, total: int, entry: dict[str, Any]) -> str:
    head = f"[{k:>3}/{total}] {entry['status'].upper():<5} {entry['name']:<44}"
    if entry["kind"] == "bad_input":
        tail = f"expected {entry['expected_code']}, got {entry['got_code']}"
    elif entry["kind"] == "adjoint":
        tail = entry["message"]
    else:
        shape = "x".join(str(n) for n in entry["shape"])
        ws = entry["workspace_size"]
        ms = entry["time_ms"]
        ms_text = f"{ms:7.2f}" if ms is not None else f"{'-':>7}"
        tail = (f"{shape:<14} ws {ws if ws is not None else '-':>7} B  {ms_text} ms  "
                f"abs {_sci(entry['max_abs_err'])}  rel {_sci(entry['max_rel_err'])}")
    line = f"{head} {tail}"
    if entry["status"] in ("fail", "error", "skip") and entry["message"]:
        line += f"\n          {entry['message']}"
    return line


def _sci(x: float | None) -> str:
    return "   -   " if x is None else f"{x:.1e}"


def _parse_devices(text: str, count: int) -> list[int]:
    if text == "all":
        return list(range(count))
    try:
        ids = [int(v) for v in text.split(",") if v.strip() != ""]
    except ValueError:
        raise ValueError(f"--devices: expected 'all' or comma-separated device ids, got {text!r}") from None
    if not ids:
        raise ValueError("--devices: no device id given")
    bad = [i for i in ids if not 0 <= i < count]
    if bad:
        raise ValueError(f"--devices: device id(s) {bad} out of range: {count} device(s) visible")
    if len(set(ids)) != len(ids):
        raise ValueError(f"--devices: device ids repeat: {text!r}")
    return ids


def _smoke(args: argparse.Namespace) -> int:
    backend = _load("smoke")
    if backend is None:
        if args.json:
            fell_back = loaded_backend()
            if fell_back is not None:  # CANN is present but did not load: the facts, and no case run
                env = smoke.environment()
                env["error"] = f"refused: {fell_back.fallback}"
            else:
                env = _unavailable_environment(_no_library_reason())
            _write_json(args.json, smoke.new_report(env, args.quick, args.argv, plans=not args.no_plans))
        return EXIT_NO_LIBRARY
    if args.require_npu and backend.is_simulator:
        _error("smoke", "--require-npu: only the CPU simulator is available, so no NPU can be tested. "
                        "Source CANN's set_env.sh before starting Python, or drop --require-npu.")
        return EXIT_USAGE

    try:
        devices = _parse_devices(args.devices, device_count())
    except ValueError as exc:
        args.parser.error(str(exc))
    except AclError as exc:
        _error("smoke", f"cannot count devices: {_one_line(exc)}")
        return EXIT_FAIL
    if not devices:
        _error("smoke", "no device is visible")
        return EXIT_FAIL
    if args.devices == "all" or len(devices) > 1:
        return _smoke_processes(args, devices)
    return _smoke_here(args, devices[0])


def _smoke_here(args: argparse.Namespace, device_id: int) -> int:
    env = smoke.environment()
    print(f"CANN {env['cann_version'] or '?'} | SoC {env['soc_name']} - {env['soc_note']} | "
          f"operator in {env['operator_library'] or 'NOT FOUND'}")
    print(f"device {device_id}; tolerances: float32 {smoke.tolerance_text('float32')}; float16/bfloat16 one rounding "
          "(eps*|ref|) + the same absolute term")
    t0 = time.perf_counter()
    report = smoke.new_report(env, args.quick, args.argv, plans=not args.no_plans)
    _RUN.report = report  # filled case by case: the partial report on Ctrl-C

    def progress(k: int, total: int, entry: dict[str, Any]) -> None:
        report["cases"].append(entry)
        print(_row(k, total, entry), flush=True)

    dev, results = smoke.run_device(device_id, args.quick, env, progress, plans=not args.no_plans)
    report["devices"].append(dev)
    s = report["summary"] = smoke.summarize(results)
    print(f"summary: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped "
          f"of {s['total']} on device {device_id} in {time.perf_counter() - t0:.2f} s; "
          f"repeat identical: {dev['repeat_identical']}")
    if args.json and not _write_json(args.json, report):
        return EXIT_FAIL
    return EXIT_OK if s["ok"] else EXIT_FAIL


def _child_env() -> dict[str, str]:
    """This environment, with this package's folder first on PYTHONPATH (children import the same code)."""
    env = os.environ.copy()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    return env


def _smoke_processes(args: argparse.Namespace, devices: list[int]) -> int:
    """One child process per device, run at the same time; their lines are prefixed and merged."""
    lock = threading.Lock()
    children: list[tuple[int, subprocess.Popen[str], str]] = []
    started: set[int] = set()  # the pids of the children that printed (their launcher runs)
    with tempfile.TemporaryDirectory(prefix="upsample3d-smoke-") as tmp:
        try:
            for dev in devices:
                path = os.path.join(tmp, f"device{dev}.json")
                # the launcher: a SIGINT while the child still imports ends it with one line, not a traceback
                cmd = [sys.executable, "-m", "upsample3d_grad_cli", "smoke", "--devices", str(dev), "--json", path]
                cmd += [flag for flag, on in (("--quick", args.quick), ("--no-plans", args.no_plans),
                                              ("--verbose", args.verbose)) if on]
                # a session of its own: a terminal's Ctrl-C reaches the parent only, which stops each child once
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=_child_env(), start_new_session=True)
                children.append((dev, proc, path))
            print(f"devices {devices}: one process each (pids {', '.join(str(p.pid) for _, p, _ in children)})",
                  flush=True)

            def pump(dev: int, proc: subprocess.Popen[str]) -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    started.add(proc.pid)  # (it printed: its launcher handles a SIGINT from now on)
                    if line.startswith("report: ") or line.rstrip().endswith(": interrupted"):
                        continue  # the child's report is a temporary file, merged below; one interrupted line
                    with lock:
                        print(f"[device {dev}] {line.rstrip()}", flush=True)

            threads = [threading.Thread(target=pump, args=(dev, proc), daemon=True) for dev, proc, _ in children]
            # a Ctrl-C raised inside Thread.start() breaks its Condition (CPython then raises RuntimeError, not
            # KeyboardInterrupt): SIGINT is held back while the pumps start (they inherit the mask) and comes after
            _hold_sigint(True)
            try:
                for t in threads:
                    t.start()
            finally:
                _hold_sigint(False)
            for _, proc, _ in children:
                proc.wait()
        except KeyboardInterrupt:
            _stop_children([proc for _, proc, _ in children], started)
            partial = _read_child_reports(children)[0]
            if partial:
                _RUN.report = smoke.merge_reports(partial, args.argv)
            raise
        for t in threads:
            t.join()
        reports, failed_children = _read_child_reports(children)
    for line in failed_children:
        _error("smoke", line)
    if not reports:
        return EXIT_FAIL
    merged = smoke.merge_reports(reports, args.argv)
    if failed_children:
        merged["summary"]["ok"] = False
    for d in merged["devices"]:
        print(f"device {d['id']}: {d['status'].upper()} - {d['passed']} passed, {d['failed']} failed, "
              f"{d['skipped']} skipped of {d['cases']}; memory {_gib(d['mem_free_bytes'])} free of "
              f"{_gib(d['mem_total_bytes'])}")
    s = merged["summary"]
    print(f"summary: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped "
          f"of {s['total']} on {len(merged['devices'])} device(s)")
    if args.json and not _write_json(args.json, merged):
        return EXIT_FAIL
    return EXIT_OK if s["ok"] else EXIT_FAIL


def _read_child_reports(children: Sequence[tuple[int, subprocess.Popen[str], str]]
                        ) -> tuple[list[dict[str, Any]], list[str]]:
    """The reports the finished children wrote, and a line for each child that failed."""
    reports: list[dict[str, Any]] = []
    failed: list[str] = []
    for dev, proc, path in children:
        rc = proc.poll()
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                reports.append(json.load(fh))
        else:
            failed.append(f"device {dev}: the smoke process exited with {rc} without a report")
        if rc not in (EXIT_OK, EXIT_FAIL):
            failed.append(f"device {dev}: the smoke process exited with {rc}")
    return reports, failed


def _stop_children(procs: Sequence[subprocess.Popen[str]], started: set[int], grace_s: float = 10.0) -> None:
    """Ctrl-C: SIGINT to started children (each writes its partial report), SIGTERM to the others; kill stragglers."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT if proc.pid in started else signal.SIGTERM)  # (SIGINT: a traceback there)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
