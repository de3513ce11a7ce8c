"""PyTorch tensors in and out: CPU tensors as numpy views, NPU tensors (torch_npu) in place on torch_npu's current
stream (docs/operators.md, "torch tensors"); torch is imported only here, on use."""

from __future__ import annotations

import atexit
import contextlib
import threading
import warnings
from typing import Any, Callable, NamedTuple, Sequence

from acl_bindings import AclnnParamError, dtype_to_acl, load_backend
from acl_bindings.engine import Call, CallCache, run_once
from acl_bindings.enums import as_dtype
from acl_bindings.meta import TensorArg
from acl_bindings.runtime import initialized_first
from acl_bindings.torch import (
    BorrowedArray,
    TensorDescription,
    TorchWorkspace,
    is_tensor,
    numpy_to_tensor,
    tensor_to_numpy,
    torch_module,
)

from . import checks
from ._torch_host import host_view
from .arguments import plain_key
from .forward import OP as FORWARD
from .forward import result_shape
from .forward_checks import check_forward_params
from .op import OP

__all__ = ["tensor_to_numpy", "numpy_to_tensor", "describe_tensor", "TorchDescription", "is_tensor",
           "host_view", "kept_npu_call", "release_npu_calls"]

#: aclFormat values that mean "plain strided memory" for a 5-D tensor (ND, NDHWC, NCDHW; cann-abi.md §3.2)
_PLAIN_FORMATS = (2, 27, 30)


# --------------------------------------------------------------------------- tensor descriptions

class TorchDescription(TensorDescription):
    """A tensor's aclnn description (:class:`acl_bindings.torch.TensorDescription`) in the operator's dtypes
    (another is a 161002 naming *param* of *func*)."""

    def __init__(self, t: Any, param: str = "gradOut", func: str = checks.PHASE1) -> None:
        torch = torch_module()
        name = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(t.dtype)
        if name is None:
            raise AclnnParamError(161002, func, f"{param}: dtype must be {checks.SUPPORTED_NAMES}, got {t.dtype}")
        super().__init__(t, as_dtype(name))  # (ml_dtypes is imported for a bfloat16 tensor only)


def describe_tensor(t: Any) -> TorchDescription:
    """The aclTensor description of *t* (no device call; works for CPU tensors too)."""
    return TorchDescription(t)


# --------------------------------------------------------------------------- NPU tensors (torch_npu)

_order_warned = False
_one_runtime = False  # checked that torch_npu maps no other runtime than ours (the maps cost 1-2 ms)


def _npu_setup(tensors: Sequence[tuple[str, Any]], func: str) -> _TorchNpu:
    """What the NPU path uses of torch and torch_npu, once the tensors are plain-format tensors on one NPU of this
    binding's runtime."""
    api = _api or _torch_npu(tensors[0][0])
    global _one_runtime, _order_warned
    if not _one_runtime:  # torch_npu's runtime is ours (TwoRuntimesError otherwise); once per process
        load_backend().check_one_runtime()
        _one_runtime = True
    if initialized_first() and not _order_warned:  # this package's aclInit came before torch_npu's: warn once
        _order_warned = True
        warnings.warn("upsample3d_grad initialised ACL before torch_npu did, so torch_npu's aclInit got 100002 and "
                      "its ACL config (acl.json) was not applied: import torch_npu before the first call of this "
                      "package (it then lets torch_npu initialise first)", RuntimeWarning, stacklevel=3)
    device = tensors[0][1].device
    for name, t in tensors:
        if t is None:
            continue
        if not is_tensor(t) or t.device != device:
            raise TypeError(f"{name}: expected a tensor on {device}, got "
                            f"{t.device if is_tensor(t) else type(t).__name__}")
        try:
            npu_fmt: int | None = int(api.npu_format(t))
        except Exception:  # an older torch_npu without this query (for some tensors): assume plain memory
            npu_fmt = None
        if npu_fmt is not None and npu_fmt not in _PLAIN_FORMATS:
            raise AclnnParamError(161002, func,
                                  f"{name}: the tensor uses the NPU-private format {npu_fmt}; convert it first "
                                  "with torch_npu.npu_format_cast(t, 2) (ND)")
    return api


class _TorchNpu(NamedTuple):
    """What the NPU path uses of torch and torch_npu, looked up once."""

    torch: Any
    torch_npu: Any
    get_device: Callable[[], int]
    raw_stream: Callable[[int], int]
    #: torch_npu's query of a tensor's storage format: its operator itself where it has one (the Python
    #: ``torch_npu.get_npu_format`` wraps it and makes an enum of the answer on every call)
    npu_format: Callable[[Any], Any]


_api: _TorchNpu | None = None


def _torch_npu(param: str) -> _TorchNpu:
    global _api
    torch = torch_module()
    try:
        import torch_npu
    except ImportError as exc:
        raise ImportError(f"{param} is on an NPU but torch_npu cannot be imported") from exc
    op = getattr(getattr(torch.ops, "npu", None), "get_npu_format", None)
    _api = _TorchNpu(torch, torch_npu, torch_npu._C._npu_getDevice, torch_npu._C._npu_getCurrentRawStream,
                     getattr(op, "default", None) or torch_npu.get_npu_format)
    return _api


