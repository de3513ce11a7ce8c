"""Rules of the fidelity table that had no test of their own, or a weak one.

Raw scenarios drive the simulator's C libraries through ctypes in a fresh interpreter (the harness of
``test_sim_raw.py``); binding-level tests go through ``acl_bindings`` / ``upsample3d_grad``, so that they fail
when the binding breaks the rule.

- Tensor data addresses are 32-byte aligned (OPB ``docs/zh/api/nnopbase/aclnn/aclCreateTensor.md``; cann-abi.md
  §1.3).  The simulator refuses others in phase 1 and phase 2 (161002, its own choice of code).
- Any format other than NDHWC is read as NCDHW (OCV docs; cann-abi.md §5.5).
- The INT32_MAX dim check is skipped on Ascend950 only (OCV ``aclnn_upsample_nearest_exact3d_backward.cpp``
  CheckUplimit, ``IsRegBase``; cann-abi.md §5, §5.1 step 3.5): ``CANN_SIM_SOC`` makes the simulator answer for
  another SoC.
- User scales reach the kernel only when all three are > 0 (cann-abi.md §5.1 step 6, §5.2).
- ``aclCreateIntArray`` copies the values (OPB ``aclArray<T>::aclArray``; cann-abi.md §1.3).
- ``aclrtMemset``'s ``count <= maxCount``; ``aclCreateTensor`` with NULL storageDims and a count > 0 (cann-abi.md
  §1.1, §1.3).
- ``aclrtEventElapsedTime``: both events recorded on the same stream (RT
  ``docs/zh/api_ref/07_event_management.md``; cann-abi.md §1.1).
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest

from acl_bindings import AclError, DeviceBuffer, Event, Format, Stream, load_backend, sim
from acl_bindings.engine import run_once
from acl_bindings.runtime import soc_name
from tests.sim.test_examples_cli import run
from upsample3d_grad import Session, reference
from upsample3d_grad.checks import BAD_CASES
from upsample3d_grad.tools import smoke

SOC_950 = "Ascend950PR_SIMULATED"  # a name with the Ascend950 prefix (IsRegBase, cann-abi.md §5)


# ------------------------------------------------------------------------------- 32-byte aligned data

def test_raw_unaligned_tensor_data_is_refused_in_both_phases(raw) -> None:
    raw("""
        init(0)
        smp = Sample(np)
        big_go, big_gi = malloc(4096), malloc(4096)        # room for every address below
        h2d(big_go, smp.go_host)
        for shift in (16, 4):
            go = tensor([2, 2, 2, 2, 2], big_go + shift)
            rc, _, ex = phase1(go, smp.osz, smp.isz, smp.gi)
            expect(rc, PARAM_INVALID, "gradOut", "32-byte aligned")
            gi = tensor([2, 2, 1, 1, 1], big_gi + shift)
            rc, _, ex = phase1(smp.go, smp.osz, smp.isz, gi)
            expect(rc, PARAM_INVALID, "gradInput", "32-byte aligned")
            ok(nn.aclDestroyTensor(go))
            ok(nn.aclDestroyTensor(gi))
        assert live("executor") == 0
        # the same bytes as an element offset from an aligned address are fine: the offset belongs in the view
        h2d(big_go + 16, smp.go_host)
        go = tensor([2, 2, 2, 2, 2], big_go, offset=4, storage=[1024])
        w = run_both(go, smp.osz, smp.isz, smp.gi)
        assert smp.result() == [36.0, 100.0, 164.0, 228.0]

        # phase 2 checks the addresses it runs on: a repeatable executor given an unaligned one
        rc, n, ex = phase1(smp.go, smp.osz, smp.isz, smp.gi)
        ok(rc)
        ok(nn.aclSetAclOpExecutorRepeatable(ex))
        h2d(big_go + 16, smp.go_host)
        ok(nn.aclSetInputTensorAddr(ex, 0, smp.go, big_go + 16))
        expect(phase2(w, n, ex, None), PARAM_INVALID, "aclnnUpsampleNearestExact3dBackward", "gradOut",
               "32-byte aligned")
        ok(nn.aclSetInputTensorAddr(ex, 0, smp.go, big_go + 32))
        ok(nn.aclSetOutputTensorAddr(ex, 0, smp.gi, big_gi + 8))
        expect(phase2(w, n, ex, None), PARAM_INVALID, "gradInput", "32-byte aligned")
        h2d(big_go + 32, smp.go_host)
        ok(nn.aclSetOutputTensorAddr(ex, 0, smp.gi, big_gi + 64))
        ok(phase2(w, n, ex, None))
        ok(rt.aclrtSynchronizeStream(None))
        out = np.zeros(4, np.float32)
        d2h(out, big_gi + 64)
        assert out.tolist() == [36.0, 100.0, 164.0, 228.0]
        ok(nn.aclDestroyAclOpExecutor(ex))
    """)


def _offset_view(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """A view whose first element is 4 bytes into its base array (not 32-byte aligned relative to it)."""
    big = (*shape[:-1], shape[-1] * 2 + 1)
    base = np.random.default_rng(seed).integers(-4, 5, big).astype(np.float32)
    return base[..., 1::2]


@pytest.mark.parametrize("plans", [True, False], ids=["plans", "one-shot"])
def test_every_binding_path_keeps_view_offsets_out_of_the_address(no_leaks, plans: bool) -> None:
    """Views starting 4 or 12 bytes into their buffer, on every binding path: the simulator refuses a data address
    that is not 32-byte aligned, so this passes only if the binding passes the buffer's base address and the
    view's element offset."""
    in5, out3 = (1, 2, 2, 3, 4), (4, 6, 8)
    g = _offset_view((1, 2, *out3), 1)
    want = reference.upsample_nearest_exact3d_backward(np.ascontiguousarray(g), out3, in5)
    with Session(0, plans=plans) as s:
        for _ in range(2):  # the second call reuses a plan (address update) or is answered by the op cache
            np.testing.assert_array_equal(s.backward(g, out3, in5), want)
        host_out = np.full((1, 2, 2, 3, 11), -7.0, np.float32)
        out = host_out[..., 3::2]  # 12 bytes into its base
        assert s.backward(g, out3, in5, out=out) is out
        np.testing.assert_array_equal(out, want)
        with s.upload(g) as go, s.upload(host_out[..., 3::2]) as dout:
            for arr in (go, dout):
                assert arr.offset * 4 % 32 != 0, arr.offset  # the view itself starts off a 32-byte boundary
                assert arr.tensor.address == arr.buffer.ptr and arr.tensor.address % 32 == 0
            for plan in (True, False):
                with s.prepare(go, out3, in5, out=dout, plan=plan) as call:
                    for _ in range(2):
                        dout.buffer.memset(0)  # so that a result written elsewhere cannot pass for this one
                        call()
                        np.testing.assert_array_equal(dout.download(), want)
            dout.buffer.memset(0)
            assert len(s.timed_backward(go, out3, in5, out=dout)) == 1
            np.testing.assert_array_equal(dout.download(), want)


