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
