"""The ``upsample3d-grad`` command line (also ``python -m upsample3d_grad``).

Subcommands:

``doctor``
    The backend and where each library came from, the CANN version, the SoC and
    whether the operator supports it, the devices and their memory, whether the
    operator symbol is exported, and a run of the official sample.
``run``
    The official sample case (cann-abi.md §5.6): prints the four results.
``smoke``
    The smoke matrix (:mod:`upsample3d_grad.smoke`) on one device, a list, or all
    of them (one process per device), with a progress table and a JSON report
    (``--json FILE``, schema ``upsample3d_grad/smoke_schema.json``).
``bench``
    Device time (events), host overhead per call and effective bandwidth.
``compare``
    Smoke reports of several machines or CANN versions in one table
    (:mod:`upsample3d_grad.compare`).

Every command takes ``-v/--verbose`` (log every C call with its arguments on
standard error).  ``--json PATH`` writes a report (``-``: standard output, the
human-readable lines then go to standard error); the path is checked before the run.
Ctrl-C prints ``interrupted``, writes the partial report (marked ``"interrupted":
true``), ends the per-device processes and exits 130.

The first line of every command that loads a library names the backend: real CANN or
the CPU simulator.

Exit codes: 0 success / healthy; 1 a failure (wrong result, failed case, unhealthy
setup, a case that passes in one compared report and fails in another); 2 usage
error, or ``smoke --require-npu`` with only the simulator; 3 no library could be
loaded (the message says how to fix it); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, NoReturn, Sequence, TextIO

import numpy as np
import numpy.random  # noqa: F401  (imported now: a Ctrl-C inside numpy's lazy import of it can be lost)

from . import _jsonout, hostinfo

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_LIBRARY = 0, 1, 2, 3
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
PROG = "upsample3d-grad"

SAMPLE_GRAD_OUT_SHAPE = (2, 2, 2, 2, 2)
SAMPLE_OUTPUT_SIZE = (2, 2, 2)
SAMPLE_INPUT_SIZE = (2, 2, 1, 1, 1)

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_NO_LIBRARY", "EXIT_INTERRUPTED"]

#: Seconds after which a long command starts to print progress, and the time between progress lines.
PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 1.0


# --------------------------------------------------------------------------- shared helpers

def _header(command: str, backend: Any) -> str:
    if backend.is_simulator:
        return f"{PROG} {command}: backend sim - the CPU simulator of the CANN libraries (no NPU is used)"
    return f"{PROG} {command}: backend cann - real CANN ({backend.runtime.path})"


def _load(command: str) -> Any:
    """Load the backend and print the header line; on failure print why and how to fix it, return None."""
    from acl_bindings import BackendFallbackWarning, LibraryNotFoundError, load_backend

    requested = os.environ.get("ACL_BINDINGS_BACKEND", "auto") or "auto"
    try:
        with warnings.catch_warnings():  # the fallback notice is printed as the first line instead
            warnings.simplefilter("ignore", BackendFallbackWarning)
            backend = load_backend()
    except LibraryNotFoundError as exc:
        print(f"{PROG} {command}: backend {requested} - not available: no usable library was found", flush=True)
        print(str(exc), file=sys.stderr)
        return None
    except ValueError as exc:  # a bad ACL_BINDINGS_BACKEND value
        print(f"{PROG} {command}: backend {requested!r} - not available", flush=True)
        print(f"error: {exc}", file=sys.stderr)
        return None
    if backend.fallback:  # a CANN install is present but did not load: never a silent simulator
        print(backend.fallback, flush=True)
    print(_header(command, backend), flush=True)
    return backend


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line naming the (sub)command's own help."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Run:
    """What a command has done so far: the partial report written on Ctrl-C, and the real stdout."""

    def __init__(self) -> None:
        self.report: dict[str, Any] | None = None
        self.json_stdout: TextIO = sys.stdout
        self.sigint = False

    def on_sigint(self, signum: int, frame: Any) -> None:
        """SIGINT: remembered (so that one swallowed by third-party code still counts), then KeyboardInterrupt."""
        self.sigint = True
        raise KeyboardInterrupt


_RUN = _Run()


def _write_json(path: str, data: Any) -> bool:
    """Write the report (``-``: the real standard output); on failure print why and return False."""
    try:
        _jsonout.write_json(path, data, stdout=_RUN.json_stdout)
    except (OSError, ValueError) as exc:
        print(f"error: cannot write the report to {path}: {exc}", file=sys.stderr)
        return False
    if path != _jsonout.STDOUT:
        print(f"report: {path}")
    return True


class _Progress:
    """Progress lines for long runs: nothing for the first :data:`PROGRESS_AFTER_S` seconds."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.t0 = self.last = time.perf_counter()

    def tick(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.t0 >= PROGRESS_AFTER_S and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            print(f"  ... {self.what}: {done}/{total} ({now - self.t0:.0f} s)", flush=True)


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:.1f} GiB"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _sample_input() -> np.ndarray:
    return np.arange(1, 33, dtype=np.float32).reshape(SAMPLE_GRAD_OUT_SHAPE)


