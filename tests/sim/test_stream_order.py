"""Stream order: every public path synchronises where it must.

The simulator runs stream work on a worker thread per stream, after the call that
queued it returned (the default, asynchronous mode), and in deferred mode
(``sim.set_stream_mode("deferred")``) only when a synchronisation asks for it.  Reading
a result that queued work still writes, or freeing or overwriting memory that it
uses, fails with the simulator-only code 908401 (``CANNSIM_ERR_QUEUED_WORK``).  Each
path is tested twice: as it is (it must work, in both modes), and with the
synchronisation removed (``Stream.synchronize`` / ``Session._sync`` / ``Event.synchronize``
made no-ops), where the simulator must report the problem, which shows that the
first test would catch a missing sync.  The negative controls run in deferred mode,
where the work is certain to be still queued.  After such a negative control
everything is cleaned up and no handle is left behind.
"""

from __future__ import annotations

import gc
from typing import Any, Iterator

import numpy as np
import pytest

import upsample3d_grad as ug
from acl_bindings import (
    AclError,
    AclParamError,
    AclRuntimeError,
    Device,
    DeviceBuffer,
    Event,
    Stream,
    contiguous_strides,
    lib,
    sim,
)
from acl_bindings._codes import CANNSIM_ERR_QUEUED_WORK
from acl_bindings.allocator import StreamClock
from acl_bindings.op import WORKSPACE_STEP
from upsample3d_grad import Session, reference
from upsample3d_grad.session import DeviceArray

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]
ARGS = ((2, 2, 2), (2, 2, 1, 1, 1))
BIG = ((16, 128, 128), (2, 3, 8, 64, 64))  # a workspace beyond ARGS's 2 MiB step (checked where it matters)


@pytest.fixture(autouse=True, params=["async", "deferred"])
def stream_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = sim.set_stream_mode(request.param)
    yield request.param
    sim.set_stream_mode(previous)


@pytest.fixture
def deferred() -> Iterator[None]:
    """Negative controls: queued work is certain to be still queued (it only runs at a sync)."""
    previous = sim.set_stream_mode("deferred")
    yield
    sim.set_stream_mode(previous)


