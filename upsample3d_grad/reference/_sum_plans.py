"""The numpy reference's summation engine, one call: plans, chunks, work arrays and threads (docs/operators.md,
"The summation engine")."""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ._sum_passes import _F32, _T_CALL, _T_EL, _AxisOp, _TableInfo
from ._validate import spatial_axes

_CHUNK_ELEMS = 1 << 17  # target gradOut elements per chunk (512 KiB of float32)
_OVERHEAD_SHARE = 0.2  # at most this share of the estimated time for per-chunk Python overhead
_FORCE_CHUNKS: int | None = None  # tests: force the chunk count
_D_MAJOR_CALLS = 4  # D passes of more numpy calls than this (irregular windows) are chunked D-major


def _as_index(values: np.ndarray) -> slice | np.ndarray:
    """A slice when ``values`` is an arithmetic progression with step >= 1, else the array."""
    n = len(values)
    if n == 0:
        return slice(0, 0)
    first = int(values[0])
    if n == 1:
        return slice(first, first + 1)
    step = int(values[1]) - first
    if step >= 1 and int(values[-1]) == first + step * (n - 1) and np.all(np.diff(values) == step):
        return slice(first, first + step * (n - 1) + 1, step)
    return values


def _classify(lo: np.ndarray, out_size: int) -> str:
    lens = np.diff(lo)
    if len(lens) == out_size and lo[0] == 0 and bool(np.all(lens == 1)):
        return "identity"
    if int(lens.max()) <= 1:
        return "scatter"
    return "reduce"


def _scatter_index(lo: np.ndarray) -> tuple[slice | np.ndarray, slice | np.ndarray]:
    """(gradInput indices, gradOut indices) of the one-element windows of a scatter dim."""
    wins = np.flatnonzero(np.diff(lo) == 1)
    return _as_index(wins), _as_index(lo[wins])


class Dim:
    """One dim's window table, its kind (identity, scatter or reduce) and its summation data (built on first use)."""

    def __init__(self, lo: np.ndarray, out_size: int) -> None:
        lo.setflags(write=False)
        self.lo, self.out_size, self.kind = lo, out_size, _classify(lo, out_size)

    @functools.cached_property
    def info(self) -> _TableInfo:
        return _TableInfo(self.lo)

    @functools.cached_property
    def scatter(self) -> tuple[Any, Any]:
        return _scatter_index(self.lo)


def _expand(x: np.ndarray, scat: list[tuple[int, Any, Any]], out: np.ndarray) -> None:
    """Scatter pass: copy the one-element windows of the listed axes into ``out`` (already zeroed)."""
    dst: list[Any] = [slice(None)] * 5
    src: list[Any] = [slice(None)] * 5
    for axis, d, s in scat:
        dst[axis] = d
        src[axis] = s
    if sum(isinstance(v, np.ndarray) for v in dst) <= 1 and sum(isinstance(v, np.ndarray) for v in src) <= 1:
        out[tuple(dst)] = x[tuple(src)]
        return
    dst_a = [np.arange(out.shape[k])[v] if not isinstance(v, np.ndarray) else v for k, v in enumerate(dst)]
    src_a = [np.arange(x.shape[k])[v] if not isinstance(v, np.ndarray) else v for k, v in enumerate(src)]
    out[np.ix_(*dst_a)] = x[np.ix_(*src_a)]


_Chunk = tuple[tuple[Any, ...], tuple[Any, ...], list[_AxisOp], list[tuple[int, Any, Any]]]


