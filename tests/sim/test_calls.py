"""The generic call engine (acl_bindings.engine, acl_bindings.prepared) runs an operator from its declaration alone.

The operators below are declared here, by name and argument schema only, independently of the package's own
declaration (upsample3d_grad.op): whatever these tests get right comes from the generic code.  The second one,
the forward, is known to no module of the packages at all.
"""

from __future__ import annotations

import numpy as np
import pytest

from acl_bindings import TwoPhaseOp, sim
from acl_bindings.engine import plan_key, run_once
from acl_bindings.meta import TensorArg
from acl_bindings.op import ArgKind, double, input_tensor, int_array, output_tensor
from acl_bindings.prepared import PreparedCall
from upsample3d_grad import Session, reference
from upsample3d_grad.reference import forward as reference_forward

DECLARED = TwoPhaseOp("UpsampleNearestExact3dBackward", (
    input_tensor("gradOut"), int_array("outputSize"), int_array("inputSize"),
    double("scalesD"), double("scalesH"), double("scalesW"), output_tensor("gradInput")))

OUT_SIZE, IN_SIZE = (6, 8, 10), (2, 3, 3, 4, 5)


def _case(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 3, *OUT_SIZE)).astype(np.float32)


def _want(g: np.ndarray) -> np.ndarray:
    return reference.upsample_nearest_exact3d_backward(g, OUT_SIZE, IN_SIZE)


def test_the_schema_says_which_tensor_is_input_or_output_k() -> None:
    assert DECLARED.inputs == (0,) and DECLARED.outputs == (6,)
    assert [a.kind for a in DECLARED.schema].count(ArgKind.DOUBLE) == 3
    with pytest.raises(TypeError, match="expected Arg values"):
        TwoPhaseOp("Whatever", (input_tensor("x"), "out"))  # type: ignore[arg-type]


def test_a_declared_operator_runs_on_session_arrays_with_plans_and_address_updates(no_leaks: None) -> None:
    with Session(0) as s:
        a, b = _case(1), _case(2)
        da, db = s.upload(a), s.upload(b)
        oa, ob = s.empty(IN_SIZE), s.empty(IN_SIZE)
        before = sim.call_count(DECLARED.phase1_name)
        for go, out, host in ((da, oa, a), (db, ob, b), (da, ob, a)):
            s.run(DECLARED, go, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, out)
            assert s.last_path == "plan"
            np.testing.assert_allclose(out.download(), _want(host), rtol=1e-5, atol=1e-5)
        assert sim.call_count(DECLARED.phase1_name) - before == 1  # phase 1 once; then addresses are rebound
        assert s.plans.misses == 1 and s.plans.hits == 2


def test_a_declared_operator_runs_one_shot(no_leaks: None) -> None:
    with Session(0, plans=False) as s:
        g = _case(3)
        go, gi = s.upload(g), s.empty(IN_SIZE)
        s.run(DECLARED, go, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, gi)
        assert s.last_path == "one-shot"
        np.testing.assert_allclose(gi.download(), _want(g), rtol=1e-5, atol=1e-5)
        assert sim.live_handles()["executor"] == 0
        # borrowed memory: run_once over descriptions of memory it does not own
        out2 = s.empty(IN_SIZE)
        desc = TensorArg(out2.shape, out2.dtype, out2.strides, out2.offset, int(out2.acl_format), out2.storage_dims,
                         out2.buffer.ptr)
        run_once(DECLARED, (go.arg, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, desc), s.workspace.reserve, s.stream)
        np.testing.assert_allclose(out2.download(), _want(g), rtol=1e-5, atol=1e-5)


def test_arguments_are_checked_against_the_schema(no_leaks: None) -> None:
    with Session(0) as s:
        go, gi = s.upload(_case(4)), s.empty(IN_SIZE)
        with pytest.raises(TypeError, match=r"expected 7 arguments \(gradOut, outputSize"):
            s.run(DECLARED, go, OUT_SIZE, IN_SIZE, gi)
        with pytest.raises(ValueError, match="gradInput: expected a DeviceArray, got ndarray"):
            s.run(DECLARED, go, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, np.zeros(IN_SIZE, np.float32))
        with Session(0) as other:
            foreign = other.empty(IN_SIZE)
            with pytest.raises(ValueError, match="gradInput: this DeviceArray belongs to another Session"):
                s.run(DECLARED, go, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, foreign)


def test_the_plan_key_leaves_addresses_out(no_leaks: None) -> None:
    with Session(0) as s:
        da, db = s.upload(_case(5)), s.upload(_case(6))
        gi = s.empty(IN_SIZE)
        key_a = plan_key(DECLARED, (da, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, gi))
        key_b = plan_key(DECLARED, (db, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, gi))
        assert key_a == key_b and da.buffer.ptr != db.buffer.ptr
        assert key_a != plan_key(DECLARED, (da, OUT_SIZE, IN_SIZE, 2.0, 2.0, 2.0, gi))


@pytest.mark.parametrize("plan", [True, False], ids=["plan", "one-shot"])
def test_the_generic_prepared_call_runs_a_declared_operator(no_leaks: None, plan: bool) -> None:
    with Session(0) as s:
        a, b = _case(7), _case(8)
        da, db, gi = s.upload(a), s.upload(b), s.empty(IN_SIZE)
        call = PreparedCall(s, DECLARED, (da, OUT_SIZE, IN_SIZE, 0.0, 0.0, 0.0, gi), plan=plan)
        assert call.plan is plan
        assert call.run() is gi
        np.testing.assert_allclose(gi.download(), _want(a), rtol=1e-5, atol=1e-5)
        call.run(((0, db),))  # the input moves to another array of the same layout
        np.testing.assert_allclose(gi.download(), _want(b), rtol=1e-5, atol=1e-5)
        assert "outputSize=(6, 8, 10)" in repr(call)
        call.close()


# --------------------------------------------------------------------------- a second operator

#: The forward operator, declared by its schema alone (cann-abi.md §1.4): no generic code knows it
FORWARD = TwoPhaseOp("UpsampleNearestExact3d", (
    input_tensor("self"), int_array("outputSize"), double("scalesD"), double("scalesH"), double("scalesW"),
    output_tensor("out")))


@pytest.mark.parametrize("plans", [True, False], ids=["plans", "one-shot"])
def test_a_second_operator_runs_through_the_generic_session(no_leaks: None, plans: bool) -> None:
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((1, 2, 2, 3, 4)).astype(np.float32) for _ in range(2)]
    out3 = (4, 5, 7)
    with Session(0, plans=plans) as s:
        dxs, y = [s.upload(x) for x in xs], s.empty((1, 2, *out3))
        for dx, x in ((dxs[0], xs[0]), (dxs[1], xs[1]), (dxs[0], xs[0])):
            s.run(FORWARD, dx, out3, 0.0, 0.0, 0.0, y)
            assert s.last_path == ("plan" if plans else "one-shot")
            want = reference_forward.upsample_nearest_exact3d_forward(x, out3)
            np.testing.assert_array_equal(y.download(), want)  # the forward copies elements: bit for bit
        call = PreparedCall(s, FORWARD, (dxs[1], out3, 0.0, 0.0, 0.0, y), plan=plans)
        call.run()
        np.testing.assert_array_equal(y.download(), reference_forward.upsample_nearest_exact3d_forward(xs[1], out3))
        call.close()
