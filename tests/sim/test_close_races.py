"""Close against use, for each object type, with the simulator's asynchronous streams.

One thread uses an object in a bounded loop while another closes it.  The user either
finishes a call or gets :class:`~acl_bindings.ClosedError`: never a code from the
runtime (a handle used after its release, memory freed under a call), never a crash or
a hang.  After every round the simulator's live-handle counters and its worker threads
are back where they started.  There are no timing assertions: the closer waits a
random fraction of a millisecond, so that the close lands at many points of the use.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from acl_bindings import ClosedError, Device, DeviceBuffer, Event, HostBuffer, Stream, sim
from upsample3d_grad import Session

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]
ARGS = ((2, 2, 2), (2, 2, 1, 1, 1))
ROUNDS = 40
USES = 200  # at most this many uses per round


@pytest.fixture(autouse=True)
def asynchronous() -> Iterator[None]:
    """The default mode, and kernels of 1 ms of simulated device time, so that uses overlap the close."""
    previous_mode = sim.set_stream_mode("async")
    previous_delay = sim.set_delay(1)
    yield
    sim.set_delay(previous_delay)
    sim.set_stream_mode(previous_mode)


def _race(use: Callable[[], Any], close: Callable[[], None], seed: int) -> list[BaseException]:
    """Run *use* until it raises (at most USES times) while another thread runs *close*; return what *use* raised.

    Whatever *close* raises is returned too.
    """
    errors: list[BaseException] = []
    start = threading.Barrier(2)
    wait = random.Random(seed).random() * 1e-3

    def user() -> None:
        start.wait()
        try:
            for _ in range(USES):
                use()
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    def closer() -> None:
        start.wait()
        time.sleep(wait)
        try:
            close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=user), threading.Thread(target=closer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a use or a close hangs"
    return errors


def _only_closed(errors: list[BaseException]) -> None:
    for exc in errors:
        assert isinstance(exc, ClosedError), repr(exc)


def _rounds(make: Callable[[], tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]],
            session: Session | None = None) -> None:
    """Each round: ``use, close, cleanup = make()``; race them; no error but ClosedError; no leak.

    A first round without a race creates what a session keeps between calls (its plan, its
    workspace, its stream's worker) before the counters are read.  The blocks *session*'s caching
    allocator keeps are capped, not leaked: how many a round leaves depends on the race (a block
    closed while the stream may still use it is not handed out again until the stream passed that
    work), so its cache is emptied before each count.
    """
    use, close, cleanup = make()
    try:
        use()
        close()
    finally:
        cleanup()
    if session is not None:
        session.empty_cache()
    before, workers = sim.live_handles(), sim.worker_threads()
    for k in range(ROUNDS):
        use, close, cleanup = make()
        try:
            _only_closed(_race(use, close, k))
        finally:
            cleanup()
        if session is not None:
            session.empty_cache()
        assert sim.live_handles() == before, k
        assert sim.worker_threads() == workers, k


@pytest.fixture
def device() -> Iterator[Device]:
    dev = Device(0)
    yield dev
    dev.close()


def test_stream(no_leaks: None, device: Device) -> None:
    buf = DeviceBuffer(device, 4096)

    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        stream = Stream(device)

        def use() -> None:
            buf.memset(1, stream=stream)
            stream.synchronize()

        return use, stream.close, stream.close

    try:
        _rounds(make)
    finally:
        buf.close()


def test_event(no_leaks: None, device: Device) -> None:
    stream = Stream(device)

    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        start, end = Event(device), Event(device)

        def use() -> None:
            start.record(stream)
            end.record(stream)
            end.synchronize()
            assert end.elapsed_ms(start) >= 0.0

        def cleanup() -> None:
            stream.synchronize()
            start.close()
            end.close()

        return use, end.close, cleanup

    try:
        _rounds(make)
    finally:
        stream.close()


def test_device_buffer(no_leaks: None, device: Device) -> None:
    host = np.arange(1024, dtype=np.float32)

    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        buf = DeviceBuffer(device, host.nbytes)
        other = DeviceBuffer(device, host.nbytes)
        back = np.empty_like(host)

        def use() -> None:
            buf.upload(host)
            other.copy_from(buf)
            buf.memset(0)
            buf.download(back)

        def cleanup() -> None:
            buf.close()
            other.close()

        return use, buf.close, cleanup

    _rounds(make)


def test_host_buffer(no_leaks: None, device: Device) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        hb = HostBuffer(device, 256)
        return (lambda: hb.array(np.float32)), hb.close, hb.close

    _rounds(make)


def test_device_array_download_against_its_close(no_leaks: None, session: Session) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        go = session.upload(SAMPLE)
        out = session.backward(go, *ARGS)

        def use() -> None:
            assert out.download().ravel().tolist() == EXPECTED

        def cleanup() -> None:
            go.close()
            out.close()

        return use, out.close, cleanup

    _rounds(make, session)


def test_backward_against_closing_its_input(no_leaks: None, session: Session) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        go = session.upload(SAMPLE)
        out = session.empty(ARGS[1])
        runs = []

        def use() -> None:
            session.backward(go, *ARGS, out=out)  # a close may not free go between phase 1 and phase 2
            runs.append(1)

        def cleanup() -> None:
            go.close()
            if runs:  # a call that returned wrote the right answer
                assert out.download().ravel().tolist() == EXPECTED
            out.close()

        return use, go.close, cleanup

    _rounds(make, session)


def test_session_calls_and_downloads_against_session_close(no_leaks: None) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        s = Session(0)
        go = s.upload(SAMPLE)
        out = s.backward(go, *ARGS)

        def use() -> None:
            assert s.backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED
            assert out.download().ravel().tolist() == EXPECTED

        return use, s.close, s.close

    _rounds(make)


def test_download_against_session_close(no_leaks: None) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        s = Session(0)
        out = s.backward(s.upload(SAMPLE), *ARGS)

        def use() -> None:
            assert out.download().ravel().tolist() == EXPECTED

        return use, s.close, s.close

    _rounds(make)


@pytest.mark.parametrize("plan", [True, False], ids=["plan", "oneshot"])
def test_prepared_call(no_leaks: None, session: Session, plan: bool) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        go = session.upload(SAMPLE)
        out = session.empty(ARGS[1])
        call = session.prepare(go, *ARGS, out=out, plan=plan, sync=False)

        def use() -> None:
            call()

        def cleanup() -> None:
            call.close()
            go.close()
            out.close()

        return use, call.close, cleanup

    _rounds(make, session)


def test_prepared_call_against_session_close(no_leaks: None) -> None:
    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        s = Session(0)
        go = s.upload(SAMPLE)
        out = s.empty(ARGS[1])
        call = s.prepare(go, *ARGS, out=out)

        def use() -> None:
            call()
            assert out.download().ravel().tolist() == EXPECTED

        return use, s.close, s.close

    _rounds(make)


def _phase1_parts(device: Device) -> tuple[Any, ...]:
    """A backward call's tensors, int arrays and buffers (the sample), for the raw phase-1 races."""
    from acl_bindings import IntArray, Tensor

    go_buf, gi_buf = DeviceBuffer(device, SAMPLE.nbytes), DeviceBuffer(device, 16)
    go_buf.upload(SAMPLE)
    go = Tensor(SAMPLE.shape, np.float32, go_buf)
    gi = Tensor((2, 2, 1, 1, 1), np.float32, gi_buf)
    return go, IntArray(ARGS[0]), IntArray(ARGS[1]), gi, go_buf, gi_buf


def _raw_race(device: Device, victim: int) -> None:
    """Phase 1 (and destroying its executor unrun) in a loop while another thread closes argument *victim*."""
    from upsample3d_grad.op import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize as phase1

    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        parts = _phase1_parts(device)
        go, osz, isz, gi = parts[:4]

        def use() -> None:
            with device.active():  # (the faithful call is C's: its thread needs the device's context, §1.1)
                size, executor = phase1(go, osz, isz, 0.0, 0.0, 0.0, gi)
            executor.close()

        def cleanup() -> None:
            for part in parts:
                part.close()

        return use, parts[victim].close, cleanup

    _rounds(make)


@pytest.mark.parametrize("victim", [0, 1, 3], ids=["tensor", "int array", "output tensor"])
def test_tensor_and_int_array_against_phase1(no_leaks: None, device: Device, victim: int) -> None:
    _raw_race(device, victim)


def test_executor_against_phase2(no_leaks: None, device: Device) -> None:
    from upsample3d_grad.op import aclnnUpsampleNearestExact3dBackward as phase2
    from upsample3d_grad.op import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize as phase1

    stream = Stream(device)

    def make() -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
        parts = _phase1_parts(device)
        size, executor = phase1(*parts[:3], 0.0, 0.0, 0.0, parts[3])
        executor.make_repeatable()
        workspace = DeviceBuffer(device, max(size, 1))

        def use() -> None:
            phase2(workspace.ptr, size, executor, stream)
            stream.synchronize()

        def cleanup() -> None:
            stream.synchronize()
            executor.close()
            workspace.close()
            for part in parts:
                part.close()

        return use, executor.close, cleanup

    try:
        _rounds(make)
    finally:
        stream.close()
