"""Tests of the simulator's C operator core ``acl_bindings/sim/src/kernels/us3d_kernel.c``.

The C file is compiled on its own into a temporary shared object and driven through
ctypes.  The kernel is compared with a slow, literal numpy loop of the reference window
of cann-abi.md §6.5 (float32 index arithmetic, float32 accumulation), and the phase-1
checks with the official ops-cv UT cases (cann-abi.md §5.1, §5.6).
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SRC_DIR = Path(__file__).resolve().parents[2] / "acl_bindings" / "sim" / "src" / "kernels"
SRC = SRC_DIR / "us3d_kernel.c"

# aclDataType / aclFormat / aclnn status values (cann-abi.md §3.1, §3.2, §3.5).
ACL_FLOAT, ACL_FLOAT16, ACL_BF16 = 0, 1, 27
ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC = 30, 27
OK, ERR_NULLPTR, ERR_INVALID = 0, 161001, 161002

BF16 = np.dtype(ml_dtypes.bfloat16)
NP_DTYPE = {ACL_FLOAT: np.dtype(np.float32), ACL_FLOAT16: np.dtype(np.float16), ACL_BF16: BF16}
DTYPES = [ACL_FLOAT, ACL_FLOAT16, ACL_BF16]

I64x5 = ctypes.c_int64 * 5


class UsArgs(ctypes.Structure):
    """ctypes mirror of ``us3d_args``."""

    _fields_ = [
        ("dtype", ctypes.c_int),
        ("go_size", I64x5),
        ("go_stride", I64x5),
        ("go_data", ctypes.c_void_p),
        ("gi_size", I64x5),
        ("gi_stride", I64x5),
        ("gi_data", ctypes.c_void_p),
        ("scale", ctypes.c_float * 3),
        ("workspace", ctypes.c_void_p),
        ("workspace_size", ctypes.c_uint64),
    ]


class TensorMeta(ctypes.Structure):
    """ctypes mirror of ``us3d_tensor_meta``."""

    _fields_ = [
        ("present", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("format", ctypes.c_int),
        ("ndim", ctypes.c_int64),
        ("dims", ctypes.c_int64 * 8),
    ]


class ArrayMeta(ctypes.Structure):
    """ctypes mirror of ``us3d_array_meta``."""

    _fields_ = [("present", ctypes.c_int), ("len", ctypes.c_int64), ("vals", ctypes.c_int64 * 8)]


def _compiler() -> str | None:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """Compile us3d_kernel.c into a private shared object and load it."""
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) found to build us3d_kernel.c")
    out = tmp_path_factory.mktemp("us3d") / "libus3d_test.so"
    cmd = [cc, "-O2", "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Werror", "-o", str(out), str(SRC)]
    if os.environ.get("SIM_SANITIZE") == "1":  # .ci/run's sanitizer step (LD_PRELOAD holds libasan)
        cmd[1:2] = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"compile failed: {' '.join(cmd)}\n{res.stderr}"
    L = ctypes.CDLL(str(out))
    L.us3d_resolve_scales.argtypes = [
        ctypes.c_double,
        ctypes.c_double,
        ctypes.c_double,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_float),
    ]
    L.us3d_resolve_scales.restype = None
    L.us3d_lo.argtypes = [ctypes.c_int64, ctypes.c_float, ctypes.c_int64]
    L.us3d_lo.restype = ctypes.c_int64
    L.us3d_lo_table.argtypes = [ctypes.c_float, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    L.us3d_lo_table.restype = None
    L.us3d_workspace_bytes.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
    L.us3d_workspace_bytes.restype = ctypes.c_uint64
    L.us3d_run.argtypes = [ctypes.POINTER(UsArgs)]
    L.us3d_run.restype = ctypes.c_int
    L.us3d_check.argtypes = [
        ctypes.POINTER(TensorMeta),
        ctypes.POINTER(ArrayMeta),
        ctypes.POINTER(ArrayMeta),
        ctypes.c_double,
        ctypes.c_double,
        ctypes.c_double,
        ctypes.POINTER(TensorMeta),
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    L.us3d_check.restype = ctypes.c_int
    L.us3d_f16_to_f32.argtypes = [ctypes.c_uint16]
    L.us3d_f16_to_f32.restype = ctypes.c_float
    L.us3d_f32_to_f16.argtypes = [ctypes.c_float]
    L.us3d_f32_to_f16.restype = ctypes.c_uint16
    L.us3d_bf16_to_f32.argtypes = [ctypes.c_uint16]
    L.us3d_bf16_to_f32.restype = ctypes.c_float
    L.us3d_f32_to_bf16.argtypes = [ctypes.c_float]
    L.us3d_f32_to_bf16.restype = ctypes.c_uint16
    return L


# ---------------------------------------------------------------------------------------------
# Reference (cann-abi.md §6.5), written literally with numpy float32 scalars
# ---------------------------------------------------------------------------------------------


def ref_scales(scales: Sequence[float] | None, out3: Sequence[int], in3: Sequence[int]) -> list[np.float32]:
    """Kernel factors: float32(user scales) if all three are > 0, else float32(O)/float32(I)."""
    if scales is not None and all(s > 0 for s in scales):
        return [np.float32(s) for s in scales]
    return [np.float32(o) / np.float32(i) for o, i in zip(out3, in3)]


def ref_lo(i: int, s: np.float32, n_out: int) -> int:
    """lo(i) = min(max(ceil(f32(f32(i)*s) - 0.5), 0), O), unfused float32 (cann-abi.md §6.5)."""
    p = np.float32(np.float32(i) * np.float32(s))
    x = np.float32(p - np.float32(0.5))
    c = np.ceil(x)
    return int(min(max(c, 0), n_out))


def ref_lo_vec(n_in: int, s: np.float32, n_out: int) -> np.ndarray:
    """Vectorised float32 emulation of ref_lo for i = 0..I (same IEEE operations)."""
    i = np.arange(n_in + 1, dtype=np.int64).astype(np.float32)
    p = (i * np.float32(s)).astype(np.float32)
    x = (p - np.float32(0.5)).astype(np.float32)
    return np.clip(np.ceil(x).astype(np.float64), 0, n_out).astype(np.int64)


def ref_backward(go: np.ndarray, in3: Sequence[int], scales: Sequence[float] | None) -> tuple[np.ndarray, ...]:
    """Slow literal loop: float32 window sums in d, h, w order.

    Returns (float32 result, float64 exact-ish sums, float64 sums of |x|, window element counts).
    """
    go32 = np.asarray(go, dtype=np.float32)
    N, C, oD, oH, oW = go32.shape
    iD, iH, iW = in3
    s = ref_scales(scales, (oD, oH, oW), in3)
    loD = [ref_lo(i, s[0], oD) for i in range(iD + 1)]
    loH = [ref_lo(i, s[1], oH) for i in range(iH + 1)]
    loW = [ref_lo(i, s[2], oW) for i in range(iW + 1)]
    vals = go32.tolist()
    out32 = np.zeros((N, C, iD, iH, iW), np.float32)
    out64 = np.zeros((N, C, iD, iH, iW), np.float64)
    abs64 = np.zeros((N, C, iD, iH, iW), np.float64)
    cnt = np.zeros((N, C, iD, iH, iW), np.int64)
    for n in range(N):
        for c in range(C):
            g = vals[n][c]
            for d in range(iD):
                for h in range(iH):
                    for w in range(iW):
                        acc = np.float32(0.0)
                        acc64 = 0.0
                        a64 = 0.0
                        k = 0
                        for od in range(loD[d], loD[d + 1]):
                            for oh in range(loH[h], loH[h + 1]):
                                for ow in range(loW[w], loW[w + 1]):
                                    v = g[od][oh][ow]
                                    acc = np.float32(acc + np.float32(v))
                                    acc64 += v
                                    a64 += abs(v)
                                    k += 1
                        out32[n, c, d, h, w] = acc
                        out64[n, c, d, h, w] = acc64
                        abs64[n, c, d, h, w] = a64
                        cnt[n, c, d, h, w] = k
    return out32, out64, abs64, cnt


# ---------------------------------------------------------------------------------------------
# Driving the C kernel
# ---------------------------------------------------------------------------------------------


def make_view(logical: np.ndarray, layout: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Place a logical NCDHW array into memory with the given layout.

    Returns (view, base): ``view`` is an NCDHW-indexed numpy view sharing memory with ``base``.
    Layouts: ncdhw (contiguous), ndhwc (channels-last, permuted strides), strided (a view with
    steps and an offset into a larger buffer), reversed (negative W and D strides).
    """
    dt = logical.dtype
    shp = logical.shape
    if layout == "ncdhw":
        base = np.empty(shp, dt)
        view = base
    elif layout == "ndhwc":
        base = np.empty((shp[0], shp[2], shp[3], shp[4], shp[1]), dt)
        view = base.transpose(0, 4, 1, 2, 3)
    elif layout == "strided":
        big = (shp[0] + 1, shp[1] * 2, shp[2] + 2, shp[3] * 2 + 1, shp[4] * 3 + 2)
        base = np.empty(big, dt)
        view = base[1:, ::2, 2:, 1::2, 2::3]
    elif layout == "reversed":
        base = np.empty((shp[0], shp[1], shp[2] + 1, shp[3], shp[4] + 1), dt)
        view = base[:, :, :0:-1, :, -2::-1]
    else:
        raise ValueError(layout)
    assert view.shape == shp
    base[...] = np.asarray(rng.integers(-1000, 1000, size=base.shape), dtype=np.float32).astype(dt)
    view[...] = logical
    return view, base


