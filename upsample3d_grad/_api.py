"""The faithful two-phase binding of the operator (cann-abi.md §1.4), as the C API names it.

The operator and its wrappers are declared in :mod:`upsample3d_grad.op`; this module is where the
README's tour imports them from.
"""

from __future__ import annotations

from .op import OP, aclnnUpsampleNearestExact3dBackward, aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize

__all__ = ["OP", "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward"]
