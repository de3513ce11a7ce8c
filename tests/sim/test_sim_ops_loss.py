"""The simulated loss operators (ops/mse_loss.c, ops/mse_loss_backward.c, ops/pow_tensor_scalar.c, ops/mean.c),
called raw through ctypes in a child process: values against numpy, and each refusal with CANN's code (161001 for
a NULL handle, 161002 for a dtype, shape, reduction or dim that ops-nn / ops-math refuse; docs/fidelity.md)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.sim._raw import PRELUDE, RUN_OP, run_raw

RAW = PRELUDE + RUN_OP + r"""
import numpy as np
P, U, W, E = C.c_void_p, C.POINTER(C.c_uint64), C.POINTER(C.c_void_p), C.c_int64
op.aclnnMseLossGetWorkspaceSize.argtypes = [P, P, E, P, U, W]
op.aclnnMseLossBackwardGetWorkspaceSize.argtypes = [P, P, P, E, P, U, W]
op.aclnnPowTensorScalarGetWorkspaceSize.argtypes = [P, P, P, U, W]
op.aclnnMeanGetWorkspaceSize.argtypes = [P, P, C.c_bool, C.c_int, P, U, W]
for name in ("aclnnMseLoss", "aclnnMseLossBackward", "aclnnPowTensorScalar", "aclnnMean"):
    getattr(op, name).argtypes = [P, C.c_uint64, P, P]
NP = {0: np.float32, 1: np.float16, 3: np.int32, 9: np.int64, 11: np.float64, 12: np.bool_}
rt.aclInit(None); rt.aclrtSetDevice(0)

class T:
    # a device tensor of dims and acl dtype, filled from values (row-major) when given
    def __init__(self, dims, dtype, values=None):
        self.dims, self.dtype = list(dims), dtype
        n = int(np.prod(dims)) if dims else 1
        self.nbytes = max(n, 1) * (np.dtype(NP[dtype]).itemsize if dtype in NP else 4)
        self.p = C.c_void_p()
        assert rt.aclrtMalloc(C.byref(self.p), C.c_size_t(max(self.nbytes, 32)), 0) == 0
        st, acc = [], 1
        for x in reversed(self.dims): st.append(acc); acc *= x
        d = (C.c_int64 * max(len(dims), 1))(*self.dims)
        s = (C.c_int64 * max(len(dims), 1))(*reversed(st))
        stor = (C.c_int64 * 1)(max(n, 1))
        self.h = nn.aclCreateTensor(d, len(dims), dtype, s, 0, 2, stor, 1, self.p)
        if values is not None:
            b = np.asarray(values, dtype=NP[dtype]).tobytes()
            rt.aclrtMemcpy(self.p, C.c_size_t(len(b)), b, C.c_size_t(len(b)), 1)
    def get(self):
        b = (C.c_char * self.nbytes)()
        rt.aclrtMemcpy(b, C.c_size_t(self.nbytes), self.p, C.c_size_t(self.nbytes), 2)
        return np.frombuffer(bytes(b), dtype=NP[self.dtype]).astype(np.float64).tolist()

def result(name, out_t, *args):
    r = run(name, *args)
    return r + [out_t.get()] if r == [0, 0] else r
def scalar(v, dtype):
    box = {0: C.c_float, 11: C.c_double, 9: C.c_int64, 12: C.c_bool}[dtype](v)
    return nn.aclCreateScalar(C.byref(box), dtype)
def dims(*v):
    return nn.aclCreateIntArray((C.c_int64 * max(len(v), 1))(*v), len(v))

inp = json.loads(sys.argv[2])
x, y, g = (np.array(inp[k], dtype=np.float32) for k in ("x", "y", "g"))
shape = list(x.shape)
out = {}
# ---- aclnnMseLoss
for red in (0, 1, 2):
    o = T(shape if red == 0 else [], 0)
    out[f"mse_f32_{red}"] = result("aclnnMseLoss", o, T(shape, 0, x).h, T(shape, 0, y).h, red, o.h)