def c_run(
    L: ctypes.CDLL,
    dtype: int,
    go_view: np.ndarray,
    gi_view: np.ndarray,
    scale3: Sequence[float],
    ws_bytes: int | None = None,
    ws_offset: int = 0,
) -> int:
    """Call us3d_run on numpy views (element strides derived from numpy byte strides)."""
    es = go_view.dtype.itemsize
    a = UsArgs()
    a.dtype = dtype
    for k in range(5):
        a.go_size[k] = go_view.shape[k]
        a.go_stride[k] = go_view.strides[k] // es
        a.gi_size[k] = gi_view.shape[k]
        a.gi_stride[k] = gi_view.strides[k] // es
    a.go_data = go_view.ctypes.data
    a.gi_data = gi_view.ctypes.data
    for k in range(3):
        a.scale[k] = scale3[k]
    need = L.us3d_workspace_bytes(a.go_size, a.gi_size)
    size = need if ws_bytes is None else ws_bytes
    ws = np.empty(size + ws_offset + 1, np.uint8)
    a.workspace = ws.ctypes.data + ws_offset
    a.workspace_size = size
    return L.us3d_run(ctypes.byref(a))


def c_scales(L: ctypes.CDLL, scales: Sequence[float] | None, out3: Sequence[int], in3: Sequence[int]) -> list[float]:
    s = (ctypes.c_float * 3)()
    sd, sh, sw = scales if scales is not None else (0.0, 0.0, 0.0)
    L.us3d_resolve_scales(sd, sh, sw, (ctypes.c_int64 * 3)(*out3), (ctypes.c_int64 * 3)(*in3), s)
    return list(s)


def run_case(
    L: ctypes.CDLL,
    go: np.ndarray,
    in3: Sequence[int],
    scales: Sequence[float] | None,
    dtype: int,
    go_layout: str = "ncdhw",
    gi_layout: str = "ncdhw",
    seed: int = 0,
) -> np.ndarray:
    """Run the C kernel on ``go`` (float32 logical values) and return gradInput as float32.

    Also asserts that memory of the gradInput buffer outside the view is left untouched.
    """
    rng = np.random.default_rng(seed)
    npdt = NP_DTYPE[dtype]
    go_view, _ = make_view(go.astype(npdt), go_layout, rng)
    N, C = go.shape[:2]
    gi_shape = (N, C, *in3)
    gi_view, gi_base = make_view(np.zeros(gi_shape, npdt), gi_layout, rng)
    # Fill the whole gradInput buffer with a sentinel, then remember which bytes are outside the view.
    sentinel = np.asarray(12345.0, np.float32).astype(npdt)
    gi_base[...] = sentinel
    inside = np.zeros(gi_base.shape, bool)
    _mark_view(inside, gi_base, gi_view)
    s3 = c_scales(L, scales, go.shape[2:], in3)
    rc = c_run(L, dtype, go_view, gi_view, s3)
    assert rc == OK
    outside = gi_base[~inside].astype(np.float32)
    assert np.all(outside == sentinel.astype(np.float32)), "kernel wrote outside the gradInput view"
    return np.asarray(gi_view).astype(np.float32)


