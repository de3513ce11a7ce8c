"""The environment for a child Python that must find no CANN install and no simulator setting of ours."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``ASCEND_*``, ``ACL_BINDINGS_*``, ``CANN_SIM_*`` and
    ``LD_LIBRARY_PATH``, with the repository on ``PYTHONPATH``, plus *extra*."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASCEND_", "ACL_BINDINGS_", "CANN_SIM_")) and k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env
