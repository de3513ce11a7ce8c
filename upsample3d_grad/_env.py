"""The operator package's own environment variable, read in one place.

``UPSAMPLE3D_GRAD_DEVICE``: the device of the default session used by the module-level
functions (and of the NPU test tier); default 0.
"""

from __future__ import annotations

import os

__all__ = ["DEVICE_VAR", "default_device"]

DEVICE_VAR = "UPSAMPLE3D_GRAD_DEVICE"


def default_device() -> int:
    """``$UPSAMPLE3D_GRAD_DEVICE`` (unset or empty: 0).

    Raises
    ------
    ValueError
        When it is not a device id (an integer >= 0), naming the variable and its value.
    """
    raw = os.environ.get(DEVICE_VAR, "")
    text = raw.strip()
    if not text:
        return 0
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{DEVICE_VAR} must be a device id (an integer >= 0), got {raw!r}")
    return value
