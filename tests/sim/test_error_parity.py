"""One table of bad input, three tiers: the host checks, the simulator (host checks bypassed), the NPU.

This file runs the first two; tests/npu runs the third from the same table.
"""

from __future__ import annotations

import pytest

from acl_bindings import AclnnParamError
from upsample3d_grad import Session
from upsample3d_grad.checks import BAD_CASES, GOOD_CASES, BadCase, check_params
from upsample3d_grad.tools import smoke

CANN_CASES = [c for c in BAD_CASES if c.cann_checks]


def _phase1(case: BadCase, session: Session) -> dict:
    """The case through the faithful phase 1, host checks bypassed: the same runner as `smoke` and tests/npu."""
    return smoke.run_bad_case(session, case, soc="CANN-Simulator")


@pytest.mark.parametrize("case", CANN_CASES, ids=[c.label for c in CANN_CASES])
def test_simulator_gives_the_listed_code_without_host_checks(no_leaks: None, session: Session,
                                                             case: BadCase) -> None:
    entry = _phase1(case, session)
    assert entry["status"] == "pass" and entry["got_code"] == case.code, entry
    # the simulator's own message names the parameter its check is about
    assert entry["message"].startswith(f"aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize: {case.param}"), entry


@pytest.mark.parametrize("case", CANN_CASES, ids=[c.label for c in CANN_CASES])
def test_host_checks_agree_with_the_simulator(case: BadCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(*case.call_args(), strict=False)
    assert info.value.code == case.code and info.value.detail.startswith(case.param)


@pytest.mark.parametrize("case", GOOD_CASES, ids=[c.label for c in GOOD_CASES])
def test_good_cases_pass_in_the_simulator(no_leaks: None, session: Session, case: BadCase) -> None:
    entry = _phase1(case, session)
    assert entry["status"] == "pass" and entry["got_code"] == 0, entry


def test_documented_limits_are_not_checked_by_cann_itself(session: Session) -> None:
    # the strict-only case the simulator can run cheaply: outputSize != floor(inputSize*scale)
    case = next(c for c in BAD_CASES if c.label == "outputSize != floor(inputSize*scale)")
    assert _phase1(case, session)["got_code"] == 0
