"""The operator's 5-D device arrays (NCDHW or NDHWC) and the host rules of the arrays a Session takes and makes."""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from acl_bindings import AclTypeError, dtype_to_acl
from acl_bindings import arrays as _generic
from acl_bindings.enums import as_dtype

from . import checks

__all__ = ["DeviceArray", "ArrayLike", "check_out_memory", "empty_dtype", "UPLOAD", "EMPTY"]

#: The function named by errors of :meth:`Session.upload` and :meth:`Session.empty` (not phase 1's).
UPLOAD, EMPTY = "Session.upload", "Session.empty"


class DeviceArray(_generic.DeviceArray):
    """A 5-D array in a :class:`Session`'s device memory (:class:`acl_bindings.arrays.DeviceArray`): physical
    ``shape`` (``[N,D,H,W,C]`` for NDHWC), numpy ``dtype``, ``layout``, element ``strides`` and ``offset`` of the
    view inside ``buffer``; ``tensor`` is its aclTensor, made when first read."""

    def __init__(self, session: Any, buffer: Any, shape: tuple[int, ...], dtype: Any, layout: str,
                 strides: tuple[int, ...], offset: int) -> None:
        if len(shape) != 5:
            raise ValueError(f"shape: expected 5 dims (NCDHW or NDHWC), got {len(shape)}: {shape}")
        super().__init__(session, buffer, shape, dtype, layout, strides, offset)

    @staticmethod
    def layout_format(layout: str) -> Any:
        """``"NCDHW"`` -> ``ACL_FORMAT_NCDHW``; ``"NDHWC"`` -> ``ACL_FORMAT_NDHWC`` (161002 for anything else)."""
        return checks.layout_format(layout)

    def spec(self) -> checks.TensorSpec:
        """What phase 1 sees of this array."""
        spec = self.__dict__.get("_spec")
        if spec is None:  # shape, dtype and layout never change: build it once
            spec = self._spec = checks.TensorSpec(self.shape, int(dtype_to_acl(self.dtype)), int(self.acl_format))
        return spec


def check_out_memory(out: ArrayLike, param: str = "gradInput") -> None:
    """161002 when elements of the output *param* (*out*, numpy or device) share memory."""
    if isinstance(out, DeviceArray):
        item = out.dtype.itemsize
        checks.check_output_memory(out.shape, tuple(st * item for st in out.strides), item, param)
    elif isinstance(out, np.ndarray):
        checks.check_output_memory(out.shape, out.strides, out.itemsize, param)


def empty_dtype(dtype: Any) -> np.dtype:
    """*dtype* for :meth:`Session.empty`: a wrong one is an :class:`acl_bindings.AclTypeError` naming it."""
    dt = None
    try:
        dt = as_dtype(dtype)
        dtype_to_acl(dt)
    except TypeError:
        got = repr(dtype) if dt is None else dt
        raise AclTypeError(161002, EMPTY, f"dtype: expected {checks.SUPPORTED_NAMES} (or int64), got {got}") from None
    return dt


ArrayLike = Union[np.ndarray, DeviceArray]
