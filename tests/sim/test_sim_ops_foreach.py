"""nnopbase's aclTensorList (src/nnopbase.c) and the foreach operators torch's SGD reaches through op-plugin
(src/ops/foreach_add_list.c, src/ops/foreach_mul_scalar.c, src/kernels/foreach.c), called raw through ctypes in a
child process: the lists' rules (NULL, empty, ownership, double destroy, leak accounting) and the operators'
values and refusals with CANN's codes (docs/fidelity.md, "foreach")."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from acl_bindings import sim
from tests.sim._raw import PRELUDE, run_raw

RAW = PRELUDE + r"""
P = C.c_void_p
rt.cannsimLiveHandles.restype = C.c_int64
rt.cannsimCallCount.restype = C.c_int64
nn.aclCreateTensorList.restype = P
nn.aclCreateTensorList.argtypes = [C.POINTER(P), C.c_uint64]
nn.aclDestroyTensorList.argtypes = [P]
nn.aclGetTensorListSize.argtypes = [P, C.POINTER(C.c_uint64)]
op.aclnnForeachAddListV2GetWorkspaceSize.argtypes = [P, P, P, P, C.POINTER(C.c_uint64), C.POINTER(P)]
op.aclnnForeachMulScalarV2GetWorkspaceSize.argtypes = [P, P, P, C.POINTER(C.c_uint64), C.POINTER(P)]
for name in ("aclnnForeachAddListV2", "aclnnForeachMulScalarV2"):
    getattr(op, name).argtypes = [P, C.c_uint64, P, P]
def msg():  # the first message since the last clear(): the first line only, unlike the prelude's msg()
    m = rt.aclGetRecentErrMsg()
    return m.decode().split("\n")[0] if m else ""
def clear():
    rt.aclGetRecentErrMsg()
def live(kind):
    return rt.cannsimLiveHandles(kind.encode())
out = {}
rt.aclInit(None); rt.aclrtSetDevice(0)
def dev(nbytes):
    p = P(); assert rt.aclrtMalloc(C.byref(p), C.c_size_t(nbytes), 0) == 0; return p.value
def tensor(dims, dtype, p, strides=None, offset=0):
    d = (C.c_int64 * max(len(dims), 1))(*dims)
    acc, rm = 1, []
    for x in reversed(dims): rm.append(acc); acc *= x
    st = (C.c_int64 * max(len(dims), 1))(*(strides or list(reversed(rm))))
    stor = (C.c_int64 * 1)(max(acc, 1) + offset + 64)
    return nn.aclCreateTensor(d, len(dims), dtype, st, offset, 2, stor, 1, p)
def tlist(ts):
    return nn.aclCreateTensorList((P * max(len(ts), 1))(*ts), len(ts))
def size(l):
    n = C.c_uint64(99); rc = nn.aclGetTensorListSize(l, C.byref(n)); return [rc, n.value]
def host(p, nbytes):
    b = (C.c_char * nbytes)(); rt.aclrtMemcpy(b, C.c_size_t(nbytes), P(p), C.c_size_t(nbytes), 2); return bytes(b)
def put(p, data):
    rt.aclrtMemcpy(P(p), C.c_size_t(len(data)), data, C.c_size_t(len(data)), 1)
def scalar(v, dtype=11):  # 11: double (what op-plugin passes for a Python float), 0 float32, 1 float16, 9 int64
    box = {11: C.c_double, 0: C.c_float, 9: C.c_int64}.get(dtype)
    if box is None: return nn.aclCreateScalar(C.byref(C.c_uint16(struct.unpack("H", struct.pack("e", v))[0])), dtype)
    return nn.aclCreateScalar(C.byref(box(v)), dtype)
def phase1(name, *args):
    clear()
    ws = C.c_uint64(7); ex = P()
    rc = getattr(op, name + "GetWorkspaceSize")(*args, C.byref(ws), C.byref(ex))
    return rc, ws.value, ex
def run(name, *args):
    rc, ws, ex = phase1(name, *args)
    if rc: return [rc, msg()]
    rc = getattr(op, name)(None, 0, ex, None)
    return [rc, rt.aclrtSynchronizeStream(None), ws] if rc == 0 else [rc, msg()]

