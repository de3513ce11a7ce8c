"""PyTorch tensors in and out (torch is optional: it is imported only here, on use).

CPU tensors
    :func:`tensor_to_numpy` views a CPU tensor as numpy without a copy (strides kept;
    bfloat16 through an int16 view reinterpreted as ``ml_dtypes.bfloat16``).
    :func:`backward_torch` runs them through a :class:`~upsample3d_grad.Session` (the
    default one unless given) and returns numpy or torch, as asked.

NPU tensors (``torch_npu``)
    When *grad_output* lives on an NPU, :func:`backward_torch` runs on its memory in
    place: each tensor becomes an aclTensor over the tensor's storage base pointer,
    with its sizes, element strides and storage offset and a 1-D storage shape (the
    way torch_npu itself describes tensors to aclnn, cann-abi.md §1.3).  The result
    is allocated with ``torch.empty`` on the same device (or is *out*), the workspace
    with ``torch.empty`` too (torch_npu's caching allocator is stream-ordered, so
    releasing it right after the launch is safe), and the kernel is queued on
    torch_npu's *current stream* with no synchronisation.

    The stream handle is ``torch.npu.current_stream(device).npu_stream``.  In the
    torch_npu sources we read, that property calls ``NPUStream::stream()``, which
    first drains torch_npu's task queue (``TASK_QUEUE_ENABLE``), so operations queued
    by torch before this call are submitted to the stream before our kernel.  This
    was read from source, not verified on hardware; if a torch_npu release changed
    it, run with ``TASK_QUEUE_ENABLE=0`` or call ``torch.npu.current_stream().synchronize()``
    before this function.  The binding must use the same CANN runtime library that
    torch_npu loaded; :func:`backward_torch` checks that with ``/proc/self/maps``.

    This path needs a real NPU: it is tested in ``tests/npu``.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from acl_bindings import AclnnParamError

from . import checks

__all__ = ["tensor_to_numpy", "numpy_to_tensor", "backward_torch", "describe_tensor", "TorchDescription",
           "run_on_storage", "is_tensor", "host_view"]

_BF16 = np.dtype(ml_dtypes.bfloat16)
#: aclFormat values that mean "plain strided memory" for a 5-D tensor (ND, NDHWC, NCDHW; cann-abi.md §3.2)
_PLAIN_FORMATS = (2, 27, 30)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - only without torch
        raise ImportError("upsample3d_grad.torch_interop needs PyTorch: pip install torch") from exc
    return torch


def _is_tensor(x: Any) -> bool:
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return False
    return isinstance(x, _torch().Tensor)


def is_tensor(x: Any) -> bool:
    """Whether *x* is a torch tensor (without importing torch for anything else)."""
    return _is_tensor(x)


def host_view(x: Any, param: str, *, writable: bool = False) -> Any:
    """*x* as numpy when it is a CPU torch tensor (a view sharing its memory); anything else unchanged.

    Parameters
    ----------
    x:
        A torch tensor, or anything else (returned as it is).
    param:
        The parameter's name, for the error message.
    writable:
        The result is written into (``out=``): a view that would need a copy is refused.

    Raises
    ------
    TypeError
        When the tensor lives on another device than the CPU (NPU tensors go through
        :func:`backward_torch`, which uses their memory in place), or when *writable* and the
        tensor is a negative or conjugate view (numpy cannot write through it).
    """
    if not _is_tensor(x):
        return x
    if x.device.type != "cpu":
        raise TypeError(f"{param}: the torch tensor is on {x.device}, not the CPU; pass a CPU tensor (or numpy "
                        "array), move it with .cpu(), or use upsample3d_grad.torch_interop.backward_torch, which "
                        "runs NPU tensors in place")
    if writable and (x.is_conj() or x.is_neg()):
        raise TypeError(f"{param}: a negative or conjugate torch view cannot be written in place; pass "
                        "t.resolve_neg() / t.resolve_conj()")
    return tensor_to_numpy(x)


def tensor_to_numpy(t: Any) -> np.ndarray:
    """View a CPU torch tensor as a numpy array, without a copy where possible.

    Parameters
    ----------
    t:
        A ``torch.Tensor`` on the CPU.  ``requires_grad`` is ignored (detached);
        bfloat16 becomes ``ml_dtypes.bfloat16``; negative or conjugate views are
        resolved first (which copies).

    Returns
    -------
    numpy.ndarray
        Sharing memory with *t* (same strides), so writing into it writes into *t*.

    Raises
    ------
    TypeError
        If *t* is not a tensor, or lives on another device: NPU tensors go through
        :func:`backward_torch`, which uses their memory in place.
    """
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise TypeError(f"the tensor is on {t.device}, not the CPU: use upsample3d_grad.torch_interop.backward_torch, "
                        "which runs on NPU tensors in place, or move it with .cpu()")
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def numpy_to_tensor(a: np.ndarray) -> Any:
    """A CPU torch tensor sharing *a*'s memory (bfloat16 through an int16 view)."""
    torch = _torch()
    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


