"""Lean per-call paths for repeated calls on device arrays: :class:`PreparedCall`.

:meth:`Session.backward <upsample3d_grad.Session.backward>` is general: numpy or device
arrays, any call shape, checks on every call.  A training-style loop calls the operator
thousands of times with the same shapes; there, everything that does not change between
calls is done once by :meth:`Session.prepare <upsample3d_grad.Session.prepare>`:

* the host checks (:func:`upsample3d_grad.checks.check_params`), once;
* the C argument arrays (dims, strides, sizes) and the scales, built once as ctypes objects;
* phase 1 once, with a **repeatable executor** (``plan=True``, the default): each call is then
  phase 2 on the session's stream (plus a stream synchronisation unless ``sync=False``), and
  the executor is pointed at new device addresses (``aclSetInputTensorAddr`` /
  ``aclSetOutputTensorAddr``) only when a different :class:`~upsample3d_grad.DeviceArray` is
  passed;
* or, with ``plan=False`` (or when the library refuses repeatable mode), a **lean one-shot**
  call: per call 2 aclTensors and 2 aclIntArrays are created from the prepared ctypes arrays,
  phase 1, phase 2, synchronisation, and the 4 handles destroyed - on error paths too;
* a workspace owned by the prepared call, kept between calls.

The C functions are called through their own ctypes function objects with the signatures of
cann-abi.md §1.4 (derived ctypes table; handles as ``c_void_p``) and §1.2, without the
binding's per-call ``errcheck``: a non-zero status raises the same
:class:`acl_bindings.AclError` (with its code and ``aclGetRecentErrMsg`` text), a NULL handle
raises code 561103.  ``ACL_BINDINGS_LOG_CALLS`` does not log these calls.

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

import ctypes
import logging
import weakref
from collections import OrderedDict
from ctypes import byref, c_double, c_int64, c_size_t, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from acl_bindings import AclError, ClosedError, DeviceBuffer, IntArray, Tensor, lib
from acl_bindings._lib import recent_error_message
from acl_bindings._resource import releases_allowed

from . import checks
from ._api import OP
from .plans import plan_storage

if TYPE_CHECKING:
    from .session import DeviceArray, Session

__all__ = ["PreparedCall", "cached_check_params", "conforms"]

_log = logging.getLogger("upsample3d_grad")
_NULL_HANDLE = 561103  # ACLNN_ERR_INNER_NULLPTR (cann-abi.md §3.5): a constructor returned NULL

# ---------------------------------------------------------------------------------------------
# Lean function objects
# ---------------------------------------------------------------------------------------------


#: The C functions a prepared call uses; signatures from the prototype table (acl_bindings.prototypes and
#: the operator's two phases), called through :meth:`acl_bindings.Lib.lean` function objects.
_NAMES = ("aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray", "aclDestroyIntArray", "aclDestroyAclOpExecutor",
          "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclrtSynchronizeStream", OP.phase1_name,
          OP.phase2_name)


def conforms(name: str, args: Sequence[Any]) -> bool:
    """Whether *args* fit *name*'s C signature for a lean call (see :meth:`acl_bindings.Lib.conforms`)."""
    return bool(lib.conforms(name, args))


#: Calls that only read and write host-side metadata keep the GIL (no release/re-acquire around a
#: sub-microsecond call); phase 2 and the stream synchronisation, which may wait for the device or
#: run a simulated kernel, release it.
_RELEASE_GIL = {OP.phase2_name, "aclrtSynchronizeStream"}


class _Fns:
    """Lean function objects (:meth:`acl_bindings.Lib.lean`) for the loaded backend: no argtypes and
    no errcheck (the caller checks the status)."""

    aclCreateTensor: Any
    aclDestroyTensor: Any
    aclCreateIntArray: Any
    aclDestroyIntArray: Any
    aclDestroyAclOpExecutor: Any
    aclSetInputTensorAddr: Any
    aclSetOutputTensorAddr: Any
    aclrtSynchronizeStream: Any
    phase1: Any
    phase2: Any

    def __init__(self) -> None:
        for name in _NAMES:
            setattr(self, name, lib.lean(name, release_gil=name in _RELEASE_GIL))
        self.phase1 = getattr(self, OP.phase1_name)
        self.phase2 = getattr(self, OP.phase2_name)


