"""One table of bad input, three tiers: the host checks, the simulator (host checks bypassed), the NPU.

This file runs the first two; tests/npu runs the third from the same table.
"""

from __future__ import annotations

import pytest

from acl_bindings import AclnnParamError
from upsample3d_grad import Session
from upsample3d_grad.checks import BAD_CASES, F16, GOOD_CASES, BadCase, TensorSpec, check_params
from upsample3d_grad.tools import smoke

CANN_CASES = [c for c in BAD_CASES if c.cann_checks]

#: Two faults each, in checks CANN makes in this order (cann-abi.md §5.1 step 3): the earlier one must decide the
#: code and the parameter named, in the host checks and in the simulator alike.
_GO, _GI = TensorSpec((2, 2, 6, 8, 10)), TensorSpec((2, 2, 3, 4, 5))
ORDER_CASES = [
    BadCase("null before dtype", None, (6, 8, 10), (2, 2, 3, 4, 5), TensorSpec((2, 2, 3, 4, 5), F16), 161001,
            "gradOut"),
    BadCase("dtype before lengths", _GO, (6, 8), (2, 2, 3, 4, 5), TensorSpec((2, 2, 3, 4, 5), F16), 161002,
            "gradInput"),
    BadCase("lengths before elements", _GO, (6, 8), (2, 2, 0, 4, 5), _GI, 161002, "outputSize"),
    BadCase("elements before shapes", TensorSpec((2, 2, 6, 8, 11)), (6, 8, 10), (2, 2, 0, 4, 5), _GI, 161002,
            "inputSize"),
    BadCase("shapes before scales", _GO, (6, 8, 10), (2, 2, 3, 4, 5), TensorSpec((2, 2, 3, 4, 6)), 161002,
            "gradInput", scales=(2.0, 2.0, 51.0)),
    BadCase("scales before INT32_MAX", TensorSpec((1, 1, 1, 1, 2 ** 31)), (1, 1, 2 ** 31), (1, 1, 1, 1, 2 ** 26),
            TensorSpec((1, 1, 1, 1, 2 ** 26)), 161002, "scalesW", scales=(1.0, 1.0, 50.5)),
]


@pytest.mark.parametrize("case", ORDER_CASES, ids=[c.label for c in ORDER_CASES])
def test_the_first_failing_check_decides_in_both(no_leaks: None, session: Session, case: BadCase) -> None:
    entry = _phase1(case, session)
    assert entry["got_code"] == case.code, entry
    assert entry["message"].startswith(f"aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize: {case.param}"), entry
    with pytest.raises(AclnnParamError) as info:
        check_params(*case.call_args(), strict=False)
    assert info.value.code == case.code and info.value.detail.startswith(case.param), info.value


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
