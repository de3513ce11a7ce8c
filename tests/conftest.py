"""Test tiers (style G14): ``tests/unit`` needs no library, ``tests/sim`` runs against the
CPU simulator, ``tests/npu`` needs a real NPU.

``--backend=sim|npu`` becomes ``ACL_BINDINGS_BACKEND`` before anything loads.  Under
``sim`` (the default), a missing simulator skips the sim tier with the reason, or
fails it when ``ACL_BINDINGS_REQUIRE_SIM=1`` (CI sets it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", default=None, choices=("sim", "npu"),
                     help="sim (default): the CPU simulator; npu: real CANN")


def pytest_configure(config: pytest.Config) -> None:
    backend = config.getoption("--backend") or os.environ.get("UPSAMPLE3D_TEST_BACKEND", "sim")
    os.environ["ACL_BINDINGS_BACKEND"] = "cann" if backend == "npu" else "sim"