_fns: Optional[_Fns] = None


def _lean() -> _Fns:
    global _fns
    if _fns is None:
        _fns = _Fns()
    return _fns


def _status_error(code: int, func: str) -> AclError:
    return AclError.from_status(int(code), func, recent_error_message())


def _null_error(func: str) -> AclError:
    return AclError.from_status(_NULL_HANDLE, func, recent_error_message() or f"{func} returned NULL")


def _as_void_p(handle: Any) -> c_void_p:
    return ctypes.cast(handle, c_void_p)


# ---------------------------------------------------------------------------------------------
# Cached host checks (also used by Session.backward)
# ---------------------------------------------------------------------------------------------

_CHECK_CACHE: OrderedDict[tuple[Any, ...], tuple[float, float, float]] = OrderedDict()
_CHECK_CACHE_SIZE = 256


def _plain_ints(values: Any) -> Optional[tuple[int, ...]]:
    if type(values) not in (tuple, list):
        return None
    if not all(type(v) is int for v in values):
        return None
    return tuple(values)


def cached_check_params(grad_out: Optional[checks.TensorSpec], output_size: Any, input_size: Any,
                        scales_d: Any, scales_h: Any, scales_w: Any, grad_in: Optional[checks.TensorSpec], *,
                        strict: bool = True) -> tuple[float, float, float]:
    """:func:`upsample3d_grad.checks.check_params`, remembering the arguments that passed.

    The checks depend only on their arguments, so a repeated call with the same specs, sizes,
    scales and *strict* skips them.  Only plain arguments are remembered: sizes as tuples or
    lists of ``int``, scales as ``None``, ``int`` or ``float``, all three scales > 0 or none
    (a mixed set warns on every call).  Anything else, and every failure, goes through
    :func:`~upsample3d_grad.checks.check_params` each time.

    Returns
    -------
    tuple of float
        The scales as CANN applies them (as :func:`~upsample3d_grad.checks.check_params`).
    """
    osz = _plain_ints(output_size)
    isz = _plain_ints(input_size)
    raw = (scales_d, scales_h, scales_w)
    key: Optional[tuple[Any, ...]] = None
    if (osz is not None and isz is not None and grad_out is not None and grad_in is not None
            and all(s is None or type(s) in (int, float) for s in raw)):
        given = [s is not None and s > 0 for s in raw]
        if all(given) or not any(given):
            key = (grad_out, osz, isz, raw, grad_in, bool(strict))
    if key is not None:
        hit = _CHECK_CACHE.get(key)
        if hit is not None:
            return hit
    used = checks.check_params(grad_out, output_size, input_size, scales_d, scales_h, scales_w, grad_in,
                               strict=strict)
    if key is not None:
        _CHECK_CACHE[key] = used
        if len(_CHECK_CACHE) > _CHECK_CACHE_SIZE:
            _CHECK_CACHE.popitem(last=False)
    return used


# ---------------------------------------------------------------------------------------------
# The prepared call
# ---------------------------------------------------------------------------------------------


def _c_array(values: Sequence[int]) -> Any:
    return (c_int64 * len(values))(*values)


