"""Every aclTensor the package creates declares a storage that covers its view (cann-abi.md §8.1).

Phase 1 of the operator runs nnopbase's ``Validate`` on a non-contiguous gradOut (inside
``l0op::Contiguous``) and on a non-contiguous gradInput (the ViewCopy back): in elements,
``offset + sum(max(0, stride*(dim-1))) + 1 <= product(storageDims)`` and the low end ``>= 0``.
The simulator applies it, and answers 561103 naming the tensor, as the hardware would fail.
Over a device buffer the binding declares what torch_npu declares: a 1-D storage of the
buffer's element count, the buffer's base address and the view's element offset.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from acl_bindings import AclError, DeviceBuffer, Format, IntArray, Tensor, sim
from acl_bindings.meta import view_extent
from upsample3d_grad import DeviceArray, Session, reference
from upsample3d_grad.op import (
    aclnnUpsampleNearestExact3dBackward,
    aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize,
)
from upsample3d_grad.tools import smoke

INNER_NULLPTR = 561103


def _want(g: np.ndarray, out3, in5, layout: str = "NCDHW") -> np.ndarray:
    return reference.upsample_nearest_exact3d_backward(np.ascontiguousarray(g), out3, in5, layout=layout)


def _sliced(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A view with an offset of one element and a step of 2 in the last dim (uploaded with its offset)."""
    big = (*shape[:-1], shape[-1] * 2)
    base = np.random.default_rng(seed).integers(-4, 5, big).astype(np.float32)
    return base[..., 1::2]


def _storage_shape(tensor: Tensor) -> tuple[int, ...]:
    """The storage dims the library holds for *tensor* (aclGetStorageShape; leaks a few bytes, as documented)."""
    nn = ctypes.CDLL(str(sim.LIB64 / "libnnopbase.so"))  # the same loaded library
    nn.aclGetStorageShape.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                                      ctypes.POINTER(ctypes.c_uint64))
    dims = ctypes.POINTER(ctypes.c_int64)()
    n = ctypes.c_uint64()
    assert nn.aclGetStorageShape(ctypes.cast(tensor.handle, ctypes.c_void_p), ctypes.byref(dims),
                                 ctypes.byref(n)) == 0
    return tuple(dims[i] for i in range(n.value))


# ------------------------------------------------------------------------------------------ the rule itself

def test_view_extent() -> None:
    assert view_extent((2, 3), (3, 1)) == 6
    assert view_extent((2, 3), (6, 2), 5) == 5 + 6 + 4 + 1
    assert view_extent((2, 0, 3), (1, 1, 1), 9) == 0
    assert view_extent((1, 1), (100, 100), 3) == 4


def _raw_call(session: Session, *, go_storage, gi_storage, go_view: str = "sliced", gi_view: str = "plain") -> None:
    """Both phases through the faithful binding, with the storage dims given (None: the binding's default)."""
    n, c, i, o = 1, 2, (2, 2, 2), (4, 4, 4)
    item = 4
    go_shape, gi_shape = (n, c, *o), (n, c, *i)
    go_elems = 2 * int(np.prod(go_shape)) + int(np.prod(go_shape[1:])) * 2
    with DeviceBuffer(session.device, go_elems * item) as gbuf, DeviceBuffer(session.device, 4096) as ibuf, \
            IntArray(o) as osz, IntArray((n, c, *i)) as isz:
        gbuf.memset(0)
        ibuf.memset(0)
        if go_view == "sliced":  # base [2,2,4,4,8], view [1:, ..., ::2]
            go_strides, go_offset = (256, 128, 32, 8, 2), 256
        else:
            go_strides, go_offset = None, 0
        if gi_view == "strided":  # every other element
            gi_strides = tuple(2 * s for s in (16, 8, 4, 2, 1))
        else:
            gi_strides = None
        go = Tensor(go_shape, np.float32, gbuf, strides=go_strides, offset=go_offset, format=Format.NCDHW,
                    storage_dims=go_storage)
        gi = Tensor(gi_shape, np.float32, ibuf, strides=gi_strides, format=Format.NCDHW, storage_dims=gi_storage)
        with go, gi:
            size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(go, osz, isz, 0.0, 0.0, 0.0, gi)
            with DeviceBuffer(session.device, max(size, 1)) as ws:
                aclnnUpsampleNearestExact3dBackward(ws.ptr if size else None, size, executor, session.stream)
                session.stream.synchronize()


