"""The forward's host checks: CANN's order and codes (docs/cann-forward-facts.md §2), the table as data."""

from __future__ import annotations

import math

import pytest

from acl_bindings import AclError, AclnnParamError, AclTypeError, DataType, Format
from upsample3d_grad.checks import MixedScalesWarning, TensorSpec
from upsample3d_grad.forward_checks import (
    FORWARD_BAD_CASES,
    FORWARD_GOOD_CASES,
    FORWARD_PHASE1,
    ForwardCase,
    check_forward_params,
    forward_result_shape,
)

F32, BF16 = int(DataType.FLOAT), int(DataType.BF16)


@pytest.mark.parametrize("case", FORWARD_BAD_CASES, ids=[c.label for c in FORWARD_BAD_CASES])
def test_each_bad_case_gives_its_code_and_names_its_parameter(case: ForwardCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_forward_params(*case.call_args())
    assert info.value.code == case.code and info.value.func == FORWARD_PHASE1
    assert info.value.detail.startswith(case.param), info.value.detail


@pytest.mark.parametrize("case", [c for c in FORWARD_BAD_CASES if not c.cann_checks],
                         ids=[c.label for c in FORWARD_BAD_CASES if not c.cann_checks])
def test_the_documented_constraints_are_strict_only(case: ForwardCase) -> None:
    check_forward_params(*case.call_args(), strict=False)  # CANN itself lets them through


@pytest.mark.parametrize("case", FORWARD_GOOD_CASES, ids=[c.label for c in FORWARD_GOOD_CASES])
def test_good_cases_pass(case: ForwardCase) -> None:
    assert check_forward_params(*case.call_args()) == case.scales


def test_the_element_check_comes_before_the_rank_check() -> None:
    # a 6-D self with D = 0: CANN's element check (dims 1..4) fails first, with its own message
    with pytest.raises(AclnnParamError, match=r"self \(input\): D must be > 0"):
        check_forward_params(TensorSpec((2, 2, 0, 4, 5, 6)), (6, 8, 10), 0, 0, 0, TensorSpec((2, 2, 6, 8, 10)))
    # and outputSize's values are checked before its length: (6, 0, 10, 1) fails on the 0
    with pytest.raises(AclnnParamError, match=r"outputSize \(output_size\): H must be > 0"):
        check_forward_params(TensorSpec((2, 2, 3, 4, 5)), (6, 0, 10, 1), 0, 0, 0, TensorSpec((2, 2, 6, 8, 10)))


def test_c_zero_is_an_error_and_n_zero_is_not() -> None:
    with pytest.raises(AclnnParamError, match="C must be > 0"):
        check_forward_params(TensorSpec((2, 0, 3, 4, 5)), (6, 8, 10), 0, 0, 0, TensorSpec((2, 0, 6, 8, 10)))
    check_forward_params(TensorSpec((0, 2, 3, 4, 5)), (6, 8, 10), 0, 0, 0, TensorSpec((0, 2, 6, 8, 10)))


def test_the_scale_band_is_absolute_on_the_scale() -> None:
    x, y = TensorSpec((1, 1, 7, 1, 1)), TensorSpec((1, 1, 5, 1, 1))
    # I=7, s=0.7142857: trunc(7*s) = 4, but the band [4, 5] lets O=5 through (facts §2.1)
    check_forward_params(x, (5, 1, 1), 0.7142857, 1.0, 1.0, y, strict=False)
    with pytest.raises(AclnnParamError, match=r"must equal floor"):
        check_forward_params(x, (5, 1, 1), 0.7142857, 1.0, 1.0, y)  # strict: the documented floor rule
    with pytest.raises(AclnnParamError, match=r"scalesD \(scales_d\): 0\.7142857 conflicts .* D=6.*\[4, 5\]"):
        check_forward_params(x, (6, 1, 1), 0.7142857, 1.0, 1.0, TensorSpec((1, 1, 6, 1, 1)), strict=False)


def test_mixed_scales_are_not_checked_against_the_sizes_and_warn() -> None:
    x = TensorSpec((1, 1, 3, 3, 3))
    with pytest.warns(MixedScalesWarning, match="ignores all three"):
        check_forward_params(x, (9, 9, 9), 2.0, 0.0, 0.0, TensorSpec((1, 1, 9, 9, 9)))
    with pytest.warns(MixedScalesWarning, match="Ascend950 uses them per dim"):
        check_forward_params(x, (9, 9, 9), 2.0, 0.0, 0.0, TensorSpec((1, 1, 9, 9, 9)), soc="ascend950")


def test_the_310p_takes_no_bfloat16() -> None:
    x, y = TensorSpec((1, 1, 2, 2, 2), BF16), TensorSpec((1, 1, 4, 4, 4), BF16)
    check_forward_params(x, (4, 4, 4), 0, 0, 0, y)
    with pytest.raises(AclnnParamError, match="bfloat16"):
        check_forward_params(x, (4, 4, 4), 0, 0, 0, y, soc="310p")


def test_out_shape_follows_selfs_layout_only() -> None:
    x = TensorSpec((2, 3, 4, 5, 6), F32, int(Format.NDHWC))  # N=2, D=3, H=4, W=5, C=6
    assert forward_result_shape(x, (7, 8, 9)) == (2, 7, 8, 9, 6)
    check_forward_params(x, (7, 8, 9), 0, 0, 0, TensorSpec((2, 7, 8, 9, 6), F32, int(Format.NDHWC)))
    with pytest.raises(AclnnParamError, match="out") as shape:  # the shape check reads self's layout only
        check_forward_params(x, (7, 8, 9), 0, 0, 0, TensorSpec((2, 6, 7, 8, 9), F32, int(Format.NCDHW)))
    assert shape.value.code == 161002


@pytest.mark.parametrize("layouts", [(Format.NDHWC, Format.NCDHW), (Format.NCDHW, Format.NDHWC)])
def test_mixed_layouts_are_refused_as_cann_view_copy_does(layouts: tuple[Format, Format]) -> None:
    # ViewCopy(result in self's layout, out): 561103 (cann-abi.md §10.1); an empty self returns before it
    fx, fy = (int(f) for f in layouts)
    x = TensorSpec((2, 3, 4, 5, 6), F32, fx)
    y = TensorSpec(forward_result_shape(x, (7, 8, 9)), F32, fy)
    with pytest.raises(AclError) as info:
        check_forward_params(x, (7, 8, 9), 0, 0, 0, y)
    assert info.value.code == 561103 and info.value.func == FORWARD_PHASE1
    assert layouts[0].name in info.value.detail and layouts[1].name in info.value.detail
    assert "self" in info.value.detail and "out" in info.value.detail
    empty = TensorSpec((0, 3, 4, 5, 6), F32, fx)
    check_forward_params(empty, (7, 8, 9), 0, 0, 0, TensorSpec(forward_result_shape(empty, (7, 8, 9)), F32, fy))


def test_wrong_python_types_are_type_errors_naming_the_forward() -> None:
    x, y = TensorSpec((1, 1, 2, 2, 2)), TensorSpec((1, 1, 4, 4, 4))
    with pytest.raises(AclTypeError) as info:
        check_forward_params(x, (4, 4, 4), "2", 0, 0, y)
    assert info.value.func == FORWARD_PHASE1 and "scalesD" in info.value.detail
    with pytest.raises(AclTypeError, match="outputSize"):
        check_forward_params(x, (4.0, 4, 4), 0, 0, 0, y)


def test_a_nan_scale_counts_as_not_given_by_cann() -> None:
    x, y = TensorSpec((1, 1, 2, 2, 2)), TensorSpec((1, 1, 4, 4, 4))
    assert math.isnan(check_forward_params(x, (4, 4, 4), math.nan, 0, 0, y, strict=False)[0])
    with pytest.raises(AclnnParamError, match="finite"):
        check_forward_params(x, (4, 4, 4), math.nan, 0, 0, y)


@pytest.mark.parametrize("case", [c for c in FORWARD_BAD_CASES if c.cann_checks],
                         ids=[c.label for c in FORWARD_BAD_CASES if c.cann_checks])
def test_cases_cann_checks_fail_without_the_strict_checks_too(case: ForwardCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_forward_params(*case.call_args(), strict=False)
    assert info.value.code == case.code and info.value.detail.startswith(case.param)
