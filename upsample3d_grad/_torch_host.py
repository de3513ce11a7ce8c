"""CPU torch tensor arguments as numpy views, with this package's hint for tensors on another device."""

from __future__ import annotations

from typing import Any

from acl_bindings import torch as _views

__all__ = ["host_view", "is_tensor"]

is_tensor = _views.is_tensor

#: Where a tensor on another device than the CPU can go
_ELSEWHERE = ", or use upsample3d_grad.functional.backward_torch, which runs NPU tensors in place"


def host_view(x: Any, param: str, *, writable: bool = False) -> Any:
    """*x* as numpy when it is a CPU torch tensor (a view sharing its memory); anything else unchanged
    (:func:`acl_bindings.torch.host_view`: a tensor on another device is a TypeError naming *param*)."""
    return _views.host_view(x, param, writable=writable, elsewhere=_ELSEWHERE)
