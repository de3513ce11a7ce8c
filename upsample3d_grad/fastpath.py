"""The operator's prepared call on device arrays (:meth:`Session.prepare <upsample3d_grad.Session.prepare>`)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from acl_bindings import session as _generic

from . import checks
from .arrays import DeviceArray, check_out_memory
from .op import OP

__all__ = ["PreparedCall"]

#: Schema positions of gradOut and gradInput
_GO, _GI = OP.inputs[0], OP.outputs[0]


class PreparedCall(_generic.PreparedCall):
    """The generic :class:`acl_bindings.session.PreparedCall` with the operator's host checks and argument names.

    Attributes: those of the generic one, and ``output_size``, ``input_size``, ``scales``."""

    def __init__(self, session: Any, grad_output: DeviceArray, output_size: Sequence[int],
                 input_size: Sequence[int], scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *,
                 out: DeviceArray, plan: bool = True, sync: bool = True, strict: bool = True) -> None:
        sd, sh, sw = checks.scale_triple(scales)
        with session._lock:
            session._check_open()
            session.own_array(grad_output, "gradOut", checks.PHASE1)
            session.own_array(out, "gradInput", checks.PHASE1)
            values = session._values(grad_output, output_size, input_size, (sd, sh, sw), out)
            checks.check_params(grad_output.spec(), values[1], values[2], sd, sh, sw, out.spec(), strict=strict)
            check_out_memory(out)
            self.output_size, self.input_size = values[1], values[2]
            self.scales = values[3:6]
            super().__init__(session, OP, values, plan=plan, sync=sync)

    def __call__(self, grad_output: Optional[DeviceArray] = None, out: Optional[DeviceArray] = None) -> Any:
        """Run the operator; returns the gradInput device array.  *grad_output*, *out*: other device arrays of the
        same shape, dtype, layout, strides and offset to use from now on (None keeps the current ones)."""
        if grad_output is None and out is None:
            return self.run()
        return self.run(((_GO, grad_output), (_GI, out)))

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        return (f"<PreparedCall {mode} outputSize={getattr(self, 'output_size', None)} "
                f"inputSize={getattr(self, 'input_size', None)} {'closed' if self.closed else 'open'}>")
