"""The first call of a new shape on NPU tensors allocates no device memory once the workspace of a like shape was
made (issue 36): the package asks torch_npu's caching allocator for its workspace in the allocator's own 2 MiB
units, so a slightly larger workspace of the next shape fits in the one it keeps.  One child process in the
simulator's environment; the simulator's counters say what was allocated, and the results are checked.
"""

from __future__ import annotations

from tests.torch_npu.test_torch_npu_on_sim import _finish, _start

SCRIPT = r"""
import json
import torch, torch_npu
from acl_bindings import sim
from upsample3d_grad.functional import backward_torch
from upsample3d_grad.reference import upsample_nearest_exact3d_backward as ref

gs = [torch.arange(float(4 * n)).reshape(1, 1, 2, n, 2).npu() for n in range(3, 23)]
first = backward_torch(gs[0], (2, 3, 2), (1, 1, 1, 1, 1))
torch.npu.synchronize()
allocs = lambda: sim.call_count("aclrtMallocAlign32") + sim.call_count("aclrtMalloc")
before = allocs()
results = [backward_torch(g, (2, n, 2), (1, 1, 1, 1, 1)) for n, g in zip(range(4, 23), gs[1:])]
torch.npu.synchronize()
out = {"allocations": allocs() - before,
       "ok": all(float(r.cpu().item()) == float(ref(g.cpu().numpy(), (2, n, 2), (1, 1, 1, 1, 1)).item())
                 for n, g, r in zip(range(4, 23), gs[1:], results))}
print("RESULT " + json.dumps(out))
"""


def test_new_shapes_reuse_the_kept_workspace(tmp_path) -> None:
    _, out, _ = _finish(*_start(SCRIPT, tmp_path))
    assert out == {"allocations": 0, "ok": True}, out


MANY = r"""
import json
import numpy as np
import torch, torch_npu
from acl_bindings import sim
from upsample3d_grad.functional import backward_torch
from upsample3d_grad.reference import upsample_nearest_exact3d_backward as ref

shapes = [(2, 1 + k // 8, 1 + k % 8) for k in range(48)]  # 48 call shapes: more than a small cache would keep
gs = [torch.arange(float(2 * h * w)).reshape(1, 1, d, h, w).npu() for d, h, w in shapes]
torch.npu.synchronize()
syncs = lambda: sim.call_count("aclrtSynchronizeDevice") + sim.call_count("aclrtSynchronizeStream")
phase1 = "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"
before, made = syncs(), sim.call_count(phase1)
results = [backward_torch(g, s, (1, 1, 1, 1, 1)) for g, s in zip(gs, shapes)]
again = [backward_torch(g, s, (1, 1, 1, 1, 1)) for g, s in zip(gs, shapes)]  # every plan still kept
out = {"syncs": syncs() - before, "phase1": sim.call_count(phase1) - made}
out["ok"] = all(np.array_equal(r.cpu().numpy(), ref(g.cpu().numpy(), s, (1, 1, 1, 1, 1)))
                for g, s, r in zip(gs * 2, shapes * 2, results + again))
print("RESULT " + json.dumps(out))
"""


def test_many_new_shapes_neither_synchronise_nor_lose_their_plans(tmp_path) -> None:
    """A workload of many call shapes: each first call makes a plan (one phase 1), none synchronises the device
    (an eviction would), and the repeats run on the kept plans."""
    _, out, _ = _finish(*_start(MANY, tmp_path))
    assert out == {"syncs": 0, "phase1": 48, "ok": True}, out
