"""The session's stream-ordered caching allocator (acl_bindings.allocator), against the simulator.

In steady state a call with numpy in and out makes no aclrtMalloc/aclrtFree, creates and
destroys no aclTensor, synchronises the stream once and makes at most 6 C calls in all
(counted by the simulator's per-function counters).  A freed block is reused only after the
stream passed the work that used it: the simulator's asynchronous and deferred modes report
an earlier reuse (908401), which the test provokes by removing the ordering.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import upsample3d_grad as ug
from acl_bindings import AclRuntimeError, sim
from acl_bindings._codes import CANNSIM_ERR_QUEUED_WORK
from acl_bindings.allocator import StreamClock
from acl_bindings.prototypes import PROTOTYPES
from upsample3d_grad import Session, reference
from upsample3d_grad.op import OP

pytestmark = pytest.mark.skipif(not sim.is_built(), reason="simulator not built")

G = np.arange(1, 65, dtype=np.float32).reshape(1, 1, 4, 4, 4)
ARGS = ((4, 4, 4), (1, 1, 2, 2, 2))
WANT = reference.upsample_nearest_exact3d_backward(G, *ARGS)
#: Every C function the bindings can call (the runtime, nnopbase and the operator's two phases).
ALL = tuple(PROTOTYPES) + (OP.phase1_name, OP.phase2_name)


def _counts() -> dict[str, int]:
    return {name: sim.call_count(name) for name in ALL}


def _calls_of(step: object) -> dict[str, int]:
    """The C calls *step()* makes, by function (only those it calls)."""
    before = _counts()
    step()  # type: ignore[operator]
    after = _counts()
    return {name: after[name] - before[name] for name in ALL if after[name] != before[name]}


@pytest.fixture(params=["async", "deferred"])
def stream_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = sim.set_stream_mode(request.param)
    try:
        yield request.param
    finally:
        sim.set_stream_mode(previous)


def _assert_steady(calls: dict[str, int]) -> None:
    assert calls.get("aclrtMalloc", 0) == 0 and calls.get("aclrtFree", 0) == 0, calls
    assert calls.get("aclCreateTensor", 0) == 0 and calls.get("aclDestroyTensor", 0) == 0, calls
    assert calls.get("aclrtSynchronizeStream", 0) == 1, calls
    assert calls.get(OP.phase2_name) == 1 and OP.phase1_name not in calls, calls
    assert calls.get("aclrtGetCurrentContext", 0) == 1, calls  # one device guard per call
    assert sum(calls.values()) <= 6, calls


def test_steady_state_session_backward_makes_at_most_six_c_calls(no_leaks: None, session: Session) -> None:
    for _ in range(2):  # warm up: the plan, the workspace and the cached blocks exist now
        session.backward(G, *ARGS)
    out: list[np.ndarray] = []
    calls = _calls_of(lambda: out.append(session.backward(G, *ARGS)))
    _assert_steady(calls)
    np.testing.assert_array_equal(out[0], WANT)


def test_steady_state_module_function_makes_at_most_six_c_calls(no_leaks: None) -> None:
    for _ in range(2):
        ug.upsample_nearest_exact3d_backward(G, *ARGS)
    out: list[np.ndarray] = []
    calls = _calls_of(lambda: out.append(ug.upsample_nearest_exact3d_backward(G, *ARGS)))
    _assert_steady(calls)
    np.testing.assert_array_equal(out[0], WANT)
    ug.close_default_session()


def test_a_closed_array_returns_its_block_and_the_next_one_reuses_it(no_leaks: None, session: Session) -> None:
    arr = session.upload(G)
    ptr = arr.buffer.ptr
    arr.close()
    assert arr.buffer.ptr == 0  # its memory is not its own any more
    mallocs = sim.call_count("aclrtMalloc")
    again = session.upload(2 * G)
    assert again.buffer.ptr == ptr and sim.call_count("aclrtMalloc") == mallocs
    np.testing.assert_array_equal(again.download(), 2 * G)
    again.close()


def test_a_dropped_array_returns_its_block(no_leaks: None, session: Session) -> None:
    arr = session.upload(G)
    ptr = arr.buffer.ptr
    del arr
    again = session.upload(G)
    assert again.buffer.ptr == ptr
    again.close()


def test_a_block_is_reused_only_after_the_stream_passed_its_work(no_leaks: None, stream_mode: str,
                                                                 session: Session) -> None:
    sim.set_delay(20)
    try:
        go = session.upload(G)
        out = session.backward(go, *ARGS)  # queued, not synchronised
        ptr = go.buffer.ptr
        go.close()  # the queued kernel still reads its block
        other = session.upload(3 * G)  # must not land on that block
        assert other.buffer.ptr != ptr
        np.testing.assert_array_equal(out.download(), WANT)
        after = session.upload(G)  # the stream passed: the block is free for reuse
        assert after.buffer.ptr == ptr
    finally:
        sim.set_delay(0)
    for arr in (out, other, after):
        arr.close()


def test_without_the_ordering_an_early_reuse_is_caught(no_leaks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    previous = sim.set_stream_mode("deferred")
    try:
        with Session(0) as s:
            go = s.upload(G)
            out = s.backward(go, *ARGS)  # queued
            monkeypatch.setattr(StreamClock, "ready_mark", lambda self: self.done)  # "idle at once"
            go.close()
            with pytest.raises(AclRuntimeError) as info:
                s.upload(3 * G)  # the same block, written while the queued kernel reads it
            assert info.value.code == CANNSIM_ERR_QUEUED_WORK and info.value.func == "aclrtMemcpy"
            monkeypatch.undo()
            np.testing.assert_array_equal(out.download(), WANT)
            out.close()
    finally:
        sim.set_stream_mode(previous)


def test_out_of_memory_frees_the_cache_and_retries_once(no_leaks: None, session: Session) -> None:
    session.upload(G).close()  # one cached block
    frees = sim.call_count("aclrtFree")
    sim.set_fault("aclrtMalloc:1:207001")
    try:
        big = session.upload(np.ones((1, 1, 8, 8, 8), np.float32))  # another size: a new block
    finally:
        sim.set_fault(None)
    assert sim.call_count("aclrtFree") == frees + 1 and session.allocator.cached_bytes == 0
    np.testing.assert_array_equal(big.download(), 1)
    big.close()


def test_the_cache_is_capped(no_leaks: None, session: Session) -> None:
    session.allocator.capacity = 1024
    arrays = [session.upload(np.full((1, 1, 4, 4, 4), k, np.float32)) for k in range(4)]  # 256 bytes: 512 each
    for arr in arrays:
        arr.close()
    assert session.allocator.cached_bytes <= 1024
    assert session.allocator.blocks == 2


def test_empty_cache_releases_it(no_leaks: None, session: Session) -> None:
    start = sim.live_handles()["device_buffer"]
    session.backward(G, *ARGS)  # its arrays are kept for the next call of its key (tests/sim/test_host_repeat.py)
    session.upload(G).close()  # a block cached idle
    assert session.allocator.blocks >= 1 and session.allocator.cached_bytes
    assert sim.live_handles()["device_buffer"] >= start + 3  # the kept arrays' blocks, the idle one, the workspace
    session.empty_cache()
    assert session.allocator.blocks == 0 and session.allocator.cached_bytes == 0
    assert sim.live_handles()["device_buffer"] == start  # all of them
    np.testing.assert_array_equal(session.backward(G, *ARGS), WANT)  # and it fills again


def test_raw_memory_of_a_pooled_block_is_the_array_s(session: Session) -> None:
    """A pooled buffer's reads and writes stay inside the bytes asked for, not the rounded block."""
    arr = session.upload(G)
    with pytest.raises(ValueError, match="outside"):
        arr.buffer.download(np.empty(G.size + 1, np.float32))
    arr.close()


@pytest.mark.parametrize("prepared", [False, True], ids=["backward", "prepare"])
def test_an_out_of_memory_workspace_frees_idle_blocks_and_retries(no_leaks: None, session: Session,
                                                                  prepared: bool) -> None:
    """A workspace is memory of the session's allocator too: when its aclrtMalloc runs out of memory, the
    allocator frees its idle blocks and retries, instead of failing with 207001 while memory sits idle."""
    go, gi = session.upload(G), session.empty(ARGS[1])
    session.upload(np.ones((1, 1, 16, 16, 16), np.float32)).close()  # an idle cached block (16 KiB)
    assert session.allocator.cached_bytes > 0
    frees = sim.call_count("aclrtFree")
    sim.set_fault("aclrtMalloc:1:207001")  # the next aclrtMalloc, the workspace's, is out of memory
    try:
        if prepared:
            with session.prepare(go, *ARGS, out=gi) as call:
                call()
        else:
            session.backward(go, *ARGS, out=gi)
    finally:
        sim.set_fault(None)
    assert sim.call_count("aclrtFree") > frees and session.allocator.cached_bytes < 16384
    np.testing.assert_array_equal(gi.download(), WANT)
    go.close()
    gi.close()