def test_torch_views_over_device_memory_keep_their_offset_out_of_the_address(no_leaks, session: Session) -> None:
    """The NPU-tensor path (``run_once`` on borrowed memory), driven with torch views over simulator device memory."""
    torch = pytest.importorskip("torch")
    from upsample3d_grad.op import OP
    from upsample3d_grad.torch_interop import TorchDescription

    in5, out3 = (1, 2, 2, 2, 2), (4, 4, 4)
    host = (np.arange(1 * 2 * 4 * 4 * 9, dtype=np.float32).reshape(1, 2, 4, 4, 9) % 5)
    want = reference.upsample_nearest_exact3d_backward(np.ascontiguousarray(host[..., 1::2]), out3, in5)
    spaces: list[DeviceBuffer] = []

    def workspace(n: int) -> int:  # (the size phase 1 asked for: 16 MiB and more on A2/A3)
        spaces.append(DeviceBuffer(session.device, n))
        return spaces[-1].ptr

    with DeviceBuffer(session.device, host.nbytes) as gbuf, DeviceBuffer(session.device, 4 * 16 * 2) as ibuf:
        gbuf.upload(host)
        ibuf.memset(0)
        whole = torch.frombuffer((ctypes.c_char * gbuf.nbytes).from_address(gbuf.ptr), dtype=torch.float32)
        g = whole.view(1, 2, 4, 4, 9)[..., 1::2]
        res = torch.frombuffer((ctypes.c_char * ibuf.nbytes).from_address(ibuf.ptr), dtype=torch.float32)
        out = res[3:3 + 8 * 2].view(1, 2, 2, 2, 2)
        for t in (g, out):
            d = TorchDescription(t)
            assert d.offset * 4 % 32 != 0 and d.address % 32 == 0, d
        fmt = Format.NCDHW
        values = (TorchDescription(g).arg(fmt), out3, in5, 0.0, 0.0, 0.0, TorchDescription(out).arg(fmt))
        run_once(OP, values, workspace, lambda: int(session.stream.handle))
        session.stream.synchronize()
        np.testing.assert_array_equal(out.numpy(), want)
    for space in spaces:
        space.close()


