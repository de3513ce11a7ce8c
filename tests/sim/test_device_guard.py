"""The current context decides the device (cann-abi.md §8.3): every call of the package leaves the
calling thread's current context as it found it.

A "foreign" library of the process (torch_npu, say) keeps its own context current and drives the
runtime through its own ctypes handle; it believes its device is still current after each of our
calls, and after each garbage collection of our objects on another device.
"""

from __future__ import annotations

import ctypes as C
import gc
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import acl_bindings as ab
import upsample3d_grad as ug
from acl_bindings import sim
from upsample3d_grad import Session, reference

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
ARGS = ((2, 2, 2), (2, 2, 1, 1, 1))
EXPECTED = [36.0, 100.0, 164.0, 228.0]


class Foreign:
    """The other library: its own handle on the loaded runtime."""

    def __init__(self) -> None:
        rt = C.CDLL(ab.load_backend().runtime.path)
        for name, args in (("aclrtGetCurrentContext", [C.POINTER(C.c_void_p)]),
                           ("aclrtSetCurrentContext", [C.c_void_p]),
                           ("aclrtCreateContext", [C.POINTER(C.c_void_p), C.c_int32]),
                           ("aclrtDestroyContext", [C.c_void_p]), ("aclrtGetDevice", [C.POINTER(C.c_int32)]),
                           ("aclrtSetDevice", [C.c_int32]), ("aclrtResetDevice", [C.c_int32]),
                           ("aclrtMalloc", [C.POINTER(C.c_void_p), C.c_size_t, C.c_int]),
                           ("aclrtFree", [C.c_void_p]), ("aclrtCreateStream", [C.POINTER(C.c_void_p)]),
                           ("aclrtDestroyStream", [C.c_void_p]), ("aclrtSynchronizeStream", [C.c_void_p])):
            getattr(rt, name).argtypes = args
        rt.aclGetRecentErrMsg.restype = C.c_char_p
        self.rt = rt

    def ok(self, rc: int) -> None:
        assert rc == 0, (rc, self.rt.aclGetRecentErrMsg())

    def context(self) -> int:
        ctx = C.c_void_p()
        rc = self.rt.aclrtGetCurrentContext(C.byref(ctx))
        if rc:
            self.rt.aclGetRecentErrMsg()
            return 0
        return int(ctx.value or 0)

    def device(self) -> int:
        dev = C.c_int32(-1)
        self.ok(self.rt.aclrtGetDevice(C.byref(dev)))
        return dev.value


@pytest.fixture
def foreign(no_leaks: None) -> Iterator[Foreign]:
    ab.ensure_initialized()
    f = Foreign()
    yield f
    sim.set_fault(None)


@pytest.fixture
def caller_context(foreign: Foreign) -> Iterator[int]:
    """A context the caller created and made current (on device 0, but not its default context)."""
    ctx = C.c_void_p()
    foreign.ok(foreign.rt.aclrtCreateContext(C.byref(ctx), 0))
    yield int(ctx.value or 0)
    foreign.ok(foreign.rt.aclrtDestroyContext(ctx))


def test_the_simulator_switches_the_device_with_the_context(foreign: Foreign) -> None:
    rt = foreign.rt
    foreign.ok(rt.aclrtSetDevice(1))
    ctx1 = foreign.context()
    stream1, mem1 = C.c_void_p(), C.c_void_p()
    foreign.ok(rt.aclrtCreateStream(C.byref(stream1)))
    foreign.ok(rt.aclrtMalloc(C.byref(mem1), 64, 0))
    foreign.ok(rt.aclrtSetDevice(0))
    ctx0 = foreign.context()
    assert ctx0 != ctx1 and foreign.device() == 0
    foreign.ok(rt.aclrtSetCurrentContext(ctx1))
    assert foreign.device() == 1  # aclrtSetCurrentContext also switches the thread's device
    foreign.ok(rt.aclrtSetCurrentContext(ctx0))
    assert foreign.device() == 0
    # a stream or device memory of device 1 used in device 0's context is refused
    assert rt.aclrtSynchronizeStream(stream1) == 107003
    assert b"belongs to device 1" in rt.aclGetRecentErrMsg()
    assert rt.aclrtFree(mem1) == 107000
    assert b"belongs to device 1 but the current context is on device 0" in rt.aclGetRecentErrMsg()
    foreign.ok(rt.aclrtSetCurrentContext(ctx1))
    foreign.ok(rt.aclrtFree(mem1))
    foreign.ok(rt.aclrtDestroyStream(stream1))
    foreign.ok(rt.aclrtResetDevice(1))
    foreign.ok(rt.aclrtResetDevice(0))


