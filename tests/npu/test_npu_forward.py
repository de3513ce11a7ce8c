"""The forward operator and the adjoint check on a real NPU (skipped with the reason on the simulator).

* The forward against the numpy reference of the kernel's law (bit copies) in every dtype and layout.
* Every case of the forward's bad-input table through CANN's own phase 1.
* The adjoint family: forward and backward on the device, checked against each other, with the residual
  the two index laws predict; this depends on no CPU reference values.
* With torch_npu: our forward against torch_npu's ``_upsample_nearest_exact3d`` on the same data.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from acl_bindings import AclError, DeviceBuffer, IntArray, soc_name
from upsample3d_grad import Session
from upsample3d_grad._env import default_device
from upsample3d_grad.forward import aclnnUpsampleNearestExact3dGetWorkspaceSize
from upsample3d_grad.forward_checks import FORWARD_BAD_CASES, ForwardCase
from upsample3d_grad.reference import forward as reference_forward
from upsample3d_grad.tools.adjoint_cases import adjoint_matrix, run_adjoint_case
from upsample3d_grad.tools.smoke import _base_entry, _buffer_bytes, _spec_tensor

DEVICE = default_device()
pytestmark = pytest.mark.npu
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


@pytest.fixture(scope="module")
def session(npu_backend: Any) -> Any:
    with Session(DEVICE) as s:
        yield s


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("case", [((2, 3, 2), (41, 7, 5), (None, None, None)),
                                  ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),
                                  ((16, 2, 2), (17, 2, 2), (1.1, 1.0, 1.0)),
                                  ((3, 4, 5), (2, 9, 11), (None, None, None))],
                         ids=["ties", "scaled", "two-reciprocals", "down"])
def test_forward_is_the_kernels_law(session: Any, case: Any, layout: str, dtype: Any) -> None:
    dhw, out, scales = case
    shape = (2, 3, *dhw) if layout == "NCDHW" else (2, *dhw, 3)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32).astype(dtype)
    y = session.forward(x, out, *scales, layout=layout)
    soc = reference_forward.soc_family(soc_name())
    want = reference_forward.upsample_nearest_exact3d_forward(x, out, *scales, layout=layout, soc=soc)
    assert y.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", [c for c in FORWARD_BAD_CASES if c.cann_checks], ids=lambda c: c.label)
def test_forward_bad_input_gives_canns_code(session: Any, case: ForwardCase) -> None:
    with DeviceBuffer(session.device, _buffer_bytes(case.self_spec)) as xb, \
            DeviceBuffer(session.device, _buffer_bytes(case.out)) as yb:
        tx, ty = _spec_tensor(case.self_spec, xb), _spec_tensor(case.out, yb)
        osz = IntArray(case.output_size) if case.output_size is not None else None
        try:
            with pytest.raises(AclError) as info:
                aclnnUpsampleNearestExact3dGetWorkspaceSize(tx, osz, *case.scales, ty)
            assert info.value.code == case.code
        finally:
            for obj in (tx, ty, osz):
                if obj is not None:
                    obj.close()


@pytest.mark.parametrize("case", adjoint_matrix(), ids=lambda c: c.name)
def test_the_adjoint_check(session: Any, case: Any) -> None:
    entry = run_adjoint_case(session, case, _base_entry(DEVICE, "adjoint", case.name), soc=soc_name())
    assert entry["status"] == "pass", entry["message"]


def test_forward_matches_torch_npu(session: Any, torch_on_npu: Any) -> None:
    torch = torch_on_npu  # (proved to run the aclnn kernels, not op-plugin's CPU fallback)

    x = np.random.default_rng(4).standard_normal((2, 3, 5, 4, 3)).astype(np.float32)
    ours = session.forward(x, (11, 9, 7))
    theirs = torch.ops.aten._upsample_nearest_exact3d(torch.from_numpy(x).to(f"npu:{DEVICE}"), [11, 9, 7])
    assert np.array_equal(ours, theirs.cpu().numpy())


@pytest.mark.parametrize("tdtype", ["float32", "float16", "bfloat16"])
def test_forward_torch_on_npu_tensors_in_place(session: Any, torch_on_npu: Any, tdtype: str) -> None:
    torch = torch_on_npu

    from upsample3d_grad.functional import forward_torch

    dt = getattr(torch, tdtype)
    x = torch.randn(2, 3, 5, 4, 3).to(dt).to(f"npu:{DEVICE}")
    out = torch.empty(2, 3, 11, 9, 7, dtype=dt, device=x.device)
    assert forward_torch(x, (11, 9, 7), out=out) is out  # in place, on torch_npu's current stream
    theirs = torch.ops.aten._upsample_nearest_exact3d(x, [11, 9, 7])
    assert torch.equal(out.cpu(), theirs.cpu())