# ------------------------------------------------------------------------------- formats

def test_raw_formats_other_than_ndhwc_are_read_as_ncdhw(raw) -> None:
    raw("""
        ND, NCHW, NHWC, NCL = 2, 0, 1, 47
        init(0)
        N, Cc, o, i = 2, 3, (4, 6, 8), (2, 3, 4)
        go_host = np.random.default_rng(5).standard_normal((N, Cc, *o)).astype(np.float32)
        dgo, dgi = malloc(go_host.nbytes), malloc(4 * N * Cc * 24)
        h2d(dgo, go_host)
        osz, isz = int_array(*o), int_array(N, Cc, *i)

        def run(fmt, go_dims, gi_dims):
            go, gi = tensor(go_dims, dgo, fmt=fmt), tensor(gi_dims, dgi, fmt=fmt)
            rc, n, ex = phase1(go, osz, isz, gi)
            if rc == OK:
                w = malloc(n)
                ok(rt.aclrtMemset(dgi, 4 * N * Cc * 24, 0, 4 * N * Cc * 24))
                ok(phase2(w, n, ex, None))
                ok(rt.aclrtSynchronizeStream(None))
                ok(rt.aclrtFree(w))
            return rc, go, gi

        def result():
            out = np.zeros((N, Cc, *i), np.float32)
            d2h(out, dgi)
            return out

        rc, _, _ = run(NCDHW, (N, Cc, *o), (N, Cc, *i))
        ok(rc)
        want = result()
        assert np.abs(want).sum() > 0
        for fmt in (ND, NCHW, NHWC, NCL):
            rc, go, gi = run(fmt, (N, Cc, *o), (N, Cc, *i))   # NCDHW dims: accepted and read as NCDHW
            ok(rc)
            assert result().tobytes() == want.tobytes(), fmt
            rc, _, _ = run(fmt, (N, *o, Cc), (N, *i, Cc))     # NDHWC-ordered dims: a shape mismatch
            expect(rc, PARAM_INVALID, "gradOut")
        rc, _, _ = run(NDHWC, (N, *o, Cc), (N, *i, Cc))       # the same dims are right for NDHWC itself
        ok(rc)
    """)


# ------------------------------------------------------------------------------- INT32_MAX on Ascend950

_UPLIMIT = """
    init(0)
    big = 2 ** 31
    osz, e_isz, isz = int_array(1, 1, big), int_array(0, 1, 1, 1, big // 32), int_array(1, 1, 1, 1, big // 32)
    # empty gradOut (N = 0): only the INT32_MAX check can refuse it
    e_go, e_gi = tensor([0, 1, 1, 1, big], None), tensor([0, 1, 1, 1, big // 32], None)
    rc, ws, ex = phase1(e_go, osz, e_isz, e_gi)
    msg = err()
    # non-empty: past the INT32_MAX check, the data check (stricter than hardware) answers
    d = malloc(4096)
    go, gi = tensor([1, 1, 1, 1, big], d, storage=[1]), tensor([1, 1, 1, 1, big // 32], d + 2048, storage=[1])
    rc2, _, _ = phase1(go, osz, isz, gi)
    msg2 = err()
    assert b"simulator" in rt.cannsimVersion().lower()
    soc = rt.aclrtGetSocName().decode()
"""


@pytest.mark.parametrize("soc", [None, "Ascend910B3", SOC_950], ids=["default", "A2-name", "950-name"])
def test_raw_int32_max_check_is_skipped_only_on_ascend950(raw, soc: str | None) -> None:
    env = {"CANN_SIM_SOC": soc} if soc else None
    if soc is None or not soc.startswith("Ascend950"):
        raw(_UPLIMIT + """
    assert soc == (os.environ.get("CANN_SIM_SOC") or "CANN-Simulator"), soc
    assert rc == PARAM_INVALID and "gradOut" in msg and "INT32_MAX" in msg, (rc, msg)
    assert rc2 == PARAM_INVALID and "INT32_MAX" in msg2, (rc2, msg2)
""", env)
    else:
        raw(_UPLIMIT + """
    assert soc == os.environ["CANN_SIM_SOC"], soc
    assert rc == OK and ws == 0 and ex, (rc, msg)
    ok(phase2(None, 0, ex, None))
    assert rc2 == PARAM_INVALID and "INT32_MAX" not in msg2 and "device memory" in msg2, (rc2, msg2)
""", env)


