"""torch interop with CPU tensors: zero-copy views, numpy or torch out, results equal to the reference.

The conversions need no library.  The ``backward_torch`` tests run the operator on the
backend this test run uses (the simulator by default) and skip when no library loads.
NPU tensors (torch_npu) are covered in tests/npu.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upsample3d_grad import reference
from upsample3d_grad.functional import backward_torch
from upsample3d_grad.torch_interop import describe_tensor, numpy_to_tensor, tensor_to_numpy

torch = pytest.importorskip("torch")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16), torch.bfloat16: BF16}
# float32 sums may differ in order; float16 / bfloat16 by one rounding (as in upsample3d_grad.tools.smoke)
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2.0 ** -10, BF16: 2.0 ** -7}


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.dtype == want.dtype and bool(np.allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=RTOL[want.dtype], atol=1e-4))


# --------------------------------------------------------------------------- conversions (no library)

@pytest.mark.parametrize("tdtype", list(DTYPES), ids=str)
def test_tensor_to_numpy_shares_memory(tdtype) -> None:
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).to(tdtype)
    a = tensor_to_numpy(t)
    assert a.dtype == DTYPES[tdtype]
    assert a.shape == (2, 3, 4)
    assert np.array_equal(a.astype(np.float32), np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    a[0, 0, 0] = 7  # writes through: no copy was made
    assert float(t[0, 0, 0]) == 7.0


def test_tensor_to_numpy_keeps_strides_and_offset() -> None:
    base = torch.arange(2 * 3 * 4 * 5 * 6, dtype=torch.float32).reshape(2, 3, 4, 5, 6)
    view = base.permute(0, 4, 1, 2, 3)[:, 1:, :, :, ::2]
    a = tensor_to_numpy(view)
    assert not a.flags.c_contiguous
    assert a.strides == tuple(s * 4 for s in view.stride())
    assert np.shares_memory(a, tensor_to_numpy(base))
    assert np.array_equal(a, view.contiguous().numpy())


def test_tensor_to_numpy_detaches_and_resolves() -> None:
    t = torch.ones(2, 2, requires_grad=True)
    assert tensor_to_numpy(t).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    neg = torch.ones(2)._neg_view()
    assert tensor_to_numpy(neg).tolist() == [-1.0, -1.0]


def test_tensor_to_numpy_rejects_other_devices_and_types() -> None:
    with pytest.raises(TypeError, match="not the CPU"):
        tensor_to_numpy(torch.empty(2, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        tensor_to_numpy(np.zeros(2))


def test_numpy_to_tensor_bfloat16_round_trip() -> None:
    a = np.array([1.5, -2.25, 3.0], dtype=BF16)
    t = numpy_to_tensor(a)
    assert t.dtype == torch.bfloat16
    assert t.tolist() == [1.5, -2.25, 3.0]
    assert np.shares_memory(tensor_to_numpy(t), a)


def test_describe_tensor_uses_the_storage_base() -> None:
    base = torch.zeros(3, 2, 4, 5, 6, dtype=torch.float16)
    view = base[1:, :, :, :, ::2]
    desc = describe_tensor(view)
    assert desc.shape == (2, 2, 4, 5, 3)
    assert desc.strides == (240, 120, 30, 6, 2)
    assert desc.offset == 240 == view.storage_offset()
    assert desc.address == base.untyped_storage().data_ptr()
    assert desc.address + desc.offset * 2 == view.data_ptr()
    assert desc.storage_dims == (base.numel(),)
    assert desc.dtype == np.float16


def test_describe_tensor_rejects_unsupported_dtypes() -> None:
    from acl_bindings import AclnnParamError

    with pytest.raises(AclnnParamError) as info:
        describe_tensor(torch.zeros(2, dtype=torch.float64))
    assert info.value.code == 161002


# --------------------------------------------------------------------------- the operator (needs a backend)

@pytest.fixture(scope="module")
def backend():
    from acl_bindings import LibraryNotFoundError, load_backend

    try:
        return load_backend()
    except LibraryNotFoundError as exc:
        pytest.skip(f"no library to run the operator on: {exc}".splitlines()[0])


@pytest.mark.parametrize("tdtype", list(DTYPES), ids=str)
@pytest.mark.parametrize("return_type", ["torch", "numpy"])
def test_backward_torch_matches_reference(backend, tdtype, return_type: str) -> None:
    g = torch.randn(2, 3, 6, 8, 10, generator=torch.Generator().manual_seed(1)).to(tdtype)
    got = backward_torch(g, (6, 8, 10), (2, 3, 3, 4, 5), return_type=return_type)
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g), (6, 8, 10), (2, 3, 3, 4, 5))
    if return_type == "torch":
        assert isinstance(got, torch.Tensor) and got.dtype == tdtype and got.device.type == "cpu"
        got = tensor_to_numpy(got)
    assert isinstance(got, np.ndarray)
    assert _close(got, want)


def test_backward_torch_scales_ndhwc_strided_and_out(backend) -> None:
    big = torch.randn(2, 4, 8, 12 * 2, 3, generator=torch.Generator().manual_seed(2))
    g = big[..., ::2, :]  # NDHWC [N, D, H, W, C], strided in W
    out = torch.full((2, 2, 4, 8, 3), 99.0)
    res = backward_torch(g, (4, 8, 12), (2, 3, 2, 4, 8), 2.0, 2.0, 1.5, layout="NDHWC", out=out)
    assert res is out  # written in place
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g), (4, 8, 12), (2, 3, 2, 4, 8), 2.0, 2.0,
                                                       1.5, layout="NDHWC")
    assert _close(tensor_to_numpy(out), want)


def test_module_function_accepts_torch_tensors(backend) -> None:
    from upsample3d_grad import upsample_nearest_exact3d_backward

    g = torch.arange(1, 33, dtype=torch.float32).reshape(2, 2, 2, 2, 2)
    got = upsample_nearest_exact3d_backward(g, (2, 2, 2), (2, 2, 1, 1, 1))
    assert got.ravel().tolist() == [36.0, 100.0, 164.0, 228.0]


def test_agrees_with_torch_cpu_where_conventions_agree(backend) -> None:
    out_size, in_size = (6, 9, 10), (1, 2, 3, 3, 5)  # integer ratios: (o + 0.5) * I / O is never an integer
    assert not any(reference.convention_differences(out_size, in_size).values())
    g = torch.randn(1, 2, *out_size, generator=torch.Generator().manual_seed(3))
    ours = backward_torch(g, out_size, in_size)
    theirs = torch.ops.aten._upsample_nearest_exact3d_backward(g, list(out_size), list(in_size))
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_differs_from_torch_cpu_exactly_at_ties(backend) -> None:
    # I=2 -> O=41 in D: o=20 is an exact tie, sent to input 1 by CANN and 0 by torch CPU (cann-abi.md §6.3)
    out_size, in_size = (41, 2, 2), (1, 1, 2, 1, 1)
    ties = reference.convention_differences(out_size, in_size)
    assert ties["D"] and not ties["H"] and not ties["W"]
    g = torch.ones(1, 1, *out_size)
    ours = backward_torch(g, out_size, in_size, return_type="numpy")
    theirs = torch.ops.aten._upsample_nearest_exact3d_backward(g, list(out_size), list(in_size)).numpy()
    assert np.array_equal(ours, reference.upsample_nearest_exact3d_backward(
        tensor_to_numpy(g), out_size, in_size, convention="cann"))
    assert np.array_equal(theirs, reference.upsample_nearest_exact3d_backward(
        tensor_to_numpy(g), out_size, in_size, convention="torch_cpu"))
    moved = 4.0 * len(ties["D"])  # each tied gradOut slab (2x2 ones) lands in a different input slice
    assert np.abs(ours - theirs).sum() == 2 * moved


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 2), c=st.integers(1, 3), i=st.tuples(*[st.integers(1, 5)] * 3),
       o=st.tuples(*[st.integers(1, 9)] * 3), tdtype=st.sampled_from(list(DTYPES)),
       transpose=st.booleans())
def test_backward_torch_property(backend, n, c, i, o, tdtype, transpose) -> None:
    shape = (n, c, *o)
    base = torch.randn(shape[::-1] if transpose else shape, generator=torch.Generator().manual_seed(4)).to(tdtype)
    g = base.permute(4, 3, 2, 1, 0) if transpose else base
    got = backward_torch(g, o, (n, c, *i), return_type="numpy")
    want = reference.upsample_nearest_exact3d_backward(tensor_to_numpy(g), o, (n, c, *i))
    assert _close(got, want)


def test_the_npu_kernel_proof_fires_on_a_cpu_computation() -> None:
    """tests/npu trusts a comparison with torch_npu only once tests/_kernel_proof.py finds no CPU computation; run on
    the CPU, which is what op-plugin's fallback does, it names both operators."""
    from tests._kernel_proof import cpu_fallback_evidence

    evidence = cpu_fallback_evidence(torch, "cpu")
    assert len(evidence) == 2 and all("op-plugin's CPU fallback ran" in e for e in evidence), evidence
    assert "Backward" in evidence[0] and "aclnnUpsampleNearestExact3d)" in evidence[1]
