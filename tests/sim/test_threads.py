"""Threads: one session shared by many threads, several sessions at once, sessions that change threads.

Results are checked against the numpy reference, error messages against the thread that
caused them (each failing thread provokes a failure whose text only it can produce), and
the simulator's live-handle counts at the end.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import pytest

import upsample3d_grad as ug
from acl_bindings import AclnnParamError, IntArray, sim
from upsample3d_grad import Session, reference
from upsample3d_grad.op import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize

IN_SIZE = (2, 3, 2, 3, 4)
OUT_SIZE = (4, 5, 6)
SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


def _data(seed: int, shape: tuple[int, ...] = (2, 3, *OUT_SIZE)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(g: np.ndarray, out_size: tuple[int, ...] = OUT_SIZE, in_size: tuple[int, ...] = IN_SIZE) -> np.ndarray:
    return reference.upsample_nearest_exact3d_backward(g, out_size, in_size)


def _run_threads(workers: list[Callable[[], None]], timeout: float = 120) -> list[BaseException]:
    """Start all *workers* together; return the exceptions they raised."""
    barrier = threading.Barrier(len(workers))
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wrap(fn: Callable[[], None]) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # reported to the main thread
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    return errors


@pytest.fixture(params=[False, True], ids=["eager", "deferred"])
def streams(request: pytest.FixtureRequest) -> Any:
    previous = sim.set_defer(request.param)
    yield request.param
    sim.set_defer(previous)


def test_many_threads_through_one_session(streams: bool, no_leaks: None) -> None:
    with Session(0) as s:
        def numpy_calls(k: int) -> Callable[[], None]:
            def run() -> None:
                for j in range(12):
                    # two call shapes per thread: plans are shared, built and evicted concurrently
                    shape = (2, 3, *OUT_SIZE) if j % 2 else (1, 2, 3, 3, 3)
                    sizes = (OUT_SIZE, IN_SIZE) if j % 2 else ((3, 3, 3), (1, 2, 1, 2, 3))
                    g = _data(100 * k + j, shape)
                    np.testing.assert_allclose(s.backward(g, *sizes), _want(g, *sizes), rtol=1e-5, atol=1e-5)
            return run

        def device_calls(k: int) -> Callable[[], None]:
            def run() -> None:
                for j in range(12):
                    g = _data(1000 + 100 * k + j)
                    with s.upload(g) as go, s.empty(IN_SIZE) as out:
                        s.backward(go, OUT_SIZE, IN_SIZE, out=out)
                        np.testing.assert_allclose(out.download(), _want(g), rtol=1e-5, atol=1e-5)
            return run

        def timed_calls() -> None:
            g = _data(7)
            with s.upload(g) as go, s.empty(IN_SIZE) as out:
                for _ in range(6):
                    assert len(s.timed_backward(go, OUT_SIZE, IN_SIZE, out=out, repeat=2)) == 2
                    np.testing.assert_allclose(out.download(), _want(g), rtol=1e-5, atol=1e-5)

        s.plans.capacity = 3  # force evictions while other threads run
        previous = sim.set_delay(1)  # each kernel takes a millisecond: threads overlap inside the calls
        try:
            errors = _run_threads([numpy_calls(k) for k in range(4)] + [device_calls(k) for k in range(3)]
                                  + [timed_calls, timed_calls])
        finally:
            sim.set_delay(previous)
        assert not errors, errors
        assert s.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED


def test_several_sessions_at_once(streams: bool, no_leaks: None) -> None:
    def own_session(k: int) -> Callable[[], None]:
        def run() -> None:
            with Session(k % 2) as s:
                for j in range(8):
                    g = _data(10 * k + j)
                    np.testing.assert_allclose(s.backward(g, OUT_SIZE, IN_SIZE), _want(g), rtol=1e-5, atol=1e-5)
                    with s.upload(g) as go:
                        out = s.backward(go, OUT_SIZE, IN_SIZE)
                        np.testing.assert_allclose(out.download(), _want(g), rtol=1e-5, atol=1e-5)
                        out.close()
        return run

    errors = _run_threads([own_session(k) for k in range(6)])
    assert not errors, errors


def test_errors_are_attributed_to_the_thread_that_caused_them(no_leaks: None, session: Session) -> None:
    """Failing threads each provoke a simulator error naming their own size, while others compute."""
    details: dict[int, list[str]] = {}
    go = session.upload(np.ones((1, 1, 2, 2, 2), np.float32))
    gi = session.empty((1, 1, 1, 1, 1))

    def failing(k: int) -> Callable[[], None]:
        def run() -> None:
            seen = details.setdefault(k, [])
            for _ in range(25):
                # CANN's own check (no host checks on this path): its message quotes outputSize's last value
                # (the faithful call is C's: this thread needs the device's context first, cann-abi.md §1.1)
                with IntArray([2, 2, 1000 + k]) as out_size, IntArray([1, 1, 1, 1, 1]) as in_size, \
                        session.device.active():
                    with pytest.raises(AclnnParamError) as info:
                        aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(go.tensor, out_size, in_size, 0.0,
                                                                             0.0, 0.0, gi.tensor)
                    seen.append(info.value.detail)
                # the host checks on the Session path, with a value only this thread uses
                with pytest.raises(AclnnParamError) as info:
                    session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, -(2000 + k)))
                seen.append(info.value.detail)
        return run

    def working(k: int) -> Callable[[], None]:
        def run() -> None:
            for j in range(10):
                g = _data(500 + 10 * k + j)
                np.testing.assert_allclose(session.backward(g, OUT_SIZE, IN_SIZE), _want(g), rtol=1e-5, atol=1e-5)
        return run

    failing_ids = list(range(6))
    errors = _run_threads([failing(k) for k in failing_ids] + [working(k) for k in range(3)])
    assert not errors, errors
    for k in failing_ids:
        assert len(details[k]) == 50
        for detail in details[k]:
            mine = f",{1000 + k}]" in detail or f"-{2000 + k}" in detail
            others = [j for j in failing_ids if j != k and (f",{1000 + j}]" in detail or f"-{2000 + j}" in detail)]
            assert mine and not others, (k, detail)
    go.close()
    gi.close()


def test_a_session_made_on_one_thread_works_on_others(no_leaks: None) -> None:
    made: dict[str, Any] = {}

    def make() -> None:
        made["s"] = s = Session(1)
        made["g"] = s.upload(SAMPLE)

    t = threading.Thread(target=make)
    t.start()
    t.join()
    s, g = made["s"], made["g"]
    assert s.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED  # on the main thread
    got: dict[str, Any] = {}

    def use() -> None:  # a fresh thread: no context of its own until the session binds one
        out = s.backward(g, (2, 2, 2), (2, 2, 1, 1, 1))
        got["result"] = out.download().ravel().tolist()
        out.close()

    errors = _run_threads([use])
    assert not errors, errors
    assert got["result"] == EXPECTED
    errors = _run_threads([s.close])  # and closed on yet another thread
    assert not errors, errors
    assert s.closed and g.closed


def test_the_default_session_is_created_once_under_contention() -> None:
    ug.close_default_session()
    before = sim.live_handles()
    sessions: list[Session] = []

    def call(k: int) -> Callable[[], None]:
        def run() -> None:
            g = _data(k)
            np.testing.assert_allclose(ug.upsample_nearest_exact3d_backward(g, OUT_SIZE, IN_SIZE), _want(g),
                                       rtol=1e-5, atol=1e-5)
            sessions.append(ug.default_session())
        return run

    errors = _run_threads([call(k) for k in range(8)])
    assert not errors, errors
    assert len({id(s) for s in sessions}) == 1
    ug.close_default_session()
    assert sim.live_handles() == before
