"""The NPU tier: the smoke matrix and torch_npu interop on a real Ascend NPU with CANN.

Run it on an NPU machine with ``python -m pytest tests/npu --backend=npu`` (after
``source .../set_env.sh``).  Every test here is marked ``npu``.

* With the simulator (the default ``--backend=sim``) they are skipped, with the reason,
  which also says whether a real NPU was seen.
* With ``--backend=npu`` they must run: when no real CANN runtime loads, or it sees no
  device, every one of them **fails** with the reason (an NPU run that tests nothing is
  not a pass).

Whether real CANN works is asked of a child process (``ACL_BINDINGS_BACKEND=cann``),
so a broken install cannot take this process down, and this process's own backend
choice is left alone.  ``UPSAMPLE3D_GRAD_DEVICE`` picks the device (default 0).

When torch_npu is importable it is initialised before this binding touches ACL, so that
torch_npu owns ``aclFinalize`` (the binding then sees 100002 and gives only its own reference
back at exit, with ``aclFinalizeReference`` where exported: acl_bindings.runtime).

**On torch_npu-on-simulator** (opt-in, ``UPSAMPLE3D_NPU_TIER_ON_SIM=1`` with the default
``--backend=sim``, in a shell after ``eval "$(python -m acl_bindings.sim env)"``, with tests/npu run
alone): the tier accepts the simulator once torch_npu imports in this process and its ``aclInit``
reached the simulator the package loads (checked at collection; else every test fails with the
reason).  The package's tests then run on the simulator and the torch_npu ones against the
published torch_npu on it; the CLI tests run the CLI with ``ACL_BINDINGS_BACKEND=sim``.  A test
that needs what the simulator does not model is skipped, saying what (:data:`NOT_ON_SIM`).  At the
end the run's accounting (tests/conftest.py) expects torch_npu's own live handles of its start
(its two streams and device references; its cache emptied) and nothing else, which shows that the
package released all of its own; both then shut down at the process's exit, as they would anywhere.
tests/torch_npu runs this mode in a child process (test_npu_tier_on_sim.py).  The opt-in changes nothing under
``--backend=npu``, and without it the tier skips on the simulator as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.conftest import FOREIGN_LIVE
from upsample3d_grad._env import default_device

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
try:
    DEVICE = default_device()
except ValueError as exc:  # names UPSAMPLE3D_GRAD_DEVICE and its value
    raise pytest.UsageError(str(exc)) from None
_FAIL_KEY = pytest.StashKey[str]()
_FAIL_KEY_TEXT = "--backend=npu, but "
#: the opt-in that runs this tier on torch_npu-on-simulator (see above)
ON_SIM = "UPSAMPLE3D_NPU_TIER_ON_SIM"
_ON_SIM_FAIL_TEXT = f"{ON_SIM}=1, but "
#: the tests that need what the simulator does not model, by function name: why
NOT_ON_SIM = {
    "test_doctor_is_healthy": "needs real CANN: it asserts that `doctor` reports `backend cann - real CANN`",
    "test_smoke_cli_on_every_device": "needs real CANN: `smoke --require-npu` refuses the simulator by design, and "
                                      "the test expects backend cann and CANN's determinism statement",
}
_on_sim: dict[str, Any] = {}  # "baseline": torch_npu's live handles at its start, once accepted

_PROBE = """
import json
import acl_bindings as acl
try:
    backend = acl.load_backend()
    info = {"kind": backend.kind, "runtime": backend.runtime.path, "devices": acl.device_count(),
            "soc": acl.soc_name(), "cann": acl.cann_version()}
except Exception as exc:
    info = {"error": type(exc).__name__ + ": " + (str(exc).splitlines() or [""])[0]}
