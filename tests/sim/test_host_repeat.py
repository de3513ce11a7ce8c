"""The numpy-in, numpy-out calls of a Session repeat cheaply (issue 36): a call whose key (shape, dtype, strides,
layout, sizes and scales with their types, strict) passed the host checks once runs again on the arrays kept with
its call: one copy up, the launch, one copy down.  Whatever changes in the key takes the full call, with the same
results and errors as a first call."""

from __future__ import annotations

import numpy as np
import pytest

from acl_bindings import AclnnParamError, sim
from upsample3d_grad import Session, reference

G = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT, IN = (2, 2, 2), (2, 2, 1, 1, 1)


def _calls_of(action) -> dict[str, int]:
    names = ("aclrtMemcpy", "aclrtMalloc", "aclrtFree", "aclCreateTensor", "aclnnUpsampleNearestExact3dBackward",
             "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclrtSynchronizeStream")
    before = {n: sim.call_count(n) for n in names}
    action()
    return {n: sim.call_count(n) - v for n, v in before.items()}


def test_a_repeated_key_runs_one_copy_each_way_the_launch_and_one_sync(no_leaks: None) -> None:
    with Session(0) as s:
        for _ in range(3):
            assert s.backward(G, OUT, IN).ravel().tolist() == [36.0, 100.0, 164.0, 228.0]
        calls = _calls_of(lambda: s.backward(G + 1, OUT, IN))
        assert calls == {"aclrtMemcpy": 2, "aclrtMalloc": 0, "aclrtFree": 0, "aclCreateTensor": 0,
                         "aclnnUpsampleNearestExact3dBackward": 1,
                         "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize": 0, "aclrtSynchronizeStream": 1}


def test_sizes_given_as_lists_repeat_as_tuples_do(no_leaks: None) -> None:
    with Session(0) as s:
        s.backward(G, OUT, IN)
        for sizes in ((list(OUT), list(IN)), (OUT, list(IN)), (list(OUT), IN)):
            calls = _calls_of(lambda sizes=sizes: s.backward(G, *sizes))
            assert calls["aclCreateTensor"] == 0 and calls["aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"] == 0
        with pytest.raises(AclnnParamError) as err:  # a bad size in a list: still its code, before any device call
            s.backward(G, [2, 2, 3], list(IN))
        assert err.value.code == 161002


def test_each_repeat_reads_its_own_input_and_returns_a_new_array(session: Session) -> None:
    rng = np.random.default_rng(36)
    results = []
    for _ in range(4):
        g = rng.integers(-8, 8, (2, 3, 4, 6, 5)).astype(np.float32)  # (integers: sums exact in any order)
        got = session.backward(g, (4, 6, 5), (2, 3, 2, 3, 2))
        np.testing.assert_array_equal(got, reference.upsample_nearest_exact3d_backward(g, (4, 6, 5), (2, 3, 2, 3, 2)))
        assert got.flags.c_contiguous and got.flags.writeable and got.flags.owndata
        results.append(got)
    results[0][...] = np.nan  # a result is the caller's own
    assert not np.isnan(results[1]).any()


@pytest.mark.parametrize("change", ["strides", "dtype", "layout", "scales", "sizes", "float sizes", "int scales"])
def test_a_changed_key_takes_the_full_call_with_its_results_and_errors(session: Session, change: str) -> None:
    session.backward(G, OUT, IN)
    session.backward(G, OUT, IN)  # kept
    if change == "strides":
        big = np.zeros((2, 2, 2, 2, 4), np.float32)
        big[..., ::2] = G
        got = session.backward(big[..., ::2], OUT, IN)
        assert got.ravel().tolist() == [36.0, 100.0, 164.0, 228.0]
    elif change == "dtype":
        got = session.backward(G.astype(np.float16), OUT, IN)
        assert got.dtype == np.float16 and got.ravel().tolist() == [36.0, 100.0, 164.0, 228.0]
    elif change == "layout":
        with pytest.raises(AclnnParamError) as info:
            session.backward(G, OUT, IN, layout="NHWC")
        assert info.value.code == 161002
    elif change == "scales":
        with pytest.raises(AclnnParamError) as info:  # all three > 0: outputSize must agree with them
            session.backward(G, OUT, IN, 7.0, 7.0, 7.0)
        assert info.value.code == 161002
    elif change == "sizes":
        with pytest.raises(AclnnParamError) as info:  # the same array, an outputSize that does not match it
            session.backward(G, (2, 2, 3), IN)
        assert info.value.code == 161002 and "gradOut" in info.value.detail
    elif change == "float sizes":
        with pytest.raises((AclnnParamError, TypeError, ValueError)):  # equal to the kept key's ints, not ints
            session.backward(G, (2.0, 2.0, 2.0), IN)
    else:
        got = session.backward(G, OUT, IN, 0, 0, 0)  # 0 == 0.0 == None ("not given"), another type: full call
        assert got.ravel().tolist() == [36.0, 100.0, 164.0, 228.0]
    assert session.backward(G, OUT, IN).ravel().tolist() == [36.0, 100.0, 164.0, 228.0]  # the kept key still works


def test_a_misaligned_array_of_a_kept_key_is_refused_as_in_a_first_call(session: Session) -> None:
    session.backward(G, OUT, IN)
    session.backward(G, OUT, IN)
    raw = np.zeros(G.nbytes + 1, np.uint8)
    odd = raw[1:].view(np.float32).reshape(G.shape)  # C-contiguous, the same key, an odd address
    odd[...] = G
    with pytest.raises(AclnnParamError) as info:
        session.backward(odd, OUT, IN)
    assert info.value.code == 161002 and "not aligned" in info.value.detail


def test_the_forward_repeats_the_same_way(session: Session) -> None:
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    want = reference.upsample_nearest_exact3d(x, (3, 3, 3))
    session.forward(x, (3, 3, 3))
    calls = _calls_of(lambda: np.testing.assert_array_equal(session.forward(x, (3, 3, 3)), want))
    assert calls["aclrtMemcpy"] == 2 and calls["aclrtMalloc"] == 0 and calls["aclCreateTensor"] == 0


def test_kept_arrays_go_with_an_evicted_call_with_empty_cache_and_with_the_session(no_leaks: None) -> None:
    before = sim.live_handles()["device_buffer"]
    with Session(0) as s:
        s.plans.capacity = 2
        shapes = [(1, 1, 2, 2, 2), (1, 2, 2, 2, 2), (2, 1, 2, 2, 2)]
        for _ in range(2):
            for shape in shapes:  # each evicts the least recently used, and its kept arrays
                g = np.ones(shape, np.float32)
                got = s.backward(g, (2, 2, 2), (*shape[:2], 1, 1, 1))
                assert (got == 8).all()
        s.empty_cache()
        assert sim.live_handles()["device_buffer"] == before  # nothing kept after empty_cache
        assert (s.backward(np.ones(shapes[0], np.float32), (2, 2, 2), (1, 1, 1, 1, 1)) == 8).all()
    assert sim.live_handles()["device_buffer"] == before
