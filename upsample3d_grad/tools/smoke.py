"""The smoke matrix, on the simulator as on real CANN (``upsample3d-grad smoke``, ``tests/npu``): the compute cases
against the numpy reference, the bad-input table, the adjoint family (docs/operators.md, "smoke"); the names of
:mod:`.smoke_cases` and :mod:`.smoke_report` are importable from here too."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from acl_bindings import AclError, DataType, DeviceBuffer, Format, IntArray, Tensor, contiguous_strides
from acl_bindings.enums import dtype_name, enum_name

from .. import checks, reference
from ..op import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize
from ..session import Session
from .adjoint_cases import AdjointCase, adjoint_matrix, run_adjoint_case
from .smoke_cases import (
    DTYPES,
    EPS,
    SmokeCase,
    bad_cases,
    build_matrix,
    compare,
    make_grad_output,
    tolerance_text,
    tolerances,
    window_size,
)
from .smoke_report import (
    DETERMINISM_CANN,
    DETERMINISM_SIM,
    SCHEMA_VERSION,
    device_report,
    environment,
    environment_and_devices,
    merge_reports,
    new_report,
    soc_support,
    summarize,
    unavailable_environment,
)

__all__ = [
    "SmokeCase", "build_matrix", "compare", "window_size", "bad_cases", "make_grad_output", "tolerance_text",
    "run_compute_case", "run_bad_case", "iter_results", "repeat_identical", "soc_support", "environment",
    "environment_and_devices", "device_report", "summarize", "tolerances", "new_report", "run_device",
    "merge_reports", "result_digest", "unavailable_environment",
    "SAMPLE_EXPECTED", "DETERMINISM_CANN", "DETERMINISM_SIM", "SCHEMA_VERSION", "DTYPES", "EPS",
]


#: The official sample's expected result (cann-abi.md §5.6).
SAMPLE_EXPECTED = [36.0, 100.0, 164.0, 228.0]


# --------------------------------------------------------------------------- running the cases

def _base_entry(device: int, kind: str, name: str) -> dict[str, Any]:
    return {"device": device, "kind": kind, "name": name, "dtype": "", "layout": "", "contiguous": True,
            "ratio": "n/a", "mode": "n/a", "shape": [], "result_shape": [], "output_size": None,
            "input_size": None, "scales": [0.0, 0.0, 0.0], "workspace_size": None, "time_ms": None,
            "max_abs_err": None, "max_rel_err": None, "tolerance": "", "expected_code": 0, "got_code": None,
            "status": "error", "message": "", "digest": None}


def run_compute_case(session: Session, case: SmokeCase) -> dict[str, Any]:
    """Run one compute case on *session* and compare it with the reference (``time_ms``: the wall time of
    :meth:`Session.backward`, uploads and downloads included)."""
    entry = _base_entry(session.device.id, "compute", case.name)
    entry.update(dtype=case.dtype, layout=case.layout, contiguous=not case.strided, ratio=case.ratio,
                 mode=case.mode, shape=list(case.grad_out_shape), result_shape=list(case.grad_in_shape),
                 output_size=list(case.output_size), input_size=list(case.input_size),
                 scales=[float(s) for s in (case.scales or (0.0, 0.0, 0.0))], tolerance=tolerance_text(case.dtype))
    try:
        go = make_grad_output(case)
        ref = reference.upsample_nearest_exact3d_backward(go, case.output_size, case.input_size, *case.scale_args,
                                                          layout=case.layout)
        window = window_size(case)
        t0 = time.perf_counter()
        got = session.backward(go, case.output_size, case.input_size, *case.scale_args, layout=case.layout)
        entry["time_ms"] = (time.perf_counter() - t0) * 1e3
        entry["workspace_size"] = int(session.last_workspace_size)
        entry["got_code"] = 0
    except AclError as exc:
        entry["got_code"] = exc.code
        entry["message"] = _one_line(str(exc))
        return entry
    except Exception as exc:  # a smoke run reports every failure and goes on with the next case
        entry["message"] = f"{type(exc).__name__}: {_one_line(str(exc))}"
        return entry
    assert isinstance(got, np.ndarray)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        entry["status"] = "fail"
        entry["message"] = f"result is {got.shape} {got.dtype}, expected {ref.shape} {ref.dtype}"
        return entry
    entry["digest"] = result_digest(got)
    max_abs, max_rel, ok = compare(got, ref, case.dtype, window)
    entry["max_abs_err"], entry["max_rel_err"] = (x if math.isfinite(x) else None for x in (max_abs, max_rel))
    if case.name.startswith("official-sample") and got.ravel().tolist() != SAMPLE_EXPECTED:
        ok = False
        entry["message"] = f"expected {SAMPLE_EXPECTED}, got {got.ravel().tolist()}"
    entry["status"] = "pass" if ok else "fail"
    if not ok and not entry["message"]:
        entry["message"] = f"outside the tolerance ({tolerance_text(case.dtype)}, window {window})"
    return entry


def result_digest(result: np.ndarray) -> str:
    """``sha256:<hex>`` of the result's bytes in C order: equal digests mean bitwise-identical results."""
    return "sha256:" + hashlib.sha256(np.ascontiguousarray(result).tobytes()).hexdigest()


def _spec_tensor(spec: checks.TensorSpec | None, buf: DeviceBuffer) -> Tensor | None:
    if spec is None:
        return None
    # over the buffer's address, not the buffer: a bad case's view may reach past it (phase 1 refuses it first),
    # which the binding refuses for a Tensor made over a buffer (contiguous: its storage is never validated)
    return Tensor(spec.shape, DataType(spec.dtype), address=buf.ptr, strides=contiguous_strides(spec.shape),
                  format=Format(spec.format))


