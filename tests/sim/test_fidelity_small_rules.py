"""Issue 25 item 7: the smaller runtime and nnopbase rules, each from the public sources (cann-abi.md §10.7).

Raw scenarios drive the simulator's C libraries through ctypes in a fresh interpreter (the harness of
``test_sim_raw.py``); binding tests go through ``acl_bindings`` / ``upsample3d_grad`` and fail when the
binding breaks the rule.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import acl_bindings as ab
from acl_bindings import ClosedError, lib, sim
from acl_bindings.socs import FIXED_WORKSPACE
from upsample3d_grad import Session, reference

# ------------------------------------------------------------------------------- memory

def test_raw_copies_and_memsets_of_0_bytes_succeed_before_any_check(raw) -> None:
    raw("""
        init(0)
        s = stream()
        host = np.zeros(4, dtype=np.float32)
        for kind in (H2D, D2H, 7):                         # even a kind that does not exist
            ok(rt.aclrtMemcpy(None, 0, None, 0, kind))
            ok(rt.aclrtMemcpyAsync(None, 0, host.ctypes.data, 0, kind, s))
        ok(rt.aclrtMemset(None, 0, 0, 0))
        ok(rt.aclrtMemsetAsync(None, 0, 0, 0, s))
        ok(rt.aclrtMemsetAsync(None, 0, 0, 0, vp(0x1234)))   # not a stream: not looked at either
        expect(rt.aclrtMemcpy(None, 4, host.ctypes.data, 4, H2D), INVALID_PARAM, "NULL")  # 1 byte: checked
        expect(rt.aclrtMemset(None, 4, 0, 4), INVALID_PARAM, "NULL")
        ok(rt.aclrtDestroyStream(s))
        # before any context too: the count is the first thing looked at
        ok(rt.aclrtResetDevice(0))
        ok(rt.aclrtMemcpy(None, 0, None, 0, H2D))
        ok(rt.aclrtMemsetAsync(None, 0, 0, 0, None))
    """)


def test_raw_malloc_of_0_bytes_is_refused_and_an_unknown_policy_is_the_default(raw) -> None:
    raw("""
        init(0)
        p = vp()
        expect(rt.aclrtMalloc(C.byref(p), 0, 0), INVALID_PARAM, "size is 0")
        for policy in (0x77, 0x12345, 0x100 | 0x1000):
            ok(rt.aclrtMalloc(C.byref(p), 64, policy))
            ok(rt.aclrtFree(p))
        assert live("device_buffer") == 0
    """)


def test_binding_empty_arrays_and_zero_size_buffers(no_leaks, session: Session) -> None:
    """The binding never asks for 0 bytes of device memory (aclrtMalloc refuses it): an empty result is fine."""
    go = np.zeros((0, 2, 2, 2, 2), dtype=np.float32)
    assert session.backward(go, (2, 2, 2), (0, 2, 1, 1, 1)).shape == (0, 2, 1, 1, 1)
    with pytest.raises(ValueError, match="nbytes"):
        ab.DeviceBuffer(session.device, 0)


# ------------------------------------------------------------------------------- streams and contexts

def test_raw_a_stream_is_destroyed_in_its_own_context(raw) -> None:
    raw("""
        init(0)
        default = vp()
        ok(rt.aclrtGetCurrentContext(C.byref(default)))
        s = stream()                                       # made in the default context
        user = vp()
        ok(rt.aclrtCreateContext(C.byref(user), 0))        # current now: same device, another context
        expect(rt.aclrtDestroyStream(s), 107003, "another context", "make its context current")
        ok(rt.aclrtSetCurrentContext(default))
        ok(rt.aclrtDestroyStream(s))
        ok(rt.aclrtDestroyContext(user))
        assert live("stream") == 0
    """)


def test_raw_a_context_takes_its_streams_with_it(raw) -> None:
    raw("""
        init(0)
        ok(rt.aclrtSetDevice(0))                           # two references
        s = stream()
        ok(rt.aclrtResetDevice(0))                         # not the last one: the stream stays
        assert live("stream") == 1
        ok(rt.aclrtSynchronizeStream(s))
        ok(rt.aclrtResetDevice(0))                         # the last one: the default context goes, with s
        assert live("stream") == 0
        ok(rt.aclrtSetDevice(0))
        expect(rt.aclrtSynchronizeStream(s), RT_PARAM, "not a live stream")
        expect(rt.aclrtDestroyStream(s), RT_PARAM, "not a live stream")
        # a user context's streams go when it is destroyed
        user = vp()
        ok(rt.aclrtCreateContext(C.byref(user), 0))
        t = stream()
        assert live("stream") == 1
        ok(rt.aclrtDestroyContext(user))
        assert live("stream") == 0
        ok(rt.aclrtResetDevice(0))
    """)


def test_binding_closes_a_stream_in_its_context_from_a_thread_with_another_one(no_leaks) -> None:
    """``Stream.close()`` makes its device's context current for ``aclrtDestroyStream``, then restores the
    thread's own (here a second context on the same device, where the destroy alone fails with 107003)."""
    with ab.Device(0) as device:
        stream = ab.Stream(device)
        seen: list[object] = []

        def other() -> None:
            ctx = ctypes.c_void_p()
            lib.aclrtCreateContext(ctypes.byref(ctx), 0)  # current on this thread now
            try:
                stream.close()
                seen.append(ab.current_context() == ctx.value)
            except Exception as exc:  # reported below
                seen.append(exc)
            finally:
                lib.aclrtDestroyContext(ctx)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen == [True]
        assert stream.closed


