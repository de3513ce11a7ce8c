"""Benchmarks: reference speed, the simulator's kernel, and host overhead per call.

Run from a checkout::

    python benchmarks/run.py                 # 5 repeats, results in benchmarks/results/
    python benchmarks/run.py --repeat 7 --out /tmp/bench
    python benchmarks/run.py --tiny          # small sizes, 2 repeats: checks that the script works (< 60 s)

Everything is measured in one process, interleaved: for each repeat, for each case, for
each method, one measurement (the order of the methods rotates from one repeat to the
next).  Each figure is reported as the minimum and the median over the repeats; ratios are
computed from the minima (the least disturbed measurement) and, in brackets, from the
medians.

Reference speed (cases (a)-(f), float32 NCDHW, and (b) in float16, bfloat16
and NDHWC), one call per measurement ((a): the mean of a batch):

* ``reference``: :func:`upsample3d_grad.reference.upsample_nearest_exact3d_backward`
  (imported when the benchmark runs), numpy in, numpy out;
* ``torch``: ``torch.ops.aten._upsample_nearest_exact3d_backward`` on CPU with
  ``torch.set_num_threads(1)`` (skipped, and said so, without torch);
* ``floor``: the memory-bandwidth floor, the time to stream the same bytes: reading
  gradOut's bytes (``ndarray.max`` over gradOut's own memory viewed as uint8, so that it
  meets the caches as the reference does) plus writing gradInput's byte count
  (``ndarray.fill`` of a uint8 buffer of that size, allocated and faulted in once);
* ``sim kernel``: the simulator's C kernel on device arrays of a Session, device time from
  events around phase 2 (``Session.timed_backward``);
* ``reference, N threads`` (only with ``--threads N``, N > 1; float32 NCDHW cases (b)-(f)): the
  reference with ``threads=N``, for information (the targets use one thread).  It is off by
  default because a multi-threaded method in the interleaved rounds changes what the caches
  hold for the other methods;
* ``numpy pass`` (float32 NCDHW cases (b)-(f)): gradOut read once by ``np.add``, in chunks of
  128 Ki elements, each chunk's two halves added into one reused, cache-resident buffer: the
  first pass of a chunked numpy reduction with nothing after it.  A numpy reference makes at
  least this pass, so ``numpy pass / floor`` bounds from below the ``reference / floor``
  ratio a numpy reference can reach on this machine.

Every method runs on one thread: torch is set to 1 thread, and ``OPENBLAS_NUM_THREADS`` is
set to 1 before numpy is imported (unless already set; the value used is in the results),
because the reference sums some innermost dims with a BLAS matmul.

Host overhead per operator call, on the simulator, case (a) (gradOut (1,1,2,2,2)), as the
mean of a batch of calls.  Its calls take microseconds, so one disturbance (another tenant of
the VM, a cache or frequency change after the large cases) spoils a whole batch: each repeat
measures every method in several rounds (``--rounds``, default 5; rotating order), so the
minima and medians are over repeats x rounds batches, and the same calls are timed in all:

* ``torch eager``: torch CPU's eager call on the same tiny tensor;
* ``one-shot``: a :class:`~upsample3d_grad.fastpath.PreparedCall` with ``plan=False``: its
  2 aclTensors and 2 aclIntArrays made once; per call phase 1, phase 2, stream synchronisation;
* ``plan``: a PreparedCall with a repeatable executor: phase 2 + synchronisation per call;
* ``plan, new addresses``: the same, alternating between two pairs of device arrays, so the
  executor's input and output addresses are updated before every call;
* for context: the one-shot sequence made of the binding's objects (``Tensor``,
  ``IntArray``, ``TwoPhaseOp``), ``Session.backward`` on device arrays (with and without
  plans);
* ``C floor``: the same C calls made from ``benchmarks/c_floor.c``, compiled here with the
  system ``cc`` against the simulator's libraries and run once per round (``one-shot,
  handles per call``: the official sample's sequence, which the binding's objects and
  ``Session.backward`` without plans are compared with).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread, as torch (see the docstring)

import numpy as np  # noqa: E402
from pycalls import python_calls  # noqa: E402  (benchmarks/, this script's folder)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_PASS_CHUNK = 1 << 17  # elements per chunk of the "numpy pass" measurement


def _threads_method(threads: int) -> str:
    """Name of the ``--threads N`` measurement."""
    return f"reference, {threads} threads"

#: gradOut and gradInput shapes (NCDHW) of the benchmark cases
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
    "a": ((1, 1, 2, 2, 2), (1, 1, 1, 1, 1), "tiny"),
    "b": ((2, 16, 32, 64, 64), (2, 16, 16, 32, 32), "2x"),
    "c": ((1, 32, 24, 96, 96), (1, 32, 8, 32, 32), "3x"),
    "d": ((1, 8, 40, 100, 100), (1, 8, 17, 33, 41), "non-integer"),
    "e": ((1, 4, 64, 128, 128), (1, 4, 64, 128, 128), "identity"),
    "f": ((1, 8, 16, 32, 32), (1, 8, 32, 64, 64), "downsampling"),
}
#: the same structure at a fraction of the size (--tiny)
TINY_CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
    "a": CASES["a"],
    "b": ((1, 2, 8, 16, 16), (1, 2, 4, 8, 8), "2x"),
    "c": ((1, 2, 6, 12, 12), (1, 2, 2, 4, 4), "3x"),
    "d": ((1, 2, 10, 12, 14), (1, 2, 4, 5, 6), "non-integer"),
    "e": ((1, 2, 8, 8, 8), (1, 2, 8, 8, 8), "identity"),
    "f": ((1, 2, 4, 4, 4), (1, 2, 8, 8, 8), "downsampling"),
}


@dataclass
class Variant:
    """One row of the reference table: a case in a dtype and layout."""

    key: str
    case: str
    dtype: str
    layout: str
    go_shape: tuple[int, ...]  # NCDHW
    gi_shape: tuple[int, ...]  # NCDHW
    label: str
    inner: int = 1  # calls per measurement
    methods: dict[str, Callable[[], float]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    check: Optional[Callable[[], dict[str, Any]]] = None  # results of the methods against the reference
    agreement: dict[str, Any] = field(default_factory=dict)

    @property
    def go_bytes(self) -> int:
        return int(np.prod(self.go_shape)) * _itemsize(self.dtype)

    @property
    def gi_bytes(self) -> int:
        return int(np.prod(self.gi_shape)) * _itemsize(self.dtype)


def _itemsize(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def _np_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _phys(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    n, c, d, h, w = shape
    return (n, d, h, w, c) if layout == "NDHWC" else shape


def _timed(fn: Callable[[], Any], inner: int) -> float:
    """Seconds per call: *inner* calls timed together."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "n": len(values)}