def _ints(text: str, n: int, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected {n} comma-separated integers, got {text!r}") from None
    if len(values) != n:
        raise argparse.ArgumentTypeError(f"{what}: expected {n} comma-separated integers, got {text!r}")
    return values


# --------------------------------------------------------------------------- doctor

def _no_library_reason() -> str:
    """Why no library loads, in one line (the loader's message)."""
    from acl_bindings import LibraryNotFoundError, load_backend

    try:
        load_backend()
    except (LibraryNotFoundError, ValueError) as exc:
        return " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return "no library could be loaded"


def _requested_backend() -> str:
    value = os.environ.get("ACL_BINDINGS_BACKEND", "auto") or "auto"
    return value if value in ("auto", "cann", "sim") else "auto"


def _doctor_report(args: argparse.Namespace, env: dict[str, Any], devices: list[dict[str, Any]],
                   problems: list[str], sample: dict[str, Any]) -> dict[str, Any]:
    from .smoke import SCHEMA_VERSION

    return {"schema_version": SCHEMA_VERSION, "tool": f"{PROG} doctor", "created_utc": args.started_utc,
            "argv": args.argv, "command_line": hostinfo.command_line(args.argv), "interrupted": False,
            "healthy": not problems, "problems": problems, "environment": env, "devices": devices,
            "sample": sample}


def _doctor(args: argparse.Namespace) -> int:
    from . import smoke

    _RUN.report = _doctor_report(args, smoke.unavailable_environment("interrupted before the facts were read",
                                                                     _requested_backend()), [],
                                 ["interrupted"], {"ran": False})
    backend = _load("doctor")
    if backend is None:
        if args.json:
            reason = _no_library_reason()
            _write_json(args.json, _doctor_report(args, smoke.unavailable_environment(reason, _requested_backend()),
                                                  [], [f"no library could be loaded: {reason}"], {"ran": False}))
        return EXIT_NO_LIBRARY
    from acl_bindings import AclError

    problems: list[str] = [backend.fallback] if backend.fallback else []
    try:
        env, devices = smoke.environment_and_devices()
    except AclError as exc:
        print(f"error: the runtime failed while gathering facts: {exc}")
        return EXIT_FAIL
    _RUN.report = _doctor_report(args, env, devices, ["interrupted"], {"ran": False})
    print(f"host:           {env['hostname']} at {args.started_utc}")
    print(f"driver:         {env['driver_version']} ({env['driver_version_source']})")
    print(backend.describe())
    if env.get("simulator_version"):
        print(f"simulator:      {env['simulator_version']}")
    print(f"CANN version:   {env['cann_version'] or 'unknown (this CANN exports no version query)'}")
    if env.get("acl_version"):
        print(f"ACL API:        {env['acl_version']}")
    print(f"SoC:            {env['soc_name'] or '?'} - {env['soc_note']}")
    if env["soc_supported"] is False:
        problems.append(f"the SoC {env['soc_name']} is not supported by the operator")
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
        for path, why in backend.op_failures():
            problems.append(f"{path} failed to load: {why}")
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
    from acl_bindings import AclError

    from .session import Session
    from .smoke import SAMPLE_EXPECTED

    try:
        with Session(device_id) as s:
            out = s.backward(_sample_input(), SAMPLE_OUTPUT_SIZE, SAMPLE_INPUT_SIZE)
            size = s.last_workspace_size
    except (AclError, OSError, ValueError) as exc:
        return {"ran": True, "ok": False, "error": " | ".join(str(exc).splitlines()), "result": None}
    assert isinstance(out, np.ndarray)
    result = out.ravel().tolist()
    ok = result == SAMPLE_EXPECTED
    return {"ran": True, "ok": ok, "result": result, "workspace_size": size,
            "error": "" if ok else f"expected {SAMPLE_EXPECTED}, got {result}"}


# --------------------------------------------------------------------------- run

def _run(args: argparse.Namespace) -> int:
    backend = _load("run")
    if backend is None:
        return EXIT_NO_LIBRARY
    from acl_bindings import AclError

    from .session import Session
    from .smoke import SAMPLE_EXPECTED

    print("official sample (cann-abi.md §5.6): gradOut [2,2,2,2,2] = 1..32 (float32, NCDHW), "
          "outputSize [2,2,2], inputSize [2,2,1,1,1], scales 0")
    try:
        with Session(args.device) as s:
            out = s.backward(_sample_input(), SAMPLE_OUTPUT_SIZE, SAMPLE_INPUT_SIZE)
            print(f"device {args.device}, workspace {s.last_workspace_size} bytes")
    except AclError as exc:
        print(f"FAILED: {exc}")
        return EXIT_FAIL
    assert isinstance(out, np.ndarray)
    values = out.ravel().tolist()
    for i, v in enumerate(values):
        print(f"result[{i}] = {v:g}")
    if values == SAMPLE_EXPECTED:
        print(f"OK: matches the expected {[int(v) for v in SAMPLE_EXPECTED]}")
        return EXIT_OK
    print(f"WRONG: expected {[int(v) for v in SAMPLE_EXPECTED]}, got {values}")
    return EXIT_FAIL


# --------------------------------------------------------------------------- smoke

def _row(k: int, total: int, entry: dict[str, Any]) -> str:
    status = entry["status"].upper()
    head = f"[{k:>3}/{total}] {status:<5} {entry['name']:<44}"
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
            from . import smoke

            reason = _no_library_reason()
            report = smoke.new_report(smoke.unavailable_environment(reason, _requested_backend()), args.quick,
                                      args.argv, plans=not args.no_plans)
            _write_json(args.json, report)
        return EXIT_NO_LIBRARY
    if args.require_npu and backend.is_simulator:
        print("--require-npu: only the CPU simulator is available, so no NPU can be tested. "
              "Source CANN's set_env.sh before starting Python, or drop --require-npu.", file=sys.stderr)
        return EXIT_USAGE
    from acl_bindings import AclError, device_count

    try:
        count = device_count()
        devices = _parse_devices(args.devices, count)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AclError as exc:
        print(f"error: cannot count devices: {exc}", file=sys.stderr)
        return EXIT_FAIL
    if not devices:
        print("error: no device is visible", file=sys.stderr)
        return EXIT_FAIL
    argv = list(args.argv)
    if args.devices == "all" or len(devices) > 1:
        return _smoke_processes(args, devices, argv)
    return _smoke_here(args, devices[0], argv)


def _smoke_here(args: argparse.Namespace, device_id: int, argv: list[str]) -> int:
    from . import smoke

    env = smoke.environment()
    print(f"CANN {env['cann_version'] or '?'} | SoC {env['soc_name']} - {env['soc_note']} | "
          f"operator in {env['operator_library'] or 'NOT FOUND'}")
    print(f"device {device_id}; tolerances: float32 {smoke.tolerance_text('float32')}; float16/bfloat16 one rounding "
          "(eps*|ref|) + the same absolute term")
    t0 = time.perf_counter()
    report = smoke.new_report(env, args.quick, argv, plans=not args.no_plans)
    _RUN.report = report  # filled case by case: the partial report on Ctrl-C

    def progress(k: int, total: int, entry: dict[str, Any]) -> None:
        report["cases"].append(entry)
        print(_row(k, total, entry), flush=True)

    dev, results = smoke.run_device(device_id, args.quick, env, progress, plans=not args.no_plans)
    report["devices"].append(dev)
    report["summary"] = smoke.summarize(results)
    s = report["summary"]
    print(f"summary: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped "
          f"of {s['total']} on device {device_id} in {time.perf_counter() - t0:.2f} s; "
          f"repeat identical: {dev['repeat_identical']}")
    if args.json and not _write_json(args.json, report):
        return EXIT_FAIL
    return EXIT_OK if s["ok"] else EXIT_FAIL


def _child_env() -> dict[str, str]:
    """This environment, with this package's folder first on PYTHONPATH (children import the same code)."""
    env = os.environ.copy()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    return env


def _smoke_processes(args: argparse.Namespace, devices: list[int], argv: list[str]) -> int:
    """One child process per device, run at the same time; their lines are prefixed and merged."""
    from . import smoke

    lock = threading.Lock()
    children: list[tuple[int, subprocess.Popen[str], str]] = []
    with tempfile.TemporaryDirectory(prefix="upsample3d-smoke-") as tmp:
        try:
            for dev in devices:
                path = os.path.join(tmp, f"device{dev}.json")
                cmd = [sys.executable, "-m", "upsample3d_grad", "smoke", "--devices", str(dev), "--json", path]
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
                    if line.startswith("report: ") or line.strip() == "interrupted":
                        continue  # the child's report is a temporary file, merged below; one interrupted line
                    with lock:
                        print(f"[device {dev}] {line.rstrip()}", flush=True)

            threads = [threading.Thread(target=pump, args=(dev, proc), daemon=True) for dev, proc, _ in children]
            for t in threads:
                t.start()
            for _, proc, _ in children:
                proc.wait()
        except KeyboardInterrupt:
            _stop_children([proc for _, proc, _ in children])
            partial = _read_child_reports(children)[0]
            if partial:
                _RUN.report = smoke.merge_reports(partial, argv)
            raise
        for t in threads:
            t.join()
        reports, failed_children = _read_child_reports(children)
    if not reports:
        for line in failed_children:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_FAIL
    merged = smoke.merge_reports(reports, argv)
    for line in failed_children:
        merged["summary"]["ok"] = False
        print(f"error: {line}", file=sys.stderr)
    for d in merged["devices"]:
        print(f"device {d['id']}: {d['status'].upper()} - {d['passed']} passed, {d['failed']} failed, "
              f"{d['skipped']} skipped of {d['cases']}; memory {_gib(d['mem_free_bytes'])} free of "
              f"{_gib(d['mem_total_bytes'])}")
    s = merged["summary"]
    print(f"summary: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped "
          f"of {s['total']} on {len(merged['devices'])} device(s)")
    if args.json and not _write_json(args.json, merged):
        return EXIT_FAIL
    return EXIT_OK if s["ok"] and not failed_children else EXIT_FAIL


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


def _stop_children(procs: Sequence[subprocess.Popen[str]], grace_s: float = 10.0) -> None:
    """Ctrl-C: SIGINT to every child still running (each writes its partial report), then wait; kill stragglers."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- bench

def _bench_geometry(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, int, int],
                                                       tuple[float, float, float]]:
    """``(gradOut shape, gradInput shape, outputSize, scales)`` of the bench case, checked before anything is
    allocated: the scale's range, then every documented limit of the operator (:func:`checks.check_params`).

    Raises
    ------
    ValueError
        A usage error (one line, naming the option, the rule and the value).
    """
    from acl_bindings import AclError

    from . import checks, smoke

    n, c, i_d, i_h, i_w = args.input_size
    if args.output_size is not None:
        out_size = tuple(args.output_size)
        scales: tuple[float, float, float] = (0.0, 0.0, 0.0)
    else:
        scale = args.scale
        if not math.isfinite(scale) or not 0 < scale <= checks.MAX_SCALE:
            raise ValueError(f"--scale: expected a finite number in (0, {checks.MAX_SCALE:g}], got {scale!r}")
        out_size = tuple(int(math.floor(v * scale)) for v in (i_d, i_h, i_w))
        scales = (scale, scale, scale)
    go_shape = (n, c, *out_size) if args.layout == "NCDHW" else (n, *out_size, c)
    gi_shape = (n, c, i_d, i_h, i_w) if args.layout == "NCDHW" else (n, i_d, i_h, i_w, c)
    acl_dtype = int(checks.SUPPORTED[list(smoke.DTYPES).index(args.dtype)])
    fmt = int(checks.layout_format(args.layout))
    try:
        checks.check_params(checks.TensorSpec(go_shape, acl_dtype, fmt), list(out_size), list(args.input_size),
                            *scales, checks.TensorSpec(gi_shape, acl_dtype, fmt))
    except AclError as exc:
        detail = " ".join(str(getattr(exc, "detail", "") or exc).split())
        raise ValueError(f"the case is outside the operator's limits: {detail}") from None
    return go_shape, gi_shape, out_size, scales  # type: ignore[return-value]


def _random_data(shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """Seeded normal values built directly in *dtype*, a chunk at a time (no full-size float64 or float32 copy)."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    chunk = 1 << 20
    for k in range(0, flat.size, chunk):
        part = rng.standard_normal(min(chunk, flat.size - k), dtype=np.float32)
        flat[k:k + part.size] = part if dtype == np.float32 else part.astype(dtype)
    return out


def _bench(args: argparse.Namespace) -> int:
    try:
        go_shape, gi_shape, out_size, scales = _bench_geometry(args)
    except ValueError as exc:
        args.parser.error(str(exc))
    partial: dict[str, Any] = {"backend": None, "device": args.device, "dtype": args.dtype, "layout": args.layout,
                               "grad_out_shape": list(go_shape), "grad_in_shape": list(gi_shape),
                               "output_size": list(out_size), "scales": list(scales), "repeat": args.repeat,
                               "device_ms": [], "host_us": [], "interrupted": False}
    _RUN.report = partial  # what a Ctrl-C writes
    backend = _load("bench")
    if backend is None:
        return EXIT_NO_LIBRARY
    partial["backend"] = backend.kind
    from acl_bindings import AclError, Device

    from . import smoke
    from .session import Session

    dtype = smoke.DTYPES[args.dtype]
    read_bytes = math.prod(go_shape) * dtype.itemsize
    write_bytes = math.prod(gi_shape) * dtype.itemsize
    try:
        with Device(args.device) as dev:
            free, total = dev.mem_info()
    except AclError as exc:
        print(f"FAILED: {exc}")
        return EXIT_FAIL
    if read_bytes + write_bytes > free:
        args.parser.error(f"the case needs {_size(read_bytes + write_bytes)} of device memory (gradOut + gradInput) "
                          f"but device {args.device} has {_size(free)} free of {_size(total)}")
    host = _random_data(go_shape, dtype)
    times: list[float] = partial["device_ms"]
    host_us: list[float] = partial["host_us"]
    progress = _Progress("bench runs")
    total_runs = 2 * (args.warmup + args.repeat)
    try:
        with Session(args.device) as s:
            go = s.upload(host, args.layout)
            del host
            gi = s.empty(gi_shape, dtype, args.layout)
            for k in range(max(args.warmup, 1)):
                s.timed_backward(go, out_size, args.input_size, scales, out=gi, repeat=1)
                progress.tick(k + 1, total_runs)
            for k in range(args.repeat):
                times.extend(s.timed_backward(go, out_size, args.input_size, scales, out=gi, repeat=1))
                progress.tick(args.warmup + k + 1, total_runs)
            ws = s.last_workspace_size
            tiny_go = s.upload(np.ones((1, 1, 2, 2, 2), dtype), "NCDHW")
            tiny_gi = s.empty((1, 1, 1, 1, 1), dtype, "NCDHW")
            for k in range(args.warmup + args.repeat):
                t0 = time.perf_counter()
                s.backward(tiny_go, (2, 2, 2), (1, 1, 1, 1, 1), out=tiny_gi)
                if k >= args.warmup:
                    host_us.append((time.perf_counter() - t0) * 1e6)
                progress.tick(args.warmup + args.repeat + k + 1, total_runs)
            s.synchronize()
    except AclError as exc:
        print(f"FAILED: {exc}")
        return EXIT_FAIL
    t_min, t_med = min(times), statistics.median(times)
    h_min, h_med = min(host_us), statistics.median(host_us)

    def gbps(ms: float) -> float:
        return (read_bytes + write_bytes) / (ms * 1e-3) / 1e9 if ms > 0 else float("inf")

    print(f"case: {args.dtype} {args.layout} gradOut {list(go_shape)} -> gradInput {list(gi_shape)}, "
          f"outputSize {list(out_size)}, scales {scales}; workspace {ws} bytes; device {args.device}")
    print(f"device time (events, {args.repeat} runs): min {t_min:.3f} ms, median {t_med:.3f} ms")
    print(f"effective bandwidth: {gbps(t_min):.2f} GB/s at the min, {gbps(t_med):.2f} GB/s at the median "
          f"(read {_size(read_bytes)} + write {_size(write_bytes)} per run)")
    print(f"host overhead per call (tiny tensor, no sync, {args.repeat} calls): min {h_min:.1f} us, "
          f"median {h_med:.1f} us")
    if backend.is_simulator:
        print("note: these figures time the CPU simulator, not an NPU")
    partial.update({"workspace_size": ws, "device_ms_min": t_min, "device_ms_median": t_med,
                    "gbps_min_time": gbps(t_min), "gbps_median_time": gbps(t_med), "bytes_read": read_bytes,
                    "bytes_written": write_bytes, "host_us_min": h_min, "host_us_median": h_med})
    if args.json and not _write_json(args.json, partial):
        return EXIT_FAIL
    return EXIT_OK


# --------------------------------------------------------------------------- parser

def _json_path(text: str) -> str:
    if text == "":
        raise argparse.ArgumentTypeError("the path is empty (give a file name, or - for standard output)")
    return text


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= *minimum*."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def _scale(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _compare(args: argparse.Namespace) -> int:
    from . import compare

    if len(args.reports) < 2:
        args.parser.error(f"compare needs at least two reports, got {len(args.reports)}")
    try:
        reports = [compare.load_report(path) for path in args.reports]
    except (OSError, ValueError) as exc:
        args.parser.error(str(exc))
    doc = compare.compare_reports(reports, args.reports)
    if args.json:
        _jsonout.write_json(_jsonout.STDOUT, doc)
    elif args.markdown:
        sys.stdout.write(compare.render_markdown(doc))
    else:
        sys.stdout.write(compare.render_text(doc))
    return EXIT_OK if doc["ok"] else EXIT_FAIL


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``upsample3d-grad`` command."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="CANN's aclnnUpsampleNearestExact3dBackward from Python: check the setup, run the official "
                    "sample, smoke-test and benchmark the operator (on an NPU, or on the CPU simulator), and compare "
                    "smoke reports of several machines.",
        epilog="Backend: ACL_BINDINGS_BACKEND=auto (default: real CANN if found, else the simulator) | cann | sim. "
               "Exit codes: 0 ok, 1 failure, 2 usage (or --require-npu without an NPU), 3 no library found, "
               "130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = _Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="log every C call with its arguments and result on standard error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    json_help = "write the report as JSON to FILE (- for standard output; schema: upsample3d_grad/{})"

    p = sub.add_parser("doctor", parents=[common],
                       help="check the setup: backend, libraries, CANN and driver versions, SoC, devices, operator")
    p.add_argument("--device", type=int, default=0, help="device for the sample run (default 0)")
    p.add_argument("--no-run", action="store_true", help="do not run the official sample")
    p.add_argument("--json", metavar="FILE", type=_json_path, help=json_help.format("doctor_schema.json"))
    p.set_defaults(func=_doctor, parser=p)

    p = sub.add_parser("run", parents=[common], help="run the official sample case and print the four results")
    p.add_argument("--device", type=int, default=0, help="device id (default 0)")
    p.set_defaults(func=_run, parser=p)

    p = sub.add_parser("smoke", parents=[common], help="run the smoke matrix against the numpy reference")
    p.add_argument("--devices", default="0", help="'0', '1,2' or 'all' (all: one process per device); default 0")
    p.add_argument("--quick", action="store_true", help="a small matrix")
    p.add_argument("--json", metavar="FILE", type=_json_path, help=json_help.format("smoke_schema.json"))
    p.add_argument("--require-npu", action="store_true",
                   help="fail (exit 2) when only the CPU simulator is available")
    p.add_argument("--no-plans", action="store_true",
                   help="Session(plans=False): run both phases on every call (no executor reuse)")
    p.set_defaults(func=_smoke, parser=p)

    p = sub.add_parser("bench", parents=[common], help="device time (events), host overhead per call, effective GB/s")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--input-size", type=lambda t: _ints(t, 5, "--input-size"), default=(2, 16, 16, 32, 32),
                   metavar="N,C,D,H,W", help="gradInput size (default 2,16,16,32,32)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scale", type=_scale, default=2.0,
                   help="forward scale for D, H and W, passed to the operator: 0 < scale <= 50 (default 2)")
    g.add_argument("--output-size", type=lambda t: _ints(t, 3, "--output-size"), default=None,
                   metavar="D,H,W", help="gradOut spatial size instead of --scale (scales not passed)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--layout", choices=("NCDHW", "NDHWC"), default="NCDHW")
    p.add_argument("--repeat", type=_int_at_least(1), default=20, help="timed runs, >= 1 (default 20)")
    p.add_argument("--warmup", type=_int_at_least(0), default=3, help="untimed runs first, >= 0 (default 3)")
    p.add_argument("--json", metavar="FILE", type=_json_path, help="also write the figures as JSON (- for stdout)")
    p.set_defaults(func=_bench, parser=p)

    p = sub.add_parser("compare", parents=[common],
                       help="compare smoke reports of several machines or CANN versions in one table")
    p.add_argument("reports", nargs="+", metavar="REPORT.json", help="smoke reports (smoke --json), two or more")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="write Markdown tables instead of text")
    fmt.add_argument("--json", action="store_true", help="write the comparison as JSON instead of text")
    p.set_defaults(func=_compare, parser=p)
    return parser