class _TensorArgs:
    """The aclCreateTensor arguments of a device array, as ready ctypes objects."""

    __slots__ = ("dims", "ndim", "dtype", "strides", "offset", "format", "storage", "nstorage", "address", "args")

    def __init__(self, arr: DeviceArray) -> None:
        self.dims = _c_array(arr.shape)
        self.ndim = c_uint64(len(arr.shape))
        self.dtype = int(arr.tensor.acl_dtype)  # C int (enums are ints, cann-abi.md §2): passed as a Python int
        self.strides = _c_array(arr.strides)
        self.offset = c_int64(arr.offset)
        self.format = int(arr.tensor.format)  # C int (aclFormat)
        self.storage = _c_array(arr.tensor.storage_dims)
        self.nstorage = c_uint64(len(arr.tensor.storage_dims))
        self.set_address(arr.buffer.ptr)

    def set_address(self, address: int) -> None:
        self.address = c_void_p(address)
        # the storage is DeviceArray's own tensor's: 1-D, the whole buffer (cann-abi.md §8.1)
        self.args = (self.dims, self.ndim, self.dtype, self.strides, self.offset, self.format, self.storage,
                     self.nstorage, self.address)


class _Leftovers:
    """The per-call handles of the lean one-shot path, in cells the finalizer net can read.

    ``cells`` hold the call's two aclTensors and two aclIntArrays while it runs, ``ex`` the executor
    phase 1 wrote; ``refused`` the handles whose destroy the library refused (or that an interrupted
    call left behind), as ``(destroy function name, handle)``.
    """

    __slots__ = ("cells", "ex", "refused")

    _NAMES = ("aclDestroyTensor", "aclDestroyTensor", "aclDestroyIntArray", "aclDestroyIntArray")

    def __init__(self) -> None:
        self.cells: list[Any] = [None, None, None, None]
        self.ex = c_void_p()
        self.refused: list[tuple[str, Any]] = []

    def salvage(self) -> None:
        """Move whatever the cells still hold to ``refused`` (each in one statement: never lost, never twice)."""
        for k, name in enumerate(self._NAMES):
            if self.cells[k]:
                self.refused, self.cells[k] = [*self.refused, (name, self.cells[k])], None
        if self.ex:
            self.refused, self.ex.value = [*self.refused, ("aclDestroyAclOpExecutor", c_void_p(self.ex.value))], None

    def destroy(self, fns: Any) -> None:
        """Destroy every handle in ``refused`` (and the cells); keep those refused again, raise the first error."""
        self.salvage()
        first, name = 0, ""
        for entry in list(self.refused):
            self.refused = [e for e in self.refused if e is not entry] if not (
                rc := getattr(fns, entry[0])(entry[1])) else self.refused
            if rc and not first:
                first, name = rc, entry[0]
        if first:
            raise _status_error(first, name)


def _release_leftovers(fns: _Fns, left: _Leftovers, device: Any) -> None:
    """The finalizer net of a prepared call's per-call handles (errors are logged, never raised)."""
    if not (left.refused or left.ex or any(left.cells)) or not releases_allowed():
        return
    try:
        with device.active():
            left.destroy(fns)
    except Exception as exc:
        _log.debug("release of a prepared call's handles by finalizer failed: %s", exc)