def test_raw_gradout_view_past_its_storage_is_561103(no_leaks, session: Session) -> None:
    # the official sample's storage (the view shape) on a sliced view: the view reaches past it
    with pytest.raises(AclError) as err:
        _raw_call(session, go_storage=(1, 2, 4, 4, 4), gi_storage=None)
    e = err.value
    assert e.code == INNER_NULLPTR
    assert "gradOut" in str(e) and "storage [1,2,4,4,4] holds 128 elements" in str(e)
    assert "reaches elements 256 to 510" in str(e)


def test_raw_gradinput_view_past_its_storage_is_561103(no_leaks, session: Session) -> None:
    with pytest.raises(AclError) as err:
        _raw_call(session, go_storage=None, gi_storage=(1, 2, 2, 2, 2), go_view="plain", gi_view="strided")
    assert err.value.code == INNER_NULLPTR
    assert "gradInput" in str(err.value) and "holds 16 elements" in str(err.value)


def test_raw_contiguous_view_is_not_validated(no_leaks, session: Session) -> None:
    # nnopbase validates only non-contiguous tensors: the sample's storage dims are fine for them
    _raw_call(session, go_storage=(1, 2, 4, 4, 4), gi_storage=(1, 2, 2, 2, 2), go_view="plain")


def test_raw_default_storage_covers_both(no_leaks, session: Session) -> None:
    _raw_call(session, go_storage=None, gi_storage=None, go_view="sliced", gi_view="strided")


def test_negative_reach_is_561103(no_leaks, session: Session) -> None:
    with DeviceBuffer(session.device, 4096) as buf, IntArray((2, 2, 2)) as osz, IntArray((1, 1, 1, 1, 1)) as isz:
        # (a raw address: over the buffer, the binding itself refuses a view that reaches below it)
        go = Tensor((1, 1, 2, 2, 2), np.float32, address=buf.ptr, strides=(8, 8, 4, 2, -1), offset=0,
                    format=Format.NCDHW)
        gi = Tensor((1, 1, 1, 1, 1), np.float32, address=buf.ptr + 2048, format=Format.NCDHW)
        with go, gi, pytest.raises(AclError) as err:
            aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(go, osz, isz, 0.0, 0.0, 0.0, gi)
    assert err.value.code == INNER_NULLPTR and "reaches elements -1 to" in str(err.value)


# ------------------------------------------------------------------------------------------ the binding's tensors

def test_device_array_declares_the_whole_buffer(no_leaks, session: Session) -> None:
    g = _sliced((2, 3, 4, 6, 6))
    with session.upload(g) as go:
        assert go.offset > 0 and go.strides[-1] == 2
        elems = go.buffer.nbytes // 4
        assert go.tensor.storage_dims == (elems,)
        assert _storage_shape(go.tensor) == (elems,)
        assert go.tensor.address == go.buffer.ptr
        assert view_extent(go.shape, go.strides, go.offset) <= elems


