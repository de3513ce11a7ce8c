"""The functions the simulator grew for torch_npu (src/rt_torch_npu.c, nnopbase_scalar.c, ops/inplace_copy.c,
ops/inplace_fill_scalar.c (fill and zero), ops/mul_add.c, ops/reduce_sum.c), called raw through ctypes in a child
process: their rules (docs/fidelity.md, "torch_npu") and their answers.  The end-to-end use by torch_npu itself
is tests/torch_npu."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.sim._raw import PRELUDE, RUN_OP, run_raw

REPO = Path(__file__).resolve().parents[2]

RAW = PRELUDE + RUN_OP + r"""
for name in ("aclnnInplaceFillScalarGetWorkspaceSize", "aclnnInplaceCopyGetWorkspaceSize"):
    getattr(op, name).argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_uint64), C.POINTER(C.c_void_p)]
op.aclnnReduceSumGetWorkspaceSize.argtypes = [C.c_void_p, C.c_void_p, C.c_bool, C.c_int, C.c_void_p,
                                              C.POINTER(C.c_uint64), C.POINTER(C.c_void_p)]
op.aclnnInplaceZeroGetWorkspaceSize.argtypes = [C.c_void_p, C.POINTER(C.c_uint64), C.POINTER(C.c_void_p)]
for name, n in (("aclnnMul", 3), ("aclnnMuls", 3), ("aclnnAdd", 4), ("aclnnAdds", 4)):
    getattr(op, name + "GetWorkspaceSize").argtypes = [C.c_void_p] * n + [C.POINTER(C.c_uint64),
                                                                          C.POINTER(C.c_void_p)]
for name in ("aclnnInplaceFillScalar", "aclnnInplaceCopy", "aclnnReduceSum", "aclnnInplaceZero", "aclnnMul",
             "aclnnMuls", "aclnnAdd", "aclnnAdds"):
    getattr(op, name).argtypes = [C.c_void_p, C.c_uint64, C.c_void_p, C.c_void_p]
out = {}
n = C.c_uint32(0)
out["count_before_init"] = [rt.aclrtGetDeviceCount(C.byref(n)), n.value]
rt.aclInit(None); rt.aclrtSetDevice(0)
s = C.c_void_p()
out["stream_cfg"] = [rt.aclrtCreateStreamWithConfig(C.byref(s), 0, 3), rt.aclrtDestroyStream(s)]
out["stream_cfg_bad"] = [rt.aclrtCreateStreamWithConfig(C.byref(s), 0, 0x100), msg()]
fs = C.c_void_p(); rt.aclrtCreateStream(C.byref(fs))
out["failure_mode"] = [rt.aclrtSetStreamFailureMode(fs, C.c_uint64(0)), rt.aclrtSetStreamFailureMode(fs, C.c_uint64(1)),
                       rt.aclrtSetStreamFailureMode(fs, C.c_uint64(1)), rt.aclrtSetStreamFailureMode(fs, C.c_uint64(0)),
                       msg(), rt.aclrtDestroyStream(fs)]
out["sat"] = [rt.aclrtSetDeviceSatMode(0), rt.aclrtSetDeviceSatMode(1), rt.aclrtSetDeviceSatMode(2), msg()]
act = C.c_uint64(0)
out["timeout"] = [rt.aclrtSetOpExecuteTimeOutV2(C.c_uint64(1234), C.byref(act)), act.value,
                  rt.aclrtSetOpExecuteTimeOutV2(C.c_uint64(1), None)]
v = C.c_int64(7)
out["sysopt"] = [rt.aclrtGetSysParamOpt(0, C.byref(v)), v.value, rt.aclrtSetSysParamOpt(0, C.c_int64(1)),
                 rt.aclrtGetSysParamOpt(0, C.byref(v)), v.value, rt.aclrtGetSysParamOpt(4, C.byref(v)),
                 rt.aclrtCtxSetSysParamOpt(3, C.c_int64(0)), rt.aclrtCtxSetSysParamOpt(0, C.c_int64(1))]
out["peek"] = [rt.aclrtPeekAtLastError(0), rt.aclrtPeekAtLastError(1)]
out["not_supported"] = [rt.aclrtMapMem(None, C.c_size_t(0), C.c_size_t(0), None, C.c_uint64(0)), msg()]
rt.aclCreateTensorDesc.restype = C.c_void_p
out["tensor_desc"] = rt.aclCreateTensorDesc(0, 0, None, 2)