def _mark_view(inside: np.ndarray, base: np.ndarray, view: np.ndarray) -> None:
    """Set inside[...] = True at the base elements that ``view`` covers (same memory layout)."""
    es = base.dtype.itemsize
    off = (view.ctypes.data - base.ctypes.data) // es
    flat_idx = np.full(view.shape, off, np.int64)
    for k in range(view.ndim):
        shape = [1] * view.ndim
        shape[k] = view.shape[k]
        flat_idx = flat_idx + (np.arange(view.shape[k]) * (view.strides[k] // es)).reshape(shape)
    # base is C-contiguous, so element index == flat index.
    assert base.flags.c_contiguous
    inside.reshape(-1)[flat_idx.reshape(-1)] = True


# ---------------------------------------------------------------------------------------------
# lo() and scales
# ---------------------------------------------------------------------------------------------


def c_lo_table(L: ctypes.CDLL, s: float, n_in: int, n_out: int) -> np.ndarray:
    out = np.empty(n_in + 1, np.int64)
    L.us3d_lo_table(s, n_in, n_out, out.ctypes.data)
    return out


def test_lo_matches_float32_emulation_small_pairs(lib: ctypes.CDLL) -> None:
    for n_in in range(1, 41):
        for n_out in range(1, 41 * 3):
            s = np.float32(n_out) / np.float32(n_in)
            got = c_lo_table(lib, float(s), n_in, n_out)
            exp = [ref_lo(i, s, n_out) for i in range(n_in + 1)]
            assert got.tolist() == exp, (n_in, n_out)
    # the scalar entry point agrees with the table
    assert lib.us3d_lo(7, np.float32(2.5), 100) == ref_lo(7, np.float32(2.5), 100)


def test_lo_matches_emulation_large_and_user_scales(lib: ctypes.CDLL) -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        n_in = int(rng.integers(1, 1 << 20))
        if rng.random() < 0.5:
            n_out = int(rng.integers(1, min(50 * n_in, 1 << 21)))
            s = np.float32(n_out) / np.float32(n_in)
        else:
            s = np.float32(rng.uniform(0.05, 50.0))
            n_out = int(math.floor(n_in * float(s))) + int(rng.integers(-2, 3))
            n_out = max(n_out, 1)
        got = c_lo_table(lib, float(s), n_in, n_out)
        exp = ref_lo_vec(n_in, s, n_out)
        np.testing.assert_array_equal(got, exp, err_msg=f"I={n_in} O={n_out} s={s!r}")
        # spot-check the vectorised emulation itself against the literal scalar one
        for i in rng.integers(0, n_in + 1, size=5):
            assert exp[i] == ref_lo(int(i), s, n_out)


def test_lo_known_ties(lib: ctypes.CDLL) -> None:
    # cann-abi.md §6.3: I=2, O=41: s=20.5 is exact, o=20 belongs to i=1, i.e. lo(1) == 20.
    s = np.float32(41) / np.float32(2)
    assert lib.us3d_lo(1, s, 41) == ref_lo(1, s, 41) == 20
    assert lib.us3d_lo(2, s, 41) == 41
    # §6.3: I=27, scale 0.3, O=8: f32(0.3)=0.30000001, o=7 goes to i=24: lo(24)=7, lo(25)=8.
    s = np.float32(0.3)
    assert lib.us3d_lo(24, s, 8) == ref_lo(24, s, 8) == 7
    assert lib.us3d_lo(25, s, 8) == ref_lo(25, s, 8) == 8
    assert lib.us3d_lo(27, s, 8) == 8
    # clamps: negative/NaN intermediate -> 0; beyond O -> O
    assert lib.us3d_lo(0, np.float32(3.0), 5) == 0
    assert lib.us3d_lo(10, np.float32(3.0), 5) == 5
    assert lib.us3d_lo(3, np.float32("nan"), 5) == 0


def test_resolve_scales(lib: ctypes.CDLL) -> None:
    out3, in3 = (6, 8, 41), (3, 4, 2)
    assert c_scales(lib, (2.0, 2.0, 0.3), out3, in3) == [2.0, 2.0, float(np.float32(0.3))]
    ratio = [float(np.float32(o) / np.float32(i)) for o, i in zip(out3, in3)]
    assert c_scales(lib, None, out3, in3) == ratio
    # any scale not > 0 (zero, negative, NaN) selects the size ratio for every dim
    assert c_scales(lib, (2.0, 0.0, 1.5), out3, in3) == ratio
    assert c_scales(lib, (2.0, -1.0, 1.5), out3, in3) == ratio
    assert c_scales(lib, (2.0, float("nan"), 1.5), out3, in3) == ratio
    # non-representable ratio rounds like float32 division
    assert c_scales(lib, None, (10, 10, 10), (3, 7, 9)) == [float(np.float32(10) / np.float32(i)) for i in (3, 7, 9)]


# ---------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------


def _same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def test_f16_to_f32_all_bit_patterns(lib: ctypes.CDLL) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    exp = bits.view(np.float16).astype(np.float32).tolist()
    f = lib.us3d_f16_to_f32
    bad = [int(b) for b, e in zip(bits.tolist(), exp) if not _same_float(f(b), e)]
    assert not bad, f"{len(bad)} mismatches, first {bad[:5]}"


def test_bf16_to_f32_all_bit_patterns(lib: ctypes.CDLL) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    exp = bits.view(BF16).astype(np.float32).tolist()
    f = lib.us3d_bf16_to_f32
    bad = [int(b) for b, e in zip(bits.tolist(), exp) if not _same_float(f(b), e)]
    assert not bad, f"{len(bad)} mismatches, first {bad[:5]}"


def _f32_probe_values(narrow: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """float32 values: every narrow value, every midpoint between neighbours (ties), 1 ulp either
    side of each midpoint, and random float32 bit patterns."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = bits.view(narrow).astype(np.float32)
    v = v[np.isfinite(v)]
    v = np.unique(v)
    mids = ((v[:-1].astype(np.float64) + v[1:].astype(np.float64)) / 2).astype(np.float32)
    up = np.nextafter(mids, np.float32(np.inf))
    down = np.nextafter(mids, np.float32(-np.inf))
    rnd = rng.integers(0, 1 << 32, size=20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array(
        [
            np.inf,
            -np.inf,
            np.nan,
            -np.nan,
            0.0,
            -0.0,
            65504.0,
            65519.99,
            65520.0,
            3.4e38,
            2.0**-25,
            2.0**-24,
            1.5 * 2.0**-24,
            2.0**-14,
            2.0**-126,
            1e-45,
        ],
        np.float32,
    )
    return np.concatenate([v, mids, up, down, rnd, special, -special])


@pytest.mark.parametrize("which", ["f16", "bf16"])
def test_f32_to_narrow_round_to_nearest_even(lib: ctypes.CDLL, which: str) -> None:
    narrow = np.dtype(np.float16) if which == "f16" else BF16
    conv = lib.us3d_f32_to_f16 if which == "f16" else lib.us3d_f32_to_bf16
    vals = _f32_probe_values(narrow, np.random.default_rng(2))
    with np.errstate(over="ignore", invalid="ignore"):
        exp_bits = vals.astype(narrow).view(np.uint16)
    exp_nan = np.isnan(vals)
    got = np.fromiter((conv(x) for x in vals.tolist()), np.uint16, count=vals.size)
    got_f = got.view(narrow).astype(np.float32)
    # NaN: any quiet NaN with the same sign is accepted; everything else bit-exact
    assert np.all(np.isnan(got_f[exp_nan]))
    assert np.array_equal(np.signbit(got_f[exp_nan]), np.signbit(vals[exp_nan]))
    mism = np.nonzero(got[~exp_nan] != exp_bits[~exp_nan])[0]
    assert mism.size == 0, f"{mism.size} mismatches, e.g. {vals[~exp_nan][mism[:5]]}"


# ---------------------------------------------------------------------------------------------
# Kernel against the slow reference
# ---------------------------------------------------------------------------------------------

# (name, N, C, in3, out3, scales)
CASES: list[tuple[str, int, int, tuple[int, int, int], tuple[int, int, int], tuple[float, float, float] | None]] = [
    ("integer_x2", 2, 2, (3, 4, 5), (6, 8, 10), None),
    ("non_integer", 1, 3, (5, 7, 3), (8, 10, 11), None),
    ("downsample_empty_windows", 2, 1, (6, 5, 9), (4, 3, 5), None),
    ("identity", 1, 2, (3, 4, 5), (3, 4, 5), None),
    ("user_scales_ut", 2, 2, (2, 4, 8), (4, 8, 12), (2.0, 2.0, 1.5)),
    ("user_scales_too_small", 1, 2, (4, 4, 4), (9, 9, 9), (2.0, 2.0, 2.0)),
    ("ties_0p3", 1, 2, (27, 10, 7), (8, 3, 2), (0.3, 0.3, 0.3)),
    ("ties_2_to_41", 1, 1, (1, 2, 2), (3, 5, 41), None),
    ("large_ratio", 1, 1, (1, 1, 2), (50, 3, 41), None),
]
LAYOUTS = [("ncdhw", "ncdhw"), ("ndhwc", "ndhwc"), ("strided", "strided"), ("ncdhw", "strided"), ("reversed", "ndhwc")]


@cache
def int_case(idx: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer gradOut data of a case (exact in every dtype and in float32 sums) and its reference."""
    _, N, C, in3, out3, scales = CASES[idx]
    rng = np.random.default_rng(100 + idx)
    go = rng.integers(-8, 9, size=(N, C, *out3)).astype(np.float32)
    ref32, ref64, _, _ = ref_backward(go, in3, scales)
    assert np.array_equal(ref32.astype(np.float64), ref64)  # integer sums are exact
    return go, ref32


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(x) for x in LAYOUTS])
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c[0] for c in CASES])
def test_kernel_integer_data_exact(lib: ctypes.CDLL, idx: int, layouts: tuple[str, str], dtype: int) -> None:
    _, _, _, in3, _, scales = CASES[idx]
    go, ref32 = int_case(idx)
    got = run_case(lib, go, in3, scales, dtype, *layouts, seed=idx)
    # float32 sums of small integers are exact; fp16/bf16 round the float32 result exactly once.
    exp = ref32.astype(NP_DTYPE[dtype]).astype(np.float32)
    np.testing.assert_array_equal(got, exp)


