"""The smoke matrix's cases: the compute matrix, the bad-input table, their inputs and tolerances (docs/api.md,
"The command line"; docs/operators.md, "smoke")."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from acl_bindings.enums import as_dtype

from .. import checks
from ..adjoint import _window_max

#: The dtypes of the cases, by name (``acl_bindings.enums.as_dtype`` makes each a numpy dtype).
DTYPES = ("float32", "float16", "bfloat16")
#: float32 part of the tolerance (relative, and absolute per summed element).
RTOL32 = 1e-5
ATOL_PER_ELEMENT = 1e-5
#: One rounding of each low-precision dtype (machine epsilon).
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}

@dataclass(frozen=True)
class SmokeCase:
    """One compute case: ``input_size`` ``(N, C, iD, iH, iW)`` in every layout, ``scales`` None (sizes only) or all
    three, ``strided`` ``""`` (contiguous), ``"sliced"`` or ``"permuted"``."""

    name: str
    dtype: str
    layout: str
    input_size: tuple[int, int, int, int, int]
    output_size: tuple[int, int, int]
    scales: tuple[float, float, float] | None
    strided: str
    ratio: str

    @property
    def mode(self) -> str:
        """``"scales"`` when all three scales are given, else ``"sizes"``."""
        return "scales" if self.scales else "sizes"

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy dtype."""
        return as_dtype(self.dtype)

    @property
    def grad_out_shape(self) -> tuple[int, ...]:
        """Physical gradOut shape in :attr:`layout`."""
        n, c = self.input_size[:2]
        return checks.physical_shape(self.layout, n, c, *self.output_size)

    @property
    def grad_in_shape(self) -> tuple[int, ...]:
        """Physical gradInput shape in :attr:`layout`."""
        return checks.physical_shape(self.layout, *self.input_size)

    @property
    def scale_args(self) -> tuple[float | None, float | None, float | None]:
        """``(scales_d, scales_h, scales_w)`` as passed to the API (None when not given)."""
        return self.scales if self.scales else (None, None, None)


# (label, (iD, iH, iW), (oD, oH, oW), scales or None, ratio kind)
_GEOMETRIES: list[tuple[str, tuple[int, int, int], tuple[int, int, int], tuple[float, float, float] | None, str]]
_GEOMETRIES = [
    ("x2-sizes", (3, 4, 5), (6, 8, 10), None, "integer"),
    ("x3-scales", (2, 3, 2), (6, 9, 6), (3.0, 3.0, 3.0), "integer"),
    ("ut-scales", (2, 4, 8), (4, 8, 12), (2.0, 2.0, 1.5), "non-integer"),  # the official UT case (§5.6)
    ("nonint-sizes", (3, 5, 7), (7, 11, 10), None, "non-integer"),
    ("nonint-scales", (3, 5, 7), (5, 12, 4), (1.7, 2.5, 0.6), "non-integer"),
    ("down-sizes", (6, 9, 10), (3, 4, 7), None, "downsampling"),
    ("down-scales", (8, 10, 12), (4, 4, 9), (0.5, 0.4, 0.75), "downsampling"),
    ("identity", (3, 4, 5), (3, 4, 5), None, "identity"),
    ("tie-2to41", (2, 2, 3), (41, 5, 7), None, "non-integer"),  # exact ties (cann-abi.md §6.3)
    ("ratio-50", (1, 2, 1), (50, 3, 20), None, "integer"),  # the largest ratio CANN accepts (§5.1)
]
_QUICK_GEOMETRIES = ("ut-scales", "nonint-sizes", "down-scales")
_NC = (2, 3)


def _case(label: str, dtype: str, layout: str, n: int, c: int, i: tuple[int, int, int], o: tuple[int, int, int],
          scales: tuple[float, float, float] | None, strided: str, ratio: str) -> SmokeCase:
    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]
    name = f"{label}-{short}-{layout}-{strided or 'contig'}"
    return SmokeCase(name, dtype, layout, (n, c, *i), o, scales, strided, ratio)


