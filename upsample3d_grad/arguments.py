"""The operator's arguments as phase 1 receives them, converted from Python values with errors in CANN's codes."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from acl_bindings import AclnnParamError, AclTypeError, DataType, Format, dtype_to_acl
from acl_bindings.values import int_tuple

from .op import PHASE1, layout_format

__all__ = ["TensorSpec", "param_label", "plain_key", "spec_of", "int_sequence", "scale_triple", "normalize_scales",
           "SUPPORTED", "SUPPORTED_NAMES"]

SUPPORTED = (DataType.FLOAT, DataType.FLOAT16, DataType.BF16)
#: The supported dtypes as every message spells them.
SUPPORTED_NAMES = "float32, float16 or bfloat16"
#: The C names of the three scale parameters, in order
SCALE_NAMES = ("scalesD", "scalesH", "scalesW")
_PY_NAMES = {"gradOut": "grad_output", "outputSize": "output_size", "inputSize": "input_size",
             "gradInput": "grad_input", "scalesD": "scales_d", "scalesH": "scales_h", "scalesW": "scales_w",
             "self": "input"}  # (the forward's self; its out is out in Python too)


@dataclass(frozen=True)
class TensorSpec:
    """What phase 1 sees of a tensor: view dims, ``aclDataType`` and ``aclFormat``."""

    shape: tuple[int, ...]
    dtype: int = int(DataType.FLOAT)
    format: int = int(Format.NCDHW)


def param_label(param: str) -> str:
    """*param* as messages name it: the C name, and the Python one where it differs."""
    py = _PY_NAMES.get(param)
    return f"{param} ({py})" if py and py != param else param


def plain_key(sizes: tuple[Any, ...], scales: tuple[Any, ...], strict: Any, layout: Any) -> Optional[tuple[Any, ...]]:
    """*sizes*, *scales*, *strict* and *layout* as part of a kept call's key, when each is of a plain type (tuples,
    lists or ``torch.Size`` of ints; None or floats; a bool; a str), else None: equal values of other types (2.0
    for 2), or unhashable ones, take the full call, which may refuse them."""
    for size in sizes:
        if type(size) is not tuple:  # a list or torch.Size: its key is the tuple's
            if not all(isinstance(s, (tuple, list)) for s in sizes):
                return None
            return plain_key(tuple(tuple(s) for s in sizes), scales, strict, layout)
        for n in size:
            if type(n) is not int:  # (not a bool, nor numpy's ints)
                return None
    for s in scales:
        if s is not None and type(s) is not float:  # (not numpy's floats)
            return None
    if type(strict) is not bool or type(layout) is not str:
        return None
    return (sizes, tuple(scales), strict, layout)


def _fail(param: str, rule: str, code: int = 161002, func: str = PHASE1,
          kind: type[AclnnParamError] = AclnnParamError) -> AclnnParamError:
    return kind(code, func, f"{param_label(param)}: {rule}")


def spec_of(array: Any, layout: str, param: str, func: str = PHASE1) -> Optional[TensorSpec]:
    """The :class:`TensorSpec` of a numpy array in *layout* (None stays None); errors name *func*, and a value
    that is not a numpy array raises :class:`acl_bindings.AclTypeError`."""
    if array is None:
        return None
    if not isinstance(array, np.ndarray):
        raise _fail(param, f"expected a numpy array ({SUPPORTED_NAMES}), got {type(array).__name__}", func=func,
                    kind=AclTypeError)  # (a TypeError, with CANN's 161002)
    try:
        acl = int(dtype_to_acl(array.dtype))
    except TypeError:
        raise _fail(param, f"dtype must be {SUPPORTED_NAMES}, got {array.dtype}", func=func) from None
    return TensorSpec(tuple(int(n) for n in array.shape), acl, int(layout_format(layout, func)))


def int_sequence(values: Any, param: str, func: str = PHASE1) -> list[int]:
    """*values* as a list of int64 values (:func:`acl_bindings.values.int_tuple`, naming *param* as the messages
    do); a wrong Python type raises :class:`acl_bindings.AclTypeError`."""
    return list(int_tuple(values, param_label(param), func))


def scale_triple(scales: Any) -> tuple[Any, Any, Any]:
    """``(scalesD, scalesH, scalesW)`` from a sequence of three (161002 otherwise); values are checked later."""
    try:
        sd, sh, sw = scales
    except (TypeError, ValueError):
        raise AclnnParamError(161002, PHASE1, f"scales: expected 3 values, got {scales!r}") from None
    return sd, sh, sw


def normalize_scales(scales_d: Any, scales_h: Any, scales_w: Any, func: str = PHASE1) -> tuple[float, float, float]:
    """None -> 0.0 (CANN's "not given"); other values must be real numbers (errors name *func*)."""
    if scales_d is None and scales_h is None and scales_w is None:
        return 0.0, 0.0, 0.0
    out = []
    for name, v in zip(SCALE_NAMES, (scales_d, scales_h, scales_w)):
        if v is None:
            out.append(0.0)
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.floating, np.integer)):
            raise _fail(name, f"expected a float or None, got {type(v).__name__} {v!r}", func=func, kind=AclTypeError)
        out.append(float(v))
    return out[0], out[1], out[2]


def _check_scale_values(scales: tuple[float, float, float], func: str = PHASE1) -> None:
    """The documented rule on scales, for both operators: each finite and >= 0 (161002 naming the first that is not)."""
    for name, s in zip(SCALE_NAMES, scales):
        if not math.isfinite(s) or s < 0:
            raise _fail(name, f"scale must be finite and >= 0 (0 or None means not given), got {s!r}", func=func)


def _mixed_given(scales: tuple[float, float, float]) -> str:
    """``"scalesD=2.0, ..."``, the scales that are > 0, when only some of the three are (else "")."""
    given = [f"{name}={s!r}" for name, s in zip(SCALE_NAMES, scales) if s > 0]
    return ", ".join(given) if len(given) < 3 else ""
