"""Prepared calls (``Session.prepare`` / :mod:`upsample3d_grad.fastpath`) on the simulator.

Both modes are covered: ``plan=True`` (phase 1 once, a repeatable executor, addresses
updated when other arrays are passed) and ``plan=False`` (a one-shot call each time: both
phases on the kept tensors and arrays).
Every test compares with the numpy reference, counts the simulator's C calls where the
mode matters, and checks the simulator's live handles (``no_leaks``, listed before
``session`` so that it sees the session closed).  Speed is never asserted here: it is
measured by ``benchmarks/run.py``.
"""

from __future__ import annotations

import gc
import threading
import warnings
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from acl_bindings import AclError, AclnnInnerError, AclParamError, AclTypeError, ClosedError, lib, sim
from upsample3d_grad import Session, checks, reference
from upsample3d_grad.fastpath import PreparedCall
from upsample3d_grad.op import OP

P1, P2 = OP.phase1_name, OP.phase2_name
MODES = pytest.mark.parametrize("plan", [True, False], ids=["plan", "oneshot"])
#: The C functions that make and destroy descriptors
DESCRIPTORS = ("aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray", "aclDestroyIntArray")
BF16 = np.dtype(ml_dtypes.bfloat16)

# (input_size, output_size, scales, layout, dtype)
CASES = [
    ((2, 3, 3, 4, 5), (6, 8, 10), (None, None, None), "NCDHW", np.float32),
    ((1, 2, 3, 3, 4), (5, 7, 9), (None, None, None), "NCDHW", np.float16),
    ((2, 4, 2, 3, 3), (4, 6, 5), (None, None, None), "NDHWC", BF16),
    ((1, 2, 2, 3, 4), (4, 6, 8), (2.0, 2.0, 2.0), "NCDHW", np.float32),
    ((1, 1, 4, 4, 4), (2, 3, 2), (None, None, None), "NDHWC", np.float32),  # downsampling
]


def _phys(size5: tuple[int, ...], layout: str) -> tuple[int, ...]:
    n, c, d, h, w = size5
    return (n, d, h, w, c) if layout == "NDHWC" else (n, c, d, h, w)


def _grad(input_size: tuple[int, ...], output_size: tuple[int, ...], layout: str, dtype: Any,
          seed: int) -> np.ndarray:
    """Small integers: every window sum is exact in float16 and bfloat16 too."""
    shape = _phys((*input_size[:2], *output_size), layout)
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(dtype)


def _want(g: np.ndarray, output_size: tuple[int, ...], input_size: tuple[int, ...], scales: tuple[Any, ...],
          layout: str) -> np.ndarray:
    return reference.upsample_nearest_exact3d_backward(g, output_size, input_size, *scales, layout=layout)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@MODES
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_reference(no_leaks: None, session: Session, plan: bool, case: int) -> None:
    input_size, output_size, scales, layout, dtype = CASES[case]
    g = _grad(input_size, output_size, layout, dtype, case)
    go = session.upload(g, layout)
    gi = session.empty(_phys(input_size, layout), dtype, layout)
    call = session.prepare(go, output_size, input_size, scales, out=gi, plan=plan)
    assert call.plan is plan and call.fallback is None
    for _ in range(3):  # a repeatable executor runs again; a one-shot call runs phase 1 again
        assert call() is gi
        _same(gi.download(), _want(g, output_size, input_size, scales, layout))
    assert call.calls == 3


@MODES
def test_views_with_offset_and_strides(no_leaks: None, session: Session, plan: bool) -> None:
    base = np.random.default_rng(1).integers(-4, 5, (2, 3, 4, 6, 12)).astype(np.float32)
    g = base[:, :, :, :, 1::2]  # non-contiguous, non-zero offset in its base
    go = session.upload(g)
    assert go.offset > 0 and go.strides[-1] == 2
    gi = session.empty((2, 3, 2, 3, 3))
    session.prepare(go, (4, 6, 6), (2, 3, 2, 3, 3), out=gi, plan=plan)()
    _same(gi.download(), _want(np.ascontiguousarray(g), (4, 6, 6), (2, 3, 2, 3, 3), (None,) * 3, "NCDHW"))


