"""Lean per-call paths for repeated calls on device arrays: :class:`PreparedCall`.

:meth:`Session.backward <upsample3d_grad.Session.backward>` is general: numpy or device
arrays, any call shape, checks on every call.  A training-style loop calls the operator
thousands of times with the same shapes; there, everything that does not change between
calls is done once by :meth:`Session.prepare <upsample3d_grad.Session.prepare>`:

* the host checks (:func:`upsample3d_grad.checks.check_params`), once;
* the C arguments (aclTensors, aclIntArrays, the scales), made once;
* phase 1 once, with a **repeatable executor** (``plan=True``, the default): each call is then
  phase 2 on the session's stream (plus a stream synchronisation unless ``sync=False``), and
  the executor is pointed at new device addresses (``aclSetInputTensorAddr`` /
  ``aclSetOutputTensorAddr``) only when a different :class:`~upsample3d_grad.DeviceArray` is
  passed;
* or, with ``plan=False`` (or when the library refuses repeatable mode), a **one-shot**
  call: the 2 aclTensors and 2 aclIntArrays are made once and kept; per call phase 1 on them,
  phase 2 and the synchronisation (a different DeviceArray gets a new aclTensor);
* a workspace owned by the prepared call, kept between calls.

It is the generic :class:`acl_bindings.session.PreparedCall` (a :class:`acl_bindings.engine.Call` the
caller owns) with the operator's host checks and argument names.  A closed session, prepared call or
device array raises :class:`acl_bindings.ClosedError` before anything reaches the library; each call holds
the session's lock with its device current; with ``sync=False`` the work is only queued, and
:meth:`DeviceArray.download <upsample3d_grad.DeviceArray.download>` synchronises before reading.

>>> import numpy as np
>>> from upsample3d_grad import Session
>>> with Session(0) as s:
...     go = s.upload(np.ones((1, 1, 2, 2, 2), np.float32))
...     gi = s.empty((1, 1, 1, 1, 1))
...     call = s.prepare(go, (2, 2, 2), (1, 1, 1, 1, 1), out=gi)
...     _ = call()
...     gi.download().ravel().tolist()
[8.0]
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from acl_bindings import session as _generic

from . import checks
from .arrays import DeviceArray
from .op import OP

__all__ = ["PreparedCall"]

#: Schema positions of gradOut and gradInput
_GO, _GI = OP.inputs[0], OP.outputs[0]


class PreparedCall(_generic.PreparedCall):
    """One call shape of the operator on device arrays, prepared once (see the module docstring).

    Build it with :meth:`Session.prepare <upsample3d_grad.Session.prepare>`.  Calls hold the
    session's lock; a prepared call may be used from any thread.

    Parameters
    ----------
    session:
        The session whose device, stream and lock are used.
    grad_output, out:
        :class:`~upsample3d_grad.DeviceArray` of this session: gradOut and gradInput.
    output_size, input_size:
        ``(oD, oH, oW)`` and ``(N, C, iD, iH, iW)``.
    scales:
        ``(scalesD, scalesH, scalesW)``; 0 or None means "not given".
    plan, sync:
        A repeatable executor (default) or a one-shot call each time; a stream synchronisation after
        each call (default).
    strict:
        Passed to :func:`~upsample3d_grad.checks.check_params`.

    Attributes: those of :class:`acl_bindings.session.PreparedCall` (``plan``, ``fallback``,
    ``workspace_size``, ``calls``, ``retry_after``), and ``output_size``, ``input_size``, ``scales``.
    """

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
            checks.check_output_memory(out.shape, tuple(st * out.dtype.itemsize for st in out.strides),
                                       out.dtype.itemsize)
            self.output_size, self.input_size = values[1], values[2]
            self.scales = values[3:6]
            super().__init__(session, OP, values, plan=plan, sync=sync)

    def __call__(self, grad_output: Optional[DeviceArray] = None, out: Optional[DeviceArray] = None) -> Any:
        """Run the operator; returns the gradInput device array.

        Parameters
        ----------
        grad_output, out:
            Other device arrays of the same shape, dtype, layout, strides and offset to use
            from now on (the executor is pointed at their addresses); None keeps the current ones.
        """
        return self.run(((_GO, grad_output), (_GI, out)))

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        return (f"<PreparedCall {mode} outputSize={getattr(self, 'output_size', None)} "
                f"inputSize={getattr(self, 'input_size', None)} {'closed' if self.closed else 'open'}>")