def test_binding_never_destroys_a_stream_its_device_took_with_it(no_leaks) -> None:
    """Once the last reference to the device is reset, its streams are gone: ``close()`` of one does not
    destroy it again (on CANN that is a use after free)."""
    device = ab.Device(0)
    stream = ab.Stream(device)
    destroys = sim.call_count("aclrtDestroyStream")
    device.close()
    assert sim.live_handles()["stream"] == 0
    with pytest.raises(ClosedError, match="device is closed"):
        stream.close()
    assert sim.call_count("aclrtDestroyStream") == destroys


# ------------------------------------------------------------------------------- executors

def test_raw_null_executor_arguments_are_inner_nullptr(raw) -> None:
    raw("""
        init(0)
        smp = Sample(np)
        ws, ex = smp.phase1()
        expect(nn.aclDestroyAclOpExecutor(None), 561103, "executor is NULL")
        expect(nn.aclSetAclOpExecutorRepeatable(None), 561103, "executor is NULL")
        expect(nn.aclSetInputTensorAddr(None, 0, None, None), 561103, "tensor is NULL")   # the tensor first
        expect(nn.aclSetInputTensorAddr(None, 0, smp.go, smp.dgo), 561103, "executor is NULL")
        expect(nn.aclSetOutputTensorAddr(ex, 0, None, smp.dgi), 561103, "tensor is NULL")
        ok(nn.aclDestroyAclOpExecutor(ex))
        smp.release()
    """)


def test_raw_set_repeatable_needs_the_last_phase1_of_the_calling_thread(raw) -> None:
    raw("""
        import threading
        init(0)
        smp = Sample(np)
        _, first = smp.phase1()
        _, second = smp.phase1()                           # a later phase 1 on this thread
        expect(nn.aclSetAclOpExecutorRepeatable(first), 561000, "last phase 1 on this thread")
        ok(nn.aclSetAclOpExecutorRepeatable(second))
        _, third = smp.phase1()
        got = []
        t = threading.Thread(target=lambda: got.append(nn.aclSetAclOpExecutorRepeatable(third)))
        t.start(); t.join()
        assert got == [561000], got                        # another thread
        ok(nn.aclSetAclOpExecutorRepeatable(third))        # still the last one here
        for ex in (first, second, third):
            ok(nn.aclDestroyAclOpExecutor(ex))
        smp.release()
    """)