@MODES
def test_phase1_runs_once_with_a_plan(no_leaks: None, session: Session, plan: bool) -> None:
    g = _grad((1, 2, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 0)
    go, gi = session.upload(g), session.empty((1, 2, 2, 2, 2))
    p1, p2 = sim.call_count(P1), sim.call_count(P2)
    call = session.prepare(go, (4, 4, 4), (1, 2, 2, 2, 2), out=gi, plan=plan)
    assert sim.live_handles()["executor"] == (1 if plan else 0)
    made = {name: sim.call_count(name) for name in DESCRIPTORS}
    for _ in range(4):
        call()
    assert sim.call_count(P1) - p1 == (1 if plan else 5)  # preparation + one per one-shot call
    assert sim.call_count(P2) - p2 == 4
    # both modes keep the aclTensors and aclIntArrays made at preparation
    assert {name: sim.call_count(name) - n for name, n in made.items()} == dict.fromkeys(DESCRIPTORS, 0)
    call.close()
    assert sim.live_handles()["executor"] == 0
    _same(gi.download(), _want(g, (4, 4, 4), (1, 2, 2, 2, 2), (None,) * 3, "NCDHW"))


@MODES
def test_address_updates_between_calls(no_leaks: None, session: Session, plan: bool) -> None:
    shape_in, out3 = (1, 2, 2, 3, 2), (4, 6, 4)
    grads = [_grad(shape_in, out3, "NCDHW", np.float32, seed) for seed in range(3)]
    gos = [session.upload(g) for g in grads]
    gis = [session.empty(shape_in) for _ in range(2)]
    for gi in gis:
        gi.buffer.memset(0)
    want = [_want(g, out3, shape_in, (None,) * 3, "NCDHW") for g in grads]
    setters = (sim.call_count("aclSetInputTensorAddr"), sim.call_count("aclSetOutputTensorAddr"))
    call = session.prepare(gos[0], out3, shape_in, out=gis[0], plan=plan)
    made = {name: sim.call_count(name) for name in DESCRIPTORS}
    call()
    _same(gis[0].download(), want[0])
    assert not gis[1].download().any()
    # new input and output: both addresses move
    assert call(gos[1], gis[1]) is gis[1]
    _same(gis[1].download(), want[1])
    _same(gis[0].download(), want[0])  # untouched
    # only the input moves; the output stays gis[1]; then a call without arguments keeps both
    call(gos[2])
    _same(gis[1].download(), want[2])
    gis[1].buffer.memset(0)
    call()
    _same(gis[1].download(), want[2])
    # back to the first pair
    call(gos[0], gis[0])
    _same(gis[0].download(), want[0])
    moved = (sim.call_count("aclSetInputTensorAddr") - setters[0],
             sim.call_count("aclSetOutputTensorAddr") - setters[1])
    # the plan updates an address only when it changes: input 3 times, output twice; one-shot never
    assert moved == ((3, 2) if plan else (0, 0))
    # a one-shot call makes an aclTensor for each new array instead (and destroys the one it replaces)
    moves = 0 if plan else 5
    assert {name: sim.call_count(name) - n for name, n in made.items()} == {
        "aclCreateTensor": moves, "aclDestroyTensor": moves, "aclCreateIntArray": 0, "aclDestroyIntArray": 0}


@MODES
def test_deferred_streams(no_leaks: None, plan: bool) -> None:
    previous = sim.set_defer(True)
    try:
        with Session(0) as s:
            shape_in, out3 = (1, 2, 3, 2, 2), (5, 4, 4)
            grads = [_grad(shape_in, out3, "NCDHW", np.float16, seed) for seed in range(3)]
            gos = [s.upload(g) for g in grads]
            gis = [s.empty(shape_in, np.float16) for _ in grads]
            call = s.prepare(gos[0], out3, shape_in, out=gis[0], plan=plan, sync=False)
            syncs = sim.call_count("aclrtSynchronizeStream")
            for go, gi in zip(gos, gis):
                call(go, gi)  # queued only: each launch must keep the addresses it was given
            assert sim.call_count("aclrtSynchronizeStream") == syncs
            for g, gi in zip(grads, gis):
                _same(gi.download(), _want(g, out3, shape_in, (None,) * 3, "NCDHW"))
            synced = s.prepare(gos[1], out3, shape_in, out=gis[0], plan=plan)  # sync=True
            syncs = sim.call_count("aclrtSynchronizeStream")
            synced()
            assert sim.call_count("aclrtSynchronizeStream") == syncs + 1
            _same(gis[0].download(), _want(grads[1], out3, shape_in, (None,) * 3, "NCDHW"))
    finally:
        sim.set_defer(previous)


def test_refused_repeatable_mode_falls_back(no_leaks: None, session: Session) -> None:
    g = _grad((1, 1, 2, 2, 2), (3, 3, 3), "NCDHW", np.float32, 4)
    go, gi = session.upload(g), session.empty((1, 1, 2, 2, 2))
    sim.set_fault("aclSetAclOpExecutorRepeatable:1:561000")
    try:
        call = session.prepare(go, (3, 3, 3), (1, 1, 2, 2, 2), out=gi)
    finally:
        sim.set_fault(None)
    assert not call.plan and call.fallback and "561000" in call.fallback
    assert sim.live_handles()["executor"] == 0
    p1 = sim.call_count(P1)
    call()
    call()
    assert sim.call_count(P1) - p1 == 2
    _same(gi.download(), _want(g, (3, 3, 3), (1, 1, 2, 2, 2), (None,) * 3, "NCDHW"))


def test_empty_batch(no_leaks: None, session: Session) -> None:
    go = session.empty((0, 2, 4, 4, 4))
    gi = session.empty((0, 2, 2, 2, 2))
    for plan in (True, False):
        call = session.prepare(go, (4, 4, 4), (0, 2, 2, 2, 2), out=gi, plan=plan)
        assert call.workspace_size == 0
        call()
        call.close()


def test_other_thread(no_leaks: None, session: Session) -> None:
    g = _grad((1, 2, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 5)
    go, gi = session.upload(g), session.empty((1, 2, 2, 2, 2))
    call = session.prepare(go, (4, 4, 4), (1, 2, 2, 2, 2), out=gi)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                call()
        except BaseException as exc:  # reported below
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors
    assert call.calls == 3
    _same(gi.download(), _want(g, (4, 4, 4), (1, 2, 2, 2, 2), (None,) * 3, "NCDHW"))


def test_a_dropped_call_is_owned_by_its_session_until_it_closes(no_leaks: None) -> None:
    """A session owns what it made: a prepared call dropped unclosed (or one an interrupt left unreachable) is
    released by the session's close(), never left to the garbage collector."""
    with Session(0) as session:
        go, gi = session.upload(np.ones((1, 1, 4, 4, 4), np.float32)), session.empty((1, 1, 2, 2, 2))
        executors = sim.live_handles()["executor"]
        for plan in (True, False):
            call = session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=gi, plan=plan)
            call()
            del call
        gc.collect()
        assert sim.live_handles()["executor"] == executors + 1  # the plan's: still owned by the session
        assert gi.download().ravel().tolist() == [8.0] * 8
        closed = session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=gi)
        closed.close()  # a closed one is the session's no more
        assert sim.live_handles()["executor"] == executors + 1
    # (no_leaks: the session's close released the dropped ones)