def _public_calls(made: dict[str, Any]) -> list[tuple[str, Callable[[], Any]]]:
    """Public calls of both packages, in an order where each finds what it needs in *made*."""
    want = reference.upsample_nearest_exact3d_backward(SAMPLE, *ARGS)

    def check(got: Any) -> None:
        assert np.array_equal(np.asarray(got), want)

    def fault(spec: str, call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            sim.set_fault(spec)
            try:
                with pytest.raises(ab.AclError):
                    call()
            finally:
                sim.set_fault(None)
        return run

    def raises(exc: type[BaseException], call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            with pytest.raises(exc):
                call()
        return run

    m = made
    return [
        ("Session(1)", lambda: m.__setitem__("s", Session(1))),
        ("Session(1, plans=False)", lambda: m.__setitem__("t", Session(1, plans=False))),
        ("upload", lambda: m.__setitem__("go", m["s"].upload(SAMPLE))),
        ("empty", lambda: m.__setitem__("gi", m["s"].empty(ARGS[1]))),
        ("backward numpy", lambda: check(m["s"].backward(SAMPLE, *ARGS))),
        ("backward one-shot", lambda: check(m["t"].backward(SAMPLE, *ARGS))),
        ("backward device", lambda: m["s"].backward(m["go"], *ARGS, out=m["gi"])),
        ("backward device, remembered", lambda: m["s"].backward(m["go"], *ARGS, out=m["gi"])),
        ("download", lambda: check(m["gi"].download())),
        ("prepare plan", lambda: m.__setitem__("p", m["s"].prepare(m["go"], *ARGS, out=m["gi"]))),
        ("prepared call", lambda: m["p"]()),
        ("prepare one-shot", lambda: m.__setitem__("q", m["s"].prepare(m["go"], *ARGS, out=m["gi"], plan=False))),
        ("prepared one-shot call", lambda: m["q"]()),
        ("prepared call, new arrays", lambda: m["p"](m["s"].upload(SAMPLE), m["s"].empty(ARGS[1]))),
        ("timed_backward", lambda: m["s"].timed_backward(m["go"], *ARGS, out=m["gi"], repeat=2)),
        ("synchronize", lambda: m["s"].synchronize()),
        ("module function", lambda: check(ug.upsample_nearest_exact3d_backward(SAMPLE, *ARGS))),
        ("Device(1)", lambda: m.__setitem__("d", ab.Device(1))),
        ("Stream", lambda: m.__setitem__("st", ab.Stream(m["d"]))),
        ("Event", lambda: m.__setitem__("ev", ab.Event(m["d"]))),
        ("Event.record", lambda: m["ev"].record(m["st"])),
        ("Event.synchronize", lambda: m["ev"].synchronize()),
        ("DeviceBuffer", lambda: m.__setitem__("b", ab.DeviceBuffer(m["d"], 128))),
        ("DeviceBuffer.upload", lambda: m["b"].upload(np.arange(32, dtype=np.float32))),
        ("DeviceBuffer.memset async", lambda: m["b"].memset(0, stream=m["st"])),
        ("Stream.synchronize", lambda: m["st"].synchronize()),
        ("DeviceBuffer.download", lambda: m["b"].download(np.empty(32, np.float32))),
        ("HostBuffer", lambda: m.__setitem__("h", ab.HostBuffer(m["d"], 64))),
        ("Device.synchronize", lambda: m["d"].synchronize()),
        ("Device.mem_info", lambda: m["d"].mem_info()),
        # errors: before any device call, and from the runtime in the middle of a call
        ("backward, bad sizes", raises(ab.AclError, lambda: m["s"].backward(SAMPLE, (2, 2), ARGS[1]))),
        ("backward, device fault", fault("aclrtMemcpy:1:507899", lambda: m["s"].backward(SAMPLE, *ARGS))),
        ("prepared call, fault", fault("aclrtSynchronizeStream:1:507899", lambda: m["p"]())),
        ("synchronize, fault", fault("aclrtSynchronizeStream:1:507899", lambda: m["s"].synchronize())),
        ("DeviceBuffer, out of memory", raises(ab.AclError, lambda: ab.DeviceBuffer(m["d"], 1 << 62))),
        ("Session(5)", raises(ab.AclError, lambda: Session(5))),
        # releases
        ("PreparedCall.close", lambda: m["p"].close()),
        ("DeviceArray.close", lambda: m["gi"].close()),
        ("HostBuffer.close", lambda: m["h"].close()),
        ("DeviceBuffer.close", lambda: m["b"].close()),
        ("Event.close", lambda: m["ev"].close()),
        ("Stream.close", lambda: m["st"].close()),
        ("Device.close", lambda: m["d"].close()),
        ("Session.close", lambda: m["s"].close()),
        ("Session.close one-shot", lambda: m["t"].close()),
        ("close_default_session", ug.close_default_session),
    ]


def test_a_context_the_caller_set_is_current_after_every_public_call(foreign: Foreign, caller_context: int) -> None:
    made: dict[str, Any] = {}
    assert foreign.context() == caller_context
    moved = []
    for name, call in _public_calls(made):
        call()
        if foreign.context() != caller_context:
            moved.append(name)
            foreign.ok(foreign.rt.aclrtSetCurrentContext(caller_context))
    assert moved == []
    assert foreign.device() == 0


def test_two_sessions_on_two_devices_interleaved_on_one_thread(foreign: Foreign) -> None:
    foreign.ok(foreign.rt.aclrtSetDevice(0))  # the caller's device, as torch_npu sets it
    mine = foreign.context()
    rng = np.random.default_rng(0)
    g = [rng.standard_normal((2, 3, 4, 4, 4)).astype(np.float32) for _ in range(2)]
    sizes = ((4, 4, 4), (2, 3, 2, 2, 2))
    want = [reference.upsample_nearest_exact3d_backward(x, *sizes) for x in g]
    try:
        with Session(0) as s0, Session(1) as s1:
            sessions = (s0, s1)
            go = [s.upload(x) for s, x in zip(sessions, g)]
            out = [s.empty(sizes[1]) for s in sessions]
            calls = [s.prepare(a, *sizes, out=o) for s, a, o in zip(sessions, go, out)]
            for k in range(20):
                i = k % 2
                s = sessions[i]
                assert np.allclose(s.backward(g[i], *sizes), want[i], rtol=1e-5, atol=1e-6)
                s.backward(go[i], *sizes, out=out[i])
                assert np.allclose(out[i].download(), want[i], rtol=1e-5, atol=1e-6)
                calls[1 - i]()
                assert np.allclose(out[1 - i].download(), want[1 - i], rtol=1e-5, atol=1e-6)
                assert foreign.context() == mine and foreign.device() == 0, k
        # closing a session on the caller's device leaves the caller's (shared) default context current
        assert foreign.context() == mine
        buf = C.c_void_p()
        foreign.ok(foreign.rt.aclrtMalloc(C.byref(buf), 64, 0))
        foreign.ok(foreign.rt.aclrtFree(buf))
    finally:
        foreign.ok(foreign.rt.aclrtResetDevice(0))


def test_objects_of_another_device_collected_during_calls_keep_the_device(foreign: Foreign) -> None:
    """Device-1 objects in reference cycles are collected (often: threshold 5) in the middle of
    device-0 calls; neither our calls nor the caller's next one may move to device 1."""
    foreign.ok(foreign.rt.aclrtSetDevice(0))
    mine = foreign.context()
    old = gc.get_threshold()
    moved = wrong = 0
    try:
        with Session(0) as s0, ab.Device(1) as d1:
            go = s0.upload(SAMPLE)
            gc.collect()
            gc.set_threshold(5, 1, 1)
            for _ in range(600):
                b = ab.DeviceBuffer(d1, 64)
                b.cycle = b  # type: ignore[attr-defined]  # only the cyclic collector frees it
                del b
                if s0.backward(go, *ARGS).download().ravel().tolist() != EXPECTED:
                    wrong += 1
                if foreign.context() != mine:
                    moved += 1
                    foreign.ok(foreign.rt.aclrtSetCurrentContext(mine))
            gc.set_threshold(*old)
            gc.collect()
    finally:
        gc.set_threshold(*old)
        foreign.ok(foreign.rt.aclrtResetDevice(0))
    assert (moved, wrong) == (0, 0)


def test_a_release_while_the_guard_switches_reads_the_runtime(foreign: Foreign,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A finalizer that runs between the switch and the guard's own bookkeeping (here: right after
    aclrtSetCurrentContext) must not trust the enclosing guard's context: it frees on its device."""
    from acl_bindings import runtime

    with ab.Device(0) as d0, ab.Device(1) as d1:
        held = [ab.DeviceBuffer(d1, 64)]
        live = sim.live_handles()["device_buffer"]
        real = runtime._set_current

        def set_current(ctx: int) -> None:
            real(ctx)
            if ctx == d0.context and held:
                held.pop()  # the last reference: its finalizer frees it now, on this thread

        monkeypatch.setattr(runtime, "_set_current", set_current)
        with d1.active(), d0.active():  # a device-0 call inside a device-1 one
            pass
        assert not held and sim.live_handles()["device_buffer"] == live - 1  # freed, not refused


def test_on_a_thread_with_no_context_the_sessions_stays_current(foreign: Foreign) -> None:
    """As documented: with none current before, there is none to go back to (aclrtSetCurrentContext
    refuses NULL), so the session's context is current after its calls."""
    import threading

    seen: dict[str, Any] = {}

    def work() -> None:
        seen["before"] = foreign.context()
        with Session(1) as s:
            seen["result"] = s.backward(SAMPLE, *ARGS).ravel().tolist()
            seen["after"] = foreign.context()
            seen["ours"] = s.device.context

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["before"] == 0 and seen["result"] == EXPECTED
    assert seen["after"] == seen["ours"]
