"""torch_npu's streams and events on the simulator (issue 37): each case in its own child process, started after
``eval "$(python -m acl_bindings.sim env)"`` (a failure there could poison the next case).  Each result is checked
against torch CPU or the package's reference, and every start must be quiet: no line that torch_npu prints only
because the simulator lacks something (``[WARN] ... Feature is not supported``, ``Failed to find function``).
"""

from __future__ import annotations

import pytest

from tests.torch_npu.test_torch_npu_on_sim import _finish, _start

_PRELUDE = r"""
import json
import torch, torch_npu
out = {}
cur = torch.npu.current_stream()
x = torch.arange(1, 13, dtype=torch.float32).npu()
expect = torch.arange(1, 13, dtype=torch.float32)
"""

CASES = {
    # torch.npu.Event(enable_timing=True): record, synchronize, elapsed_time, around this package's first call
    # (the events' time lies within the host's; a float32 call imports no ml_dtypes, which took 10 s under load)
    "timing": r"""
import sys, time
from upsample3d_grad.functional import backward_torch
g = torch.arange(1, 33, dtype=torch.float32).reshape(2, 2, 2, 2, 2).npu()
start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
t0 = time.perf_counter()
start.record()
gi = backward_torch(g, (2, 2, 2), (2, 2, 1, 1, 1))
end.record()
end.synchronize()
host_ms = (time.perf_counter() - t0) * 1e3
ms = start.elapsed_time(end)
out["ok"] = (isinstance(ms, float) and 0.0 <= ms <= host_ms and "ml_dtypes" not in sys.modules
             and gi.cpu().flatten().tolist() == [36, 100, 164, 228])
out["ms"], out["host_ms"], out["ml_dtypes"] = ms, host_ms, "ml_dtypes" in sys.modules
""",
    # a side stream: work under `with torch.npu.stream(s)`, then current_stream().wait_stream(s)
    "side_stream": r"""
s = torch.npu.Stream()
s.wait_stream(cur)
with torch.npu.stream(s):
    y = x * 3.0
cur.wait_stream(s)
z = y + 1.0
out["ok"] = bool(torch.equal(z.cpu(), expect * 3.0 + 1.0))
""",
    # tensor.record_stream(s): the allocator keeps the block until s's work on it completed
    "record_stream": r"""
s = torch.npu.Stream()
a = x * 2.0
s.wait_stream(cur)
with torch.npu.stream(s):
    b = a * 5.0
a.record_stream(s)
del a
c = [x * float(k) for k in range(4)]  # allocations that may reuse a's block once s is done with it
cur.wait_stream(s)
out["ok"] = bool(torch.equal(b.cpu(), expect * 10.0)) and all(
    torch.equal(t.cpu(), expect * float(k)) for k, t in enumerate(c))
""",
    # the package's backward_torch on a side stream, read on the default stream after wait_stream
    "package_side_stream": r"""
from upsample3d_grad.functional import backward_torch
g = torch.arange(1, 33, dtype=torch.float32).reshape(2, 2, 2, 2, 2).npu()
s = torch.npu.Stream()
s.wait_stream(cur)
with torch.npu.stream(s):
    gi = backward_torch(g, (2, 2, 2), (2, 2, 1, 1, 1))
cur.wait_stream(s)
out["ok"] = (gi * 1.0).cpu().flatten().tolist() == [36, 100, 164, 228]
""",
    # y.to("cpu", non_blocking=True), then an event, then a read
    "non_blocking_copy": r"""
y = x * 2.0
h = y.to("cpu", non_blocking=True)
ev = torch.npu.Event()
ev.record()
ev.synchronize()
out["ok"] = bool(torch.equal(h, expect * 2.0))
""",
    # event.query() and stream.query()
    "query": r"""
ev = torch.npu.Event()
fresh = ev.query()  # never recorded
y = x * 2.0
ev.record()
torch.npu.synchronize()
out["ok"] = fresh is True and ev.query() is True and cur.query() is True and bool(torch.equal(y.cpu(), expect * 2.0))
""",
    # a pinned DataLoader loop, 50 batches copied with non_blocking=True
    "pinned_loader": r"""
from torch.utils.data import DataLoader, TensorDataset
data = torch.arange(50 * 8 * 3, dtype=torch.float32).reshape(50 * 8, 3)
loader = DataLoader(TensorDataset(data), batch_size=8, pin_memory=True)
total, n = torch.zeros((), device="npu"), 0
for (batch,) in loader:
    total = total + (batch.to("npu", non_blocking=True) * 2.0).sum()
    n += 1
out["ok"] = n == 50 and float(total.cpu()) == float((data * 2.0).sum())
""",
    # backward_torch on NPU tensors, repeated: the kept plan runs (no phase 1, no new descriptor), a changed
    # key (strides, sizes) takes the full call with its result or error (issue 36)
    "npu_repeat": r"""
from acl_bindings import sim
from upsample3d_grad import reference
from upsample3d_grad.functional import backward_torch, forward_torch
import numpy as np
g = torch.arange(1, 33, dtype=torch.float32).reshape(2, 2, 2, 2, 2).npu()
want = [36.0, 100.0, 164.0, 228.0]
names = ("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclCreateTensor",
         "aclnnUpsampleNearestExact3dBackward", "aclnnUpsampleNearestExact3dGetWorkspaceSize")
first = [backward_torch(g, (2, 2, 2), (2, 2, 1, 1, 1)).cpu().flatten().tolist() for _ in range(2)]
up = forward_torch(g, (4, 4, 4)).cpu()
inputs = [g * float(k) for k in range(1, 4)]  # (torch_npu's own Muls makes aclTensors: before the count)
torch.npu.synchronize()
before = {n: sim.call_count(n) for n in names}
results = [backward_torch(x_k, (2, 2, 2), (2, 2, 1, 1, 1)) for x_k in inputs]
# the same key in lists and torch.Size, and the forward's repeat: the kept plans too
results += [backward_torch(x_k, [2, 2, 2], torch.Size([2, 2, 1, 1, 1])) for x_k in inputs]
ups = [forward_torch(x_k, [4, 4, 4]) for x_k in inputs]
as_numpy = [backward_torch(x_k, (2, 2, 2), (2, 2, 1, 1, 1), return_type="numpy") for x_k in inputs]
kept = [r.data_ptr() for r in results]  # (each result kept: the plan is re-pointed at every new one)
calls = {n: sim.call_count(n) - v for n, v in before.items()}
again = [r.cpu().flatten().tolist() for r in results]
ups_ok = all(torch.equal(u.cpu(), up * float(k)) for u, k in zip(ups, (1, 2, 3)))
wide = torch.zeros(2, 2, 2, 2, 4).npu()
wide[..., ::2] = g
strided = backward_torch(wide[..., ::2], (2, 2, 2), (2, 2, 1, 1, 1)).cpu().flatten().tolist()
refused = []
for bad in ({"output_size": (2, 2, 3)}, {"layout": ["NCDHW"]}):  # a bad size; an unhashable layout
    args = {"output_size": (2, 2, 2), "layout": "NCDHW", **bad}
    try:
        backward_torch(g, args["output_size"], (2, 2, 1, 1, 1), layout=args["layout"])
        refused.append(None)
    except Exception as exc:
        refused.append(getattr(exc, "code", repr(exc)))
out["calls"], out["refused"] = calls, refused
out["ok"] = (first == [want, want] and again == [[v * k for v in want] for k in (1, 2, 3)] * 2 and strided == want
             and ups_ok and len(set(kept)) == 6 and refused == [161002, 161002] and calls[names[0]] == 0
             and [a.ravel().tolist() for a in as_numpy] == [[v * k for v in want] for k in (1, 2, 3)]
             and calls[names[1]] == 0 and calls[names[2]] == 9 and calls[names[3]] == 0)
""",
}


@pytest.fixture(scope="module")
def _children(tmp_path_factory: pytest.TempPathFactory):
    children = {name: _start(_PRELUDE + body + '\nprint("RESULT " + json.dumps(out))\n',
                             tmp_path_factory.mktemp(name)) for name, body in CASES.items()}
    yield children
    for proc, _ in children.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("case", sorted(CASES))
def test_torch_npu_streams_and_events(_children, case: str) -> None:
    done, out, _ = _finish(*_children[case])
    assert out["ok"], (out, done.stderr[-3000:])
    noise = [ln for ln in (done.stdout + done.stderr).splitlines()
             if "[WARN]" in ln or "Failed to find function" in ln or "not supported" in ln.lower()]
    assert not noise, "torch_npu printed what it prints only on the simulator:\n" + "\n".join(noise)
