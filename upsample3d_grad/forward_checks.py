"""The forward's host checks (``aclnnUpsampleNearestExact3d``): phase 1's in CANN's order and codes
(docs/cann-forward-facts.md §2), the documented constraints, the cases as data (docs/operators.md, "Host checks")."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional

from acl_bindings import DataType, Format
from acl_bindings.enums import dtype_name

from . import arguments
from .arguments import SCALE_NAMES, SUPPORTED, _check_scale_values, _mixed_given, int_sequence, normalize_scales
from .checks import _BAD_DTYPES, INT32_MAX, MixedScalesWarning, TensorSpec, _layout_name, view_copy_layouts
from .op import physical_shape

__all__ = [
    "FORWARD_PHASE1", "SCALE_EPSILON", "check_forward_params", "forward_result_shape", "ForwardCase",
    "FORWARD_BAD_CASES", "FORWARD_GOOD_CASES",
]

FORWARD_PHASE1 = "aclnnUpsampleNearestExact3dGetWorkspaceSize"
#: The absolute tolerance on a scale in the band check (§2.1).
SCALE_EPSILON = 1e-5
_INT64_LIMIT = 2.0 ** 63
_SUPPORTED_310P = (DataType.FLOAT, DataType.FLOAT16)
_fail = functools.partial(arguments._fail, func=FORWARD_PHASE1)


def _cdhw(spec: TensorSpec) -> tuple[int, int, int, int]:
    """C, D, H, W of self's view in self's layout (NDHWC: C last)."""
    s = spec.shape
    return (s[4], s[1], s[2], s[3]) if spec.format == Format.NDHWC else (s[1], s[2], s[3], s[4])


def forward_result_shape(self_spec: TensorSpec, output_size: tuple[int, int, int]) -> tuple[int, ...]:
    """The out shape phase 1 requires: ``[N, C, oD, oH, oW]``, or ``[N, oD, oH, oW, C]`` when self is NDHWC."""
    od, oh, ow = output_size
    return physical_shape(self_spec.format, self_spec.shape[0], _cdhw(self_spec)[0], od, oh, ow)


def check_forward_params(self_spec: Optional[TensorSpec], output_size: Any, scales_d: Any, scales_h: Any,
                         scales_w: Any, out: Optional[TensorSpec], *, soc: str = "a2a3",
                         strict: bool = True) -> tuple[float, float, float]:
    """Run the forward's phase-1 checks in CANN's order; return the scales as given (None -> 0.0).

    *self_spec*, *out*: :class:`~upsample3d_grad.checks.TensorSpec` or None (161001); *output_size*
    ``(oD, oH, oW)``; a scale None or <= 0 is "not given"; *soc* ``"a2a3"``, ``"ascend950"`` or ``"310p"`` (no
    bfloat16).  *strict* also enforces the documented constraints CANN leaves unchecked.  Raises
    :class:`acl_bindings.AclnnParamError` (161001 or 161002) naming the parameter, the rule and the value.
    """
    # 1. null checks, in CANN's order
    for param, value in (("self", self_spec), ("outputSize", output_size), ("out", out)):
        if value is None:
            raise _fail(param, "expected a value but got None (a null pointer)", 161001)
    assert self_spec is not None and out is not None
    osz = int_sequence(output_size, "outputSize", FORWARD_PHASE1)
    scales = normalize_scales(scales_d, scales_h, scales_w, FORWARD_PHASE1)
    # 2. dtypes
    supported = _SUPPORTED_310P if soc == "310p" else SUPPORTED
    if self_spec.dtype not in supported:
        names = ", ".join(dtype_name(int(d)) for d in supported)
        raise _fail("self", f"dtype must be one of {names} on this SoC, got {dtype_name(self_spec.dtype)}")
    if out.dtype != self_spec.dtype:
        raise _fail("out", f"dtype must equal self's ({dtype_name(self_spec.dtype)}), got {dtype_name(out.dtype)}")
    # 3. elements (CANN reads them before it checks the rank and the length)
    if len(self_spec.shape) < 5:
        raise _fail("self", f"expected a 5-D tensor, got {len(self_spec.shape)} dims {list(self_spec.shape)} "
                            "(CANN reads dims 1..4 before it checks the rank)")
    if len(osz) < 3:
        raise _fail("outputSize", f"expected 3 values (D, H, W), got {len(osz)}: {osz} (CANN reads 3 values "
                                  "before it checks the length)")
    c, d, h, w = _cdhw(self_spec)
    for name, value in zip("DHW", (d, h, w)):
        if value <= 0:
            raise _fail("self", f"{name} must be > 0, got shape {list(self_spec.shape)} "
                                f"({_layout_name(self_spec.format)})")
    for k, name in enumerate("DHW"):
        if osz[k] <= 0:
            raise _fail("outputSize", f"{name} must be > 0, got {osz}")
    if c <= 0:
        raise _fail("self", f"C must be > 0 (a non-empty 5-D tensor), got shape {list(self_spec.shape)} "
                            f"({_layout_name(self_spec.format)})")
    if all(s > 0 for s in scales):
        for k, (name, s, in_k) in enumerate(zip(SCALE_NAMES, scales, (d, h, w))):
            if not in_k * (s + SCALE_EPSILON) < _INT64_LIMIT:
                raise _fail(name, f"{s!r} times the input size {in_k} does not fit in int64 (CANN's band check "
                                  "converts it)")
            # (truncation toward zero, as the C++ double-to-int64 conversion)
            lo, hi = int(in_k * (s - SCALE_EPSILON)), int(in_k * (s + SCALE_EPSILON))
            if not lo <= osz[k] <= hi:
                raise _fail(name, f"{s!r} conflicts with outputSize {'DHW'[k]}={osz[k]}: with input size {in_k} "
                                  f"outputSize must lie in [{lo}, {hi}] (trunc(I*(s -/+ 1e-5)))")
    # 4. shapes
    if len(self_spec.shape) != 5:
        raise _fail("self", f"expected a 5-D tensor, got {len(self_spec.shape)} dims {list(self_spec.shape)}")
    if len(osz) != 3:
        raise _fail("outputSize", f"expected 3 values (D, H, W), got {len(osz)}: {osz}")
    want = forward_result_shape(self_spec, (osz[0], osz[1], osz[2]))
    if tuple(out.shape) != want:
        raise _fail("out", f"shape must be {list(want)} ({_layout_name(self_spec.format)}, from self's N, C and "
                           f"outputSize), got {list(out.shape)}")
    if strict:
        _check_documented(self_spec, osz, scales)
    if self_spec.shape[0]:  # (an empty self returns before the copy)
        view_copy_layouts("self", self_spec, "out", out, FORWARD_PHASE1)
    given = _mixed_given(scales)
    if given:
        what = ("Ascend950 uses them per dim" if soc == "ascend950"
                else "CANN ignores all three and uses the size ratio in every dim")
        warnings.warn(MixedScalesWarning(f"scales {scales}: only some are > 0 ({given}); {what}. "
                                         "Pass all three scales or none."), stacklevel=3)
    return scales


def _check_documented(self_spec: TensorSpec, osz: list[int], scales: tuple[float, float, float]) -> None:
    _check_scale_values(scales, FORWARD_PHASE1)
    for param, dims in (("self", self_spec.shape), ("outputSize", tuple(osz))):
        if max(dims) > INT32_MAX:
            raise _fail(param, f"each dim must be <= INT32_MAX ({INT32_MAX}) (documented), got {list(dims)}")
    if all(s > 0 for s in scales):
        for k, (s, in_k) in enumerate(zip(scales, _cdhw(self_spec)[1:])):
            want = math.floor(in_k * s)
            if osz[k] != want:
                raise _fail("outputSize", f"must equal floor(self*scale) when scales are given (documented): "
                                          f"{'DHW'[k]}: floor({in_k}*{s!r}) = {want}, got {osz[k]} "
                                          "(strict=False lets CANN's band decide)")


# --------------------------------------------------------------------------- the cases, as data

@dataclass(frozen=True)
class ForwardCase:
    """One call of the forward's phase 1 and its code (``cann_checks=False``: only the strict checks enforce it)."""

    label: str
    self_spec: Optional[TensorSpec]
    output_size: Optional[tuple[int, ...]]
    out: Optional[TensorSpec]
    code: int
    param: str
    scales: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cann_checks: bool = True

    def call_args(self) -> tuple[Any, ...]:
        """Arguments for :func:`check_forward_params` in order."""
        return (self.self_spec, self.output_size, *self.scales, self.out)


