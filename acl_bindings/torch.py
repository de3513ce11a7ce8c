"""PyTorch tensors as host arrays and as borrowed device memory (torch is optional: imported only on use).

* :func:`tensor_to_numpy` views a CPU tensor as numpy without a copy (strides kept; bfloat16
  through an int16 view reinterpreted as ``ml_dtypes.bfloat16``); :func:`numpy_to_tensor` is the
  way back; :func:`host_view` turns a CPU tensor argument into its numpy view and refuses a tensor
  on another device, naming the parameter.
* :class:`TensorDescription` describes a tensor's memory to aclnn the way torch_npu does (cann-abi.md
  §1.3): the storage's base pointer, the tensor's sizes, element strides and storage offset, and a
  1-D storage shape; its ``arg(format)`` is the :class:`acl_bindings.meta.TensorArg` that :mod:`acl_bindings.engine`
  runs any declared operator on (the memory stays the caller's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .enums import BFLOAT16
from .meta import TensorArg

__all__ = ["torch_module", "is_tensor", "host_view", "tensor_to_numpy", "numpy_to_tensor",
           "TensorDescription"]



def torch_module() -> Any:
    """The ``torch`` module (ImportError with the install hint when it is missing)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - only without torch
        raise ImportError("this needs PyTorch: pip install torch") from exc
    return torch


def is_tensor(x: Any) -> bool:
    """Whether *x* is a torch tensor (without importing torch for anything else)."""
    if not type(x).__module__.startswith("torch"):
        return False
    return isinstance(x, torch_module().Tensor)


def host_view(x: Any, param: str, *, writable: bool = False, elsewhere: str = "") -> Any:
    """*x* as numpy when it is a CPU torch tensor (a view sharing its memory); anything else unchanged.

    Parameters
    ----------
    x:
        A torch tensor, or anything else (returned as it is).
    param:
        The parameter's name, for the error message.
    writable:
        The result is written into (``out=``): a view that would need a copy is refused.
    elsewhere:
        Appended to the message for a tensor on another device (where such tensors can go).

    Raises
    ------
    TypeError
        When the tensor lives on another device than the CPU, or when *writable* and the tensor is a
        negative or conjugate view (numpy cannot write through it).
    """
    if not is_tensor(x):
        return x
    if x.device.type != "cpu":
        raise TypeError(f"{param}: the torch tensor is on {x.device}, not the CPU; pass a CPU tensor (or numpy "
                        f"array), move it with .cpu(){elsewhere}")
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
        If *t* is not a tensor, or lives on another device than the CPU.
    """
    torch = torch_module()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise TypeError(f"the tensor is on {t.device}, not the CPU: move it with .cpu(), or run it on its device "
                        "memory in place")
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BFLOAT16)
    return t.numpy()


def numpy_to_tensor(a: np.ndarray) -> Any:
    """A CPU torch tensor sharing *a*'s memory (bfloat16 through an int16 view)."""
    torch = torch_module()
    if a.dtype == BFLOAT16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class TensorDescription:
    """How a tensor's memory is described to aclnn, the way torch_npu does it (cann-abi.md §1.3).

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
        The numpy dtype the elements are described as.
    """

    def __init__(self, t: Any, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(n) for n in t.shape)
        self.strides = tuple(int(s) for s in t.stride())
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
