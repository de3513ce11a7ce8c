"""The smoke matrix: the operator against the numpy reference, plus the bad-input table.

Used by ``upsample3d-grad smoke`` and by ``tests/npu``.  Nothing here is specific to
the simulator: the same cases run on real CANN.

The compute matrix (:func:`build_matrix`) crosses

* dtypes: float32, float16, bfloat16;
* layouts: NCDHW, NDHWC (physical dims, cann-abi.md §5.6);
* geometries: sizes only versus all three scales given; integer, non-integer,
  downsampling and identity ratios, an exact tie (cann-abi.md §6.3), the largest
  ratio CANN accepts (50), and an empty tensor (N = 0);
* contiguous versus strided gradOut (a sliced view with an offset, or a permuted one).

Each case is compared with :func:`upsample3d_grad.reference.upsample_nearest_exact3d_backward`
(the CANN window law in float32) at these tolerances, per element:

* float32: ``|got - ref| <= 1e-5 * |ref| + 1e-5 * window``, where ``window`` is the
  largest number of gradOut elements summed into one gradInput element (the
  summation order on the NPU differs from numpy's, cann-abi.md §6.4);
* float16 / bfloat16: the reference sums in float32 and rounds once, as CANN does;
  the result may differ from it by one rounding of the dtype:
  ``|got - ref| <= eps(dtype) * |ref| + 1e-5 * window`` (eps = 2**-10 for float16,
  2**-7 for bfloat16).

The adjoint family (:mod:`upsample3d_grad.adjoint_cases`) runs the forward and the backward on the
device and checks them against each other (every dtype and layout; with and without scales; tie
and non-tie shapes), with the residual the two index laws predict.

The bad-input table is :data:`upsample3d_grad.checks.BAD_CASES` (those CANN itself
checks), run through the faithful two-phase API with the host checks bypassed: each
case's tensors are aclTensors with its dtype, format and shape over a small device
buffer, and phase 1 must return the case's status code.
"""

from __future__ import annotations

import hashlib
import math
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from acl_bindings import (
    AclError,
    DataType,
    DeviceBuffer,
    Format,
    IntArray,
    Tensor,
    contiguous_strides,
    load_backend,
)
from acl_bindings.enums import dtype_name, enum_name

from . import checks, hostinfo, reference
from ._api import OP, aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize
from .adjoint_cases import AdjointCase, adjoint_matrix, run_adjoint_case
from .session import Session

__all__ = [
    "SmokeCase", "build_matrix", "compare", "window_size", "bad_cases", "make_grad_output", "tolerance_text",
    "run_compute_case", "run_bad_case", "iter_results", "repeat_identical", "soc_support", "environment",
    "environment_and_devices", "device_report", "summarize", "tolerances", "new_report", "run_device",
    "merge_reports", "result_digest", "unavailable_environment",
    "SAMPLE_EXPECTED", "DETERMINISM_CANN", "DETERMINISM_SIM", "SCHEMA_VERSION",
]

SCHEMA_VERSION = 2
DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                               "bfloat16": np.dtype(ml_dtypes.bfloat16)}
#: float32 part of the tolerance (relative, and absolute per summed element).
RTOL32 = 1e-5
ATOL_PER_ELEMENT = 1e-5
#: One rounding of each low-precision dtype (machine epsilon).
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
#: The official sample's expected result (cann-abi.md §5.6).
SAMPLE_EXPECTED = [36.0, 100.0, 164.0, 228.0]
DETERMINISM_CANN = "deterministic by default per CANN docs (cann-abi.md §5.5)"
REFERENCE_TEXT = "upsample3d_grad.reference, convention 'cann' (float32 window law, cann-abi.md §6.5)"
DETERMINISM_SIM = "deterministic (the simulator's kernel sums in a fixed order)"