def test_a_simulated_ascend950_is_still_the_simulator(no_leaks, session: Session, monkeypatch) -> None:
    """The binding still knows it runs on the simulator; phase 1 through the binding skips CheckUplimit."""
    case = next(c for c in BAD_CASES if c.label == "gradOut dim > INT32_MAX")
    entry = smoke.run_bad_case(session, case, soc="CANN-Simulator")
    assert entry["got_code"] == 161002 and "INT32_MAX" in entry["message"], entry
    monkeypatch.setenv("CANN_SIM_SOC", SOC_950)
    assert soc_name() == SOC_950
    assert load_backend().is_simulator and "simulator" in sim.version().lower()
    entry = smoke.run_bad_case(session, case, soc="CANN-Simulator")  # force the run: the check is not made
    assert "INT32_MAX" not in entry["message"] and "device memory" in entry["message"], entry
    assert smoke.run_bad_case(session, case, soc=soc_name())["status"] == "skip"


def test_doctor_and_smoke_on_a_simulated_ascend950(tmp_path: Path) -> None:
    env = {"CANN_SIM_SOC": SOC_950}
    doctor = run(["-m", "upsample3d_grad", "doctor", "--json", str(tmp_path / "d.json")], tmp_path, env=env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "simulator" in doctor.stdout.splitlines()[0] and SOC_950 in doctor.stdout
    denv = json.loads((tmp_path / "d.json").read_text())["environment"]
    assert denv["backend"] == "sim" and "simulator" in denv["backend_label"] and denv["soc_name"] == SOC_950
    proc = run(["-m", "upsample3d_grad", "smoke", "--quick", "--json", str(tmp_path / "s.json")], tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "simulator" in proc.stdout.splitlines()[0]
    cases = json.loads((tmp_path / "s.json").read_text())["cases"]
    by_status = {c["status"] for c in cases}
    assert by_status <= {"pass", "skip"}, [c for c in cases if c["status"] not in ("pass", "skip")]
    skipped = [c for c in cases if c["status"] == "skip"]
    assert len(skipped) == 1 and "INT32_MAX" in skipped[0]["message"], skipped


# ------------------------------------------------------------------------------- all-or-none scales

def test_raw_mixed_scales_use_the_size_ratio_in_every_dim(raw, tmp_path: Path) -> None:
    """scalesD alone > 0: CANN ignores it and uses f32(O)/f32(I) in every dim (here 2.5, not 1.7, in D)."""
    n, c, out3, in3 = 1, 2, (5, 6, 9), (2, 3, 4)
    g = np.random.default_rng(11).integers(-3, 4, (n, c, *out3)).astype(np.float32)
    want = reference.upsample_nearest_exact3d_backward(g, out3, (n, c, *in3), 1.7, None, None)
    assert reference.mixed_scales(1.7, None, None)
    per_dim = reference.upsample_nearest_exact3d_backward(g, out3, (n, c, *in3), 1.7, 6 / 3, 9 / 4)
    assert not np.array_equal(per_dim, want)  # the shape tells the two readings apart
    np.save(tmp_path / "go.npy", g)
    np.save(tmp_path / "want.npy", want)
    raw("""
        d = os.environ["FIDELITY_DIR"]
        go_host, want = np.load(d + "/go.npy"), np.load(d + "/want.npy")
        init(0)
        dgo, dgi = malloc(go_host.nbytes), malloc(want.nbytes)
        h2d(dgo, go_host)
        go, gi = tensor(go_host.shape, dgo), tensor(want.shape, dgi)
        osz, isz = int_array(*go_host.shape[2:]), int_array(*want.shape)
        for scales in ((1.7, 0.0, 0.0), (0.0, 2.0, 0.0), (1.7, 0.0, 2.25), (0.0, 0.0, 0.0)):
            ok(rt.aclrtMemset(dgi, want.nbytes, 0, want.nbytes))
            rc, n, ex = phase1(go, osz, isz, gi, scales)
            ok(rc)
            w = malloc(n)
            ok(phase2(w, n, ex, None))
            ok(rt.aclrtSynchronizeStream(None))
            ok(rt.aclrtFree(w))
            got = np.zeros_like(want)
            d2h(got, dgi)
            assert got.tobytes() == want.tobytes(), (scales, got, want)
    """, {"FIDELITY_DIR": str(tmp_path)})


# ------------------------------------------------------------------------------- the A2/A3 tiling's scale check

_TILING = """
    init(0)
    out3, in5 = (60, 2, 2), (1, 1, 1, 2, 2)                      # outputSize/inputSize = 60 in D
    go_host = np.ones((1, 1, *out3), np.float32)
    dgo, dgi = malloc(go_host.nbytes), malloc(16)
    h2d(dgo, go_host)
    go, gi = tensor(go_host.shape, dgo), tensor(in5, dgi)
    osz, isz = int_array(*out3), int_array(*in5)
    soc = rt.aclrtGetSocName().decode()
    results = {}
    for scales in ((10.0, 0.0, 0.0), (10.0, 1.0, 0.0), (50.0, 0.0, 2.0)):   # not all three > 0: ignored
        rc, n, ex = phase1(go, osz, isz, gi, scales)
        assert rc == OK and ex, (scales, rc, err())             # phase 1's check reads scalesD: 10 <= 50
        w = malloc(n)
        results[scales] = (phase2(w, n, ex, None), err())       # (a failed phase 2 consumes the executor too)
        ok(rt.aclrtSynchronizeStream(None))
        ok(rt.aclrtFree(w))
    rc, n, ex = phase1(go, osz, isz, gi, (60.0, 1.0, 1.0))      # all three given: phase 1 refuses 60 itself
    assert rc == PARAM_INVALID and "50" in err(), rc
    rc, n, ex = phase1(go, osz, isz, gi, (50.0, 1.0, 1.0))      # all three given, each <= 50: the kernel's own
    ok(rc)
    w = malloc(n)
    ok(phase2(w, n, ex, None))
    ok(rt.aclrtSynchronizeStream(None))
    got = np.zeros(in5, np.float32)
    d2h(got, dgi)
    assert got.ravel().tolist() == [50.0] * 4, got              # (windows of 50 of the 60 rows, scale 50)
"""


@pytest.mark.parametrize("soc", [None, SOC_950], ids=["A2/A3", "950-name"])
def test_raw_the_a2_tiling_refuses_the_size_ratio_above_50_at_launch(raw, soc: str | None) -> None:
    """Not all three scales > 0: the kernel gets outputSize/inputSize in every dim, and the Atlas A2/A3 tiling
    refuses one above 50 (OCV ``upsample_nearest3d_grad_tiling.cpp`` CheckScales), which phase 1's own check
    (the user's scale where given) lets through.  The L0 op ignores the launcher's status (OPB
    ``make_op_executor.h``), so phase 1 succeeds and the launch, tiling again, fails with 561103 (OPB
    ``op_kernel.h`` Launch).  Ascend950's tiling has no such check (cann-abi.md §5.2)."""
    env = {"CANN_SIM_SOC": soc} if soc else None
    if soc is None:
        raw(_TILING + """
    for scales, (rc, msg) in results.items():
        assert rc == 561103 and "tiling" in msg and "scaleD = 60" in msg, (scales, rc, msg)
""", env)
    else:
        raw(_TILING + """
    assert soc.startswith("Ascend950"), soc
    for scales, (rc, msg) in results.items():
        assert rc == OK, (scales, rc, msg)
    """, env)


def test_binding_mixed_scales_above_the_tiling_limit(no_leaks, session: Session) -> None:
    """strict (the default) refuses the documented limit outputSize/inputSize <= 50 (cann-abi.md §5.5) in phase 1's
    host checks, naming the dim and the sizes; strict=False leaves it to the library, whose launch refuses it on
    an Atlas A2/A3 (the simulator's default SoC), on every path."""
    g = np.ones((1, 1, 60, 2, 2), np.float32)
    args = (g, (60, 2, 2), (1, 1, 1, 2, 2), 10.0, None, None)
    with pytest.raises(AclError, match=r"outputSize/inputSize must be <= 50.*D: 60/1") as info:
        session.backward(*args)
    assert info.value.code == 161002
    for plans in (True, False):
        with Session(0, plans=plans) as s, pytest.warns(UserWarning, match="only some are > 0"):
            with pytest.raises(AclError, match="tiling") as info:
                s.backward(*args, strict=False)
            assert info.value.code == 561103
            go, gi = s.upload(g), s.empty((1, 1, 1, 2, 2))
            call = s.prepare(go, (60, 2, 2), (1, 1, 1, 2, 2), (10.0, None, None), out=gi, plan=plans, strict=False)
            for _ in range(2):  # a plan keeps failing (the launch tiles again), a one-shot fails each time
                with pytest.raises(AclError, match="tiling"):
                    call()
            s.backward(g[:, :, :50], (50, 2, 2), (1, 1, 1, 2, 2), strict=False)  # the session stays usable


# ------------------------------------------------------------------------------- aclCreateIntArray copies

def test_raw_int_array_values_are_copied_at_creation(raw) -> None:
    raw("""
        init(0)
        smp = Sample(np)
        o_src, i_src = i64s(2, 2, 2), i64s(2, 2, 1, 1, 1)
        osz, isz = nn.aclCreateIntArray(o_src, 3), nn.aclCreateIntArray(i_src, 5)
        assert osz and isz
        # read as they are now, these would fail phase 1 (outputSize does not match gradOut)
        for k, v in enumerate((1, 1, 1)):
            o_src[k] = v
        for k, v in enumerate((2, 2, 2, 2, 2)):
            i_src[k] = v
        for _ in range(2):                              # a one-shot run, then the op cache's answer
            rc, n, ex = phase1(smp.go, osz, isz, smp.gi)
            ok(rc)
            assert n > 0
            w = malloc(n)
            ok(rt.aclrtMemset(smp.dgi, 16, 0, 16))
            ok(phase2(w, n, ex, None))
            ok(rt.aclrtSynchronizeStream(None))
            ok(rt.aclrtFree(w))
            assert smp.result() == [36.0, 100.0, 164.0, 228.0]
        ok(nn.aclDestroyIntArray(osz))
        ok(nn.aclDestroyIntArray(isz))
    """)


def test_raw_create_tensor_copies_its_dims_and_owns_no_memory(raw) -> None:
    """aclCreateTensor copies viewDims, strides and storageDims; the address is the caller's: aclDestroyTensor
    frees the descriptor only, and the memory stays the caller's to use and free (OPB ``acl_op_api.cpp``,
    ``common_types.cpp``; cann-abi.md §1.3)."""
    raw("""
        init(0)
        smp = Sample(np)
        shape, steps, storage = i64s(2, 2, 2, 2, 2), i64s(16, 8, 4, 2, 1), i64s(32)
        go = nn.aclCreateTensor(shape, 5, FLOAT, steps, 0, NCDHW, storage, 1, smp.dgo)
        assert go, err()
        # read as they are now, these would fail phase 1 (a gradOut of another shape, a view past its storage)
        for k in range(5):
            shape[k], steps[k] = 3, 1000
        storage[0] = 1
        w = run_both(go, smp.osz, smp.isz, smp.gi)
        assert smp.result() == [36.0, 100.0, 164.0, 228.0]
        ok(nn.aclDestroyTensor(go))                     # the descriptor only:
        assert live("device_buffer") >= 3               # the memory is still allocated ...
        back = np.zeros(32, np.float32)
        d2h(back, smp.dgo)                              # ... still readable, unchanged ...
        assert back.tolist() == list(range(1, 33))
        ok(rt.aclrtFree(smp.dgo))                       # ... and the caller frees it, once
        expect(rt.aclrtFree(smp.dgo), RT_PARAM, "not")
        ok(rt.aclrtFree(w))
    """)


# ------------------------------------------------------------------------------- memset and aclCreateTensor

def test_raw_memset_count_above_max_count_is_refused(raw) -> None:
    raw("""
        init(0)
        d = malloc(128)
        ok(rt.aclrtMemset(d, 128, 0x11, 128))
        expect(rt.aclrtMemset(d, 64, 0, 65), INVALID_PARAM, "aclrtMemset", "count 65", "maxCount 64")
        s = stream()
        expect(rt.aclrtMemsetAsync(d, 64, 0, 65, s), INVALID_PARAM, "aclrtMemsetAsync", "count 65", "maxCount 64")
        ok(rt.aclrtSynchronizeStream(s))
        out = np.zeros(128, np.uint8)
        d2h(out, d)
        assert (out == 0x11).all()                      # nothing was written
        ok(rt.aclrtMemset(d, 64, 0, 64))
        d2h(out, d)
        assert (out[:64] == 0).all() and (out[64:] == 0x11).all()
    """)


def test_raw_create_tensor_null_storage_dims_with_a_count_is_null(raw) -> None:
    raw("""
        init(0)
        d = malloc(256)
        before = live("tensor")
        t = nn.aclCreateTensor(i64s(2, 2, 2, 2, 2), 5, FLOAT, None, 0, NCDHW, None, 5, d)
        assert not t
        m = err()
        assert m is not None and "storageDims" in m, m
        assert live("tensor") == before
        t = nn.aclCreateTensor(i64s(2, 2, 2, 2, 2), 5, FLOAT, None, 0, NCDHW, i64s(32), 1, d)
        assert t
        ok(nn.aclDestroyTensor(t))
    """)


# ------------------------------------------------------------------------------- events on one stream

def test_raw_elapsed_time_needs_both_events_on_one_stream(raw) -> None:
    raw("""
        init(0)
        s1, s2 = stream(), stream()
        a, b = vp(), vp()
        ok(rt.aclrtCreateEvent(C.byref(a)))
        ok(rt.aclrtCreateEvent(C.byref(b)))
        ms = C.c_float(-1.0)
        for start, end in ((s1, s2), (None, s1), (s2, None)):
            ok(rt.aclrtRecordEvent(a, start))
            ok(rt.aclrtRecordEvent(b, end))
            for s in (s1, s2, None):
                ok(rt.aclrtSynchronizeStream(s))
            expect(rt.aclrtEventElapsedTime(C.byref(ms), a, b), RT_PARAM, "aclrtEventElapsedTime",
                   "same stream")
            assert ms.value == -1.0
        for s in (s1, None):
            ok(rt.aclrtRecordEvent(a, s))               # the latest record decides the stream
            ok(rt.aclrtRecordEvent(b, s))
            ok(rt.aclrtSynchronizeStream(s))
            ok(rt.aclrtEventElapsedTime(C.byref(ms), a, b))
            assert ms.value >= 0.0
        for e in (a, b):
            ok(rt.aclrtDestroyEvent(e))
        for s in (s1, s2):
            ok(rt.aclrtDestroyStream(s))
    """)


def test_raw_only_events_with_a_timeline_can_be_timed(raw) -> None:
    """aclrtCreateEvent's events carry the timeline by default; an event made by aclrtCreateEventWithFlag without
    ACL_EVENT_TIME_LINE (0x8) records no time, and timing it is refused (107000, the simulator's choice: what CANN
    answers is not in cann-abi.md §8.8)."""
    raw("""
        init(0)
        s = stream()
        made = {}
        for name, flag in (("default", None), ("time line", 0x8), ("sync + time line", 0x9), ("sync only", 0x1)):
            e = vp()
            ok(rt.aclrtCreateEvent(C.byref(e)) if flag is None else rt.aclrtCreateEventWithFlag(C.byref(e), flag))
            ok(rt.aclrtRecordEvent(e, s))
            made[name] = e
        ok(rt.aclrtSynchronizeStream(s))
        ms = C.c_float()
        for a, b in (("default", "time line"), ("time line", "sync + time line")):
            ok(rt.aclrtEventElapsedTime(C.byref(ms), made[a], made[b]))
        expect(rt.aclrtEventElapsedTime(C.byref(ms), made["default"], made["sync only"]), RT_PARAM,
               "end event", "ACL_EVENT_TIME_LINE")
        expect(rt.aclrtEventElapsedTime(C.byref(ms), made["sync only"], made["default"]), RT_PARAM, "start event")
        for e in made.values():
            ok(rt.aclrtDestroyEvent(e))
        ok(rt.aclrtDestroyStream(s))
    """)


def test_binding_events_on_two_streams_are_refused(no_leaks, session: Session) -> None:
    with Stream(session.device) as other, Event(session.device) as start, Event(session.device) as end:
        start.record(session.stream)
        end.record(other)
        end.synchronize()
        start.synchronize()
        with pytest.raises(AclError) as info:
            end.elapsed_ms(start)
        assert info.value.code == 107000 and "same stream" in str(info.value)
        end.record(session.stream)
        end.synchronize()
        assert end.elapsed_ms(start) >= 0.0
    with session.upload(np.ones((1, 1, 4, 4, 4), np.float32)) as g, session.empty((1, 1, 2, 2, 2)) as out:
        times = session.timed_backward(g, (4, 4, 4), (1, 1, 2, 2, 2), out=out, repeat=3)
        assert len(times) == 3 and all(t >= 0.0 for t in times)



# ------------------------------------------------------------------------------- aclGetRecentErrMsg keeps its text

def test_raw_recent_error_message_is_kept_and_newest_first(raw) -> None:
    # RT acl.cpp aclGetRecentErrMsgImpl; cann-abi.md §10.2
    raw("""
        ok(rt.aclInit(None))
        expect(rt.aclrtSetDevice(100), RT_DEVID, "device id 100")
        first = err()
        assert err() == first                                   # not cleared by a read
        expect(rt.aclrtSetDevice(101), RT_DEVID)
        assert err() == err().split("\\n")[0] + "\\n" + first  # the new text in front of the old
        ok(rt.aclFinalize())
    """)


def test_binding_two_failures_in_a_row_each_report_their_own_message(no_leaks, session: Session) -> None:
    # cann-abi.md §10.2: the runtime's text holds every message of the thread, newest first; an exception's
    # detail is its own call's message only
    import threading

    from acl_bindings import lib

    def two_failures(out: list) -> None:
        for dev in (100, 101, 101):
            with pytest.raises(AclError) as info:
                lib.aclrtSetDevice(dev)
            out.append(info.value.detail)

    for run_on in ("main", "thread"):
        got: list = []
        if run_on == "main":
            two_failures(got)
        else:
            t = threading.Thread(target=two_failures, args=(got,))
            t.start()
            t.join()
        assert len(got) == 3, got
        for detail, dev in zip(got, (100, 101, 101)):
            assert f"device id {dev} " in detail and "\n" not in detail, (run_on, got)


def test_binding_detail_holds_every_message_since_the_last_read(no_leaks, session: Session) -> None:
    """RT error_manager.cc keeps every report since the last read (oldest first): a failure whose status was not
    checked (so whose message nobody read) comes before the failing call's own message in its detail."""
    from acl_bindings import lib, recent_error_message

    assert lib.unchecked("aclrtSetDevice")(100) != 0   # not read: its message stays in the thread's list
    with pytest.raises(AclError) as info:
        lib.aclrtSetDevice(101)
    lines = info.value.detail.splitlines()
    assert len(lines) == 2 and "device id 100 " in lines[0] and "device id 101 " in lines[1], lines
    assert recent_error_message() == ""                # read once: nothing new
    with pytest.raises(AclError) as info:              # the next failure has its own message only
        lib.aclrtSetDevice(100)
    assert "device id 100 " in info.value.detail and "\n" not in info.value.detail, info.value.detail


# ------------------------------------------------------------------------------- mixed layouts: ViewCopy refuses

def test_raw_mixed_layouts_are_refused_at_view_copy(raw) -> None:
    # OMA contiguous.cpp CheckViewCopyParams: the result keeps the input's format; another than the output's (not
    # ND) is refused, and phase 1 returns 561103 (cann-abi.md §10.1).  An empty gradOut/self returns before.
    raw("""
        INNER_NULLPTR = 561103
        init(0)
        d_in, d_out = malloc(1 << 16), malloc(1 << 16)
        N, Cc, o, i = 2, 3, (4, 6, 8), (2, 3, 4)

        def dims(fmt, n, sp):
            return [n, *sp, Cc] if fmt == NDHWC else [n, Cc, *sp]

        def fwd(x, osz, y):
            ws, ex = u64(), vp()
            rc = op.aclnnUpsampleNearestExact3dGetWorkspaceSize(x, osz, 0.0, 0.0, 0.0, y, C.byref(ws), C.byref(ex))
            return rc, ex.value

        osz = int_array(*o)
        for fo, fi in ((NDHWC, NCDHW), (NCDHW, NDHWC), (NCDHW, NCDHW), (NDHWC, NDHWC), (2, NCDHW)):
            names = {NCDHW: "NCDHW", NDHWC: "NDHWC", 2: "ND"}
            for n in (N, 0):
                isz = int_array(n, Cc, *i)
                go, gi = tensor(dims(fo, n, o), d_in, fmt=fo), tensor(dims(fi, n, i), d_out, fmt=fi)
                rc, ws, ex = phase1(go, osz, isz, gi)
                if fo == fi or fo == 2 or n == 0:
                    ok(rc)
                    ok(nn.aclDestroyAclOpExecutor(ex))
                else:
                    msg = expect(rc, INNER_NULLPTR, "gradOut is " + names[fo], "gradInput is " + names[fi])
                # the forward: self (i) -> out (o)
                x, y = tensor(dims(fo, n, i), d_in, fmt=fo), tensor(dims(fo, n, o), d_out, fmt=fi)
                rc, ex = fwd(x, osz, y)
                if fo == fi or fo == 2 or n == 0:
                    ok(rc)
                    ok(nn.aclDestroyAclOpExecutor(ex))
                else:
                    expect(rc, INNER_NULLPTR, "self is " + names[fo], "out is " + names[fi])
                for t in (go, gi, x, y):
                    ok(nn.aclDestroyTensor(t))
                ok(nn.aclDestroyIntArray(isz))
    """)