def _no_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove the stream synchronisation the binding relies on."""
    monkeypatch.setattr(Stream, "synchronize", lambda self, timeout_ms=None: None)
    monkeypatch.setattr(StreamClock, "sync", lambda self, synchronize=None: None)  # (a session's one wait)


def _own_memory(session: Session, host: np.ndarray) -> DeviceArray:
    """A device array over a DeviceBuffer of its own (freed with aclrtFree when dropped)."""
    buf = DeviceBuffer(session.device, host.nbytes)
    buf.upload(host)
    return DeviceArray(session, buf, host.shape, host.dtype, "NCDHW", contiguous_strides(host.shape), 0)


def _pending_error(info: pytest.ExceptionInfo[AclError], func: str = "aclrtFree", doing: str = "freeing") -> None:
    err = info.value
    assert isinstance(err, AclRuntimeError) and err.code == CANNSIM_ERR_QUEUED_WORK and err.func == func, err
    assert f"{func}: {doing} 0x" in err.detail and "has not completed" in err.detail, err.detail


def _block(workspace_size: int) -> int:
    """The bytes of the workspace buffer an ask of *workspace_size* gets (acl_bindings.op.WORKSPACE_STEP)."""
    return -(-workspace_size // WORKSPACE_STEP) * WORKSPACE_STEP


def _big_input(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 3, *BIG[0])).astype(np.float32)


# --------------------------------------------------------------------------- before a download

def test_download_waits_for_the_kernel(no_leaks: None, session: Session) -> None:
    with session.upload(SAMPLE) as go:
        out = session.backward(go, *ARGS)
        assert out.download().ravel().tolist() == EXPECTED
        host = np.empty((2, 2, 1, 1, 1), np.float32)
        session.backward(go, *ARGS, out=out)
        assert out.download(host) is host and host.ravel().tolist() == EXPECTED
        out.close()


def test_without_the_sync_a_download_is_refused(no_leaks: None, deferred: None, session: Session,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    go = session.upload(SAMPLE)
    out = session.backward(go, *ARGS)
    monkeypatch.setattr(Session, "_sync", lambda self: None)
    with pytest.raises(AclRuntimeError) as info:  # the kernel still writes it: reading it is a race
        out.download()
    _pending_error(info, "aclrtMemcpy", "reading")
    del info
    monkeypatch.undo()
    assert out.download().ravel().tolist() == EXPECTED
    go.close()
    out.close()


def test_numpy_calls_and_the_module_function(session: Session) -> None:
    for plans in (True, False):
        session.use_plans = plans
        for k in range(1, 4):
            assert session.backward(k * SAMPLE, *ARGS).ravel().tolist() == [k * v for v in EXPECTED]
    try:
        assert ug.upsample_nearest_exact3d_backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED
        g = _big_input()
        np.testing.assert_allclose(ug.UpsampleNearestExact3dGrad(g, BIG[1]),
                                   reference.upsample_nearest_exact3d_backward(g, *BIG), rtol=1e-5, atol=1e-5)
    finally:
        ug.close_default_session()


def test_without_the_sync_a_numpy_call_fails(no_leaks: None, deferred: None, session: Session,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _no_sync(monkeypatch)
    with pytest.raises(AclRuntimeError) as info:  # its result is read back while the kernel is queued
        session.backward(SAMPLE, *ARGS)
    _pending_error(info, "aclrtMemcpy", "reading")
    del info
    monkeypatch.undo()
    session.synchronize()
    gc.collect()  # the arrays whose free was refused are still owned: released now
    assert session.backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED


# --------------------------------------------------------------------------- workspace reuse and growth

def test_a_reused_or_grown_workspace_needs_no_sync(no_leaks: None, session: Session) -> None:
    """The workspace is a block of the session's allocator: reused as it is, and when it grows the outgrown
    block goes back to the cache stream-ordered (reused only once the stream passed the kernels that use it),
    so neither waits for the stream."""
    small = [session.upload(k * SAMPLE) for k in range(1, 5)]
    outs = [session.empty(ARGS[1]) for _ in small]
    syncs = sim.call_count("aclrtSynchronizeStream")
    for go, out in zip(small, outs):  # four kernels queued on one workspace, in stream order
        session.backward(go, *ARGS, out=out)
    assert sim.call_count("aclrtSynchronizeStream") == syncs  # reuse: nothing waited for
    small_ws = session.last_workspace_size
    g = _big_input(1)
    with session.upload(g) as go, session.empty(BIG[1]) as out:
        session.backward(go, *BIG, out=out)  # grows the workspace while the small kernels are queued
        assert session.last_workspace_size > small_ws
        assert sim.call_count("aclrtSynchronizeStream") == syncs  # growth: nothing waited for either
        outgrown = np.zeros((1, 1, 1, 1, _block(small_ws) // 4), np.float32)
        with session.upload(outgrown):  # the outgrown block's size: it must not be handed out yet
            pass
        np.testing.assert_allclose(out.download(), reference.upsample_nearest_exact3d_backward(g, *BIG),
                                   rtol=1e-5, atol=1e-5)
    for k, out in enumerate(outs, 1):
        assert out.download().ravel().tolist() == [k * v for v in EXPECTED]
    for arr in small + outs:
        arr.close()


def test_workspaces_of_nearby_sizes_share_one_buffer(no_leaks: None, session: Session) -> None:
    """The A2/A3 backward asks for 16 MiB and a little more, varying with the shape: the workspace grows in 2 MiB
    steps, so those asks share one buffer (no aclrtMalloc after the first) and no outgrown block is left behind."""
    session.backward(SAMPLE, *ARGS)
    first = session.last_workspace_size
    mallocs = sim.call_count("aclrtMalloc")
    g = np.ones((2, 3, 8, 12, 16), np.float32)
    session.backward(g, (8, 12, 16), (2, 3, 4, 6, 8))
    assert session.last_workspace_size > first  # a larger ask ...
    assert sim.call_count("aclrtMalloc") - mallocs == 2  # ... but only its input and result were allocated
    session.synchronize()


def test_without_the_stream_order_a_grown_workspace_is_reused_too_early(
        no_leaks: None, deferred: None, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    go, out = session.upload(SAMPLE), session.empty(ARGS[1])
    session.backward(go, *ARGS, out=out)  # queued, using the small workspace
    small_ws = session.last_workspace_size
    big_go, big_out = session.upload(_big_input(2)), session.empty(BIG[1])
    monkeypatch.setattr(StreamClock, "ready_mark", lambda self: self.done)  # "idle at once"
    session.backward(big_go, *BIG, out=big_out)  # the small workspace goes back to the cache
    assert session.last_workspace_size > small_ws
    with pytest.raises(AclRuntimeError) as info:  # handed the small workspace's block, which the queued kernel uses
        session.upload(np.zeros((1, 1, 1, 1, _block(small_ws) // 4), np.float32))
    _pending_error(info, "aclrtMemcpy", "overwriting")
    del info
    monkeypatch.undo()
    assert out.download().ravel().tolist() == EXPECTED
    for arr in (go, out, big_go, big_out):
        arr.close()


# --------------------------------------------------------------------------- before a buffer is freed

def test_closing_an_array_in_use_waits(no_leaks: None, session: Session) -> None:
    go = session.upload(SAMPLE)
    out = session.backward(go, *ARGS)
    go.close()  # its kernel is still queued: close() synchronises first
    assert out.download().ravel().tolist() == EXPECTED
    out.close()


def test_without_the_sync_closing_an_array_in_use_fails(no_leaks: None, deferred: None, session: Session,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    go = session.upload(SAMPLE)
    out = session.backward(go, *ARGS)
    go.close()  # its block goes back to the session's cache, still in use by the queued kernel
    _no_sync(monkeypatch)
    with pytest.raises(AclRuntimeError) as info:
        session.empty_cache()  # releasing it to the library needs the stream's work done first
    _pending_error(info)
    assert session.allocator.cached_bytes  # the memory is still ours; empty_cache() can be retried
    monkeypatch.undo()
    session.empty_cache()
    assert not session.allocator.cached_bytes and out.download().ravel().tolist() == EXPECTED
    out.close()


def test_dropped_arrays_with_queued_work_are_freed_after_a_sync(no_leaks: None, session: Session) -> None:
    go = session.upload(SAMPLE)
    for _ in range(3):
        session.backward(go, *ARGS)  # each result dropped at once, its kernel still queued
    del go
    gc.collect()
    assert session.backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED


def test_without_the_sync_dropped_arrays_leak(deferred: None, session: Session,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The garbage collector's release waits for the device first; without that wait the free is refused."""
    assert session.backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED  # the workspace and plan exist now
    before = sim.live_handles()
    monkeypatch.setattr(Device, "synchronize", lambda self: None)  # bound into the finalizers made below
    # memory of its own, not the session's cache (whose blocks go back to the cache when dropped)
    go = _own_memory(session, SAMPLE)
    out = session.backward(go, *ARGS, out=_own_memory(session, np.zeros(ARGS[1], np.float32)))
    pointers = [go.buffer.ptr, out.buffer.ptr]
    del go, out
    gc.collect()
    leaked = sim.live_handles()["device_buffer"] - before["device_buffer"]
    monkeypatch.undo()
    session.synchronize()
    for ptr in pointers:  # clean up what the broken finalizers could not free
        lib.aclrtFree(ptr)
    assert leaked == 2
    assert sim.live_handles() == before