@dataclass(frozen=True)
class SmokeCase:
    """One compute case of the smoke matrix.

    ``input_size`` is ``(N, C, iD, iH, iW)`` and ``output_size`` ``(oD, oH, oW)`` whatever
    the layout; ``scales`` is None (sizes only) or the three forward scales;
    ``strided`` is ``""`` (contiguous), ``"sliced"`` or ``"permuted"``.
    """

    name: str
    dtype: str
    layout: str
    input_size: tuple[int, int, int, int, int]
    output_size: tuple[int, int, int]
    scales: tuple[float, float, float] | None
    strided: str
    ratio: str

    @property
    def mode(self) -> str:
        """``"scales"`` when all three scales are given, else ``"sizes"``."""
        return "scales" if self.scales else "sizes"

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy dtype."""
        return DTYPES[self.dtype]

    @property
    def grad_out_shape(self) -> tuple[int, ...]:
        """Physical gradOut shape in :attr:`layout`."""
        n, c = self.input_size[:2]
        return checks.physical_shape(self.layout, n, c, *self.output_size)

    @property
    def grad_in_shape(self) -> tuple[int, ...]:
        """Physical gradInput shape in :attr:`layout`."""
        return checks.physical_shape(self.layout, *self.input_size)

    @property
    def scale_args(self) -> tuple[float | None, float | None, float | None]:
        """``(scales_d, scales_h, scales_w)`` as passed to the API (None when not given)."""
        return self.scales if self.scales else (None, None, None)


# (label, (iD, iH, iW), (oD, oH, oW), scales or None, ratio kind)
_GEOMETRIES: list[tuple[str, tuple[int, int, int], tuple[int, int, int], tuple[float, float, float] | None, str]]
_GEOMETRIES = [
    ("x2-sizes", (3, 4, 5), (6, 8, 10), None, "integer"),
    ("x3-scales", (2, 3, 2), (6, 9, 6), (3.0, 3.0, 3.0), "integer"),
    ("ut-scales", (2, 4, 8), (4, 8, 12), (2.0, 2.0, 1.5), "non-integer"),  # the official UT case (§5.6)
    ("nonint-sizes", (3, 5, 7), (7, 11, 10), None, "non-integer"),
    ("nonint-scales", (3, 5, 7), (5, 12, 4), (1.7, 2.5, 0.6), "non-integer"),
    ("down-sizes", (6, 9, 10), (3, 4, 7), None, "downsampling"),
    ("down-scales", (8, 10, 12), (4, 4, 9), (0.5, 0.4, 0.75), "downsampling"),
    ("identity", (3, 4, 5), (3, 4, 5), None, "identity"),
    ("tie-2to41", (2, 2, 3), (41, 5, 7), None, "non-integer"),  # exact ties (cann-abi.md §6.3)
    ("ratio-50", (1, 2, 1), (50, 3, 20), None, "integer"),  # the largest ratio CANN accepts (§5.1)
]
_QUICK_GEOMETRIES = ("ut-scales", "nonint-sizes", "down-scales")
_NC = (2, 3)


def _case(label: str, dtype: str, layout: str, n: int, c: int, i: tuple[int, int, int], o: tuple[int, int, int],
          scales: tuple[float, float, float] | None, strided: str, ratio: str) -> SmokeCase:
    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]
    name = f"{label}-{short}-{layout}-{strided or 'contig'}"
    return SmokeCase(name, dtype, layout, (n, c, *i), o, scales, strided, ratio)


def build_matrix(quick: bool = False) -> list[SmokeCase]:
    """The compute cases, in a stable order with unique names.

    Parameters
    ----------
    quick:
        A small matrix (every dtype and layout, three geometries, one strided case of
        each kind) instead of the full cross product.
    """
    cases: list[SmokeCase] = [SmokeCase("official-sample-fp32-NCDHW-contig", "float32", "NCDHW", (2, 2, 1, 1, 1),
                                        (2, 2, 2), None, "", "integer")]
    geometries = [g for g in _GEOMETRIES if not quick or g[0] in _QUICK_GEOMETRIES]
    for k, (label, i, o, scales, ratio) in enumerate(geometries):
        kind = "sliced" if k % 2 == 0 else "permuted"
        for dtype in DTYPES:
            for layout in ("NCDHW", "NDHWC"):
                strides = ("",) if quick else ("", kind)
                for strided in strides:
                    cases.append(_case(label, dtype, layout, *_NC, i, o, scales, strided, ratio))
    if quick:
        cases.append(_case("nonint-sizes", "float32", "NCDHW", *_NC, (3, 5, 7), (7, 11, 10), None, "sliced",
                           "non-integer"))
        cases.append(_case("down-scales", "bfloat16", "NDHWC", *_NC, (8, 10, 12), (4, 4, 9), (0.5, 0.4, 0.75),
                           "permuted", "downsampling"))
    cases.append(_case("empty-N0", "float32", "NCDHW", 0, 3, (3, 4, 5), (6, 8, 10), None, "", "empty"))
    if not quick:
        cases.append(_case("empty-N0", "float16", "NDHWC", 0, 3, (3, 4, 5), (6, 8, 10), None, "", "empty"))
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "smoke case names must be unique"
    return cases


def bad_cases() -> list[checks.BadCase]:
    """The bad-input cases that CANN's own phase 1 checks (``cann_checks=True``)."""
    return [c for c in checks.BAD_CASES if c.cann_checks]


# --------------------------------------------------------------------------- inputs and tolerances