# scalars
f = C.c_float(2.5)
sc = nn.aclCreateScalar(C.byref(f), 0)
out["scalar"] = [bool(sc), nn.aclDestroyScalar(sc), nn.aclDestroyScalar(sc), nn.aclCreateScalar(None, 0) or 0]

def dev(nbytes):
    p = C.c_void_p(); assert rt.aclrtMalloc(C.byref(p), C.c_size_t(nbytes), 0) == 0; return p
def tensor(dims, dtype, p, strides=None, storage=None):
    d = (C.c_int64 * len(dims))(*dims)
    st = (C.c_int64 * len(dims))(*(strides or [int(x) for x in _rowmajor(dims)]))
    n = 1
    for x in dims: n *= x
    stor = (C.c_int64 * 1)(storage or max(n, 1))
    return nn.aclCreateTensor(d, len(dims), dtype, st, 0, 2, stor, 1, p)
def _rowmajor(dims):
    acc, out = 1, []
    for x in reversed(dims): out.append(acc); acc *= x
    return list(reversed(out))
def host(p, nbytes):
    b = (C.c_char * nbytes)(); rt.aclrtMemcpy(b, C.c_size_t(nbytes), p, C.c_size_t(nbytes), 2); return bytes(b)
def put(p, data):
    rt.aclrtMemcpy(p, C.c_size_t(len(data)), data, C.c_size_t(len(data)), 1)

a = dev(64); b = dev(64); c = dev(64)
ta = tensor([2, 3], 0, a)
sc = nn.aclCreateScalar(C.byref(C.c_float(1.5)), 0)
out["fill"] = run("aclnnInplaceFillScalar", ta, sc) + [list(struct.unpack("6f", host(a, 24)))]
th = tensor([2, 3], 1, b)  # float16 <- float32
out["copy_cast"] = run("aclnnInplaceCopy", th, ta) + [list(struct.unpack("6e", host(b, 12)))]
put(c, struct.pack("3f", 1, 2, 4))
row = tensor([3], 0, c)
out["copy_broadcast"] = run("aclnnInplaceCopy", ta, row) + [list(struct.unpack("6f", host(a, 24)))]
tbad = tensor([2], 0, c)
out["copy_bad_shape"] = run("aclnnInplaceCopy", ta, tbad)
d1 = nn.aclCreateIntArray((C.c_int64 * 1)(1), 1)
d = dev(64); td = tensor([2], 0, d)
out["sum_dim1"] = run("aclnnReduceSum", ta, d1, False, 0, td) + [list(struct.unpack("2f", host(d, 8)))]
empty = nn.aclCreateIntArray(None, 0)
t0 = tensor([], 0, d)
out["sum_all"] = run("aclnnReduceSum", ta, empty, False, 0, t0) + [struct.unpack("f", host(d, 4))[0]]
out["sum_bad_out"] = run("aclnnReduceSum", ta, d1, True, 0, td)
out["sum_bad_dtype"] = run("aclnnReduceSum", ta, d1, False, 1, td)
dd = nn.aclCreateIntArray((C.c_int64 * 2)(1, -1), 2)
out["sum_repeat"] = run("aclnnReduceSum", ta, dd, False, 0, t0)
out["zero"] = run("aclnnInplaceZero", ta) + [list(struct.unpack("6f", host(a, 24)))]
put(a, struct.pack("6f", 1, 2, 3, 4, 5, 6))
every_other = tensor([3], 0, a, strides=[2], storage=6)  # a view: only its elements become 0
out["zero_view"] = run("aclnnInplaceZero", every_other) + [list(struct.unpack("6f", host(a, 24)))]
out["zero_null"] = run("aclnnInplaceZero", None)
out["zero_bad_dtype"] = run("aclnnInplaceZero", tensor([2], 8, d))  # UINT32: not in its dtype list
# tensor times or plus a scalar or a (broadcast) tensor, into out
def scalar(v, dtype=0):  # float32, float64 (11: what torch_npu passes for a Python float), else an int64's bytes
    return nn.aclCreateScalar(C.byref(C.c_float(v) if dtype == 0 else C.c_double(v) if dtype == 11 else
                                      C.c_int64(v)), dtype)
def floats(p, n=6):
    return list(struct.unpack(f"{n}f", host(p, 4 * n)))