def build_matrix(quick: bool = False) -> list[SmokeCase]:
    """The compute cases, in a stable order with unique names (*quick*: every dtype and layout, three geometries
    and one strided case of each kind, instead of the full cross product)."""
    cases: list[SmokeCase] = [SmokeCase("official-sample-fp32-NCDHW-contig", "float32", "NCDHW", (2, 2, 1, 1, 1),
                                        (2, 2, 2), None, "", "integer")]
    geometries = [g for g in _GEOMETRIES if not quick or g[0] in _QUICK_GEOMETRIES]
    for k, (label, i, o, scales, ratio) in enumerate(geometries):
        strides = ("",) if quick else ("", "sliced" if k % 2 == 0 else "permuted")
        cases += [_case(label, dtype, layout, *_NC, i, o, scales, strided, ratio)
                  for dtype in DTYPES for layout in ("NCDHW", "NDHWC") for strided in strides]
    if quick:
        cases.append(_case("nonint-sizes", "float32", "NCDHW", *_NC, (3, 5, 7), (7, 11, 10), None, "sliced",
                           "non-integer"))
        cases.append(_case("down-scales", "bfloat16", "NDHWC", *_NC, (8, 10, 12), (4, 4, 9), (0.5, 0.4, 0.75),
                           "permuted", "downsampling"))
    cases.append(_case("empty-N0", "float32", "NCDHW", 0, 3, (3, 4, 5), (6, 8, 10), None, "", "empty"))
    if not quick:
        cases.append(_case("empty-N0", "float16", "NDHWC", 0, 3, (3, 4, 5), (6, 8, 10), None, "", "empty"))
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "smoke case names must be unique"
    return cases


def bad_cases() -> list[checks.BadCase]:
    """The bad-input cases that CANN's own phase 1 checks (``cann_checks=True``)."""
    return [c for c in checks.BAD_CASES if c.cann_checks]


# --------------------------------------------------------------------------- inputs and tolerances

def make_grad_output(case: SmokeCase) -> np.ndarray:
    """The case's gradOut, seeded random values: ``"sliced"``, a view with step 2 in its last dim and an offset of
    one leading slab; ``"permuted"``, a transposed view of a buffer stored in another dim order."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    shape = case.grad_out_shape
    dt = case.np_dtype
    if case.strided == "sliced":
        big = (shape[0] + 1, *shape[1:-1], shape[-1] * 2)
        base = rng.standard_normal(big).astype(np.float32).astype(dt)
        view = base[1:, ..., ::2]
    elif case.strided == "permuted":
        order = (0, 2, 3, 4, 1)  # store in another dim order, then view in the case's order
        stored = tuple(shape[k] for k in order)
        base = rng.standard_normal(stored).astype(np.float32).astype(dt)
        view = np.transpose(base, np.argsort(order))
    else:
        view = rng.standard_normal(shape).astype(np.float32).astype(dt)
    if case.name.startswith("official-sample"):
        view = np.arange(1, 33, dtype=np.float32).reshape(shape).astype(dt)
    assert view.shape == shape
    return view


def window_size(case: SmokeCase) -> int:
    """The largest number of gradOut elements summed into one gradInput element."""
    return _window_max(case.output_size, case.input_size, case.scale_args)


def tolerance_text(dtype: str) -> str:
    """The tolerance rule of *dtype*, as written in the report."""
    if dtype == "float32":
        return f"|got-ref| <= {RTOL32:g}*|ref| + {ATOL_PER_ELEMENT:g}*window"
    return (f"|got-ref| <= eps*|ref| + {ATOL_PER_ELEMENT:g}*window with eps={EPS[dtype]:g} "
            "(one rounding; ref summed in float32, rounded once)")


def compare(got: np.ndarray, ref: np.ndarray, dtype: str, window: int) -> tuple[float, float, bool]:
    """``(max_abs_err, max_rel_err, within_tolerance)`` of *got* against *ref* for *window* (:func:`window_size`);
    ``max_rel_err`` is over ``|ref| >= 1e-3``, and NaN must be at the same places in both."""
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    if g.size == 0:
        return 0.0, 0.0, True
    nan_ok = bool(np.array_equal(np.isnan(g), np.isnan(r)))
    both_nan = np.isnan(g) & np.isnan(r)
    diff = np.where(both_nan, 0.0, np.abs(g - r))
    rel_base = np.abs(r)
    big = rel_base >= 1e-3
    max_abs = float(np.nanmax(diff)) if diff.size else 0.0
    max_rel = float(np.max(diff[big] / rel_base[big])) if np.any(big) else 0.0
    rtol = RTOL32 if dtype == "float32" else EPS[dtype]
    limit = rtol * np.abs(np.nan_to_num(r)) + ATOL_PER_ELEMENT * window
    ok = nan_ok and bool(np.all((diff <= limit) | both_nan))
    return max_abs, max_rel, ok


def tolerances() -> dict[str, str]:
    """The tolerance rule of every dtype."""
    return {dt: tolerance_text(dt) for dt in DTYPES}