# ---------------------------------------------------------------- the lists
a = dev(256); b = dev(256)
t1, t2 = tensor([2, 3], 0, a), tensor([4], 0, b)
l = tlist([t1, t2])
out["list_live"] = [live("tensor_list"), live("tensor"), size(l)]
out["list_destroy"] = [nn.aclDestroyTensorList(l), live("tensor_list"), live("tensor")]  # its tensors too
clear()
out["list_double_destroy"] = [nn.aclDestroyTensorList(l), msg()]
clear()
out["list_size_dead"] = size(l)[:1] + [msg()]
e1 = nn.aclCreateTensorList(None, 3); e2 = tlist([])
out["list_empty"] = [bool(e1), size(e1), bool(e2), size(e2), nn.aclDestroyTensorList(e1), nn.aclDestroyTensorList(e2)]
out["list_destroy_null"] = nn.aclDestroyTensorList(None)
n = C.c_uint64(0)
out["list_size_null"] = [nn.aclGetTensorListSize(None, C.byref(n)), nn.aclGetTensorListSize(P(1), None)]
t3 = tensor([2], 0, a)
nn.aclDestroyTensor(t3)
clear()
out["list_dead_entry"] = [nn.aclCreateTensorList((P * 1)(t3), 1) or 0, msg(), live("tensor_list")]
t4 = tensor([2], 0, a)
clear()
out["list_twice"] = [nn.aclCreateTensorList((P * 2)(t4, t4), 2) or 0, msg(), live("tensor_list")]
l = nn.aclCreateTensorList((P * 2)(None, t4), 2)
out["list_null_entry"] = [bool(l), size(l), nn.aclDestroyTensorList(l), live("tensor")]
t5, t6 = tensor([2], 0, a), tensor([2], 0, b)
l = tlist([t5, t6])
nn.aclDestroyTensor(t5)
clear()
out["list_entry_destroyed_first"] = [nn.aclDestroyTensorList(l), msg(), live("tensor_list"), live("tensor")]
out["list_calls"] = [rt.cannsimCallCount(x) for x in (b"aclCreateTensorList", b"aclDestroyTensorList",
                                                       b"aclGetTensorListSize")]

# ---------------------------------------------------------------- values
X1 = [[1.5, -2.0, 3.25, 0.5, 7.0, -1.0], [0.1, 0.2, 0.3, 0.4]]
X2 = [[0.3, 1.7, -2.2, 5.0, 0.01, 9.0], [1.0, -1.0, 2.5, 3.0]]
SHAPES = [[2, 3], [1, 4, 1, 1, 1]]
def lists(dtype, fmt, mems, data):
    ts = []
    for m, d, s in zip(mems, data, SHAPES):
        put(m, struct.pack(f"{len(d)}{fmt}", *d)); ts.append(tensor(s, dtype, m))
    return tlist(ts)
def values(mems, fmt, counts):
    return [list(struct.unpack(f"{k}{fmt}", host(m, k * struct.calcsize(fmt)))) for m, k in zip(mems, counts)]
m1, m2, mo = [dev(64), dev(64)], [dev(64), dev(64)], [dev(64), dev(64)]
for dtype, fmt, key in ((0, "f", "f32"), (1, "e", "f16")):
    x1, x2 = lists(dtype, fmt, m1, X1), lists(dtype, fmt, m2, X2)
    o = tlist([tensor(s, dtype, m) for s, m in zip(SHAPES, mo)])
    al = scalar(-0.1)
    out["add_" + key] = run("aclnnForeachAddListV2", x1, x2, al, o) + [values(mo, fmt, (6, 4))]
    # in place, as op-plugin calls it for _foreach_add_: out is a second list over x1's memory
    inplace = tlist([tensor(s, dtype, m) for s, m in zip(SHAPES, m1)])
    out["add_inplace_" + key] = run("aclnnForeachAddListV2", x1, x2, al, inplace) + [values(m1, fmt, (6, 4))]
    sc = scalar(0.9)
    inplace2 = tlist([tensor(s, dtype, m) for s, m in zip(SHAPES, m1)])
    x1b = tlist([tensor(s, dtype, m) for s, m in zip(SHAPES, m1)])
    out["mul_inplace_" + key] = run("aclnnForeachMulScalarV2", x1b, sc, inplace2) + [values(m1, fmt, (6, 4))]
    for h in (x1, x2, o, inplace, inplace2, x1b): nn.aclDestroyTensorList(h)
    nn.aclDestroyScalar(al); nn.aclDestroyScalar(sc)
out["live_after_values"] = [live("tensor_list"), live("tensor"), live("executor")]

# ---------------------------------------------------------------- refusals, with CANN's codes
def fresh(dtype=0, shapes=SHAPES, mems=None):
    return tlist([tensor(s, dtype, m) for s, m in zip(shapes, mems or m1)])
al = scalar(-0.1)
x1, x2, o = fresh(), fresh(mems=m2), fresh(mems=mo)
out["add_null"] = [run("aclnnForeachAddListV2", None, x2, al, o), run("aclnnForeachAddListV2", x1, x2, None, o),
                   run("aclnnForeachAddListV2", x1, x2, al, None)]
