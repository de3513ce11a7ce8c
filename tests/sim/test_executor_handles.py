"""Phase 1 keeps the caller's objects (cann-abi.md §8.5).

The executor phase 1 builds refers to the caller's aclTensor and aclIntArray handles, not to
copies: on the device, destroying one before the executor is consumed or destroyed is a use
after free.  The simulator's phase 2 reports it with its own code (``sim.STALE_HANDLE``,
outside CANN's code space) and a message naming the handle; the binding never does it.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from acl_bindings import AclError, DeviceBuffer, Format, IntArray, Tensor, sim
from acl_bindings.engine import run_once
from upsample3d_grad import Session, reference
from upsample3d_grad.op import (
    OP,
    aclnnUpsampleNearestExact3dBackward,
    aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize,
)
from upsample3d_grad.torch_interop import TorchDescription

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT3, IN5 = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


@pytest.fixture
def no_op_cache():
    """Real executors only: the op cache answers repeated shapes with wrappers (tested in test_op_cache)."""
    previous = sim.set_op_cache(False)
    yield
    sim.set_op_cache(previous)


class _Call:
    """The sample's tensors and arrays over device memory, phase 1 done."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.go_buf = DeviceBuffer(session.device, SAMPLE.nbytes)
        self.go_buf.upload(SAMPLE)
        self.gi_buf = DeviceBuffer(session.device, 64)
        self.go = Tensor(SAMPLE.shape, np.float32, self.go_buf, format=Format.NCDHW)
        self.gi = Tensor((2, 2, 1, 1, 1), np.float32, self.gi_buf, format=Format.NCDHW)
        self.osz, self.isz = IntArray(OUT3), IntArray(IN5)
        self.size, self.executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
            self.go, self.osz, self.isz, 0.0, 0.0, 0.0, self.gi)
        self.ws = DeviceBuffer(session.device, max(self.size, 1))

    def phase2(self) -> None:
        aclnnUpsampleNearestExact3dBackward(self.ws.ptr, self.size, self.executor, self.session.stream)
        self.session.stream.synchronize()

    def result(self) -> list[float]:
        out = np.zeros(4, np.float32)
        self.gi_buf.download(out)
        return out.tolist()

    def close(self) -> None:
        self.executor.close()
        for obj in (self.go, self.gi, self.osz, self.isz, self.ws, self.go_buf, self.gi_buf):
            obj.close()


@pytest.mark.parametrize("which", ["go", "gi", "osz", "isz"])
def test_a_handle_destroyed_between_the_phases_is_reported(no_leaks, no_op_cache, session: Session,
                                                           which: str) -> None:
    call = _Call(session)
    handle = getattr(call, which)
    handle.close()  # the binding object lets the caller do it: the library must say so
    assert sim.live_handles()["executor"] == 1
    with pytest.raises(AclError) as err:
        call.phase2()
    name = {"go": "gradOut", "gi": "gradInput", "osz": "outputSize", "isz": "inputSize"}[which]
    kind = "aclTensor" if which in ("go", "gi") else "aclIntArray"
    assert err.value.code == sim.STALE_HANDLE
    assert f"{name} ({kind} 0x" in err.value.detail and "destroyed after phase 1" in err.value.detail
    assert sim.live_handles()["executor"] == 0  # a single-use executor is consumed all the same
    call.close()


def test_a_new_handle_at_a_reused_address_is_still_reported(no_leaks, no_op_cache, session: Session) -> None:
    call = _Call(session)
    call.go.close()
    # a fresh tensor of the same size: malloc may well hand back the freed address; it is another tensor
    call.go = Tensor(SAMPLE.shape, np.float32, call.go_buf, format=Format.NCDHW)
    with pytest.raises(AclError) as err:
        call.phase2()
    assert err.value.code == sim.STALE_HANDLE and "gradOut" in err.value.detail
    call.close()


def test_a_repeatable_executor_reports_it_on_every_run_and_survives(no_leaks, no_op_cache,
                                                                    session: Session) -> None:
    call = _Call(session)
    call.executor.make_repeatable()
    call.phase2()
    assert call.result() == EXPECTED
    call.isz.close()
    for _ in range(2):
        with pytest.raises(AclError) as err:
            call.phase2()
        assert err.value.code == sim.STALE_HANDLE and "inputSize" in err.value.detail
    assert sim.live_handles()["executor"] == 1
    call.close()
    assert sim.live_handles()["executor"] == 0


