"""Argument checks of the numpy reference, and the constants they check against.

Every bad argument is a :class:`ValueError` that names the parameter, the rule and the value.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

LAYOUTS: tuple[str, ...] = ("NCDHW", "NDHWC")
"""Supported memory layouts (physical dim orders)."""

CONVENTIONS: tuple[str, ...] = ("cann", "torch_cpu")
"""Supported index conventions."""

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
SUPPORTED_DTYPES: tuple[np.dtype, ...] = (_F32, np.dtype(np.float16), _BF16)
"""dtypes accepted for gradOut (cann-abi.md §5.1 step 3.2)."""

_DIM_NAMES = ("D", "H", "W")


def _given(scale: float | None) -> bool:
    """True when a scale counts as supplied: not None and > 0 (NaN is not)."""
    return scale is not None and scale > 0


def _check_scale(name: str, scale: Any) -> float | None:
    """Validate one scale argument and return it as a float (or None)."""
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number or None, got {scale!r}")
    value = float(scale)
    if value > 0:
        with np.errstate(over="ignore"):
            as_f32 = np.float32(value)
        if not math.isfinite(value) or not np.isfinite(as_f32):
            raise ValueError(f"{name} must be finite in float32 when > 0, got {scale!r}")
    return value


def _check_scales(scales_d: Any, scales_h: Any, scales_w: Any) -> list[float | None]:
    """Validate the three scale arguments (``scales_d``, ``scales_h``, ``scales_w``)."""
    return [_check_scale(f"scales_{m.lower()}", s) for m, s in zip(_DIM_NAMES, (scales_d, scales_h, scales_w))]

def _as_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _int_tuple(name: str, values: Any) -> tuple[int, ...]:
    """*values* as a tuple of ints; an error names the element (``name[k]``)."""
    if all(type(v) is int for v in values):  # the usual case, without building every element's name
        return tuple(values)
    return tuple(_as_int(f"{name}[{k}]", v) for k, v in enumerate(values))


def _check_sizes(output_size: Any, input_size: Any) -> tuple[tuple[int, int, int], tuple[int, int, int, int, int]]:
    """Validate ``output_size`` (3 ints > 0) and ``input_size`` (N, C >= 0; D, H, W > 0)."""
    if isinstance(output_size, (str, bytes)) or not isinstance(output_size, (Sequence, np.ndarray)):
        raise ValueError(f"output_size must be a sequence of 3 integers, got {output_size!r}")
    if len(output_size) != 3:
        raise ValueError(f"output_size must have length 3 (oD, oH, oW), got length {len(output_size)}: {output_size!r}")
    if isinstance(input_size, (str, bytes)) or not isinstance(input_size, (Sequence, np.ndarray)):
        raise ValueError(f"input_size must be a sequence of 5 integers, got {input_size!r}")
    if len(input_size) != 5:
        raise ValueError(
            f"input_size must have length 5 (N, C, iD, iH, iW), got length {len(input_size)}: {input_size!r}"
        )
    osz, isz = _int_tuple("output_size", output_size), _int_tuple("input_size", input_size)
    for k in range(3):
        if osz[k] <= 0:
            raise ValueError(f"output_size[{k}] ({_DIM_NAMES[k]}) must be > 0, got {osz[k]}")
        if isz[k + 2] <= 0:
            raise ValueError(f"input_size[{k + 2}] ({_DIM_NAMES[k]}) must be > 0, got {isz[k + 2]}")
    for k in range(2):
        if isz[k] < 0:
            raise ValueError(f"input_size[{k}] ({'NC'[k]}) must be >= 0, got {isz[k]}")
    return osz, isz  # type: ignore[return-value]


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _check_array(name: str, arr: Any) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} dtype must be one of float32, float16, bfloat16, got {arr.dtype}")
    if arr.ndim != 5:
        raise ValueError(f"{name} must be 5-D, got {arr.ndim}-D with shape {arr.shape}")
    return arr


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, int, int, int, int]:
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)