short = tlist([tensor([2, 3], 0, m2[0])])
out["add_lengths"] = run("aclnnForeachAddListV2", x1, short, al, o)
out["add_out_length"] = run("aclnnForeachAddListV2", x1, x2, al, short)
out["add_shapes"] = run("aclnnForeachAddListV2", x1, fresh(shapes=[[2, 3], [4]], mems=m2), al, o)
out["add_out_shape"] = run("aclnnForeachAddListV2", x1, x2, al, fresh(shapes=[[3, 2], [1, 4, 1, 1, 1]], mems=mo))
mixed = tlist([tensor([2, 3], 0, m2[0]), tensor([1, 4, 1, 1, 1], 1, m2[1])])
out["add_dtypes"] = run("aclnnForeachAddListV2", x1, mixed, al, o)
out["add_double_list"] = run("aclnnForeachAddListV2", fresh(11), fresh(11, mems=m2), al, fresh(11, mems=mo))
out["add_alpha_int"] = run("aclnnForeachAddListV2", x1, x2, scalar(2, 9), o)
out["add_alpha_half_for_float"] = run("aclnnForeachAddListV2", x1, x2, scalar(0.5, 1), o)
nine = [1] * 9
out["add_nine_dims"] = run("aclnnForeachAddListV2", tlist([tensor(nine, 0, m1[0])]), tlist([tensor(nine, 0, m2[0])]),
                           al, tlist([tensor(nine, 0, mo[0])]))
big = dev(256)
over = tlist([tensor([2, 3], 0, mo[0]), tensor([1, 4, 1, 1, 1], 0, m1[0], offset=2)])  # out[1] inside x1[0]
out["add_overlap"] = run("aclnnForeachAddListV2", x1, x2, al, over)
e1, e2, e3 = tlist([]), tlist([]), tlist([])
out["add_empty"] = run("aclnnForeachAddListV2", e1, e2, al, e3)
dead = fresh(mems=m2); nn.aclDestroyTensorList(dead)
out["add_dead_list"] = run("aclnnForeachAddListV2", x1, dead, al, o)
nulls = nn.aclCreateTensorList((P * 2)(tensor([2, 3], 0, m2[0]), None), 2)
out["add_null_entry"] = run("aclnnForeachAddListV2", x1, nulls, al, o)
# a list destroyed between the phases: the executor refers to it (simulator-only code, as for a tensor)
x2b = fresh(mems=m2)
rc, ws, ex = phase1("aclnnForeachAddListV2", x1, x2b, al, o)
nn.aclDestroyTensorList(x2b)
out["add_list_destroyed_before_phase2"] = [rc, op.aclnnForeachAddListV2(None, 0, ex, None), msg(), live("executor")]
sc = scalar(0.9)
out["mul_null"] = [run("aclnnForeachMulScalarV2", None, sc, o), run("aclnnForeachMulScalarV2", x1, None, o)]
out["mul_out_length"] = run("aclnnForeachMulScalarV2", x1, sc, short)
out["mul_int64_list"] = run("aclnnForeachMulScalarV2", fresh(9), sc, fresh(9, mems=mo))
out["mul_scalar_half_for_float"] = run("aclnnForeachMulScalarV2", x1, scalar(0.5, 1), o)
out["mul_out_dtype"] = run("aclnnForeachMulScalarV2", x1, sc, fresh(1, mems=mo))
out["mul_empty_x_out_not"] = run("aclnnForeachMulScalarV2", tlist([]), sc, o)
out["op_calls"] = [rt.cannsimCallCount(x) for x in (b"aclnnForeachAddListV2GetWorkspaceSize",
                                                     b"aclnnForeachAddListV2", b"aclnnForeachMulScalarV2")]
# leave one list behind: the exit report counts it
before = live("tensor_list")
leak = tlist([tensor([2], 0, a)])
out["leak"] = [before, live("tensor_list")]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scenario's record and the simulator's exit report."""
    tmp = tmp_path_factory.mktemp("foreach")
    report = tmp / "report.json"
    return run_raw(RAW, tmp, env={"CANN_SIM_REPORT": str(report)}), json.loads(report.read_text())


def test_a_list_owns_and_destroys_its_tensors(raw) -> None:
    out, _ = raw
    assert out["list_live"] == [1, 2, [0, 2]]
    assert out["list_destroy"] == [0, 0, 0]  # aclDestroyTensorList destroyed both tensors
    rc, text = out["list_double_destroy"]
    assert rc == 161002 and "not a live aclTensorList" in text
    assert out["list_size_dead"][0] == 161002
    assert out["list_calls"][0] >= 1 and out["list_calls"][1] >= 1 and out["list_calls"][2] >= 1


def test_empty_and_null_lists(raw) -> None:
    out, _ = raw
    assert out["list_empty"] == [True, [0, 0], True, [0, 0], 0, 0]  # a NULL array or size 0: an empty list
    assert out["list_destroy_null"] == 0
    assert out["list_size_null"] == [161001, 161001]
    assert out["list_null_entry"] == [True, [0, 2], 0, out["list_null_entry"][3]]  # a NULL entry is kept


def test_entries_that_would_be_freed_twice_are_refused(raw) -> None:
    out, _ = raw
    assert out["list_dead_entry"][0] == 0 and "value[0]" in out["list_dead_entry"][1]
    assert out["list_twice"][0] == 0 and "listed twice" in out["list_twice"][1]
    rc, text, lists, _ = out["list_entry_destroyed_first"]
    assert rc == 161002 and "entry 0" in text and "already destroyed" in text and lists == 0


def test_leaked_lists_are_counted(raw) -> None:
    out, report = raw
    before, after = out["leak"]
    assert after == before + 1 and report["live"]["tensor_list"] == after
    assert out["live_after_values"] == [0, 0, 0]


def _add(x1: list[float], x2: list[float], alpha: float, dt: type) -> list[float]:
    """CANN's ForeachAddList kernel: alpha cast to the dtype, x2 * alpha and the sum rounded to it."""
    a = dt(alpha)
    return [float(dt(dt(u) + dt(dt(v) * a))) for u, v in zip(x1, x2)]


