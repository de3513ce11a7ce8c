"""CPU torch tensors are accepted everywhere numpy arrays are (zero-copy numpy views of them).

``Session.backward`` (input and ``out=``), ``Session.upload`` and the module function's ``out=``.
A tensor on another device type is a clear ``TypeError`` that names the parameter.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from upsample3d_grad import Session, reference, upsample_nearest_exact3d_backward

torch = pytest.importorskip("torch")

OUT3, IN5 = (4, 6, 6), (2, 3, 2, 3, 3)
TDTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _grad(tdtype=torch.float32, strided: bool = False):
    """gradOut [2,3,4,6,6]: a view with a storage offset and a step of 2, or a contiguous tensor."""
    base = (torch.arange(3 * 3 * 4 * 6 * 12, dtype=torch.float32).reshape(3, 3, 4, 6, 12) % 5 - 2).to(tdtype)
    return base[1:, :, :, :, 1::2] if strided else base[1:, :, :, :, :6].contiguous()


def _host(t) -> np.ndarray:
    from upsample3d_grad.torch_interop import tensor_to_numpy

    return tensor_to_numpy(t)


def _want(g) -> np.ndarray:
    from upsample3d_grad.torch_interop import tensor_to_numpy

    return reference.upsample_nearest_exact3d_backward(np.ascontiguousarray(tensor_to_numpy(g)), OUT3, IN5)


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", list(TDTYPES))
@pytest.mark.parametrize("plans", [True, False], ids=["plans", "one-shot"])
def test_backward_takes_a_cpu_tensor(no_leaks, dtype: str, strided: bool, plans: bool) -> None:
    g = _grad(TDTYPES[dtype], strided)
    assert g.is_contiguous() is not strided and (g.storage_offset() > 0) is strided
    with Session(0, plans=plans) as s:
        got = s.backward(g, OUT3, IN5)
    assert isinstance(got, torch.Tensor) and got.dtype == g.dtype  # torch in, torch out (issue 27)
    np.testing.assert_array_equal(_host(got), _want(g))


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_backward_writes_into_a_cpu_tensor_out(no_leaks, session: Session, strided: bool) -> None:
    g = _grad()
    host = torch.full((2, 3, 2, 3, 6), -9.0)
    out = host[..., ::2] if strided else torch.full((2, 3, 2, 3, 3), -9.0)
    assert session.backward(g, OUT3, IN5, out=out) is out
    np.testing.assert_array_equal(out.numpy(), _want(g))
    if strided:
        assert (host[..., 1::2] == -9.0).all()  # the gaps are kept


def test_upload_takes_a_cpu_tensor(no_leaks, session: Session) -> None:
    g = _grad(strided=True)
    go = session.upload(g)
    assert go.strides == tuple(g.stride()) and go.shape == tuple(g.shape)
    np.testing.assert_array_equal(go.download(), g.numpy())
    gi = session.upload(torch.zeros(IN5), param="gradInput")
    session.backward(go, OUT3, IN5, out=gi)
    np.testing.assert_array_equal(gi.download(), _want(g))


def test_the_module_function_writes_into_a_cpu_tensor_out(no_leaks) -> None:
    g = _grad(torch.float16)
    out = torch.empty(IN5, dtype=torch.float16)
    try:
        assert upsample_nearest_exact3d_backward(g, OUT3, IN5, out=out) is out
    finally:
        from upsample3d_grad.functional import close_default_session

        close_default_session()
    np.testing.assert_array_equal(out.numpy(), _want(g))


def test_a_tensor_on_another_device_is_a_type_error(no_leaks, session: Session) -> None:
    meta = torch.empty((2, 3, *OUT3), device="meta")
    meta_out = torch.empty(IN5, device="meta")
    with pytest.raises(TypeError, match=r"gradOut \(grad_output\): the torch tensor is on meta, not the CPU"):
        session.backward(meta, OUT3, IN5)
    with pytest.raises(TypeError, match=r"gradInput \(out\): the torch tensor is on meta, not the CPU"):
        session.backward(_grad(), OUT3, IN5, out=meta_out)
    with pytest.raises(TypeError, match=r"gradOut: the torch tensor is on meta"):
        session.upload(meta)
    try:
        with pytest.raises(TypeError, match=r"gradInput \(out\): the torch tensor is on meta"):
            upsample_nearest_exact3d_backward(_grad(), OUT3, IN5, out=meta_out)
    finally:
        from upsample3d_grad.functional import close_default_session

        close_default_session()


def test_a_read_only_tensor_out_is_refused(no_leaks, session: Session) -> None:
    out = torch.zeros(IN5)._neg_view()
    with pytest.raises(TypeError, match="negative or conjugate"):
        session.backward(_grad(), OUT3, IN5, out=out)


def test_float_tensors_leave_ml_dtypes_unimported() -> None:
    """ml_dtypes takes most of a second to import (over ten seconds on a loaded machine): a float32 or float16
    call, numpy or torch, backward or forward, must not pay it; a bfloat16 tensor then imports it."""
    code = ("import sys, numpy as np, torch\n"
            "from upsample3d_grad import Session\n"
            "from upsample3d_grad.functional import backward_torch, forward_torch\n"
            "with Session() as s:\n"
            "    for dt in (np.float32, np.float16):\n"
            "        s.backward(np.ones((2, 2, 2, 2, 2), dt), (2, 2, 2), (2, 2, 1, 1, 1))\n"
            "        s.forward(np.ones((2, 2, 2, 2, 2), dt), (4, 4, 4))\n"
            "for dt in (torch.float32, torch.float16):\n"
            "    backward_torch(torch.ones(2, 2, 2, 2, 2, dtype=dt), (2, 2, 2), (2, 2, 1, 1, 1))\n"
            "    forward_torch(torch.ones(2, 2, 2, 2, 2, dtype=dt), (4, 4, 4))\n"
            "assert 'ml_dtypes' not in sys.modules, 'a float call imported ml_dtypes'\n"
            "backward_torch(torch.ones(2, 2, 2, 2, 2, dtype=torch.bfloat16), (2, 2, 2), (2, 2, 1, 1, 1))\n"
            "assert 'ml_dtypes' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
