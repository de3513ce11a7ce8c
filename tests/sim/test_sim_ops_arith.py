"""The simulated binary arithmetic operators (kernels/arith.c; ops/mul_add.c, ops/sub.c, ops/div.c) called raw
through ctypes in a child process: values, broadcasting, alpha, the in-place forms' cast back to selfRef's dtype,
and each refusal with its code (docs/fidelity.md, the arithmetic rows; docs/cann-abi.md §9.3)."""

from __future__ import annotations

from pathlib import Path

from tests.sim._raw import PRELUDE, run_raw

RAW = PRELUDE + r"""
NARGS = {"Mul": 3, "Muls": 3, "Add": 4, "Adds": 4, "Sub": 4, "Subs": 4, "Div": 3, "Divs": 3,
         "InplaceMul": 2, "InplaceMuls": 2, "InplaceAdd": 3, "InplaceAdds": 3, "InplaceSub": 3, "InplaceSubs": 3,
         "InplaceDiv": 2, "InplaceDivs": 2}
for name, n in NARGS.items():
    getattr(op, "aclnn" + name + "GetWorkspaceSize").argtypes = [C.c_void_p] * n + [C.POINTER(C.c_uint64),
                                                                                   C.POINTER(C.c_void_p)]
    getattr(op, "aclnn" + name).argtypes = [C.c_void_p, C.c_uint64, C.c_void_p, C.c_void_p]
rt.aclInit(None); rt.aclrtSetDevice(0)
def dev(nbytes):
    p = C.c_void_p(); assert rt.aclrtMalloc(C.byref(p), C.c_size_t(nbytes), 0) == 0; return p
def tensor(dims, dtype, p):
    acc, st = 1, []
    for x in reversed(dims): st.append(acc); acc *= x
    d = (C.c_int64 * len(dims))(*dims); s = (C.c_int64 * len(dims))(*reversed(st))
    return nn.aclCreateTensor(d, len(dims), dtype, s, 0, 2, (C.c_int64 * 1)(max(acc, 1)), 1, p)
def run(name, *args):
    ws = C.c_uint64(0); ex = C.c_void_p()
    rc = getattr(op, "aclnn" + name + "GetWorkspaceSize")(*args, C.byref(ws), C.byref(ex))
    if rc: return [rc, msg()]
    return [getattr(op, "aclnn" + name)(None, 0, ex, None), rt.aclrtSynchronizeStream(None)]
def host(p, nbytes):
    b = (C.c_char * nbytes)(); rt.aclrtMemcpy(b, C.c_size_t(nbytes), p, C.c_size_t(nbytes), 2); return bytes(b)
def put(p, data):
    rt.aclrtMemcpy(p, C.c_size_t(len(data)), data, C.c_size_t(len(data)), 1)
FMT = {0: "f", 1: "e", 3: "i", 12: "?"}
SIZE = {0: 4, 1: 2, 3: 4, 12: 1}
def arr(dims, dtype, values):
    p = dev(64); put(p, struct.pack(f"{len(values)}{FMT[dtype]}", *values)); return tensor(dims, dtype, p), p
def get(p, n, dtype):
    return list(struct.unpack(f"{n}{FMT[dtype]}", host(p, n * SIZE[dtype])))
def scalar(v, dtype=11):  # float64 (what torch_npu passes for a Python float), float32 (0), int64 (9), bool (12)
    box = {0: C.c_float, 11: C.c_double, 9: C.c_int64, 12: C.c_bool}[dtype](v)
    return nn.aclCreateScalar(C.byref(box), dtype)
out = {}
a, pa = arr([2, 3], 0, [1, 2, 3, 4, 5, 6])
row, prow = arr([3], 0, [1, 2, 4])
o = dev(64); to = tensor([2, 3], 0, o)
one = scalar(1, 9)
out["sub"] = run("Sub", a, row, one, to) + [get(o, 6, 0)]
out["sub_alpha"] = run("Sub", a, row, scalar(0.5), to) + [get(o, 6, 0)]
out["subs"] = run("Subs", a, scalar(1.5), scalar(2, 9), to) + [get(o, 6, 0)]
out["div"] = run("Div", a, row, to) + [get(o, 6, 0)]
out["divs"] = run("Divs", a, scalar(2, 9), to) + [get(o, 6, 0)]
z, pz = arr([3], 0, [0, 1, -1])
zo = dev(64); tzo = tensor([3], 0, zo)
out["div_by_zero"] = run("Divs", z, scalar(0.0), tzo) + [[str(v) for v in get(zo, 3, 0)]]
i7, pi7 = arr([2], 3, [7, -7])
io_ = dev(64); tio = tensor([2], 0, io_)
i2, _ = arr([2], 3, [2, 2])
out["div_int32"] = run("Div", i7, i2, tio) + [get(io_, 2, 0)]  # int32 / int32: a float32 quotient
out["divs_int_to_int"] = run("InplaceDivs", i7, scalar(2, 9)) + [get(pi7, 2, 3)]  # 3.5 truncated back
# float16: the scalar of Divs rounded to float16; a float32 one kept (the 910B mixed pair)
h, ph = arr([2], 1, [1.0, 5.0])
ho = dev(64); tho = tensor([2], 1, ho)
out["divs_half_double"] = run("Divs", h, scalar(0.3), tho) + [get(ho, 2, 1)]
out["divs_half_float"] = run("Divs", h, scalar(0.3, 0), tho) + [get(ho, 2, 1)]
# in place: broadcast other, alpha, the result cast back to selfRef's dtype
b, pb = arr([2, 3], 0, [1, 2, 3, 4, 5, 6])
out["inplace_add"] = run("InplaceAdd", b, row, scalar(-0.5)) + [get(pb, 6, 0)]
out["inplace_sub"] = run("InplaceSub", b, row, one) + [get(pb, 6, 0)]
out["inplace_mul"] = run("InplaceMul", b, row) + [get(pb, 6, 0)]
out["inplace_div"] = run("InplaceDiv", b, row) + [get(pb, 6, 0)]
out["inplace_self"] = run("InplaceMul", b, b) + [get(pb, 6, 0)]  # other is selfRef itself
out["inplace_muls"] = run("InplaceMuls", b, scalar(2, 9)) + [get(pb, 6, 0)]
out["inplace_adds"] = run("InplaceAdds", b, scalar(1, 9), scalar(3, 9)) + [get(pb, 6, 0)]
out["inplace_subs"] = run("InplaceSubs", b, scalar(0.5), one) + [get(pb, 6, 0)]
hh, phh = arr([3], 1, [1.0, 2.0, 3.0])
out["inplace_half_float"] = run("InplaceAdd", hh, row, one) + [get(phh, 3, 1)]  # float32 sum, back to float16
n3, pn3 = arr([2], 3, [5, 6])
out["inplace_muls_int"] = run("InplaceMuls", n3, scalar(0.5)) + [get(pn3, 2, 3)]  # unchecked: 2.5 -> 2
# refusals
out["null_self"] = run("InplaceAdd", None, row, one)
out["null_other"] = run("InplaceDiv", b, None)
out["null_alpha"] = run("InplaceSub", b, row, None)
out["null_out"] = run("Div", a, row, None)
out["null_scalar"] = run("Divs", a, None, to)
big, _ = arr([4], 0, [1, 2, 3, 4])
out["inplace_grows"] = run("InplaceAdd", row, a, one)  # selfRef [3] + other [2, 3]: not selfRef's shape
out["bad_broadcast"] = run("Sub", a, big, one, to)
out["inplace_int_float"] = run("InplaceAdd", n3, tensor([2], 0, dev(64)), one)  # float32 sum into int32
out["inplace_adds_int_float"] = run("InplaceAdds", n3, scalar(0.5), one)
out["inplace_mul_int_float"] = run("InplaceMul", n3, tensor([2], 0, dev(64)))
out["sub_float_alpha_int"] = run("Sub", n3, n3, scalar(0.5), tensor([2], 3, dev(64)))
out["sub_bool_alpha"] = run("Subs", tensor([2], 12, dev(64)), scalar(1, 12), scalar(0.5), tensor([2], 12, dev(64)))
out["div_out_int"] = run("Div", a, row, tensor([2, 3], 3, dev(64)))
out["divs_out_int"] = run("Divs", a, scalar(2, 9), tensor([2, 3], 3, dev(64)))
out["divs_out_shape"] = run("Divs", a, scalar(2, 9), tensor([6], 0, dev(64)))
out["div_dtype"] = run("Div", a, tensor([3], 8, dev(64)), to)  # uint32: not simulated
out["div_overlap"] = run("Div", a, row, a)  # out is self's memory
out["inplace_overlap"] = run("InplaceDiv", b, tensor([3], 0, pb))  # other is part of selfRef, not selfRef
out["empty"] = run("Div", tensor([0, 3], 0, dev(64)), row, tensor([0, 3], 0, dev(64)))
print(json.dumps(out))
"""