o = T([], 1)
out["mse_f16_mean"] = result("aclnnMseLoss", o, T(shape, 1, x).h, T(shape, 1, y).h, 1, o.h)
o = T([], 0)
out["mse_f16_f32_mean"] = result("aclnnMseLoss", o, T(shape, 1, x).h, T(shape, 0, y).h, 1, o.h)
o = T([2, 4, 3], 0)
out["mse_broadcast_none"] = result("aclnnMseLoss", o, T([2, 1, 3], 0, x.ravel()[:6]).h, T([4, 3], 0, y.ravel()[:12]).h,
                                   0, o.h)
o = T([], 0)
out["mse_empty_mean"] = result("aclnnMseLoss", o, T([0, 3], 0).h, T([0, 3], 0).h, 1, o.h)
out["mse_empty_sum"] = result("aclnnMseLoss", o, T([0, 3], 0).h, T([0, 3], 0).h, 2, o.h)
a3, o0 = T([2, 3], 0, x.ravel()[:6]), T([], 0)
out["mse_null_self"] = run("aclnnMseLoss", None, a3.h, 1, o0.h)
out["mse_null_out"] = run("aclnnMseLoss", a3.h, a3.h, 1, None)
out["mse_int_self"] = run("aclnnMseLoss", T([2, 3], 3).h, a3.h, 1, o0.h)
out["mse_int_both"] = run("aclnnMseLoss", T([2, 3], 3).h, T([2, 3], 3).h, 1, o0.h)
out["mse_f64_out"] = run("aclnnMseLoss", a3.h, a3.h, 1, T([], 11).h)
out["mse_reduction_3"] = run("aclnnMseLoss", a3.h, a3.h, 3, o0.h)
out["mse_reduction_neg"] = run("aclnnMseLoss", a3.h, a3.h, -1, o0.h)
out["mse_mean_out_1d"] = run("aclnnMseLoss", a3.h, a3.h, 1, T([1], 0).h)
out["mse_none_out_shape"] = run("aclnnMseLoss", a3.h, a3.h, 0, T([3, 2], 0).h)
out["mse_no_broadcast"] = run("aclnnMseLoss", a3.h, T([4], 0).h, 1, o0.h)
out["mse_9_dims"] = run("aclnnMseLoss", T([1] * 9, 0).h, T([1] * 9, 0).h, 1, o0.h)
# ---- aclnnMseLossBackward
for red in (0, 1, 2):
    o = T(shape, 0)
    out[f"mseb_f32_scalar_grad_{red}"] = result("aclnnMseLossBackward", o, T([], 0, g.ravel()[:1]).h,
                                                T(shape, 0, x).h, T(shape, 0, y).h, red, o.h)
o = T(shape, 0)
out["mseb_f32_full_grad_none"] = result("aclnnMseLossBackward", o, T(shape, 0, g).h, T(shape, 0, x).h,
                                        T(shape, 0, y).h, 0, o.h)
o = T(shape, 1)
out["mseb_f16_mean"] = result("aclnnMseLossBackward", o, T([], 1, g.ravel()[:1]).h, T(shape, 1, x).h,
                              T(shape, 1, y).h, 1, o.h)
o = T([2, 4, 3], 0)
out["mseb_broadcast_mean"] = result("aclnnMseLossBackward", o, T([], 0, [1.0]).h, T([2, 1, 3], 0, x.ravel()[:6]).h,
                                    T([4, 3], 0, y.ravel()[:12]).h, 1, o.h)
