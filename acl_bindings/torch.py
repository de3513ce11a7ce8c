"""PyTorch tensors as host arrays and as borrowed device memory (torch is optional: imported only on use)."""

from __future__ import annotations

from ctypes import c_void_p
from typing import Any, Optional

import numpy as np

from .enums import bfloat16, is_bfloat16
from .meta import TensorArg
from .op import workspace_bytes

__all__ = ["torch_module", "is_tensor", "host_view", "tensor_to_numpy", "numpy_to_tensor",
           "TensorDescription", "BorrowedArray", "TorchWorkspace", "RawStream"]


def torch_module() -> Any:
    """The ``torch`` module (ImportError with the install hint when it is missing)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - only without torch
        raise ImportError("this needs PyTorch: pip install torch") from exc
    return torch


def is_tensor(x: Any) -> bool:
    """Whether *x* is a torch tensor (without importing torch for anything else)."""
    return type(x).__module__.startswith("torch") and isinstance(x, torch_module().Tensor)


def host_view(x: Any, param: str, *, writable: bool = False, elsewhere: str = "") -> Any:
    """*x* as numpy when it is a CPU torch tensor (a view sharing its memory); anything else unchanged.

    *param* names the parameter in errors; *writable* (an ``out=``) refuses a view that would need a copy;
    *elsewhere* ends the message for a tensor on another device.  TypeError for a tensor not on the CPU, or for a
    negative or conjugate view when *writable* (numpy cannot write through it).
    """
    if not is_tensor(x):
        return x
    if not x.is_cpu:
        raise TypeError(f"{param}: the torch tensor is on {x.device}, not the CPU; pass a CPU tensor (or numpy "
                        f"array), move it with .cpu(){elsewhere}")
    if writable and (x.is_conj() or x.is_neg()):
        raise TypeError(f"{param}: a negative or conjugate torch view cannot be written in place; pass "
                        "t.resolve_neg() / t.resolve_conj()")
    return tensor_to_numpy(x)


def tensor_to_numpy(t: Any) -> np.ndarray:
    """View a CPU torch tensor as numpy, sharing its memory and strides (writing the view writes *t*).

    ``requires_grad`` is ignored; bfloat16 becomes ``ml_dtypes.bfloat16``; a negative or conjugate view is resolved
    first (a copy).  TypeError when *t* is not a tensor or not on the CPU.
    """
    torch = torch_module()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_cpu:
        raise TypeError(f"the tensor is on {t.device}, not the CPU: move it with .cpu(), or run it on its device "
                        "memory in place")
    if t.requires_grad:
        t = t.detach()
    t = t.resolve_conj().resolve_neg()  # each returns *t* itself when its bit is not set
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(bfloat16())
    return t.numpy()


def numpy_to_tensor(a: np.ndarray) -> Any:
    """A CPU torch tensor sharing *a*'s memory (bfloat16 through an int16 view)."""
    torch = torch_module()
    if is_bfloat16(a.dtype):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class TensorDescription:
    """How a tensor's memory is described to aclnn, the way torch_npu does it (cann-abi.md §1.3).

    ``shape``, ``strides`` and ``offset`` are ``t.shape``, ``t.stride()`` and ``t.storage_offset()`` (elements),
    ``storage_dims`` the 1-D storage ``(storage bytes // itemsize,)``, ``address`` the storage's base pointer (not
    ``data_ptr()``, which includes the offset), ``dtype`` the numpy dtype the elements are described as.
    """

    def __init__(self, t: Any, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(map(int, t.shape))
        self.strides = tuple(map(int, t.stride()))
        self.offset = int(t.storage_offset())
        storage = t.untyped_storage()
        self.storage_dims = (int(storage.nbytes()) // self.dtype.itemsize,)
        self.address = int(storage.data_ptr())

    def arg(self, format: int) -> TensorArg:
        """This description in aclFormat *format*, as :mod:`acl_bindings.engine` takes a tensor argument."""
        return TensorArg(self.shape, self.dtype, self.strides, self.offset, int(format), self.storage_dims,
                         self.address)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} shape={self.shape} strides={self.strides} offset={self.offset} "
                f"storage_dims={self.storage_dims} address={self.address:#x} dtype={self.dtype}>")


class BorrowedArray:
    """A torch tensor's memory as the call engine takes a device array: *template* (a :class:`TensorArg`) at the
    storage address *ptr* (default: the template's own); its ``arg`` is made only when a call needs it."""

    __slots__ = ("template", "buffer", "ptr")

    def __init__(self, template: TensorArg, ptr: Optional[int] = None) -> None:
        self.template, self.buffer, self.ptr = template, self, template.address if ptr is None else ptr

    @property
    def arg(self) -> TensorArg:
        """The template at this array's address."""
        return self.template if self.ptr == self.template.address else self.template._replace(address=self.ptr)

    @property
    def key(self) -> tuple[Any, ...]:
        """The description without its address (as a device array's ``key``)."""
        return self.template[:-1]


class TorchWorkspace:
    """A workspace of one stream from torch's caching allocator: a uint8 tensor made on that stream (its current
    one), reused by the calls queued on it in order, replaced by a larger one when outgrown (the old one goes back
    to the allocator stream-ordered).  It is made of :func:`~acl_bindings.op.workspace_bytes`, as the package's own
    workspaces: the next, slightly larger, ask of a new shape then fits in it, with no new device allocation.
    ``stream`` is the stream as the call engine takes it."""

    __slots__ = ("torch", "device", "stream", "kept", "size", "address")

    def __init__(self, torch: Any, device: Any, stream: int) -> None:
        self.torch, self.device, self.stream = torch, device, RawStream(stream)
        self.kept: Any = None
        self.size = self.address = 0

    def reserve(self, n: int) -> Optional[int]:
        """An address of at least *n* bytes, or None for 0."""
        if n <= 0:
            return None
        if n > self.size:
            self.kept = self.torch.empty(workspace_bytes(n), dtype=self.torch.uint8, device=self.device)
            self.size, self.address = int(self.kept.numel()), int(self.kept.data_ptr())
        return self.address


class RawStream:
    """A raw ``aclrtStream`` (another library's, e.g. torch_npu's current one) where the call engine takes a
    :class:`~acl_bindings.Stream`."""

    __slots__ = ("_as_parameter_",)

    def __init__(self, handle: int) -> None:
        self._as_parameter_ = c_void_p(handle)