class PreparedCall:
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
    plan:
        Phase 1 once with a repeatable executor (default).  False: a lean one-shot call each
        time.  When the library refuses repeatable mode, the call falls back to one-shot,
        :attr:`fallback` says why, and every :attr:`retry_after` calls it asks again.
    sync:
        Synchronise the stream after each call (default).  False: only queue the work.
    strict:
        Passed to :func:`~upsample3d_grad.checks.check_params`.

    Attributes
    ----------
    plan:
        Whether a repeatable executor is in use.
    fallback:
        The error text when repeatable mode was refused, else None.
    workspace_size:
        Bytes of workspace phase 1 asked for (at preparation).
    calls:
        Completed calls.
    retry_after:
        One-shot calls after a refused plan before the next request (class attribute, 64).
    """

    retry_after = 64

    def __init__(self, session: Session, grad_output: DeviceArray, output_size: Sequence[int],
                 input_size: Sequence[int], scales: Sequence[Optional[float]] = (0.0, 0.0, 0.0), *,
                 out: DeviceArray, plan: bool = True, sync: bool = True, strict: bool = True) -> None:
        from .session import DeviceArray

        self._closed = True
        self._executor: Any = None
        self._tensors: tuple[Tensor, ...] = ()
        self._arrays: tuple[IntArray, ...] = ()
        self._ws: Optional[DeviceBuffer] = None
        self._ws_ptr: Optional[c_void_p] = None
        self._ws_cap = 0
        self._left = _Leftovers()  # per-call handles not destroyed yet (refused, or a call interrupted)
        self._stale: list[Any] = []  # objects of a failed plan retry whose release was refused
        self._released = True  # nothing owned yet
        self.session = session
        self.sync = bool(sync)
        self.calls = 0
        self.plan = False
        self.fallback: Optional[str] = None
        self._retry_left = 0  # one-shot calls left before a refused plan is asked for again
        self.workspace_size = 0
        for arr, param in ((grad_output, "gradOut"), (out, "gradInput")):
            if not isinstance(arr, DeviceArray):
                raise checks.AclnnParamError(161002, checks.PHASE1, f"{param}: a prepared call takes device arrays, "
                                                                    f"got {type(arr).__name__}")
        try:
            sd, sh, sw = scales
        except (TypeError, ValueError):
            raise checks.AclnnParamError(161002, checks.PHASE1, f"scales: expected 3 values, got {scales!r}") from None
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
            self._fns = _lean()
            self._stream = c_void_p(session.stream.handle)
            self._device = session.device
            self._lock = session._lock
            self._go, self._gi = grad_output, out
            self._go_args, self._gi_args = _TensorArgs(grad_output), _TensorArgs(out)
            self._osz = _c_array(self.output_size)
            self._isz = _c_array(self.input_size)
            self._n_osz, self._n_isz = c_uint64(len(self.output_size)), c_uint64(len(self.input_size))
            self._scales_c = (c_double(sd), c_double(sh), c_double(sw))
            self._size_out = c_uint64()
            self._ex_out = c_void_p()
            self._size_ref, self._ex_ref = byref(self._size_out), byref(self._ex_out)
            self._left.ex = self._ex_out
            # the garbage collector's net for the per-call handles (never self: see _Leftovers)
            fin = weakref.finalize(self, _release_leftovers, self._fns, self._left, session.device)
            fin.atexit = False
            self._released = False
            session._register_prepared(self)  # from here on, session.close() releases what this call owns
            try:
                with self._device.active():
                    self._prepare(bool(plan))
            except BaseException:
                self._closed = True
                try:
                    self._release()
                except Exception:
                    pass  # the first error is the one to report; close() retries what is left
                raise
            self._closed = False

    # ------------------------------------------------------------------ preparation
    def _check_array(self, arr: DeviceArray, param: str) -> None:
        arr._check_open()
        if arr.session is not self.session:
            raise checks.AclnnParamError(161002, checks.PHASE1, f"{param}: this DeviceArray belongs to another Session")

    def _prepare(self, plan: bool) -> None:
        """Phase 1 once: learn the workspace size; keep a repeatable executor when *plan*."""
        go, gi = self._go, self._gi
        # a plan's own storage description, as the Session's plans (upsample3d_grad.plans: the op cache);
        # one at a time: when a later one fails, the earlier ones are already ours to close (and retry)
        storage = plan_storage if plan else tuple
        self._tensors = (Tensor(go.shape, go.dtype, strides=go.strides, offset=go.offset, format=go.tensor.format,
                                storage_dims=storage(go.tensor.storage_dims), address=go.buffer.ptr),)
        self._tensors += (Tensor(gi.shape, gi.dtype, strides=gi.strides, offset=gi.offset, format=gi.tensor.format,
                                 storage_dims=storage(gi.tensor.storage_dims), address=gi.buffer.ptr),)
        self._arrays = (IntArray(self.output_size),)
        self._arrays += (IntArray(self.input_size),)
        # the executor keeps the tensors and arrays it refers to alive (if the call is dropped unclosed)
        size, executor = OP.get_workspace_size(self._tensors[0], *self._arrays, *self.scales, self._tensors[1],
                                               keep=(*self._tensors, *self._arrays))
        self._executor = executor
        self.workspace_size = size
        self._ensure_workspace(size)
        if executor.handle is not None and plan:
            try:
                executor.make_repeatable()
            except AclError as exc:
                self.fallback = str(exc)
                self._retry_left = self.retry_after
            else:
                self.plan = True
        if self.plan:
            self._use_plan(size)
        else:
            # an executor phase 2 never ran is destroyed (cann-abi.md §1.3); each call makes its own
            executor.close()
            self._executor = None
            for obj in (*self._tensors, *self._arrays):
                obj.close()
            self._tensors, self._arrays = (), ()
            self._run = self._make_oneshot()
        self._check_conformance()

    def _use_plan(self, size: int) -> None:
        """Calls run phase 2 of the repeatable executor in ``self._executor`` from now on."""
        assert self._executor is not None
        self._ex = _as_void_p(self._executor.handle)
        self._t_go = _as_void_p(self._tensors[0].handle)
        self._t_gi = _as_void_p(self._tensors[1].handle)
        self._size = c_uint64(size)
        self._run = self._run_plan

    def _retry_plan(self) -> None:
        """Ask again for a repeatable executor, :attr:`retry_after` one-shot calls after a refusal.

        On success the call uses it from now on (and :attr:`fallback` is None again); a refusal
        (any :class:`~acl_bindings.AclError`) keeps the one-shot path and schedules the next try.
        """
        go, gi = self._go, self._gi
        made: list[Any] = []
        try:
            with self._device.active():
                # one at a time: when a later one fails, the earlier ones are in *made* to close (and retry)
                made.append(Tensor(go.shape, go.dtype, strides=go.strides, offset=go.offset, format=go.tensor.format,
                                   storage_dims=plan_storage(go.tensor.storage_dims), address=go.buffer.ptr))
                made.append(Tensor(gi.shape, gi.dtype, strides=gi.strides, offset=gi.offset, format=gi.tensor.format,
                                   storage_dims=plan_storage(gi.tensor.storage_dims), address=gi.buffer.ptr))
                tensors = (made[0], made[1])
                made.append(IntArray(self.output_size))
                made.append(IntArray(self.input_size))
                arrays = (made[2], made[3])
                size, executor = OP.get_workspace_size(tensors[0], *arrays, *self.scales, tensors[1],
                                                       keep=(*tensors, *arrays))
                made.insert(0, executor)  # destroyed first
                executor.make_repeatable()
                self._ensure_workspace(size)
        except BaseException as exc:
            for obj in made:
                try:
                    obj.close()
                except Exception:
                    pass
            self._stale += [obj for obj in made if not obj.closed]  # refused: close() retries them
            if not isinstance(exc, AclError):
                raise
            self.fallback = str(exc)
            self._retry_left = self.retry_after
            return
        self._executor, self._tensors, self._arrays = executor, tensors, arrays
        self.workspace_size = size
        self.plan, self.fallback = True, None
        self._use_plan(size)
        self._check_conformance()

    def _check_conformance(self) -> None:
        """Every prepared argument tuple has exactly the C types of the signature table."""
        sd, sh, sw = self._scales_c
        checks_ = [("aclCreateTensor", self._go_args.args), ("aclCreateTensor", self._gi_args.args),
                   ("aclCreateIntArray", (self._osz, self._n_osz)), ("aclCreateIntArray", (self._isz, self._n_isz)),
                   (OP.phase1_name, (c_void_p(), c_void_p(), c_void_p(), sd, sh, sw, c_void_p(), self._size_ref,
                                     self._ex_ref)),
                   (OP.phase2_name, (self._ws_ptr, self._size_out, self._ex_out, self._stream)),
                   ("aclrtSynchronizeStream", (self._stream,))]
        if self.plan:
            checks_ += [(OP.phase2_name, (self._ws_ptr, self._size, self._ex, self._stream)),
                        ("aclSetInputTensorAddr", (self._ex, _ZERO, self._t_go, c_void_p())),
                        ("aclSetOutputTensorAddr", (self._ex, _ZERO, self._t_gi, c_void_p()))]
        for name, args in checks_:
            if not conforms(name, args):
                raise TypeError(f"internal error: prepared arguments of {name} do not match its C signature")

    def _ensure_workspace(self, size: int) -> None:
        if size <= (self._ws.nbytes if self._ws is not None else 0):
            return
        if self._ws is not None:
            self.session._sync()  # queued work may still use the smaller one
            self._ws.close()
            self._ws = None
            self._ws_ptr = None
            self._ws_cap = 0
        self._ws = DeviceBuffer(self._device, size)
        self._ws_ptr = c_void_p(self._ws.ptr)
        self._ws_cap = size

    # ------------------------------------------------------------------ calling
    def __call__(self, grad_output: Optional[DeviceArray] = None, out: Optional[DeviceArray] = None) -> DeviceArray:
        """Run the operator; returns the gradInput device array.

        Parameters
        ----------
        grad_output, out:
            Other device arrays of the same shape, dtype, layout, strides and offset to use
            from now on (the executor is pointed at their addresses); None keeps the current ones.
        """
        with self._lock:  # (a with statement: a real Ctrl-C cannot fall between acquiring and the try)
            if self._closed or self.session._closed:
                raise ClosedError("this PreparedCall is closed" if self._closed else "this Session is closed")
            if grad_output is not None and grad_output is not self._go:
                self._rebind(grad_output, True)
            if out is not None and out is not self._gi:
                self._rebind(out, False)
            if self._go.buffer.closed or self._gi.buffer.closed:
                self._check_arrays_open()
            if self._device.is_current():  # (read from the runtime: nothing to switch, nothing to restore)
                self._run()
            else:
                with self._device.active():
                    self._run()
            self.calls += 1
            if self._retry_left:  # a plan was refused: ask again now and then
                self._retry_left -= 1
                if not self._retry_left:
                    self._retry_plan()
            return self._gi

    def _check_arrays_open(self) -> None:
        self._go._check_open()
        self._gi._check_open()

    def _rebind(self, arr: DeviceArray, is_input: bool) -> None:
        """Use *arr* from now on: same layout as before, new address."""
        old = self._go if is_input else self._gi
        other = self._gi if is_input else self._go
        try:
            same = (arr.session is self.session and arr.shape == old.shape and arr.dtype == old.dtype
                    and arr.strides == old.strides and arr.offset == old.offset and arr.layout == old.layout
                    and arr.buffer is not other.buffer and not arr.buffer.closed)
        except AttributeError:
            same = False
        if not same:
            self._explain_rebind(arr, is_input, old, other)
        ptr = arr.buffer.ptr
        args = self._go_args if is_input else self._gi_args
        if arr.tensor.storage_dims != old.tensor.storage_dims:
            # a one-shot call describes the new buffer (a plan's executor keeps its phase-1 storage, which
            # covers the same view: only phase 1 checks it, cann-abi.md §8.1)
            args.storage = _c_array(arr.tensor.storage_dims)
            args.nstorage = c_uint64(len(arr.tensor.storage_dims))
        if self.plan and ptr != args.address.value:
            f = self._fns
            if is_input:
                rc = f.aclSetInputTensorAddr(self._ex, _ZERO, self._t_go, c_void_p(ptr))
                if rc:
                    raise _status_error(rc, "aclSetInputTensorAddr")
                self._tensors[0].address = ptr
            else:
                rc = f.aclSetOutputTensorAddr(self._ex, _ZERO, self._t_gi, c_void_p(ptr))
                if rc:
                    raise _status_error(rc, "aclSetOutputTensorAddr")
                self._tensors[1].address = ptr
        args.set_address(ptr)
        if is_input:
            self._go = arr
        else:
            self._gi = arr

    def _explain_rebind(self, arr: Any, is_input: bool, old: DeviceArray, other: DeviceArray) -> None:
        """Raise the error that says why *arr* cannot replace *old*."""
        from .session import DeviceArray

        param = "gradOut" if is_input else "gradInput"
        if not isinstance(arr, DeviceArray):
            raise checks.AclnnParamError(161002, checks.PHASE1, f"{param}: expected a DeviceArray, "
                                                                f"got {type(arr).__name__}")
        self._check_array(arr, param)
        if arr.buffer is other.buffer:
            raise checks.AclnnParamError(161002, checks.PHASE1,
                                         "gradOut and gradInput share one device buffer; they must not overlap")
        raise checks.AclnnParamError(
            161002, checks.PHASE1,
            f"{param}: a prepared call takes arrays like the one it was prepared with: shape {old.shape} "
            f"dtype {old.dtype} layout {old.layout} strides {old.strides} offset {old.offset}; got shape "
            f"{arr.shape} dtype {arr.dtype} layout {arr.layout} strides {arr.strides} offset {arr.offset}")

    def _run_plan(self) -> None:
        f = self._fns
        rc = f.phase2(self._ws_ptr, self._size, self._ex, self._stream)
        if rc:
            raise _status_error(rc, OP.phase2_name)
        if self.sync:
            rc = f.aclrtSynchronizeStream(self._stream)
            if rc:
                self.session._pending = True
                raise _status_error(rc, "aclrtSynchronizeStream")
        else:
            self.session._pending = True

    def _make_oneshot(self) -> Callable[[], None]:
        """The one-shot call, as a closure over everything that does not change between calls."""
        f = self._fns
        create_tensor, create_array = f.aclCreateTensor, f.aclCreateIntArray
        destroy_tensor, destroy_array = f.aclDestroyTensor, f.aclDestroyIntArray
        destroy_executor = f.aclDestroyAclOpExecutor
        phase1, phase2, synchronize = f.phase1, f.phase2, f.aclrtSynchronizeStream
        go_args, gi_args = self._go_args, self._gi_args  # their .args change when arrays are rebound
        osz, n_osz, isz, n_isz = self._osz, self._n_osz, self._isz, self._n_isz
        sd, sh, sw = self._scales_c
        size_out, ex, size_ref, ex_ref = self._size_out, self._ex_out, self._size_ref, self._ex_ref
        stream = self._stream
        sync, session = self.sync, self.session

        left = self._left
        cells = left.cells  # aclTensor gradOut, aclTensor gradInput, aclIntArray outputSize, aclIntArray inputSize

        def run() -> None:
            if cells[0] or cells[1] or cells[2] or cells[3] or ex:
                left.salvage()  # an earlier call was interrupted: its handles are destroyed by close()
            done = False
            # each handle is stored in the statement that creates it: a cell the finalizer net reads
            cells[0] = create_tensor(*go_args.args)
            try:
                if not cells[0]:
                    raise _null_error("aclCreateTensor")
                cells[1] = create_tensor(*gi_args.args)
                if not cells[1]:
                    raise _null_error("aclCreateTensor")
                cells[2] = create_array(osz, n_osz)
                if not cells[2]:
                    raise _null_error("aclCreateIntArray")
                cells[3] = create_array(isz, n_isz)
                if not cells[3]:
                    raise _null_error("aclCreateIntArray")
                rc = phase1(cells[0], cells[2], cells[3], sd, sh, sw, cells[1], size_ref, ex_ref)
                if rc:
                    raise _status_error(rc, OP.phase1_name)
                if ex:
                    size = size_out.value
                    if size > self._ws_cap:
                        try:
                            self._ensure_workspace(size)
                        except BaseException:
                            # never run: destroy it (cann-abi.md §1.3)
                            handle, ex.value = ex.value, None  # (taken before the call: see release_cell)
                            if destroy_executor(handle):
                                ex.value = handle
                            left.salvage()
                            raise
                    # phase 2 consumes a single-use executor, whether or not it succeeds (§1.3): forgotten
                    # before the call (see release_cell)
                    ws, executor = self._ws_ptr if size else None, c_void_p(ex.value)  # (no call between
                    ex.value = None  # taking it and phase 2's)
                    rc = phase2(ws, size_out, executor, stream)
                    if rc:
                        raise _status_error(rc, OP.phase2_name)
                    if sync:
                        rc = synchronize(stream)
                        if rc:
                            session._pending = True
                            raise _status_error(rc, "aclrtSynchronizeStream")
                    else:
                        session._pending = True
                done = True
            finally:
                # reverse order of creation; every handle is destroyed, on error paths too; each is taken
                # out of its cell before its destroy and put back when refused (see release_cell)
                r1 = r2 = r3 = r4 = 0
                if cells[3]:
                    handle, cells[3] = cells[3], None
                    if r1 := destroy_array(handle):
                        cells[3] = handle
                if cells[2]:
                    handle, cells[2] = cells[2], None
                    if r2 := destroy_array(handle):
                        cells[2] = handle
                if cells[1]:
                    handle, cells[1] = cells[1], None
                    if r3 := destroy_tensor(handle):
                        cells[1] = handle
                if cells[0]:
                    handle, cells[0] = cells[0], None
                    if r4 := destroy_tensor(handle):
                        cells[0] = handle
                if r1 or r2 or r3 or r4:  # still live: kept, and destroyed again by close()
                    left.salvage()
                    if not done:
                        recent_error_message()  # another error is being raised: this one's message must not linger
            # reached only when nothing above raised: a refused destroy is then the error to report
            if r1 or r2:
                raise _status_error(r1 or r2, "aclDestroyIntArray")
            if r3 or r4:
                raise _status_error(r3 or r4, "aclDestroyTensor")

        return run

    # ------------------------------------------------------------------ lifetime
    @property
    def closed(self) -> bool:
        """True after :meth:`close` (or once the session closed it)."""
        return self._closed

    @property
    def _refused(self) -> list[tuple[str, Any]]:
        """Per-call handles whose destroy the library refused (destroyed again by :meth:`close`)."""
        return self._left.refused

    def close(self) -> None:
        """Synchronise the stream, then release the executor, handles and workspace.

        Idempotent, and retryable: when a step fails, the error is raised and what is not released
        yet stays owned, so another ``close()`` (or the session's) finishes the job.  The call is
        closed for use from the first ``close()`` on.
        """
        with self.session._lock:
            self._closed = True
            if self._released:
                return
            if not self.session.closed and releases_allowed():  # (after finalize, or in a forked child: no)
                self.session._sync()  # (fails: nothing was released, queued work may still use it)
            self._release()
            self._released = True

    def _release(self) -> None:
        """Release everything still owned; what fails stays owned (first error raised)."""
        errors: list[BaseException] = []

        def attempt(release: Callable[[], None]) -> bool:
            try:
                release()
            except Exception as exc:  # keep releasing the rest
                errors.append(exc)
                return False
            return True

        if self._left.cells != [None] * 4 or self._left.ex or self._left.refused:
            attempt(lambda: self._left.destroy(self._fns))
        if self._executor is not None and attempt(self._executor.close):
            self._executor = None
        for obj in self._stale:
            attempt(obj.close)
        self._stale = [obj for obj in self._stale if not obj.closed]
        for obj in (*self._tensors, *self._arrays):
            attempt(obj.close)
        self._tensors = tuple(t for t in self._tensors if not t.closed)
        self._arrays = tuple(a for a in self._arrays if not a.closed)
        if self._ws is not None and attempt(self._ws.close):
            self._ws, self._ws_ptr, self._ws_cap = None, None, 0
        if errors:
            try:
                raise errors[0]
            finally:
                errors.clear()  # no cycle through this frame

    def __enter__(self) -> PreparedCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        state = "closed" if self._closed else "open"
        return (f"<PreparedCall {mode} outputSize={getattr(self, 'output_size', None)} "
                f"inputSize={getattr(self, 'input_size', None)} {state}>")


_ZERO = c_size_t(0)
