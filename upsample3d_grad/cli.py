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

The first line of every command names the backend: real CANN or the CPU simulator.

Exit codes: 0 success / healthy; 1 a failure (wrong result, failed case, unhealthy
setup); 2 usage error, or ``smoke --require-npu`` with only the simulator; 3 no
library could be loaded (the message says how to fix it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Sequence

import numpy as np

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_LIBRARY = 0, 1, 2, 3
PROG = "upsample3d-grad"

SAMPLE_GRAD_OUT_SHAPE = (2, 2, 2, 2, 2)
SAMPLE_OUTPUT_SIZE = (2, 2, 2)
SAMPLE_INPUT_SIZE = (2, 2, 1, 1, 1)

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_NO_LIBRARY"]


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


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)


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

def _doctor(args: argparse.Namespace) -> int:
    backend = _load("doctor")
    if backend is None:
        return EXIT_NO_LIBRARY
    from acl_bindings import AclError

    from . import smoke

    problems: list[str] = [backend.fallback] if backend.fallback else []
    try:
        env, devices = smoke.environment_and_devices()
    except AclError as exc:
        print(f"error: the runtime failed while gathering facts: {exc}")
        return EXIT_FAIL
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
    if args.json:
        _write_json(args.json, {"healthy": healthy, "problems": problems, "environment": env, "devices": devices,
                                "sample": sample})
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

    def progress(k: int, total: int, entry: dict[str, Any]) -> None:
        print(_row(k, total, entry), flush=True)

    report = smoke.new_report(env, args.quick, argv, plans=not args.no_plans)
    dev, results = smoke.run_device(device_id, args.quick, env, progress, plans=not args.no_plans)
    report["devices"].append(dev)
    report["cases"].extend(results)
    report["summary"] = smoke.summarize(results)
    s = report["summary"]
    print(f"summary: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['skipped']} skipped "
          f"of {s['total']} on device {device_id} in {time.perf_counter() - t0:.2f} s; "
          f"repeat identical: {dev['repeat_identical']}")
    if args.json:
        _write_json(args.json, report)
        print(f"report: {args.json}")
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

    print(f"devices {devices}: one process each")
    lock = threading.Lock()
    children: list[tuple[int, subprocess.Popen[str], str]] = []
    with tempfile.TemporaryDirectory(prefix="upsample3d-smoke-") as tmp:
        for dev in devices:
            path = os.path.join(tmp, f"device{dev}.json")
            cmd = [sys.executable, "-m", "upsample3d_grad", "smoke", "--devices", str(dev), "--json", path]
            if args.quick:
                cmd.append("--quick")
            if args.no_plans:
                cmd.append("--no-plans")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=_child_env())
            children.append((dev, proc, path))

        def pump(dev: int, proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("report: "):
                    continue  # the child's report is a temporary file, merged below
                with lock:
                    print(f"[device {dev}] {line.rstrip()}", flush=True)

        threads = [threading.Thread(target=pump, args=(dev, proc), daemon=True) for dev, proc, _ in children]
        for t in threads:
            t.start()
        reports: list[dict[str, Any]] = []
        failed_children: list[str] = []
        for (dev, proc, path), t in zip(children, threads):
            rc = proc.wait()
            t.join()
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as fh:
                    reports.append(json.load(fh))
            else:
                failed_children.append(f"device {dev}: the smoke process exited with {rc} without a report")
            if rc not in (EXIT_OK, EXIT_FAIL):
                failed_children.append(f"device {dev}: the smoke process exited with {rc}")
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
    if args.json:
        _write_json(args.json, merged)
        print(f"report: {args.json}")
    return EXIT_OK if s["ok"] and not failed_children else EXIT_FAIL


# --------------------------------------------------------------------------- bench

def _bench(args: argparse.Namespace) -> int:
    backend = _load("bench")
    if backend is None:
        return EXIT_NO_LIBRARY
    from acl_bindings import AclError

    from . import smoke
    from .session import Session

    dtype = smoke.DTYPES[args.dtype]
    n, c, i_d, i_h, i_w = args.input_size
    if args.output_size is not None:
        out_size = args.output_size
        scales: tuple[float, float, float] = (0.0, 0.0, 0.0)
    else:
        out_size = tuple(int(math.floor(v * args.scale)) for v in (i_d, i_h, i_w))
        scales = (args.scale, args.scale, args.scale)
    go_shape = (n, c, *out_size) if args.layout == "NCDHW" else (n, *out_size, c)
    gi_shape = (n, c, i_d, i_h, i_w) if args.layout == "NCDHW" else (n, i_d, i_h, i_w, c)
    rng = np.random.default_rng(0)
    host = rng.standard_normal(go_shape).astype(np.float32).astype(dtype)
    read_bytes = host.nbytes
    write_bytes = int(np.prod(gi_shape)) * dtype.itemsize
    try:
        with Session(args.device) as s:
            go = s.upload(host, args.layout)
            gi = s.empty(gi_shape, dtype, args.layout)
            s.timed_backward(go, out_size, args.input_size, scales, out=gi, repeat=max(args.warmup, 1))
            times = s.timed_backward(go, out_size, args.input_size, scales, out=gi, repeat=args.repeat)
            ws = s.last_workspace_size
            tiny_go = s.upload(np.ones((1, 1, 2, 2, 2), dtype), "NCDHW")
            tiny_gi = s.empty((1, 1, 1, 1, 1), dtype, "NCDHW")
            host_us: list[float] = []
            for k in range(args.warmup + args.repeat):
                t0 = time.perf_counter()
                s.backward(tiny_go, (2, 2, 2), (1, 1, 1, 1, 1), out=tiny_gi)
                if k >= args.warmup:
                    host_us.append((time.perf_counter() - t0) * 1e6)
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
    if args.json:
        _write_json(args.json, {
            "backend": backend.kind, "device": args.device, "dtype": args.dtype, "layout": args.layout,
            "grad_out_shape": list(go_shape), "grad_in_shape": list(gi_shape), "output_size": list(out_size),
            "scales": list(scales), "workspace_size": ws, "repeat": args.repeat, "device_ms": times,
            "device_ms_min": t_min, "device_ms_median": t_med, "gbps_min_time": gbps(t_min),
            "gbps_median_time": gbps(t_med), "bytes_read": read_bytes, "bytes_written": write_bytes,
            "host_us": host_us, "host_us_min": h_min, "host_us_median": h_med})
    return EXIT_OK


# --------------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``upsample3d-grad`` command."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="CANN's aclnnUpsampleNearestExact3dBackward from Python: check the setup, run the official "
                    "sample, smoke-test and benchmark the operator (on an NPU, or on the CPU simulator).",
        epilog="Backend: ACL_BINDINGS_BACKEND=auto (default: real CANN if found, else the simulator) | cann | sim. "
               "Exit codes: 0 ok, 1 failure, 2 usage (or --require-npu without an NPU), 3 no library found.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("doctor", help="check the setup: backend, libraries, CANN version, SoC, devices, operator")
    p.add_argument("--device", type=int, default=0, help="device for the sample run (default 0)")
    p.add_argument("--no-run", action="store_true", help="do not run the official sample")
    p.add_argument("--json", metavar="FILE", help="also write the findings as JSON")
    p.set_defaults(func=_doctor)

    p = sub.add_parser("run", help="run the official sample case and print the four results")
    p.add_argument("--device", type=int, default=0, help="device id (default 0)")
    p.set_defaults(func=_run)

    p = sub.add_parser("smoke", help="run the smoke matrix against the numpy reference")
    p.add_argument("--devices", default="0", help="'0', '1,2' or 'all' (all: one process per device); default 0")
    p.add_argument("--quick", action="store_true", help="a small matrix")
    p.add_argument("--json", metavar="FILE", help="write the report (schema: upsample3d_grad/smoke_schema.json)")
    p.add_argument("--require-npu", action="store_true",
                   help="fail (exit 2) when only the CPU simulator is available")
    p.add_argument("--no-plans", action="store_true",
                   help="Session(plans=False): run both phases on every call (no executor reuse)")
    p.set_defaults(func=_smoke)

    p = sub.add_parser("bench", help="device time (events), host overhead per call, effective GB/s")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--input-size", type=lambda t: _ints(t, 5, "--input-size"), default=(2, 16, 16, 32, 32),
                   metavar="N,C,D,H,W", help="gradInput size (default 2,16,16,32,32)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scale", type=float, default=2.0,
                   help="forward scale for D, H and W, passed to the operator (default 2)")
    g.add_argument("--output-size", type=lambda t: _ints(t, 3, "--output-size"), default=None,
                   metavar="D,H,W", help="gradOut spatial size instead of --scale (scales not passed)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--layout", choices=("NCDHW", "NDHWC"), default="NCDHW")
    p.add_argument("--repeat", type=int, default=20, help="timed runs (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    raw = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(raw)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "repeat", 1) < 1:
        parser.error("--repeat must be >= 1")
    if getattr(args, "warmup", 0) < 0:
        parser.error("--warmup must be >= 0")
    args.argv = [PROG, *raw]
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
