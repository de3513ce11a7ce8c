"""The simulated forward ``aclnnUpsampleNearestExact3d``, driven through the generic ctypes layer.

Facts: docs/cann-forward-facts.md (from hicann/ops-cv ``image/upsample_nearest_exact3d/op_host/op_api/
aclnn_upsample_nearest_exact3d.cpp``, its L0, the shared ``image/upsample_nearest3d`` tiling and kernels, and the
operator's unit tests).  Covered here: phase 1's order and codes (a table of bad inputs), the float32 index law
against the numpy reference on tie and non-tie shapes in every dtype and both layouts, the SoC variants
(``CANN_SIM_SOC``), the storage, tiling, memory, asynchrony and executor rules the backward also follows, and the
test-only wrong law (``CANN_SIM_TEST_FORWARD_LAW=ceil``).
"""

from __future__ import annotations

import threading
from ctypes import byref, c_uint64, c_void_p
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from acl_bindings import (
    AclError,
    DataType,
    Device,
    DeviceBuffer,
    Format,
    IntArray,
    Stream,
    Tensor,
    TwoPhaseOp,
    Workspace,
    lib,
    recent_error_message,
    sim,
)
from acl_bindings._codes import CANNSIM_ERR_QUEUED_WORK
from acl_bindings.op import double, input_tensor, int_array, output_tensor
from acl_bindings.socs import FIXED_WORKSPACE
from upsample3d_grad.reference import forward as rf

# declared by name and argument schema (cann-abi.md §1.4)
OP = TwoPhaseOp("UpsampleNearestExact3d", (input_tensor("self"), int_array("outputSize"), double("scalesD"),
                                           double("scalesH"), double("scalesW"), output_tensor("out")))
BACKWARD = TwoPhaseOp("UpsampleNearestExact3dBackward", (
    input_tensor("gradOut"), int_array("outputSize"), int_array("inputSize"), double("scalesD"), double("scalesH"),
    double("scalesW"), output_tensor("gradInput")))
SOC_950 = "Ascend950PR_SIMULATED"  # the Ascend950 prefix: IsRegBase (OCV common/inc/op_api/aclnn_check.h)
SOC_310P = "Ascend310P3"  # in nnopbase's SoC table (acl_bindings/sim/src/socs.json): the ascend310p kernels
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BF16)
NULLPTR, INVALID, INNER, INNER_NULLPTR = 161001, 161002, 561000, 561103


@pytest.fixture()
def gpu(no_leaks: None) -> Any:
    """A device and a stream (closed after the test), with no handle left behind."""
    with Device(0) as device, Stream(device) as stream:
        yield device, stream


def _phys(layout: str, n: int, c: int, d: int, h: int, w: int) -> tuple[int, ...]:
    return (n, c, d, h, w) if layout == "NCDHW" else (n, d, h, w, c)


def _buffer(device: Device, shape: tuple[int, ...], itemsize: int = 4) -> DeviceBuffer:
    return DeviceBuffer(device, max(64, int(np.prod(shape)) * itemsize))


def _one_shot(op, *args, stream: Stream, workspace: Workspace, keep=()) -> int:
    """Phase 1, the workspace, phase 2 on *stream* (the faithful pair); returns the workspace size."""
    size, executor = op.get_workspace_size(*args, keep=keep)
    try:
        address = workspace.reserve(size)
    except BaseException:
        executor.close()
        raise
    op.execute(address, size, executor, stream)
    return size


def forward(device: Device, stream: Stream, x: np.ndarray, output_size: tuple[int, int, int],
            scales: tuple[float, float, float] = (0.0, 0.0, 0.0), layout: str = "NCDHW") -> tuple[np.ndarray, int]:
    """Run the simulated forward on *x* (contiguous, in *layout*); returns (out, workspace size)."""
    n, c = x.shape[0], x.shape[1 if layout == "NCDHW" else 4]
    fmt = Format.NDHWC if layout == "NDHWC" else Format.NCDHW
    y = np.zeros(_phys(layout, n, c, *output_size), x.dtype)
    with _buffer(device, x.shape, x.itemsize) as bx, _buffer(device, y.shape, y.itemsize) as by:
        bx.upload(x)
        tx, ty = Tensor(x.shape, x.dtype, bx, format=fmt), Tensor(y.shape, y.dtype, by, format=fmt)
        with tx, ty, IntArray(output_size) as osz:
            workspace = Workspace(device, stream)
            try:
                size = _one_shot(OP, tx, osz, *scales, ty, stream=stream, workspace=workspace, keep=(tx, ty, osz))
                stream.synchronize()
            finally:
                workspace.release()
        by.download(y)
    return y, size


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.itemsize == 4 else np.uint16)


