"""Adversarial use: memory that outlives its owner, descriptions bigger than their buffer, outputs whose
elements overlap, strided downloads, closed objects at raw calls, failed closes, the default session
closed under other threads, and bad ``repeat`` values.

The crashes are checked in a subprocess: before the fixes they killed the interpreter.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import upsample3d_grad as ug
from acl_bindings import (
    AclError,
    AclnnParamError,
    ClosedError,
    Device,
    DeviceBuffer,
    HostBuffer,
    IntArray,
    Stream,
    Tensor,
    sim,
)
from upsample3d_grad import DeviceArray, Session
from upsample3d_grad.functional import close_default_session
from upsample3d_grad.op import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize

REPO = Path(__file__).resolve().parents[2]
SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


def _python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    env.update({"ACL_BINDINGS_BACKEND": "sim",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


# --------------------------------------------------------------------------- host buffer views

def test_a_host_buffer_view_keeps_its_memory_alive() -> None:
    proc = _python("""
        import gc
        import numpy as np
        from acl_bindings import Device, HostBuffer
        v = HostBuffer(Device(0), 64 << 20).array(np.float32)
        gc.collect()
        v[:] = 1
        print(float(v[-1]), v.size)
    """)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.split() == ["1.0", str((64 << 20) // 4)]


def test_a_host_buffer_refuses_to_close_while_views_exist(no_leaks: None) -> None:
    device = Device(0)
    host = HostBuffer(device, 256)
    view = host.array(np.float32, (8, 8))
    derived = view[2:4].T  # a view of the view
    del view
    with pytest.raises(BufferError, match="host buffer: 1 numpy view"):
        host.close()
    assert not host.closed
    derived[:] = 2.0  # the memory is still there
    assert float(derived.sum()) == 32.0
    del derived
    host.close()
    assert host.closed
    device.close()


def test_a_dropped_host_buffer_is_freed_with_its_last_view(no_leaks: None) -> None:
    device = Device(0)
    before = sim.live_handles()["host_buffer"]
    view = HostBuffer(device, 128).array(np.uint8)
    gc.collect()
    assert sim.live_handles()["host_buffer"] == before + 1
    del view
    gc.collect()
    assert sim.live_handles()["host_buffer"] == before
    device.close()


# --------------------------------------------------------------------------- device array descriptions

def test_a_device_array_bigger_than_its_buffer_is_refused_not_a_crash() -> None:
    proc = _python("""
        import numpy as np
        from acl_bindings import DeviceBuffer
        from upsample3d_grad import DeviceArray, Session
        s = Session(0)
        try:
            DeviceArray(s, DeviceBuffer(s.device, 16), (1, 1, 1, 1, 4_000_000), np.float32, "NCDHW", (1,) * 5,
                        0).download()
        except ValueError as exc:
            print("refused:", exc)
    """)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.startswith("refused: ") and "16-byte buffer" in proc.stdout, proc.stdout


@pytest.mark.parametrize(("shape", "strides", "offset", "words"), [
    ((1, 1, 1, 1, 5), (5, 5, 5, 5, 1), 0, ("5 float32 elements", "shape", "strides", "offset", "16-byte")),
    ((1, 1, 1, 1, 4), (4, 4, 4, 4, 1), 1, ("offset 1", "16-byte")),
    ((1, 1, 1, 2, 2), (4, 4, 4, 3, 1), 0, ("strides (4, 4, 4, 3, 1)", "16-byte")),
    ((1, 1, 1, 1, 2), (1, 1, 1, 1, -1), 0, ("strides", ">= 0", "-1")),
    ((1, 1, 1, 1, 2), (1, 1, 1, 1, 1), -1, ("offset", ">= 0", "-1")),
    ((1, 1, 1, 1, -2), (1, 1, 1, 1, 1), 0, ("shape", ">= 0", "-2")),
    ((1, 1, 1, 1), (1, 1, 1, 1), 0, ("5", "shape")),
    ((1, 1, 1, 1, 2), (1, 1, 1, 1), 0, ("strides", "5")),
])
def test_device_array_descriptions_are_checked_against_the_buffer(
        no_leaks: None, session: Session, shape: tuple, strides: tuple, offset: int, words: tuple) -> None:
    buf = DeviceBuffer(session.device, 16)
    with pytest.raises(ValueError) as info:
        DeviceArray(session, buf, shape, np.dtype(np.float32), "NCDHW", strides, offset)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    buf.close()


def test_a_device_array_that_fits_exactly_is_accepted(no_leaks: None, session: Session) -> None:
    with DeviceBuffer(session.device, 16) as buf:
        buf.upload(np.arange(4, dtype=np.float32))
        arr = DeviceArray(session, buf, (1, 1, 1, 1, 2), np.dtype(np.float32), "NCDHW", (2, 2, 2, 2, 2), 1)
        assert arr.download().ravel().tolist() == [1.0, 3.0]
        arr.tensor.close()


# --------------------------------------------------------------------------- download into strided out

def test_download_into_fortran_order_and_transposed_out(no_leaks: None, session: Session) -> None:
    data = np.arange(2 * 3 * 4 * 5 * 6, dtype=np.float32).reshape(2, 3, 4, 5, 6)
    arr = session.upload(data)
    fortran = np.asfortranarray(np.zeros_like(data))
    assert arr.download(fortran) is fortran
    np.testing.assert_array_equal(fortran, data)
    transposed = np.zeros(data.shape[::-1], np.float32).T
    assert not transposed.flags.c_contiguous
    arr.download(transposed)
    np.testing.assert_array_equal(transposed, data)
    gapped = np.zeros((2, 3, 4, 5, 12), np.float32)[..., ::2]
    arr.download(gapped)
    np.testing.assert_array_equal(gapped, data)
    arr.close()


def test_download_of_a_strided_device_array_into_contiguous_out(no_leaks: None, session: Session) -> None:
    base = np.arange(2 * 2 * 3 * 4 * 10, dtype=np.float32).reshape(2, 2, 3, 4, 10)
    view = base[:, :, 1:, :, 1::3]  # an offset and gaps
    arr = session.upload(view)
    assert arr.strides != tuple(s // 4 for s in np.ascontiguousarray(view).strides) or arr.offset
    out = np.zeros(view.shape, np.float32)
    arr.download(out)
    np.testing.assert_array_equal(out, view)
    np.testing.assert_array_equal(arr.download(), view)
    arr.close()


def test_download_refuses_an_out_whose_elements_overlap(no_leaks: None, session: Session) -> None:
    arr = session.upload(SAMPLE)
    out = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), SAMPLE.shape, (0,) * 5, writeable=True)
    with pytest.raises(ValueError, match="stride"):
        arr.download(out)
    arr.close()


# --------------------------------------------------------------------------- outputs whose elements overlap

def _zero_strided(shape: tuple) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape, (0,) * len(shape), writeable=True)


def test_a_numpy_out_whose_elements_overlap_is_refused(no_leaks: None, session: Session) -> None:
    out = _zero_strided(IN_SIZE)
    with pytest.raises(AclnnParamError) as info:
        session.backward(SAMPLE, OUT_SIZE, IN_SIZE, out=out)
    assert info.value.code == 161002
    assert "gradInput" in str(info.value) and "stride 0" in str(info.value) and "overlap" in str(info.value)
    # partly overlapping (a stride smaller than the extent of the dims below it)
    base = np.zeros(16, np.float32)
    partial = np.lib.stride_tricks.as_strided(base, IN_SIZE, (4, 4, 4, 4, 4), writeable=True)
    with pytest.raises(AclnnParamError, match="overlap"):
        session.backward(SAMPLE, OUT_SIZE, IN_SIZE, out=partial)
    assert session.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED


def test_a_device_out_whose_elements_overlap_is_refused(no_leaks: None, session: Session) -> None:
    go = session.upload(SAMPLE)
    buf = DeviceBuffer(session.device, 4)
    out = DeviceArray(session, buf, IN_SIZE, np.dtype(np.float32), "NCDHW", (0,) * 5, 0)
    session._arrays.add(out)
    for call in (lambda: session.backward(go, OUT_SIZE, IN_SIZE, out=out),
                 lambda: session.prepare(go, OUT_SIZE, IN_SIZE, out=out),
                 lambda: session.timed_backward(go, OUT_SIZE, IN_SIZE, out=out)):
        with pytest.raises(AclnnParamError, match="stride 0") as info:
            call()
        assert info.value.code == 161002
    # a broadcast (zero-stride) gradOut is fine: it is only read
    go_b = DeviceArray(session, DeviceBuffer(session.device, 4), (2, 2, 2, 2, 2), np.dtype(np.float32), "NCDHW",
                       (0,) * 5, 0)
    session._arrays.add(go_b)
    go_b.buffer.upload(np.ones(1, np.float32))
    assert session.backward(go_b, OUT_SIZE, IN_SIZE).download().ravel().tolist() == [8.0] * 4
    for a in (go, out, go_b):
        a.close()


def test_sample_with_broadcast_numpy_input_is_still_right(session: Session) -> None:
    g = np.broadcast_to(np.float32(1.0), SAMPLE.shape)
    assert session.backward(g, OUT_SIZE, IN_SIZE).ravel().tolist() == [8.0] * 4


# --------------------------------------------------------------------------- closed objects at raw calls

def test_closed_objects_at_raw_calls_raise_closed_error(no_leaks: None, session: Session) -> None:
    device = session.device
    stream = Stream(device)
    stream.close()
    with DeviceBuffer(device, 64) as buf:
        with pytest.raises(ClosedError, match="stream"):
            buf.upload(np.zeros(4, np.float32), stream=stream)
        with pytest.raises(ClosedError, match="stream"):
            buf.memset(0, stream=stream)
    go = Tensor((2, 2, 2, 2, 2), np.float32, address=0x1000)
    gi = Tensor((2, 2, 1, 1, 1), np.float32, address=0x2000)
    osz, isz = IntArray(OUT_SIZE), IntArray(IN_SIZE)
    for closed in (go, osz):
        closed.close()
        with pytest.raises(ClosedError, match="closed"):
            aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(go, osz, isz, 0.0, 0.0, 0.0, gi)
    for obj in (gi, isz):
        obj.close()


@pytest.mark.parametrize("plans", [True, False])
def test_a_half_closed_device_array_raises_closed_error(no_leaks: None, plans: bool) -> None:
    with Session(0, plans=plans) as s:
        arr = s.upload(SAMPLE)
        tensor = arr.tensor  # made on first use
        sim.set_fault("aclDestroyTensor:1:107000")
        try:
            with pytest.raises(AclError):
                arr.close()  # the memory went back to the session's cache, the aclTensor is still owned
        finally:
            sim.set_fault(None)
        assert not tensor.closed and arr.buffer.closed
        with pytest.raises(ClosedError, match="device array"):
            s.backward(arr, OUT_SIZE, IN_SIZE)
        with pytest.raises(ClosedError, match="device array"):
            arr.download()
        arr.close()
        assert arr.closed


# --------------------------------------------------------------------------- failed PreparedCall.close()

@pytest.mark.parametrize("plan", [True, False])
# (its workspace goes back to the session's allocator: its close frees no device memory itself)
@pytest.mark.parametrize("fault", ["aclrtSynchronizeStream:1:507899", "aclDestroyTensor:1:161002"])
def test_a_failed_prepared_call_close_is_retried(no_leaks: None, plan: bool, fault: str) -> None:
    before = sim.live_handles()  # (an interrupt test earlier in the process may have lost a handle at the
    with Session(0) as s:        # documented instant: counted from here)
        go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
        call = s.prepare(go, OUT_SIZE, IN_SIZE, out=gi, plan=plan, sync=False)  # (queued: close() must sync)
        call()
        sim.set_fault(fault)
        try:
            with pytest.raises(AclError):
                call.close()
        finally:
            sim.set_fault(None)
        assert call.closed
        with pytest.raises(ClosedError):
            call()
        call.close()  # retried until it succeeds
        live = sim.live_handles()
        assert live["executor"] == before["executor"] and live["int_array"] == before["int_array"]
        assert s.backward(go, OUT_SIZE, IN_SIZE, out=gi).download().ravel().tolist() == EXPECTED


@pytest.mark.parametrize("fault", ["aclrtSynchronizeStream:1:507899", "aclDestroyTensor:1:161002",
                                   "aclDestroyAclOpExecutor:1:161002"])
def test_session_close_releases_what_a_failed_prepared_call_still_owns(fault: str) -> None:
    gc.collect()
    before = sim.live_handles()
    s = Session(0)
    go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
    call = s.prepare(go, OUT_SIZE, IN_SIZE, out=gi, sync=False)  # (queued: close() must sync)
    call()
    sim.set_fault(fault)
    try:
        with pytest.raises(AclError):
            call.close()
    finally:
        sim.set_fault(None)
    s.close()
    assert s.device.closed
    # no garbage collection: the session itself released everything (the call is still referenced)
    assert sim.live_handles() == before
    del call, go, gi


# --------------------------------------------------------------------------- the default session and threads

def test_close_default_session_from_another_thread_never_breaks_module_calls(no_leaks: None) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    results: list[list[float]] = []

    def worker() -> None:
        try:
            for _ in range(60):
                results.append(ug.upsample_nearest_exact3d_backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist())
        except BaseException as exc:  # noqa: B036 - reported below
            errors.append(exc)

    def closer() -> None:
        while not stop.is_set():
            close_default_session()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    killer = threading.Thread(target=closer)
    killer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    killer.join()
    close_default_session()
    assert not errors, errors[:3]
    assert len(results) == 180 and all(r == EXPECTED for r in results)


def test_a_session_returned_by_default_session_is_closed_by_close_default_session() -> None:
    s = ug.default_session()
    close_default_session()
    assert s.closed  # (documented: only the module-level functions get a fresh one)
    assert ug.default_session() is not s
    close_default_session()


# --------------------------------------------------------------------------- timed_backward(repeat=...)

@pytest.mark.parametrize(("repeat", "error"), [(0, ValueError), (-5, ValueError), (2.5, TypeError),
                                               (True, TypeError), ("3", TypeError), (2 ** 40, ValueError)])
def test_timed_backward_validates_repeat(session: Session, repeat: object, error: type) -> None:
    go, gi = session.upload(SAMPLE), session.empty(IN_SIZE)
    with pytest.raises(error, match="repeat") as info:
        session.timed_backward(go, OUT_SIZE, IN_SIZE, out=gi, repeat=repeat)  # type: ignore[arg-type]
    assert repr(repeat) in str(info.value) or str(repeat) in str(info.value)
    assert len(session.timed_backward(go, OUT_SIZE, IN_SIZE, out=gi, repeat=np.int64(2))) == 2


# --------------------------------------------------------------------------- the simulator refuses overlapping outputs

def _phase1_with_gi_strides(session: Session, in_size: tuple, gi_strides: tuple) -> tuple:
    out_size = in_size[2:]
    go_buf = DeviceBuffer(session.device, 4 * int(np.prod(in_size)))
    gi_buf = DeviceBuffer(session.device, 4 * 64)
    go = Tensor(in_size, np.float32, go_buf, format=ug.checks.layout_format("NCDHW"))
    gi = Tensor(in_size, np.float32, gi_buf, strides=gi_strides, format=ug.checks.layout_format("NCDHW"))
    osz, isz = IntArray(out_size), IntArray(in_size)
    objs = (go, gi, osz, isz, go_buf, gi_buf)
    try:
        size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(go, osz, isz, 0.0, 0.0, 0.0, gi)
    except AclError as exc:
        return exc, objs
    executor.close()
    return None, objs


@pytest.mark.parametrize(("in_size", "gi_strides", "refused"), [
    ((2, 2, 1, 1, 1), (0, 0, 0, 0, 0), "stride 0 in dim 0"),
    ((2, 2, 1, 1, 1), (1, 1, 1, 1, 1), "make elements overlap"),
    ((1, 1, 1, 3, 2), (6, 6, 6, 2, 3), None),  # interleaved, yet every element has its own memory
    ((1, 1, 1, 3, 2), (6, 6, 6, 1, 3), None),  # transposed
])
def test_the_simulator_refuses_an_output_whose_elements_overlap(
        no_leaks: None, session: Session, in_size: tuple, gi_strides: tuple, refused: str | None) -> None:
    """Through the faithful API (no host checks): the simulator reports what hardware would get silently wrong."""
    exc, objs = _phase1_with_gi_strides(session, in_size, gi_strides)
    if refused is None:
        assert exc is None, exc
    else:
        assert isinstance(exc, AclError) and exc.code == 161002, exc
        assert "gradInput" in exc.detail and refused in exc.detail, exc.detail
    for obj in objs:
        obj.close()


def test_a_handle_owned_after_its_creation_is_released_once(no_leaks: None, session: Session) -> None:
    """``Resource._own`` (for a handle made already): close() releases it once; the finalizer net too."""
    import ctypes

    from acl_bindings import lib
    from acl_bindings._resource import Resource

    class Raw(Resource):
        _what = "raw buffer"

    def free(ptr: int) -> None:
        with session.device.active():
            lib.aclrtFree(ptr)

    before = sim.live_handles()["device_buffer"]
    owners = []
    for _ in range(2):
        ptr = ctypes.c_void_p()
        with session.device.active():
            lib.aclrtMalloc(ctypes.byref(ptr), 64, 0)
        raw = Raw()
        raw._own(free, ptr.value)
        owners.append(raw)
    assert sim.live_handles()["device_buffer"] == before + 2 and not owners[0].closed
    owners[0].close()
    owners[0].close()
    assert owners[0].closed and sim.live_handles()["device_buffer"] == before + 1
    del owners[1], raw
    gc.collect()
    assert sim.live_handles()["device_buffer"] == before
