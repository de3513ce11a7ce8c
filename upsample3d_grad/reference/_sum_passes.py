"""The numpy reference's summation engine, one pass: window tables, the cost model and the summation methods
(docs/operators.md, "The summation engine")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_F32 = np.dtype(np.float32)


# Cost model constants (seconds), rough figures for one x86 core.
_T_CALL = 3.0e-6  # one numpy call issued from Python
_T_EL = 0.2e-9  # per element read+written by an elementwise loop
_T_LOOP = 10e-9  # per inner-loop invocation inside one numpy call
_T_TAKE = 4e-9  # per slab copied by np.take
_T_TAKE_EL = 2.5e-9  # per element gathered by a flat np.take (scattered reads)
_T_STRIDED = 1.5e-9  # per element of a column op on the innermost dim (one cache line each)
_BIG_RUN = 8  # window length from which a run is summed with one reduce call
_SHORT_RUN = 8  # innermost dim: runs of fewer windows are summed window by window
_MATMUL_MAX_WEIGHTS = 1 << 16  # largest 0/1 window matrix (elements, 256 KiB) method "matmul" builds and caches
_FLOPS = 80e9  # float32 flops per second of a one-thread BLAS matmul (a multiply-add counts 2)
_FORCE_METHOD: str | None = None  # tests: force "runs", "slide" or "matmul" (innermost dim) for every reduce pass


def _as_rows(a: np.ndarray) -> np.ndarray | None:
    """``a`` as a 2-D view ``(-1, last dim)`` without a copy, or None when its leading dims' strides do not nest."""
    lead = [(n, st) for n, st in zip(a.shape[:-1], a.strides[:-1]) if n != 1]
    if any(st != st_in * n_in for (_, st), (n_in, st_in) in zip(lead, lead[1:])):
        return None
    row = lead[-1][1] if lead else a.strides[-1] * a.shape[-1]
    return np.lib.stride_tricks.as_strided(a, (math.prod(a.shape[:-1]), a.shape[-1]), (row, a.strides[-1]),
                                           writeable=a.flags.writeable)


def _idx(axis: int, s: Any, ndim: int = 5) -> tuple[Any, ...]:
    t: list[Any] = [slice(None)] * ndim
    t[axis] = s
    return tuple(t)