def _verbose() -> None:
    """Turn on the C-call log (``ACL_BINDINGS_LOG_CALLS``, read when a function is bound) on standard error."""
    os.environ["ACL_BINDINGS_LOG_CALLS"] = "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log = logging.getLogger("acl_bindings")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def _interrupted(args: argparse.Namespace) -> None:
    """Ctrl-C: one ``interrupted`` line; the partial report, marked, where ``--json`` asks for one."""
    print("interrupted", file=sys.stderr, flush=True)
    report = _RUN.report
    path = getattr(args, "json", None)
    if report is None or not isinstance(path, str):
        return
    report["interrupted"] = True
    if "cases" in report and "summary" in report:
        from .smoke import summarize

        report["summary"] = summarize(report["cases"])
        report["summary"]["ok"] = False
    if "healthy" in report:
        report["healthy"] = False
    _write_json(path, report)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    raw = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(raw)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    args.argv = [PROG, *raw]
    args.started_utc = hostinfo.utc_now()
    path = getattr(args, "json", None)
    if isinstance(path, str):  # a report path (compare's --json is a flag): check it before the run
        problem = _jsonout.check_target(path)
        if problem:
            args.parser.error(problem)
    if args.verbose:
        _verbose()
    _RUN.report = None
    _RUN.json_stdout = sys.stdout
    _RUN.sigint = False
    saved = sys.stdout
    handler = None
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        handler = signal.signal(signal.SIGINT, _RUN.on_sigint)
    if path == _jsonout.STDOUT:
        sys.stdout = sys.stderr  # the report owns standard output; the human-readable lines go to stderr
    try:
        rc = int(args.func(args))
        if _RUN.sigint:  # interrupted, but the KeyboardInterrupt was swallowed on the way
            raise KeyboardInterrupt
        return rc
    except KeyboardInterrupt:
        _interrupted(args)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL
    finally:
        sys.stdout = saved
        if handler is not None:
            signal.signal(signal.SIGINT, handler)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