def _stream_workspace(api: _TorchNpu, device: Any) -> TorchWorkspace:
    """torch_npu's current stream on *device*, as its workspace (the caller holds ``_npu_lock``).  Reading it drains
    torch_npu's task queue (NPUStream::stream()), so earlier torch work reaches the stream before our kernel."""
    stream = api.raw_stream(device.index)
    if not stream:  # (torch_npu answers 0 when draining its queue failed: never launch on the NULL stream)
        raise RuntimeError(f"torch_npu's current stream on {device} is NULL (its task queue could not be "
                           "drained); the operator was not launched")
    workspace = _npu_workspaces.get((device, stream))
    if workspace is None:
        workspace = _npu_workspaces[device, stream] = TorchWorkspace(api.torch, device, stream)
    return workspace


def _npu_launch(op: Any, values: tuple[Any, ...], device: Any, api: _TorchNpu) -> None:
    """Run *op* once on borrowed NPU memory, on torch_npu's current stream with its workspace."""
    with api.torch_npu.npu.device(device.index), _npu_lock:
        workspace = _stream_workspace(api, device)
        run_once(op, values, workspace.reserve, workspace.stream)


# --------------------------------------------------------------------------- the kept calls of NPU tensors

#: NPU calls with no *out* whose key (the input's metadata, the sizes, scales, layout, strict) passed
#: the host checks: their kept plan, by device; ``kept`` holds the argument templates (address aside)
_npu_calls: dict[Any, CallCache] = {}
#: the call shapes kept per device: an eviction synchronises the device (the executor may still be queued), so a
#: workload of many shapes must rarely reach it.  CANN's own aclnn cache keeps 10000 entries a thread by default
#: (ACLNN_CACHE_LIMIT, cann-abi.md §8.6); a kept call here is about 11 KB of Python objects
NPU_PLANS = 1024
#: the workspace of each (device, stream) the NPU path ran on, reused in that stream's order (under ``_npu_lock``)
_npu_workspaces: dict[tuple[Any, int], TorchWorkspace] = {}
_npu_lock = threading.RLock()
#: the tensor types of the kept calls (a repeat needs no other check that its argument is a tensor)
_kept_types: set[type] = set()


def kept_npu_call(op: Any, x: Any, sizes: tuple[Any, ...], scales: tuple[Any, ...], strict: Any,
                  layout: Any, return_type: str) -> Any:
    """*op* on NPU tensor *x* on the plan kept for this key (the host checks passed for it before), into a new
    tensor on torch_npu's current stream: no check, no new descriptor; as numpy for ``return_type="numpy"``.
    None when no plan is kept for it (the full call then runs)."""
    api = _api
    if api is None or type(x) not in _kept_types or return_type not in ("torch", "numpy"):
        return None
    device = x.device
    cache = _npu_calls.get(device)
    plain = plain_key(sizes, scales, strict, layout)
    if cache is None or plain is None:
        return None
    try:
        if api.npu_format(x) not in _PLAIN_FORMATS:
            return None
    except Exception:  # (the full call treats it)
        return None
    storage = x.untyped_storage()
    key = _npu_key(op, x, storage, plain)
    with _npu_lock:
        call = cache.get(key)
        if call is None or not call.plan or call.kept is None:  # (a refused plan's one-shot runs: the full call)
            return None
        out = api.torch.empty(*call.kept[-1].shape, dtype=x.dtype, device=device)
        addresses = (storage.data_ptr(), out.untyped_storage().data_ptr())
        if api.get_device() == device.index:  # (its context is current: a guard would cost more than the call)
            workspace = _stream_workspace(api, device)
            call.run_at(addresses, workspace, workspace.stream)
        else:
            with api.torch_npu.npu.device(device.index):
                workspace = _stream_workspace(api, device)
                call.run_at(addresses, workspace, workspace.stream)
    return out if return_type == "torch" else tensor_to_numpy(out.cpu())


def _npu_key(op: Any, x: Any, storage: Any, plain: tuple[Any, ...]) -> tuple[Any, ...]:
    """The kept-call key of an NPU call on *x* (a tensor :func:`_npu_setup` accepted, *storage* its untyped
    storage) with the :func:`plain_key` *plain* of its other arguments."""
    return (op.name, x.device, x.dtype, x.shape, x.stride(), x.storage_offset(), storage.nbytes(), plain)


def release_npu_calls() -> None:
    """Release the plans kept for NPU tensors (after each device's work completed); later calls make new ones.
    Runs at exit (before torch_npu's own exit hook) and in :func:`upsample3d_grad.functional.close_default_session`."""
    with _npu_lock:
        caches = list(_npu_calls.items())
        _npu_calls.clear()
        if not caches:
            return
        _npu_workspaces.clear()  # (torch's allocator orders their reuse on their streams)
        torch = torch_module()
        for device, cache in caches:
            torch.npu.synchronize(device)
            with torch.npu.device(device):
                cache.clear()