def test_binding_plans_made_on_many_threads_get_repeatable_executors(no_leaks) -> None:
    """Each plan asks for a repeatable executor right after its own phase 1, on the same thread, while
    other threads run their phase 1s: every shape gets one executor, reused by every later call."""
    shapes = [((1, c, 2, 2, 2), (2, 2, 2), (1, c, 1, 1, 1)) for c in range(1, 9)]
    with Session(0) as s:
        phase1 = sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize")
        errors: list[BaseException] = []

        def work(shape: tuple) -> None:
            try:
                go_shape, out_size, in_size = shape
                go = np.arange(np.prod(go_shape), dtype=np.float32).reshape(go_shape)
                want = reference.upsample_nearest_exact3d_backward(go, out_size, in_size)
                dgo = s.upload(go)
                gi = s.empty(in_size)
                for _ in range(4):
                    s.backward(dgo, out_size, in_size, out=gi)
                    np.testing.assert_array_equal(gi.download(), want)
                dgo.close()
                gi.close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(shape,)) for shape in shapes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        # one phase 1 per shape: had a refusal made a plan one-shot, each call would have run its own
        assert sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize") - phase1 == len(shapes)


# ------------------------------------------------------------------------------- SoC names (item 6)

@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend910A", "Ascend910ProB"])
def test_raw_a_legacy_910_has_no_kernel_phase1_succeeds_phase2_refuses(raw, soc: str) -> None:
    raw("""
        import os
        init(0)
        s = stream()
        smp = Sample(np)
        rc, ws, ex = phase1(smp.go, smp.osz, smp.isz, smp.gi)
        ok(rc)                                             # the L0 ignores the failed kernel lookup
        assert ws == 0, ws                                 # no tiling ran
        expect(phase2(None, 0, ex, s), 561000, "no kernel binary for SoC " + os.environ["CANN_SIM_SOC"])
        ok(rt.aclrtSynchronizeStream(s))
        assert smp.result() == [0.0, 0.0, 0.0, 0.0]        # nothing was written
        assert live("executor") == 0                       # the failed run consumed it
        os.environ["CANN_SIM_SOC"] = "Ascend910B2"         # an Atlas A2 name: the kernel is there
        ws, ex = smp.phase1()
        w = malloc(ws)
        ok(phase2(w, ws, ex, s))
        ok(rt.aclrtSynchronizeStream(s))
        assert smp.result() == [36.0, 100.0, 164.0, 228.0]
        ok(rt.aclrtFree(w))
        smp.release()
        ok(rt.aclrtDestroyStream(s))
    """, env={"CANN_SIM_SOC": soc})


def test_binding_on_a_legacy_910_fails_with_the_soc_named(no_leaks, session: Session, monkeypatch) -> None:
    """Both operators through the binding: an ``AclError`` 561000 that names the SoC, for every call form."""
    go = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    monkeypatch.setenv("CANN_SIM_SOC", "Ascend910B")
    with pytest.raises(ab.AclError, match="no kernel binary for SoC Ascend910B") as info:
        session.backward(go, (2, 2, 2), (2, 2, 1, 1, 1))
    assert info.value.code == 561000
    with pytest.raises(ab.AclError, match="no kernel binary for SoC Ascend910B"):
        session.forward(x, (3, 3, 3))
    monkeypatch.setenv("CANN_SIM_SOC", "Ascend910B3")  # (a new session: the SoC of a process never changes)
    with Session(0) as a2:
        np.testing.assert_array_equal(a2.backward(go, (2, 2, 2), (2, 2, 1, 1, 1)),
                                      reference.upsample_nearest_exact3d_backward(go, (2, 2, 2), (2, 2, 1, 1, 1)))


# ------------------------------------------------------------------------------- the op cache's key (item 7)