def test_the_arithmetic_operators(tmp_path: Path) -> None:
    out = run_raw(RAW, tmp_path)
    assert out["sub"] == [0, 0, [0, 0, -1, 3, 3, 2]]
    assert out["sub_alpha"] == [0, 0, [0.5, 1, 1, 3.5, 4, 4]]
    assert out["subs"] == [0, 0, [-2, -1, 0, 1, 2, 3]]
    assert out["div"] == [0, 0, [1, 1, 0.75, 4, 2.5, 1.5]]
    assert out["divs"] == [0, 0, [0.5, 1, 1.5, 2, 2.5, 3]]
    assert out["div_by_zero"] == [0, 0, ["nan", "inf", "-inf"]]
    assert out["div_int32"] == [0, 0, [3.5, -3.5]]
    assert out["divs_int_to_int"] == [0, 0, [3, -3]]
    # 1 / float16(0.3) and 5 / float16(0.3), against 1 / float32(0.3) and 5 / float32(0.3), in float16
    assert out["divs_half_double"] == [0, 0, [3.33203125, 16.65625]]
    assert out["divs_half_float"] == [0, 0, [3.333984375, 16.671875]]
    assert out["inplace_add"] == [0, 0, [0.5, 1, 1, 3.5, 4, 4]]
    assert out["inplace_sub"] == [0, 0, [-0.5, -1, -3, 2.5, 2, 0]]
    assert out["inplace_mul"] == [0, 0, [-0.5, -2, -12, 2.5, 4, 0]]
    assert out["inplace_div"] == [0, 0, [-0.5, -1, -3, 2.5, 2, 0]]
    assert out["inplace_self"] == [0, 0, [0.25, 1, 9, 6.25, 4, 0]]
    assert out["inplace_muls"] == [0, 0, [0.5, 2, 18, 12.5, 8, 0]]
    assert out["inplace_adds"] == [0, 0, [3.5, 5, 21, 15.5, 11, 3]]
    assert out["inplace_subs"] == [0, 0, [3, 4.5, 20.5, 15, 10.5, 2.5]]
    assert out["inplace_half_float"] == [0, 0, [2, 4, 7]]
    assert out["inplace_muls_int"] == [0, 0, [2, 3]]
    assert out["null_self"][0] == 161001 and "selfRef is NULL" in out["null_self"][1]
    assert out["null_other"][0] == 161001 and "other is NULL" in out["null_other"][1]
    assert out["null_alpha"][0] == 161001 and "alpha is NULL" in out["null_alpha"][1]
    assert out["null_out"][0] == 161001 and "out is NULL" in out["null_out"][1]
    assert out["null_scalar"][0] == 161001 and "other is NULL" in out["null_scalar"][1]
    assert out["inplace_grows"][0] == 161002 and "selfRef" in out["inplace_grows"][1]
    assert out["bad_broadcast"][0] == 161002 and "broadcast" in out["bad_broadcast"][1]
    assert out["inplace_int_float"][0] == 161002
    assert out["inplace_int_float"][1].startswith("aclnnInplaceAddGetWorkspaceSize: selfRef has dtype int32, which "
                                                  "the promoted dtype float32 cannot be cast to (no floating to "
                                                  "integral)")
    assert out["inplace_adds_int_float"][0] == 161002 and "promoted dtype float64" in out["inplace_adds_int_float"][1]
    assert out["inplace_mul_int_float"][0] == 161002 and "selfRef has dtype int32" in out["inplace_mul_int_float"][1]
    assert out["sub_float_alpha_int"][0] == 161002 and "alpha has dtype float64" in out["sub_float_alpha_int"][1]
    assert out["sub_bool_alpha"][0] == 161002 and "integral or bool alpha" in out["sub_bool_alpha"][1]
    assert out["div_out_int"][0] == 161002 and "promoted dtype float32" in out["div_out_int"][1]
    assert out["divs_out_int"][0] == 161002 and "self's dtype float32" in out["divs_out_int"][1]
    assert out["divs_out_shape"][0] == 161002 and "shape" in out["divs_out_shape"][1]
    assert out["div_dtype"][0] == 161002 and "dtype 8" in out["div_dtype"][1]
    assert out["div_overlap"][0] == 161002 and "overlaps" in out["div_overlap"][1]
    assert out["inplace_overlap"][0] == 161002 and "overlaps" in out["inplace_overlap"][1]
    assert out["empty"] == [0, 0]