# --------------------------------------------------------------------------- tensor descriptions

class TorchDescription:
    """How a tensor is described to aclnn (cann-abi.md §1.3, torch_npu's own convention).

    Attributes
    ----------
    shape, strides:
        ``t.shape`` and ``t.stride()`` (elements).
    offset:
        ``t.storage_offset()`` (elements).
    storage_dims:
        ``(storage bytes // itemsize,)``: a 1-D storage shape.
    address:
        The storage's base pointer (not ``data_ptr()``, which includes the offset).
    dtype:
        The numpy dtype.
    """

    def __init__(self, t: Any) -> None:
        torch = _torch()
        table = {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16), torch.bfloat16: _BF16}
        if t.dtype not in table:
            raise AclnnParamError(161002, checks.PHASE1,
                                  f"gradOut: dtype must be float32, float16 or bfloat16, got {t.dtype}")
        self.dtype = table[t.dtype]
        self.shape = tuple(int(n) for n in t.shape)
        self.strides = tuple(int(s) for s in t.stride())
        self.offset = int(t.storage_offset())
        storage = t.untyped_storage()
        self.storage_dims = (int(storage.nbytes()) // self.dtype.itemsize,)
        self.address = int(storage.data_ptr())

    def __repr__(self) -> str:
        return (f"<TorchDescription shape={self.shape} strides={self.strides} offset={self.offset} "
                f"storage_dims={self.storage_dims} address={self.address:#x} dtype={self.dtype}>")


def describe_tensor(t: Any) -> TorchDescription:
    """The aclTensor description of *t* (no device call; works for CPU tensors too)."""
    return TorchDescription(t)


# --------------------------------------------------------------------------- the entry point

def backward_torch(grad_output: Any, output_size: Sequence[int], input_size: Sequence[int],
                   scales_d: float | None = None, scales_h: float | None = None,
                   scales_w: float | None = None, *, layout: str = "NCDHW", out: Any = None,
                   return_type: str = "torch", strict: bool = True, session: Any = None) -> Any:
    """gradInput of nearest-exact 3-D upsampling for torch tensors.

    Parameters
    ----------
    grad_output:
        A torch tensor (CPU, or NPU with torch_npu) or a numpy array, float32 /
        float16 / bfloat16, 5-D in *layout* (physical dims: ``[N,D,H,W,C]`` for NDHWC).
    output_size, input_size, scales_d, scales_h, scales_w, layout, strict:
        As :meth:`upsample3d_grad.Session.backward`.
    out:
        Preallocated result on the same device as *grad_output* (written in place
        and returned when ``return_type="torch"``).
    return_type:
        ``"torch"`` (default) or ``"numpy"``.  For an NPU input, ``"numpy"`` copies
        the result to the host (which waits for the stream).
    session:
        The :class:`~upsample3d_grad.Session` for CPU inputs (default: the process-wide one).

    Returns
    -------
    torch.Tensor or numpy.ndarray
    """
    if return_type not in ("torch", "numpy"):
        raise ValueError(f"return_type: expected 'torch' or 'numpy', got {return_type!r}")
    if _is_tensor(grad_output) and grad_output.device.type != "cpu":
        if grad_output.device.type != "npu":
            raise TypeError(f"grad_output is on {grad_output.device}: only CPU and NPU (torch_npu) tensors are "
                            "supported")
        return _backward_npu(grad_output, output_size, input_size, (scales_d, scales_h, scales_w), layout, out,
                             return_type, strict)
    g = tensor_to_numpy(grad_output) if _is_tensor(grad_output) else grad_output
    out_np = None
    if out is not None:
        if _is_tensor(out):
            out_np = tensor_to_numpy(out)  # shares memory: the result lands in *out*
        elif isinstance(out, np.ndarray):
            out_np = out
        else:
            raise TypeError(f"out: expected a CPU torch tensor or a numpy array, got {type(out).__name__}")
    result: Any
    if session is None:
        from .api import _on_default_session

        with _on_default_session() as default:  # (kept open while this call runs on it)
            result = default.backward(g, output_size, input_size, scales_d, scales_h, scales_w, layout=layout,
                                      out=out_np, strict=strict)
    else:
        result = session.backward(g, output_size, input_size, scales_d, scales_h, scales_w, layout=layout,
                                  out=out_np, strict=strict)
    if return_type == "numpy":
        return result
    if out is not None and _is_tensor(out):
        return out
    return numpy_to_tensor(result)


# --------------------------------------------------------------------------- NPU tensors (torch_npu)

def _mapped_runtimes() -> set[str]:
    """Real paths of CANN runtime libraries mapped into this process (Linux)."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path.endswith(("/libascendcl.so", "/libacl_rt.so")):
                    found.add(os.path.realpath(path))
    except OSError:
        pass
    return found


def _check_same_runtime(backend: Any) -> None:
    if backend.kind != "cann":
        raise RuntimeError("the tensor lives on an NPU but acl_bindings loaded the CPU simulator "
                           f"({backend.runtime.path}); set ACL_BINDINGS_BACKEND=cann (or auto) and source CANN's "
                           "set_env.sh before the first use")
    ours = os.path.realpath(backend.runtime.path)
    mapped = _mapped_runtimes()
    others = {p for p in mapped if os.path.basename(p) == os.path.basename(ours) and p != ours}
    if others and ours not in mapped:
        raise RuntimeError(f"acl_bindings loaded {ours} but torch_npu uses {sorted(others)}: two CANN runtimes in "
                           "one process do not share devices or streams. Set ACL_BINDINGS_LIB_DIR to "
                           f"{os.path.dirname(sorted(others)[0])}")


def _npu_format(t: Any) -> int | None:
    try:
        import torch_npu
    except ImportError:
        return None
    get = getattr(torch_npu, "get_npu_format", None)
    if get is None:
        return None
    try:
        return int(get(t))
    except Exception:  # an older torch_npu without this query for some tensors: assume plain memory
        return None


def _backward_npu(go: Any, output_size: Sequence[int], input_size: Sequence[int],
                  scales: tuple[float | None, float | None, float | None], layout: str, out: Any,
                  return_type: str, strict: bool) -> Any:
    torch = _torch()
    try:
        import torch_npu
    except ImportError as exc:
        raise ImportError("grad_output is on an NPU but torch_npu cannot be imported") from exc
    from acl_bindings import load_backend

    backend = load_backend()
    _check_same_runtime(backend)
    fmt = checks.layout_format(layout)
    device = go.device
    for name, t in (("grad_output", go), ("out", out)):
        if t is None:
            continue
        if not _is_tensor(t) or t.device != device:
            raise TypeError(f"{name}: expected a tensor on {device}, got "
                            f"{t.device if _is_tensor(t) else type(t).__name__}")
        npu_fmt = _npu_format(t)
        if npu_fmt is not None and npu_fmt not in _PLAIN_FORMATS:
            raise AclnnParamError(161002, checks.PHASE1,
                                  f"{name}: the tensor uses the NPU-private format {npu_fmt}; convert it first "
                                  "with torch_npu.npu_format_cast(t, 2) (ND)")
    go_desc = TorchDescription(go)
    go_spec = checks.TensorSpec(go_desc.shape, _acl_dtype(go_desc.dtype), int(fmt))
    if out is None:
        gi_spec = checks.TensorSpec(_result_shape(input_size, layout), go_spec.dtype, int(fmt))
    else:
        out_desc = TorchDescription(out)
        gi_spec = checks.TensorSpec(out_desc.shape, _acl_dtype(out_desc.dtype), int(fmt))
    checks.check_params(go_spec, output_size, input_size, *scales, gi_spec, strict=strict)  # before any allocation
    sd, sh, sw = checks.normalize_scales(*scales)
    if out is None:
        out = torch.empty(gi_spec.shape, dtype=go.dtype, device=device)
    gi_desc = TorchDescription(out)
    def workspace(n: int) -> tuple[int, Any]:
        t = torch.empty(n, dtype=torch.uint8, device=device)  # stream-ordered caching allocator
        return int(t.data_ptr()), t

    def stream() -> int:
        # this drains torch_npu's task queue, so earlier torch work reaches the stream before our kernel
        return int(torch_npu.npu.current_stream(device).npu_stream)

    with torch_npu.npu.device(device.index):
        run_on_storage(go_desc, gi_desc, output_size, input_size, (sd, sh, sw), fmt, workspace, stream)
    if return_type == "numpy":
        return tensor_to_numpy(out.cpu())
    return out


def run_on_storage(go: TorchDescription, gi: TorchDescription, output_size: Sequence[int],
                   input_size: Sequence[int], scales: tuple[float, float, float], fmt: Any,
                   workspace: Callable[[int], tuple[int, Any]], stream: Callable[[], int]) -> int:
    """Run the operator on memory described by *go* and *gi*, which this function does not own.

    Both phases of the faithful API, with aclTensors over the described storage (no copy).
    *workspace(n)* returns ``(address, keepalive)`` of at least *n* device bytes; the
    keepalive is dropped after the launch, so it must be stream-ordered memory (a torch
    tensor from the caching allocator, say).  *stream()* returns the raw ``aclrtStream``;
    it is called last, right before phase 2.  Nothing is synchronised.  Returns the
    workspace size.  Used for NPU tensors by :func:`backward_torch`; the simulator tests
    drive it with torch tensors over simulator device memory.
    """
    from acl_bindings import IntArray, Tensor

    from ._api import aclnnUpsampleNearestExact3dBackward, aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize

    tensors = [Tensor(d.shape, d.dtype, None, strides=d.strides, offset=d.offset, format=fmt,
                      storage_dims=d.storage_dims, address=d.address) for d in (go, gi)]
    arrays: list[IntArray] = []
    try:
        arrays = [IntArray(list(output_size)), IntArray(list(input_size))]
        size, executor = aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
            tensors[0], arrays[0], arrays[1], *scales, tensors[1])
        try:
            address, keep = workspace(size) if size > 0 else (None, None)
            raw_stream: Any = ctypes.c_void_p(stream())  # a borrowed aclrtStream, not an acl_bindings.Stream
            aclnnUpsampleNearestExact3dBackward(address, size, executor, raw_stream)
            del keep  # released after the launch: the allocator orders its reuse on the stream
        finally:
            executor.close()  # only destroys an executor that phase 2 did not consume
    finally:
        for obj in (*tensors, *arrays):  # descriptors only: the memory belongs to the caller
            obj.close()
    return size


def _result_shape(input_size: Any, layout: str) -> tuple[int, ...]:
    try:
        n, c, d, h, w = (int(v) for v in input_size)
    except (TypeError, ValueError):
        return (-1,)  # check_params reports the real problem, with CANN's code
    return (n, d, h, w, c) if layout == "NDHWC" else (n, c, d, h, w)


def _acl_dtype(dt: np.dtype) -> int:
    from acl_bindings import dtype_to_acl

    return int(dtype_to_acl(dt))
