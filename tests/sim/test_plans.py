"""Plans: a repeatable executor per call shape, addresses updated between calls, one-shot fallback."""

from __future__ import annotations

import numpy as np
import pytest

from acl_bindings import sim
from upsample3d_grad import Session, reference


def _case(seed: int, shape=(2, 3, 6, 8, 10)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_repeated_calls_reuse_one_executor(no_leaks: None) -> None:
    with Session(0) as s:
        calls_before = sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize")
        for seed in range(5):
            g = _case(seed)
            got = s.backward(g, (6, 8, 10), (2, 3, 3, 4, 5))
            np.testing.assert_allclose(got, reference.upsample_nearest_exact3d_backward(g, (6, 8, 10),
                                                                                        (2, 3, 3, 4, 5)),
                                       rtol=1e-5, atol=1e-5)
        assert sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize") - calls_before == 1
        assert s.plans.hits == 4 and s.plans.misses == 1
        assert sim.live_handles()["executor"] == 1  # the kept, repeatable executor


def test_address_updates_between_calls_on_device_arrays(no_leaks: None) -> None:
    with Session(0) as s:
        a, b = _case(1), _case(2)
        da, db = s.upload(a), s.upload(b)
        oa, ob = s.empty((2, 3, 3, 4, 5)), s.empty((2, 3, 3, 4, 5))
        for go, out, host in ((da, oa, a), (db, ob, b), (da, ob, a), (db, oa, b)):
            s.backward(go, (6, 8, 10), (2, 3, 3, 4, 5), out=out)
            np.testing.assert_allclose(out.download(),
                                       reference.upsample_nearest_exact3d_backward(host, (6, 8, 10), (2, 3, 3, 4, 5)),
                                       rtol=1e-5, atol=1e-5)
        assert s.plans.misses == 1 and s.plans.hits == 3
        for arr in (da, db, oa, ob):
            arr.close()


def test_plans_off_runs_both_phases_every_call(no_leaks: None) -> None:
    with Session(0, plans=False) as s:
        before = sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize")
        for seed in range(3):
            s.backward(_case(seed), (6, 8, 10), (2, 3, 3, 4, 5))
        assert sim.call_count("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize") - before == 3
        assert sim.live_handles()["executor"] == 0


def test_refused_repeatable_mode_falls_back_to_one_shot(no_leaks: None) -> None:
    with Session(0) as s:
        sim.set_fault("aclSetAclOpExecutorRepeatable:1:561000")
        try:
            g = _case(3)
            for _ in range(3):
                got = s.backward(g, (6, 8, 10), (2, 3, 3, 4, 5))
                np.testing.assert_allclose(got, reference.upsample_nearest_exact3d_backward(
                    g, (6, 8, 10), (2, 3, 3, 4, 5)), rtol=1e-5, atol=1e-5)
        finally:
            sim.set_fault(None)
        # one kept call of that shape, one-shot (it asks for a plan again later), no executor kept
        assert len(s.plans) == 1 and s.last_path == "one-shot" and "561000" in (s.plans.last_refusal or "")
        assert sim.live_handles()["executor"] == 0


def test_distinct_keys_and_eviction(no_leaks: None) -> None:
    with Session(0) as s:
        s.plans.capacity = 2
        for w in (4, 5, 6, 4):
            g = _case(w, (1, 1, 2, 2, w))
            got = s.backward(g, (2, 2, w), (1, 1, 1, 1, 2))
            np.testing.assert_allclose(got, reference.upsample_nearest_exact3d_backward(g, (2, 2, w),
                                                                                        (1, 1, 1, 1, 2)),
                                       rtol=1e-5, atol=1e-5)
        assert len(s.plans) == 2 and s.plans.misses == 4
        assert sim.live_handles()["executor"] == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_plans_under_deferred_streams(no_leaks: None, dtype: type) -> None:
    previous = sim.set_defer(True)
    try:
        with Session(0) as s:
            outs = []
            for seed in range(3):
                g = _case(seed).astype(dtype)
                outs.append((g, s.backward(g, (6, 8, 10), (2, 3, 3, 4, 5))))
            for g, got in outs:
                want = reference.upsample_nearest_exact3d_backward(g, (6, 8, 10), (2, 3, 3, 4, 5))
                np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    finally:
        sim.set_defer(previous)