def _random(shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


# ------------------------------------------------------------------------------- phase 1: order and codes

# (case, self shape, self dtype, self format, outputSize, scales, out shape, out dtype, code, message fragment)
GOOD = ((2, 2, 3, 4, 5), DataType.FLOAT, Format.NCDHW, (6, 8, 10), (0.0, 0.0, 0.0), (2, 2, 6, 8, 10), DataType.FLOAT)
F, F16, BF = DataType.FLOAT, DataType.FLOAT16, DataType.BF16
BAD_CASES = [
    ("self NULL first", None, F, Format.NCDHW, None, None, None, F, NULLPTR, "self: expected a tensor but got NULL"),
    ("then outputSize NULL", GOOD[0], F, Format.NCDHW, None, None, None, F, NULLPTR, "outputSize: expected an int"),
    ("then out NULL", GOOD[0], F, Format.NCDHW, GOOD[3], None, None, F, NULLPTR, "out: expected a tensor"),
    ("null before dtype", GOOD[0], DataType.INT32, Format.NCDHW, GOOD[3], None, None, F, NULLPTR, "out: expected"),
    *[(f"dtype {dt.name}", GOOD[0], dt, Format.NCDHW, GOOD[3], None, GOOD[5], dt, INVALID, "self: dtype must be")
      for dt in (DataType.UINT8, DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.DOUBLE,
                 DataType.BOOL, DataType.COMPLEX64, DataType.COMPLEX128)],
    ("out dtype differs", GOOD[0], F, Format.NCDHW, GOOD[3], None, GOOD[5], F16, INVALID, "out: dtype must equal"),
    ("dtype before elements", (2, 0, 3, 4, 5), DataType.INT32, Format.NCDHW, GOOD[3], None, (2, 0, 6, 8, 10),
     DataType.INT32, INVALID, "self: dtype must be"),
    ("D = 0", (2, 2, 0, 4, 5), F, Format.NCDHW, GOOD[3], None, GOOD[5], F, INVALID, "D (view dim 2) must be > 0"),
    ("C = 0 (N = 0 is allowed)", (2, 0, 3, 4, 5), F, Format.NCDHW, GOOD[3], None, (2, 0, 6, 8, 10), F, INVALID,
     "C (view dim 1) must be > 0"),
    ("NDHWC reads C last", (2, 2, 3, 4, 0), F, Format.NDHWC, GOOD[3], None, (2, 6, 8, 10, 0), F, INVALID,
     "C (view dim 4) must be > 0"),
    ("outputSize element 0", GOOD[0], F, Format.NCDHW, (6, 8, 0), None, (2, 2, 6, 8, 0), F, INVALID,
     "outputSize: W (element 2) must be > 0"),
    ("H = 0 beside an outputSize element 0", (2, 2, 3, 0, 5), F, Format.NCDHW, (0, 8, 10), None, GOOD[5], F, INVALID,
     "self: H (view dim 3) must be > 0"),
    ("3-D self", (2, 2, 3), F, Format.NCDHW, GOOD[3], None, GOOD[5], F, INVALID, "expected a 5-D tensor but got 3"),
    ("6-D self: elements pass, rank fails", (2, 2, 3, 4, 5, 6), F, Format.NCDHW, GOOD[3], None, GOOD[5], F, INVALID,
     "self: expected a 5-D tensor but got 6 dims"),
    ("elements before rank", (2, 2, 0, 4, 5, 6), F, Format.NCDHW, GOOD[3], None, GOOD[5], F, INVALID,
     "D (view dim 2) must be > 0"),
    ("outputSize length 4", GOOD[0], F, Format.NCDHW, (6, 8, 10, 6), None, GOOD[5], F, INVALID,
     "outputSize: expected 3 elements [oD,oH,oW] but got 4 [6,8,10,6]"),
    ("elements before length", GOOD[0], F, Format.NCDHW, (6, 8, 0, 6), None, GOOD[5], F, INVALID,
     "W (element 2) must be > 0"),
    ("outputSize length 2 read past its end", GOOD[0], F, Format.NCDHW, (6, 8), None, GOOD[5], F, INVALID,
     "past the array's end"),
    ("out shape", GOOD[0], F, Format.NCDHW, GOOD[3], None, (2, 6, 8, 10, 2), F, INVALID,
     "out: shape must be [N,C,oD,oH,oW] = [2,2,6,8,10]"),
    ("elements before shape", (2, 2, 0, 4, 5), F, Format.NCDHW, GOOD[3], None, (2, 6, 8, 10, 2), F, INVALID,
     "D (view dim 2) must be > 0"),
    ("self's format decides out's shape", (2, 2, 3, 4, 5), F, Format.NDHWC, GOOD[3], None, (2, 5, 6, 8, 10), F,
     INVALID, "out: shape must be [N,oD,oH,oW,C] = [2,6,8,10,5]"),
    ("scale band, D", GOOD[0], F, Format.NCDHW, (5, 8, 12), (1.5, 2.0, 2.5), (2, 2, 5, 8, 12), F, INVALID,
     "scalesD: scale 1.5 conflicts with outputSize[0] = 5"),
    ("scale band, W", GOOD[0], F, Format.NCDHW, (4, 8, 13), (1.5, 2.0, 2.5), (2, 2, 4, 8, 13), F, INVALID,
     "scalesW: scale 2.5 conflicts with outputSize[2] = 13"),
    ("band beyond int64", GOOD[0], F, Format.NCDHW, (6, 8, 10), (1e300, 2.0, 2.0), GOOD[5], F, INVALID,
     "does not fit in int64"),
    ("band before shape", GOOD[0], F, Format.NCDHW, (5, 8, 12), (1.5, 2.0, 2.5), (2, 6, 8, 10, 2), F, INVALID,
     "scalesD: scale 1.5 conflicts"),
]


def _tensor(device: Device, shape: tuple[int, ...] | None, dtype: DataType, fmt: Format,
            held: list[Any]) -> Tensor | None:
    if shape is None:
        return None
    buf = _buffer(device, shape, 16)  # (room for the widest dtype a case declares: complex128)
    held.append(buf)
    t = Tensor(shape, dtype, buf, format=fmt)
    held.append(t)
    return t


def _phase1(device: Device, case: tuple[Any, ...], held: list[Any]) -> tuple[int, Any]:
    _, xs, xdt, fmt, osz, scales, ys, ydt = case[:8]
    x = _tensor(device, xs, xdt, fmt, held)
    # out in self's layout, as the ops-cv UT cases give it (mixed layouts are refused at ViewCopy, cann-abi.md §10.1)
    y = _tensor(device, ys, ydt, Format.NDHWC if fmt == Format.NDHWC else Format.NCDHW, held)
    arr = None
    if osz is not None:
        arr = IntArray(osz)
        held.append(arr)
    return OP.get_workspace_size(x, arr, *(scales or (0.0, 0.0, 0.0)), y, keep=tuple(held))


@pytest.mark.parametrize("case", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_phase1_refuses_in_canns_order_with_canns_code(gpu: Any, case: tuple[Any, ...]) -> None:
    device, _ = gpu
    held: list[Any] = []
    try:
        with pytest.raises(AclError) as info:
            _phase1(device, case, held)
        assert info.value.code == case[8], info.value.detail
        assert case[9] in info.value.detail, info.value.detail
        assert info.value.detail.startswith("aclnnUpsampleNearestExact3dGetWorkspaceSize: ")
    finally:
        for h in reversed(held):
            h.close()


GOOD_CASES = [
    ("UT case_float_normal", GOOD),
    ("UT case_scales_normal", (GOOD[0], F, Format.NCDHW, (4, 8, 12), (1.5, 2.0, 2.5), (2, 2, 4, 8, 12), F)),
    ("UT case_NDHWC_normal", ((2, 2, 3, 4, 5), F, Format.NDHWC, (6, 8, 10), None, (2, 6, 8, 10, 5), F)),
    ("fp16", (GOOD[0], F16, Format.NCDHW, GOOD[3], None, GOOD[5], F16)),
    ("bf16", (GOOD[0], BF, Format.ND, GOOD[3], None, GOOD[5], BF)),
    ("inside the epsilon band: trunc(7 * (0.7142857 + 1e-5)) = 5", ((1, 1, 7, 4, 5), F, Format.NCDHW, (5, 8, 10),
                                                                    (0.7142857, 2.0, 2.0), (1, 1, 5, 8, 10), F)),
    ("mixed scales are not checked against the sizes", (GOOD[0], F, Format.NCDHW, (6, 8, 10), (7.0, 0.0, 0.0),
                                                         GOOD[5], F)),
]


@pytest.mark.parametrize("case", GOOD_CASES, ids=[c[0] for c in GOOD_CASES])
def test_phase1_accepts(gpu: Any, case: tuple[str, tuple[Any, ...]]) -> None:
    device, _ = gpu
    held: list[Any] = []
    try:
        size, executor = _phase1(device, (case[0], *case[1]), held)
        assert size > 0  # the simulator's kernel keeps its index tables in the workspace
        executor.close()
    finally:
        for h in reversed(held):
            h.close()


def test_null_out_parameters_come_first(gpu: Any) -> None:
    fn = lib.unchecked("aclnnUpsampleNearestExact3dGetWorkspaceSize")
    size, executor = c_uint64(), c_void_p()
    assert fn(None, None, 0.0, 0.0, 0.0, None, None, byref(executor)) == NULLPTR  # before self's NULL
    assert "workspaceSize is NULL" in recent_error_message()
    assert fn(None, None, 0.0, 0.0, 0.0, None, byref(size), None) == NULLPTR
    assert "executor is NULL" in recent_error_message()


@pytest.mark.parametrize("soc, dtype, code", [(SOC_310P, BF, INVALID), (SOC_310P, F16, 0), ("", BF, 0),
                                              (SOC_950, BF, 0)])
def test_the_dtype_set_follows_the_soc(gpu: Any, monkeypatch: pytest.MonkeyPatch, soc: str, dtype: DataType,
                                       code: int) -> None:
    monkeypatch.setenv("CANN_SIM_SOC", soc)
    device, _ = gpu
    held: list[Any] = []
    case = ("", GOOD[0], dtype, Format.NCDHW, GOOD[3], None, GOOD[5], dtype)
    try:
        if code:
            with pytest.raises(AclError) as info:
                _phase1(device, case, held)
            assert info.value.code == code and "an Ascend310P has no BF16" in info.value.detail
        else:
            _phase1(device, case, held)[1].close()
    finally:
        for h in reversed(held):
            h.close()


def test_n_zero_is_an_empty_success(gpu: Any) -> None:
    device, stream = gpu
    held: list[Any] = []
    case = ("", (0, 2, 3, 4, 5), F, Format.NCDHW, GOOD[3], None, (0, 2, 6, 8, 10), F)
    try:
        size, executor = _phase1(device, case, held)
        assert size == 0
        OP.execute(None, 0, executor, stream)  # nothing to launch: no workspace needed
        assert executor.closed
    finally:
        for h in reversed(held):
            h.close()


# ------------------------------------------------------------------------------- the index law

# (in D,H,W), (out D,H,W), scales: tie and non-tie shapes (facts §6.4), downsampling, user scales
LAW_SHAPES = [
    ((2, 3, 2), (41, 7, 5), (0.0, 0.0, 0.0)),        # tie: D, o = 20 -> 0 (the exact answer is 1)
    ((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5)),       # tie with scales: D, o = 7 -> 25
    ((3, 4, 5), (7, 9, 11), (0.0, 0.0, 0.0)),        # no tie
    ((5, 6, 7), (2, 3, 4), (0.0, 0.0, 0.0)),         # downsampling
    ((16, 3, 2), (17, 5, 4), (1.1, 5 / 3, 2.0)),     # a scale whose reciprocals differ per SoC (1.1)
    ((100000, 1, 1), (100001, 1, 1), (1.0, 1.0, 1.0)),  # inside the scale band: the last output clamps to I - 1
]


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", LAW_SHAPES, ids=[f"{a}->{b}" for a, b, _ in LAW_SHAPES])
def test_the_index_law_matches_the_reference_bit_for_bit(gpu: Any, shape: Any, dtype: np.dtype, layout: str) -> None:
    device, stream = gpu
    (di, hi, wi), out3, scales = shape
    x = _random(_phys(layout, 2, 3, di, hi, wi), dtype)
    y, _ = forward(device, stream, x, out3, scales, layout)
    want = rf.upsample_nearest_exact3d_forward(x, out3, *scales, layout=layout)
    assert np.array_equal(_bits(y), _bits(want))


def test_the_tie_shapes_do_tie() -> None:
    # the law test above would not notice a rounding slip on shapes without ties: these have them
    assert rf.forward_index(2, 41, rf.forward_ratios((41, 1, 1), (1, 1, 2, 1, 1))[0])[20] == 0
    assert rf.adjoint_mismatches((8, 9, 3), (1, 1, 27, 4, 2), 0.3, 2.25, 1.5)["D"] == [(7, 25, 24)]


def test_strided_views_are_gathered_through_their_strides(gpu: Any) -> None:
    device, stream = gpu
    x = _random((2, 3, 4, 5, 6), np.dtype(np.float32))
    want = rf.upsample_nearest_exact3d_forward(x, (7, 3, 11))
    big = np.zeros((2, 3, 4, 5, 12), np.float32)
    big[..., ::2] = x  # self: every other element of W
    y_phys = np.zeros((11, 3, 7, 3, 2), np.float32)  # out: stored W, H, D, C, N (a permuted view)
    with DeviceBuffer(device, big.nbytes) as bx, DeviceBuffer(device, y_phys.nbytes) as by:
        bx.upload(big)
        by.memset(0)
        st = tuple(s // 4 for s in big.strides)
        tx = Tensor(x.shape, np.float32, bx, strides=(st[0], st[1], st[2], st[3], 2))
        ty = Tensor((2, 3, 7, 3, 11), np.float32, by, strides=(1, 2, 2 * 3, 2 * 3 * 7, 2 * 3 * 7 * 3))
        with tx, ty, IntArray((7, 3, 11)) as osz:
            workspace = Workspace(device, stream)
            _one_shot(OP, tx, osz, 0.0, 0.0, 0.0, ty, stream=stream, workspace=workspace, keep=(tx, ty, osz))
            stream.synchronize()
            workspace.release()
        by.download(y_phys)
    assert np.array_equal(np.transpose(y_phys, (4, 3, 2, 1, 0)), want)


# ------------------------------------------------------------------------------- SoC variants

@pytest.mark.parametrize("soc", ["", SOC_950])
def test_a_scale_with_two_reciprocals_moves_a_tie_by_soc(gpu: Any, monkeypatch: pytest.MonkeyPatch, soc: str) -> None:
    monkeypatch.setenv("CANN_SIM_SOC", soc)
    device, stream = gpu
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 16, 1, 1)
    y, size = forward(device, stream, x, (17, 1, 1), (1.1, 1.0, 1.0))
    # o = 16: 16.5 / 1.1 = 15; A2/A3 multiplies by f32(1.0 / 1.1) (-> 15), the 950 by 1.0f / f32(1.1) (-> 14)
    assert y[0, 0, 16, 0, 0] == (14.0 if soc else 15.0)
    family = rf.soc_family(soc or "CANN-Simulator")
    assert np.array_equal(y, rf.upsample_nearest_exact3d_forward(x, (17, 1, 1), 1.1, 1.0, 1.0, soc=family))
    assert (size >= FIXED_WORKSPACE) == bool(soc)  # the 950 tiling asks for 16 MiB (facts §3.3)


@pytest.mark.parametrize("soc", ["", SOC_950])
def test_mixed_scales_count_per_dim_only_on_the_950(gpu: Any, monkeypatch: pytest.MonkeyPatch, soc: str) -> None:
    monkeypatch.setenv("CANN_SIM_SOC", soc)
    device, stream = gpu
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 4, 1, 1)
    y, _ = forward(device, stream, x, (3, 1, 1), (1.0, 0.0, 0.0))  # scalesD 1.0 alone: 3 outputs of 4 inputs
    want = [0.0, 1.0, 2.0] if soc else [0.0, 2.0, 3.0]  # 950: r_D = 1; A2/A3: r_D = 4/3 from the sizes
    assert y.ravel().tolist() == want
    assert np.array_equal(y, rf.upsample_nearest_exact3d_forward(x, (3, 1, 1), 1.0, 0.0, 0.0,
                                                                 soc="ascend950" if soc else "a2a3"))


def test_the_950_refuses_a_null_workspace_it_would_ignore_silently(gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # on an Ascend950 the kernel returns doing nothing when the workspace pointer is NULL (facts §4.2)
    monkeypatch.setenv("CANN_SIM_SOC", SOC_950)
    device, stream = gpu
    with _buffer(device, (2, 2, 3, 4, 5)) as bx, _buffer(device, GOOD[5]) as by, IntArray(GOOD[3]) as osz:
        tx, ty = Tensor(GOOD[0], np.float32, bx), Tensor(GOOD[5], np.float32, by)
        with tx, ty:
            size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty, keep=(tx, ty, osz))
            assert size >= FIXED_WORKSPACE
            with pytest.raises(AclError) as info:
                OP.execute(None, 0, executor, stream)
            assert info.value.code == NULLPTR and "workspace is NULL" in info.value.detail


# ------------------------------------------------------------------------------- storage, tiling, memory

def _one_call(device: Device, stream: Stream, tx: Tensor, ty: Tensor, osz: tuple[int, int, int]) -> None:
    with IntArray(osz) as arr:
        workspace = Workspace(device, stream)
        try:
            _one_shot(OP, tx, arr, 0.0, 0.0, 0.0, ty, stream=stream, workspace=workspace, keep=(tx, ty, arr))
            stream.synchronize()
        finally:
            workspace.release()


@pytest.mark.parametrize("which", ["self", "out"])
def test_a_view_past_its_storage_is_561103(gpu: Any, which: str) -> None:
    device, stream = gpu
    with DeviceBuffer(device, 4096) as bx, DeviceBuffer(device, 4096) as by:
        # non-contiguous views (a gap after each H row) over a declared storage of 10 elements
        bad = {"self": {"strides": (1, 1, 12, 4, 1)}, "out": {"strides": (1, 1, 48, 8, 1)}}[which]
        tx = Tensor((1, 1, 4, 2, 3), np.float32, bx, **(dict(bad, storage_dims=(10,)) if which == "self" else {}))
        ty = Tensor((1, 1, 8, 4, 6), np.float32, by, **(dict(bad, storage_dims=(10,)) if which == "out" else {}))
        with tx, ty, pytest.raises(AclError) as info:
            _one_call(device, stream, tx, ty, (8, 4, 6))
    assert info.value.code == INNER_NULLPTR and f"{which} (view" in info.value.detail
    assert "storage" in info.value.detail


@pytest.mark.parametrize("soc", ["", SOC_950])
def test_the_a2a3_tiling_limits_sizes_to_int32(gpu: Any, monkeypatch: pytest.MonkeyPatch, soc: str) -> None:
    # the L0 ignores the tiling's status: phase 1 succeeds, the launch tiles again and fails, 561103 at phase 2
    # (cann-abi.md §10.4)
    monkeypatch.setenv("CANN_SIM_SOC", soc)
    device, stream = gpu
    big = 2 ** 31
    with DeviceBuffer(device, 64) as bx, DeviceBuffer(device, 64) as by, IntArray((1, 1, 1)) as osz:
        tx = Tensor((1, 1, 1, 1, big), np.float32, bx, strides=(1, 1, 1, 1, 0), storage_dims=(1,))
        ty = Tensor((1, 1, 1, 1, 1), np.float32, by)
        with tx, ty:
            size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty, keep=(tx, ty, osz))
            with DeviceBuffer(device, max(size, 32)) as bw:
                if soc:  # no such limit on the 950
                    OP.execute(bw.ptr, size, executor, stream)
                    stream.synchronize()
                    return
                with pytest.raises(AclError) as info:
                    OP.execute(bw.ptr, size, executor, stream)
    assert info.value.code == INNER_NULLPTR and info.value.func == "aclnnUpsampleNearestExact3d"
    assert "self's W = 2147483648 exceeds INT32_MAX" in info.value.detail, info.value.detail