# --------------------------------------------------------------------------- errors

def test_prepare_rejects_bad_arguments(no_leaks: None, session: Session) -> None:
    g = np.ones((1, 1, 4, 4, 4), np.float32)
    go, gi = session.upload(g), session.empty((1, 1, 2, 2, 2))
    with pytest.raises(AclParamError) as info:
        session.prepare(g, (4, 4, 4), (1, 1, 2, 2, 2), out=gi)  # numpy, not a device array
    assert info.value.code == 161002
    with pytest.raises(AclParamError) as info:
        session.prepare(go, (4, 4, 5), (1, 1, 2, 2, 2), out=gi)  # gradOut shape does not match outputSize
    assert info.value.code == 161002 and "gradOut" in str(info.value)
    with pytest.raises(AclParamError) as info:
        session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), (1.0, 2.0), out=gi)
    assert info.value.code == 161002
    with pytest.raises(AclParamError) as info:
        session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=session.empty((1, 1, 2, 2, 2), np.float16))
    assert info.value.code == 161002 and "dtype" in str(info.value)
    same = session.empty((1, 1, 4, 4, 4))
    with pytest.raises(AclParamError) as info:
        session.prepare(same, (4, 4, 4), (1, 1, 4, 4, 4), out=same)
    assert "overlap" in str(info.value)
    with Session(0) as other:
        foreign = other.empty((1, 1, 2, 2, 2))
        with pytest.raises(AclParamError) as info:
            session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=foreign)
        assert "another Session" in str(info.value)
    gi.close()
    with pytest.raises(ClosedError):
        session.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=gi)
    assert not session._prepared  # nothing half-made was kept
    assert sim.live_handles()["executor"] == 0


