"""acl_bindings objects against the simulator: every runtime call, error path and lifecycle rule."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import threading
import time
import weakref

import ml_dtypes
import numpy as np
import pytest

import acl_bindings as ab
from acl_bindings import sim
from acl_bindings._lib import lib


@pytest.fixture
def device(no_leaks: None):
    with ab.Device(0) as dev:
        yield dev


def test_init_once_and_device_info(device: ab.Device) -> None:
    ab.ensure_initialized()
    ab.ensure_initialized()
    assert sim.call_count("aclInit") == 1
    assert ab.device_count() == 2
    assert ab.soc_name() == "CANN-Simulator"
    assert ab.cann_version()
    assert ab.acl_version() == (1, 17, 0)
    free, total = device.mem_info()
    assert 0 < free <= total


def test_buffers_round_trip(device: ab.Device) -> None:
    data = np.arange(256, dtype=np.float32)
    with ab.DeviceBuffer(device, data.nbytes) as a, ab.DeviceBuffer(device, data.nbytes) as b:
        a.upload(data)
        b.copy_from(a)
        out = b.download(np.empty_like(data))
        assert (out == data).all()
        b.memset(0)
        assert (b.download(np.empty_like(data)) == 0).all()
        with pytest.raises(ValueError, match="outside"):
            a.upload(np.zeros(300, np.float32))
        assert "DeviceBuffer 1024 bytes" in repr(a)


def test_async_copies_and_memset_on_a_stream(device: ab.Device) -> None:
    data = np.arange(64, dtype=np.int64)
    with ab.Stream(device) as stream, ab.DeviceBuffer(device, data.nbytes) as buf:
        buf.upload(data, stream=stream)
        stream.synchronize()
        assert (buf.download(np.empty_like(data)) == data).all()
        buf.memset(0, stream=stream)
        stream.synchronize(timeout_ms=1000)
        assert (buf.download(np.empty_like(data)) == 0).all()


def test_pinned_host_buffer(device: ab.Device) -> None:
    with ab.HostBuffer(device, 1024) as host:
        view = host.array(np.float32, (16, 16))
        view[:] = 3.0
        with ab.DeviceBuffer(device, 1024) as dev:
            dev.upload(view)
            assert (dev.download(np.empty((16, 16), np.float32)) == 3.0).all()
        del view  # close() refuses while views of the memory exist
    assert sim.live_handles()["host_buffer"] == 0


def test_bad_sizes_are_value_errors(device: ab.Device) -> None:
    for bad in (0, -1, 1.5, "8", True):
        with pytest.raises(ValueError):
            ab.DeviceBuffer(device, bad)  # type: ignore[arg-type]


def test_allocation_failure_is_memory_error(device: ab.Device) -> None:
    with pytest.raises(ab.AclMemoryError) as info:
        ab.DeviceBuffer(device, 1 << 50)
    err = info.value
    assert isinstance(err, MemoryError) and err.code == 207001 and err.func == "aclrtMalloc"
    assert err.detail  # the simulator's recent-error message, read once


def test_recent_message_is_read_once(device: ab.Device) -> None:
    with pytest.raises(ab.AclError) as info:
        lib.aclrtFree(0x1234)
    assert "aclrtFree" in info.value.detail
    assert ab.recent_error_message() == ""  # cleared by the read in the check


def test_errors_never_cross_threads(device: ab.Device) -> None:
    results: dict[int, str] = {}
    barrier = threading.Barrier(8)

    def worker(k: int) -> None:
        device.activate()
        barrier.wait()
        try:
            lib.aclrtFree(0x1000 + 16 * k)
        except ab.AclError as exc:
            results[k] = exc.detail

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    for k, detail in results.items():
        assert hex(0x1000 + 16 * k) in detail, (k, detail)


def test_thread_without_context_gets_107002_then_activation_fixes_it(device: ab.Device) -> None:
    seen: list[object] = []

    def raw_call() -> None:
        ptr = ctypes.c_void_p()
        try:
            lib.aclrtMalloc(ctypes.byref(ptr), 64, 0)
            seen.append("no error")
        except ab.AclError as exc:
            seen.append(exc.code)

    t = threading.Thread(target=raw_call)
    t.start()
    t.join()
    assert seen == [107002]

    def via_objects() -> None:
        with ab.DeviceBuffer(device, 64) as buf:  # activates the device's context on this thread
            seen.append(buf.nbytes)

    t = threading.Thread(target=via_objects)
    t.start()
    t.join()
    assert seen[-1] == 64


def test_events_time_device_work(device: ab.Device) -> None:
    from upsample3d_grad import Session

    with Session(0) as s:
        g = s.upload(np.ones((1, 1, 4, 4, 4), np.float32))
        out = s.empty((1, 1, 2, 2, 2))
        previous = sim.set_delay(5)
        try:
            times = s.timed_backward(g, (4, 4, 4), (1, 1, 2, 2, 2), out=out, repeat=2)
        finally:
            sim.set_delay(previous)
        assert len(times) == 2 and all(t >= 4.0 for t in times), times
        g.close()
        out.close()


def test_tensor_and_int_array(device: ab.Device) -> None:
    with ab.DeviceBuffer(device, 4 * 24) as buf:
        t = ab.Tensor((2, 3, 4), np.float32, buf, format=ab.Format.ND)
        assert t.strides == (12, 4, 1) and t.dtype == np.float32
        t2 = ab.Tensor((2, 3), ml_dtypes.bfloat16, buf, strides=(1, 2), offset=1)
        assert t2.acl_dtype == ab.DataType.BF16
        arr = ab.IntArray([1, 2, 3])
        assert len(arr) == 3 and "IntArray [1, 2, 3]" in repr(arr)
        for obj in (t, t2, arr):
            obj.close()
            obj.close()  # idempotent
        with pytest.raises(ab.ClosedError, match="tensor is closed"):
            lib.aclDestroyTensor(t)  # use after close is a clear error, never a crash
    with pytest.raises(TypeError):
        ab.IntArray([1.5])
    with pytest.raises(TypeError):
        ab.Tensor((2,), np.float64, address=0)


def test_use_after_close_is_a_clear_error(device: ab.Device) -> None:
    stream = ab.Stream(device)
    stream.close()
    with pytest.raises(ab.ClosedError):
        stream.synchronize()
    buf = ab.DeviceBuffer(device, 64)
    buf.close()
    with pytest.raises(ab.ClosedError):
        buf.upload(np.zeros(4, np.float32))
    ev = ab.Event(device)
    ev.close()
    with pytest.raises(ab.ClosedError):
        ev.synchronize()
    assert (stream.handle, buf.ptr, ev.handle) == (0, 0, 0)  # a released handle reads 0


def test_garbage_collection_releases_handles(no_leaks: None) -> None:
    dev = ab.Device(0)
    stream = ab.Stream(dev)
    buf = ab.DeviceBuffer(dev, 128)
    tensor = ab.Tensor((32,), np.float32, buf)
    refs = [weakref.ref(o) for o in (dev, stream, buf, tensor)]
    del dev, stream, buf  # the tensor keeps the buffer, the buffer keeps the device
    gc.collect()
    assert all(r() is not None for r in refs[:3:2])
    del tensor
    gc.collect()
    assert all(r() is None for r in refs)


def test_objects_made_on_one_thread_work_on_another(no_leaks: None) -> None:
    made: dict[str, object] = {}

    def make() -> None:
        made["dev"] = dev = ab.Device(1)
        made["stream"] = ab.Stream(dev)
        made["buf"] = ab.DeviceBuffer(dev, 64)

    t = threading.Thread(target=make)
    t.start()
    t.join()
    buf, stream, dev = made["buf"], made["stream"], made["dev"]
    buf.upload(np.arange(16, dtype=np.float32), stream=stream)  # type: ignore[union-attr]
    stream.synchronize()  # type: ignore[union-attr]
    assert (buf.download(np.empty(16, np.float32)) == np.arange(16)).all()  # type: ignore[union-attr]
    for obj in (buf, stream, dev):
        obj.close()  # type: ignore[union-attr]


def test_repeatable_executor_with_address_updates(no_leaks: None) -> None:
    from upsample3d_grad import Session
    from upsample3d_grad.op import OP

    with Session(0) as s:
        a = s.upload(np.ones((1, 1, 2, 2, 2), np.float32))
        b = s.upload(np.full((1, 1, 2, 2, 2), 2.0, np.float32))
        out = s.empty((1, 1, 1, 1, 1))
        with ab.IntArray([2, 2, 2]) as osz, ab.IntArray([1, 1, 1, 1, 1]) as isz:
            size, ex = OP.get_workspace_size(a.tensor, osz, isz, 0.0, 0.0, 0.0, out.tensor)
            ex.make_repeatable()
            ws = s.workspace.reserve(size)
            OP.execute(ws, size, ex, s.stream)
            assert out.download().item() == 8.0
            ex.set_input_address(0, a.tensor, b.buffer.ptr)
            OP.execute(ws, size, ex, s.stream)
            assert out.download().item() == 16.0
            assert ex.runs == 2 and not ex.closed
            ex.close()
        for arr in (a, b, out):
            arr.close()


def test_single_use_executor_cannot_run_twice(no_leaks: None) -> None:
    from upsample3d_grad import Session
    from upsample3d_grad.op import OP

    with Session(0) as s:
        a = s.upload(np.ones((1, 1, 2, 2, 2), np.float32))
        out = s.empty((1, 1, 1, 1, 1))
        with ab.IntArray([2, 2, 2]) as osz, ab.IntArray([1, 1, 1, 1, 1]) as isz:
            size, ex = OP.get_workspace_size(a.tensor, osz, isz, 0.0, 0.0, 0.0, out.tensor)
            ws = s.workspace.reserve(size)
            OP.execute(ws, size, ex, s.stream)
            with pytest.raises(ab.ClosedError):
                OP.execute(ws, size, ex, s.stream)
        s.synchronize()
        a.close()
        out.close()


def test_exit_with_live_objects_is_quiet_and_finalizes_once(tmp_path) -> None:
    report = tmp_path / "report.json"
    code = ("import numpy as np, upsample3d_grad as u, acl_bindings as ab\n"
            "s = u.Session(0); d = ab.Device(1); b = ab.DeviceBuffer(d, 64)\n"
            "g = s.upload(np.ones((1,1,2,2,2), np.float32))\n"
            "print(u.upsample_nearest_exact3d_backward(np.ones((1,1,2,2,2),np.float32),(2,2,2),(1,1,1,1,1)).item())\n")
    import json
    import os

    env = dict(os.environ, ACL_BINDINGS_BACKEND="sim", CANN_SIM_REPORT=str(report))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "8.0"
    assert proc.stderr == ""
    data = json.loads(report.read_text())
    assert data["aclInit"] == 1 and data["aclFinalizeReference"] == 1 and data["aclFinalize"] == 0, data
    assert data["initialized_at_exit"] is False


def test_fork_child_gets_a_clear_error(device: ab.Device) -> None:
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not touch the parent's handles
        os.close(r)
        try:
            ab.DeviceBuffer(device, 64)
            msg = b"no error"
        except ab.ProcessForkedError as exc:
            msg = str(exc).encode()[:200]
        except BaseException as exc:  # report anything else to the parent
            msg = repr(exc).encode()[:200]
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        msg = fh.read().decode()
    os.waitpid(pid, 0)
    assert "forked" in msg and "spawn" in msg, msg


def test_sync_timeout_argument(device: ab.Device) -> None:
    with ab.Stream(device) as stream:
        start = time.perf_counter()
        stream.synchronize(timeout_ms=-1)
        assert time.perf_counter() - start < 5


def test_int_arguments_are_checked_before_ctypes_truncates_them(device: ab.Device) -> None:
    """ctypes drops the high bits of an out-of-range int (2**32 + 5 arrives as an int32 5), so
    the int32 / size arguments a caller chooses are checked first, with the parameter named."""
    with ab.Stream(device) as stream, ab.DeviceBuffer(device, 64) as buf:
        calls = sim.call_count("aclrtSynchronizeStreamWithTimeout")
        for bad in (2 ** 31, 2 ** 32 + 5, -2):
            with pytest.raises(ValueError, match=rf"timeout_ms: expected -1 \(no limit\).*got {bad}"):
                stream.synchronize(timeout_ms=bad)
        for bad in (1.5, True, "10"):
            with pytest.raises(TypeError, match="timeout_ms: expected an int"):
                stream.synchronize(timeout_ms=bad)  # type: ignore[arg-type]
        assert sim.call_count("aclrtSynchronizeStreamWithTimeout") == calls  # nothing reached C
        stream.synchronize(timeout_ms=np.int64(1000))  # numpy integers are ints
        assert sim.call_count("aclrtSynchronizeStreamWithTimeout") == calls + 1

        buf.memset(7)
        for bad in (2 ** 32 + 5, -(2 ** 31) - 1):
            with pytest.raises(ValueError, match=rf"memset value: expected an int in .*got {bad}"):
                buf.memset(bad)
        with pytest.raises(TypeError, match="memset value: expected an int"):
            buf.memset(0.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="memset nbytes: expected an int"):
            buf.memset(0, nbytes=8.9)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="memset: range"):
            buf.memset(0, nbytes=2 ** 64 + 8)  # would arrive as size_t 8
        with pytest.raises(TypeError, match="upload offset: expected an int"):
            buf.upload(np.zeros(2, np.float32), offset=1.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="copy_from source nbytes: expected an int"):
            buf.copy_from(buf, nbytes=True)  # type: ignore[arg-type]
        assert (buf.download(np.empty(64, np.uint8)) == 7).all()  # none of the failures wrote
        buf.memset(0, nbytes=np.uint16(16))
        assert buf.download(np.empty(64, np.uint8)).tolist() == [0] * 16 + [7] * 48
    for bad in (2 ** 32 + 5, -1):
        with pytest.raises(ValueError, match=rf"ms: expected a delay in \[0, 2\*\*31\) milliseconds, got {bad}"):
            sim.set_delay(bad)
    assert sim.set_delay(0) == 0  # the failed calls left the delay alone