class _TableInfo:
    """A reduce dim's window table and what the methods need (``runs``: ``(i0, i1, ell, a)``, equal windows)."""

    __slots__ = ("lo", "out_size", "runs", "run_calls", "_adds", "_ns", "_split_calls", "_slide", "_weights")

    def __init__(self, lo: np.ndarray) -> None:
        self.lo = lo
        self.out_size = int(lo[-1])  # gradOut positions the windows can touch
        lens = np.diff(lo)
        starts = np.flatnonzero(np.diff(lens, prepend=-1))
        ends = np.append(starts[1:], len(lens))
        run_n = ends - starts
        ell = lens[starts]
        self.runs = list(zip(starts.tolist(), ends.tolist(), ell.tolist(), lo[starts].tolist()))
        calls = np.where((ell <= 2) | (ell >= _BIG_RUN), 1, ell - 1)
        self.run_calls = int(calls.sum())
        # cost-model sums; adds: element operations per output of a run
        adds = np.where(ell <= 1, 1, np.where(ell >= _BIG_RUN, ell, ell - 1))
        self._adds = float(np.dot(run_n, adds))
        # innermost dim: short runs are summed window by window (numpy loops along the long outer dim)
        split = (run_n < _SHORT_RUN) & (ell >= 2) & (ell < _BIG_RUN)
        ns = ~split
        loops = np.where(ell >= _BIG_RUN, run_n, adds)
        self._ns = (float(np.dot(run_n[ns], adds[ns])), float(loops[ns].sum()), int(calls[ns].sum()))
        self._split_calls = int(np.dot(run_n[split], ell[split] - 1))
        self._slide: tuple[list[int], list[tuple[int, int]], dict[int, int]] | None = None
        self._weights: np.ndarray | None = None

    def slide_info(self) -> tuple[list[int], list[tuple[int, int]], dict[int, int]]:
        """Distinct window lengths, the sliding-sum build steps ``(w, l)``: ``S_w[p] = S_l[p] + S_(w-l)[p + l]``, and
        the buffer slot of each length > 0."""
        if self._slide is None:
            lengths = sorted({ell for _, _, ell, _ in self.runs})
            steps: list[tuple[int, int]] = []
            have = {1}

            def build(w: int) -> None:
                if w in have:
                    return
                left = w // 2 if w % 2 == 0 else w - 1
                build(left)
                build(w - left)
                steps.append((w, left))
                have.add(w)

            for v in lengths:
                build(max(v, 1))
            self._slide = (lengths, steps, {v: k for k, v in enumerate(v for v in lengths if v > 0)})
        return self._slide

    def weights(self) -> np.ndarray:
        """0/1 matrix (gradOut positions ``lo[0]..lo[-1]``, windows) for method "matmul", cached."""
        if self._weights is None:
            lo = self.lo
            span = np.arange(int(lo[0]), int(lo[-1]))
            w = ((span[:, None] >= lo[None, :-1]) & (span[:, None] < lo[None, 1:])).astype(np.float32)
            w.setflags(write=False)
            self._weights = w
        return self._weights

    def cost(self, outer: int, inner: int, matmul: bool = True) -> tuple[str, float, int]:
        """Cheapest ``(method, seconds, numpy calls)`` for an input viewed as ``(outer, O, inner)`` ("matmul" only
        for the innermost dim, and when *matmul* is true)."""
        if inner > 1:
            calls = self.run_calls
            t_runs = outer * self._adds * (inner * _T_EL + _T_LOOP) + calls * _T_CALL
        else:
            n_adds, n_loops, ns_calls = self._ns
            calls = ns_calls + self._split_calls
            t_runs = outer * (n_adds * _T_EL + n_loops * _T_LOOP) + calls * _T_CALL
            t_runs += self._split_calls * outer * _T_STRIDED
        best = ("runs", t_runs, calls)
        forced = _FORCE_METHOD if _FORCE_METHOD != "matmul" or (matmul and inner == 1) else None
        if forced is None and calls <= 4:
            return best
        if forced in (None, "slide"):
            lengths, steps, _ = self.slide_info()
            n_in = outer * self.out_size * inner
            passes = len(steps) + (1 if 1 in lengths else 0)
            slide_calls = passes + (1 if 0 in lengths else 0) + 1
            t_slide = slide_calls * _T_CALL + passes * n_in * _T_EL  # flat sums: one loop each
            t_slide += outer * (len(self.lo) - 1) * (inner * _T_EL + (_T_TAKE if inner > 1 else _T_TAKE_EL))
            if forced == "slide" or t_slide < best[1]:
                best = ("slide", t_slide, slide_calls)
        n_win = len(self.lo) - 1
        span = int(self.lo[-1] - self.lo[0])
        if matmul and inner == 1 and forced in (None, "matmul") and span * n_win <= _MATMUL_MAX_WEIGHTS:
            t_mm = 3 * _T_CALL + outer * (2.0 * span * n_win / _FLOPS + n_win * _T_EL)
            if forced == "matmul" or t_mm < best[1]:
                best = ("matmul", t_mm, 3)
        return best