@MODES
def test_call_rejects_unlike_arrays(no_leaks: None, session: Session, plan: bool) -> None:
    g = _grad((1, 2, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 6)
    go, gi = session.upload(g), session.empty((1, 2, 2, 2, 2))
    call = session.prepare(go, (4, 4, 4), (1, 2, 2, 2, 2), out=gi, plan=plan)
    bad_inputs = [session.upload(g.astype(np.float16)),                  # dtype
                  session.upload(np.ones((1, 2, 4, 4, 5), np.float32)),  # shape
                  session.upload(np.asfortranarray(g)),                  # strides
                  session.upload(g.transpose(0, 2, 3, 4, 1).copy(), "NDHWC"),  # layout
                  g]                                                     # not a device array
    for bad in bad_inputs:
        with pytest.raises(AclParamError) as info:
            call(bad)
        assert info.value.code == 161002
    with pytest.raises(AclParamError):
        call(out=session.empty((1, 2, 2, 2, 3)))
    with pytest.raises(AclParamError) as info:
        call(out=go)  # the input's own buffer
    assert "overlap" in str(info.value)
    with Session(0) as other:
        with pytest.raises(AclParamError):
            call(other.upload(g))
    call()  # still bound to the first arrays
    _same(gi.download(), _want(g, (4, 4, 4), (1, 2, 2, 2, 2), (None,) * 3, "NCDHW"))


@MODES
def test_a_call_refuses_an_array_whose_device_buffer_was_closed(no_leaks: None, plan: bool) -> None:
    from acl_bindings import DeviceBuffer
    from upsample3d_grad.arrays import DeviceArray

    s = Session(0)
    g = _grad((1, 1, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 7)
    go, gi = s.upload(g), s.empty((1, 1, 2, 2, 2))
    buf = DeviceBuffer(s.device, 64)
    out = DeviceArray(s, buf, (1, 1, 2, 2, 2), np.dtype(np.float32), "NCDHW", (8, 8, 4, 2, 1), 0)
    call = s.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=out, plan=plan)
    call()
    p2 = sim.call_count(P2)
    buf.close()  # freed under its array (aclrtFree)
    with pytest.raises(ClosedError, match="gradInput: this device array is closed"):
        call()
    with pytest.raises(ClosedError):
        s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), out=out)
    assert sim.call_count(P2) == p2  # nothing reached the library
    call(out=gi)
    _same(gi.download(), _want(g, (4, 4, 4), (1, 1, 2, 2, 2), (None,) * 3, "NCDHW"))
    s.close()


@MODES
def test_closed_objects(no_leaks: None, plan: bool) -> None:
    s = Session(0)
    g = _grad((1, 1, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 7)
    go, gi = s.upload(g), s.empty((1, 1, 2, 2, 2))
    call = s.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=gi, plan=plan)
    other = s.upload(g)
    other.close()
    with pytest.raises(ClosedError):
        call(other)
    call()  # (its arrays are open)
    p2 = sim.call_count(P2)
    gi.close()
    with pytest.raises(ClosedError):
        call()  # its gradInput was released: nothing may reach the library
    spare, gi = s.upload(g), s.empty((1, 1, 2, 2, 2))
    call(spare, gi)
    go.close()  # the array it replaced is not checked any more
    call()
    spare.buffer.close()  # a buffer closed under its array
    with pytest.raises(ClosedError):
        call()
    with pytest.raises(ClosedError):
        call(out=s.empty((1, 1, 2, 2, 2)))
    go = s.upload(g)
    call(go)
    assert sim.call_count(P2) == p2 + 3  # the calls on closed memory never reached the library
    fresh = s.empty((1, 1, 2, 2, 2))
    call(out=fresh)  # a new, open array of the same layout replaces it
    _same(fresh.download(), _want(g, (4, 4, 4), (1, 1, 2, 2, 2), (None,) * 3, "NCDHW"))
    call.close()
    call.close()  # idempotent
    with pytest.raises(ClosedError):
        call()
    again = s.prepare(go, (4, 4, 4), (1, 1, 2, 2, 2), out=fresh, plan=plan)
    s.close()  # closes the prepared calls it made
    assert again.closed
    with pytest.raises(ClosedError):
        again()


# --------------------------------------------------------------------------- injected faults