def test_raw_the_op_cache_key_holds_the_deterministic_level_and_dump_turns_caching_off(raw) -> None:
    """A phase 1 after a one-shot run of the same call is a cache wrapper (SetRepeatable refuses it, 561000);
    one under another deterministic level, or while the operator dump is on, is a fresh executor."""
    raw("""
        from simh import _decl
        _decl(rt, "aclrtSetSysParamOpt", C.c_int, [C.c_int, i64])
        for name in ("aclmdlInitDump", "aclmdlFinalizeDump"):
            _decl(rt, name, C.c_int, [])
        _decl(rt, "aclmdlSetDump", C.c_int, [C.c_char_p])
        DETERMINISTIC, STRONG_CONSISTENCY = 0, 2
        init(0)
        s = stream()

        def is_wrapper():
            smp = Sample(np)
            _, ex = smp.phase1()
            rc = nn.aclSetAclOpExecutorRepeatable(ex)
            assert rc in (0, 561000), rc
            ok(nn.aclDestroyAclOpExecutor(ex))
            smp.release()
            return rc == 561000

        assert run_sample(np, s) == [36.0, 100.0, 164.0, 228.0]   # a one-shot run: its entry is usable now
        assert is_wrapper()
        ok(rt.aclrtSetSysParamOpt(DETERMINISTIC, 1))
        assert not is_wrapper()                                    # level 1: another key
        assert run_sample(np, s) == [36.0, 100.0, 164.0, 228.0]   # an entry at level 1
        assert is_wrapper()
        ok(rt.aclrtSetSysParamOpt(STRONG_CONSISTENCY, 1))
        assert not is_wrapper()                                    # level 2 (1 with strong consistency)
        ok(rt.aclrtSetSysParamOpt(STRONG_CONSISTENCY, 0))
        ok(rt.aclrtSetSysParamOpt(DETERMINISTIC, 0))
        assert is_wrapper()                                        # level 0's entry is still there

        ok(rt.aclmdlInitDump())
        ok(rt.aclmdlSetDump(b"dump.json"))
        assert not is_wrapper()                                    # the operator dump is on: no cache
        assert run_sample(np, s) == [36.0, 100.0, 164.0, 228.0]
        ok(rt.aclmdlFinalizeDump())
        assert is_wrapper()
        ok(rt.aclrtDestroyStream(s))
    """)


# ------------------------------------------------------------------------------- workspace sizes (item 7)

MIB16 = FIXED_WORKSPACE  # the tilings' fixed 16 MiB (acl_bindings/sim/src/socs.json)