put(a, struct.pack("6f", 1, 2, 3, 4, 5, 6))
put(c, struct.pack("3f", 1, 2, 4))
tb = tensor([2, 3], 0, b)
out["muls"] = run("aclnnMuls", ta, scalar(3.0), tb) + [floats(b)]
out["adds"] = run("aclnnAdds", ta, scalar(1.5), scalar(2, 9), tb) + [floats(b)]  # alpha an int64
out["mul"] = run("aclnnMul", ta, row, tb) + [floats(b)]  # row broadcasts over the two rows
out["add"] = run("aclnnAdd", ta, row, scalar(-1.0), tb) + [floats(b)]
out["mul_null_out"] = run("aclnnMuls", ta, scalar(3.0), None)
out["mul_bad_broadcast"] = run("aclnnMul", ta, tbad, tb)
# type promotion (CANN on Atlas A2/A3): inputs cast to the compute dtype, the result cast to out's
e = dev(64); i = dev(64); o = dev(64)
out["muls_out_dtype"] = run("aclnnMuls", ta, scalar(3.0), tensor([2, 3], 1, b)) + [
    list(struct.unpack("6e", host(b, 12)))]  # float32 computed, cast into a float16 out
put(e, struct.pack("3e", 0.5, 1.5, -2))
out["mul_other_dtype"] = run("aclnnMul", ta, tensor([3], 1, e), tb) + [floats(b)]  # float32 x a float16 row
put(i, struct.pack("2i", 3, -5))
out["muls_int_self_float_scalar"] = run("aclnnMuls", tensor([2], 3, i), scalar(0.5, 11), tensor([2], 0, o)) + [
    floats(o, 2)]  # int32 x a double: float32 (out float32), as torch_npu's int_tensor * 0.5
out["adds_int_self_float_scalar"] = run("aclnnAdds", tensor([2], 3, i), scalar(0.5, 11), scalar(1, 9),
                                        tensor([2], 0, o)) + [floats(o, 2)]
put(e, struct.pack("2e", 3.0, -7.0))
out["muls_half_scalar_rounded"] = run("aclnnMuls", tensor([2], 1, e), scalar(0.1, 11), tensor([2], 1, o)) + [
    list(struct.unpack("2e", host(o, 4)))]  # float16 self: the scalar is cast to float16 first
put(i, struct.pack("2i", 4, -6))
out["muls_int_out_no_check"] = run("aclnnMuls", tensor([2], 3, i), scalar(0.5), tensor([2], 3, o)) + [
    list(struct.unpack("2i", host(o, 8)))]  # float32 computed into int32: A2/A3 Muls checks no cast
out["mul_out_cast"] = run("aclnnMul", ta, row, tensor([2, 3], 3, o))
out["add_alpha_cast"] = run("aclnnAdd", tensor([2], 3, i), tensor([2], 3, i), scalar(0.5), tensor([2], 3, o))
put(e, bytes([1, 0]))
out["adds_bool_true"] = run("aclnnAdds", tensor([2], 12, e), scalar(1, 12), scalar(1, 12), tensor([2], 3, o)) + [
    list(struct.unpack("2i", host(o, 8)))]  # computed in bool: True + True is 1
out["adds_bool_alpha"] = run("aclnnAdds", tensor([2], 12, e), scalar(1, 12), scalar(1.5), tensor([2], 12, o))
out["adds_out_bool"] = run("aclnnAdds", tensor([2], 3, i), scalar(1, 9), scalar(1, 9), tensor([2], 12, o))
# counted and fault-injectable like every other simulated function: one modelled, one not supported
rt.cannsimCallCount.restype = C.c_int64
counted = [rt.cannsimCallCount(n) for n in (b"aclrtSetDeviceSatMode", b"aclrtMapMem")]
rt.cannsimSetFault(b"aclrtSetDeviceSatMode:1:107000,aclrtMapMem:1:507899")
out["counted_faulted"] = counted + [rt.aclrtSetDeviceSatMode(0), msg(),
                                    rt.aclrtMapMem(None, C.c_size_t(0), C.c_size_t(0), None, C.c_uint64(0)),
                                    rt.aclrtSetDeviceSatMode(0)]
