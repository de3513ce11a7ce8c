"""Test tiers (style G14): ``tests/unit`` needs no library, ``tests/sim`` runs against the
CPU simulator, ``tests/npu`` needs a real NPU.

``--backend=sim|npu`` becomes ``ACL_BINDINGS_BACKEND`` before anything loads.  Under
``sim`` (the default), a missing simulator skips the sim tier with the reason, or
fails it when ``ACL_BINDINGS_REQUIRE_SIM=1`` (CI sets it).
"""

from __future__ import annotations

import collections
import os

import pytest

#: handles that a test proved lost in the documented window (a C function's by-value return interrupted
#: before its store, see tests/sim/test_signals.py), by kind: the run's final accounting expects exactly these
WINDOW_LOSSES = pytest.StashKey["collections.Counter[str]"]()
#: handles that another library holds at the end of the run, by kind (tests/npu/conftest.py: torch_npu's own, when
#: the npu tier runs on torch_npu-on-simulator): the final accounting expects them too
FOREIGN_LIVE = pytest.StashKey["dict[str, int]"]()


@pytest.fixture
def window_losses(request: pytest.FixtureRequest) -> collections.Counter[str]:
    """The run's tally of handles lost in the documented window; a test adds what it proved lost."""
    return request.config.stash.setdefault(WINDOW_LOSSES, collections.Counter())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", default=None, choices=("sim", "npu"),
                     help="sim (default): the CPU simulator; npu: real CANN")


def pytest_configure(config: pytest.Config) -> None:
    backend = config.getoption("--backend") or os.environ.get("UPSAMPLE3D_TEST_BACKEND", "sim")
    os.environ["ACL_BINDINGS_BACKEND"] = "cann" if backend == "npu" else "sim"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the whole run, the simulator's accounting must show no live handle but those a test proved lost
    in the documented window (:data:`WINDOW_LOSSES`) and another library's (:data:`FOREIGN_LIVE`)."""
    import gc

    from acl_bindings import loaded_backend

    backend = loaded_backend()
    if backend is None or not backend.is_simulator:
        return
    from upsample3d_grad.functional import close_default_session

    close_default_session()
    gc.collect()
    from acl_bindings import sim

    live = {k: v for k, v in sim.live_handles().items() if v}
    window = {k: v for k, v in session.config.stash.get(WINDOW_LOSSES, collections.Counter()).items() if v}
    foreign = session.config.stash.get(FOREIGN_LIVE, {})
    expected = dict(collections.Counter(window) + collections.Counter(foreign))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if live != expected:
        if reporter:
            reporter.write_line(f"LEAK: the simulator reports live handles after the test run: {live} "
                                f"(lost in the documented window, as tests proved: {window}; another library's: "
                                f"{foreign})", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif reporter:
        tail = f" but the {window} that tests proved lost in the documented window" if window else ""
        tail += f"{' and' if window else ' but'} another library's {foreign}" if foreign else ""
        reporter.write_line(f"simulator accounting after the run: no live handle{tail}")