HANDLE_CONSTRUCTORS = {"aclCreateTensor", "aclCreateIntArray"}
#: Every C function a prepared call or its preparation may use (the simulator counts calls by name).
OBSERVED = sorted({"aclDestroyAclOpExecutor", "aclSetInputTensorAddr", "aclSetOutputTensorAddr",
                   "aclrtSynchronizeStream", "aclrtGetCurrentContext", OP.phase1_name, OP.phase2_name, *DESCRIPTORS,
                   "aclSetAclOpExecutorRepeatable", "aclrtMalloc", "aclrtFree",
                   "aclrtSetCurrentContext", "aclrtSynchronizeStreamWithTimeout"})
INJECTED = 507899  # a runtime error code (cann-abi.md §3.4); any non-zero status would do


def _calls_of(action: Any) -> list[tuple[str, int]]:
    before = {name: sim.call_count(name) for name in OBSERVED}
    action()
    return [(name, nth) for name in OBSERVED for nth in range(1, sim.call_count(name) - before[name] + 1)]


def _expect_injected(exc: BaseException | None, func: str) -> None:
    assert isinstance(exc, AclError), f"{func}: {exc!r}"
    if func in HANDLE_CONSTRUCTORS:
        assert isinstance(exc, AclnnInnerError) and exc.code == 561103, (func, exc)
    else:
        assert exc.code == INJECTED, (func, exc)
    assert exc.func == func and f"{func}: injected fault" in exc.detail, (func, exc.func, exc.detail)