# ---------------------------------------------------------------------------------------------
# set-up of each measurement
# ---------------------------------------------------------------------------------------------

def _load_torch(no_torch: bool) -> tuple[Any, str]:
    if no_torch:
        return None, "disabled by --no-torch"
    try:
        import torch
    except ImportError as exc:
        return None, f"torch is not installed ({exc})"
    torch.set_num_threads(1)
    return torch, f"torch {torch.__version__}, 1 thread"


def _torch_tensor(torch: Any, g: np.ndarray, dtype: str, layout: str) -> Any:
    if dtype == "bfloat16":
        t = torch.from_numpy(g.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(g)
    if layout == "NDHWC":  # logical NCDHW, channels-last memory
        t = t.permute(0, 4, 1, 2, 3)
        assert t.is_contiguous(memory_format=torch.channels_last_3d)
    return t


def build_variants(cases: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]], tiny: bool) -> list[Variant]:
    out = []
    for case, (go, gi, label) in cases.items():
        out.append(Variant(case, case, "float32", "NCDHW", go, gi, label, inner=(200 if tiny else 2000) if case == "a"
                           else 1))
    go, gi, label = cases["b"]
    for dtype in ("float16", "bfloat16"):
        out.append(Variant(f"b-{dtype}", "b", dtype, "NCDHW", go, gi, f"{label}, {dtype}"))
    out.append(Variant("b-NDHWC", "b", "float32", "NDHWC", go, gi, f"{label}, NDHWC"))
    return out