def _npu_keep(op: Any, key: tuple[Any, ...], values: tuple[Any, ...], x: Any, api: _TorchNpu) -> None:
    """A full NPU call on *x* whose host checks passed: make the plan of its shape, keep it for *key*'s repeats,
    and run this call on it (one phase 1 in all)."""
    device = x.device
    with _npu_lock, api.torch_npu.npu.device(device.index):
        if not _npu_calls:  # (registered after torch_npu's hook, so it runs first: torch_npu is still up)
            atexit.register(_release_at_exit)
        cache = _npu_calls.setdefault(device, CallCache(NPU_PLANS))
        borrowed = tuple(BorrowedArray(v) if isinstance(v, TensorArg) else v for v in values)
        call = cache.get(key)
        if call is None:
            call = Call(op, borrowed, plan=True, lock=_npu_lock)
            call.kept = values
            torch = api.torch

            def before_evict() -> None:  # its executor may still be queued: the device's work completes first
                torch.npu.synchronize(device)

            cache.add(key, call, before_evict)
        _kept_types.add(type(x))
        workspace = _stream_workspace(api, device)
        call.run(borrowed, workspace, workspace.stream)


def _release_at_exit() -> None:
    with contextlib.suppress(Exception):  # at exit nothing useful can be done; never print
        release_npu_calls()


def _npu_call(op: Any, func: str, x: Any, out: Any, layout: str, return_type: str, params: tuple[str, str, str],
              out_shape: Callable[[checks.TensorSpec], tuple[int, ...]],
              check: Callable[[checks.TensorSpec, checks.TensorSpec], tuple[Any, ...]], key_args: Any = None) -> Any:
    """Run *op* on NPU tensor *x* into *out* (made when None, of ``out_shape(x's spec)``), with every check: *params*
    name *x* in Python, *x* and *out* in C; ``check(x's spec, out's spec)`` runs the host checks before any
    allocation and returns *op*'s arguments between the two tensors.  With no *out*, the plan made for the key
    (*key_args* and *x*'s metadata) is kept: :func:`kept_npu_call` runs the key's next calls on it."""
    api = _npu_setup(((params[0], x), ("out", out)), func)
    key = _npu_key(op, x, x.untyped_storage(), key_args) if out is None and key_args is not None else None
    fmt = checks.layout_format(layout, func)
    x_desc = TorchDescription(x, params[1], func)
    x_spec = _spec(x_desc, fmt)
    if out is None:
        out_spec = checks.TensorSpec(out_shape(x_spec), x_spec.dtype, int(fmt))
    else:
        out_spec = _spec(TorchDescription(out, params[2], func), fmt)
    between = check(x_spec, out_spec)  # before any allocation
    if out is None:
        out = api.torch.empty(out_spec.shape, dtype=x.dtype, device=x.device)
    values = (x_desc.arg(fmt), *between, TorchDescription(out).arg(fmt))
    if key is not None:
        _npu_keep(op, key, values, x, api)  # its plan runs this call too
    else:
        _npu_launch(op, values, x.device, api)
    return tensor_to_numpy(out.cpu()) if return_type == "numpy" else out


def _backward_npu(go: Any, output_size: Sequence[int], input_size: Sequence[int],
                  scales: tuple[float | None, float | None, float | None], layout: str, out: Any,
                  return_type: str, strict: bool) -> Any:
    def check(go_spec: checks.TensorSpec, gi_spec: checks.TensorSpec) -> tuple[Any, ...]:
        checks.check_params(go_spec, output_size, input_size, *scales, gi_spec, strict=strict)
        sd, sh, sw = checks.normalize_scales(*scales)
        return tuple(int(v) for v in output_size), tuple(int(v) for v in input_size), sd, sh, sw

    return _npu_call(OP, checks.PHASE1, go, out, layout, return_type, ("grad_output", "gradOut", "gradOut"),
                     lambda _: checks.result_shape(input_size, layout), check,
                     plain_key((output_size, input_size), scales, strict, layout))


def _forward_npu(x: Any, output_size: Sequence[int], scales: tuple[float | None, float | None, float | None],
                 layout: str, out: Any, return_type: str, strict: bool) -> Any:
    def check(x_spec: checks.TensorSpec, y_spec: checks.TensorSpec) -> tuple[Any, ...]:
        sd, sh, sw = check_forward_params(x_spec, output_size, *scales, y_spec, strict=strict)
        return tuple(int(v) for v in output_size), sd, sh, sw

    return _npu_call(FORWARD, FORWARD.phase1_name, x, out, layout, return_type, ("input", "self", "out"),
                     lambda x_spec: result_shape(x_spec, output_size), check,
                     plain_key((output_size,), scales, strict, layout))


def _spec(desc: TorchDescription, fmt: Any) -> checks.TensorSpec:
    return checks.TensorSpec(desc.shape, int(dtype_to_acl(desc.dtype)), int(fmt))
