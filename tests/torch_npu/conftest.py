"""The torch_npu tier: the published torch_npu (extra ``torch-npu-sim``) runs this operator on the simulator.

Each scenario runs in a child process started after ``eval "$(python -m acl_bindings.sim env)"``: torch_npu reads
the CANN layout and ``LD_LIBRARY_PATH`` at load, so the variables must be set before the process starts.  The
tier skips, with the reason, where torch_npu is not installed or the simulator is not built (fails instead when
``ACL_BINDINGS_REQUIRE_TORCH_NPU=1``: CI sets it where it installs the extra).  torch_npu is looked for without
importing it: with torch_npu installed, ``import torch`` loads it (a ``torch.backends`` entry point) and fails
outside that environment.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from acl_bindings import sim


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.sim)


@pytest.fixture(autouse=True, scope="session")
def _torch_npu_present() -> None:
    why = None
    if os.environ.get("ACL_BINDINGS_BACKEND") != "sim":
        why = "the torch_npu tier runs with --backend=sim"
    elif importlib.util.find_spec("torch_npu") is None:
        why = "torch_npu is not installed (pip install -e '.[torch-npu-sim]': torch-npu 2.13.0, manylinux_2_28 " \
              "x86_64 / aarch64)"
    elif not sim.is_built():
        why = "the simulator is not built (python -m acl_bindings.sim.build)"
    if why:
        if os.environ.get("ACL_BINDINGS_REQUIRE_TORCH_NPU") == "1":
            pytest.fail(f"ACL_BINDINGS_REQUIRE_TORCH_NPU=1 and {why}")
        pytest.skip(why)
