"""Argument checks of the numpy reference (a ``ValueError`` naming the parameter, the rule and the value)."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

LAYOUTS: tuple[str, ...] = ("NCDHW", "NDHWC")  # the supported memory layouts (physical dim orders)
CONVENTIONS: tuple[str, ...] = ("cann", "torch_cpu")  # the supported index conventions
#: names of the dtypes accepted for gradOut (cann-abi.md §5.1 step 3.2; bfloat16 is ml_dtypes')
SUPPORTED_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
_DIM_NAMES = ("D", "H", "W")
Scales = Sequence[Optional[float]]  # the three scales (Optional: Python 3.9 evaluates this line)


def _given(scale: float | None) -> bool:
    """True when a scale counts as supplied: not None and > 0 (NaN is not)."""
    return scale is not None and scale > 0


def _check_scale(name: str, scale: Any) -> float | None:
    """One scale argument as a float (or None): a real number, finite in float32 when > 0."""
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


def _as_int(name: str, value: Any) -> int:
    """*value* as an int (``operator.index``; bool is refused)."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ValueError(f"{name} must be an integer, got {value!r}")


def _int_seq(name: str, value: Any, fields: str) -> tuple[int, ...]:
    """*value* as a tuple of ints, one per name in *fields* (``"oD, oH, oW"``); errors name ``name[k]``."""
    n = fields.count(",") + 1
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValueError(f"{name} must be a sequence of {n} integers, got {value!r}")
    if len(value) != n:
        raise ValueError(f"{name} must have length {n} ({fields}), got length {len(value)}: {value!r}")
    if all(type(v) is int for v in value):
        return tuple(value)
    return tuple(_as_int(f"{name}[{k}]", v) for k, v in enumerate(value))


def _check_args(output_size: Any, input_size: Any, scales_d: Any, scales_h: Any, scales_w: Any
                ) -> tuple[tuple[int, int, int], tuple[int, int, int, int, int], Scales]:
    """``output_size`` (3 ints > 0) and ``input_size`` (N, C >= 0; D, H, W > 0) as int tuples, and the three scales
    ``scales_d``, ``scales_h``, ``scales_w``."""
    osz = _int_seq("output_size", output_size, "oD, oH, oW")
    isz = _int_seq("input_size", input_size, "N, C, iD, iH, iW")
    for k in range(3):
        if osz[k] <= 0:
            raise ValueError(f"output_size[{k}] ({_DIM_NAMES[k]}) must be > 0, got {osz[k]}")
        if isz[k + 2] <= 0:
            raise ValueError(f"input_size[{k + 2}] ({_DIM_NAMES[k]}) must be > 0, got {isz[k + 2]}")
    for k in range(2):
        if isz[k] < 0:
            raise ValueError(f"input_size[{k}] ({'NC'[k]}) must be >= 0, got {isz[k]}")
    scales = [_check_scale(f"scales_{m.lower()}", s) for m, s in zip(_DIM_NAMES, (scales_d, scales_h, scales_w))]
    return osz, isz, scales  # type: ignore[return-value]


def _check_dim(in_size: Any, out_size: Any) -> tuple[int, int]:
    """The sizes ``I`` and ``O`` of one dim, each > 0."""
    i, o = _as_int("in_size", in_size), _as_int("out_size", out_size)
    for name, v in (("in_size", i), ("out_size", o)):
        if v <= 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    return i, o


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _check_array(name: str, arr: Any) -> np.ndarray:
    """*arr* as a 5-D array of a supported dtype."""
    arr = np.asarray(arr)
    if arr.dtype.name not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} dtype must be one of float32, float16, bfloat16, got {arr.dtype}")
    if arr.ndim != 5:
        raise ValueError(f"{name} must be 5-D, got {arr.ndim}-D with shape {arr.shape}")
    return arr


def _logical(x: np.ndarray, layout: str) -> tuple[int, int, int, int, int]:
    """``(N, C, D, H, W)`` of a 5-D array in *layout*."""
    return x.shape if layout == "NCDHW" else (x.shape[0], x.shape[4], *x.shape[1:4])  # type: ignore[return-value]


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, int, int, int, int]:
    """The physical shape of ``(N, C, D, H, W)`` in *layout*."""
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)


def spatial_axes(layout: str) -> tuple[int, int, int]:
    """Axes of D, H, W in the physical array of *layout*."""
    return (2, 3, 4) if layout == "NCDHW" else (1, 2, 3)
