"""Host-side checks (upsample3d_grad.checks): CANN's order and codes, the documented limits, warnings."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from acl_bindings import AclnnParamError, DataType, Format
from upsample3d_grad import checks
from upsample3d_grad.checks import BAD_CASES, GOOD_CASES, TensorSpec, check_params


@pytest.mark.parametrize("case", BAD_CASES, ids=[c.label for c in BAD_CASES])
def test_bad_cases_raise_the_listed_code(case: checks.BadCase) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(*case.call_args())
    err = info.value
    assert err.code == case.code
    assert err.func == checks.PHASE1
    assert err.detail.startswith(case.param), err.detail
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("case", GOOD_CASES, ids=[c.label for c in GOOD_CASES])
def test_good_cases_pass(case: checks.BadCase) -> None:
    check_params(*case.call_args())


@pytest.mark.parametrize("case", [c for c in BAD_CASES if not c.cann_checks], ids=lambda c: c.label)
def test_documented_limits_can_be_turned_off(case: checks.BadCase) -> None:
    mixed = any(s > 0 for s in case.scales) and not all(s > 0 for s in case.scales)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_params(*case.call_args(), strict=False)
    assert any(issubclass(w.category, checks.MixedScalesWarning) for w in seen) == mixed


def test_uplimit_skipped_like_ascend950() -> None:
    case = next(c for c in BAD_CASES if c.label == "gradOut dim > INT32_MAX")
    check_params(*case.call_args(), strict=False, skip_uplimit=True)


def test_null_order_follows_cann() -> None:
    # every argument None: gradOut is reported first
    with pytest.raises(AclnnParamError) as info:
        check_params(None, None, None, 0, 0, 0, None)
    assert info.value.code == 161001 and info.value.detail.startswith("gradOut")
    go = TensorSpec((2, 2, 6, 8, 10))
    with pytest.raises(AclnnParamError) as info:
        check_params(go, (6, 8, 10), None, 0, 0, 0, None)
    assert info.value.detail.startswith("inputSize")


def test_dtype_checked_before_shape() -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(TensorSpec((2, 2), int(DataType.DOUBLE)), (6, 8), (1,), 0, 0, 0, TensorSpec((1,)))
    assert "dtype" in info.value.detail


def test_messages_name_parameter_rule_and_value() -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(TensorSpec((2, 2, 6, 8, 11)), (6, 8, 10), (2, 2, 3, 4, 5), 0, 0, 0, TensorSpec((2, 2, 3, 4, 5)))
    detail = info.value.detail
    assert "gradOut (grad_output)" in detail and "[2, 2, 6, 8, 10]" in detail and "[2, 2, 6, 8, 11]" in detail


def test_returned_scales_follow_all_or_nothing() -> None:
    go, gi = TensorSpec((2, 2, 4, 8, 12)), TensorSpec((2, 2, 2, 4, 8))
    assert check_params(go, (4, 8, 12), (2, 2, 2, 4, 8), 2.0, 2.0, 1.5, gi) == (2.0, 2.0, 1.5)
    with pytest.warns(checks.MixedScalesWarning, match=r"scalesD=2\.0"):
        used = check_params(go, (4, 8, 12), (2, 2, 2, 4, 8), 2.0, None, 0.0, gi)
    assert used == (0.0, 0.0, 0.0)


def test_no_warning_without_scales() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_params(TensorSpec((1, 1, 2, 2, 2)), (2, 2, 2), (1, 1, 1, 1, 1), None, None, None,
                     TensorSpec((1, 1, 1, 1, 1)))


@pytest.mark.parametrize("bad", ["3", b"x", 3.5, [1.0, 2, 3], None, object(), True])
def test_python_level_types_become_161002(bad: object) -> None:
    go, gi = TensorSpec((1, 1, 2, 2, 2)), TensorSpec((1, 1, 1, 1, 1))
    if bad is None:
        with pytest.raises(AclnnParamError) as info:
            check_params(go, bad, (1, 1, 1, 1, 1), 0, 0, 0, gi)
        assert info.value.code == 161001
        return
    with pytest.raises(AclnnParamError) as info:
        check_params(go, bad, (1, 1, 1, 1, 1), 0, 0, 0, gi)
    assert info.value.code == 161002 and info.value.detail.startswith("outputSize")


@pytest.mark.parametrize("scale", ["2", [2.0], True, object()])
def test_scale_types(scale: object) -> None:
    with pytest.raises(AclnnParamError) as info:
        check_params(TensorSpec((1, 1, 2, 2, 2)), (2, 2, 2), (1, 1, 1, 1, 1), scale, 2.0, 2.0,
                     TensorSpec((1, 1, 1, 1, 1)))
    assert info.value.code == 161002 and info.value.detail.startswith("scalesD")


def test_spec_of_arrays() -> None:
    a = np.zeros((1, 2, 3, 4, 5), np.float16)
    spec = checks.spec_of(a, "NDHWC", "gradOut")
    assert spec == TensorSpec((1, 2, 3, 4, 5), int(DataType.FLOAT16), int(Format.NDHWC))
    for bad in (np.zeros(3, np.float64), np.zeros(3, np.int32), np.zeros(3, bool), np.zeros(3, np.complex64)):
        with pytest.raises(AclnnParamError) as info:
            checks.spec_of(bad, "NCDHW", "gradOut")
        assert info.value.code == 161002 and "dtype" in info.value.detail
    with pytest.raises(AclnnParamError):
        checks.spec_of([1, 2], "NCDHW", "gradOut")
    with pytest.raises(AclnnParamError):
        checks.layout_format("NCHW")


def test_memory_formula_boundary() -> None:
    # just under 60 GiB passes; the table holds the case over it
    n, c, d, h, w = 1, 1, 1024, 1024, 1024  # 4 terms of 2^30 elements * 4 bytes = 16 GiB
    spec = TensorSpec((n, c, d, h, w))
    check_params(spec, (d, h, w), (n, c, d, h, w), None, None, None, spec)
    assert math.isclose(checks.MEMORY_LIMIT, 60 * 2 ** 30)


@pytest.mark.parametrize("layouts", [(Format.NDHWC, Format.NCDHW), (Format.NCDHW, Format.NDHWC)])
def test_mixed_layouts_are_refused_as_cann_view_copy_does(layouts: tuple[Format, Format]) -> None:
    # ViewCopy(result in gradOut's layout, gradInput): 561103 naming both layouts (cann-abi.md §10.1)
    from acl_bindings import AclError

    fo, fi = (int(f) for f in layouts)
    for n in (2, 0):  # an empty gradOut returns before the copy
        go = TensorSpec(checks.physical_shape(fo, n, 3, 4, 6, 8), DataType.FLOAT, fo)
        gi = TensorSpec(checks.physical_shape(fi, n, 3, 2, 3, 4), DataType.FLOAT, fi)
        if n == 0:
            checks.check_params(go, (4, 6, 8), (n, 3, 2, 3, 4), 0, 0, 0, gi)
            continue
        with pytest.raises(AclError) as info:
            checks.check_params(go, (4, 6, 8), (n, 3, 2, 3, 4), 0, 0, 0, gi)
        assert info.value.code == 561103 and info.value.func == checks.PHASE1
        assert layouts[0].name in info.value.detail and layouts[1].name in info.value.detail
        assert "gradOut" in info.value.detail and "gradInput" in info.value.detail
