"""The forward operator ``aclnnUpsampleNearestExact3d`` (prototypes: docs/cann-forward-facts.md §1): its declaration,
the faithful two-phase pair and the host checks ``Session.forward`` runs for this machine's SoC."""

from __future__ import annotations

from typing import Any, Optional

from acl_bindings import Executor, IntArray, Stream, Tensor, TwoPhaseOp, soc_name, socs
from acl_bindings.op import double, input_tensor, int_array, output_tensor

from . import forward_checks
from .checks import TensorSpec
from .reference import soc_family

__all__ = ["OP", "PHASE1", "check", "result_shape", "aclnnUpsampleNearestExact3dGetWorkspaceSize",
           "aclnnUpsampleNearestExact3d"]

#: The operator, declared by name and argument schema (phase 1's arguments in C order).
OP = TwoPhaseOp("UpsampleNearestExact3d", (
    input_tensor("self"), int_array("outputSize"), double("scalesD"), double("scalesH"), double("scalesW"),
    output_tensor("out")))

#: The function named by the errors of phase 1 (and of the host checks that mirror it).
PHASE1 = OP.phase1_name
assert PHASE1 == forward_checks.FORWARD_PHASE1


def aclnnUpsampleNearestExact3dGetWorkspaceSize(
        self: Optional[Tensor], outputSize: Optional[IntArray], scalesD: float, scalesH: float, scalesW: float,
        out: Optional[Tensor]) -> tuple[int, Executor]:
    """Phase 1, exactly as the C API, with no host check (None passes NULL): returns ``(workspace_size, executor)``,
    the executor keeping the tensors and the array alive; CANN's error is an :class:`acl_bindings.AclError`."""
    keep = tuple(x for x in (self, outputSize, out) if x is not None)
    return OP.get_workspace_size(self, outputSize, float(scalesD), float(scalesH), float(scalesW), out, keep=keep)


def aclnnUpsampleNearestExact3d(workspace: Optional[int], workspaceSize: int, executor: Executor,
                                stream: Stream) -> None:
    """Phase 2, exactly as the C API: queue the kernel on *stream* (a single-use executor is consumed)."""
    OP.execute(workspace, workspaceSize, executor, stream)


def check(x_spec: TensorSpec, y_spec: Optional[TensorSpec], output_size: Any, scales_d: Any, scales_h: Any,
          scales_w: Any, *, strict: bool = True) -> tuple[int, ...]:
    """The forward's host checks for this machine's SoC of *x_spec* and *y_spec* (None: the result it will make);
    returns the result's shape."""
    shape = result_shape(x_spec, output_size)
    if y_spec is None:
        y_spec = TensorSpec(shape, x_spec.dtype, x_spec.format)
    name = soc_name()
    # the variant of this machine's SoC, by its kernel directory (acl_bindings.socs, as the simulator decides it)
    soc = "310p" if socs.kernel_dir(name) == "ascend310p" else soc_family(name)
    forward_checks.check_forward_params(x_spec, output_size, scales_d, scales_h, scales_w, y_spec, soc=soc,
                                        strict=strict)
    return shape


def result_shape(x_spec: TensorSpec, output_size: Any) -> tuple[int, ...]:
    """out's shape for *output_size*; ``(-1,)`` when the input cannot give one (the checks then report why)."""
    try:
        od, oh, ow = (int(v) for v in output_size)
    except (TypeError, ValueError):
        return (-1,)
    return forward_checks.forward_result_shape(x_spec, (od, oh, ow)) if len(x_spec.shape) == 5 else (-1,)
