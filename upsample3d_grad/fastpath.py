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

The machinery is generic (:class:`acl_bindings.prepared.PreparedCall`, which runs any declared
operator); this module adds the operator's host checks and its argument names.  The C functions
are the library namespace's unchecked ones (:meth:`acl_bindings.Lib.unchecked`: the signatures of
cann-abi.md §1.4 and §1.2, handles as ``c_void_p``, no ``errcheck``); the status is checked by the
call: a non-zero status raises the same :class:`acl_bindings.AclError` (with its code and
``aclGetRecentErrMsg`` text), a NULL handle raises code 561103.

Safety rules kept on every call: a closed session, prepared call or device array raises
:class:`acl_bindings.ClosedError` before anything reaches the library; the session's lock is
held; the session's context is made current on the calling thread; with ``sync=False`` the
session records pending work, and :meth:`DeviceArray.download <upsample3d_grad.DeviceArray.download>`
synchronises before reading.

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

from typing import TYPE_CHECKING, Any, Optional, Sequence

from acl_bindings import prepared

from . import checks
from .checks import cached_check_params
from .op import OP

if TYPE_CHECKING:
    from .session import DeviceArray, Session

__all__ = ["PreparedCall", "cached_check_params"]

# ---------------------------------------------------------------------------------------------
# The prepared call
# ---------------------------------------------------------------------------------------------

#: Schema positions of gradOut and gradInput
_GO, _GI = OP.inputs[0], OP.outputs[0]


class PreparedCall(prepared.PreparedCall):
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
        As for :class:`acl_bindings.prepared.PreparedCall`: a repeatable executor (default) or a
        one-shot call each time, and a stream synchronisation after each call (default).
    strict:
        Passed to :func:`~upsample3d_grad.checks.check_params`.

    Attributes: those of :class:`acl_bindings.prepared.PreparedCall` (``plan``, ``fallback``,
    ``workspace_size``, ``calls``, ``retry_after``).
    """

    def __init__(self, session: Session, grad_output: DeviceArray, output_size: Sequence[int],
                 input_size: Sequence[int], scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *,
                 out: DeviceArray, plan: bool = True, sync: bool = True, strict: bool = True) -> None:
        self._closed = True
        self.session = session
        session._require_device_arrays(grad_output, out, "a prepared call takes device arrays")
        sd, sh, sw = checks.scale_triple(scales)
        with session._lock:
            session._check_open()
            self._check_array(grad_output, "gradOut")
            self._check_array(out, "gradInput")
            if grad_output.buffer is out.buffer:
                raise checks.AclnnParamError(161002, checks.PHASE1,
                                             "gradOut and gradInput share one device buffer; they must not overlap")
            checks.check_params(grad_output.spec(), output_size, input_size, sd, sh, sw, out.spec(), strict=strict)
            checks.check_output_memory(out.shape, tuple(st * out.dtype.itemsize for st in out.strides),
                                       out.dtype.itemsize)
            sd, sh, sw = checks.normalize_scales(sd, sh, sw)
            self.output_size = tuple(int(v) for v in output_size)
            self.input_size = tuple(int(v) for v in input_size)
            self.scales = (sd, sh, sw)
            super().__init__(session, OP, (grad_output, self.output_size, self.input_size, sd, sh, sw, out),
                             plan=plan, sync=sync)

    def __call__(self, grad_output: Optional[DeviceArray] = None, out: Optional[DeviceArray] = None) -> DeviceArray:
        """Run the operator; returns the gradInput device array.

        Parameters
        ----------
        grad_output, out:
            Other device arrays of the same shape, dtype, layout, strides and offset to use
            from now on (the executor is pointed at their addresses); None keeps the current ones.
        """
        if grad_output is None and out is None:
            result: DeviceArray = self._fast()
        else:
            result = self._call(((_GO, grad_output), (_GI, out)))
        return result

    def _check_array(self, arr: DeviceArray, param: str) -> None:
        arr._check_open()
        if arr.session is not self.session:
            raise checks.AclnnParamError(161002, checks.PHASE1, f"{param}: this DeviceArray belongs to another Session")

    def _check_value(self, arr: Any, param: str) -> None:
        self.session._require_device_array(arr, param, "expected a DeviceArray")
        self._check_array(arr, param)

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        state = "closed" if self._closed else "open"
        return (f"<PreparedCall {mode} outputSize={getattr(self, 'output_size', None)} "
                f"inputSize={getattr(self, 'input_size', None)} {state}>")
