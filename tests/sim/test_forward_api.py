"""The forward operator from Python: Session.forward, the module function with PyTorch's signature, the graph-IR
form, the faithful two-phase pair, torch CPU tensors, device arrays, the host checks, and the device adjoint check."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from acl_bindings import AclnnParamError, Device, DeviceBuffer, IntArray, Stream, Tensor, Workspace
from upsample3d_grad import (
    Session,
    UpsampleNearestExact3d,
    aclnnUpsampleNearestExact3d,
    aclnnUpsampleNearestExact3dGetWorkspaceSize,
    close_default_session,
    upsample_nearest_exact3d,
)
from upsample3d_grad.adjoint import device_adjoint_check
from upsample3d_grad.reference import forward as reference_forward

DOC_X = np.arange(1, 49, dtype=np.float32).reshape(2, 2, 2, 2, 3)  # the operator doc's sample (facts §1)
DOC_Y = [11.0, 23.0, 35.0, 47.0]
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def test_the_doc_sample(no_leaks: None, session: Session) -> None:
    assert session.forward(DOC_X, (1, 1, 1)).ravel().tolist() == DOC_Y
    assert upsample_nearest_exact3d(DOC_X, (1, 1, 1)).ravel().tolist() == DOC_Y
    assert UpsampleNearestExact3d(DOC_X, (1, 1, 1)).ravel().tolist() == DOC_Y
    close_default_session()  # the module-level entry points opened it


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("case", [((2, 3, 2), (41, 7, 5), (None, None, None)),
                                  ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),
                                  ((3, 4, 5), (2, 9, 11), (None, None, None))], ids=["ties", "scaled", "down"])
def test_bit_copies_by_the_kernels_law(no_leaks: None, session: Session, case: Any, layout: str, dtype: Any) -> None:
    dhw, out, scales = case
    shape = (2, 3, *dhw) if layout == "NCDHW" else (2, *dhw, 3)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32).astype(dtype)
    y = session.forward(x, out, *scales, layout=layout)
    want = reference_forward.upsample_nearest_exact3d_forward(x, out, *scales, layout=layout)
    assert y.dtype == x.dtype and y.tobytes() == want.tobytes()


def test_device_arrays_and_out(no_leaks: None, session: Session) -> None:
    xa = session.upload(DOC_X)
    ya = session.forward(xa, (1, 1, 1))
    assert ya.download().ravel().tolist() == DOC_Y
    out = np.zeros((2, 2, 1, 1, 1), np.float32)
    assert session.forward(DOC_X, (1, 1, 1), out=out) is out and out.ravel().tolist() == DOC_Y
    target = session.empty((2, 2, 1, 1, 1))
    assert session.forward(xa, (1, 1, 1), out=target) is target and target.download().ravel().tolist() == DOC_Y
    for arr in (xa, ya, target):
        arr.close()


def test_torch_cpu_tensors(no_leaks: None, session: Session) -> None:
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(DOC_X.copy())
    out = torch.zeros((2, 2, 1, 1, 1))
    assert session.forward(x, (1, 1, 1), out=out) is out and out.flatten().tolist() == DOC_Y
    assert session.forward(x, (1, 1, 1)).ravel().tolist() == DOC_Y


def test_matches_torch_at_shapes_without_ties(no_leaks: None, session: Session) -> None:
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((2, 3, 3, 4, 5)).astype(np.float32)
    y = session.forward(x, (7, 9, 11))
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=(7, 9, 11), mode="nearest-exact").numpy()
    assert np.array_equal(y, want)


def test_host_checks_speak_canns_codes(no_leaks: None, session: Session) -> None:
    with pytest.raises(AclnnParamError) as info:
        session.forward(DOC_X, (1, 0, 1))
    assert info.value.code == 161002 and info.value.func == "aclnnUpsampleNearestExact3dGetWorkspaceSize"
    assert "outputSize (output_size): H must be > 0" in info.value.detail
    with pytest.raises(AclnnParamError, match="self"):
        session.forward(DOC_X.astype(np.int32), (1, 1, 1))
    with pytest.raises(AclnnParamError, match="out: shape must be"):
        session.forward(DOC_X, (1, 1, 1), out=np.zeros((2, 2, 1, 1, 2), np.float32))
    with pytest.raises(AclnnParamError, match="conflicts"):
        session.forward(DOC_X, (4, 4, 4), 2.0, 2.0, 2.0)  # W: I=3, s=2: the band is [5, 6]


def test_the_faithful_pair(no_leaks: None) -> None:
    with Device(0) as device, Stream(device) as stream, DeviceBuffer(device, DOC_X.nbytes) as bx, \
            DeviceBuffer(device, 16) as by:
        bx.upload(DOC_X)
        with Tensor(DOC_X.shape, np.float32, bx) as tx, Tensor((2, 2, 1, 1, 1), np.float32, by) as ty, \
                IntArray((1, 1, 1)) as osz:
            size, executor = aclnnUpsampleNearestExact3dGetWorkspaceSize(tx, osz, 0.0, 0.0, 0.0, ty)
            workspace = Workspace(device, stream)
            aclnnUpsampleNearestExact3d(workspace.reserve(size), size, executor, stream)
            stream.synchronize()
            workspace.release()
        assert by.download(np.zeros(4, np.float32)).tolist() == DOC_Y


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_the_device_adjoint_check(no_leaks: None, session: Session, layout: str, dtype: Any) -> None:
    result = device_adjoint_check(session, (2, 3, 2, 3, 2), (41, 7, 5), dtype=dtype, layout=layout)
    assert result.passed and result.mismatched > 0, result.describe()
    scaled = device_adjoint_check(session, (2, 3, 27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5), dtype=dtype, layout=layout)
    assert scaled.passed and scaled.mismatched > 0, scaled.describe()


def test_the_device_adjoint_check_catches_a_wrong_forward_law(no_leaks: None, session: Session,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANN_SIM_TEST_FORWARD_LAW", "ceil")
    assert not device_adjoint_check(session, (2, 3, 3, 4, 5), (7, 9, 11)).passed


def test_the_smoke_adjoint_family(no_leaks: None, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from upsample3d_grad.tools import smoke
    from upsample3d_grad.tools.adjoint_cases import adjoint_matrix

    cases = adjoint_matrix()
    assert {c.dtype for c in cases} == {"float32", "float16", "bfloat16"} and {c.layout for c in cases} == {
        "NCDHW", "NDHWC"} and any(c.scales[0] for c in cases) and any(not c.scales[0] for c in cases)
    entries = list(smoke.iter_results(session, [], [], "", cases))
    assert [e["status"] for e in entries] == ["pass"] * len(cases), [e["message"] for e in entries]
    monkeypatch.setenv("CANN_SIM_TEST_FORWARD_LAW", "ceil")  # test-only: a wrong forward law
    wrong = list(smoke.iter_results(session, [], [], "", cases))
    failed = [e["name"] for e in wrong if e["status"] == "fail"]
    assert len(failed) >= len(cases) // 2 and all(e["kind"] == "adjoint" for e in wrong), failed