def test_closing_a_session_with_queued_work(no_leaks: None) -> None:
    s = Session(0)
    go = s.upload(SAMPLE)
    out = s.backward(go, *ARGS)
    s.close()
    assert go.closed and out.closed


def test_without_the_sync_closing_a_session_fails_and_a_retry_finishes(no_leaks: None, deferred: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    s = Session(0)
    go = s.upload(SAMPLE)
    out = s.backward(go, *ARGS)
    _no_sync(monkeypatch)
    with pytest.raises(AclRuntimeError) as info:
        s.close()
    _pending_error(info)
    assert s.closed and not s.device.closed  # unusable, but the device is kept for what is left to free
    del info
    monkeypatch.undo()
    s.close()
    assert s.device.closed and go.closed and out.closed


# --------------------------------------------------------------------------- plans and events

def test_plan_eviction_with_queued_work(no_leaks: None, session: Session) -> None:
    session.plans.capacity = 1
    arrays: list[tuple[DeviceArray, DeviceArray, Any]] = []
    for k in range(4):  # alternate two call shapes: each call evicts the other's plan
        g: np.ndarray
        if k % 2:
            g, sizes = _big_input(k), BIG
        else:
            g, sizes = k * SAMPLE, ARGS
        arrays.append((session.upload(g), session.empty(sizes[1]),
                       reference.upsample_nearest_exact3d_backward(g, *sizes)))
        session.backward(arrays[-1][0], *sizes, out=arrays[-1][1])
    assert session.plans.misses == 4
    for go, out, want in arrays:
        np.testing.assert_allclose(out.download(), want, rtol=1e-5, atol=1e-5)
        go.close()
        out.close()


def test_timed_backward_waits_for_its_events(no_leaks: None, session: Session,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    previous = sim.set_delay(2)
    try:
        with session.upload(SAMPLE) as go, session.empty(ARGS[1]) as out:
            times = session.timed_backward(go, *ARGS, out=out, repeat=2)
            assert len(times) == 2 and all(t >= 1.5 for t in times), times
            assert out.download().ravel().tolist() == EXPECTED
            mode = sim.set_stream_mode("deferred")  # the negative control: the end event is surely pending
            monkeypatch.setattr(Event, "synchronize", lambda self: None)
            try:
                with pytest.raises(AclParamError) as info:  # the end event has not completed
                    session.timed_backward(go, *ARGS, out=out)
            finally:
                sim.set_stream_mode(mode)
            assert info.value.func == "aclrtEventElapsedTime" and "not completed" in info.value.detail
            monkeypatch.undo()
            session.synchronize()
    finally:
        sim.set_delay(previous)


# --------------------------------------------------------------------------- plan-cache evictions

def test_an_eviction_never_frees_under_queued_work(no_leaks: None, session: Session) -> None:
    """More call shapes than the plan cache keeps: every miss evicts a plan (and synchronises first).  The
    temporaries of each call (its uploaded gradOut) go back to the allocator while that call's kernel is
    queued, so the next upload must not reuse them yet: the simulator refuses an overwrite under queued
    work (908401), in deferred mode and under a slow kernel in the asynchronous one."""
    previous = sim.set_delay(2)
    try:
        session.plans.capacity = 1
        shapes = [((2, 2, 2), (2, 2, 1, 1, 1)), ((2, 2, 4), (2, 2, 1, 1, 2)), ((2, 4, 2), (2, 2, 1, 2, 1))]
        for k in range(6):
            osize, isize = shapes[k % len(shapes)]
            go = np.full((2, 2, *osize), k + 1, np.float32)
            with session.empty(isize) as gi:  # (NCDHW: gradInput's shape is inputSize)
                session.backward(go, osize, isize, out=gi)
                with session.upload(np.zeros_like(go)):  # may reuse the gradOut block only after the kernel
                    pass
                expected = reference.upsample_nearest_exact3d_backward(go, osize, isize)
                np.testing.assert_array_equal(gi.download(), expected)
        assert session.plans.misses >= 6  # every call missed and evicted
    finally:
        sim.set_delay(previous)
