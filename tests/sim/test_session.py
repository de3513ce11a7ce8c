"""The operator through every entry point, on the simulator, against the numpy reference."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import upsample3d_grad as ug
from acl_bindings import AclError, AclnnParamError, ClosedError, Format, IntArray, Tensor
from upsample3d_grad import Session, reference
from upsample3d_grad.op import (
    aclnnUpsampleNearestExact3dBackward,
    aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


def test_sample_through_session(no_leaks: None, session: Session) -> None:
    out = session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1))
    assert out.shape == (2, 2, 1, 1, 1) and out.dtype == np.float32
    assert out.ravel().tolist() == EXPECTED


def test_sample_through_module_function() -> None:
    assert ug.upsample_nearest_exact3d_backward(SAMPLE, [2, 2, 2], [2, 2, 1, 1, 1]).ravel().tolist() == EXPECTED


def test_sample_through_graph_form() -> None:
    # output_size defaults to (0,0,0): taken from grad_output; scales default to "not given"
    assert ug.UpsampleNearestExact3dGrad(SAMPLE, input_size=(2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED
    out = ug.UpsampleNearestExact3dGrad(SAMPLE, (2, 2, 1, 1, 1), output_size=(2, 2, 2), scales=(2.0, 2.0, 2.0))
    assert out.ravel().tolist() == EXPECTED


def test_sample_through_faithful_two_phase_api(no_leaks: None, session: Session) -> None:
    go = session.upload(SAMPLE)
    gi = session.empty((2, 2, 1, 1, 1))
    with IntArray([2, 2, 2]) as out_size, IntArray([2, 2, 1, 1, 1]) as in_size:
        size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
            go.tensor, out_size, in_size, 0.0, 0.0, 0.0, gi.tensor)
        assert size > 0  # the simulator asks for a real workspace
        ws = session.workspace.reserve(size)
        aclnnUpsampleNearestExact3dBackward(ws, size, executor, session.stream)
        assert executor.closed  # phase 2 consumed the single-use executor
    assert gi.download().ravel().tolist() == EXPECTED
    go.close()
    gi.close()


def test_faithful_api_reports_cann_codes(session: Session) -> None:
    with IntArray([2, 2, 2]) as out_size, IntArray([2, 2, 1, 1, 1]) as in_size:
        with pytest.raises(AclnnParamError) as info:
            aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(None, out_size, in_size, 0, 0, 0, None)
    assert info.value.code == 161001
    assert "gradOut" in info.value.detail  # the simulator's recent-error message


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_dtypes_and_layouts(session: Session, dtype: np.dtype, layout: str) -> None:
    rng = np.random.default_rng(1)
    n, c, o, i = 2, 3, (5, 7, 9), (2, 3, 4)
    shape = (n, c, *o) if layout == "NCDHW" else (n, *o, c)
    g = rng.standard_normal(shape).astype(dtype)
    got = session.backward(g, o, (n, c, *i), layout=layout)
    want = reference.upsample_nearest_exact3d_backward(g, o, (n, c, *i), layout=layout)
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    _assert_close(got, want)


def _assert_close(got: np.ndarray, want: np.ndarray, bound: np.ndarray | None = None) -> None:
    """fp32: tight; fp16/bf16: within one rounding of the float32 result.

    *bound* is the float32 summation-order bound per element (two float32 sums of the same n
    terms in different orders differ by at most 2(n-1)*eps*sum|x|); without it, 1e-5.
    """
    g32, w32 = got.astype(np.float32), want.astype(np.float32)
    slack = np.float32(1e-5) if bound is None else bound
    if got.dtype == np.float32:
        assert (np.abs(g32 - w32) <= slack + 1e-6 * np.abs(w32)).all(), np.abs(g32 - w32).max()
    else:
        eps = float(np.finfo(got.dtype).eps) if got.dtype == np.float16 else 2.0 ** -7
        assert (np.abs(g32 - w32) <= eps * np.abs(w32) + slack + 1e-6).all(), np.abs(g32 - w32).max()


def _order_bound(g: np.ndarray, o: tuple, size: tuple, scales: tuple, layout: str) -> np.ndarray:
    """2(n-1)*eps32*sum|x| per gradInput element, from the reference on |g| and on ones."""
    a = np.abs(g.astype(np.float32))
    total = reference.upsample_nearest_exact3d_backward(a, o, size, *scales, layout=layout)
    count = reference.upsample_nearest_exact3d_backward(np.ones_like(a), o, size, *scales, layout=layout)
    return (2 * np.maximum(count - 1, 0) * np.finfo(np.float32).eps * total).astype(np.float32)


def test_strided_input_keeps_strides_without_copy(no_leaks: None, session: Session) -> None:
    base = np.random.default_rng(2).standard_normal((2, 3, 6, 8, 20)).astype(np.float32)
    view = base[:, :, 1:, ::2, 3::2]  # offset and strides
    arr = session.upload(view)
    assert arr.strides == tuple(s // 4 for s in view.strides)
    assert arr.offset * 4 == view.ctypes.data - base.ctypes.data  # the view's offset in its base
    out = session.backward(arr, view.shape[2:], (2, 3, 2, 3, 5))
    assert isinstance(out, ug.DeviceArray)
    want = reference.upsample_nearest_exact3d_backward(view, view.shape[2:], (2, 3, 2, 3, 5))
    np.testing.assert_allclose(out.download(), want, rtol=1e-5, atol=1e-5)
    arr.close()
    out.close()


def test_preallocated_numpy_out_keeps_gaps(session: Session) -> None:
    g = np.random.default_rng(3).standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    host = np.full((1, 2, 2, 2, 4), 7.0, np.float32)
    out = host[..., ::2]  # a strided output: the gaps must stay 7
    res = session.backward(g, (4, 4, 4), (1, 2, 2, 2, 2), out=out)
    assert res is out
    np.testing.assert_allclose(out, reference.upsample_nearest_exact3d_backward(g, (4, 4, 4), (1, 2, 2, 2, 2)),
                               rtol=1e-5, atol=1e-5)
    assert (host[..., 1::2] == 7.0).all()


def test_preallocated_device_out(session: Session) -> None:
    g = np.ones((1, 1, 4, 4, 4), np.float32)
    with session.empty((1, 1, 2, 2, 2)) as out:
        res = session.backward(g, (4, 4, 4), (1, 1, 2, 2, 2), out=out)
        assert res is out
        assert (out.download() == 8.0).all()


@pytest.mark.parametrize("n,c", [(0, 2), (2, 0)])
def test_empty_n_or_c_succeeds(session: Session, n: int, c: int) -> None:
    out = session.backward(np.zeros((n, c, 4, 4, 4), np.float32), (4, 4, 4), (n, c, 2, 2, 2))
    assert out.shape == (n, c, 2, 2, 2)


def test_user_scales(session: Session) -> None:
    g = np.random.default_rng(4).standard_normal((2, 2, 4, 8, 12)).astype(np.float32)
    got = session.backward(g, (4, 8, 12), (2, 2, 2, 4, 8), 2.0, 2.0, 1.5)
    want = reference.upsample_nearest_exact3d_backward(g, (4, 8, 12), (2, 2, 2, 4, 8), 2.0, 2.0, 1.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bad_input_leaves_no_leak_and_a_usable_session(no_leaks: None, session: Session) -> None:
    tried = 0
    for case in ug.BAD_CASES:
        if case.grad_out is None or case.grad_out.dtype not in (0,) or case.param == "gradInput":
            continue  # the session builds gradInput itself from input_size
        if np.prod(case.grad_out.shape, dtype=np.float64) > 1e6:
            continue
        g = np.zeros(case.grad_out.shape, np.float32)
        layout = "NDHWC" if case.grad_out.format == Format.NDHWC else "NCDHW"
        with pytest.raises(AclnnParamError) as info:
            session.backward(g, case.output_size, case.input_size, *case.scales, layout=layout)
        assert info.value.code == case.code, case.label
        tried += 1
    assert tried >= 10
    assert session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED


def test_non_array_and_unsupported_dtypes(session: Session) -> None:
    for bad in ([[1.0]], "x", np.zeros((1, 1, 2, 2, 2)), np.zeros((1, 1, 2, 2, 2), np.int32)):
        with pytest.raises(AclnnParamError) as info:
            session.backward(bad, (2, 2, 2), (1, 1, 1, 1, 1))
        assert info.value.code == 161002
    with pytest.raises(AclnnParamError) as info:
        session.backward(None, (2, 2, 2), (1, 1, 1, 1, 1))
    assert info.value.code == 161001


def test_repr_names_backend_and_close_is_idempotent() -> None:
    s = Session(0)
    assert "backend=sim" in repr(s) and "simulator" in repr(s)
    s.close()
    s.close()
    assert "closed" in repr(s)
    with pytest.raises(ClosedError):
        s.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1))


def test_second_device(no_leaks: None) -> None:
    with Session(1) as s:
        assert s.device.id == 1
        assert s.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED


def test_tensor_objects_describe_layout(session: Session) -> None:
    g = np.zeros((1, 3, 4, 5, 2), np.float16)
    with session.upload(g, layout="NDHWC") as arr:
        t: Tensor = arr.tensor
        assert t.format == Format.NDHWC and t.shape == (1, 3, 4, 5, 2)
        assert "NDHWC" in repr(t)


_dims = st.integers(1, 7)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 2), c=st.integers(1, 3), i=st.tuples(_dims, _dims, _dims),
       ratio=st.tuples(st.floats(0.1, 50), st.floats(0.1, 50), st.floats(0.1, 6)),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), layout=st.sampled_from(["NCDHW", "NDHWC"]),
       use_scales=st.booleans(), strided=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_property_simulator_equals_reference(session: Session, n: int, c: int, i: tuple[int, int, int],
                                             ratio: tuple[float, float, float], dtype: str, layout: str,
                                             use_scales: bool, strided: bool, seed: int) -> None:
    dt = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": BF16}[dtype]
    scales = tuple(float(np.float32(r)) for r in ratio)
    o = tuple(max(1, int(np.floor(ii * r))) for ii, r in zip(i, scales))
    if any(oo / ii > 50 for oo, ii in zip(o, i)) or (use_scales and any(
            np.floor(ii * s) != oo for ii, s, oo in zip(i, scales, o))):
        use_scales = False
    if any(oo / ii > 50 for oo, ii in zip(o, i)):
        return
    shape = (n, c, *o) if layout == "NCDHW" else (n, *o, c)
    rng = np.random.default_rng(seed)
    full = rng.standard_normal(tuple(s * (2 if strided else 1) for s in shape)).astype(dt)
    g = full[tuple(slice(None, None, 2) if strided else slice(None) for _ in shape)]
    args = scales if use_scales else (None, None, None)
    got = session.backward(g, o, (n, c, *i), *args, layout=layout)
    want = reference.upsample_nearest_exact3d_backward(g, o, (n, c, *i), *args, layout=layout)
    _assert_close(got, want, _order_bound(g, o, (n, c, *i), args, layout))


@pytest.mark.filterwarnings("ignore::upsample3d_grad.checks.MixedScalesWarning")
@pytest.mark.parametrize("scales", [(None, None, None), (2, 2, 2), (2.0, None, 2.0)])
def test_every_path_accepts_the_same_scales(no_leaks: None, session: Session,
                                            scales: tuple[float | None, float | None, float | None]) -> None:
    """backward, prepare and timed_backward take the same scales (None, ints, a mixed set) and agree."""
    g = np.arange(1, 65, dtype=np.float32).reshape(1, 1, 4, 4, 4)
    args = ((4, 4, 4), (1, 1, 2, 2, 2))
    want = session.backward(g, *args, *scales)
    with session.upload(g) as go, session.empty((1, 1, 2, 2, 2)) as out:
        assert len(session.timed_backward(go, *args, scales, out=out)) == 1  # type: ignore[arg-type]
        np.testing.assert_array_equal(out.download(), want)
        with session.prepare(go, *args, scales, out=out) as call:
            np.testing.assert_array_equal(call().download(), want)


# --------------------------------------------------------------------------- repeated calls on device arrays

def _calls() -> dict[str, int]:
    from acl_bindings import sim
    from acl_bindings.prototypes import PROTOTYPES
    from upsample3d_grad.op import OP

    return {name: sim.call_count(name) for name in (*PROTOTYPES, OP.phase1_name, OP.phase2_name)}


def test_a_repeated_device_array_call_is_remembered(no_leaks: None, session: Session) -> None:
    go, gi = session.upload(SAMPLE), session.empty((2, 2, 1, 1, 1))
    session.backward(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)  # checked, phase 1, plan kept
    hits = session.plans.hits
    before = _calls()
    for _ in range(3):
        assert session.backward(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi) is gi
    made = {name: n - before[name] for name, n in _calls().items() if n != before[name]}
    # phase 2 only (and the device guard's context read): no phase 1, no tensor, no copy
    assert made == {"aclnnUpsampleNearestExact3dBackward": 3, "aclrtGetCurrentContext": 3}, made
    assert session.plans.hits == hits + 3 and session.last_path == "plan"
    assert gi.download().ravel().tolist() == EXPECTED
    for arr in (go, gi):
        arr.close()


def _outcome(s: Session, go: Any, gi: Any, out3: Any, in5: Any, sd: Any) -> tuple[Any, ...]:
    try:
        s.backward(go, out3, in5, sd, out=gi)
    except Exception as exc:
        return type(exc), str(exc)
    return ("ok", gi.download().ravel().tolist())


def test_a_remembered_call_changes_no_check(no_leaks: None, session: Session) -> None:
    go, gi = session.upload(SAMPLE), session.empty((2, 2, 1, 1, 1))
    session.backward(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)
    # arguments equal (==) to the remembered ones: each has the outcome it has on a fresh session
    cases = [((True, 2, 2), (2, 2, 1, 1, 1), None), ((2.0, 2, 2), (2, 2, 1, 1, 1), None),
             ((2, 2, 2), (2, 2, 1, 1, True), None), ((2, 2, 2), (2, 2, 1, 1, 1), 0),
             ((2, 2, 2), (2, 2, 1, 1, 1), False),
             ([2, 2, 2], [2, 2, 1, 1, 1], None), ((2, 2, 2), (2, 2, 1, 1, 1), None)]
    refused = 0
    with Session(0) as fresh:
        fgo, fgi = fresh.upload(SAMPLE), fresh.empty((2, 2, 1, 1, 1))
        for out3, in5, sd in cases:
            want = _outcome(fresh, fgo, fgi, out3, in5, sd)
            assert _outcome(session, go, gi, out3, in5, sd) == want, (out3, in5, sd)
            refused += want[0] != "ok"
    assert refused >= 3  # (the bools and the float size are refused)
    gi.close()
    with pytest.raises(ClosedError):
        session.backward(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)
    go.close()


def test_a_checked_call_is_never_served_to_another_layout(no_leaks: None, session: Session) -> None:
    """A repeat skips the host checks only for a kept call of the very same key (every layout field of both
    arrays, the sizes, the scales, strict): an array of another shape, at any address, is checked."""
    go, gi = session.upload(SAMPLE), session.empty((2, 2, 1, 1, 1))
    sizes = (2, 2, 2), (2, 2, 1, 1, 1)
    session.backward(go, *sizes, out=gi)
    session.backward(go, *sizes, out=gi)  # (a repeat)
    small, out = session.upload(SAMPLE[:, :, :1]), session.empty((2, 2, 1, 1, 1))
    for _ in range(2):
        with pytest.raises(AclnnParamError, match="gradOut"):
            session.backward(small, *sizes, out=out)
    for arr in (go, gi, small, out):
        arr.close()


def test_kept_calls_are_bounded(no_leaks: None, session: Session) -> None:
    session.plans.capacity = 4
    arrays = [(session.upload(np.ones((1, 1, 2, 2, w), np.float32)), session.empty((1, 1, 1, 1, w)))
              for w in range(1, 9)]
    for _ in range(2):
        for go, gi in arrays:  # eight call shapes: the oldest kept calls are evicted, and still agree
            session.backward(go, (2, 2, go.shape[-1]), gi.shape, out=gi)
            assert gi.download().ravel().tolist() == [4.0] * gi.shape[-1]
            assert len(session.plans) <= 4
    for go, gi in arrays:
        go.close()
        gi.close()


def test_a_closed_session_refuses_with(no_leaks: None) -> None:
    s = Session(0)
    s.close()
    with pytest.raises(ClosedError):
        with s:
            pass


X = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1, 1)  # a forward input: (2, 2, 2) repeats each value 8 times
FORWARD_EXPECTED = [float(v) for v in range(1, 5) for _ in range(8)]


def _prepared(s: Session, output_size: Any) -> Any:
    go, gi = s.upload(SAMPLE), s.empty((2, 2, 1, 1, 1))
    try:
        with s.prepare(go, output_size, (2, 2, 1, 1, 1), out=gi) as call:
            call()
            call()  # (the values prepared are used again)
            return gi.download()
    finally:
        go.close()
        gi.close()


def _torch(s: Session, size: Any, backward: bool) -> Any:
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch paths are not tested")
    from upsample3d_grad.functional import backward_torch, forward_torch

    if backward:
        return backward_torch(torch.from_numpy(SAMPLE), size, (2, 2, 1, 1, 1), session=s).numpy()
    return forward_torch(torch.from_numpy(X), size, session=s).numpy()


#: Each path that takes a size argument: (a call with the output size, whether it is a backward).
SIZE_PATHS = {
    "Session.backward": (lambda s, size: s.backward(SAMPLE, size, (2, 2, 1, 1, 1)), True),
    "Session.forward": (lambda s, size: s.forward(X, size), False),
    "Session.prepare": (_prepared, True),
    "upsample_nearest_exact3d_backward": (
        lambda s, size: ug.upsample_nearest_exact3d_backward(SAMPLE, size, (2, 2, 1, 1, 1)), True),
    "upsample_nearest_exact3d": (lambda s, size: ug.upsample_nearest_exact3d(X, size), False),
    "backward_torch": (lambda s, size: _torch(s, size, True), True),
    "forward_torch": (lambda s, size: _torch(s, size, False), False),
}


@pytest.mark.parametrize("path", list(SIZE_PATHS))
def test_size_arguments_are_read_once(no_leaks: None, session: Session, path: str) -> None:
    """A size argument that yields other values when read again is checked and passed as read the first time."""
    class Shifty:
        def __init__(self, first: tuple[int, ...], later: tuple[int, ...]) -> None:
            self.reads, self.first, self.later = 0, first, later

        def __iter__(self) -> Any:
            self.reads += 1
            return iter(self.first if self.reads == 1 else self.later)

        def __len__(self) -> int:
            return len(self.first)

    call, backward = SIZE_PATHS[path]
    try:
        out3 = Shifty((2, 2, 2), (200, 2, 2))  # valid when checked; a second read would pass another size
        assert np.asarray(call(session, out3)).ravel().tolist() == (EXPECTED if backward else FORWARD_EXPECTED)
        assert out3.reads == 1
        bad = Shifty((2, 2, 3) if backward else (0, 2, 2), (2, 2, 2))  # refused as first read, whatever comes later
        with pytest.raises(AclError):
            call(session, bad)
        assert bad.reads == 1
    finally:
        ug.close_default_session()  # (the module functions run on the default session)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_cpu_torch_in_is_torch_out(no_leaks: None, session: Session, dtype: str) -> None:
    torch = pytest.importorskip("torch")
    g = torch.from_numpy(SAMPLE).to(getattr(torch, dtype))
    got = session.backward(g, (2, 2, 2), (2, 2, 1, 1, 1))
    assert isinstance(got, torch.Tensor) and got.dtype == g.dtype and got.device.type == "cpu"
    assert got.float().ravel().tolist() == EXPECTED
    y = session.forward(g, (4, 4, 4))
    assert isinstance(y, torch.Tensor) and y.dtype == g.dtype and tuple(y.shape) == (2, 2, 4, 4, 4)


def test_an_out_that_cannot_be_written_in_place_is_refused(no_leaks: None, session: Session) -> None:
    torch = pytest.importorskip("torch")
    from upsample3d_grad.functional import backward_torch, forward_torch

    g = torch.from_numpy(SAMPLE)
    negative = torch.zeros(4, dtype=torch.complex64).conj().imag.reshape(2, 2, 1, 1, 1)  # (the case)
    assert negative.is_neg()
    for call in (lambda: session.backward(g, (2, 2, 2), (2, 2, 1, 1, 1), out=negative),
                 lambda: backward_torch(g, (2, 2, 2), (2, 2, 1, 1, 1), out=negative, session=session)):
        with pytest.raises(TypeError, match="negative or conjugate"):  # never written into a copy
            call()
    assert negative.tolist() == torch.zeros(2, 2, 1, 1, 1).tolist()
    with pytest.raises(TypeError, match="negative or conjugate"):
        forward_torch(g, (4, 4, 4), out=torch.zeros(2, 2, 4, 4, 4, dtype=torch.complex64).conj().imag,
                      session=session)
