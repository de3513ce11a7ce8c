"""The simulator tier: every test here runs the real ctypes layer against the C simulator."""

from __future__ import annotations

import os

import pytest

from acl_bindings import _config, sim
from tests.sim.test_sim_raw import harness_dir, run_py, sim_build  # noqa: F401  (the raw harness's fixtures)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.sim)


@pytest.fixture(autouse=True, scope="session")
def _simulator_present() -> None:
    if os.environ.get("ACL_BINDINGS_BACKEND") != "sim":
        pytest.skip("the sim tier runs with --backend=sim")
    if not sim.is_built():
        from acl_bindings._loader import simulator_status

        ok, why = simulator_status()
        if not ok:
            if _config.require_sim():
                pytest.fail(f"ACL_BINDINGS_REQUIRE_SIM=1 and {why}")
            pytest.skip(why)


@pytest.fixture
def session():
    """A fresh Session on device 0, closed after the test."""
    from upsample3d_grad import Session

    with Session(0) as s:
        yield s


@pytest.fixture
def frozen_heap():
    """The heap as it is frozen for the test (``gc.freeze``): garbage left by earlier tests is neither collected
    during it nor counted, and every ``gc.collect()`` scans only what the test made (with torch loaded, a full
    collection takes a fifth of a second)."""
    import gc

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture
def no_leaks(frozen_heap):
    """Assert that the test leaves the simulator's live-handle counts as it found them.

    The default session (module-level functions) is closed first, so that the counts a test reads start from what
    it creates itself; the heap is frozen (``frozen_heap``).
    """
    import gc

    from upsample3d_grad.functional import close_default_session

    close_default_session()
    before = sim.live_handles()
    yield
    gc.collect()
    after = sim.live_handles()
    assert after == before, {k: (before[k], after[k]) for k in after if after[k] != before[k]}


@pytest.fixture()
def raw(sim_build, harness_dir):  # noqa: F811  (fixtures imported above)
    """Callable running a raw ctypes scenario (the harness of test_sim_raw.py) against the default simulator
    tree, in a fresh interpreter (the fidelity tests' name for test_sim_raw's ``sim``)."""
    def _run(code: str, env: dict[str, str] | None = None) -> None:
        run_py(code, sim_build["lib_dir"], harness_dir, env)

    return _run
