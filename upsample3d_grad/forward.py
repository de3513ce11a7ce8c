"""The forward operator, declared: ``aclnnUpsampleNearestExact3d`` (docs/cann-forward-facts.md §1).

``aclnnStatus aclnnUpsampleNearestExact3dGetWorkspaceSize(const aclTensor *self,
    const aclIntArray *outputSize, double scalesD, double scalesH, double scalesW, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor);``

``aclnnStatus aclnnUpsampleNearestExact3d(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);``

Everything particular to the forward is here: its name and argument schema (:data:`OP`, run by the
generic call path like the backward), the faithful two-phase wrappers, and :func:`forward` (what
``Session.forward`` runs: host checks in CANN's forward order, numpy, CPU torch tensors or device
arrays in and out).  The module function with PyTorch's signature and the graph-IR form are in
:mod:`upsample3d_grad.api`, beside the backward's.  The host
checks are in :mod:`upsample3d_grad.forward_checks`, the reference in
:mod:`upsample3d_grad.reference_forward`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from acl_bindings import AclnnParamError, Executor, IntArray, Stream, Tensor, TwoPhaseOp, dtype_to_acl, soc_name
from acl_bindings.op import double, input_tensor, int_array, output_tensor
from acl_bindings.session import DeviceArray  # (the generic device array every session makes)

from . import forward_checks
from ._torch_host import host_view, is_tensor
from .checks import TensorSpec, check_output_memory, spec_of
from .reference_forward import soc_family

__all__ = ["OP", "PHASE1", "forward", "result_shape", "aclnnUpsampleNearestExact3dGetWorkspaceSize",
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
    """Phase 1, exactly as the C API: returns ``(workspace_size, executor)``.

    None passes a null pointer.  No host-side checks run here: this is CANN's own answer (raises
    :class:`acl_bindings.AclError` with CANN's code and message).  The executor keeps the tensors
    and the array alive.
    """
    keep = tuple(x for x in (self, outputSize, out) if x is not None)
    return OP.get_workspace_size(self, outputSize, float(scalesD), float(scalesH), float(scalesW), out, keep=keep)


def aclnnUpsampleNearestExact3d(workspace: Optional[int], workspaceSize: int, executor: Executor,
                                stream: Stream) -> None:
    """Phase 2, exactly as the C API: queue the kernel on *stream* (a single-use executor is consumed)."""
    OP.execute(workspace, workspaceSize, executor, stream)


def _soc() -> str:
    """The forward's host-check variant for this machine's SoC (``"310p"``, ``"ascend950"`` or ``"a2a3"``)."""
    name = soc_name()
    return "310p" if name.startswith("Ascend310P") else soc_family(name)


def forward(session: Any, input: Any, output_size: Sequence[int], scales_d: Optional[float] = None,
            scales_h: Optional[float] = None, scales_w: Optional[float] = None, *, layout: str = "NCDHW",
            out: Any = None, strict: bool = True) -> Any:
    """Nearest-exact 3-D upsampling on *session*'s device (what :meth:`Session.forward` runs).

    Parameters
    ----------
    input:
        numpy array (float32, float16, bfloat16), CPU torch tensor or device array of *session*;
        ``[N,C,D,H,W]`` for NCDHW, ``[N,D,H,W,C]`` for NDHWC.
    output_size:
        ``(oD, oH, oW)``, each > 0.
    scales_d, scales_h, scales_w:
        Scales (output over input); None or 0 is "not given".  When all three are given, each
        outputSize value must lie within CANN's band around ``trunc(I*s)`` (and, with *strict*,
        equal ``floor(I*s)``).
    layout:
        ``"NCDHW"`` or ``"NDHWC"``, of *input* and of the result.
    out:
        Preallocated result (numpy, CPU torch tensor or device array), written and returned.
    strict:
        Enforce the documented constraints CANN leaves unchecked (:mod:`upsample3d_grad.forward_checks`).

    Returns
    -------
    *out* when given; else numpy when *input* is numpy or a CPU tensor, a device array when it is one.
    """
    out_tensor = out if is_tensor(out) else None
    x = host_view(input, "self (input)")
    y = host_view(out, "out", writable=True)
    with session._lock, session._active():
        for arr, param in ((x, "self"), (y, "out")):
            if isinstance(arr, DeviceArray):
                arr._check_open()
                if arr.session is not session:
                    raise AclnnParamError(161002, PHASE1, f"{param}: this DeviceArray belongs to another Session")
        if isinstance(y, np.ndarray) and not y.flags.writeable:
            raise AclnnParamError(161002, PHASE1, "out: the numpy array is read-only")
        x_spec = _spec(x) if isinstance(x, DeviceArray) else spec_of(x, layout, "self", PHASE1)
        if x_spec is None:
            raise AclnnParamError(161001, PHASE1, "self (input): expected a value but got None (a null pointer)")
        y_spec = (TensorSpec(result_shape(x_spec, output_size), x_spec.dtype, x_spec.format) if y is None
                  else _spec(y) if isinstance(y, DeviceArray) else spec_of(y, layout, "out", PHASE1))
        scales = forward_checks.check_forward_params(x_spec, output_size, scales_d, scales_h, scales_w, y_spec,
                                                     soc=_soc(), strict=strict)
        assert y_spec is not None
        if isinstance(y, DeviceArray):
            check_output_memory(y.shape, tuple(st * y.dtype.itemsize for st in y.strides), y.dtype.itemsize, "out")
        elif y is not None:
            check_output_memory(y.shape, y.strides, y.itemsize, "out")
        owned: list[Any] = []
        try:
            xa = x if isinstance(x, DeviceArray) else _track(session._upload(x, layout, "self", PHASE1), owned)
            ya = (y if isinstance(y, DeviceArray) else
                  _track(session._upload(y, layout, "out", PHASE1), owned) if y is not None else
                  _track(session.empty(y_spec.shape, xa.dtype, layout), owned))
            session.run(OP, xa, tuple(int(v) for v in output_size), *scales, ya)
            if isinstance(x, DeviceArray) and y is None:
                owned.remove(ya)
                result: Any = ya
            elif isinstance(y, DeviceArray):
                result = y
            else:
                result = ya.download(y) if y is not None else ya.download()
        finally:
            for arr in reversed(owned):  # (a release refused here stays owned; the session's close retries it)
                try:
                    arr.close()
                except Exception:
                    pass
    return out_tensor if out_tensor is not None else result


def _spec(arr: DeviceArray) -> TensorSpec:
    """What phase 1 sees of a device array."""
    return TensorSpec(arr.shape, int(dtype_to_acl(arr.dtype)), int(arr.acl_format))


def _track(arr: Any, owned: list[Any]) -> Any:
    owned.append(arr)
    return arr


def result_shape(x_spec: TensorSpec, output_size: Any) -> tuple[int, ...]:
    """out's shape for *output_size*; ``(-1,)`` when the input cannot give one (the checks then report why)."""
    try:
        osz = tuple(int(v) for v in output_size)
    except (TypeError, ValueError):
        return (-1,)
    if len(x_spec.shape) != 5 or len(osz) != 3:
        return (-1,)
    return forward_checks.forward_result_shape(x_spec, (osz[0], osz[1], osz[2]))
