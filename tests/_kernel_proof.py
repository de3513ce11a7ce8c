"""Evidence that torch_npu ran the aclnn kernels, not op-plugin's CPU fallback (cann-abi.md §9.3).

Where an aclnn symbol or library is missing, op-plugin computes the aten op on the CPU and still returns an NPU
tensor, so comparing our result with torch_npu's proves nothing by itself.  At a tie the two kernels part: with
``I = 2 -> O = 41`` in D, output index 20 is sent to input 1 by the NPU kernels' float32 law and to input 0 by
torch's CPU kernels (cann-abi.md §6.3).  :func:`cpu_fallback_evidence` runs both operators through torch's aten
ops at that tie, on *device*, and says what shows a CPU computation.  Used by tests/npu (real NPU) and
tests/torch_npu (the simulator); tests/unit shows it fires on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from upsample3d_grad import reference
from upsample3d_grad.reference import forward as reference_forward

OUTPUT_SIZE = (41, 3, 2)
INPUT_SIZE = (1, 2, 2, 3, 2)  # NCDHW: D is the tie (2 -> 41), H and W copy


def cpu_fallback_evidence(torch: Any, device: str, soc: str = "a2a3") -> list[str]:
    """What shows that the backward or the forward on *device* was computed by torch's CPU kernel; empty when
    both follow the NPU kernels' law (for the SoC family *soc*) at the tie."""
    g = torch.arange(int(np.prod((INPUT_SIZE[0], INPUT_SIZE[1], *OUTPUT_SIZE))), dtype=torch.float32)
    g = g.reshape(INPUT_SIZE[0], INPUT_SIZE[1], *OUTPUT_SIZE)
    x = torch.arange(int(np.prod(INPUT_SIZE)), dtype=torch.float32).reshape(INPUT_SIZE)
    runs = {
        "backward (aclnnUpsampleNearestExact3dBackward)": (
            lambda t: torch.ops.aten._upsample_nearest_exact3d_backward(t, list(OUTPUT_SIZE), list(INPUT_SIZE)),
            g, reference.upsample_nearest_exact3d_backward(g.numpy(), OUTPUT_SIZE, INPUT_SIZE)),
        "forward (aclnnUpsampleNearestExact3d)": (
            lambda t: torch.ops.aten._upsample_nearest_exact3d(t, list(OUTPUT_SIZE)),
            x, reference_forward.upsample_nearest_exact3d_forward(x.numpy(), OUTPUT_SIZE, soc=soc)),
    }
    evidence = []
    for name, (op, data, kernel_law) in runs.items():
        on_cpu = op(data).numpy()
        if np.array_equal(on_cpu, kernel_law):  # (a test-data defect, not evidence: the tie must tell them apart)
            raise AssertionError(f"{name}: the tie case does not tell the two kernels apart")
        got = op(data.to(device)).cpu().numpy()
        if np.array_equal(got, on_cpu):
            evidence.append(f"{name} on {device} gave torch's CPU result at the tie (D: 2 -> 41, o = 20): "
                            "op-plugin's CPU fallback ran, not the aclnn kernel")
        elif not np.array_equal(got, kernel_law):
            evidence.append(f"{name} on {device} follows neither the NPU kernels' law nor torch's CPU law at the "
                            f"tie: max |difference| {float(np.max(np.abs(got - kernel_law)))} from the NPU law")
    return evidence