@MODES
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "nosync"])
def test_every_call_of_a_call_fails_cleanly(no_leaks: None, plan: bool, sync: bool) -> None:
    """Each C call of one prepared call fails once: the right AclError, no leak, and the next call works."""
    g = _grad((1, 2, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 8)
    want = _want(g, (4, 4, 4), (1, 2, 2, 2, 2), (None,) * 3, "NCDHW")
    with Session(0) as s:
        gos = [s.upload(g), s.upload(g)]
        gi = s.empty((1, 2, 2, 2, 2))
        call = s.prepare(gos[0], (4, 4, 4), (1, 2, 2, 2, 2), out=gi, plan=plan, sync=sync)
        observed = _calls_of(lambda: call(gos[1]))  # includes an address update in plan mode
        call(gos[0])
        # a plan points its executor at the new input; a one-shot call makes it an aclTensor (its int arrays and
        # the output's aclTensor are kept)
        expected = {P2, "aclrtGetCurrentContext"} | ({"aclSetInputTensorAddr"} if plan
                                                     else {P1, "aclCreateTensor", "aclDestroyTensor"})
        if sync:
            expected.add("aclrtSynchronizeStream")
        assert {func for func, _ in observed} == expected
        for func, nth in observed:
            s.synchronize()  # (a call with sync=False may still be writing gi)
            gi.buffer.memset(0)
            exc: BaseException | None = None
            gc.disable()  # no unrelated finalizer may take the fault
            sim.set_fault(f"{func}:{nth}:{INJECTED}")
            try:
                call(gos[1])  # the input moves from gos[0] to gos[1] every time
            except AclError as err:
                exc = err
            finally:
                sim.set_fault(None)
                gc.enable()
            _expect_injected(exc, func)
            del exc
            call(gos[0])  # the prepared call still works (and is back on gos[0])
            _same(gi.download(), want)
        call.close()  # destroys again whatever the library refused to destroy


@MODES
def test_every_call_of_preparation_fails_cleanly(no_leaks: None, plan: bool) -> None:
    g = _grad((1, 2, 2, 2, 2), (4, 4, 4), "NCDHW", np.float32, 9)
    want = _want(g, (4, 4, 4), (1, 2, 2, 2, 2), (None,) * 3, "NCDHW")
    with Session(0) as s:
        go, gi = s.upload(g), s.empty((1, 2, 2, 2, 2))
        observed = _calls_of(lambda: s.prepare(go, (4, 4, 4), (1, 2, 2, 2, 2), out=gi, plan=plan).close())
        assert (P1, 1) in observed
        before = sim.live_handles()
        for func, nth in observed:
            made: PreparedCall | None = None
            exc: BaseException | None = None
            gc.disable()
            sim.set_fault(f"{func}:{nth}:{INJECTED}")
            try:
                made = s.prepare(go, (4, 4, 4), (1, 2, 2, 2, 2), out=gi, plan=plan)
            except AclError as err:
                exc = err
            finally:
                sim.set_fault(None)
                gc.enable()
            if made is not None:
                # a refused repeatable mode falls back to one-shot; closing is not part of preparation; the
                # workspace comes from the session's allocator (its cache, or a retry after freeing it)
                assert func in ("aclSetAclOpExecutorRepeatable", "aclDestroyAclOpExecutor", "aclDestroyTensor",
                                "aclDestroyIntArray", "aclrtSynchronizeStream", "aclrtFree", "aclrtMalloc",
                                "aclrtGetCurrentContext"), (func, nth)
                if func == "aclSetAclOpExecutorRepeatable":
                    assert not made.plan and made.fallback
                made()
                _same(gi.download(), want)
                made.close()
            else:
                _expect_injected(exc, func)
            del exc, made
            gc.collect()
            assert sim.live_handles() == before, (func, nth)


# --------------------------------------------------------------------------- helpers

def test_unchecked_functions_refuse_mistyped_arguments() -> None:
    # the prepared call's C functions are lib's unchecked ones: their argtypes refuse what C would misread
    import ctypes

    create = lib.unchecked("aclCreateTensor")
    dims = (ctypes.c_int64 * 5)(1, 1, 2, 2, 2)
    good = (dims, ctypes.c_uint64(5), 0, dims, ctypes.c_int64(0), 30, dims, ctypes.c_uint64(5), ctypes.c_void_p(0))
    with pytest.raises(TypeError, match="argument"):
        create(*good[:-1])                                                  # arity
    with pytest.raises(ctypes.ArgumentError, match="argument 1"):
        create((ctypes.c_int32 * 5)(), *good[1:])                           # int32 elements for int64_t *
    with pytest.raises(ctypes.ArgumentError, match="argument 2"):
        lib.unchecked(P2)(None, 0.5, None, None)                            # a double for uint64_t
    # out-parameters take their cell itself (the hot paths' form) or its byref, of the pointed-to type only
    get_context = lib.unchecked("aclrtGetCurrentContext")
    for wrong in (ctypes.c_int32(), ctypes.byref(ctypes.c_int32()), ctypes.c_uint64()):
        with pytest.raises(ctypes.ArgumentError, match="argument 1"):
            get_context(wrong)                                              # a 4- or 8-byte int for void **
    with Session(0) as session, session.device.active():
        for cell in (ctypes.c_void_p(), ctypes.c_void_p(1)):
            assert get_context(cell) == 0 and cell.value == session.device.context   # written through
        cell = ctypes.c_void_p()
        assert get_context(ctypes.byref(cell)) == 0 and cell.value == session.device.context


def test_repeated_device_array_calls_are_checked_as_the_first() -> None:
    """A repeat of a checked call on device arrays may skip the host checks (its kept call passed them), but
    never a check it did not pass: a failure is never remembered, strictness is part of it, mixed scales warn
    on every call, and a wrong argument type is refused on every call."""
    with Session(0) as s:
        go, gi = s.upload(np.ones((1, 1, 4, 4, 4), np.float32)), s.empty((1, 1, 2, 2, 2))
        for _ in range(2):
            s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), out=gi)
            s.backward(go, [4, 4, 4], (1, 1, 2, 2, 2), 2.0, 2.0, 2.0, out=gi)
        for _ in range(2):  # a failure is never remembered as a pass
            with pytest.raises(AclParamError):
                s.backward(go, (4, 4, 5), (1, 1, 2, 2, 2), out=gi)
        # lenient first, then strict: strict rejects scales that disagree with the sizes
        s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), 1.5, 1.5, 1.5, out=gi, strict=False)
        for _ in range(2):
            with pytest.raises(AclParamError):
                s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), 1.5, 1.5, 1.5, out=gi)
        for _ in range(2):  # a bool is not an int, on a repeat as on a first call
            with pytest.raises(AclTypeError):
                s.backward(go, (4, 4, 4), (True, 1, 2, 2, 2), out=gi)
            with pytest.raises(AclTypeError):
                s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), True, 2.0, 2.0, out=gi)
        for _ in range(2):  # mixed scales warn on every call
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                s.backward(go, (4, 4, 4), (1, 1, 2, 2, 2), 2.0, None, None, out=gi)
            assert any(issubclass(w.category, checks.MixedScalesWarning) for w in caught)