print(json.dumps(info))
"""

_probe_result: dict[str, Any] = {}


def probe() -> tuple[bool, str, dict[str, Any]]:
    """``(usable, reason, info)`` for real CANN, asked of a child process (once per run)."""
    if "value" in _probe_result:
        return _probe_result["value"]
    env = dict(os.environ, ACL_BINDINGS_BACKEND="cann")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    value: tuple[bool, str, dict[str, Any]]
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=300)
    except subprocess.TimeoutExpired:
        value = (False, "loading real CANN in a child process timed out after 300 s", {})
    else:
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        info = json.loads(lines[-1]) if lines else {}
        if proc.returncode != 0 or not info:
            err = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
            value = (False, f"loading real CANN crashed a child process (exit code {proc.returncode}): "
                            f"{err[-1] if err else 'no message'}", {})
        elif "error" in info:
            value = (False, f"no real CANN device: {info['error']}", {})
        elif info["kind"] != "cann":
            value = (False, "only the CPU simulator is available", info)
        elif info["devices"] <= DEVICE:
            value = (False, f"real CANN loaded but it sees {info['devices']} device(s); "
                            f"UPSAMPLE3D_GRAD_DEVICE={DEVICE}", info)
        else:
            value = (True, "", info)
    _probe_result["value"] = value
    return value


def on_sim_requested() -> bool:
    """Whether this run takes the tier to torch_npu-on-simulator: :data:`ON_SIM` is 1 and the backend is ``sim``."""
    return os.environ.get(ON_SIM) == "1" and os.environ.get("ACL_BINDINGS_BACKEND") == "sim"


def _live() -> dict[str, int]:
    from acl_bindings import sim

    return {kind: n for kind, n in sim.live_handles().items() if n}


def torch_npu_on_sim() -> tuple[bool, str]:
    """``(ok, reason)``: torch_npu starts in this process and its ``aclInit`` reached the simulator that the package
    loads (the same runtime library), before the package initialised ACL itself."""
    import acl_bindings
    from acl_bindings import sim

    if not sim.is_built():
        return False, "the simulator is not built (python -m acl_bindings.sim.build)"
    try:
        import torch
        import torch_npu  # noqa: F401  (adds torch.npu)

        torch.npu.set_device(DEVICE)  # type: ignore[attr-defined]
        torch.ones(1).to(f"npu:{DEVICE}")  # torch_npu initialises ACL now
        torch.npu.Stream()  # type: ignore[attr-defined]  # its side-stream pool: made at once, kept to the end
        torch.npu.synchronize()  # type: ignore[attr-defined]
        torch.npu.empty_cache()  # type: ignore[attr-defined]
    except Exception as exc:  # not installed, or not started in the simulator's environment
        return False, (f"torch_npu does not start on the simulator ({type(exc).__name__}: "
                       f"{(str(exc).splitlines() or [''])[0]}); run after eval \"$(python -m acl_bindings.sim env)\"")
    if not acl_bindings.load_backend().is_simulator or sim.call_count("aclInit") < 1:
        return False, "torch_npu's aclInit did not reach the simulator that this process loaded"
    if acl_bindings.runtime.initialized_first():
        return False, "the package initialised ACL before torch_npu did"
    _on_sim["baseline"] = _live()
    return True, ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if Path(str(item.fspath)).resolve().is_relative_to(HERE)]
    if not mine:
        return
    for item in mine:
        item.add_marker(pytest.mark.npu)
    requested = os.environ.get("ACL_BINDINGS_BACKEND", "auto")
    if on_sim_requested():
        if len(mine) != len(items):  # torch_npu in this process would change what the other tiers see
            raise pytest.UsageError(f"{ON_SIM}=1 runs tests/npu alone: python -m pytest tests/npu")
        ok, why = torch_npu_on_sim()
        for item in mine:
            if not ok:
                item.stash[_FAIL_KEY] = f"{_ON_SIM_FAIL_TEXT}{why}"
            elif item.originalname in NOT_ON_SIM:
                item.add_marker(pytest.mark.skip(reason=f"not on the simulator: {NOT_ON_SIM[item.originalname]}"))
        return
    if requested == "sim":
        ok, why, info = probe()
        seen = (f"; a real NPU is present ({info.get('soc')}, CANN {info.get('cann')}): rerun with --backend=npu"
                if ok else f"; {why}")
        skip = pytest.mark.skip(reason=f"the npu tier needs --backend=npu (this run uses the CPU simulator){seen}")
        for item in mine:
            item.add_marker(skip)
        return
    ok, reason, _ = probe()
    if not ok:  # asked for an NPU and there is none: each test fails with the reason
        for item in mine:
            item.stash[_FAIL_KEY] = f"{_FAIL_KEY_TEXT}{reason}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = item.stash.get(_FAIL_KEY, None)
    if reason is not None:
        pytest.fail(reason, pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before the accounting of tests/conftest.py
def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the simulator (opt-in): torch_npu's cached blocks go back, and the run's final accounting
    (tests/conftest.py) expects torch_npu's own handles of its start and none of the package's."""
    if "baseline" not in _on_sim:
        return
    import torch

    from upsample3d_grad.functional import close_default_session

    close_default_session()  # (with the plans kept for NPU tensors, and their workspaces: back to torch's cache)
    torch.npu.synchronize()  # type: ignore[attr-defined]
    torch.npu.empty_cache()  # type: ignore[attr-defined]
    session.config.stash[FOREIGN_LIVE] = _on_sim.pop("baseline")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    failed = [r for r in terminalreporter.stats.get("error", [])
              if _FAIL_KEY_TEXT in str(r.longrepr) or _ON_SIM_FAIL_TEXT in str(r.longrepr)]
    if failed:
        terminalreporter.write_line(f"npu tier: {len(failed)} tests did not run: {failed[0].longrepr}", red=True)


