"""upsample3d-grad: CANN's ``aclnnUpsampleNearestExact3dBackward`` from Python.

Entry points:

* :class:`Session` (device, stream, workspace, arrays) and its :meth:`Session.backward`;
* :func:`upsample_nearest_exact3d_backward`: PyTorch's signature, numpy in and out;
* :func:`UpsampleNearestExact3dGrad`: the graph-IR form;
* :meth:`Session.forward`, :func:`upsample_nearest_exact3d`, :func:`UpsampleNearestExact3d` and
  :mod:`upsample3d_grad.forward`: the forward operator ``aclnnUpsampleNearestExact3d``;
* :mod:`upsample3d_grad.adjoint`: the forward and the backward checked against each other;
* :mod:`upsample3d_grad._api`: the faithful two-phase C API;
* :mod:`upsample3d_grad.reference`: the numpy reference (no device);
* :mod:`upsample3d_grad.checks`: CANN's parameter checks on the host.

Importing loads no library.  The backend (real CANN or the CPU simulator) is chosen
on first use and named by every ``repr`` and report.
"""

from __future__ import annotations

from acl_bindings import AclError, AclnnParamError

from ._api import aclnnUpsampleNearestExact3dBackward, aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize
from .checks import BAD_CASES, GOOD_CASES, MixedScalesWarning, check_params
from .forward import aclnnUpsampleNearestExact3d, aclnnUpsampleNearestExact3dGetWorkspaceSize
from .functional import (
    UpsampleNearestExact3d,
    UpsampleNearestExact3dGrad,
    close_default_session,
    default_session,
    upsample_nearest_exact3d,
    upsample_nearest_exact3d_backward,
)
from .session import DeviceArray, Session

__version__ = "0.1.0"

__all__ = [
    "Session", "DeviceArray", "upsample_nearest_exact3d_backward", "UpsampleNearestExact3dGrad",
    "default_session", "close_default_session", "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize",
    "aclnnUpsampleNearestExact3dBackward", "check_params", "BAD_CASES", "GOOD_CASES", "MixedScalesWarning",
    "AclError", "AclnnParamError", "__version__", "upsample_nearest_exact3d", "UpsampleNearestExact3d",
    "aclnnUpsampleNearestExact3dGetWorkspaceSize", "aclnnUpsampleNearestExact3d",
]