def test_memory_rules(gpu: Any) -> None:
    device, stream = gpu
    with DeviceBuffer(device, 4096) as b:
        tx = Tensor((1, 1, 2, 2, 2), np.float32, b)
        cases = [
            (Tensor((1, 1, 4, 4, 4), np.float32, b, offset=4), "the memory of self and out overlaps"),
            (Tensor((1, 1, 4, 4, 4), np.float32, b, offset=512, strides=(64, 64, 4, 1, 1)), "out: its strides make"),
            (Tensor((1, 1, 4, 4, 4), np.float32, address=b.ptr + 2052), "32-byte aligned"),
        ]
        with tx:
            for ty, fragment in cases:
                with ty, pytest.raises(AclError) as info:
                    _one_call(device, stream, tx, ty, (4, 4, 4))
                assert info.value.code == INVALID and fragment in info.value.detail, info.value.detail


# ------------------------------------------------------------------------------- asynchrony, executors, cache

def test_phase2_queues_the_kernel_and_guards_its_memory(gpu: Any) -> None:
    device, stream = gpu
    previous = sim.set_stream_mode("deferred")
    try:
        x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
        with DeviceBuffer(device, 64) as bx, DeviceBuffer(device, 512) as by, IntArray((4, 4, 4)) as osz:
            bx.upload(x)
            by.memset(0)
            tx, ty = Tensor(x.shape, np.float32, bx), Tensor((1, 1, 4, 4, 4), np.float32, by)
            with tx, ty:
                workspace = Workspace(device, stream)
                _one_shot(OP, tx, osz, 0.0, 0.0, 0.0, ty, stream=stream, workspace=workspace, keep=(tx, ty, osz))
                y = np.full((1, 1, 4, 4, 4), -1.0, np.float32)
                with pytest.raises(AclError) as info:
                    by.download(y)  # the kernel has not run yet: reading what it writes races it
                assert info.value.code == CANNSIM_ERR_QUEUED_WORK and "aclnnUpsampleNearestExact3d" in info.value.detail
                with pytest.raises(AclError) as info:
                    bx.memset(0)  # overwriting what it reads races it too
                assert info.value.code == CANNSIM_ERR_QUEUED_WORK
                assert (y == -1).all()
                stream.synchronize()
                workspace.release()
                by.download(y)
        assert np.array_equal(y, rf.upsample_nearest_exact3d_forward(x, (4, 4, 4)))
    finally:
        sim.set_stream_mode(previous)


