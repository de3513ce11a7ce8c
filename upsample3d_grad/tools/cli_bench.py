"""``upsample3d-grad bench``: device time (events), host overhead per call and effective bandwidth."""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import numpy as np

from acl_bindings import AclError, Device
from acl_bindings.enums import as_dtype

from .. import checks
from ..session import Session
from . import smoke
from ._cli_shared import (
    _RUN,
    EXIT_FAIL,
    EXIT_NO_LIBRARY,
    EXIT_OK,
    _check_device,
    _error,
    _load,
    _one_line,
    _Progress,
    _size,
    _write_json,
)


def _bench_geometry(args: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, int, int],
                                                       tuple[float, float, float]]:
    """``(gradOut shape, gradInput shape, outputSize, scales)``, checked before any allocation (``ValueError``)."""
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
    go_shape = checks.physical_shape(args.layout, n, c, *out_size)
    gi_shape = checks.physical_shape(args.layout, *args.input_size)
    acl_dtype = int(checks.SUPPORTED[smoke.DTYPES.index(args.dtype)])
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


def bench_report(args: argparse.Namespace) -> dict[str, Any]:
    """The report as it starts (what a Ctrl-C writes from the command's start); the case's geometry is added."""
    return {"backend": None, "device": args.device, "dtype": args.dtype, "layout": args.layout,
            "repeat": args.repeat, "device_ms": [], "host_us": [], "interrupted": False}


def _bench(args: argparse.Namespace) -> int:
    partial = _RUN.report if _RUN.report is not None else bench_report(args)
    _RUN.report = partial  # what a Ctrl-C writes
    try:
        go_shape, gi_shape, out_size, scales = _bench_geometry(args)
    except ValueError as exc:
        args.parser.error(str(exc))
    partial.update(grad_out_shape=list(go_shape), grad_in_shape=list(gi_shape), output_size=list(out_size),
                   scales=list(scales))
    backend = _load("bench")
    if backend is None:
        return EXIT_NO_LIBRARY
    partial["backend"] = backend.kind
    _check_device(args)

    dtype = as_dtype(args.dtype)
    read_bytes = math.prod(go_shape) * dtype.itemsize
    write_bytes = math.prod(gi_shape) * dtype.itemsize
    times: list[float] = partial["device_ms"]
    host_us: list[float] = partial["host_us"]
    total_runs = 2 * (args.warmup + args.repeat)
    try:
        with Device(args.device) as dev:
            free, total = dev.mem_info()
        if read_bytes + write_bytes > free:
            args.parser.error(f"the case needs {_size(read_bytes + write_bytes)} of device memory (gradOut + "
                              f"gradInput) but device {args.device} has {_size(free)} free of {_size(total)}")
        host = _random_data(go_shape, dtype)
        progress = _Progress("bench runs")
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
        _error("bench", f"FAILED: {_one_line(exc)}")
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