def _plan(*sizes: int) -> int:
    """nnopbase's bucket sizes: each tensor + 32 bytes, rounded up to 512 (memory_allocator.cpp Align)."""
    return sum((n + 32 + 511) // 512 * 512 for n in sizes)


# (gradOut, gradInput NCDHW sizes, layout, dtype, the A2/A3 tiling's ask worked out by hand from
# upsample_nearest3d_grad_tiling.cpp, the workspace tensors the executor plans)
BACKWARD_WORKSPACES = [
    # the sample: real scales 2, slide 64, K = min(133, 2) = 2, one core per pass; W and H passes keep
    # 16 and 8 intermediate elements; (16 + 8 + 64 * 2 * 1) * 4 bytes + 16 MiB
    ((2, 2, 2, 2, 2), (2, 2, 1, 1, 1), "NCDHW", np.float32, [608 + MIB16]),
    # float16: Cast to float32 (32 elements), the kernel, its float32 result (4), the Cast back (the user's)
    ((2, 2, 2, 2, 2), (2, 2, 1, 1, 1), "NCDHW", np.float16, [128, 608 + MIB16, 16]),
    # NDHWC: Transpose to NCDHW (128 bytes), the kernel, its result (16), the Transpose back (the user's)
    ((2, 2, 2, 2, 2), (2, 2, 1, 1, 1), "NDHWC", np.float32, [128, 608 + MIB16, 16]),
    # only W resized (1 -> 2): 5 slides of 64 over 24 cores: 5 groups of min(24 // 5, ceil(1000 / 250)) = 4
    # cores, 20 used; K = 133; no intermediate matrix: 64 * 133 * 20 * 4 bytes + 16 MiB
    ((1, 1, 10, 100, 640), (1, 1, 10, 100, 320), "NCDHW", np.float32, [64 * 133 * 20 * 4 + MIB16]),
    # 30 slides: at least one per core, so all 24 are used
    ((1, 1, 1, 1, 3840), (1, 1, 1, 1, 1920), "NCDHW", np.float32, [64 * 133 * 24 * 4 + MIB16]),
]


@pytest.mark.parametrize("case", BACKWARD_WORKSPACES, ids=lambda c: f"{c[1]}-{c[2]}-{np.dtype(c[3])}")
def test_binding_backward_workspace_is_the_one_cann_plans(no_leaks, session: Session, case) -> None:
    go_size, gi_size, layout, dtype, tensors = case
    shape = go_size if layout == "NCDHW" else (go_size[0], *go_size[2:], go_size[1])
    go = np.ones(shape, dtype)
    gi = session.backward(go, go_size[2:], gi_size, layout=layout)
    assert session.last_workspace_size == _plan(*tensors)
    want = reference.upsample_nearest_exact3d_backward(go.astype(np.float32), go_size[2:], gi_size, layout=layout)
    np.testing.assert_array_equal(gi.astype(np.float32), want)  # the kernel's own scratch is host memory


def test_raw_a_non_contiguous_result_keeps_viewcopys_source_in_the_workspace(raw) -> None:
    """ViewCopy into a non-contiguous gradInput copies from a result the workspace holds (16 bytes here)."""
    raw(f"""
        init(0)
        s = stream()
        smp = Sample(np)
        big = malloc(64)
        ok(rt.aclrtMemset(big, 64, 0, 64))
        strided = tensor([2, 2, 1, 1, 1], big, strides=[4, 2, 1, 1, 1], storage=[16])   # every other element
        rc, ws, ex = phase1(smp.go, smp.osz, smp.isz, strided)
        ok(rc)
        assert ws == {_plan(608 + MIB16, 16)}, ws
        w = malloc(ws)
        ok(phase2(w, ws, ex, s))
        ok(rt.aclrtSynchronizeStream(s))
        out = np.zeros(16, np.float32)
        d2h(out, big)
        assert out[:8:2].tolist() == [36.0, 100.0, 164.0, 228.0], out
        assert not out[1:8:2].any() and not out[8:].any(), out    # nothing between or after
        ok(rt.aclrtFree(w))
        ok(nn.aclDestroyTensor(strided))
        ok(rt.aclrtFree(big))
        smp.release()
        ok(rt.aclrtDestroyStream(s))
    """)


def test_binding_forward_workspace_is_the_one_cann_plans(no_leaks, session: Session, monkeypatch) -> None:
    """The forward's tiling asks for 0 bytes on Atlas A2/A3 (a 0-byte workspace tensor: 512 planned), 16 MiB on
    Ascend950; the backward's on Ascend950 is 16 MiB too, and it computes in the input's dtype (no Cast)."""
    x = np.ones((1, 1, 2, 2, 2), np.float32)
    assert session.forward(x, (4, 4, 4)).sum() == 64
    assert session.last_workspace_size == _plan(0)
    monkeypatch.setenv("CANN_SIM_SOC", "Ascend950PR_SIMULATED")
    with Session(0) as s950:
        assert s950.forward(x, (4, 4, 4)).sum() == 64
        assert s950.last_workspace_size == _plan(MIB16)
        s950.backward(np.ones((2, 2, 2, 2, 2), np.float16), (2, 2, 2), (2, 2, 1, 1, 1))
        assert s950.last_workspace_size == _plan(MIB16)