def test_executors_are_single_use_and_repeatable_ones_follow_new_addresses(gpu: Any) -> None:
    device, stream = gpu
    previous = sim.set_op_cache(False)  # (after a one-shot run the cache would answer with a wrapper)
    try:
        _single_use_then_repeatable(device, stream)
    finally:
        sim.set_op_cache(previous)


def _single_use_then_repeatable(device: Device, stream: Stream) -> None:
    x1, x2 = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2), -np.arange(8, dtype=np.float32).reshape(
        1, 1, 2, 2, 2)
    with DeviceBuffer(device, 64) as b1, DeviceBuffer(device, 64) as b2, DeviceBuffer(device, 512) as by, \
            IntArray((3, 3, 3)) as osz:
        b1.upload(x1)
        b2.upload(x2)
        tx, ty = Tensor(x1.shape, np.float32, b1), Tensor((1, 1, 3, 3, 3), np.float32, by)
        with tx, ty:
            size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty, keep=(tx, ty, osz))
            workspace = Workspace(device, stream)
            address = workspace.reserve(size)
            OP.execute(address, size, executor, stream)
            assert executor.closed  # consumed by its phase 2
            size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty, keep=(tx, ty, osz))
            executor.make_repeatable()
            y = np.zeros((1, 1, 3, 3, 3), np.float32)
            for buf, x in ((b1, x1), (b2, x2)):
                executor.set_input_address(0, tx, buf.ptr)
                OP.execute(address, size, executor, stream)
                stream.synchronize()
                by.download(y)
                assert np.array_equal(y, rf.upsample_nearest_exact3d_forward(x, (3, 3, 3)))
            executor.close()
            workspace.release()