def make_grad_output(case: SmokeCase) -> np.ndarray:
    """The case's gradOut: seeded random values in the case's dtype, layout and striding.

    A ``"sliced"`` array is a view with a step of 2 in its last dim and an offset of one
    leading slab; a ``"permuted"`` one is a transposed view of a buffer stored in another
    dim order.  Both keep positive strides (the Session uploads them as they are).
    """
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    shape = case.grad_out_shape
    dt = case.np_dtype
    if case.strided == "sliced":
        big = (shape[0] + 1, *shape[1:-1], shape[-1] * 2)
        base = rng.standard_normal(big).astype(np.float32).astype(dt)
        view = base[1:, ..., ::2]
    elif case.strided == "permuted":
        order = (0, 2, 3, 4, 1)  # store in another dim order, then view in the case's order
        stored = tuple(shape[k] for k in order)
        base = rng.standard_normal(stored).astype(np.float32).astype(dt)
        view = np.transpose(base, np.argsort(order))
    else:
        view = rng.standard_normal(shape).astype(np.float32).astype(dt)
    if case.name.startswith("official-sample"):
        view = np.arange(1, 33, dtype=np.float32).reshape(shape).astype(dt)
    assert view.shape == shape
    return view


def window_size(case: SmokeCase) -> int:
    """The largest number of gradOut elements summed into one gradInput element."""
    s = reference.resolve_scales(case.output_size, case.input_size, *case.scale_args)
    total = 1
    for k in range(3):
        lo = reference.window_starts(case.input_size[2 + k], case.output_size[k], s[k])
        total *= max(int(np.diff(lo).max(initial=0)), 1)
    return total


def tolerance_text(dtype: str) -> str:
    """The tolerance rule of *dtype*, as written in the report."""
    if dtype == "float32":
        return f"|got-ref| <= {RTOL32:g}*|ref| + {ATOL_PER_ELEMENT:g}*window"
    return (f"|got-ref| <= eps*|ref| + {ATOL_PER_ELEMENT:g}*window with eps={EPS[dtype]:g} "
            "(one rounding; ref summed in float32, rounded once)")


def compare(got: np.ndarray, ref: np.ndarray, dtype: str, window: int) -> tuple[float, float, bool]:
    """``(max_abs_err, max_rel_err, within_tolerance)`` of *got* against *ref* (see the module docstring).

    *window* is :func:`window_size`; ``max_rel_err`` is over elements with ``|ref| >= 1e-3``.
    NaN must appear at the same places in both.
    """
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    if g.size == 0:
        return 0.0, 0.0, True
    nan_ok = bool(np.array_equal(np.isnan(g), np.isnan(r)))
    diff = np.abs(g - r)
    diff = np.where(np.isnan(g) & np.isnan(r), 0.0, diff)
    rel_base = np.abs(r)
    big = rel_base >= 1e-3
    max_abs = float(np.nanmax(diff)) if diff.size else 0.0
    max_rel = float(np.max(diff[big] / rel_base[big])) if np.any(big) else 0.0
    rtol = RTOL32 if dtype == "float32" else EPS[dtype]
    limit = rtol * np.abs(np.nan_to_num(r)) + ATOL_PER_ELEMENT * window
    ok = nan_ok and bool(np.all((diff <= limit) | (np.isnan(g) & np.isnan(r))))
    return max_abs, max_rel, ok


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


# --------------------------------------------------------------------------- running the cases

def _base_entry(device: int, kind: str, name: str) -> dict[str, Any]:
    return {"device": device, "kind": kind, "name": name, "dtype": "", "layout": "", "contiguous": True,
            "ratio": "n/a", "mode": "n/a", "shape": [], "result_shape": [], "output_size": None,
            "input_size": None, "scales": [0.0, 0.0, 0.0], "workspace_size": None, "time_ms": None,
            "max_abs_err": None, "max_rel_err": None, "tolerance": "", "expected_code": 0, "got_code": None,
            "status": "error", "message": "", "digest": None}


def run_compute_case(session: Session, case: SmokeCase) -> dict[str, Any]:
    """Run one compute case on *session* and compare it with the reference.

    ``time_ms`` is the wall time of :meth:`Session.backward` (upload, both phases, the
    kernel and the download); ``bench`` measures device time alone.
    """
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
    entry["max_abs_err"], entry["max_rel_err"] = _finite(max_abs), _finite(max_rel)
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
    return Tensor(spec.shape, DataType(spec.dtype), buf, strides=contiguous_strides(spec.shape),
                  format=Format(spec.format))


_MAX_CASE_BYTES = 64 << 20