def test_destroying_an_unrun_executor_after_its_tensors_is_fine(no_leaks, no_op_cache, session: Session) -> None:
    call = _Call(session)
    for obj in (call.go, call.gi, call.osz, call.isz):
        obj.close()
    call.close()  # aclDestroyAclOpExecutor: nothing ran, nothing is reported
    assert sim.live_handles()["executor"] == 0


def test_phase2_reads_the_callers_tensor_as_it_is_now(no_leaks, no_op_cache, session: Session) -> None:
    """Not a copy: an address set on the tensor after phase 1 (aclSetRawTensorAddr) is where phase 2 writes."""
    call = _Call(session)
    with DeviceBuffer(session.device, 64) as other:
        other.memset(0)
        nn = ctypes.CDLL(str(sim.LIB64 / "libnnopbase.so"))
        nn.aclSetRawTensorAddr.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
        assert nn.aclSetRawTensorAddr(ctypes.cast(call.gi.handle, ctypes.c_void_p), other.ptr) == 0
        call.phase2()
        out = np.zeros(4, np.float32)
        other.download(out)
        assert out.tolist() == EXPECTED
    call.close()


# --------------------------------------------------------------------------- the binding never does it

def test_the_faithful_api_keeps_its_objects_alive_for_the_executor(no_leaks, no_op_cache, session: Session) -> None:
    """Temporaries passed to phase 1 stay alive with the executor, whatever the garbage collector does."""
    go = session.upload(SAMPLE)
    gi = session.empty((2, 2, 1, 1, 1))
    size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
        Tensor(go.shape, go.dtype, go.buffer, format=Format.NCDHW), IntArray(OUT3), IntArray(IN5), 0.0, 0.0, 0.0,
        Tensor(gi.shape, gi.dtype, gi.buffer, format=Format.NCDHW))
    gc.collect()
    assert sim.live_handles()["tensor"] == 2 and sim.live_handles()["int_array"] == 2  # the temporaries, alive
    with DeviceBuffer(session.device, max(size, 1)) as ws:
        aclnnUpsampleNearestExact3dBackward(ws.ptr, size, executor, session.stream)
        session.stream.synchronize()
    del executor
    gc.collect()
    assert gi.download().ravel().tolist() == EXPECTED
    go.close()
    gi.close()


@pytest.mark.parametrize("op_cache", [True, False], ids=["op-cache", "no-op-cache"])
def test_every_binding_path_keeps_its_objects_until_phase2(no_leaks, op_cache: bool) -> None:
    """Session (plans and one-shot), prepared calls (plan and one-shot) and the torch path, several times each
    (so that the op cache answers the repeats), under an eager garbage collector: never 990101."""
    previous = sim.set_op_cache(op_cache)
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    want = reference.upsample_nearest_exact3d_backward(SAMPLE, OUT3, IN5)
    try:
        for plans in (True, False):
            with Session(0, plans=plans) as s:
                for _ in range(3):
                    np.testing.assert_array_equal(s.backward(SAMPLE, OUT3, IN5), want)
                go, gi = s.upload(SAMPLE), s.empty((2, 2, 1, 1, 1))
                for plan in (True, False):
                    with s.prepare(go, OUT3, IN5, out=gi, plan=plan) as call:
                        for _ in range(3):
                            call()
                            np.testing.assert_array_equal(gi.download(), want)
        torch = pytest.importorskip("torch")
        with Session(0) as s, DeviceBuffer(s.device, SAMPLE.nbytes) as gbuf, DeviceBuffer(s.device, 64) as ibuf, \
                DeviceBuffer(s.device, 1 << 25) as wbuf:
            gbuf.upload(SAMPLE)
            g = torch.frombuffer((ctypes.c_char * gbuf.nbytes).from_address(gbuf.ptr), dtype=torch.float32)
            o = torch.frombuffer((ctypes.c_char * ibuf.nbytes).from_address(ibuf.ptr), dtype=torch.float32)
            for _ in range(3):
                values = (TorchDescription(g.view(2, 2, 2, 2, 2)).arg(Format.NCDHW), OUT3, IN5, 0.0, 0.0, 0.0,
                          TorchDescription(o[:4].view(2, 2, 1, 1, 1)).arg(Format.NCDHW))
                run_once(OP, values, lambda n: wbuf.ptr, lambda: int(s.stream.handle))
                s.stream.synchronize()
                assert o[:4].tolist() == EXPECTED
    finally:
        gc.set_threshold(*thresholds)
        sim.set_op_cache(previous)