def test_a_destroyed_tensor_makes_phase2_refuse(gpu: Any) -> None:
    device, stream = gpu
    with DeviceBuffer(device, 64) as bx, DeviceBuffer(device, 512) as by, IntArray((3, 3, 3)) as osz:
        tx, ty = Tensor((1, 1, 2, 2, 2), np.float32, bx), Tensor((1, 1, 3, 3, 3), np.float32, by)
        size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty)
        tx.close()
        workspace = Workspace(device, stream)
        with pytest.raises(AclError) as info:
            OP.execute(workspace.reserve(size), size, executor, stream)
        assert info.value.code == 990101 and "self" in info.value.detail
        ty.close()
        workspace.release()


def test_the_op_cache_answers_a_repeated_call_shape(gpu: Any) -> None:
    device, stream = gpu
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    box: dict[str, Any] = {}

    def scenario() -> None:  # on a fresh thread: nnopbase's cache is per thread
        with DeviceBuffer(device, 64) as bx, DeviceBuffer(device, 512) as by, IntArray((5, 3, 4)) as osz:
            bx.upload(x)
            tx, ty = Tensor(x.shape, np.float32, bx), Tensor((1, 1, 5, 3, 4), np.float32, by)
            with tx, ty:
                kinds = []
                for _ in range(3):  # a new shape, then its one-shot run, then the cache's answer
                    size, executor = OP.get_workspace_size(tx, osz, 0.0, 0.0, 0.0, ty, keep=(tx, ty, osz))
                    try:
                        executor.make_repeatable()
                        kinds.append("executor")
                        executor.close()
                    except AclError as exc:
                        kinds.append(f"wrapper {exc.code}")
                        executor.close()
                    if len(kinds) == 1:
                        forward_one_shot(device, stream, tx, ty, osz)
                box["kinds"] = kinds
                box["y"] = by.download(np.zeros((1, 1, 5, 3, 4), np.float32))

    previous = sim.set_op_cache(True)
    try:
        thread = threading.Thread(target=scenario)
        thread.start()
        thread.join()
    finally:
        sim.set_op_cache(previous)
    assert box["kinds"] == ["executor", "wrapper 561000", "wrapper 561000"]
    assert np.array_equal(box["y"], rf.upsample_nearest_exact3d_forward(x, (5, 3, 4)))