X1 = [[1.5, -2.0, 3.25, 0.5, 7.0, -1.0], [0.1, 0.2, 0.3, 0.4]]
X2 = [[0.3, 1.7, -2.2, 5.0, 0.01, 9.0], [1.0, -1.0, 2.5, 3.0]]


@pytest.mark.parametrize("key,dt", [("f32", np.float32), ("f16", np.float16)])
def test_foreach_add_and_mul_values(raw, key: str, dt: type) -> None:
    out, _ = raw
    x1 = [[float(dt(v)) for v in r] for r in X1]
    x2 = [[float(dt(v)) for v in r] for r in X2]
    want = [_add(u, v, -0.1, dt) for u, v in zip(x1, x2)]
    rc, sync, ws, got = out["add_" + key]
    assert (rc, sync, ws) == (0, 0, 0) and got == want
    rc, sync, _, got = out["add_inplace_" + key]
    assert (rc, sync) == (0, 0) and got == want  # out[i] exactly x1[i]: in place
    rc, sync, _, got = out["mul_inplace_" + key]
    assert (rc, sync) == (0, 0) and got == [[float(dt(dt(v) * dt(0.9))) for v in r] for r in want]


def test_float16_alpha_is_rounded_to_float16() -> None:
    """What the float16 model above relies on: CANN converts alpha to the lists' dtype (ConvertToTensor)."""
    assert float(np.float16(-0.1)) != -0.1


@pytest.mark.parametrize("case,code,words", [
    ("add_lengths", 161002, "same number of tensors"), ("add_out_length", 161002, "same number of tensors"),
    ("add_shapes", 161002, "has shape [4], not x1[1]'s [1, 4, 1, 1, 1]"),
    ("add_out_shape", 161002, "out[0] has shape [3, 2]"),
    ("add_dtypes", 161002, "x2[1] has dtype float16"), ("add_double_list", 161002, "x1[0] has dtype"),
    ("add_alpha_int", 161002, "alpha has dtype int64"), ("add_alpha_half_for_float", 161002, "alpha has dtype float16"),
    ("add_nine_dims", 161002, "9 dims"), ("add_overlap", 161002, "x1[0] and out[1] overlaps"),
    ("add_dead_list", 161002, "not a live aclTensorList"), ("add_null_entry", 161002, "x2[1] is NULL"),
    ("mul_out_length", 161002, "same number of tensors"), ("mul_int64_list", 161002, "x[0] has dtype int64"),
    ("mul_scalar_half_for_float", 161002, "scalar has dtype float16"),
    ("mul_out_dtype", 161002, "out[0] has dtype float16"), ("mul_empty_x_out_not", 161002, "same number"),
])
def test_refusals_carry_canns_codes(raw, case: str, code: int, words: str) -> None:
    out, _ = raw
    rc, text = out[case]
    assert rc == code and words in text, out[case]


def test_null_handles_are_161001_and_empty_lists_run_nothing(raw) -> None:
    out, _ = raw
    assert [r[0] for r in out["add_null"]] == [161001] * 3
    assert "x1 is NULL" in out["add_null"][0][1] and "alpha is NULL" in out["add_null"][1][1]
    assert [r[0] for r in out["mul_null"]] == [161001] * 2
    assert out["add_empty"] == [0, 0, 0]


def test_a_list_destroyed_before_phase_2_is_a_stale_handle(raw) -> None:
    out, _ = raw
    rc, rc2, text, executors = out["add_list_destroyed_before_phase2"]
    assert rc == 0 and rc2 == sim.STALE_HANDLE and "x2 (aclTensorList" in text and executors == 0
    assert out["op_calls"][0] >= 10 and out["op_calls"][1] >= 3 and out["op_calls"][2] >= 2
