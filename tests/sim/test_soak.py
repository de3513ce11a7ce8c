"""Soak: thousands of calls with varying shapes; handles and memory stay flat.

Bounded in count and time (whichever comes first).  Calls mix numpy in/out with plans,
one-shot calls, device arrays, strided inputs and ``timed_backward``, in both layouts
and dtypes, with eager and deferred streams in alternate windows, on one session whose
plan cache is small enough to evict all the time.  After the warm-up window the
simulator's live-handle counts must be exactly the same at the end of every window,
and the process's resident memory may grow only by a small slack.
"""

from __future__ import annotations

import os
import time

import numpy as np

from acl_bindings import sim
from upsample3d_grad import Session, reference

MAX_CALLS = 6000
MAX_SECONDS = 15.0
WINDOW = 500
RSS_SLACK = 3 * 2 ** 19  # bytes the second half of the run may add (allocator noise is ~0.2 MiB)


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


HOT = [(2, 3, (2, 3, 4), (4, 5, 6)), (1, 1, (1, 1, 1), (2, 2, 2)), (2, 2, (3, 3, 3), (3, 6, 2))]


def _one_call(s: Session, rng: np.random.Generator, k: int) -> None:
    if k % 4 < 2:  # a few hot call shapes (plan hits) among many cold ones (misses and evictions)
        n, c, i, o = HOT[int(rng.integers(0, len(HOT)))]
    else:
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        i = tuple(int(v) for v in rng.integers(1, 5, 3))
        o = tuple(int(v) for v in rng.integers(1, 7, 3))
    layout = "NDHWC" if k % 3 == 0 else "NCDHW"
    dtype = np.float16 if k % 2 else np.float32
    shape = (n, *o, c) if layout == "NDHWC" else (n, c, *o)
    mode = k % 6
    if mode == 5:  # a strided view: the upload keeps its strides and offset
        full = rng.standard_normal(tuple(2 * v for v in shape)).astype(dtype)
        g = full[tuple(slice(1, None, 2) for _ in shape)]
    else:
        g = rng.standard_normal(shape).astype(dtype)
    size = (n, c, *i)
    if mode == 3:  # device arrays in and out
        with s.upload(g, layout) as go:
            res = s.backward(go, o, size, layout=layout)
            got = res.download()
            res.close()
    elif mode == 4:  # events around the launch
        with s.upload(g, layout) as go, s.empty(size if layout == "NCDHW" else (n, *i, c), dtype, layout) as out:
            assert len(s.timed_backward(go, o, size, out=out)) == 1
            got = out.download()
    else:
        s.use_plans = mode != 2
        got = s.backward(g, o, size, layout=layout)
    if k % 40 == 0:  # spot checks against the reference
        want = reference.upsample_nearest_exact3d_backward(g, o, size, layout=layout)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_soak_handles_and_memory_stay_flat(no_leaks: None) -> None:
    rng = np.random.default_rng(2024)
    previous = sim.set_defer(False)
    windows: list[tuple[int, dict[str, int], int]] = []
    start = time.perf_counter()
    calls = 0
    try:
        with Session(0) as s:
            s.plans.capacity = 8  # distinct call shapes far outnumber it: plans are evicted all the time
            while calls < MAX_CALLS and time.perf_counter() - start < MAX_SECONDS:
                sim.set_defer(bool(len(windows) % 2))  # eager and deferred streams, window by window
                for _ in range(WINDOW):
                    _one_call(s, rng, calls)
                    calls += 1
                s.synchronize()
                s.empty_cache()  # the session's cached blocks are bounded by its cap, not a leak: count the rest
                windows.append((calls, sim.live_handles(), _rss()))
            assert len(s.plans) == s.plans.capacity and s.plans.hits > 0
    finally:
        sim.set_defer(previous)
    assert calls >= 2 * WINDOW * 2, f"only {calls} calls in {MAX_SECONDS} s: too slow to say anything"
    # the kept calls are a mix of plans (an executor each) and one-shot calls (none): every other count is flat
    warm = {k: v for k, v in windows[0][1].items() if k != "executor"}
    for n, live, _ in windows[1:]:
        assert {k: v for k, v in live.items() if k != "executor"} == warm, (n, warm, live)
        assert live["executor"] <= 8, (n, live)
    middle = windows[len(windows) // 2][2]
    grew = windows[-1][2] - middle
    assert grew <= RSS_SLACK, (f"resident memory grew by {grew / 2 ** 20:.1f} MiB over calls "
                               f"{windows[len(windows) // 2][0]}..{calls}")