def forward_one_shot(device: Device, stream: Stream, tx: Tensor, ty: Tensor, osz: IntArray) -> None:
    """One phase 1 and phase 2 of the forward on existing handles, synchronised."""
    workspace = Workspace(device, stream)
    _one_shot(OP, tx, osz, 0.0, 0.0, 0.0, ty, stream=stream, workspace=workspace, keep=(tx, ty, osz))
    stream.synchronize()
    workspace.release()


# ------------------------------------------------------------------------------- the test-only wrong law

def _adjoint_gap(device: Device, stream: Stream, x: np.ndarray, g: np.ndarray,
                 out3: tuple[int, int, int]) -> float:
    """<F(x), g> - <x, B(g)> - R_predicted with both operators on the simulator (float64 on the host)."""
    fx, _ = forward(device, stream, x, out3)
    n, c, di, hi, wi = x.shape
    with DeviceBuffer(device, g.nbytes) as bg, DeviceBuffer(device, x.nbytes) as bgi:
        bg.upload(g)
        tg, tgi = Tensor(g.shape, np.float32, bg), Tensor(x.shape, np.float32, bgi)
        with tg, tgi, IntArray(out3) as osz, IntArray(x.shape) as isz:
            workspace = Workspace(device, stream)
            _one_shot(BACKWARD, tg, osz, isz, 0.0, 0.0, 0.0, tgi, stream=stream, workspace=workspace,
                      keep=(tg, tgi, osz, isz))
            stream.synchronize()
            workspace.release()
        bx = bgi.download(np.zeros_like(x))
    lhs = float(np.sum(fx.astype(np.float64) * g.astype(np.float64)))
    rhs = float(np.sum(x.astype(np.float64) * bx.astype(np.float64)))
    return lhs - rhs - rf.adjoint_residual(x, g, out3)


