"""The faithful two-phase binding of the operator (cann-abi.md §1.4).

``aclnnStatus aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(const aclTensor *gradOut,
    const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD, double scalesH,
    double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor);``

``aclnnStatus aclnnUpsampleNearestExact3dBackward(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);``
"""

from __future__ import annotations

from ctypes import c_double
from typing import Optional

from acl_bindings import Executor, IntArray, Stream, Tensor, TwoPhaseOp
from acl_bindings._types import aclIntArray_p, aclTensor_p

__all__ = ["OP", "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward"]

#: The operator, declared by name and phase-1 argtypes.
OP = TwoPhaseOp(
    "UpsampleNearestExact3dBackward",
    # (const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize,
    #  double scalesD, double scalesH, double scalesW, aclTensor *gradInput)
    (aclTensor_p, aclIntArray_p, aclIntArray_p, c_double, c_double, c_double, aclTensor_p),
)


def aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
        gradOut: Optional[Tensor], outputSize: Optional[IntArray], inputSize: Optional[IntArray],
        scalesD: float, scalesH: float, scalesW: float, gradInput: Optional[Tensor]) -> tuple[int, Executor]:
    """Phase 1, exactly as the C API: returns ``(workspace_size, executor)``.

    None passes a null pointer.  No host-side checks run here: this is CANN's own
    answer (raises :class:`acl_bindings.AclError` with CANN's code and message).
    The executor keeps the tensors and arrays alive.
    """
    keep = tuple(x for x in (gradOut, outputSize, inputSize, gradInput) if x is not None)
    return OP.get_workspace_size(gradOut, outputSize, inputSize, float(scalesD), float(scalesH),
                                 float(scalesW), gradInput, keep=keep)


def aclnnUpsampleNearestExact3dBackward(workspace: Optional[int], workspaceSize: int, executor: Executor,
                                        stream: Stream) -> None:
    """Phase 2, exactly as the C API: queue the kernel on *stream*.

    A single-use executor is consumed.  Synchronise *stream* before reading the result
    or freeing the workspace.
    """
    OP.execute(workspace, workspaceSize, executor, stream)
