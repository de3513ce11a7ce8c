"""The backward's host checks: phase 1's in CANN's order and codes, the documented limits CANN leaves
unchecked, and the cases as data (docs/operators.md, "Host checks")."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

from acl_bindings import AclnnInnerError, DataType, Format
from acl_bindings import AclnnParamError as AclnnParamError  # (re-exported: the operator raises checks.AclnnParamError)
from acl_bindings.enums import dtype_name
from acl_bindings.meta import overlap_problem

from .arguments import (
    SCALE_NAMES,
    SUPPORTED,
    SUPPORTED_NAMES,
    TensorSpec,
    _check_scale_values,
    _fail,
    _mixed_given,
    int_sequence,
    normalize_scales,
    scale_triple,
    spec_of,
)
from .op import PHASE1, layout_format, physical_shape, result_shape

__all__ = [
    "PHASE1", "TensorSpec", "BadCase", "BAD_CASES", "GOOD_CASES", "MixedScalesWarning", "check_params",
    "normalize_scales", "scale_triple", "spec_of", "layout_format", "int_sequence", "MAX_SCALE", "SUPPORTED_NAMES",
    "overlap_problem", "check_output_memory", "physical_shape", "result_shape",
]

MAX_SCALE = 50.0
INT32_MAX = 2 ** 31 - 1
DIM_LIMIT = 2 ** 20
MEMORY_LIMIT = 60 * 2 ** 30
_ITEMSIZE = {DataType.FLOAT: 4, DataType.FLOAT16: 2, DataType.BF16: 2}


class MixedScalesWarning(UserWarning):
    """Some scales are > 0 and some are not: CANN then ignores all three (cann-abi.md §5.2)."""


def check_params(grad_out: Optional[TensorSpec], output_size: Any, input_size: Any,
                 scales_d: Any, scales_h: Any, scales_w: Any, grad_in: Optional[TensorSpec], *,
                 strict: bool = True, skip_uplimit: bool = False) -> tuple[float, float, float]:
    """Run phase 1's checks (cann-abi.md §5.1 step 3) in order; return the scales as CANN receives them.

    *grad_out*, *grad_in*: :class:`TensorSpec` or None (161001); *output_size* ``(oD, oH, oW)``; *input_size*
    ``(N, C, iD, iH, iW)``; scales None or 0 for "not given".  *strict* also enforces the documented limits CANN
    leaves unchecked; *skip_uplimit* skips the INT32_MAX dim check, as CANN does on Ascend950.  Raises
    :class:`acl_bindings.AclnnParamError` (161001 or 161002) naming the parameter, the rule and the value.
    """
    # 1. null checks, in CANN's order
    for param, value in (("gradOut", grad_out), ("outputSize", output_size), ("inputSize", input_size),
                         ("gradInput", grad_in)):
        if value is None:
            raise _fail(param, "expected a value but got None (a null pointer)", 161001)
    assert grad_out is not None and grad_in is not None
    out_sz = int_sequence(output_size, "outputSize")
    in_sz = int_sequence(input_size, "inputSize")
    scales = normalize_scales(scales_d, scales_h, scales_w)
    # 2. dtypes
    if grad_out.dtype not in SUPPORTED:
        raise _fail("gradOut", f"dtype must be {SUPPORTED_NAMES}, got {dtype_name(grad_out.dtype)}")
    if grad_in.dtype != grad_out.dtype:
        raise _fail("gradInput", f"dtype must equal gradOut's ({dtype_name(grad_out.dtype)}), "
                                 f"got {dtype_name(grad_in.dtype)}")
    # 3. ranks and lengths
    if len(grad_out.shape) != 5:
        raise _fail("gradOut", f"expected a 5-D tensor, got {len(grad_out.shape)} dims {list(grad_out.shape)}")
    if len(out_sz) != 3:
        raise _fail("outputSize", f"expected 3 values (D, H, W), got {len(out_sz)}: {out_sz}")
    if len(in_sz) != 5:
        raise _fail("inputSize", f"expected 5 values (N, C, D, H, W), got {len(in_sz)}: {in_sz}")
    # 4. elements and shapes
    for param, values, dhw in (("inputSize", in_sz, in_sz[2:]), ("outputSize", out_sz, out_sz)):
        for name, v in zip("DHW", dhw):
            if v <= 0:
                raise _fail(param, f"{name} must be > 0, got {values}")
    n, c = in_sz[0], in_sz[1]
    if n < 0 or c < 0:
        raise _fail("inputSize", f"N and C must be >= 0, got {in_sz}")
    want_out = physical_shape(grad_out.format, n, c, *out_sz)
    if tuple(grad_out.shape) != want_out:
        raise _fail("gradOut", f"shape must be {list(want_out)} ({_layout_name(grad_out.format)} from inputSize N,C "
                               f"and outputSize), got {list(grad_out.shape)}")
    want_in = physical_shape(grad_in.format, n, c, *in_sz[2:])
    if tuple(grad_in.shape) != want_in:
        raise _fail("gradInput", f"shape must be {list(want_in)} ({_layout_name(grad_in.format)} from inputSize), "
                                 f"got {list(grad_in.shape)}")
    for k, (name, s) in enumerate(zip(SCALE_NAMES, scales)):
        real = s if s > 0 else out_sz[k] / in_sz[2 + k]
        if real > MAX_SCALE:
            source = f"{name}={s!r}" if s > 0 else f"outputSize/inputSize = {out_sz[k]}/{in_sz[2 + k]}"
            raise _fail(name, f"scale must be <= {MAX_SCALE:g}, got {real!r} ({source})")
    # 5. INT32_MAX per gradOut dim (CANN skips this on Ascend950)
    if not skip_uplimit and max(grad_out.shape) > INT32_MAX:
        raise _fail("gradOut", f"each dim must be <= INT32_MAX ({INT32_MAX}), got {list(grad_out.shape)}")
    if strict:
        _check_documented_limits(grad_out, out_sz, in_sz, scales)
    if all(grad_out.shape):  # (an empty gradOut returns before the copy)
        view_copy_layouts("gradOut", grad_out, "gradInput", grad_in, PHASE1)
    given = _mixed_given(scales)
    if given:
        warnings.warn(MixedScalesWarning(
            f"scales (scalesD, scalesH, scalesW) = {scales}: only some are > 0, so CANN ignores all three "
            f"(ignored: {given}) and uses outputSize/inputSize in every dim. Pass all three scales or none."),
            stacklevel=3)
    return scales if all(s > 0 for s in scales) else (0.0, 0.0, 0.0)


def _check_documented_limits(grad_out: TensorSpec, out_sz: list[int], in_sz: list[int],
                             scales: tuple[float, float, float]) -> None:
    _check_scale_values(scales)
    n, c, i_d, i_h, i_w = in_sz
    o_d, o_h, o_w = out_sz
    for param, dims in (("gradOut", (n, c, o_d, o_h, o_w)), ("gradInput", tuple(in_sz))):
        if max(dims) > DIM_LIMIT:
            raise _fail(param, f"each dim must be <= 2^20 ({DIM_LIMIT}) (documented limit), got {list(dims)}")
    if n * c * o_d * o_h >= 2 ** 31:
        raise _fail("gradOut", f"N*C*D*H must be < 2^31 (documented limit), got {n}*{c}*{o_d}*{o_h} = "
                               f"{n * c * o_d * o_h}")
    if i_w * i_h >= 2 ** 31:
        raise _fail("gradInput", f"W*H must be < 2^31 (documented limit), got {i_w}*{i_h} = {i_w * i_h}")
    for k, name in enumerate("DHW"):
        if out_sz[k] > MAX_SCALE * in_sz[2 + k]:
            raise _fail("outputSize", f"outputSize/inputSize must be <= {MAX_SCALE:g} in each dim (documented limit; "
                                      "when not all three scales are > 0 the kernel gets that ratio, and the Atlas "
                                      f"A2/A3 tiling refuses it at launch), got {name}: {out_sz[k]}/{in_sz[2 + k]}")
    item = _ITEMSIZE[DataType(grad_out.dtype)]
    need = n * c * (o_d * o_h * o_w + i_d * i_h * i_w + o_d * o_h * i_w + o_d * i_h * i_w) * item
    if need >= MEMORY_LIMIT:
        raise _fail("gradOut", f"N*C*(oD*oH*oW + iD*iH*iW + oD*oH*iW + oD*iH*iW)*sizeof(dtype) must be < 60 GiB "
                               f"(documented limit), got {need} bytes")
    if all(s > 0 for s in scales):
        for k in range(3):
            want = math.floor(in_sz[2 + k] * scales[k])
            if out_sz[k] != want:
                raise _fail("outputSize", f"must equal floor(inputSize*scale) when scales are given: "
                                          f"{'DHW'[k]}: floor({in_sz[2 + k]}*{scales[k]!r}) = {want}, "
                                          f"got {out_sz[k]} (strict=False lets CANN decide)")


def check_output_memory(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                        param: str = "gradInput") -> None:
    """161002 when elements of the output *param* (byte *strides*) share memory: the result would be wrong."""
    problem = overlap_problem(shape, strides, itemsize)
    if problem is not None:
        raise _fail(param, f"{problem}; an output needs separate memory for every element")


def view_copy_layouts(in_name: str, source: TensorSpec, out_name: str, out: TensorSpec, func: str) -> None:
    """Phase 1's last step, ``ViewCopy(result, out)``: :class:`acl_bindings.AclnnInnerError` 561103 when *out*'s
    layout differs from *source*'s and *source*'s is not ND (cann-abi.md §10.1)."""
    if source.format != out.format and source.format != Format.ND:
        raise AclnnInnerError(561103, func, f"{out_name}: layout {_format_name(out.format)} differs from "
                              f"{in_name}'s {_format_name(source.format)}: CANN's copy of the result (in "
                              f"{in_name}'s layout) into {out_name} (ViewCopy) refuses mixed layouts; use one "
                              "layout for both")


def _format_name(fmt: int) -> str:
    try:
        return Format(fmt).name
    except ValueError:
        return f"format {fmt}"


def _layout_name(fmt: int) -> str:
    return "NDHWC" if fmt == Format.NDHWC else "NCDHW"


# --------------------------------------------------------------------------- the cases, as data

@dataclass(frozen=True)
class BadCase:
    """One call of phase 1 and the code CANN gives for it (``cann_checks=False``: a documented limit that only the
    strict host checks enforce, skipped by the simulator and NPU tiers)."""

    label: str
    grad_out: Optional[TensorSpec]
    output_size: Optional[tuple[int, ...]]
    input_size: Optional[tuple[int, ...]]
    grad_in: Optional[TensorSpec]
    code: int
    param: str
    scales: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cann_checks: bool = True
    extra: dict = field(default_factory=dict)

    def call_args(self) -> tuple[Any, ...]:
        """Arguments for :func:`check_params` in order."""
        return (self.grad_out, self.output_size, self.input_size, *self.scales, self.grad_in)


F32, F16, BF16 = int(DataType.FLOAT), int(DataType.FLOAT16), int(DataType.BF16)
NCDHW, NDHWC = int(Format.NCDHW), int(Format.NDHWC)
_GO = TensorSpec((2, 2, 6, 8, 10), F32, NCDHW)
_GI = TensorSpec((2, 2, 3, 4, 5), F32, NCDHW)
_OUT = (6, 8, 10)
_IN = (2, 2, 3, 4, 5)
_BAD_DTYPES = (DataType.UINT8, DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.DOUBLE,
               DataType.BOOL, DataType.COMPLEX64, DataType.COMPLEX128)


def _same(label: str, shape: tuple[int, ...], param: str, **kw: Any) -> BadCase:
    """A case of gradOut and gradInput both *shape*, and the sizes that go with it."""
    return BadCase(label, TensorSpec(shape), shape[2:], shape, TensorSpec(shape), 161002, param, **kw)


BAD_CASES: list[BadCase] = [
    # official unit-test cases (cann-abi.md §5.6)
    *[BadCase(f"dtype {dt.name}", TensorSpec(_GO.shape, int(dt)), _OUT, _IN, TensorSpec(_GI.shape, int(dt)), 161002,
              "gradOut") for dt in _BAD_DTYPES],
    BadCase("dtype mismatch", _GO, _OUT, _IN, TensorSpec(_GI.shape, F16), 161002, "gradInput"),
    BadCase("gradOut None", None, _OUT, _IN, _GI, 161001, "gradOut"),
    BadCase("outputSize None", _GO, None, _IN, _GI, 161001, "outputSize"),
    BadCase("inputSize None", _GO, _OUT, None, _GI, 161001, "inputSize"),
    BadCase("gradInput None", _GO, _OUT, _IN, None, 161001, "gradInput"),
    BadCase("gradOut 2-D", TensorSpec((2, 2)), _OUT, _IN, _GI, 161002, "gradOut"),
    BadCase("gradOut 6-D", TensorSpec((2, 2, 6, 8, 10, 1)), _OUT, _IN, _GI, 161002, "gradOut"),
    BadCase("gradOut D=0", TensorSpec((2, 2, 0, 4, 5)), (3, 4, 5), _IN, _GI, 161002, "gradOut"),
    BadCase("outputSize length 2", _GO, (6, 8), _IN, _GI, 161002, "outputSize"),
    BadCase("outputSize element 0", TensorSpec((2, 2, 6, 8, 0)), (6, 8, 0), _IN, _GI, 161002, "outputSize"),
    BadCase("inputSize length 4", _GO, _OUT, (2, 2, 3, 4), _GI, 161002, "inputSize"),
    BadCase("inputSize D=0", _GO, _OUT, (2, 2, 0, 4, 5), TensorSpec((2, 2, 0, 4, 5)), 161002, "inputSize"),
    BadCase("N mismatch", _GO, _OUT, (3, 2, 3, 4, 5), TensorSpec((3, 2, 3, 4, 5)), 161002, "gradOut"),
    BadCase("C mismatch", TensorSpec((2, 3, 6, 8, 10)), _OUT, _IN, _GI, 161002, "gradOut"),
    BadCase("gradOut DHW mismatch", TensorSpec((2, 2, 6, 8, 11)), _OUT, _IN, _GI, 161002, "gradOut"),
    BadCase("gradInput DHW mismatch", _GO, _OUT, _IN, TensorSpec((2, 2, 3, 4, 6)), 161002, "gradInput"),
    BadCase("gradInput 4-D", _GO, _OUT, _IN, TensorSpec((2, 2, 3, 4)), 161002, "gradInput"),
    BadCase("NDHWC gradOut given NCDHW dims", TensorSpec((2, 2, 6, 8, 10), F32, NDHWC), _OUT, _IN,
            TensorSpec((2, 3, 4, 5, 2), F32, NDHWC), 161002, "gradOut"),
    BadCase("size ratio > 50", TensorSpec((1, 1, 51, 1, 1)), (51, 1, 1), (1, 1, 1, 1, 1),
            TensorSpec((1, 1, 1, 1, 1)), 161002, "scalesD"),
    _same("scalesW > 50", (1, 1, 2, 2, 2), "scalesW", scales=(1.0, 1.0, 50.5)),
    _same("scale inf", (1, 1, 2, 2, 2), "scalesH", scales=(1.0, math.inf, 1.0)),
    BadCase("gradOut dim > INT32_MAX", TensorSpec((1, 1, 1, 1, 2 ** 31)), (1, 1, 2 ** 31), (1, 1, 1, 1, 2 ** 26),
            TensorSpec((1, 1, 1, 1, 2 ** 26)), 161002, "gradOut"),
    # documented limits that only the strict host checks enforce (cann-abi.md §5.5)
    _same("dim > 2^20", (1, 1, 1, 1, 2 ** 20 + 1), "gradOut", cann_checks=False),
    _same("N*C*D*H >= 2^31", (2 ** 11, 2 ** 10, 2 ** 10, 1, 1), "gradOut", cann_checks=False),
    _same("W*H >= 2^31", (1, 1, 1, 2 ** 20, 2 ** 11), "gradInput", cann_checks=False),
    _same("memory >= 60 GiB", (4, 16, 256, 512, 512), "gradOut", cann_checks=False),
    BadCase("outputSize != floor(inputSize*scale)", TensorSpec((2, 2, 5, 8, 12)), (5, 8, 12), (2, 2, 2, 4, 8),
            TensorSpec((2, 2, 2, 4, 8)), 161002, "outputSize", scales=(2.0, 2.0, 1.5), cann_checks=False),
    # (CANN's phase 1 reads scalesD = 10; the kernel gets 60/1, and the Atlas A2/A3 tiling refuses it at launch)
    BadCase("size ratio > 50, mixed scales", TensorSpec((1, 1, 60, 2, 2)), (60, 2, 2), (1, 1, 1, 2, 2),
            TensorSpec((1, 1, 1, 2, 2)), 161002, "outputSize", scales=(10.0, 0.0, 0.0), cann_checks=False),
    _same("negative scale", (1, 1, 2, 2, 2), "scalesD", scales=(-1.0, 1.0, 1.0), cann_checks=False),
    _same("NaN scale", (1, 1, 2, 2, 2), "scalesW", scales=(1.0, 1.0, math.nan), cann_checks=False),
]

#: Valid calls from the official unit tests (cann-abi.md §5.6); each gives 0.
GOOD_CASES: list[BadCase] = [
    BadCase("fp32 NCDHW", _GO, _OUT, _IN, _GI, 0, ""),
    BadCase("fp16 NCDHW", TensorSpec(_GO.shape, F16), _OUT, _IN, TensorSpec(_GI.shape, F16), 0, ""),
    BadCase("bf16 NCDHW", TensorSpec(_GO.shape, BF16), _OUT, _IN, TensorSpec(_GI.shape, BF16), 0, ""),
    BadCase("N=0", TensorSpec((0, 2, 6, 8, 10)), _OUT, (0, 2, 3, 4, 5), TensorSpec((0, 2, 3, 4, 5)), 0, ""),
    BadCase("C=0", TensorSpec((2, 0, 6, 8, 10)), _OUT, (2, 0, 3, 4, 5), TensorSpec((2, 0, 3, 4, 5)), 0, ""),
    BadCase("scales (2,2,1.5)", TensorSpec((2, 2, 4, 8, 12)), (4, 8, 12), (2, 2, 2, 4, 8),
            TensorSpec((2, 2, 2, 4, 8)), 0, "", scales=(2.0, 2.0, 1.5)),
    BadCase("NDHWC", TensorSpec((2, 2, 3, 4, 5), F32, NDHWC), (2, 3, 4), (2, 5, 4, 6, 8),
            TensorSpec((2, 4, 6, 8, 5), F32, NDHWC), 0, ""),
]
