"""Fuzzed bad input through every public entry point: a documented error, never a crash or a leak.

Each example starts from a valid call (random sizes, dtype and layout) and breaks one
thing: a wrong type or None, a negative, zero or huge size, a NaN/inf/negative scale,
a tuple of the wrong length, a shape that does not match the sizes, an unsupported
dtype, a wrong layout, a non-array, a misaligned or read-only buffer, a 0-d or 6-d
array.  The entry points are ``Session.backward``, ``Session.upload``,
``upsample_nearest_exact3d_backward`` and ``UpsampleNearestExact3dGrad``.

Every example must raise ``AclnnParamError`` (also a ``ValueError``) with code 161001 (a
None) or 161002 (anything else), ``func`` the operator's phase 1, and a detail that names
the parameter, before any device work; and the simulator's live-handle counts must not
move.  Decisions these tests pin down: a read-only *input* is fine (it is only read); a
read-only ``out=`` is rejected (161002, ``gradInput``) before anything runs.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field, replace
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import upsample3d_grad as ug
from acl_bindings import AclMemoryError, AclnnParamError, AclParamError, DeviceBuffer, sim
from upsample3d_grad import Session
from upsample3d_grad.checks import PHASE1
from upsample3d_grad.functional import default_session

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]
DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
UNSUPPORTED = [np.float64, np.longdouble, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_,
               np.complex64, np.complex128, object, ml_dtypes.float8_e4m3fn]
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SCALES = ("scalesD", "scalesH", "scalesW")


@pytest.fixture(autouse=True, scope="module")
def _close_the_default_session() -> Any:
    yield
    ug.close_default_session()  # the module-level entry points opened it


# --------------------------------------------------------------------------- the calls

@dataclass
class Call:
    """One call; *codes* and *params* say what its error must be (empty codes: valid)."""

    grad_output: Any
    output_size: Any
    input_size: Any
    scales: tuple = (None, None, None)
    layout: Any = "NCDHW"
    out: Any = None
    codes: frozenset = frozenset()
    params: tuple = ()
    what: str = "valid"
    target: str = ""  # the argument that was broken
    kind: str = ""  # "value" (invalid anywhere), "shape" or "layout" (invalid for these sizes only)
    keep: list = field(default_factory=list)  # buffers the arrays are views of

    def broken(self, what: str, params: tuple, code: int = 161002, kind: str = "value", **changes: Any) -> Call:
        (target,) = changes.keys() - {"keep"}
        return replace(self, codes=frozenset({code}), params=params, what=what, target=target, kind=kind,
                       **changes)


def _shape(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, ...]:
    return (n, d, h, w, c) if layout == "NDHWC" else (n, c, d, h, w)


@st.composite
def valid_calls(draw: Any) -> Call:
    n, c = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    i = draw(st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)))
    o = draw(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)))
    layout = draw(st.sampled_from(["NCDHW", "NDHWC"]))
    dt = DTYPES[draw(st.sampled_from(list(DTYPES)))]
    g = np.random.default_rng(draw(st.integers(0, 99))).standard_normal(_shape(layout, n, c, *o)).astype(dt)
    return Call(g, o, (n, c, *i), layout=layout)


def _misaligned(shape: tuple[int, ...], dtype: np.dtype, shift: int, keep: list) -> np.ndarray:
    """A view of *dtype* starting *shift* bytes into a uint8 buffer (so not aligned to its item size)."""
    count = int(np.prod(shape))
    raw = np.zeros(count * dtype.itemsize + 64, np.uint8)
    keep.append(raw)
    base = (-raw.ctypes.data) % 64 + shift  # an address that is 64-aligned plus *shift*
    view = raw[base: base + count * dtype.itemsize].view(dtype).reshape(shape)
    assert view.ctypes.data % dtype.itemsize
    return view


def _flip(a: np.ndarray) -> np.ndarray | None:
    """*a* with one axis of length >= 2 reversed (a negative stride), or None."""
    for axis, n in enumerate(a.shape):
        if n >= 2:
            return np.flip(a, axis)
    return None


_BAD_SEQ_ITEMS = st.sampled_from([2.0, "2", None, True, 2 + 0j, b"2", [2], np.float32(2)])
_NOT_SEQUENCES = st.sampled_from([5, 2.5, "abc", b"abc", object(), np.int64(3)])
_NOT_ARRAYS = st.sampled_from([5, 1.5, "array", b"bytes", int, object(), [[1.0, 2.0]], {"a": 1}, memoryview(b"ab")])


def _array_mutations(call: Call, param: str, array: Any, key: str) -> list[st.SearchStrategy[Call]]:
    """Breaking a numpy argument (*key*: ``grad_output`` or ``out``)."""
    py = {"gradOut": "grad_output", "gradInput": "out"}[param]
    dt = array.dtype
    bad_dtype = st.sampled_from(UNSUPPORTED).map(
        lambda t: call.broken(f"{py} dtype {np.dtype(t)}", (param,), **{key: np.zeros(array.shape, t)}))
    bad_rank = st.sampled_from([0, 1, 2, 3, 4, 6, 7]).flatmap(lambda nd: st.tuples(*[st.integers(1, 2)] * nd)).map(
        lambda shp: call.broken(f"{py} {len(shp)}-D", (param,), **{key: np.ones(shp, dt)}))
    wrong_shape = st.tuples(*[st.integers(0, 4)] * 5).filter(lambda shp: shp != array.shape).map(
        lambda shp: call.broken(f"{py} shape {shp}", (param,), kind="shape", **{key: np.ones(shp, dt)}))
    not_array = _NOT_ARRAYS.map(lambda v: call.broken(f"{py} is {type(v).__name__}", (param,), **{key: v}))
    keep: list = []
    misaligned = st.integers(1, dt.itemsize - 1).map(
        lambda k: call.broken(f"{py} misaligned by {k}", (param,), keep=keep,
                              **{key: _misaligned(array.shape, dt, k, keep)}))
    out = [bad_dtype, bad_rank, wrong_shape, not_array]
    if array.size == 0:
        return out  # no element: no address or stride to get wrong
    out.append(misaligned)  # every supported dtype has items of 2 or 4 bytes
    flipped = _flip(array)
    if flipped is not None:
        out.append(st.just(call.broken(f"{py} negative strides", (param,), **{key: flipped})))
    return out


def _size_mutations(call: Call, key: str, param: str, length: int) -> list[st.SearchStrategy[Call]]:
    good = list(getattr(call, key))

    def with_value(what: str, value: Any, params: tuple = (param,), code: int = 161002, kind: str = "value") -> Call:
        return call.broken(what, params, code, kind, **{key: value})

    def bad_item(item: Any, k: int) -> Call:
        v = list(good)
        v[k % length] = item
        return with_value(f"{key} item {item!r}", tuple(v))

    def nonpositive(v: int, k: int) -> Call:
        vals = list(good)
        if key == "output_size":
            vals[k % 3] = v
        else:
            vals[2 + k % 3] = v
        return with_value(f"{key} {vals}", tuple(vals))

    out = [
        st.just(with_value(f"{key} None", None, code=161001)),
        _NOT_SEQUENCES.map(lambda v: with_value(f"{key} {v!r}", v)),
        st.tuples(_BAD_SEQ_ITEMS, st.integers(0, 4)).map(lambda a: bad_item(*a)),
        st.integers(0, 7).filter(lambda m: m != length).map(
            lambda m: with_value(f"{key} length {m}", tuple((good * 3)[:m]))),
        st.tuples(st.integers(-(2 ** 63), 0), st.integers(0, 2)).map(lambda a: nonpositive(*a)),
        st.tuples(st.integers(2 ** 63, 2 ** 80), st.integers(0, length - 1)).map(
            lambda a: with_value(f"{key} huge", tuple(a[0] if j == a[1] else v for j, v in enumerate(good)))),
    ]
    if key == "input_size":
        def n_or_c(v: int, which: int) -> Call:
            vals = list(good)
            vals[which] = v
            if v < 0:
                return with_value(f"input_size {vals}", tuple(vals))
            return with_value(f"input_size {vals}", tuple(vals), ("gradOut",), kind="shape")  # gradOut mismatches

        out.append(st.tuples(st.integers(-(2 ** 40), 40), st.integers(0, 1)).filter(
            lambda a: a[0] != good[a[1]]).map(lambda a: n_or_c(*a)))
        out.append(st.tuples(st.integers(2 ** 20 + 1, 2 ** 62), st.integers(2, 4)).map(
            lambda a: with_value(f"input_size huge {a}", tuple(a[0] if j == a[1] else v for j, v in enumerate(good)),
                                 ("gradInput", *SCALES))))
    else:
        out.append(st.tuples(st.integers(1, 2 ** 62), st.integers(0, 2)).filter(lambda a: a[0] != good[a[1]]).map(
            lambda a: with_value(f"output_size mismatch {a}",
                                 tuple(a[0] if j == a[1] else v for j, v in enumerate(good)), ("gradOut",),
                                 kind="shape")))
    return out


def _scale_mutations(call: Call) -> list[st.SearchStrategy[Call]]:
    def one(value: Any, k: int) -> Call:
        s = [None, None, None]
        s[k] = value
        return call.broken(f"{SCALES[k]}={value!r}", (SCALES[k],), scales=tuple(s))

    bad_values = st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, "2.0", 2j, True, [2.0], np.array([2.0]), -0.5]),
        st.floats(max_value=-1e-300, allow_nan=False), st.floats(min_value=50.001, allow_infinity=True))

    def inconsistent(s: float) -> Call:
        i = call.input_size[2:]
        assume(any(math.floor(ii * s) != oo for ii, oo in zip(i, call.output_size)))
        return call.broken(f"scales {s} != output/input", ("outputSize",), scales=(s, s, s))

    return [st.tuples(bad_values, st.integers(0, 2)).map(lambda a: one(*a)),
            st.floats(0.01, 50.0).map(inconsistent)]


def _layout_mutations(call: Call) -> list[st.SearchStrategy[Call]]:
    other = "NDHWC" if call.layout == "NCDHW" else "NCDHW"
    n, c, d, h, w = call.input_size
    o = call.output_size
    swapped = [] if _shape(other, n, c, *o) == call.grad_output.shape else [
        st.just(call.broken(f"layout {other} for a {call.layout} array", ("gradOut",), kind="layout",
                            layout=other))]
    bad = st.one_of(st.text(max_size=6), st.sampled_from([None, 5, b"NCDHW", "ncdhw", "NCHW", "ND"])).filter(
        lambda v: v not in ("NCDHW", "NDHWC"))
    return [bad.map(lambda v: call.broken(f"layout {v!r}", ("layout",), layout=v)), *swapped]


def _out_mutations(call: Call) -> list[st.SearchStrategy[Call]]:
    n, c, d, h, w = call.input_size
    good = np.zeros(_shape(call.layout, n, c, d, h, w), call.grad_output.dtype)
    read_only = good.copy()
    read_only.flags.writeable = False
    other = np.float16 if call.grad_output.dtype != np.float16 else np.float32
    return [*_array_mutations(call, "gradInput", good, "out"),
            st.just(call.broken("out read-only", ("gradInput",), out=read_only)),
            st.just(call.broken("out of another float dtype", ("gradInput",), out=good.astype(other))),
            st.just(call.broken("out is a read-only np.frombuffer(bytes) view", ("gradInput",),
                                out=np.frombuffer(good.tobytes(), good.dtype).reshape(good.shape)))]


@st.composite
def bad_calls(draw: Any, targets: tuple[str, ...]) -> Call:
    call = draw(valid_calls())
    target = draw(st.sampled_from(targets))  # first the argument, then how to break it, both evenly
    options: list[st.SearchStrategy[Call]]
    if target == "grad_output":
        options = [st.just(call.broken("grad_output None", ("gradOut",), 161001, grad_output=None)),
                   *_array_mutations(call, "gradOut", call.grad_output, "grad_output")]
    elif target == "output_size":
        options = _size_mutations(call, "output_size", "outputSize", 3)
    elif target == "input_size":
        options = _size_mutations(call, "input_size", "inputSize", 5)
    elif target == "scales":
        options = _scale_mutations(call)
    elif target == "layout":
        options = _layout_mutations(call)
    else:
        options = _out_mutations(call)
    return draw(draw(st.sampled_from(options)))


ALL = ("grad_output", "output_size", "input_size", "scales", "layout", "out")


def _expect_rejected(call: Call, fn: Any, *args: Any, func: str = PHASE1, **kwargs: Any) -> None:
    """*fn* raises the documented error for *call*, naming *func*, and the simulator's handle counts do not
    move."""
    owner = getattr(fn, "__self__", None)
    owner = owner if isinstance(owner, Session) else default_session()

    def handles() -> dict[str, int]:  # blocks the session caches for reuse are not a leak
        now = sim.live_handles()
        now["device_buffer"] -= owner.allocator.cached_blocks
        return now

    before = handles()
    with pytest.raises(AclnnParamError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.code in call.codes, (call.what, err)
    assert err.func == func, (call.what, err.func)
    assert any(p in err.detail for p in call.params), (call.what, call.params, err.detail)
    del info, err
    after = handles()
    if after != before:
        gc.collect()
        after = handles()
    assert after == before, (call.what, before, after)


# --------------------------------------------------------------------------- the entry points

@FUZZ
@given(call=bad_calls(ALL))
def test_session_backward(session: Session, call: Call) -> None:
    _expect_rejected(call, session.backward, call.grad_output, call.output_size, call.input_size, *call.scales,
                     layout=call.layout, out=call.out)


@FUZZ
@given(call=bad_calls(ALL))
def test_module_function(call: Call) -> None:
    default_session()
    _expect_rejected(call, ug.upsample_nearest_exact3d_backward, call.grad_output, call.output_size,
                     call.input_size, *call.scales, layout=call.layout, out=call.out)


def _graph_scales(scales: tuple) -> Any:
    return tuple(0.0 if s is None else s for s in scales)


@FUZZ
@given(call=bad_calls(("grad_output", "output_size", "input_size", "scales", "layout")),
       default_output_size=st.booleans(), scales_form=st.sampled_from(["tuple", "tuple", "length 2", "None"]))
def test_graph_form(call: Call, default_output_size: bool, scales_form: str) -> None:
    default_session()
    out_size: Any = call.output_size
    if default_output_size and call.target not in ("grad_output", "output_size", "layout"):
        out_size = (0, 0, 0)  # "take it from grad_output's shape" (valid, read in the valid layout, here)
    scales: Any = _graph_scales(call.scales)
    if scales_form != "tuple":  # the graph form's own argument: three values
        scales = scales[:2] if scales_form == "length 2" else None
        call = replace(call, params=("scales",), codes=frozenset({161002}), what=f"scales {scales!r}")
    _expect_rejected(call, ug.UpsampleNearestExact3dGrad, call.grad_output, call.input_size, out_size, scales,
                     layout=call.layout)


@st.composite
def bad_uploads(draw: Any) -> Call:
    call = draw(bad_calls(("grad_output", "layout")))
    assume(call.kind == "value")  # any 5-D shape, in either layout, is a fine upload
    return call


@FUZZ
@given(call=bad_uploads())
def test_session_upload(session: Session, call: Call) -> None:
    _expect_rejected(call, session.upload, call.grad_output, call.layout, func="Session.upload")


# --------------------------------------------------------------------------- named cases, run always

def test_named_cases_and_the_session_still_works(no_leaks: None, session: Session) -> None:
    raw = np.zeros(SAMPLE.nbytes + 8, np.uint8)
    misaligned = raw[1: 1 + SAMPLE.nbytes].view(np.float32).reshape(SAMPLE.shape)
    cases = {
        "float32 at byte offset 1": (misaligned, 161002, "aligned"),
        "0-d array": (np.array(1.0, np.float32), 161002, "5-D"),
        "6-d array": (SAMPLE.reshape(2, 2, 2, 2, 2, 1), 161002, "5-D"),
        "float64": (SAMPLE.astype(np.float64), 161002, "dtype"),
        "int": (SAMPLE.astype(np.int64), 161002, "dtype"),
        "bool": (SAMPLE.astype(bool), 161002, "dtype"),
        "complex": (SAMPLE.astype(np.complex64), 161002, "dtype"),
        "None": (None, 161001, "None"),
        "a list": (SAMPLE.tolist(), 161002, "numpy array"),
    }
    for label, (g, code, words) in cases.items():
        for fn, args in ((session.backward, (g, (2, 2, 2), (2, 2, 1, 1, 1))), (session.upload, (g,))):
            with pytest.raises(AclnnParamError) as info:
                fn(*args)
            assert info.value.code == code and words in info.value.detail, (label, info.value)
    assert session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED


def test_read_only_input_is_accepted(no_leaks: None, session: Session) -> None:
    g = np.frombuffer(SAMPLE.tobytes(), np.float32).reshape(SAMPLE.shape)
    assert not g.flags.writeable
    assert session.backward(g, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED
    with session.upload(g) as arr:
        assert arr.download().tobytes() == SAMPLE.tobytes()


def test_read_only_out_is_rejected_before_any_device_work(no_leaks: None, session: Session) -> None:
    out = np.full((2, 2, 1, 1, 1), 7.0, np.float32)
    out.flags.writeable = False
    launches = sim.call_count("aclnnUpsampleNearestExact3dBackward")
    with pytest.raises(AclnnParamError) as info:
        session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1), out=out)
    assert info.value.code == 161002 and "gradInput" in info.value.detail and "read-only" in info.value.detail
    assert sim.call_count("aclnnUpsampleNearestExact3dBackward") == launches
    assert (out == 7.0).all()


def test_huge_sizes_without_strict_checks(no_leaks: None, session: Session) -> None:
    """strict=False lets huge gradInputs through to the device: a 4 TiB one fails to allocate (a
    MemoryError); one whose byte count does not fit in 64 bits is refused before (never wrapped
    around into a small buffer); then the session still works."""
    g = np.ones((1, 1, 1, 1, 1), np.float32)
    with pytest.raises(AclnnParamError) as strict:
        session.backward(g, (1, 1, 1), (1, 1, 1, 1, 2 ** 40))
    assert strict.value.code == 161002
    with pytest.raises(AclMemoryError) as info:
        session.backward(g, (1, 1, 1), (1, 1, 1, 1, 2 ** 40), strict=False)
    assert isinstance(info.value, MemoryError) and info.value.code == 207001 and info.value.func == "aclrtMalloc"
    for size in ((1, 1, 2 ** 21, 2 ** 21, 2 ** 22), (1, 1, 1, 2 ** 31, 2 ** 31), (1, 1, 2 ** 30, 2 ** 30, 2 ** 30)):
        with pytest.raises(AclnnParamError) as info2:
            session.backward(g, (1, 1, 1), size, strict=False)
        assert info2.value.code == 161002 and "64-bit" in info2.value.detail, info2.value
    for nbytes in (2 ** 64, 2 ** 64 + 8):  # ctypes would silently truncate a size_t
        with pytest.raises(ValueError, match="size_t"):
            DeviceBuffer(session.device, nbytes)
    assert session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED


def test_bad_device_ids(no_leaks: None) -> None:
    for bad in (2, 99, -1, 2 ** 31, 2 ** 40, -(2 ** 40)):  # the simulator has devices 0 and 1
        with pytest.raises(AclParamError) as info:  # never truncated by ctypes into a valid id
            Session(bad)
        assert info.value.code == 107001 and info.value.func == "aclrtSetDevice", (bad, info.value)
    for bad in (1.0, "0", None, True, np.float32(0)):
        with pytest.raises(TypeError, match="device_id"):
            Session(bad)  # type: ignore[arg-type]


def test_device_arrays_of_other_or_closed_sessions(no_leaks: None, session: Session) -> None:
    from acl_bindings import ClosedError

    with Session(1) as other:
        foreign = other.upload(SAMPLE)
        with pytest.raises(AclnnParamError) as info:
            session.backward(foreign, (2, 2, 2), (2, 2, 1, 1, 1))
        assert info.value.code == 161002 and "another Session" in info.value.detail
    for plans in (True, False):
        session.use_plans = plans
        arr = session.upload(SAMPLE)
        arr.close()
        with pytest.raises(ClosedError):  # a ValueError; never a ctypes.ArgumentError
            session.backward(arr, (2, 2, 2), (2, 2, 1, 1, 1))
        with pytest.raises(ClosedError):
            session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1), out=arr)
    with pytest.raises(AclnnParamError):
        session.timed_backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1), out=SAMPLE)  # type: ignore[arg-type]
    session.use_plans = True
    assert session.backward(SAMPLE, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist() == EXPECTED
