"""nnopbase's op cache and repeatable executors (cann-abi.md §8.6), as the simulator models them.

After a one-shot call of a call shape has run, phase 1 of that shape (on the same thread) returns
a cache wrapper instead of an executor: ``aclSetAclOpExecutorRepeatable`` refuses it with 561000,
``aclDestroyAclOpExecutor`` accepts it, and it runs on the addresses its phase 1 saw.  The key is
the call's metadata (shapes, strides, storage shapes, dtypes, offsets, formats, sizes, scales),
never its addresses.  The binding's plans still serve such a shape, and a refusal is neither
remembered forever nor without bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from acl_bindings import AclError, DeviceBuffer, Format, IntArray, Tensor, sim
from upsample3d_grad import Session, reference
from upsample3d_grad.op import (
    aclnnUpsampleNearestExact3dBackward,
    aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize,
)

REPO = Path(__file__).resolve().parents[2]
INNER = 561000
OP_P1 = "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"
OUT3, IN5 = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


def _sample(k: int = 0) -> np.ndarray:
    return (np.arange(1, 33, dtype=np.float32) + k).reshape(2, 2, 2, 2, 2)


class _Raw:
    """Tensors and arrays of the sample over fresh device buffers (storage dims as given)."""

    def __init__(self, session: Session, k: int = 0, storage: Optional[tuple[int, ...]] = None,
                 scales: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
        self.session = session
        self.host = _sample(k)
        self.go_buf = DeviceBuffer(session.device, self.host.nbytes)
        self.go_buf.upload(self.host)
        self.gi_buf = DeviceBuffer(session.device, 64)
        self.go = Tensor(self.host.shape, np.float32, self.go_buf, format=Format.NCDHW, storage_dims=storage)
        self.gi = Tensor((2, 2, 1, 1, 1), np.float32, self.gi_buf, format=Format.NCDHW)
        self.osz, self.isz = IntArray(OUT3), IntArray(IN5)
        self.scales = scales
        self.ws = DeviceBuffer(session.device, 1 << 25)  # (phase 1 asks for 16 MiB and more)

    def phase1(self) -> tuple[int, Any]:
        return aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(self.go, self.osz, self.isz, *self.scales,
                                                                   self.gi)

    def run(self, size: int, executor: Any) -> list[float]:
        aclnnUpsampleNearestExact3dBackward(self.ws.ptr, size, executor, self.session.stream)
        self.session.stream.synchronize()
        out = np.zeros(4, np.float32)
        self.gi_buf.download(out)
        return out.tolist()

    def want(self) -> list[float]:
        return reference.upsample_nearest_exact3d_backward(self.host, OUT3, IN5).ravel().tolist()

    def one_shot(self) -> list[float]:
        return self.run(*self.phase1())

    def close(self) -> None:
        for obj in (self.go, self.gi, self.osz, self.isz, self.ws, self.go_buf, self.gi_buf):
            obj.close()


@pytest.fixture
def op_cache():
    """The op cache on, starting from a thread whose cache has seen nothing of these tests' shapes."""
    previous = sim.set_op_cache(True)
    yield
    sim.set_op_cache(previous)


