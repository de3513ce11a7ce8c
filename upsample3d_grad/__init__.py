"""upsample3d-grad: CANN's ``aclnnUpsampleNearestExact3dBackward`` and its forward from Python (docs/api.md).
Importing loads no library; the backend (real CANN or the CPU simulator) is chosen on first use."""

from __future__ import annotations

from acl_bindings import AclError, AclnnParamError

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
from .op import aclnnUpsampleNearestExact3dBackward, aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize
from .session import DeviceArray, Session

__version__ = "0.1.0"

__all__ = [
    "Session", "DeviceArray", "upsample_nearest_exact3d_backward", "UpsampleNearestExact3dGrad",
    "default_session", "close_default_session", "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize",
    "aclnnUpsampleNearestExact3dBackward", "check_params", "BAD_CASES", "GOOD_CASES", "MixedScalesWarning",
    "AclError", "AclnnParamError", "__version__", "upsample_nearest_exact3d", "UpsampleNearestExact3d",
    "aclnnUpsampleNearestExact3dGetWorkspaceSize", "aclnnUpsampleNearestExact3d",
]