rt.cannsimSetFault(None)
print(json.dumps(out))
"""


def test_the_functions_torch_npu_needs(tmp_path: Path) -> None:
    out = run_raw(RAW, tmp_path)
    assert out["count_before_init"] == [0, 2]  # CANN answers before aclInit (RT device.cpp)
    assert out["stream_cfg"] == [0, 0]
    assert out["stream_cfg_bad"][0] == 100000 and "0x100" in out["stream_cfg_bad"][1]
    # continue, stop, stop again; stop -> continue is 207000 (RT api_impl.cc ApiImpl::StreamSetMode)
    assert out["failure_mode"][:4] == [0, 0, 0, 207000] and out["failure_mode"][5] == 0
    assert "ACL_STOP_ON_FAILURE" in out["failure_mode"][4] and "cannot be changed back" in out["failure_mode"][4]
    assert out["sat"][:3] == [0, 0, 100000] and "mode 2" in out["sat"][3]
    assert out["timeout"] == [0, 1234, 100000]
    assert out["sysopt"] == [0, 0, 0, 0, 1, 100000, 100000, 0]
    assert out["peek"] == [0, 100000]
    assert out["not_supported"][0] == 207000 and "not supported" in out["not_supported"][1]
    assert out["tensor_desc"] is None
    assert out["scalar"][:3] == [True, 0, 161002] and out["scalar"][3] == 0
    assert out["fill"] == [0, 0, [1.5] * 6]
    assert out["copy_cast"] == [0, 0, [1.5] * 6]
    assert out["copy_broadcast"] == [0, 0, [1.0, 2.0, 4.0, 1.0, 2.0, 4.0]]
    assert out["copy_bad_shape"][0] == 161002 and "broadcast" in out["copy_bad_shape"][1]
    assert out["sum_dim1"] == [0, 0, [7.0, 7.0]]
    assert out["sum_all"] == [0, 0, 14.0]
    assert out["sum_bad_out"][0] == 161002 and "reduced shape" in out["sum_bad_out"][1]
    assert out["sum_bad_dtype"][0] == 161002 and "must be the same" in out["sum_bad_dtype"][1]
    assert out["sum_repeat"][0] == 161002 and "twice" in out["sum_repeat"][1]
    assert out["zero"] == [0, 0, [0.0] * 6]
    assert out["zero_view"] == [0, 0, [0.0, 2.0, 0.0, 4.0, 0.0, 6.0]]
    assert out["zero_null"][0] == 161001 and "selfRef is NULL" in out["zero_null"][1]
    assert out["zero_bad_dtype"][0] == 161002 and "dtype 8" in out["zero_bad_dtype"][1]
    assert out["muls"] == [0, 0, [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]]
    assert out["adds"] == [0, 0, [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]]
    assert out["mul"] == [0, 0, [1.0, 4.0, 12.0, 4.0, 10.0, 24.0]]
    assert out["add"] == [0, 0, [0.0, 0.0, -1.0, 3.0, 3.0, 2.0]]
    assert out["mul_null_out"][0] == 161001 and "out is NULL" in out["mul_null_out"][1]
    assert out["mul_bad_broadcast"][0] == 161002 and "broadcast" in out["mul_bad_broadcast"][1]
    assert out["muls_out_dtype"] == [0, 0, [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]]
    assert out["mul_other_dtype"] == [0, 0, [0.5, 3.0, -6.0, 2.0, 7.5, -12.0]]
    assert out["muls_int_self_float_scalar"] == [0, 0, [1.5, -2.5]]
    assert out["adds_int_self_float_scalar"] == [0, 0, [3.5, -4.5]]
    half_tenth = float(np.float16(0.1))  # 0.0999755859375, not 0.1
    assert out["muls_half_scalar_rounded"] == [0, 0, [float(np.float16(3 * half_tenth)),
                                                      float(np.float16(-7 * half_tenth))]]
    assert float(np.float16(3 * half_tenth)) != float(np.float16(np.float32(3) * np.float32(0.1)))  # it shows
    assert out["muls_int_out_no_check"] == [0, 0, [2, -3]]
    assert out["mul_out_cast"][0] == 161002, out["mul_out_cast"]
    assert out["mul_out_cast"][1].startswith("aclnnMulGetWorkspaceSize: out has dtype int32, which the promoted "
                                             "dtype float32 cannot be cast to (no floating to integral)")
    assert out["add_alpha_cast"][0] == 161002
    assert out["add_alpha_cast"][1].startswith("aclnnAddGetWorkspaceSize: alpha has dtype float32, which cannot be "
                                               "cast to the promoted dtype int32 (no floating to integral)")
    assert out["adds_bool_true"] == [0, 0, [1, 1]]
    assert out["adds_bool_alpha"][0] == 161002
    assert out["adds_bool_alpha"][1].startswith("aclnnAddsGetWorkspaceSize: alpha has dtype float32, which cannot "
                                                "be cast to the promoted dtype bool (a bool sum takes an integral")
    assert out["adds_out_bool"][0] == 161002
    assert out["adds_out_bool"][1].startswith("aclnnAddsGetWorkspaceSize: out has dtype bool, which the promoted "
                                              "dtype int32 cannot be cast to (no non-bool to bool)")
    assert out["counted_faulted"][:3] == [3, 1, 107000] and "injected fault" in out["counted_faulted"][3]
    assert out["counted_faulted"][4:] == [507899, 0]