def _in_new_thread(fn: Any) -> Any:
    """Run *fn* on a fresh thread (a fresh op cache, as nnopbase's is thread_local) and return its result."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _is_wrapper(executor: Any) -> bool:
    """Whether phase 1 answered with a cache wrapper (aclSetAclOpExecutorRepeatable: 561000)."""
    try:
        executor.make_repeatable()
    except AclError as exc:
        assert exc.code == INNER and "op-cache wrapper" in exc.detail, exc
        return True
    return False


# --------------------------------------------------------------------------- the simulator's model

def test_after_a_one_shot_run_phase1_returns_a_wrapper(no_leaks, op_cache, session: Session) -> None:
    def scenario() -> None:
        raw = _Raw(session)
        size, first = raw.phase1()
        assert not _is_wrapper(first)  # a new shape: a real executor (now repeatable)
        first.close()
        assert raw.one_shot() == EXPECTED  # a one-shot run makes the entry usable
        size, wrapper = raw.phase1()
        assert _is_wrapper(wrapper)
        wrapper.close()  # aclDestroyAclOpExecutor accepts a wrapper
        size, wrapper = raw.phase1()
        assert size > 0 and raw.run(size, wrapper) == EXPECTED  # and a wrapper runs, once
        assert sim.live_handles()["executor"] == 0
        raw.close()

    _in_new_thread(scenario)


def test_only_a_run_one_shot_executor_fills_the_cache(no_leaks, op_cache, session: Session) -> None:
    def scenario() -> None:
        raw = _Raw(session)
        for _ in range(2):  # phase 1, destroyed unrun: nothing to cache
            size, ex = raw.phase1()
            ex.close()
        size, ex = raw.phase1()
        with pytest.raises(AclError):  # a failed phase 2 (no workspace): the entry is invalid
            aclnnUpsampleNearestExact3dBackward(None, size, ex, session.stream)
        size, ex = raw.phase1()
        assert not _is_wrapper(ex)  # a repeatable executor is never cached
        assert raw.run(size, ex) == EXPECTED and raw.run(size, ex) == EXPECTED
        ex.close()
        size, ex = raw.phase1()
        assert not _is_wrapper(ex)
        ex.close()
        raw.close()

    _in_new_thread(scenario)


def test_the_key_is_metadata_not_addresses(no_leaks, op_cache, session: Session) -> None:
    def scenario() -> None:
        first = _Raw(session)
        assert first.one_shot() == EXPECTED
        other = _Raw(session, k=5)  # other buffers and values, the same metadata
        size, wrapper = other.phase1()
        # the wrapper runs on the addresses its own phase 1 saw: the new buffers
        assert other.run(size, wrapper) == other.want() != EXPECTED
        for kwargs in ({"storage": (1, 32)}, {"scales": (2.0, 2.0, 2.0)}):  # another key: a real executor
            raw = _Raw(session, **kwargs)
            size, ex = raw.phase1()
            assert not _is_wrapper(ex)
            ex.close()
            raw.close()
        first.close()
        other.close()

    _in_new_thread(scenario)


def test_each_thread_has_its_own_cache(no_leaks, op_cache, session: Session) -> None:
    raw = _Raw(session)

    def one_shot() -> list[float]:
        session.device.activate()
        return raw.one_shot()

    assert _in_new_thread(one_shot) == EXPECTED

    def fresh() -> bool:
        session.device.activate()
        size, ex = raw.phase1()
        wrapped = _is_wrapper(ex)
        ex.close()
        return wrapped

    assert _in_new_thread(fresh) is False
    raw.close()


def test_a_wrapper_ignores_address_updates_and_says_so(no_leaks, op_cache, session: Session) -> None:
    def scenario() -> None:
        raw = _Raw(session)
        assert raw.one_shot() == EXPECTED
        size, wrapper = raw.phase1()
        with DeviceBuffer(session.device, 64) as other:
            with pytest.raises(AclError) as err:
                wrapper.set_output_address(0, raw.gi, other.ptr)
            assert err.value.code == sim.STALE_HANDLE and "op-cache wrapper" in err.value.detail
            with pytest.raises(AclError) as err:  # and its phase 2 will not run on a moved tensor
                raw.run(size, wrapper)
            assert err.value.code == sim.STALE_HANDLE and "gradInput" in err.value.detail
        assert sim.live_handles()["executor"] == 0
        raw.close()

    _in_new_thread(scenario)


def test_the_switch_turns_it_off(no_leaks, session: Session) -> None:
    previous = sim.set_op_cache(False)
    try:
        def scenario() -> bool:
            raw = _Raw(session)
            raw.one_shot()
            size, ex = raw.phase1()
            wrapped = _is_wrapper(ex)
            ex.close()
            raw.close()
            return wrapped

        assert _in_new_thread(scenario) is False
        assert sim.set_op_cache(True) is False and sim.set_op_cache(False) is True
    finally:
        sim.set_op_cache(previous)


@pytest.mark.parametrize("env", [{"CANN_SIM_OP_CACHE": "0"}, {"DISABLE_L2_CACHE": "1"}, {}],
                         ids=["CANN_SIM_OP_CACHE=0", "DISABLE_L2_CACHE", "default"])
def test_the_environment_switch(env: dict[str, str]) -> None:
    code = """
import numpy as np
from upsample3d_grad import Session
from upsample3d_grad.op import OP
import acl_bindings as ab
g = np.ones((1, 1, 2, 2, 2), np.float32)
with Session(0, plans=False) as s:
    go, gi = s.upload(g), s.empty((1, 1, 1, 1, 1))
    s.backward(go, (2, 2, 2), (1, 1, 1, 1, 1), out=gi)
    with ab.IntArray((2, 2, 2)) as a, ab.IntArray((1, 1, 1, 1, 1)) as b:
        size, ex = OP.get_workspace_size(go.tensor, a, b, 0.0, 0.0, 0.0, gi.tensor)
        try:
            ex.make_repeatable()
            print("executor")
        except ab.AclError as e:
            print("wrapper", e.code)
        ex.close()