class SumPlan:
    """How to compute one call: pass order and methods, then the chunks."""

    def __init__(self, shape: tuple[int, ...], layout: str, dims: tuple[Dim, Dim, Dim]) -> None:
        self.axes = spatial_axes(layout)
        self.dims = dims
        kinds = [d.kind for d in dims]
        self.copy_only = all(k == "identity" for k in kinds)
        red = [k for k in range(3) if kinds[k] == "reduce"]
        self.scatter = [k for k in range(3) if kinds[k] == "scatter"]
        est, self.methods, self.pass_calls, self.order = min(
            ((*self._cost(shape, order), order) for order in itertools.permutations(red)), key=lambda t: t[0])
        self.splits = [math.prod(shape[self.axes[k] + 1 :]) == 1 for k in self.order]
        self.chunks = self._chunks(shape, layout, est, sum(self.pass_calls) + (2 if self.scatter else 0))

    def _cost(self, shape: tuple[int, ...], order: tuple[int, ...]) -> tuple[float, list[tuple[str, str]], list[int]]:
        """Estimated seconds, then (method, additive fallback) and numpy calls of each pass, of one pass order."""
        cur = list(shape)
        total, calls, methods = 0.0, [], []
        for k in order:
            ax = self.axes[k]
            info = self.dims[k].info
            outer, inner = math.prod(cur[:ax]), math.prod(cur[ax + 1 :])
            m, t, c = info.cost(outer, inner)
            total += t
            calls.append(c)
            methods.append((m, info.cost(outer, inner, matmul=False)[0] if m == "matmul" else m))
            cur[ax] = len(self.dims[k].lo) - 1
        return total, methods, calls

    def _ops(self, d_info: _TableInfo | None = None) -> list[_AxisOp]:
        return [_AxisOp(self.axes[k], d_info if k == 0 and d_info is not None else self.dims[k].info, m, split,
                        fallback) for k, (m, fallback), split in zip(self.order, self.methods, self.splits)]

    def _scat(self, d_lo: np.ndarray | None = None) -> list[tuple[int, Any, Any]]:
        res = []
        for k in self.scatter:
            d, s = _scatter_index(d_lo) if (k == 0 and d_lo is not None) else self.dims[k].scatter
            res.append((self.axes[k], d, s))
        return res

    def _chunks(self, shape: tuple[int, ...], layout: str, est: float, calls: int) -> list[_Chunk]:
        size = math.prod(shape)
        everything = (slice(None),) * 5
        if self.copy_only or size == 0:
            return []
        if not self.order:  # pure scatter
            scat = self._scat()
            if _FORCE_CHUNKS is None and all(isinstance(v, slice) for _, d, s in scat for v in (d, s)):
                # slices: one strided assignment, no temporary; chunks only add calls (~10% on benchmark (f))
                return [(everything, everything, [], scat)]
            # index arrays gather a temporary, which chunks bound: chunk by gradInput size (the bigger one)
            size = math.prod(shape) // math.prod(d.out_size for d in self.dims)
            size *= math.prod(len(d.lo) - 1 for d in self.dims)
            est = 2 * size * _T_EL
        want = max(1, size // _CHUNK_ELEMS)
        batch = (0, 1) if layout == "NCDHW" else (0,)
        n_units = math.prod(shape[a] for a in batch)
        lo_d = self.dims[0].lo
        i_d = len(lo_d) - 1
        share = _OVERHEAD_SHARE * max(est, size * _T_EL) / _T_CALL  # numpy calls the overhead share pays for
        d_calls = self.pass_calls[self.order.index(0)] if 0 in self.order else 0
        # D-major: blocks of D windows over groups of (N, C) units.  A block's D pass sums only its own
        # windows, so irregular D windows (one call each) do not multiply with the chunk count.
        d_major = d_calls > _D_MAJOR_CALLS and i_d >= 2
        once = d_calls if d_major else 0  # numpy calls paid once, not per chunk
        budget = max(1, int((share - once) / (calls - once + 3)))
        n_chunks = min(want, budget) if _FORCE_CHUNKS is None else _FORCE_CHUNKS
        if n_chunks <= 1:
            return [(everything, everything, self._ops(), self._scat())]
        if d_major:
            groups = min(n_units, max(1, -(-size // (i_d * _CHUNK_ELEMS))), n_chunks)
            d_blocks = min(i_d, max(1, n_chunks // groups))
            units = -(-n_units // groups)
        else:
            units = max(1, n_units // n_chunks)
            d_blocks = min(i_d, -(-n_chunks // n_units)) if n_chunks > n_units else 1
        bsl: list[tuple[slice, ...]]
        if layout == "NDHWC":
            bsl = [(slice(a, min(a + units, shape[0])),) for a in range(0, shape[0], units)]
        elif units < shape[1]:
            bsl = [(slice(a, a + 1), slice(b, min(b + units, shape[1])))
                   for a in range(shape[0]) for b in range(0, shape[1], units)]
        else:
            step = units // shape[1]
            bsl = [(slice(a, min(a + step, shape[0])), slice(None)) for a in range(0, shape[0], step)]
        d_ax = self.axes[0]
        blocks: list[tuple[slice, slice, list[_AxisOp], list[tuple[int, Any, Any]]]] = []
        if d_blocks == 1:
            blocks.append((slice(None), slice(None), self._ops(), self._scat()))
        else:
            edges = [round(b * i_d / d_blocks) for b in range(d_blocks + 1)]
            for i0, i1 in zip(edges[:-1], edges[1:]):
                if i1 <= i0:
                    continue
                o0, o1 = int(lo_d[i0]), int(lo_d[i1])
                local = lo_d[i0 : i1 + 1] - o0
                d_info = _TableInfo(local) if self.dims[0].kind == "reduce" else None
                blocks.append((slice(o0, o1), slice(i0, i1), self._ops(d_info), self._scat(local)))
        chunks: list[_Chunk] = []
        for bs in bsl:
            for gd, rd, ops, scat in blocks:
                gi: list[Any] = list(bs) + [slice(None)] * (5 - len(bs))
                ri = list(gi)
                gi[d_ax] = gd
                ri[d_ax] = rd
                chunks.append((tuple(gi), tuple(ri), ops, scat))
        return chunks


_F16 = np.dtype(np.float16)
_F16_REBIAS = np.float32(2.0**112)  # 2 ** (127 - 15): float16 exponent bias to float32's


def _f16_to_f32(x: np.ndarray, out: np.ndarray) -> None:
    """Exact float16 -> float32, nan payloads included, by bit operations (docs/operators.md)."""
    u = x.view(np.uint16)
    bits = out.view(np.uint32)
    np.copyto(out.view(np.int32), u.view(np.int16))  # sign-extend: bit 15 fills bits 16..31
    np.left_shift(bits, 13, out=bits)
    np.bitwise_and(bits, np.uint32(0x8FFFE000), out=bits)  # sign (bit 31), exponent, mantissa
    np.multiply(out, _F16_REBIAS, out=out)
    if out.size and (out.max() >= 65536.0 or out.min() <= -65536.0):  # exponent 31 present
        special = np.abs(out) >= 65536.0
        us = u[special].astype(np.uint32)
        fields = np.bitwise_or(np.left_shift(np.bitwise_and(us, 0x03FF), 13), np.uint32(0x7F800000))
        bits[special] = np.bitwise_or(fields, np.left_shift(np.right_shift(us, 15), 31))


class _Scratch:
    """float32 work arrays of one thread's run of chunks, one per slot, reused from chunk to chunk."""

    __slots__ = ("_bufs",)

    def __init__(self) -> None:
        self._bufs: dict[int, np.ndarray] = {}

    def get(self, slot: int, shape: Sequence[int]) -> np.ndarray:
        """A C-contiguous float32 array of *shape* (contents undefined), reusing slot's memory."""
        n = math.prod(shape)
        buf = self._bufs.get(slot)
        if buf is None or buf.size < n:
            buf = np.empty(n, dtype=np.float32)
            self._bufs[slot] = buf
        return buf[:n].reshape(shape)


def _backward_chunk(x: np.ndarray, ops: list[_AxisOp], scat: list[tuple[int, Any, Any]], res: np.ndarray,
                    scratch: _Scratch) -> None:
    """One chunk: reduce passes, then the scatter pass (or the final cast), in *scratch*'s work arrays."""
    if ops and x.dtype != _F32:  # a float32 copy of a float16 / bfloat16 chunk: every pass runs float32 loops
        wide = scratch.get(0, x.shape)
        if x.dtype == _F16:
            _f16_to_f32(x, wide)
        else:
            np.copyto(wide, x, casting="unsafe")  # ml_dtypes' bfloat16 cast is a fast bit shift
        x = wide
    direct = not scat and res.dtype == _F32
    last = len(ops) - 1
    for j, op in enumerate(ops):
        if j == last and direct:
            dst = res
        else:
            shape = list(x.shape)
            shape[op.axis] = len(op.info.lo) - 1
            dst = scratch.get(j + 1, shape)  # slot j + 1: never the slot x lives in
        op(x, dst)
        x = dst
    if scat:
        _expand(x, scat, res)
    elif x is not res:
        np.copyto(res, x, casting="unsafe")


_POOL: ThreadPoolExecutor | None = None
_POOL_WORKERS = 0
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared worker pool, grown to at least *workers* threads."""
    global _POOL, _POOL_WORKERS
    with _POOL_LOCK:
        if _POOL is None or _POOL_WORKERS < workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False)  # running tasks finish; new ones go to the new pool
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="us3d-reference")
            _POOL_WORKERS = workers
        return _POOL


def _forget_pool() -> None:
    """After fork: the parent's worker threads do not exist in the child."""
    global _POOL, _POOL_WORKERS, _POOL_LOCK
    _POOL, _POOL_WORKERS, _POOL_LOCK = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _run_chunks(g: np.ndarray, chunks: list[_Chunk], res: np.ndarray) -> None:
    scratch = _Scratch()
    for gi, ri, ops, scat in chunks:
        _backward_chunk(g[gi], ops, scat, res[ri], scratch)


def run_backward(g: np.ndarray, plan: SumPlan, res: np.ndarray, threads: int = 1) -> np.ndarray:
    """Sum every chunk of *plan* from *g* into *res* (already zeroed when the plan scatters); return *res*."""
    if g.size == 0 or res.size == 0:
        return res
    if plan.copy_only:  # identity in every dim: one element per window, nothing to add
        np.copyto(res, g, casting="unsafe")
        return res
    chunks = plan.chunks
    # a pure scatter sums nothing: page faults and stores, which threads only contend on
    n = min(threads, len(chunks)) if plan.order else 1
    if n <= 1:
        _run_chunks(g, chunks, res)
        return res
    # contiguous runs of chunks, one per thread (the caller's takes the first); chunks write disjoint parts of
    # res, each summed the same way whatever the thread count
    edges = [round(k * len(chunks) / n) for k in range(n + 1)]
    pool = _pool(n - 1)
    futures: list[Future[None]] = [pool.submit(_run_chunks, g, chunks[a:b], res)
                                   for a, b in zip(edges[1:-1], edges[2:])]
    try:
        _run_chunks(g, chunks[edges[0] : edges[1]], res)
    finally:
        for f in futures:
            f.exception()  # wait for every worker before returning or raising
    for f in futures:
        f.result()
    return res