def _buffer_bytes(spec: checks.TensorSpec | None) -> int:
    """Bytes for a bad case's tensor: its whole extent at 16 bytes per element (the widest dtype), capped at 64 MiB."""
    if spec is None:
        return 64
    return max(64, min(64 << 20, math.prod(max(d, 0) for d in spec.shape) * 16))


def run_bad_case(session: Session, case: checks.BadCase, soc: str = "") -> dict[str, Any]:
    """Run a bad-input case through the faithful phase 1 (no host checks) and expect its code (the INT32_MAX dim
    case is skipped on Ascend950, where CANN does not check it: cann-abi.md §5.1 step 5)."""
    entry = _base_entry(session.device.id, "bad_input", f"bad: {case.label}")
    go = case.grad_out
    fmt = enum_name(Format, go.format) if go else ""
    entry.update(dtype=dtype_name(go.dtype) if go else "", layout=fmt, shape=list(go.shape) if go else [],
                 result_shape=list(case.grad_in.shape) if case.grad_in else [],
                 output_size=list(case.output_size) if case.output_size is not None else None,
                 input_size=list(case.input_size) if case.input_size is not None else None,
                 scales=[float(s) if math.isfinite(s) else None for s in case.scales],
                 expected_code=case.code, tolerance="exact status code")
    too_big = go is not None and any(d > checks.INT32_MAX for d in go.shape)
    if too_big and soc.startswith("Ascend950"):
        entry["status"] = "skip"
        entry["message"] = "CANN does not check the INT32_MAX dim limit on Ascend950 (cann-abi.md §5.1)"
        return entry
    t0 = time.perf_counter()
    try:
        # separate buffers, each as large as its tensor (up to a cap), so that neither an overlap nor an
        # address range check of the library can stand in for the check the case is about
        with DeviceBuffer(session.device, _buffer_bytes(case.grad_out)) as go_buf, \
                DeviceBuffer(session.device, _buffer_bytes(case.grad_in)) as gi_buf:
            go_t = _spec_tensor(case.grad_out, go_buf)
            gi_t = _spec_tensor(case.grad_in, gi_buf)
            out_a = IntArray(case.output_size) if case.output_size is not None else None
            in_a = IntArray(case.input_size) if case.input_size is not None else None
            try:
                size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
                    go_t, out_a, in_a, *case.scales, gi_t)
                executor.close()  # never run
                entry["got_code"] = 0
                entry["workspace_size"] = int(size)
            except AclError as exc:
                entry["got_code"] = exc.code
                entry["message"] = _one_line(exc.detail or str(exc))
            finally:
                for obj in (go_t, gi_t, out_a, in_a):
                    if obj is not None:
                        obj.close()
    except Exception as exc:  # report and go on
        entry["message"] = f"{type(exc).__name__}: {_one_line(str(exc))}"
        return entry
    entry["time_ms"] = (time.perf_counter() - t0) * 1e3
    if entry["got_code"] == case.code:
        entry["status"] = "pass"
    else:
        entry["status"] = "fail"
        entry["message"] = f"expected status {case.code}, got {entry['got_code']}. {entry['message']}".strip()
    return entry


def _one_line(text: str, limit: int = 300) -> str:
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def iter_results(session: Session, cases: Sequence[SmokeCase], bad: Sequence[checks.BadCase],
                 soc: str = "", adjoint: Sequence[AdjointCase] = ()) -> Iterator[dict[str, Any]]:
    """Run every compute case, every bad-input case, then every adjoint check, yielding each result as it finishes."""
    for case in cases:
        yield run_compute_case(session, case)
    for bad_case in bad:
        yield run_bad_case(session, bad_case, soc)
    for adjoint_case in adjoint:
        yield run_adjoint_case(session, adjoint_case, _base_entry(session.device.id, "adjoint", adjoint_case.name),
                               soc)


def repeat_identical(session: Session, case: SmokeCase) -> bool | None:
    """Run *case* twice and tell whether the two results are bit-identical (None on error)."""
    go = make_grad_output(case)
    try:
        a = session.backward(go, case.output_size, case.input_size, *case.scale_args, layout=case.layout)
        b = session.backward(go, case.output_size, case.input_size, *case.scale_args, layout=case.layout)
    except Exception:  # the case itself reports the error
        return None
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    return bool(a.tobytes() == b.tobytes())


def run_device(device_id: int, quick: bool, env: dict[str, Any],
               progress: Callable[[int, int, dict[str, Any]], None] | None = None,
               plans: bool = True) -> tuple[dict, list]:
    """Run the whole matrix on one device (*plans*: the Session's executor reuse); ``(device entry, results)``."""
    cases = build_matrix(quick)
    bad = bad_cases()
    adjoint = adjoint_matrix(quick)
    total = len(cases) + len(bad) + len(adjoint)
    results: list[dict[str, Any]] = []
    with Session(device_id, plans=plans) as session:
        mem = session.device.mem_info()
        for k, entry in enumerate(iter_results(session, cases, bad, env.get("soc_name", ""), adjoint), 1):
            results.append(entry)
            if progress is not None:
                progress(k, total, entry)
        identical = repeat_identical(session, cases[min(1, len(cases) - 1)])
    return device_report(device_id, results, mem, identical), results