"""
    base = {k: v for k, v in os.environ.items() if k not in ("CANN_SIM_OP_CACHE", "DISABLE_L2_CACHE")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**base, **env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == (["wrapper", str(INNER)] if not env else ["executor"])


# --------------------------------------------------------------------------- the binding

def test_session_plans_serve_a_shape_first_run_one_shot(no_leaks, op_cache) -> None:
    def scenario() -> None:
        with Session(0, plans=False) as one_shot, Session(0) as with_plans:
            go = one_shot.upload(_sample())
            for _ in range(2):
                one_shot.backward(go, OUT3, IN5)
                assert one_shot.last_path == "one-shot"
            for k in range(3):
                got = with_plans.backward(_sample(k), OUT3, IN5)
                assert with_plans.last_path == "plan", with_plans.plans.last_refusal
                np.testing.assert_array_equal(got, reference.upsample_nearest_exact3d_backward(_sample(k), OUT3,
                                                                                                IN5))
            assert len(with_plans.plans) == 1 and with_plans.plans.last_refusal is None

    _in_new_thread(scenario)


def test_prepared_plan_after_one_shot_calls(no_leaks, op_cache) -> None:
    def scenario() -> None:
        with Session(0) as s:
            go, gi = s.upload(_sample()), s.empty((2, 2, 1, 1, 1))
            with s.prepare(go, OUT3, IN5, out=gi, plan=False) as call:
                call()
                call()
            with s.prepare(go, OUT3, IN5, out=gi) as call:
                assert call.plan and call.fallback is None
                call()
            assert gi.download().ravel().tolist() == EXPECTED

    _in_new_thread(scenario)


def test_a_refusal_is_retried_later(no_leaks) -> None:
    previous = sim.set_repeatable(False)
    try:
        with Session(0) as s:
            go = s.upload(_sample())
            asked = sim.call_count("aclSetAclOpExecutorRepeatable")
            s.backward(go, OUT3, IN5)
            assert s.last_path == "one-shot" and "cannot be made repeatable" in (s.plans.last_refusal or "")
            assert len(s.plans) == 1  # the shape's kept call, one-shot
            for _ in range(s.plans.retry_after - 2):  # remembered for a while: not asked again
                out = s.backward(go, OUT3, IN5)
                assert s.last_path == "one-shot"
            assert out.download().ravel().tolist() == EXPECTED
            assert sim.call_count("aclSetAclOpExecutorRepeatable") - asked == 1
            s.backward(go, OUT3, IN5)  # the retry_after-th one-shot run: asked again after it, refused again
            assert sim.call_count("aclSetAclOpExecutorRepeatable") - asked == 2 and s.last_path == "one-shot"
            sim.set_repeatable(True)  # e.g. another release of the library
            for _ in range(s.plans.retry_after):
                s.backward(go, OUT3, IN5)
            assert s.last_path == "plan" and len(s.plans) == 1  # the same kept call, a plan now
            assert sim.call_count("aclSetAclOpExecutorRepeatable") - asked == 3
            assert s.backward(go, OUT3, IN5).download().ravel().tolist() == EXPECTED
    finally:
        sim.set_repeatable(previous)


def test_refused_shapes_are_kept_in_bounded_memory(no_leaks) -> None:
    previous = sim.set_repeatable(False)
    try:
        with Session(0) as s:
            go = s.upload(_sample())
            gi = s.empty((2, 2, 1, 1, 1))
            calls = 3 * s.plans.capacity
            for k in range(calls):  # every call another key (its scales), every plan refused
                scale = 2.0 + k * 1e-6
                s.backward(go, OUT3, IN5, scale, scale, scale, out=gi, strict=False)
                assert s.last_path == "one-shot"
            assert len(s.plans) == s.plans.capacity < calls  # one-shot calls, evicted as any
            assert gi.download().ravel().tolist() == EXPECTED
    finally:
        sim.set_repeatable(previous)


def test_a_prepared_call_asks_again_after_a_refusal(no_leaks) -> None:
    previous = sim.set_repeatable(False)
    try:
        with Session(0) as s:
            go, gi = s.upload(_sample()), s.empty((2, 2, 1, 1, 1))
            call = s.prepare(go, OUT3, IN5, out=gi)
            assert not call.plan and "cannot be made repeatable" in (call.fallback or "")
            asked = sim.call_count("aclSetAclOpExecutorRepeatable")
            for _ in range(call.retry_after - 1):
                call()
            assert sim.call_count("aclSetAclOpExecutorRepeatable") == asked  # not asked on every call
            call()  # refused again: still one-shot, and it says why
            assert sim.call_count("aclSetAclOpExecutorRepeatable") == asked + 1 and not call.plan
            assert gi.download().ravel().tolist() == EXPECTED
            sim.set_repeatable(True)
            for _ in range(call.retry_after):
                call()
            assert call.plan and call.fallback is None
            phase1 = sim.call_count(OP_P1)
            gi.buffer.memset(0)
            other = s.upload(_sample(3))
            call(other)  # the plan now: phase 2 only, pointed at the new input
            assert sim.call_count(OP_P1) == phase1
            assert gi.download().ravel().tolist() == reference.upsample_nearest_exact3d_backward(
                _sample(3), OUT3, IN5).ravel().tolist()
            call.close()
    finally:
        sim.set_repeatable(previous)
