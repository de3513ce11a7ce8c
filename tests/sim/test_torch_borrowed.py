"""The zero-copy path of torch_interop (the one NPU tensors take), driven on the simulator.

On an NPU, ``backward_torch`` describes torch_npu tensors to aclnn by their storage base
pointer, strides, storage offset and a 1-D storage shape, and runs both phases on memory it
does not own (:func:`acl_bindings.engine.run_once`).  The simulator's device
memory is host memory, so a CPU torch tensor can be laid over a simulator device buffer
(``torch.frombuffer``) and the very same function run on it.  torch_npu itself, its
stream and its allocator are covered in tests/npu.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from acl_bindings import DeviceBuffer, Format
from acl_bindings.engine import run_once
from upsample3d_grad import Session, reference
from upsample3d_grad.op import OP
from upsample3d_grad.torch_interop import describe_tensor, tensor_to_numpy

torch = pytest.importorskip("torch")

DT = {"float32": (torch.float32, np.float32), "float16": (torch.float16, np.float16)}


def over(buf: DeviceBuffer, tdtype) -> object:
    """A 1-D CPU torch tensor whose storage *is* the simulator device buffer."""
    raw = (ctypes.c_char * buf.nbytes).from_address(buf.ptr)
    return torch.frombuffer(raw, dtype=tdtype)


@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_strided_view_with_offset_in_borrowed_memory(session: Session, no_leaks, dtype: str, layout: str) -> None:
    tdtype, ndtype = DT[dtype]
    n, c, i, o = 2, 3, (3, 4, 5), (6, 8, 10)
    go_shape = (n, c, *o) if layout == "NCDHW" else (n, *o, c)
    gi_shape = (n, c, *i) if layout == "NCDHW" else (n, *i, c)
    # gradOut: a view with a storage offset (skip one leading slab) and a stride of 2 in the last dim
    big_shape = (go_shape[0] + 1, *go_shape[1:-1], go_shape[-1] * 2)
    host = np.random.default_rng(1).standard_normal(big_shape).astype(ndtype)
    item = host.itemsize
    with DeviceBuffer(session.device, host.nbytes) as go_buf, \
            DeviceBuffer(session.device, int(np.prod(gi_shape)) * item + 64) as gi_buf, \
            DeviceBuffer(session.device, 1 << 25) as ws_buf:
        go_buf.upload(host)
        gi_buf.memset(0)
        base = over(go_buf, tdtype).view(big_shape)
        go_t = base[1:, ..., ::2]
        gi_t = over(gi_buf, tdtype)[16:16 + int(np.prod(gi_shape))].view(gi_shape)  # offset 16 elements
        go_desc, gi_desc = describe_tensor(go_t), describe_tensor(gi_t)
        assert go_desc.address == go_buf.ptr and go_desc.offset == int(np.prod(big_shape[1:]))
        assert gi_desc.address == gi_buf.ptr and gi_desc.offset == 16
        assert go_desc.storage_dims == (go_buf.nbytes // item,)
        asked: list[int] = []

        def workspace(nbytes: int) -> int:
            asked.append(nbytes)
            assert nbytes <= ws_buf.nbytes
            return ws_buf.ptr

        fmt = Format.NCDHW if layout == "NCDHW" else Format.NDHWC
        size = run_once(OP, (go_desc.arg(fmt), o, (n, c, *i), 0.0, 0.0, 0.0, gi_desc.arg(fmt)), workspace,
                        lambda: session.stream.handle)
        assert asked == ([size] if size else [])
        session.synchronize()
        got = np.empty(int(np.prod(gi_shape)) + 16, ndtype)
        gi_buf.download(got, 0)
        gradout = host[1:, ..., ::2]
        want = reference.upsample_nearest_exact3d_backward(gradout, o, (n, c, *i), layout=layout)
        np.testing.assert_allclose(got[16:].reshape(gi_shape).astype(np.float32), want.astype(np.float32),
                                   rtol=1e-5 if dtype == "float32" else 2.0 ** -10, atol=1e-5)
        assert not got[:16].any()  # nothing written before the view's offset
        del base, go_t, gi_t  # the buffers outlive every tensor over them


def test_a_call_on_borrowed_memory_raises_cann_codes_and_releases(session: Session, no_leaks) -> None:
    from acl_bindings import AclnnParamError

    with DeviceBuffer(session.device, 4096) as buf:
        t = over(buf, torch.float32)
        go = describe_tensor(t[:480].view(2, 2, 6, 4, 5))
        gi = describe_tensor(t[480:600].view(2, 2, 3, 2, 5))
        with pytest.raises(AclnnParamError) as info:  # outputSize W=6 does not match gradOut: CANN's own check
            run_once(OP, (go.arg(Format.NCDHW), (6, 4, 6), (2, 2, 3, 2, 5), 0.0, 0.0, 0.0, gi.arg(Format.NCDHW)),
                     lambda n: buf.ptr, lambda: session.stream.handle)
        assert info.value.code == 161002
        del t
    # no_leaks: the tensors, int arrays and executor were all released despite the error


def test_cpu_tensors_round_trip_through_backward_torch(session: Session) -> None:
    from upsample3d_grad.functional import backward_torch

    g = torch.randn(1, 2, 4, 6, 8)
    got = backward_torch(g, (4, 6, 8), (1, 2, 2, 3, 4), session=session)
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g), (4, 6, 8), (1, 2, 2, 3, 4))
    assert torch.allclose(got, torch.from_numpy(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_the_forward_on_borrowed_memory(session: Session, no_leaks, layout: str) -> None:
    from upsample3d_grad.forward import OP as FORWARD
    from upsample3d_grad.reference import forward as reference_forward

    x_shape = (2, 3, 2, 3, 2) if layout == "NCDHW" else (2, 2, 3, 2, 3)
    y_shape = (2, 3, 41, 7, 5) if layout == "NCDHW" else (2, 41, 7, 5, 3)
    host = np.random.default_rng(2).standard_normal(x_shape).astype(np.float32)
    fmt = Format.NCDHW if layout == "NCDHW" else Format.NDHWC
    with DeviceBuffer(session.device, host.nbytes) as x_buf, \
            DeviceBuffer(session.device, int(np.prod(y_shape)) * 4) as y_buf, \
            DeviceBuffer(session.device, 1 << 25) as ws_buf:
        x_buf.upload(host)
        x_t, y_t = over(x_buf, torch.float32).view(x_shape), over(y_buf, torch.float32).view(y_shape)
        values = (describe_tensor(x_t).arg(fmt), (41, 7, 5), 0.0, 0.0, 0.0, describe_tensor(y_t).arg(fmt))
        run_once(FORWARD, values, lambda n: ws_buf.ptr, lambda: session.stream.handle)
        session.synchronize()
        got = y_buf.download(np.empty(y_shape, np.float32))
        assert np.array_equal(got, reference_forward.upsample_nearest_exact3d_forward(host, (41, 7, 5), layout=layout))
        del x_t, y_t


def test_forward_torch_on_cpu_tensors(no_leaks, session: Session) -> None:
    from upsample3d_grad.functional import forward_torch

    x = torch.arange(1, 49, dtype=torch.float32).reshape(2, 2, 2, 2, 3)
    y = forward_torch(x, (1, 1, 1), session=session)
    assert isinstance(y, torch.Tensor) and y.flatten().tolist() == [11.0, 23.0, 35.0, 47.0]
    out = torch.zeros((2, 2, 1, 1, 1))
    assert forward_torch(x, (1, 1, 1), out=out, session=session) is out and out.flatten().tolist()[0] == 11.0
    assert forward_torch(x, (1, 1, 1), return_type="numpy", session=session).ravel().tolist()[3] == 47.0
    with pytest.raises(ValueError, match="return_type"):
        forward_torch(x, (1, 1, 1), return_type="list", session=session)


def test_a_null_current_stream_is_refused_before_the_call(session: Session, no_leaks) -> None:
    """torch_npu answers a NULL current stream when draining its task queue failed: the NPU path refuses it (it
    would otherwise launch on the NULL stream) before phase 1, making nothing."""
    import contextlib
    import types

    from acl_bindings import sim
    from upsample3d_grad.torch_interop import _npu_launch, _TorchNpu

    go, gi = session.upload(np.ones((1, 1, 2, 2, 2), np.float32)), session.empty((1, 1, 1, 1, 1))
    fake_npu = types.SimpleNamespace(npu=types.SimpleNamespace(device=lambda index: contextlib.nullcontext()))
    api = _TorchNpu(torch, fake_npu, lambda: 0, lambda index: 0, lambda t: 2)
    device = types.SimpleNamespace(index=0, type="npu")
    phase1, phase2 = sim.call_count(OP.phase1_name), sim.call_count(OP.phase2_name)
    session.device.activate()
    with pytest.raises(RuntimeError, match="current stream .* is NULL"):
        _npu_launch(OP, (go.arg, (2, 2, 2), (1, 1, 1, 1, 1), 0.0, 0.0, 0.0, gi.arg), device, api)
    assert (sim.call_count(OP.phase1_name), sim.call_count(OP.phase2_name)) == (phase1, phase2)
    for obj in (go, gi):
        obj.close()
    session.empty_cache()