def _buffer_bytes(spec: checks.TensorSpec | None) -> int:
    """Bytes for a bad case's tensor: its whole extent at 16 bytes per element (the widest dtype), capped."""
    if spec is None:
        return 64
    return max(64, min(_MAX_CASE_BYTES, math.prod(max(d, 0) for d in spec.shape) * 16))


def run_bad_case(session: Session, case: checks.BadCase, soc: str = "") -> dict[str, Any]:
    """Run a bad-input case through the faithful phase 1 (no host checks); expect its code.

    On Ascend950 CANN skips the INT32_MAX dim check (cann-abi.md §5.1 step 5), so that
    case is reported as skipped there.
    """
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


# --------------------------------------------------------------------------- environment and reports

#: SoC name prefix -> (supported, note), most specific prefix first (cann-abi.md §5: ops-cv README and docs).
_SOC_SUPPORT: tuple[tuple[str, bool, str], ...] = (
    ("Ascend910B", True, "supported: Atlas A2 series (Ascend910B)"),
    ("Ascend910_93", True, "supported: Atlas A3 series (Ascend910_93)"),
    ("Ascend950", True, "supported: Ascend950"),
    ("Ascend310P", False, "not supported: Atlas 310P (the operator has no kernel for it)"),
    ("Ascend310B", False, "not supported: Atlas 310B (the operator has no kernel for it)"),
    ("Ascend310", False, "not supported: Ascend310 (the operator has no kernel for it)"),
    ("Ascend910", False, "not supported: Ascend910 training series (the operator has no kernel for it)"),
)


def soc_support(soc: str, is_simulator: bool = False) -> tuple[bool | None, str]:
    """Whether the operator supports this SoC (cann-abi.md §5: Atlas A2/A3 and Ascend950 only).

    Returns
    -------
    (supported, note):
        ``supported`` is True, False, or None when the name is not recognised.
    """
    if is_simulator:
        return True, "supported (simulated): the CPU simulator follows the Atlas A2/A3 kernel law"
    name = soc.strip()
    for prefix, supported, note in _SOC_SUPPORT:
        if name.startswith(prefix):
            return supported, note
    return None, f"unknown SoC {name!r}: the operator is documented for Atlas A2/A3 and Ascend950 only"


def environment() -> dict[str, Any]:
    """What the report says about the machine: backend, libraries, CANN version, SoC, devices.

    Loads the backend and the operator library (opens no device).  Raises
    :class:`acl_bindings.LibraryNotFoundError` when no library can be loaded.
    """
    return environment_and_devices(memory=False)[0]


def environment_and_devices(memory: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`environment`, and with *memory* each device's memory (``id``, ``free_bytes``, ``total_bytes``).

    Reading the memory sets every device once (``aclrtSetDevice`` / ``aclrtResetDevice``).
    """
    from acl_bindings import AclError, Device, runtime

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
    if backend.is_simulator:
        from acl_bindings import sim

        info["simulator_version"] = sim.version()
    supported, note = soc_support(str(info.get("soc_name", "")), backend.is_simulator)
    where = backend.find_op_symbol(OP.phase1_name)
    acl_ver = info.get("acl_version")
    env = {
        "backend": backend.kind,
        "backend_label": "CPU simulator (no NPU is used)" if backend.is_simulator else "real CANN",
        "requested": backend.requested,
        "fallback": backend.fallback or None,
        "simulator_version": info.get("simulator_version"),
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
    by = {s: sum(1 for r in results if r["status"] == s) for s in ("pass", "fail", "error", "skip")}
    return {"total": len(results), "passed": by["pass"], "failed": by["fail"], "errors": by["error"],
            "skipped": by["skip"], "ok": by["fail"] == 0 and by["error"] == 0 and len(results) > 0}


def tolerances() -> dict[str, str]:
    """The tolerance rule of every dtype."""
    return {dt: tolerance_text(dt) for dt in DTYPES}


def new_report(env: dict[str, Any], quick: bool, argv: Sequence[str], plans: bool = True) -> dict[str, Any]:
    """An empty report for *env*."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "upsample3d-grad smoke",
        "created_utc": hostinfo.utc_now(),
        "argv": list(argv),
        "command_line": hostinfo.command_line(argv),
        "interrupted": False,
        "quick": bool(quick),
        "plans": bool(plans),
        "environment": env,
        "tolerances": tolerances(),
        "devices": [],
        "summary": summarize([]),
        "cases": [],
    }


def run_device(device_id: int, quick: bool, env: dict[str, Any],
               progress: Callable[[int, int, dict[str, Any]], None] | None = None,
               plans: bool = True) -> tuple[dict, list]:
    """Run the whole matrix on one device (``plans``: :class:`Session`'s executor reuse on or off).

    Returns
    -------
    (device_entry, case_results)
    """
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
