"""One table of bad input, three tiers: the host checks, the simulator (host checks bypassed), the NPU.

This file runs the first two; tests/npu runs the third from the same table.
"""

from __future__ import annotations

import numpy as np
import pytest

from acl_bindings import AclnnParamError, DataType, DeviceBuffer, IntArray, Tensor
from upsample3d_grad import Session
from upsample3d_grad._api import aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize
from upsample3d_grad.checks import BAD_CASES, GOOD_CASES, BadCase, TensorSpec, check_params

CANN_CASES = [c for c in BAD_CASES if c.cann_checks]


def _tensor(spec: TensorSpec | None, session: Session, keep: list) -> Tensor | None:
    if spec is None:
        return None
    count = int(np.prod(spec.shape, dtype=np.float64))
    nbytes = max(64, count * 4) if count < 2 ** 20 else 64
    buf = DeviceBuffer(session.device, nbytes)
    keep.append(buf)
    t = Tensor(spec.shape, DataType(spec.dtype), buf, format=spec.format)
    keep.append(t)
    return t


def _array(values: tuple[int, ...] | None, keep: list) -> IntArray | None:
    if values is None:
        return None
    arr = IntArray(values)
    keep.append(arr)
    return arr


def _phase1(case: BadCase, session: Session) -> int:
    keep: list = []
    try:
        args = (_tensor(case.grad_out, session, keep), _array(case.output_size, keep),
                _array(case.input_size, keep), *case.scales, _tensor(case.grad_in, session, keep))
        _, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(*args)
        executor.close()
        return 0
    finally:
        for obj in reversed(keep):
            obj.close()


@pytest.mark.parametrize("case", CANN_CASES, ids=[c.label for c in CANN_CASES])
def test_simulator_gives_the_listed_code_without_host_checks(no_leaks: None, session: Session,
                                                             case: BadCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        _phase1(case, session)
    assert info.value.code == case.code
    assert info.value.func == "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"
    assert case.param in info.value.detail, info.value.detail


@pytest.mark.parametrize("case", CANN_CASES, ids=[c.label for c in CANN_CASES])
def test_host_checks_agree_with_the_simulator(case: BadCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(*case.call_args(), strict=False)
    assert info.value.code == case.code and info.value.detail.startswith(case.param)


@pytest.mark.parametrize("case", GOOD_CASES, ids=[c.label for c in GOOD_CASES])
def test_good_cases_pass_in_the_simulator(no_leaks: None, session: Session, case: BadCase) -> None:
    assert _phase1(case, session) == 0


def test_documented_limits_are_not_checked_by_cann_itself(session: Session) -> None:
    # the strict-only case the simulator can run cheaply: outputSize != floor(inputSize*scale)
    case = next(c for c in BAD_CASES if c.label == "outputSize != floor(inputSize*scale)")
    assert _phase1(case, session) == 0
