"""One table of bad input for the forward, two tiers here: the host checks and the simulator (host checks
bypassed) give the same code for every case CANN itself checks, and the simulator's message names the same
parameter.  (The table is upsample3d_grad.forward_checks.FORWARD_BAD_CASES.)"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from acl_bindings import AclError, AclnnParamError, Device, DeviceBuffer, IntArray
from tests.sim.test_forward_sim import OP
from upsample3d_grad.forward_checks import FORWARD_BAD_CASES, FORWARD_GOOD_CASES, ForwardCase, check_forward_params
from upsample3d_grad.tools.smoke import _buffer_bytes, _spec_tensor

CANN_CASES = [c for c in FORWARD_BAD_CASES if c.cann_checks]


def _phase1(device: Device, case: ForwardCase) -> tuple[int, str]:
    """The case through the simulator's phase 1 alone; (status, message)."""
    with DeviceBuffer(device, _buffer_bytes(case.self_spec)) as xb, DeviceBuffer(device, _buffer_bytes(case.out)) as yb:
        tx, ty = _spec_tensor(case.self_spec, xb), _spec_tensor(case.out, yb)
        osz: Optional[IntArray] = IntArray(case.output_size) if case.output_size is not None else None
        try:
            size, executor = OP.get_workspace_size(tx, osz, *case.scales, ty)
            executor.close()  # never run
            return 0, ""
        except AclError as exc:
            return exc.code, exc.detail or str(exc)
        finally:
            for obj in (tx, ty, osz):
                if obj is not None:
                    obj.close()


@pytest.fixture()
def device(no_leaks: None) -> Any:
    with Device(0) as dev:
        yield dev


@pytest.mark.parametrize("case", CANN_CASES, ids=[c.label for c in CANN_CASES])
def test_simulator_and_host_checks_agree(device: Device, case: ForwardCase) -> None:
    code, message = _phase1(device, case)
    assert code == case.code, (code, message)
    assert message.startswith(f"aclnnUpsampleNearestExact3dGetWorkspaceSize: {case.param}"), message
    with pytest.raises(AclnnParamError) as info:
        check_forward_params(*case.call_args(), strict=False)
    assert info.value.code == case.code and info.value.detail.startswith(case.param)


@pytest.mark.parametrize("case", FORWARD_GOOD_CASES, ids=[c.label for c in FORWARD_GOOD_CASES])
def test_good_cases_pass_in_the_simulator(device: Device, case: ForwardCase) -> None:
    assert _phase1(device, case)[0] == 0


@pytest.mark.parametrize("case", [c for c in FORWARD_BAD_CASES if not c.cann_checks],
                         ids=[c.label for c in FORWARD_BAD_CASES if not c.cann_checks])
def test_the_documented_constraints_are_not_checked_by_cann(device: Device, case: ForwardCase) -> None:
    assert _phase1(device, case)[0] == 0
