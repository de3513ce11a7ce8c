"""The smoke family of adjoint checks: the forward and the backward on the device, checked against each other."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from acl_bindings import AclError
from acl_bindings.enums import as_dtype

from ..adjoint import device_adjoint_check
from ..reference import soc_family
from .smoke_cases import DTYPES

__all__ = ["AdjointCase", "adjoint_matrix", "run_adjoint_case"]

# (label, input N,C,D,H,W, output size, scales): ties from the facts (§6.4) and shapes without ties
_SHAPES: list[tuple[str, tuple[int, ...], tuple[int, int, int], tuple[Optional[float], ...]]] = [
    ("ties", (2, 3, 2, 3, 2), (41, 7, 5), (None, None, None)),
    ("scaled-ties", (2, 3, 27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),
    ("no-ties", (2, 3, 3, 4, 5), (7, 9, 11), (None, None, None)),
    ("scaled-no-ties", (1, 2, 2, 2, 3), (4, 6, 3), (2.0, 3.0, 1.0)),
]


@dataclass(frozen=True)
class AdjointCase:
    """One adjoint check: shape, scales, dtype and layout."""

    name: str
    dtype: str
    layout: str
    input_size: tuple[int, ...]
    output_size: tuple[int, int, int]
    scales: tuple[Optional[float], ...]


def adjoint_matrix(quick: bool = False) -> list[AdjointCase]:
    """Every dtype and layout for every shape (quick: float32 in both layouts, and every dtype once)."""
    return [AdjointCase(f"adjoint-{label}-{dtype}-{layout}", dtype, layout, isz, osz, scales)
            for label, isz, osz, scales in _SHAPES for dtype in DTYPES for layout in ("NCDHW", "NDHWC")
            if not (quick and dtype != "float32" and layout == "NDHWC")]


def run_adjoint_case(session: Any, case: AdjointCase, entry: dict[str, Any], soc: str = "") -> dict[str, Any]:
    """Run *case* on *session* and fill the report *entry* (a smoke entry of kind ``"adjoint"``)."""
    entry.update(dtype=case.dtype, layout=case.layout, mode="scales" if case.scales[0] else "sizes",
                 output_size=list(case.output_size), input_size=list(case.input_size),
                 scales=[float(s or 0.0) for s in case.scales],
                 tolerance="|residual - predicted| <= the rounding bound of B(g)")
    t0 = time.perf_counter()
    try:
        result = device_adjoint_check(session, case.input_size, case.output_size, case.scales,
                                      dtype=as_dtype(case.dtype), layout=case.layout, soc=soc_family(soc))
    except AclError as exc:
        entry["got_code"], entry["message"] = exc.code, str(exc).splitlines()[0]
        return entry
    except Exception as exc:  # a smoke run reports every failure and goes on with the next case
        entry["message"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return entry
    entry["time_ms"] = (time.perf_counter() - t0) * 1e3  # wall time: both uploads, both operators, both downloads
    entry["got_code"] = 0
    entry["max_abs_err"] = abs(result.residual - result.predicted)
    entry["status"] = "pass" if result.passed else "fail"
    entry["message"] = result.describe()
    return entry