def setup_reference(variants: list[Variant], torch: Any, session: Any, threads: int = 1) -> None:
    from upsample3d_grad import reference

    rng = np.random.default_rng(0)
    for v in variants:
        g32 = rng.standard_normal(_phys(v.go_shape, v.layout)).astype(np.float32)
        g = g32.astype(_np_dtype(v.dtype))
        out3, in5 = v.go_shape[2:], v.gi_shape
        layout = v.layout

        def ref(g: np.ndarray = g, out3: tuple[int, ...] = out3, in5: tuple[int, ...] = in5, layout: str = layout,
                inner: int = v.inner) -> float:
            return _timed(lambda: reference.upsample_nearest_exact3d_backward(g, out3, in5, layout=layout), inner)

        v.methods["reference"] = ref

        main_f32 = v.dtype == "float32" and v.layout == "NCDHW" and v.case != "a"  # cases (b)-(f)
        if threads > 1 and main_f32:
            def ref_threads(g: np.ndarray = g, out3: tuple[int, ...] = out3, in5: tuple[int, ...] = in5,
                            inner: int = v.inner) -> float:
                return _timed(lambda: reference.upsample_nearest_exact3d_backward(g, out3, in5, threads=threads),
                              inner)

            v.methods[_threads_method(threads)] = ref_threads

        src = g.reshape(-1).view(np.uint8)  # gradOut's own memory: the reference's cache state
        dst = np.zeros(max(v.gi_bytes, 1), np.uint8)  # allocated (and faulted in) once

        def floor(src: np.ndarray = src, dst: np.ndarray = dst, inner: int = v.inner) -> float:
            def stream() -> None:
                src.max()   # read gradOut's bytes
                dst.fill(0)  # write gradInput's bytes
            return _timed(stream, inner)

        v.methods["floor"] = floor

        if main_f32:
            flat = g.reshape(-1)
            tmp = np.empty(_PASS_CHUNK // 2, np.float32)

            def numpy_pass(flat: np.ndarray = flat, tmp: np.ndarray = tmp, inner: int = v.inner) -> float:
                def one_pass() -> None:
                    for a in range(0, flat.size, _PASS_CHUNK):
                        c = flat[a : a + _PASS_CHUNK]
                        h = c.size // 2
                        np.add(c[:h], c[h : 2 * h], out=tmp[:h])
                return _timed(one_pass, inner)

            v.methods["numpy pass"] = numpy_pass

        if torch is not None:
            try:
                tg = _torch_tensor(torch, g, v.dtype, v.layout)
                op = torch.ops.aten._upsample_nearest_exact3d_backward
                op(tg, list(out3), list(in5))  # supported in this dtype?

                def tor(tg: Any = tg, out3: tuple[int, ...] = out3, in5: tuple[int, ...] = in5,
                        inner: int = v.inner, op: Any = op) -> float:
                    o, i = list(out3), list(in5)
                    return _timed(lambda: op(tg, o, i), inner)

                v.methods["torch"] = tor
            except Exception as exc:  # noqa: BLE001 - reported in the table
                v.notes["torch"] = f"torch refused: {type(exc).__name__}: {exc}"

        go_dev = gi_dev = None
        if session is not None:
            go_dev = session.upload(g, layout)
            gi_dev = session.empty(_phys(in5, layout), g.dtype, layout)

            def kernel(go_dev: Any = go_dev, gi_dev: Any = gi_dev, out3: tuple[int, ...] = out3,
                       in5: tuple[int, ...] = in5, inner: int = v.inner) -> float:
                ms = session.timed_backward(go_dev, out3, in5, out=gi_dev, repeat=inner)
                return sum(ms) / len(ms) / 1e3

            v.methods["sim kernel"] = kernel

        def check(g: np.ndarray = g, out3: tuple[int, ...] = out3, in5: tuple[int, ...] = in5, layout: str = layout,
                  gi_dev: Any = gi_dev, v: Variant = v) -> dict[str, Any]:
            """Max |difference| from the reference of each method's result (after the warm-up runs)."""
            want = reference.upsample_nearest_exact3d_backward(g, out3, in5, layout=layout).astype(np.float32)
            scale = float(np.abs(want).max()) or 1.0
            res: dict[str, Any] = {}
            if gi_dev is not None:
                got = gi_dev.download().astype(np.float32)
                res["sim kernel"] = float(np.abs(got - want).max()) / scale
            if "torch" in v.methods and torch is not None:
                t = _torch_tensor(torch, g, v.dtype, v.layout)
                r = torch.ops.aten._upsample_nearest_exact3d_backward(t, list(out3), list(in5))
                if v.layout == "NDHWC":
                    r = r.permute(0, 2, 3, 4, 1)
                got = r.float().contiguous().numpy()
                res["torch"] = float(np.abs(got - want).max()) / scale
            return res

        v.check = check


# ---------------------------------------------------------------------------------------------
# host overhead
# ---------------------------------------------------------------------------------------------

@dataclass
class Overhead:
    """Per-call host overhead on the tiny case: method -> seconds per call, one per batch (repeats x rounds)."""

    batch: int
    rounds: int = 1  # measurements of each method per repeat
    methods: dict[str, Callable[[], float]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    sessions: list[Any] = field(default_factory=list)  # extra sessions to close at the end
    #: C calls per steady-state call of each path (simulator's per-function counters), by function
    calls: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Python-level calls (functions and builtins) per steady-state call of each path, counted
    python_calls: dict[str, float] = field(default_factory=dict)


#: C calls per call of the matching sequence in benchmarks/c_floor.c (the loop bodies of its program text)
C_FLOOR_CALLS = {"one-shot": 3, "one-shot, binding objects": 11, "Session.backward (one-shot)": 11, "plan": 2,
                 "Session.backward (plans)": 2, "plan, new addresses": 4}


def _all_counts() -> dict[str, int]:
    from acl_bindings import sim
    from acl_bindings.prototypes import PROTOTYPES
    from upsample3d_grad.op import OP

    return {name: sim.call_count(name) for name in (*PROTOTYPES, OP.phase1_name, OP.phase2_name)}


def count_calls(ov: Overhead) -> None:
    """Fill ``ov.calls``: one batch of each simulator path, counted by the simulator (steady state); and
    ``ov.python_calls``: the Python-level calls (functions and builtins, ``sys.setprofile``) per call of a batch."""
    for name, fn in ov.methods.items():
        if name == "C floor":
            continue
        ov.python_calls[name] = python_calls(fn) / ov.batch
        if name == "torch eager":
            continue
        before = _all_counts()
        fn()
        after = _all_counts()
        ov.calls[name] = {f: (after[f] - before[f]) / ov.batch for f in after if after[f] != before[f]}


def setup_overhead(batch: int, torch: Any, session: Any, c_floor: Optional[Callable[[], dict[str, float]]],
                   c_floor_note: str) -> Overhead:
    from acl_bindings import IntArray, Tensor
    from upsample3d_grad import Session
    from upsample3d_grad.op import OP

    ov = Overhead(batch)
    g = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    out3, in5 = (2, 2, 2), (1, 1, 1, 1, 1)
    if torch is not None:
        tg = torch.from_numpy(g)
        op = torch.ops.aten._upsample_nearest_exact3d_backward
        ov.methods["torch eager"] = lambda: _timed(lambda: op(tg, [2, 2, 2], [1, 1, 1, 1, 1]), batch)
    else:
        ov.notes["torch eager"] = "torch not available"
    if session is None:
        ov.notes["simulator"] = "no session: host overhead on the simulator not measured"
        return ov
    gos = [session.upload(g), session.upload(2 * g)]
    gis = [session.empty(in5), session.empty(in5)]
    oneshot = session.prepare(gos[0], out3, in5, out=gis[0], plan=False)
    plan = session.prepare(gos[0], out3, in5, out=gis[0])
    moving = session.prepare(gos[0], out3, in5, out=gis[0])
    if not plan.plan:
        ov.notes["plan"] = f"the library refused repeatable mode: {plan.fallback}"
    ov.methods["one-shot"] = lambda: _timed(oneshot, batch)
    ov.methods["plan"] = lambda: _timed(plan, batch)

    def alternate() -> float:
        half = max(batch // 2, 1)
        t0 = time.perf_counter()
        for _ in range(half):
            moving(gos[1], gis[1])
            moving(gos[0], gis[0])
        return (time.perf_counter() - t0) / (2 * half)

    ov.methods["plan, new addresses"] = alternate

    stream = session.stream

    def objects() -> None:
        go, gi = gos[0], gis[0]
        with Tensor(go.shape, go.dtype, strides=go.strides, offset=go.offset, format=go.tensor.format,
                    storage_dims=go.tensor.storage_dims, address=go.buffer.ptr) as tgo, \
                Tensor(gi.shape, gi.dtype, strides=gi.strides, offset=gi.offset, format=gi.tensor.format,
                       storage_dims=gi.tensor.storage_dims, address=gi.buffer.ptr) as tgi, \
                IntArray(out3) as a_out, IntArray(in5) as a_in:
            size, executor = OP.get_workspace_size(tgo, a_out, a_in, 0.0, 0.0, 0.0, tgi)
            OP.execute(session.workspace.reserve(size), size, executor, stream)  # the faithful pair
            stream.synchronize()

    ov.methods["one-shot, binding objects"] = lambda: _timed(objects, batch)

    def backward_plans() -> None:
        session.backward(gos[0], out3, in5, out=gis[0])
        session.synchronize()

    ov.methods["Session.backward (plans)"] = lambda: _timed(backward_plans, batch)
    ov.methods["Session.backward (numpy in and out)"] = lambda: _timed(lambda: session.backward(g, out3, in5), batch)
    if torch is not None:
        from upsample3d_grad.functional import backward_torch

        ov.methods["Session.backward (CPU tensor in and out)"] = lambda: _timed(
            lambda: session.backward(tg, out3, in5), batch)
        ov.methods["backward_torch (CPU tensors)"] = lambda: _timed(
            lambda: backward_torch(tg, out3, in5, session=session), batch)
    nop = Session(session.device.id, plans=False)
    ngo, ngi = nop.upload(g), nop.empty(in5)

    def backward_oneshot() -> None:
        nop.backward(ngo, out3, in5, out=ngi)
        nop.synchronize()

    def timed_oneshot() -> float:
        t = _timed(backward_oneshot, batch)
        session.device.activate()
        return t

    ov.methods["Session.backward (one-shot)"] = timed_oneshot
    ov.sessions.append(nop)
    if c_floor is not None:
        ov.methods["C floor"] = c_floor  # type: ignore[assignment]
    else:
        ov.notes["C floor"] = c_floor_note
    for call in (oneshot, plan, moving):  # each path gives the right answer before it is timed
        call()
        got = gis[0].download().ravel().tolist()
        if got != [36.0]:
            raise RuntimeError(f"host-overhead set-up: expected [36.0], got {got}")
    return ov


def build_c_floor(workdir: Path, iterations: int) -> tuple[Optional[Callable[[], dict[str, float]]], str]:
    """Compile benchmarks/c_floor.c against the simulator's libraries; a runner, or None and why."""
    from acl_bindings import loaded_backend

    backend = loaded_backend()
    if backend is None or not backend.is_simulator:
        return None, "the C floor runs against the simulator only"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None, "no C compiler (cc) found"
    lib64 = Path(backend.runtime.path).parent
    op_lib = next((Path(p) for p, _ in backend.op_candidates if Path(p).parent == lib64 and Path(p).exists()), None)
    if op_lib is None:
        return None, f"no operator library next to {backend.runtime.path}"
    exe = workdir / "c_floor"
    cmd = [cc, "-O2", "-o", str(exe), str(HERE / "c_floor.c"), f"-L{lib64}", f"-Wl,-rpath,{lib64}",
           f"-l:{Path(backend.runtime.path).name}", f"-l:{Path(backend.nnopbase.path).name}", f"-l:{op_lib.name}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        return None, f"compiling c_floor.c failed: {proc.stderr.strip()[:300]}"
    env = dict(os.environ)
    env.pop("CANN_SIM_FAULT", None)

    def run() -> dict[str, float]:
        res = subprocess.run([str(exe), str(iterations)], capture_output=True, text=True, env=env, timeout=120)
        if res.returncode:
            raise RuntimeError(f"c_floor failed: {res.stderr.strip()}")
        data = json.loads(res.stdout)
        return {"C floor, one-shot": data["oneshot_kept_us"] * 1e-6,
                "C floor, one-shot, handles per call": data["oneshot_us"] * 1e-6,
                "C floor, plan": data["plan_us"] * 1e-6, "C floor, plan, new addresses": data["plan_addr_us"] * 1e-6}

    return run, " ".join(cmd)


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------

def measure(variants: list[Variant], ov: Overhead, repeats: int) -> None:
    for v in variants:  # warm-up: caches, lazy imports, first-call costs
        for fn in v.methods.values():
            fn()
    for fn in list(ov.methods.values()):
        fn()
    from acl_bindings import loaded_backend

    backend = loaded_backend()
    if ov.methods and backend is not None and backend.is_simulator:
        count_calls(ov)
    for v in variants:
        if v.check is not None:
            v.agreement = v.check()
    for r in range(repeats):
        for v in variants:
            names = list(v.methods)
            k = r % len(names) if names else 0
            for name in names[k:] + names[:k]:
                v.times.setdefault(name, []).append(v.methods[name]())
        names = list(ov.methods)
        for rnd in range(ov.rounds):
            k = (r * ov.rounds + rnd) % len(names) if names else 0
            for name in names[k:] + names[:k]:
                result = ov.methods[name]()
                if isinstance(result, dict):  # the C floor reports its sequences at once
                    for key, val in result.items():
                        ov.times.setdefault(key, []).append(val)
                else:
                    ov.times.setdefault(name, []).append(result)


def _ratio(a: Optional[dict[str, float]], b: Optional[dict[str, float]]) -> Optional[dict[str, float]]:
    if not a or not b:
        return None
    return {"min": a["min"] / b["min"], "median": a["median"] / b["median"]}


def evaluate(variants: list[Variant], ov: Overhead, tiny: bool = False) -> list[dict[str, Any]]:
    """The speed targets, each with the measured ratio (from minima; medians beside) and a verdict.

    With *tiny*, the shapes are not the benchmark's, so only the host-overhead targets (measured on
    the tiny tensor (a)) get a verdict.
    """
    st: dict[str, dict[str, dict[str, float]]] = collections.defaultdict(dict)  # --only: absent cases are empty
    st.update({v.key: {m: _stats(t) for m, t in v.times.items()} for v in variants})
    ovs = {m: _stats(t) for m, t in ov.times.items()}
    targets: list[dict[str, Any]] = []

    def add(name: str, ratio: Optional[dict[str, float]], limit: float, kind: str) -> None:
        applies = not tiny or name.startswith("tiny:")
        if ratio is None or not applies:
            targets.append({"target": name, "limit": f"{kind} {limit}", "ratio": ratio, "met": None,
                            "why": "not measured" if ratio is None else "--tiny sizes are not the benchmark's"})
            return
        def meets(value: float) -> bool:
            return value >= limit if kind == ">=" else value <= limit

        targets.append({"target": name, "limit": f"{kind} {limit}", "ratio": ratio, "met": meets(ratio["min"]),
                        "met_median": meets(ratio["median"])})

    for key in ("b", "c", "d", "e", "f"):
        add(f"({key}) float32: torch / reference", _ratio(st[key].get("torch"), st[key].get("reference")), 2.0, ">=")
    for key in ("b-float16", "b-bfloat16"):
        add(f"({key}): torch / reference", _ratio(st[key].get("torch"), st[key].get("reference")), 1.0, ">=")
    for key, lim in (("b", 1.5), ("c", 1.5), ("d", 2.5), ("e", 1.5), ("f", 1.5)):
        add(f"({key}) float32: reference / floor", _ratio(st[key].get("reference"), st[key].get("floor")), lim, "<=")
    for key in ("b", "c", "d", "e", "f"):
        add(f"({key}) float32: sim kernel / reference", _ratio(st[key].get("sim kernel"), st[key].get("reference")),
            2.0, "<=")
    # (issue 24's targets for the one engine: the speed comes from structure, not from tricks)
    add("tiny: one-shot / torch eager", _ratio(ovs.get("one-shot"), ovs.get("torch eager")), 2.0, "<=")
    add("tiny: plan / torch eager", _ratio(ovs.get("plan"), ovs.get("torch eager")), 1.0, "<=")
    add("tiny: Session.backward (plans, device arrays) / torch eager",
        _ratio(ovs.get("Session.backward (plans)"), ovs.get("torch eager")), 2.5, "<=")
    # (issue 36: the numpy path a user takes first)
    add("tiny: Session.backward (numpy in and out) / torch eager",
        _ratio(ovs.get("Session.backward (numpy in and out)"), ovs.get("torch eager")), 4.0, "<=")
    return targets


def _fmt_t(s: Optional[dict[str, float]], unit: str = "ms") -> str:
    if not s:
        return "-"
    scale = 1e3 if unit == "ms" else 1e6
    return f"{s['min'] * scale:.3g} / {s['median'] * scale:.3g}"


def _fmt_r(r: Optional[dict[str, float]]) -> str:
    return "-" if r is None else f"{r['min']:.2f} ({r['median']:.2f})"


def _side_table(variants: list[Variant], method: str, title: str,
                columns: list[tuple[str, str, Optional[str]]]) -> list[str]:
    """Markdown lines of a table over the variants that measured *method*; a column is (header, a, None) for
    a's times or (header, a, b) for the ratio a / b.  No lines when no variant measured it."""
    rows = [v for v in variants if method in v.times]
    if not rows:
        return []
    lines = ["", title, "", "| case | " + " | ".join(c[0] for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for v in rows:
        st = {m: _stats(t) for m, t in v.times.items()}
        cells = [_fmt_t(st.get(a)) if b is None else _fmt_r(_ratio(st.get(a), st.get(b))) for _, a, b in columns]
        lines.append(f"| ({v.key}) {v.label} | " + " | ".join(cells) + " |")
    return lines


def markdown(meta: dict[str, Any], variants: list[Variant], ov: Overhead, targets: list[dict[str, Any]]) -> str:
    lines = [f"Benchmark run {meta['date']} on {meta['machine']}; {meta['repeats']} repeats, interleaved; "
             f"times are min / median over the repeats, ratios from minima (medians in brackets).", ""]
    lines += [f"- backend: {meta['backend']}", f"- torch: {meta['torch']}",
              f"- BLAS threads (OPENBLAS_NUM_THREADS): {meta.get('blas_threads')}",
              f"- floor: {meta['floor_definition']}", f"- sim kernel: {meta['kernel_definition']}", ""]
    lines += ["| case | gradOut -> gradInput | MB moved | floor ms | reference ms | torch ms | sim kernel ms "
              "| torch / ref | ref / floor | kernel / ref |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        st = {m: _stats(t) for m, t in v.times.items()}
        mb = (v.go_bytes + v.gi_bytes) / 1e6
        torch_cell = _fmt_t(st.get("torch")) if "torch" in st else ("n/a" if "torch" in v.notes or meta["torch_missing"]
                                                                    else "-")
        lines.append(f"| ({v.key}) {v.label} | {v.go_shape} -> {v.gi_shape} | {mb:.3g} | {_fmt_t(st.get('floor'))} | "
                     f"{_fmt_t(st.get('reference'))} | {torch_cell} | {_fmt_t(st.get('sim kernel'))} | "
                     f"{_fmt_r(_ratio(st.get('torch'), st.get('reference')))} | "
                     f"{_fmt_r(_ratio(st.get('reference'), st.get('floor')))} | "
                     f"{_fmt_r(_ratio(st.get('sim kernel'), st.get('reference')))} |")
    notes = [f"({v.key}) {m}: {n}" for v in variants for m, n in v.notes.items()]
    agree = "; ".join(f"({v.key}) " + ", ".join(f"{m} {d:.1e}" for m, d in v.agreement.items())
                      for v in variants if v.agreement)
    if agree:
        notes.append("max |result - reference| / max |reference| (torch CPU rounds exact ties differently, "
                     "cann-abi.md §6.3): " + agree)
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    lines += _side_table(variants, "numpy pass", "numpy's one-pass bound: gradOut read once by chunked `np.add` "
                         "(float32), against the floor and the reference:",
                         [("floor ms", "floor", None), ("numpy pass ms", "numpy pass", None),
                          ("numpy pass / floor", "numpy pass", "floor"),
                          ("reference / numpy pass", "reference", "numpy pass")])
    threads = meta.get("reference_threads", 1)
    multi = _threads_method(threads)
    lines += _side_table(variants, multi, f"The reference on {threads} threads (`threads={threads}`; for "
                         "information: the targets above use one thread, as torch and the floor do):",
                         [("reference ms", "reference", None), (f"{multi} ms", multi, None),
                          ("speed-up", "reference", multi), (f"{threads} threads / floor", multi, "floor")])
    lines += ["", f"Host overhead per call, tiny case (a), batches of {ov.batch} calls, {ov.rounds} rounds per "
              "repeat:", "",
              "| path | µs per call (min / median) | / torch eager |", "|---|---|---|"]
    ovs = {m: _stats(t) for m, t in ov.times.items()}
    for name, s in ovs.items():
        lines.append(f"| {name} | {_fmt_t(s, 'us')} | {_fmt_r(_ratio(s, ovs.get('torch eager')))} |")
    if ov.notes:
        lines += [""] + [f"- {k}: {n}" for k, n in ov.notes.items()]
    if ov.calls:
        lines += ["", "C calls per steady-state call (the simulator's counters), beside the C program's "
                  "(`benchmarks/c_floor.c`) for the same sequence, and the Python-level calls (functions and "
                  "builtins, counted with `sys.setprofile`):", "",
                  "| path | C calls | C floor | Python calls | by function |", "|---|---|---|---|---|"]
        if "torch eager" in ov.python_calls:
            lines.append(f"| torch eager | - | - | {ov.python_calls['torch eager']:g} | - |")
        for name, by_fn in ov.calls.items():
            detail = ", ".join(f"{f} {n:g}" for f, n in sorted(by_fn.items()))
            lines.append(f"| {name} | {sum(by_fn.values()):g} | {C_FLOOR_CALLS.get(name, '-')} | "
                         f"{ov.python_calls.get(name, 0):g} | {detail} |")
    lines += ["", "Targets (met: by the minima, and by the medians):", "",
              "| target | limit | measured | met (min) | met (median) |", "|---|---|---|---|---|"]
    for t in targets:
        if t["met"] is None:
            met = f"n/a ({t['why']}) | n/a"
        else:
            met = " | ".join("yes" if ok else "**no**" for ok in (t["met"], t["met_median"]))
        lines.append(f"| {t['target']} | {t['limit']} | {_fmt_r(t['ratio'])} | {met} |")
    return "\n".join(lines) + "\n"


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def _git() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "upsample3d_grad",
                                "acl_bindings", "benchmarks"], capture_output=True, text=True, timeout=10).stdout
        return f"{rev}{' (with local changes)' if dirty.strip() else ''}" if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def torch_npu_peer(tiny: bool) -> str:
    """benchmarks/torch_npu_peer.py's table, run in a child started after ``eval "$(python -m acl_bindings.sim
    env)"`` (torch_npu reads the CANN layout at load); a line saying why where torch_npu is not installed."""
    import importlib.util

    if importlib.util.find_spec("torch_npu") is None:
        return "not measured: torch_npu is not installed (pip install -e '.[torch-npu-sim]')\n"
    py, script = sys.executable, HERE / "torch_npu_peer.py"
    sizes = "--rounds 2 --batch 30" if tiny else ""
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), *filter(None, [env.get("PYTHONPATH", "")])])
    proc = subprocess.run(["bash", "-c", f'eval "$("{py}" -m acl_bindings.sim env)" && exec "{py}" "{script}" {sizes}'],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"benchmarks/torch_npu_peer.py failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(HERE / "results"), help="output folder (default benchmarks/results/)")
    parser.add_argument("--repeat", type=int, default=None, help="repeats (default 5; 2 with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="small sizes and few repeats: checks the script works")
    parser.add_argument("--backend", default="sim", choices=("sim", "cann", "auto"),
                        help="ACL_BINDINGS_BACKEND for the device measurements (default sim)")
    parser.add_argument("--no-torch", action="store_true", help="skip torch even when installed")
    parser.add_argument("--no-device", action="store_true", help="skip the simulator/device measurements")
    parser.add_argument("--only", default=None, metavar="KEYS",
                        help="comma-separated variant keys to run (e.g. b,d,f,b-float16); default all")
    parser.add_argument("--no-overhead", action="store_true", help="skip the host-overhead measurements")
    parser.add_argument("--rounds", type=int, default=None, metavar="N",
                        help="host overhead: measurements of each method per repeat (default 5; 1 with --tiny)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="also time the reference with threads=N (N > 1; for information, off by default)")
    args = parser.parse_args(argv)
    repeats = args.repeat if args.repeat is not None else (2 if args.tiny else 5)
    if repeats < 1:
        parser.error("--repeat must be >= 1")
    rounds = args.rounds if args.rounds is not None else (1 if args.tiny else 5)
    if rounds < 1:
        parser.error("--rounds must be >= 1")
    os.environ["ACL_BINDINGS_BACKEND"] = args.backend
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    t_start = time.perf_counter()

    torch, torch_note = _load_torch(args.no_torch)
    session = None
    backend_note = "not used (--no-device)"
    if not args.no_device:
        try:
            from upsample3d_grad import Session

            session = Session(0)
            backend_note = session.backend.describe().splitlines()[0].removeprefix("backend: ")
        except Exception as exc:  # noqa: BLE001 - reported
            backend_note = f"no session: {type(exc).__name__}: {exc}"
            session = None
    variants = build_variants(TINY_CASES if args.tiny else CASES, args.tiny)
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = sorted(set(keys) - {v.key for v in variants})
        if unknown:
            parser.error(f"--only: unknown variant keys {unknown}; known: {[v.key for v in variants]}")
        variants = [v for v in variants if v.key in keys]
    setup_reference(variants, torch, session, args.threads)
    batch = 200 if args.tiny else 1000
    with tempfile.TemporaryDirectory() as tmp:
        c_floor, c_note = (build_c_floor(Path(tmp), 2000 if args.tiny else 10000)
                           if session is not None and not args.no_overhead else (None, "not measured"))
        ov = (Overhead(batch) if args.no_overhead else setup_overhead(batch, torch, session, c_floor, c_note))
        ov.rounds = rounds
        measure(variants, ov, repeats)
    if session is not None:
        for extra in ov.sessions:
            extra.close()
        session.device.activate()
        session.close()
    targets = evaluate(variants, ov, args.tiny)
    peer = (torch_npu_peer(args.tiny) if args.backend == "sim" and not (args.no_overhead or args.no_device or
                                                                         args.no_torch)
            else "not measured (--no-overhead, --no-device, --no-torch or another backend than the simulator)\n")
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "torch": torch_note,
        "torch_missing": torch is None,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "reference_threads": args.threads,
        "backend": backend_note,
        "git": _git(),
        "repeats": repeats,
        "tiny": args.tiny,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "floor_definition": "time to read gradOut's bytes (ndarray.max over gradOut's own memory as uint8) plus "
                            "write gradInput's bytes (ndarray.fill of a uint8 buffer of that size)",
        "kernel_definition": "Session.timed_backward on device arrays: device time from events around phase 2",
        "c_floor": c_note,
        "seconds": None,
    }
    meta["seconds"] = round(time.perf_counter() - t_start, 1)
    result = {
        "meta": meta,
        "cases": [{"key": v.key, "case": v.case, "label": v.label, "dtype": v.dtype, "layout": v.layout,
                   "grad_out": v.go_shape, "grad_in": v.gi_shape, "bytes_read": v.go_bytes, "bytes_written": v.gi_bytes,
                   "calls_per_measurement": v.inner, "seconds": {m: _stats(t) for m, t in v.times.items()},
                   "raw_seconds": v.times, "notes": v.notes, "relative_difference_from_reference": v.agreement}
                  for v in variants],
        "host_overhead": {"batch": ov.batch, "rounds": ov.rounds,
                          "seconds_per_call": {m: _stats(t) for m, t in ov.times.items()},
                          "raw_seconds": ov.times, "notes": ov.notes, "c_calls_per_call": ov.calls,
                          "c_floor_calls_per_call": C_FLOOR_CALLS},
        "targets": targets,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "bench-tiny" if args.tiny else "bench"
    md = markdown(meta, variants, ov, targets) + "\nThe torch_npu peer (benchmarks/torch_npu_peer.py):\n\n" + peer
    result["torch_npu_peer"] = peer
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.md").write_text(md)
    print(md)
    print(f"written: {out / (stem + '.json')}, {out / (stem + '.md')} ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