o6 = T([2, 3], 0)
out["mseb_null_grad"] = run("aclnnMseLossBackward", None, a3.h, a3.h, 1, o6.h)
out["mseb_null_target"] = run("aclnnMseLossBackward", o0.h, a3.h, None, 1, o6.h)
out["mseb_grad_dtype"] = run("aclnnMseLossBackward", T([], 1).h, a3.h, a3.h, 1, o6.h)
out["mseb_target_dtype"] = run("aclnnMseLossBackward", o0.h, a3.h, T([2, 3], 1).h, 1, o6.h)
out["mseb_int_self"] = run("aclnnMseLossBackward", T([], 3).h, T([2, 3], 3).h, T([2, 3], 3).h, 1, o6.h)
out["mseb_int_out"] = run("aclnnMseLossBackward", o0.h, a3.h, a3.h, 1, T([2, 3], 3).h)
out["mseb_reduction_5"] = run("aclnnMseLossBackward", o0.h, a3.h, a3.h, 5, o6.h)
out["mseb_out_shape"] = run("aclnnMseLossBackward", o0.h, a3.h, a3.h, 1, T([3, 2], 0).h)
out["mseb_no_broadcast"] = run("aclnnMseLossBackward", o0.h, a3.h, T([4], 0).h, 1, o6.h)
out["mseb_empty"] = run("aclnnMseLossBackward", o0.h, T([0, 3], 0).h, T([0, 3], 0).h, 1, T([0, 3], 0).h)
# ---- aclnnPowTensorScalar
for key, e, edt in (("int2", 2, 9), ("double1", 1.0, 11), ("double0_5", 0.5, 11), ("double2_5", 2.5, 11),
                    ("float3", 3.0, 0), ("double_neg1", -1.0, 11)):
    o = T(shape, 0)
    out[f"pow_f32_{key}"] = result("aclnnPowTensorScalar", o, T(shape, 0, np.abs(x)).h, scalar(e, edt), o.h)
