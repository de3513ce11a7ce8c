"""The simulator's stream modes, as the package's helpers set them (cann-abi.md §8.4).

By default stream work runs on a worker thread per stream, after the call that queued
it returned; ``sim.set_stream_mode`` switches to the deferred or the synchronous mode.
"""

from __future__ import annotations

import numpy as np
import pytest

from acl_bindings import AclRuntimeError, DeviceBuffer, Event, Stream, sim
from acl_bindings._codes import CANNSIM_ERR_QUEUED_WORK
from upsample3d_grad import Session


def test_the_default_mode_is_asynchronous() -> None:
    previous = sim.set_stream_mode("async")
    assert previous == "async"  # the test suite runs in the default mode
    assert sim.set_stream_mode(previous) == "async"


@pytest.mark.parametrize("bad", ["eager", "", "ASYNC", None, 0])
def test_a_bad_mode_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match="mode: expected one of 'async', 'deferred', 'sync', got"):
        sim.set_stream_mode(bad)  # type: ignore[arg-type]
    assert sim.set_stream_mode("async") == "async"  # unchanged


def test_set_defer_switches_between_deferred_and_asynchronous() -> None:
    assert sim.set_defer(True) is False
    assert sim.set_stream_mode("async") == "deferred"
    assert sim.set_defer(False) is False


@pytest.mark.parametrize("mode", ["async", "deferred", "sync"])
def test_each_mode_gives_the_answer(no_leaks: None, mode: str) -> None:
    previous = sim.set_stream_mode(mode)
    try:
        with Session(0) as s:
            g = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
            assert s.backward(g, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == [36.0, 100.0, 164.0, 228.0]
    finally:
        sim.set_stream_mode(previous)


def test_a_queued_copy_guards_its_memory_until_the_sync(no_leaks: None, session: Session) -> None:
    previous = sim.set_stream_mode("deferred")
    try:
        with DeviceBuffer(session.device, 256) as a, Stream(session.device) as stream:
            a.memset(7, stream=stream)
            back = np.zeros(256, np.uint8)
            with pytest.raises(AclRuntimeError) as info:
                a.download(back)
            assert info.value.code == CANNSIM_ERR_QUEUED_WORK and info.value.name == "CANNSIM_ERR_QUEUED_WORK"
            assert f"stream {stream.handle:#x} (aclrtMemsetAsync)" in info.value.detail
            assert (back == 0).all()
            stream.synchronize()
            assert (a.download(back) == 7).all()
    finally:
        sim.set_stream_mode(previous)


def test_a_stream_waits_for_an_event_of_another_and_a_race_without_the_wait_is_reported(
        no_leaks: None, session: Session) -> None:
    """Stream.wait (aclrtStreamWaitEvent) orders a second stream's work after the first's; the same work without
    the wait is refused as a race (the hardware would race the two silently)."""
    previous = sim.set_stream_mode("deferred")  # the first stream's work stays queued: the race is certain
    try:
        with DeviceBuffer(session.device, 256) as a, DeviceBuffer(session.device, 256) as b, \
                Stream(session.device) as s1, Stream(session.device) as s2, Event(session.device) as done:
            a.memset(7, stream=s1)
            with pytest.raises(AclRuntimeError) as info:
                b.copy_from(a, stream=s2)  # s2 reads what s1 writes: not ordered
            assert info.value.code == CANNSIM_ERR_QUEUED_WORK and "aclrtStreamWaitEvent" in info.value.detail
            done.record(s1)
            assert done.query() is False  # queued (deferred mode; the query lets it run)
            s2.wait(done)
            b.copy_from(a, stream=s2)  # ordered now
            s2.synchronize()
            assert done.query() is True and s1.query() is True and s2.query() is True
            back = np.zeros(256, np.uint8)
            assert (b.download(back) == 7).all()
    finally:
        sim.set_stream_mode(previous)


def test_an_event_never_recorded_is_not_complete_and_waiting_for_it_waits_for_nothing(
        no_leaks: None, session: Session) -> None:
    with Event(session.device) as e, Stream(session.device) as s:
        assert e.query() is False  # CANN: RT_EVENT_INIT is not RT_EVENT_RECORDED (event.cpp)
        s.wait(e)
        s.synchronize()
        assert s.query() is True