def test_the_wrong_law_switch_breaks_the_forward_and_the_adjoint_check(gpu: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    device, stream = gpu
    rng = np.random.default_rng(1)
    # small integers: every float32 sum is exact, so the adjoint gap of correct kernels is exactly 0
    x = rng.integers(-8, 9, (1, 2, 2, 3, 2)).astype(np.float32)
    g = rng.integers(-8, 9, (1, 2, 41, 7, 5)).astype(np.float32)
    assert rf.adjoint_residual(x, g, (41, 7, 5)) != 0.0  # a tie shape: the prediction is not trivially 0
    assert _adjoint_gap(device, stream, x, g, (41, 7, 5)) == 0.0
    monkeypatch.setenv("CANN_SIM_TEST_FORWARD_LAW", "ceil")
    y, _ = forward(device, stream, x, (41, 7, 5))
    o = [np.arange(k, dtype=np.float32) for k in (41, 7, 5)]
    r = rf.forward_ratios((41, 7, 5), x.shape)
    maps = [np.minimum(np.ceil((ok + np.float32(0.5)) * np.float32(rk)), i - 1).astype(np.int64)
            for ok, rk, i in zip(o, r, x.shape[2:])]
    assert np.array_equal(y, x[:, :, maps[0]][:, :, :, maps[1]][:, :, :, :, maps[2]])
    assert not np.array_equal(y, rf.upsample_nearest_exact3d_forward(x, (41, 7, 5)))
    assert _adjoint_gap(device, stream, x, g, (41, 7, 5)) != 0.0
    monkeypatch.delenv("CANN_SIM_TEST_FORWARD_LAW")
    assert _adjoint_gap(device, stream, x, g, (41, 7, 5)) == 0.0  # the op cache keeps the laws apart


def test_the_entry_points_are_registered_counted_and_fault_injectable(gpu: Any) -> None:
    # the operator file's CANNSIM_REGISTER_OP line is all the registration there is (no generic file names it)
    device, stream = gpu
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    calls = [sim.call_count(f) for f in (OP.phase1_name, OP.phase2_name)]
    forward(device, stream, x, (3, 3, 3))
    assert [sim.call_count(f) for f in (OP.phase1_name, OP.phase2_name)] == [calls[0] + 1, calls[1] + 1]
    sim.set_fault(f"{OP.phase2_name}:1:507015")
    try:
        with pytest.raises(AclError) as info:
            forward(device, stream, x, (3, 3, 3))
        assert info.value.code == 507015 and "injected fault" in info.value.detail
    finally:
        sim.set_fault(None)
    assert sim.live_handles()["executor"] == 0  # the failed phase 2 consumed its executor