o = T(shape, 1)
out["pow_f16_int2"] = result("aclnnPowTensorScalar", o, T(shape, 1, x).h, scalar(2, 9), o.h)
o = T(shape, 1)
out["pow_f16_double0_3"] = result("aclnnPowTensorScalar", o, T(shape, 1, np.abs(x)).h, scalar(0.3, 11), o.h)
o = T([5], 3)
out["pow_i32_int3"] = result("aclnnPowTensorScalar", o, T([5], 3, [-3, -1, 0, 2, 1291]).h, scalar(3, 9), o.h)
o = T([4], 0)
out["pow_i32_float0_5"] = result("aclnnPowTensorScalar", o, T([4], 3, [0, 1, 4, 9]).h, scalar(0.5, 0), o.h)
o = T([3], 9)
out["pow_bool_int2"] = result("aclnnPowTensorScalar", o, T([3], 12, [True, False, True]).h, scalar(2, 9), o.h)
out["pow_empty"] = run("aclnnPowTensorScalar", T([0, 2], 0).h, scalar(2, 9), T([0, 2], 0).h)
out["pow_null_self"] = run("aclnnPowTensorScalar", None, scalar(2, 9), o6.h)
out["pow_null_exponent"] = run("aclnnPowTensorScalar", a3.h, None, o6.h)
out["pow_bool_bool"] = run("aclnnPowTensorScalar", T([3], 12).h, scalar(True, 12), T([3], 12).h)
out["pow_out_int"] = run("aclnnPowTensorScalar", a3.h, scalar(2, 9), T([2, 3], 3).h)
out["pow_uint32_self"] = run("aclnnPowTensorScalar", T([2, 3], 8).h, scalar(2, 9), o6.h)
out["pow_out_shape"] = run("aclnnPowTensorScalar", a3.h, scalar(2, 9), T([3, 2], 0).h)
out["pow_9_dims"] = run("aclnnPowTensorScalar", T([1] * 9, 0).h, scalar(2, 9), T([1] * 9, 0).h)
# ---- aclnnMean
o = T([], 0)
out["mean_f32_all"] = result("aclnnMean", o, T(shape, 0, x).h, dims(0, 1, 2, 3, 4), False, 0, o.h)
out["mean_f32_empty_dim"] = result("aclnnMean", o, T(shape, 0, x).h, dims(), False, 0, o.h)
o = T([shape[0], 1, shape[2], shape[3], 1], 0)
out["mean_f32_dims_keep"] = result("aclnnMean", o, T(shape, 0, x).h, dims(1, -1), True, 0, o.h)
o = T([1] * 5, 0)
out["mean_f32_all_keep"] = result("aclnnMean", o, T(shape, 0, x).h, dims(), True, 0, o.h)
o = T([], 0)  # keepDim's [1,1,1,1,1] and a 0-d out: one element each (CheckShapeAndScalarSame)
out["mean_keep_out_0d"] = result("aclnnMean", o, T(shape, 0, x).h, dims(), True, 0, o.h)
o = T([], 1)
out["mean_f16"] = result("aclnnMean", o, T(shape, 1, x).h, dims(), False, 1, o.h)
o = T([], 0)
out["mean_f16_dtype_f32"] = result("aclnnMean", o, T(shape, 1, x).h, dims(), False, 0, o.h)
o = T([2], 3)
out["mean_i32"] = result("aclnnMean", o, T([2, 3], 3, [1, 2, 2, -1, -2, -2]).h, dims(1), False, 3, o.h)
o = T([], 0)
out["mean_empty"] = result("aclnnMean", o, T([0, 3], 0).h, dims(), False, 0, o.h)
o = T([], 0)
out["mean_0d"] = result("aclnnMean", o, T([], 0, [2.5]).h, dims(), False, 0, o.h)
out["mean_null_dim"] = run("aclnnMean", a3.h, None, False, 0, o0.h)
out["mean_null_out"] = run("aclnnMean", a3.h, dims(), False, 0, None)
out["mean_bool_self"] = run("aclnnMean", T([2, 3], 12).h, dims(), False, 0, o0.h)
out["mean_dtype_to_int_out"] = run("aclnnMean", a3.h, dims(), False, 0, T([], 3).h)
out["mean_self_to_int_dtype"] = run("aclnnMean", a3.h, dims(), False, 3, T([], 3).h)
out["mean_dim_range"] = run("aclnnMean", a3.h, dims(2), False, 0, T([2], 0).h)
out["mean_dim_repeat"] = run("aclnnMean", a3.h, dims(1, -1), False, 0, T([2], 0).h)
out["mean_out_shape"] = run("aclnnMean", a3.h, dims(1), True, 0, T([2], 0).h)
out["mean_9_dims"] = run("aclnnMean", T([1] * 9, 0).h, dims(), False, 0, o0.h)
print(json.dumps(out))
"""

SHAPE = (2, 3, 2, 2, 3)


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    """The inputs: x and y of SHAPE, g the gradient values (float32, also exact in float16)."""
    rng = np.random.default_rng(38)
    x, y, g = (rng.standard_normal(SHAPE).astype(np.float16).astype(np.float32) for _ in range(3))
    return {"x": x, "y": y, "g": g}


@pytest.fixture(scope="module")
def out(data: dict[str, np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The child's record of every scenario."""
    arg = json.dumps({k: v.tolist() for k, v in data.items()})
    return dict(run_raw(RAW, tmp_path_factory.mktemp("loss"), arg))


def _ok(rec: list[Any]) -> np.ndarray:
    assert rec[:2] == [0, 0], rec
    return np.array(rec[2], dtype=np.float64)


def _refused(rec: list[Any], code: int, *words: str) -> None:
    assert rec[0] == code, rec
    for w in words:
        assert w in rec[1], rec


def _f16(v: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(v, dtype=np.float32).astype(np.float16).astype(np.float64))