def _spacing(xd: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Distance from |xd| (values of dtype ``dt``) to the next larger value of that dtype."""
    if dt == np.float32:
        return np.spacing(xd.astype(np.float32)).astype(np.float64)
    if dt == np.float16:
        return np.spacing(xd.astype(np.float16)).astype(np.float64)
    bits = xd.view(np.uint16).astype(np.uint32)
    nxt = (bits + 1).astype(np.uint16).view(BF16).astype(np.float64)
    return np.abs(nxt - xd.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layouts", [("ncdhw", "ncdhw"), ("ndhwc", "strided")], ids=["ncdhw", "ndhwc-strided"])
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c[0] for c in CASES])
def test_kernel_random_float_data(lib: ctypes.CDLL, idx: int, layouts: tuple[str, str], dtype: int) -> None:
    _, N, C, in3, out3, scales = CASES[idx]
    rng = np.random.default_rng(200 + idx)
    npdt = NP_DTYPE[dtype]
    go = rng.standard_normal((N, C, *out3)).astype(np.float32).astype(npdt).astype(np.float32)
    ref32, ref64, abs64, cnt = ref_backward(go, in3, scales)
    got = run_case(lib, go, in3, scales, dtype, *layouts, seed=idx)
    # float32 summation error bound for a different order: |err| <= (k-1) u sum|x|, u = 2^-24
    bound32 = np.maximum(cnt - 1, 0) * 2.0**-24 * abs64
    if dtype == ACL_FLOAT:
        err = np.abs(got.astype(np.float64) - ref64)
        assert np.all(err <= 1e-6 * np.abs(ref64) + bound32)
        # our literal float32 loop satisfies the same bound (sanity of the bound itself)
        assert np.all(np.abs(ref32.astype(np.float64) - ref64) <= 1e-6 * np.abs(ref64) + bound32)
    else:
        # within one rounding of the float32 result (plus the float32 reordering slack)
        ulp = _spacing(np.abs(ref32).astype(npdt), npdt)
        err = np.abs(got.astype(np.float64) - ref32.astype(np.float64))
        assert np.all(err <= ulp + 2 * bound32)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    in3=st.tuples(*[st.integers(1, 6)] * 3),
    use_scales=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    layouts=st.sampled_from(LAYOUTS),
)
def test_kernel_random_shapes(
    lib: ctypes.CDLL,
    data: st.DataObject,
    in3: tuple[int, int, int],
    use_scales: bool,
    dtype: int,
    layouts: tuple[str, str],
) -> None:
    N = data.draw(st.integers(1, 2))
    C = data.draw(st.integers(1, 3))
    if use_scales:
        sc = tuple(data.draw(st.sampled_from([0.3, 0.5, 0.75, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0, 4.7])) for _ in range(3))
        out3 = tuple(max(1, math.floor(i * s)) for i, s in zip(in3, sc))
        scales: tuple[float, ...] | None = sc
    else:
        out3 = tuple(data.draw(st.integers(1, 12)) for _ in range(3))
        scales = None
    seed = data.draw(st.integers(0, 2**31))
    go = np.random.default_rng(seed).integers(-8, 9, size=(N, C, *out3)).astype(np.float32)
    ref32, _, _, _ = ref_backward(go, in3, scales)
    got = run_case(lib, go, in3, scales, dtype, *layouts, seed=seed)
    np.testing.assert_array_equal(got, ref32.astype(NP_DTYPE[dtype]).astype(np.float32))


def test_official_sample(lib: ctypes.CDLL) -> None:
    # cann-abi.md §5.6: gradOut (2,2,2,2,2) = 1..32, outputSize (2,2,2), inputSize (2,2,1,1,1).
    go = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
    gi = np.zeros((2, 2, 1, 1, 1), np.float32)
    s3 = c_scales(lib, None, (2, 2, 2), (1, 1, 1))
    assert c_run(lib, ACL_FLOAT, go, gi, s3) == OK
    assert gi.reshape(-1).tolist() == [36.0, 100.0, 164.0, 228.0]


def test_nonfinite_values_propagate(lib: ctypes.CDLL) -> None:
    go = np.ones((1, 1, 2, 2, 4), np.float32)
    go[0, 0, 0, 0, 0] = np.inf
    go[0, 0, 1, 1, 3] = np.nan
    for dt in DTYPES:
        got = run_case(lib, go, (1, 1, 2), None, dt)
        assert np.isposinf(got[0, 0, 0, 0, 0]) and np.isnan(got[0, 0, 0, 0, 1])


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_identity_is_a_bit_exact_copy(lib: ctypes.CDLL, dtype: int) -> None:
    """Identity in every dim: dense, equal layouts take the copy path (every bit pattern, nan payloads and
    -0.0 included, comes through); other layouts take the summing path and give the same values."""
    rng = np.random.default_rng(77)
    npdt = NP_DTYPE[dtype]
    es = np.dtype(npdt).itemsize
    raw = rng.integers(0, 1 << (8 * es), size=(2, 3, 4, 5, 6), dtype=np.uint64)
    go = raw.astype(np.uint32 if es == 4 else np.uint16).view(npdt)
    s3 = [1.0, 1.0, 1.0]
    for perm in ((0, 1, 2, 3, 4), (0, 2, 3, 4, 1)):  # NCDHW and NDHWC memory
        go_view = np.ascontiguousarray(go.transpose(perm)).transpose(np.argsort(perm))
        gi_view = np.zeros(go.transpose(perm).shape, npdt).transpose(np.argsort(perm))
        assert c_run(lib, dtype, go_view, gi_view, s3) == OK
        assert gi_view.tobytes() == go_view.tobytes()
    gi_strided = np.zeros((2, 3, 4, 5, 12), npdt)[..., ::2]
    assert c_run(lib, dtype, go, gi_strided, s3) == OK
    got, want = gi_strided.astype(np.float32), go.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite], want[finite])


def test_workspace_rules(lib: ctypes.CDLL) -> None:
    go = np.arange(2 * 3 * 4 * 6 * 8, dtype=np.float32).reshape(2, 3, 4, 6, 8)
    gi = np.zeros((2, 3, 2, 3, 4), np.float32)
    s3 = c_scales(lib, None, (4, 6, 8), (2, 3, 4))
    need = lib.us3d_workspace_bytes(I64x5(*go.shape), I64x5(*gi.shape))
    # the lo tables (iD+1, iH+1, iW+1 int64) and four float32 rows of max(iW, oW, C) elements...
    assert need >= 8 * (3 + 4 + 5) + 4 * 4 * 8
    # ...and nothing that grows with N or the D/H sizes (the passes are fused per row)
    assert lib.us3d_workspace_bytes(I64x5(200, 3, 4, 6, 8), I64x5(200, 3, 2, 3, 4)) == need
    gi[...] = 7.0
    assert c_run(lib, ACL_FLOAT, go, gi, s3, ws_bytes=need - 1) == ERR_INVALID
    assert np.all(gi == 7.0), "a failed run must not write gradInput"
    assert c_run(lib, ACL_FLOAT, go, gi, s3, ws_bytes=0) == ERR_INVALID
    # exact size, with a misaligned workspace pointer
    assert c_run(lib, ACL_FLOAT, go, gi, s3, ws_bytes=need, ws_offset=3) == OK
    exp = go.reshape(2, 3, 2, 2, 3, 2, 4, 2).sum(axis=(3, 5, 7))
    np.testing.assert_array_equal(gi, exp)


def test_workspace_empty_and_invalid(lib: ctypes.CDLL) -> None:
    assert lib.us3d_workspace_bytes(I64x5(0, 2, 3, 4, 5), I64x5(0, 2, 1, 2, 3)) == 0
    assert lib.us3d_workspace_bytes(I64x5(2, 0, 3, 4, 5), I64x5(2, 0, 1, 2, 3)) == 0
    assert lib.us3d_workspace_bytes(I64x5(1, 1, 1, 1, 1), I64x5(1, 1, 1, 1, 1)) > 0
    assert lib.us3d_workspace_bytes(I64x5(1 << 40, 1 << 40, 8, 8, 8), I64x5(1 << 40, 1 << 40, 4, 4, 4)) == 2**64 - 1
    # empty tensors: run succeeds without touching memory (NULL data and workspace allowed)
    a = UsArgs()
    a.dtype = ACL_FLOAT
    for k, v in enumerate((0, 2, 3, 4, 5)):
        a.go_size[k] = v
    for k, v in enumerate((0, 2, 1, 2, 3)):
        a.gi_size[k] = v
    assert lib.us3d_run(ctypes.byref(a)) == OK
    # invalid arguments
    a.gi_size[0] = a.go_size[0] = 1
    a.dtype = 3
    assert lib.us3d_run(ctypes.byref(a)) == ERR_INVALID
    a.dtype = ACL_FLOAT
    assert lib.us3d_run(ctypes.byref(a)) == ERR_INVALID  # NULL data pointers
    go = np.ones((1, 2, 3, 4, 5), np.float32)
    gi = np.zeros((2, 2, 3, 4, 5), np.float32)  # N mismatch
    assert c_run(lib, ACL_FLOAT, go, gi, (1.0, 1.0, 1.0)) == ERR_INVALID


# ---------------------------------------------------------------------------------------------
# Speed against a good numpy implementation
# ---------------------------------------------------------------------------------------------


def numpy_fast(go: np.ndarray, in3: Sequence[int], s3: Sequence[np.float32]) -> np.ndarray:
    """Separable window sums with np.add.reduceat (float32)."""
    x = go.astype(np.float32, copy=False)
    for axis, k in ((4, 2), (3, 1), (2, 0)):
        n_out, n_in = x.shape[axis], in3[k]
        lo = ref_lo_vec(n_in, s3[k], n_out)
        starts = np.minimum(lo[:-1], n_out - 1)
        r = np.add.reduceat(x, starts, axis=axis)
        empty = lo[1:] <= lo[:-1]
        if empty.any():
            shape = [1] * 5
            shape[axis] = n_in
            r = np.where(empty.reshape(shape), np.float32(0), r)
        x = r
    return x


@pytest.mark.parametrize(
    "go_shape,in3",
    [((2, 16, 32, 64, 64), (16, 32, 32)), ((1, 8, 40, 100, 100), (17, 33, 41))],
    ids=["x2", "odd"],
)
def test_large_shapes_match_numpy(lib: ctypes.CDLL, go_shape: tuple[int, ...], in3: tuple[int, int, int]) -> None:
    go = np.random.default_rng(5).standard_normal(go_shape).astype(np.float32)
    gi = np.empty((*go_shape[:2], *in3), np.float32)
    s3 = [np.float32(o) / np.float32(i) for o, i in zip(go_shape[2:], in3)]
    need = lib.us3d_workspace_bytes(I64x5(*go.shape), I64x5(*gi.shape))
    ws = np.empty(need, np.uint8)

    def c_call() -> None:
        a = UsArgs()
        a.dtype = ACL_FLOAT
        for k in range(5):
            a.go_size[k], a.go_stride[k] = go.shape[k], go.strides[k] // 4
            a.gi_size[k], a.gi_stride[k] = gi.shape[k], gi.strides[k] // 4
        a.go_data, a.gi_data = go.ctypes.data, gi.ctypes.data
        for k in range(3):
            a.scale[k] = s3[k]
        a.workspace, a.workspace_size = ws.ctypes.data, need
        assert lib.us3d_run(ctypes.byref(a)) == OK

    c_call()
    ref = numpy_fast(go, in3, s3)
    # speed is measured by benchmarks/, never asserted in tests
    np.testing.assert_allclose(gi, ref, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Phase-1 checks (cann-abi.md §5.1 step 3, UT cases of §5.6)
# ---------------------------------------------------------------------------------------------


def tmeta(dims: Sequence[int] | None, dtype: int = ACL_FLOAT, fmt: int = ACL_FORMAT_NCDHW) -> TensorMeta:
    m = TensorMeta()
    if dims is None:
        return m
    m.present, m.dtype, m.format, m.ndim = 1, dtype, fmt, len(dims)
    for k, v in enumerate(dims[:8]):
        m.dims[k] = v
    return m


def ameta(vals: Sequence[int] | None) -> ArrayMeta:
    m = ArrayMeta()
    if vals is None:
        return m
    m.present, m.len = 1, len(vals)
    for k, v in enumerate(vals[:8]):
        m.vals[k] = v
    return m


def check(
    lib: ctypes.CDLL,
    go: Sequence[int] | None = (2, 2, 6, 8, 10),
    out: Sequence[int] | None = (6, 8, 10),
    inp: Sequence[int] | None = (2, 2, 3, 4, 5),
    gi: Sequence[int] | None = (2, 2, 3, 4, 5),
    scales: tuple[float, float, float] = (0.0, 0.0, 0.0),
    dtype: int = ACL_FLOAT,
    gi_dtype: int | None = None,
    go_fmt: int = ACL_FORMAT_NCDHW,
    gi_fmt: int = ACL_FORMAT_NCDHW,
    skip_uplimit: int = 0,
) -> tuple[int, str]:
    buf = ctypes.create_string_buffer(512)
    g = tmeta(go, dtype, go_fmt)
    i = tmeta(gi, dtype if gi_dtype is None else gi_dtype, gi_fmt)
    o, n = ameta(out), ameta(inp)
    rc = lib.us3d_check(
        ctypes.byref(g), ctypes.byref(o), ctypes.byref(n), *scales, ctypes.byref(i), skip_uplimit, buf, len(buf)
    )
    return rc, buf.value.decode()


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_check_ut_valid_dtypes(lib: ctypes.CDLL, dtype: int) -> None:
    assert check(lib, dtype=dtype) == (OK, "")


# UINT8, INT8, INT16, INT32, INT64, DOUBLE, BOOL, STRING, COMPLEX64, COMPLEX128 (cann-abi.md §3.1, §5.1)
@pytest.mark.parametrize("bad", [4, 2, 6, 3, 9, 11, 12, 13, 16, 17])
def test_check_ut_bad_dtypes(lib: ctypes.CDLL, bad: int) -> None:
    rc, msg = check(lib, dtype=bad)
    assert rc == ERR_INVALID and msg.startswith("gradOut:") and "dtype" in msg and str(bad) in msg


def test_check_dtype_mismatch(lib: ctypes.CDLL) -> None:
    rc, msg = check(lib, dtype=ACL_FLOAT, gi_dtype=ACL_FLOAT16)
    assert rc == ERR_INVALID and msg.startswith("gradInput:") and "dtype" in msg


@pytest.mark.parametrize("which", ["gradOut", "outputSize", "inputSize", "gradInput"])
def test_check_ut_nullptr(lib: ctypes.CDLL, which: str) -> None:
    kw = {"gradOut": "go", "outputSize": "out", "inputSize": "inp", "gradInput": "gi"}
    nulled: dict[str, Any] = {kw[which]: None}
    rc, msg = check(lib, **nulled)
    assert rc == ERR_NULLPTR and msg.startswith(which + ":") and "NULL" in msg


def test_check_nullptr_order_and_priority(lib: ctypes.CDLL) -> None:
    assert check(lib, go=None, out=None, inp=None, gi=None)[1].startswith("gradOut:")
    assert check(lib, out=None, gi=None)[1].startswith("outputSize:")
    assert check(lib, inp=None, gi=None)[1].startswith("inputSize:")
    # a NULL comes before dtype and shape errors
    assert check(lib, go=(2, 2), gi=None, dtype=9)[0] == ERR_NULLPTR
    # dtype comes before shape
    rc, msg = check(lib, go=(2, 2), dtype=9)
    assert rc == ERR_INVALID and "dtype" in msg
    # rank before element checks
    rc, msg = check(lib, go=(2, 2), inp=(2, 2, 0, 4, 5))
    assert msg.startswith("gradOut:") and "5-D" in msg


@pytest.mark.parametrize("n,c", [(0, 2), (2, 0)])
def test_check_ut_empty_n_or_c(lib: ctypes.CDLL, n: int, c: int) -> None:
    assert check(lib, go=(n, c, 6, 8, 10), inp=(n, c, 3, 4, 5), gi=(n, c, 3, 4, 5)) == (OK, "")


def test_check_ut_zero_dhw(lib: ctypes.CDLL) -> None:
    # gradOut {2,2,0,4,5} with outputSize {3,4,5} -> shape mismatch
    rc, msg = check(lib, go=(2, 2, 0, 4, 5), out=(3, 4, 5), inp=(2, 2, 3, 4, 5))
    assert rc == ERR_INVALID and msg.startswith("gradOut:") and "[2,2,0,4,5]" in msg
    rc, msg = check(lib, inp=(2, 2, 0, 4, 5), gi=(2, 2, 0, 4, 5))
    assert rc == ERR_INVALID and msg.startswith("inputSize:") and "> 0" in msg
    rc, msg = check(lib, go=(2, 2, 6, 0, 10), out=(6, 0, 10))
    assert rc == ERR_INVALID and msg.startswith("outputSize:") and "> 0" in msg and "0" in msg


@pytest.mark.parametrize("dims", [(2, 2), (2, 2, 3, 4, 5, 1)])
def test_check_ut_rank(lib: ctypes.CDLL, dims: tuple[int, ...]) -> None:
    rc, msg = check(lib, go=dims)
    assert rc == ERR_INVALID
    assert msg == f"gradOut: expected a 5-D tensor but got {len(dims)} dims [{','.join(map(str, dims))}]"


def test_check_ut_array_lengths(lib: ctypes.CDLL) -> None:
    rc, msg = check(lib, out=(6, 8))
    assert rc == ERR_INVALID and msg.startswith("outputSize:") and "3" in msg and "[6,8]" in msg
    rc, msg = check(lib, inp=(2, 2, 3, 4))
    assert rc == ERR_INVALID and msg.startswith("inputSize:") and "5" in msg and "[2,2,3,4]" in msg


def test_check_ut_mismatches(lib: ctypes.CDLL) -> None:
    # N/C mismatch between inputSize and gradOut
    rc, msg = check(lib, go=(2, 3, 6, 8, 10), gi=(2, 3, 3, 4, 5))
    assert rc == ERR_INVALID and msg.startswith("gradOut:") and "[2,3,6,8,10]" in msg
    # gradInput DHW mismatch
    rc, msg = check(lib, gi=(2, 2, 3, 4, 6))
    assert rc == ERR_INVALID and msg.startswith("gradInput:") and "[2,2,3,4,6]" in msg
    # gradInput of the wrong rank is a shape mismatch
    rc, msg = check(lib, gi=(2, 2, 3, 4, 5, 1))
    assert rc == ERR_INVALID and msg.startswith("gradInput:") and "6 dims" in msg
    # gradOut DHW mismatch against outputSize
    rc, msg = check(lib, out=(6, 8, 11))
    assert rc == ERR_INVALID and msg.startswith("gradOut:")


def test_check_ut_scales_and_ndhwc(lib: ctypes.CDLL) -> None:
    assert (
        check(
            lib, go=(2, 2, 4, 8, 12), out=(4, 8, 12), inp=(2, 2, 2, 4, 8), gi=(2, 2, 2, 4, 8), scales=(2.0, 2.0, 1.5)
        )[0]
        == OK
    )
    # UT NDHWC: gradOut {2,2,3,4,5} NDHWC, outputSize {2,3,4}, inputSize {2,5,4,6,8}, gradInput {2,4,6,8,5}
    assert check(
        lib,
        go=(2, 2, 3, 4, 5),
        out=(2, 3, 4),
        inp=(2, 5, 4, 6, 8),
        gi=(2, 4, 6, 8, 5),
        go_fmt=ACL_FORMAT_NDHWC,
        gi_fmt=ACL_FORMAT_NDHWC,
    ) == (OK, "")
    # the same dims without the NDHWC format do not match
    rc, msg = check(lib, go=(2, 2, 3, 4, 5), out=(2, 3, 4), inp=(2, 5, 4, 6, 8), gi=(2, 4, 6, 8, 5))
    assert rc == ERR_INVALID and msg.startswith("gradOut:")
    rc, msg = check(
        lib, go=(2, 2, 3, 4, 5), out=(2, 3, 4), inp=(2, 5, 4, 6, 8), gi=(2, 4, 6, 8, 5), go_fmt=ACL_FORMAT_NDHWC
    )
    assert rc == ERR_INVALID and msg.startswith("gradInput:") and "[2,5,4,6,8]" in msg


def test_check_scale_limit(lib: ctypes.CDLL) -> None:
    big: dict[str, Any] = dict(go=(1, 1, 51, 2, 2), out=(51, 2, 2), inp=(1, 1, 1, 2, 2), gi=(1, 1, 1, 2, 2))
    rc, msg = check(lib, **big)
    assert rc == ERR_INVALID and msg.startswith("scalesD:") and "51" in msg
    # a user scale > 0 replaces the ratio for its own dim only
    assert check(lib, **big, scales=(10.0, 0.0, 0.0))[0] == OK
    # exactly 50 passes; just above fails; infinity fails
    assert (
        check(lib, go=(1, 1, 2, 2, 2), out=(2, 2, 2), inp=(1, 1, 2, 2, 2), gi=(1, 1, 2, 2, 2), scales=(1.0, 50.0, 1.0))[
            0
        ]
        == OK
    )
    rc, msg = check(lib, scales=(1.0, 50.000001, 1.0))
    assert rc == ERR_INVALID and msg.startswith("scalesH:") and "50.000001" in msg
    rc, msg = check(lib, scales=(1.0, 1.0, float("inf")))
    assert rc == ERR_INVALID and msg.startswith("scalesW:")
    # NaN is not > 0: the size ratio is used (2 here -> passes; 51 -> fails)
    assert check(lib, scales=(float("nan"),) * 3)[0] == OK
    rc, msg = check(lib, **big, scales=(float("nan"), 1.0, 1.0))
    assert rc == ERR_INVALID and msg.startswith("scalesD:")
    # W ratio 60
    rc, msg = check(lib, go=(1, 1, 2, 2, 60), out=(2, 2, 60), inp=(1, 1, 2, 2, 1), gi=(1, 1, 2, 2, 1))
    assert rc == ERR_INVALID and msg.startswith("scalesW:") and "60" in msg


def test_check_uplimit(lib: ctypes.CDLL) -> None:
    n = 2**31
    kw: dict[str, Any] = dict(go=(n, 1, 2, 2, 2), out=(2, 2, 2), inp=(n, 1, 2, 2, 2), gi=(n, 1, 2, 2, 2))
    rc, msg = check(lib, **kw)
    assert rc == ERR_INVALID and msg.startswith("gradOut:") and str(n) in msg and "INT32_MAX" in msg
    assert check(lib, **kw, skip_uplimit=1) == (OK, "")
    assert check(lib, go=(n - 1, 1, 2, 2, 2), out=(2, 2, 2), inp=(n - 1, 1, 2, 2, 2), gi=(n - 1, 1, 2, 2, 2))[0] == OK
    # only gradOut's dims are checked (cann-abi.md §5.1 step 5): a huge gradInput D passes
    assert check(lib, go=(1, 1, 1, 2, 2), out=(1, 2, 2), inp=(1, 1, 2**32, 2, 2), gi=(1, 1, 2**32, 2, 2))[0] == OK


def test_check_message_buffer_is_bounded(lib: ctypes.CDLL) -> None:
    raw = ctypes.create_string_buffer(b"\xaa" * 32, 32)
    g, i = tmeta((2, 2, 3, 4, 5, 1)), tmeta((2, 2, 3, 4, 5))
    o, n = ameta((6, 8, 10)), ameta((2, 2, 3, 4, 5))
    rc = lib.us3d_check(ctypes.byref(g), ctypes.byref(o), ctypes.byref(n), 0.0, 0.0, 0.0, ctypes.byref(i), 0, raw, 8)
    assert rc == ERR_INVALID
    assert raw.raw[:8] == b"gradOut\x00"
    assert raw.raw[8:] == b"\xaa" * 24
    # NULL message buffer is allowed
    assert (
        lib.us3d_check(ctypes.byref(g), ctypes.byref(o), ctypes.byref(n), 0.0, 0.0, 0.0, ctypes.byref(i), 0, None, 0)
        == ERR_INVALID
    )
    # very long dims lists are truncated, not overflowed
    g9 = TensorMeta()
    g9.present, g9.dtype, g9.format, g9.ndim = 1, ACL_FLOAT, ACL_FORMAT_NCDHW, 12
    for k in range(8):
        g9.dims[k] = 2**62
    buf = ctypes.create_string_buffer(512)
    rc = lib.us3d_check(
        ctypes.byref(g9), ctypes.byref(o), ctypes.byref(n), 0.0, 0.0, 0.0, ctypes.byref(i), 0, buf, len(buf)
    )
    assert rc == ERR_INVALID and buf.value.decode().endswith(",...]")