class _AxisOp:
    """One reduce pass along ``axis`` with a fixed summation method (and an additive fallback)."""

    __slots__ = ("axis", "info", "method", "split", "rows", "fallback")

    def __init__(self, axis: int, info: _TableInfo, method: str, split: bool, fallback: str = "runs") -> None:
        self.axis, self.info, self.method = axis, info, method
        self.split = split  # innermost dim: sum short runs window by window
        self.fallback = fallback  # additive method behind "matmul"
        self.rows: dict[tuple[int, int], np.ndarray] = {}  # the slide method's gather rows per chunk shape

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        method = self.method
        if method == "matmul":
            if x.dtype == _F32 and self._matmul(x, out):
                return
            method = self.fallback
        if method == "runs":
            self._runs(x, out)
        else:
            self._slide(x, out)

    def _matmul(self, x: np.ndarray, out: np.ndarray) -> bool:
        """out = x @ weights along the innermost axis; False (out undefined) if the result is not all finite."""
        lo = self.info.lo
        drop: tuple[Any, ...] = (Ellipsis,) + (0,) * (x.ndim - 1 - self.axis)  # dims after the axis have size 1
        src = x[_idx(self.axis, slice(int(lo[0]), int(lo[-1])), x.ndim)][drop]
        out = out[drop]
        w = self.info.weights()
        src2, out2 = _as_rows(src), _as_rows(out)
        with np.errstate(invalid="ignore", over="ignore"):  # 0 * inf: the check below catches it
            if src2 is not None and out2 is not None:
                np.matmul(src2, w, out=out2)
            else:
                np.matmul(src, w, out=out)
        return bool(np.isfinite(out).all())

    def _runs(self, x: np.ndarray, out: np.ndarray) -> None:
        """out[.., i, ..] = sum of x over window i, one strided sum per run of equal windows."""
        axis = self.axis
        split = self.split
        for i0, i1, ell, a in self.info.runs:
            n = i1 - i0
            if split and n < _SHORT_RUN and 2 <= ell < _BIG_RUN:
                for j in range(n):
                    s = a + j * ell
                    dst = out[_idx(axis, i0 + j)]
                    np.add(x[_idx(axis, s)], x[_idx(axis, s + 1)], out=dst, dtype=np.float32)
                    for t in range(s + 2, s + ell):
                        np.add(dst, x[_idx(axis, t)], out=dst, dtype=np.float32)
                continue
            dst = out[_idx(axis, slice(i0, i1))]
            if ell == 0:
                dst.fill(0)
            elif ell == 1:
                np.copyto(dst, x[_idx(axis, slice(a, a + n))], casting="unsafe")
            elif ell < _BIG_RUN:
                stop = a + n * ell
                np.add(x[_idx(axis, slice(a, stop, ell))], x[_idx(axis, slice(a + 1, stop, ell))], out=dst,
                       dtype=np.float32)
                for t in range(2, ell):
                    np.add(dst, x[_idx(axis, slice(a + t, stop, ell))], out=dst, dtype=np.float32)
            else:
                seg = x[_idx(axis, slice(a, a + n * ell))]
                shape = seg.shape[:axis] + (n, ell) + seg.shape[axis + 1 :]
                st = seg.strides
                strides = st[:axis] + (st[axis] * ell, st[axis]) + st[axis + 1 :]
                view = np.lib.stride_tricks.as_strided(seg, shape=shape, strides=strides, writeable=False)
                np.add.reduce(view, axis=axis + 1, dtype=np.float32, out=dst)

    def _slide(self, x: np.ndarray, out: np.ndarray) -> None:
        """Sliding sums over the flat input, a buffer slot per window length, then one gather of whole rows."""
        if x.size == 0:  # (a D-major chunk can hold no gradOut: then every window is empty)
            out.fill(0)
            return
        x = np.ascontiguousarray(x)
        axis = self.axis
        size = x.shape[axis]
        inner = math.prod(x.shape[axis + 1 :])
        outer = math.prod(x.shape[:axis])
        n = outer * size * inner
        _, steps, slot = self.info.slide_info()
        buf = np.empty(len(slot) * n + inner, dtype=np.float32)
        buf[len(slot) * n :] = 0  # the zero row of empty windows
        flat = x.reshape(-1)
        if 1 in slot:
            np.copyto(buf[slot[1] * n : slot[1] * n + n], flat, casting="unsafe")
        sums: dict[int, np.ndarray] = {1: flat}
        for w, left in steps:
            m = n - (w - 1) * inner
            dst = buf[slot[w] * n : slot[w] * n + m] if w in slot else np.empty(m, dtype=np.float32)
            sums[w] = np.add(sums[left][:m], sums[w - left][left * inner : left * inner + m], out=dst,
                             dtype=np.float32)
        rows = self._rows(outer, size)
        table = buf.reshape(-1, inner)
        if out.flags.c_contiguous:
            np.take(table, rows, axis=0, out=out.reshape(-1, inner))
        else:
            np.copyto(out, np.take(table, rows, axis=0).reshape(out.shape))

    def _rows(self, outer: int, size: int) -> np.ndarray:
        """Row of the flat slide buffer holding every (outer, window) sum, cached per chunk shape."""
        key = (outer, size)
        rows = self.rows.get(key)
        if rows is None:
            info = self.info
            slot = info.slide_info()[2]
            lens = np.diff(info.lo)
            zero_row = len(slot) * outer * size
            sl = np.array([slot.get(int(v), 0) for v in lens], dtype=np.int64)
            base = np.where(lens == 0, zero_row, sl * (outer * size) + info.lo[:-1])
            step = np.where(lens == 0, 0, size)
            rows = (base[None, :] + np.arange(outer, dtype=np.int64)[:, None] * step[None, :]).ravel()
            rows.setflags(write=False)
            if len(self.rows) > 8:
                self.rows.clear()
            self.rows[key] = rows
        return rows