def test_mse_loss_values(out: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    x, y = data["x"], data["y"]
    sq = ((x - y) ** 2).astype(np.float32)
    np.testing.assert_allclose(_ok(out["mse_f32_0"]), sq.ravel(), rtol=1e-6)
    np.testing.assert_allclose(_ok(out["mse_f32_1"]), [sq.astype(np.float64).mean()], rtol=1e-6)
    np.testing.assert_allclose(_ok(out["mse_f32_2"]), [sq.astype(np.float64).sum()], rtol=1e-6)
    # float16: computed in float32, rounded once to float16
    assert _ok(out["mse_f16_mean"]).tolist() == _f16(np.float32(sq.astype(np.float64).sum()) *
                                                     np.float32(1 / sq.size)).tolist()
    # float16 with float32 promotes to float32
    np.testing.assert_allclose(_ok(out["mse_f16_f32_mean"]), [sq.astype(np.float64).mean()], rtol=1e-6)
    a = x.ravel()[:6].reshape(2, 1, 3)
    b = y.ravel()[:12].reshape(4, 3)
    np.testing.assert_allclose(_ok(out["mse_broadcast_none"]), ((a - b) ** 2).ravel(), rtol=1e-6)
    assert np.isnan(_ok(out["mse_empty_mean"])[0])
    assert _ok(out["mse_empty_sum"]).tolist() == [0.0]


def test_mse_loss_refusals(out: dict[str, Any]) -> None:
    _refused(out["mse_null_self"], 161001, "self is NULL")
    _refused(out["mse_null_out"], 161001, "out is NULL")
    _refused(out["mse_int_self"], 161002, "self has dtype int32")
    _refused(out["mse_int_both"], 161002, "promote to int32")
    _refused(out["mse_f64_out"], 161002, "out has dtype float64")
    _refused(out["mse_reduction_3"], 161002, "reduction is 3")
    _refused(out["mse_reduction_neg"], 161002, "reduction is -1")
    _refused(out["mse_mean_out_1d"], 161002, "0-d out")
    _refused(out["mse_none_out_shape"], 161002, "broadcast shape [2,3]")
    _refused(out["mse_no_broadcast"], 161002, "do not broadcast")
    _refused(out["mse_9_dims"], 161002, "more than 8")


def test_mse_loss_backward_values(out: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    x, y, g = data["x"], data["y"], data["g"]
    g0 = np.float32(g.ravel()[0])
    n = np.float32(x.size)
    for red, cof in ((0, np.float32(2)), (1, np.float32(1) / n * np.float32(2)), (2, np.float32(2))):
        want = ((x - y) * cof * g0).astype(np.float32)  # float32 steps, as the kernel
        assert _ok(out[f"mseb_f32_scalar_grad_{red}"]).tolist() == want.ravel().astype(np.float64).tolist(), red
    np.testing.assert_allclose(_ok(out["mseb_f32_full_grad_none"]), (2 * (x - y) * g).ravel(), rtol=1e-6)
    cof = np.float32(1) / n * np.float32(2)
    assert _ok(out["mseb_f16_mean"]).tolist() == _f16((x - y) * cof * g0).ravel().tolist()
    a = x.ravel()[:6].reshape(2, 1, 3)
    b = y.ravel()[:12].reshape(4, 3)
    np.testing.assert_allclose(_ok(out["mseb_broadcast_mean"]), (2 / 6 * (a - b)).ravel(), rtol=1e-6)  # n = self's 6


def test_mse_loss_backward_refusals(out: dict[str, Any]) -> None:
    _refused(out["mseb_null_grad"], 161001, "gradOutput is NULL")
    _refused(out["mseb_null_target"], 161001, "target is NULL")
    _refused(out["mseb_grad_dtype"], 161002, "gradOutput has dtype float16", "must be the same")
    _refused(out["mseb_target_dtype"], 161002, "target has dtype float16")
    _refused(out["mseb_int_self"], 161002, "self has dtype int32")
    _refused(out["mseb_int_out"], 161002, "out has dtype int32")
    _refused(out["mseb_reduction_5"], 161002, "reduction is 5")
    _refused(out["mseb_out_shape"], 161002, "out has shape [3,2]")
    _refused(out["mseb_no_broadcast"], 161002, "do not broadcast")
    assert out["mseb_empty"] == [0, 0]


def test_pow_tensor_scalar_values(out: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    ax = np.abs(data["x"]).ravel()
    assert _ok(out["pow_f32_int2"]).tolist() == (ax * ax).astype(np.float64).tolist()  # Square: one rounding
    assert _ok(out["pow_f32_double1"]).tolist() == ax.astype(np.float64).tolist()  # no kernel
    np.testing.assert_allclose(_ok(out["pow_f32_double0_5"]), np.sqrt(ax), rtol=1e-6)
    np.testing.assert_allclose(_ok(out["pow_f32_double2_5"]), ax.astype(np.float64) ** 2.5, rtol=1e-6)
    np.testing.assert_allclose(_ok(out["pow_f32_float3"]), ax.astype(np.float64) ** 3, rtol=1e-6)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(_ok(out["pow_f32_double_neg1"]), 1 / ax.astype(np.float64), rtol=1e-6)
    x = data["x"].ravel()
    assert _ok(out["pow_f16_int2"]).tolist() == _f16(x * x).tolist()
    # float16 computes with the exponent in float16 (ConvertToTensor): 0.3 -> 0.2998046875
    e16 = float(np.float16(0.3))
    assert e16 != 0.3
    assert _ok(out["pow_f16_double0_3"]).tolist() == _f16(np.abs(x).astype(np.float64) ** e16).tolist()
    wrapped = (np.array([1291], dtype=np.int64) ** 3).astype(np.int32)  # 2151685171 wraps at int32
    assert _ok(out["pow_i32_int3"]).tolist() == [-27, -1, 0, 8, float(wrapped[0])]
    assert _ok(out["pow_i32_float0_5"]).tolist() == [0, 1, 2, 3]  # promoted to float32
    assert _ok(out["pow_bool_int2"]).tolist() == [1, 0, 1]  # bool with an int64 exponent: int64
    assert out["pow_empty"] == [0, 0]


def test_pow_tensor_scalar_refusals(out: dict[str, Any]) -> None:
    _refused(out["pow_null_self"], 161001, "self is NULL")
    _refused(out["pow_null_exponent"], 161001, "exponent is NULL")
    _refused(out["pow_bool_bool"], 161002, "both bool")
    _refused(out["pow_out_int"], 161002, "out's dtype int32", "no floating to integral")
    _refused(out["pow_uint32_self"], 161002, "self has dtype 8")
    _refused(out["pow_out_shape"], 161002, "not self's")
    _refused(out["pow_9_dims"], 161002, "more than 8")


def test_mean_values(out: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    x = data["x"].astype(np.float64)
    for key in ("mean_f32_all", "mean_f32_empty_dim", "mean_f32_all_keep", "mean_keep_out_0d", "mean_f16_dtype_f32"):
        np.testing.assert_allclose(_ok(out[key]), [x.mean()], rtol=1e-6, err_msg=key)
    np.testing.assert_allclose(_ok(out["mean_f32_dims_keep"]), x.mean(axis=(1, 4)).ravel(), rtol=1e-6)
    # float16: float32 inside, times float32(1/n), rounded to float16
    assert _ok(out["mean_f16"]).tolist() == _f16(np.float32(x.sum()) * np.float32(1 / x.size)).tolist()
    assert _ok(out["mean_i32"]).tolist() == [1, -1]  # 5/3 and -5/3 truncated toward zero
    assert np.isnan(_ok(out["mean_empty"])[0])
    assert _ok(out["mean_0d"]).tolist() == [2.5]


def test_mean_refusals(out: dict[str, Any]) -> None:
    _refused(out["mean_null_dim"], 161001, "dim is NULL")
    _refused(out["mean_null_out"], 161001, "out is NULL")
    _refused(out["mean_bool_self"], 161002, "self has dtype bool")
    _refused(out["mean_dtype_to_int_out"], 161002, "out's dtype int32", "no floating to integral")
    _refused(out["mean_self_to_int_dtype"], 161002, "dtype int32", "no floating to integral")
    _refused(out["mean_dim_range"], 161002, "outside [-2, 2)")
    _refused(out["mean_dim_repeat"], 161002, "twice")
    _refused(out["mean_out_shape"], 161002, "reduced shape [2,1]")
    _refused(out["mean_9_dims"], 161002, "more than 8")