@pytest.mark.parametrize("plans", [True, False], ids=["plans", "one-shot"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_sliced_and_permuted_numpy_inputs(plans: bool, layout: str, no_leaks) -> None:
    in5 = (2, 3, 3, 4, 5)
    out3 = (6, 8, 10)
    shape = (2, 3, *out3) if layout == "NCDHW" else (2, *out3, 3)
    sliced = _sliced(shape, 1)
    base = np.random.default_rng(2).integers(-4, 5, (shape[0], shape[2], shape[3], shape[4], shape[1]))
    permuted = np.transpose(base.astype(np.float32), (0, 4, 1, 2, 3))
    assert not sliced.flags.c_contiguous and not permuted.flags.c_contiguous
    with Session(0, plans=plans) as s:
        for g in (sliced, permuted):
            np.testing.assert_array_equal(s.backward(g, out3, in5, layout=layout), _want(g, out3, in5, layout))


def test_smoke_matrix_sliced_and_permuted_cases_pass(no_leaks, session: Session) -> None:
    cases = [c for c in smoke.build_matrix() if c.strided]
    assert {c.strided for c in cases} == {"sliced", "permuted"} and len(cases) >= 10
    for case in cases:
        entry = smoke.run_compute_case(session, case)
        assert entry["status"] == "pass", entry


@pytest.mark.parametrize("plans", [True, False], ids=["plans", "one-shot"])
def test_strided_out_views(plans: bool, no_leaks) -> None:
    in5, out3 = (1, 2, 3, 4, 4), (6, 8, 8)
    g = np.random.default_rng(3).integers(-4, 5, (1, 2, *out3)).astype(np.float32)
    want = _want(g, out3, in5)
    with Session(0, plans=plans) as s:
        # a numpy out= that is every other element of a bigger array, at an offset
        host = np.full((2, 2, 3, 4, 8), -7.0, np.float32)
        out = host[1:, :, :, :, 1::2]
        assert s.backward(g, out3, in5, out=out) is out
        np.testing.assert_array_equal(out, want)
        assert (host[1:, :, :, :, ::2] == -7.0).all() and (host[:1] == -7.0).all()  # the gaps are kept
        # a device out= uploaded from such a view (offset and gaps on the device)
        gi = s.upload(np.zeros((1, 2, 3, 4, 8), np.float32)[..., 1::2], param="gradInput")
        assert gi.offset > 0 and gi.strides[-1] == 2
        go = s.upload(g)
        assert s.backward(go, out3, in5, out=gi) is gi
        np.testing.assert_array_equal(gi.download(), want)


@pytest.mark.parametrize("plan", [True, False], ids=["plan", "one-shot"])
def test_prepared_calls_given_new_strided_arrays(no_leaks, session: Session, plan: bool) -> None:
    in5, out3 = (1, 2, 2, 3, 3), (4, 6, 6)
    shape = (1, 2, *out3)
    grads = [_sliced(shape, seed) for seed in range(3)]
    gos = [session.upload(g) for g in grads]
    # the same view (shape, strides, offset) in a bigger buffer: another storage size
    host = np.zeros(gos[0].buffer.nbytes // 4 + 100, np.float32)
    big = DeviceArray(session, DeviceBuffer(session.device, host.nbytes), gos[0].shape, gos[0].dtype, "NCDHW",
                      gos[0].strides, gos[0].offset)
    view = np.lib.stride_tricks.as_strided(host[big.offset:], big.shape, tuple(4 * st for st in big.strides))
    view[...] = grads[2]
    big.buffer.upload(host)
    gos.append(big)
    assert big.tensor.storage_dims == (host.size,) != gos[0].tensor.storage_dims
    gis = [session.upload(np.zeros((1, 2, 2, 3, 6), np.float32)[..., 1::2], param="gradInput") for _ in range(2)]
    call = session.prepare(gos[0], out3, in5, out=gis[0], plan=plan)
    for k, go in enumerate(gos):
        gi = gis[k % 2]
        call(go, gi)
        np.testing.assert_array_equal(gi.download(), _want(grads[min(k, 2)], out3, in5))
    call.close()
    big.close()


def test_torch_view_with_a_storage_offset_out_too(no_leaks, session: Session) -> None:
    torch = pytest.importorskip("torch")
    from upsample3d_grad.functional import backward_torch
    from upsample3d_grad.torch_interop import describe_tensor

    base = torch.arange(3 * 2 * 4 * 4 * 8, dtype=torch.float32).reshape(3, 2, 4, 4, 8) % 7
    g = base[1:, :, :, :, 1::2]
    out_base = torch.full((2, 2, 2, 2, 8), -1.0)
    out = out_base[:, :, :, :, ::4]
    assert g.storage_offset() > 0 and not g.is_contiguous() and not out.is_contiguous()
    d = describe_tensor(g)
    assert d.storage_dims == (base.numel(),) and view_extent(d.shape, d.strides, d.offset) <= base.numel()
    got = backward_torch(g, (4, 4, 4), (2, 2, 2, 2, 2), out=out, session=session)
    assert got is out
    np.testing.assert_array_equal(out.numpy(), _want(g.numpy(), (4, 4, 4), (2, 2, 2, 2, 2)))
    assert (out_base[..., 1:4] == -1.0).all()


# ------------------------------------------------------------------------------------------ raw Tensor users

@pytest.mark.parametrize(("shape", "strides", "offset", "words"), [
    ((1, 1, 4, 4, 5), None, 0, "elements 0 to 79, outside its buffer of 256 bytes (64 elements)"),
    ((1, 1, 4, 4, 4), None, 1, "elements 1 to 64"),
    ((1, 1, 2, 2, 2), (8, 8, 4, 2, -1), 0, "elements -1 to"),
])
def test_a_tensor_over_a_buffer_must_lie_inside_it(no_leaks, session: Session, shape, strides, offset,
                                                   words: str) -> None:
    """CANN never checks an output's extent (cann-abi.md §8.1): the binding refuses a view outside its buffer
    when the Tensor is made, before any C call could write past it."""
    with DeviceBuffer(session.device, 256) as buf:
        made = sim.call_count("aclCreateTensor")
        with pytest.raises(ValueError, match="shape, strides, offset") as err:
            Tensor(shape, np.float32, buf, strides=strides, offset=offset, format=Format.NCDHW)
        assert words in str(err.value)
        assert sim.call_count("aclCreateTensor") == made
        with Tensor((1, 1, 4, 4, 4), np.float32, buf, format=Format.NCDHW) as whole:  # exactly the buffer
            assert whole.storage_dims == (64,)