@pytest.fixture(scope="session")
def torch_npu_mod() -> Any:
    """torch_npu, initialised on :data:`DEVICE`, or None when it is not installed (or fails to import)."""
    try:
        import torch
        import torch_npu
    except ImportError:
        return None
    if on_sim_requested():  # started on the simulator at collection (torch_npu_on_sim)
        return torch_npu
    torch.npu.set_device(DEVICE)  # type: ignore[attr-defined]  # added by torch_npu
    torch.zeros(1, device=f"npu:{DEVICE}")  # makes torch_npu initialise ACL now, before the binding does
    return torch_npu


@pytest.fixture(scope="session")
def npu_backend(torch_npu_mod: Any) -> Any:
    """The in-process backend, which must be real CANN (or the simulator, under the opt-in)."""
    from acl_bindings import LibraryNotFoundError, load_backend

    try:
        backend = load_backend()
    except LibraryNotFoundError as exc:
        pytest.fail(f"real CANN does not load in this process: {str(exc).splitlines()[0]}", pytrace=False)
    if backend.kind != "cann" and not on_sim_requested():
        pytest.fail("this process uses the CPU simulator; run `python -m pytest tests/npu --backend=npu`",
                    pytrace=False)
    return backend


@pytest.fixture(scope="session")
def torch_on_npu(torch_npu_mod: Any, npu_backend: Any, soc: str) -> Any:
    """torch, once torch_npu is proved to run the aclnn kernels on the NPU (tests/_kernel_proof.py): a comparison
    with op-plugin's CPU fallback would prove nothing.  Skips when torch_npu is not installed."""
    if torch_npu_mod is None:
        pytest.skip("torch_npu is not installed")
    import torch

    from tests._kernel_proof import cpu_fallback_evidence
    from upsample3d_grad.reference.forward import soc_family

    evidence = cpu_fallback_evidence(torch, f"npu:{DEVICE}", soc_family(soc))
    if evidence:
        pytest.fail("torch_npu did not run the aclnn kernels, so comparing with it proves nothing: "
                    + "; ".join(evidence), pytrace=False)
    return torch


@pytest.fixture(scope="session")
def soc(npu_backend: Any) -> str:
    """The SoC name reported by the runtime."""
    from acl_bindings import soc_name

    return soc_name()


def _run_cli(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ACL_BINDINGS_BACKEND="sim" if on_sim_requested() else "cann")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_cli(args)``: ``python <args>`` from the repository root with ``ACL_BINDINGS_BACKEND=cann`` (``sim``
    under the opt-in)."""
    return _run_cli


@pytest.fixture(scope="session")
def device_id() -> int:
    """The device under test (``UPSAMPLE3D_GRAD_DEVICE``, default 0)."""
    return DEVICE
