"""The operator ``aclnnUpsampleNearestExact3dBackward``, declared (prototypes: cann-abi.md §1.4): its schema
(:data:`OP`), its layout-to-shape rule and its faithful two-phase pair.  Host checks: :mod:`upsample3d_grad.checks`."""

from __future__ import annotations

from typing import Any, Optional

from acl_bindings import AclnnParamError, AclTypeError, Executor, Format, IntArray, Stream, Tensor, TwoPhaseOp
from acl_bindings.op import double, input_tensor, int_array, output_tensor

__all__ = ["OP", "PHASE1", "layout_format", "physical_shape", "result_shape",
           "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward"]

#: The operator, declared by name and argument schema (phase 1's arguments in C order).
OP = TwoPhaseOp("UpsampleNearestExact3dBackward", (
    input_tensor("gradOut"), int_array("outputSize"), int_array("inputSize"),
    double("scalesD"), double("scalesH"), double("scalesW"), output_tensor("gradInput")))

#: The function named by the errors of phase 1 (and of the host checks that mirror it).
PHASE1 = OP.phase1_name


def layout_format(layout: str, func: str = PHASE1) -> Format:
    """``"NCDHW"`` -> ``ACL_FORMAT_NCDHW``; ``"NDHWC"`` -> ``ACL_FORMAT_NDHWC``."""
    if layout == "NCDHW":
        return Format.NCDHW
    if layout == "NDHWC":
        return Format.NDHWC
    kind = AclnnParamError if isinstance(layout, str) else AclTypeError
    raise kind(161002, func, f"layout: expected 'NCDHW' or 'NDHWC', got {layout!r}")


def physical_shape(layout: Any, n: int, c: int, d: int, h: int, w: int) -> tuple[int, ...]:
    """``[N,C,D,H,W]`` for NCDHW, ``[N,D,H,W,C]`` for NDHWC; *layout* (a name or an aclFormat) else reads as NCDHW,
    as in CANN."""
    return (n, d, h, w, c) if layout in ("NDHWC", Format.NDHWC) else (n, c, d, h, w)


def result_shape(input_size: Any, layout: Any) -> tuple[int, ...]:
    """gradInput's physical shape for *input_size* ``(N, C, iD, iH, iW)``; ``(-1,)`` when it is not five ints
    (:func:`upsample3d_grad.checks.check_params` then reports the problem with CANN's code)."""
    try:
        n, c, d, h, w = (int(v) for v in input_size)
    except (TypeError, ValueError):
        return (-1,)
    return physical_shape(layout, n, c, d, h, w)


def aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
        gradOut: Optional[Tensor], outputSize: Optional[IntArray], inputSize: Optional[IntArray],
        scalesD: float, scalesH: float, scalesW: float, gradInput: Optional[Tensor]) -> tuple[int, Executor]:
    """Phase 1, exactly as the C API: returns ``(workspace_size, executor)``, the executor keeping the tensors and
    arrays alive.  None passes NULL.  No host check runs: an error is CANN's own :class:`acl_bindings.AclError`."""
    keep = tuple(x for x in (gradOut, outputSize, inputSize, gradInput) if x is not None)
    return OP.get_workspace_size(gradOut, outputSize, inputSize, float(scalesD), float(scalesH),
                                 float(scalesW), gradInput, keep=keep)


def aclnnUpsampleNearestExact3dBackward(workspace: Optional[int], workspaceSize: int, executor: Executor,
                                        stream: Stream) -> None:
    """Phase 2, exactly as the C API: queue the kernel on *stream*, consuming a single-use executor.  Synchronise
    *stream* before reading the result or freeing the workspace."""
    OP.execute(workspace, workspaceSize, executor, stream)