_F32, _F16, _BF16 = int(DataType.FLOAT), int(DataType.FLOAT16), int(DataType.BF16)
_NDHWC = int(Format.NDHWC)
_X = TensorSpec((2, 2, 3, 4, 5))
_Y = TensorSpec((2, 2, 6, 8, 10))
_OS = (6, 8, 10)

FORWARD_BAD_CASES: list[ForwardCase] = [
    # the official unit tests (docs/cann-forward-facts.md §2.3)
    *[ForwardCase(f"dtype {dt.name}", TensorSpec(_X.shape, int(dt)), _OS, TensorSpec(_Y.shape, int(dt)), 161002,
                  "self") for dt in _BAD_DTYPES],
    ForwardCase("out shape", _X, _OS, TensorSpec((2, 6, 8, 10, 2)), 161002, "out"),
    ForwardCase("C=0", TensorSpec((2, 0, 3, 4, 5)), _OS, TensorSpec((2, 0, 6, 8, 10)), 161002, "self"),
    ForwardCase("D=0", TensorSpec((2, 2, 0, 4, 5)), _OS, _Y, 161002, "self"),
    ForwardCase("self 3-D", TensorSpec((2, 2, 3)), _OS, _Y, 161002, "self"),
    ForwardCase("self 6-D", TensorSpec((2, 2, 3, 4, 5, 6)), _OS, _Y, 161002, "self"),
    ForwardCase("self None", None, _OS, _Y, 161001, "self"),
    ForwardCase("outputSize None", _X, None, _Y, 161001, "outputSize"),
    ForwardCase("out None", _X, _OS, None, 161001, "out"),
    ForwardCase("dtype mismatch", _X, _OS, TensorSpec(_Y.shape, _F16), 161002, "out"),
    ForwardCase("outputSize length 4", _X, (6, 8, 10, 6), _Y, 161002, "outputSize"),
    ForwardCase("outputSize element 0", _X, (6, 8, 0), TensorSpec((2, 2, 6, 8, 0)), 161002, "outputSize"),
    # derived from the code (§2.2, §2.3)
    ForwardCase("outputSize length 2", _X, (6, 8), _Y, 161002, "outputSize"),
    ForwardCase("outside the scale band", _X, (4, 8, 10), TensorSpec((2, 2, 4, 8, 10)), 161002, "scalesD",
                scales=(2.0, 2.0, 2.0)),  # D: I=3, s=2: the band is [5, 6]
    ForwardCase("scale band overflows int64", TensorSpec((1, 1, 2, 2, 2)), (2, 2, 2), TensorSpec((1, 1, 2, 2, 2)),
                161002, "scalesD", scales=(math.inf, 1.0, 1.0)),
    ForwardCase("NDHWC out given NCDHW dims", TensorSpec((2, 2, 3, 4, 5), _F32, _NDHWC), (6, 8, 10),
                TensorSpec((2, 5, 6, 8, 10), _F32, _NDHWC), 161002, "out"),
    # documented constraints only the strict checks enforce (§5)
    ForwardCase("outputSize != floor(self*scale) inside the band", TensorSpec((1, 1, 100000, 1, 1)),
                (100001, 1, 1), TensorSpec((1, 1, 100001, 1, 1)), 161002, "outputSize", scales=(1.0, 1.0, 1.0),
                cann_checks=False),
    ForwardCase("negative scale", TensorSpec((1, 1, 2, 2, 2)), (2, 2, 2), TensorSpec((1, 1, 2, 2, 2)), 161002,
                "scalesD", scales=(-1.0, 0.0, 0.0), cann_checks=False),
]

#: Valid calls (the official unit tests, §2.3); each gives 0.
FORWARD_GOOD_CASES: list[ForwardCase] = [
    ForwardCase("fp32 NCDHW", _X, _OS, _Y, 0, ""),
    ForwardCase("fp16 NCDHW", TensorSpec(_X.shape, _F16), _OS, TensorSpec(_Y.shape, _F16), 0, ""),
    ForwardCase("bf16 NCDHW", TensorSpec(_X.shape, _BF16), _OS, TensorSpec(_Y.shape, _BF16), 0, ""),
    ForwardCase("N=0", TensorSpec((0, 2, 3, 4, 5)), _OS, TensorSpec((0, 2, 6, 8, 10)), 0, ""),
    ForwardCase("NDHWC", TensorSpec((2, 2, 3, 4, 5), _F32, _NDHWC), _OS, TensorSpec((2, 6, 8, 10, 5), _F32, _NDHWC),
                0, ""),
    ForwardCase("scales (1.5, 2, 2.5)", _X, (4, 8, 12), TensorSpec((2, 2, 4, 8, 12)), 0, "",
                scales=(1.5, 2.0, 2.5)),
]
