"""Fault injection: every C call of a full operator call fails once, for each error class.

The calls are not listed by hand: each scenario is first run without faults and the
simulator's call counters (``sim.call_count``) say which C functions it called and how
often.  Then, for every observed call ``(function, n)`` and every error class, a fresh
run makes exactly that call fail (``sim.set_fault("function:n:code")``) and checks:

* the exception: the class of the code (a handle constructor that returns NULL is
  always 561103, ``AclnnInnerError``, whatever made it fail), the code, ``.func`` (the
  C function) and ``.detail`` (the simulator's message for the injected fault);
* nothing leaks: after the session is closed and the exception dropped, the
  simulator's live-handle counts are back where they were; and no error message is
  left unread on the thread (it would be attached to a later, unrelated failure);
* the session still works: the next call gives the sample result.  The simulator's
  injected faults are transient, so even a "fatal" runtime code (507xxx) leaves a
  working session.  The binding keeps no "broken" flag of its own: on hardware, a
  device that stays broken keeps answering with the runtime's code on the next call.

Two observed calls are not errors by design: a refused ``aclSetAclOpExecutorRepeatable``
makes the plan cache fall back to one-shot calls (the result is still right), and a
failed ``close()`` (stream, workspace, device reset...) leaves the session closed for
use but retries the releases on the next ``close()``.

aclInit and aclFinalize run once per process, so they are tested in subprocesses.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from acl_bindings import (
    AclError,
    AclMemoryError,
    AclnnInnerError,
    AclParamError,
    AclRuntimeError,
    ClosedError,
    recent_error_message,
    sim,
)
from acl_bindings.prototypes import PROTOTYPES
from upsample3d_grad import Session
from upsample3d_grad.op import OP

REPO = Path(__file__).resolve().parents[2]
SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]
EXPECTED_X2 = [72.0, 200.0, 328.0, 456.0]

#: One code per error class, and the exception class (and builtin) it must map to.
ERROR_CLASSES = {
    "parameter": (107000, AclParamError, ValueError),
    "memory": (207001, AclMemoryError, MemoryError),
    "runtime": (507899, AclRuntimeError, RuntimeError),
    "aclnn-inner": (561103, AclnnInnerError, RuntimeError),
}
#: Constructors returning a handle: NULL is always reported as 561103 (cann-abi.md §3, ACLNN_ERR_INNER_NULLPTR).
HANDLE_CONSTRUCTORS = {"aclCreateTensor", "aclCreateIntArray"}
#: The simulator never injects into these (reading the error message, the SoC name).
NOT_INJECTABLE = {"aclGetRecentErrMsg", "aclrtGetSocName"}
#: Calls whose failure is not an error by design: ``Device.is_current()`` reads the current context to skip the
#: device guard, and a failed read just takes the guard (which reads it again, and raises if that fails too).
PROBES = {"aclrtGetCurrentContext"}
CANDIDATES = [name for name in (*PROTOTYPES, OP.phase1_name, OP.phase2_name) if name not in NOT_INJECTABLE]


def _counts() -> dict[str, int]:
    return {name: sim.call_count(name) for name in CANDIDATES}


def _calls_of(action: Callable[[], Any]) -> dict[str, int]:
    """The C functions *action* called, with how many times (observed through the simulator's counters)."""
    before = _counts()
    action()
    after = _counts()
    return {name: after[name] - before[name] for name in CANDIDATES if after[name] > before[name]}


# --------------------------------------------------------------------------- scenarios

def _plans_refused(state: dict) -> bool:
    return state["s"].plans.last_refusal is not None


@dataclass
class Scenario:
    """*setup* builds the state, *op* is the operation under test (the faults hit it), *recover*
    shows that what is left still works, *teardown* releases everything.  *fell_back* says whether
    a refused ``aclSetAclOpExecutorRepeatable`` made the operation fall back to one-shot calls."""

    setup: Callable[[], dict]
    op: Callable[[dict], Any]
    recover: Callable[[dict], None]
    teardown: Callable[[dict], None]
    fell_back: Callable[[dict], bool] = _plans_refused


def _close(state: dict) -> None:
    for key in ("calls", "arrays", "sessions"):
        for obj in state.get(key, ()):
            obj.close()


def _numpy_call(plans: bool, warm: bool) -> Scenario:
    def setup() -> dict:
        s = Session(0, plans=plans)
        if warm:
            s.backward(SAMPLE, OUT_SIZE, IN_SIZE)
        return {"s": s, "sessions": [s]}

    def op(state: dict) -> Any:
        out = state["s"].backward(SAMPLE, OUT_SIZE, IN_SIZE)
        assert out.ravel().tolist() == EXPECTED
        return out

    def recover(state: dict) -> None:
        assert state["s"].backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED

    return Scenario(setup, op, recover, _close)


def _plan_hit() -> Scenario:
    """A kept plan run on new device addresses: aclSetInputTensorAddr / aclSetOutputTensorAddr."""
    def setup() -> dict:
        s = Session(0)
        a, b = s.upload(SAMPLE), s.upload(2 * SAMPLE)
        o1, o2 = s.empty(IN_SIZE), s.empty(IN_SIZE)
        s.backward(a, OUT_SIZE, IN_SIZE, out=o1)
        return {"s": s, "a": a, "b": b, "o1": o1, "o2": o2, "arrays": [a, b, o1, o2], "sessions": [s]}

    def op(state: dict) -> Any:
        state["s"].backward(state["b"], OUT_SIZE, IN_SIZE, out=state["o2"])
        assert state["o2"].download().ravel().tolist() == EXPECTED_X2

    def recover(state: dict) -> None:
        s = state["s"]
        for go, out, want in ((state["a"], state["o2"], EXPECTED), (state["b"], state["o1"], EXPECTED_X2)):
            s.backward(go, OUT_SIZE, IN_SIZE, out=out)
            assert out.download().ravel().tolist() == want

    return Scenario(setup, op, recover, _close)


def _timed() -> Scenario:
    """timed_backward: events around the launches."""
    def setup() -> dict:
        s = Session(0)
        a, o = s.upload(SAMPLE), s.empty(IN_SIZE)
        return {"s": s, "a": a, "o": o, "arrays": [a, o], "sessions": [s]}

    def op(state: dict) -> Any:
        times = state["s"].timed_backward(state["a"], OUT_SIZE, IN_SIZE, out=state["o"], repeat=2)
        assert len(times) == 2
        assert state["o"].download().ravel().tolist() == EXPECTED

    return Scenario(setup, op, op, _close)


def _context_switch() -> Scenario:
    """A call on a session whose context is not the thread's current one: aclrtSetCurrentContext."""
    def setup() -> dict:
        # one-shot calls: with plans, whether an address update runs would depend on where malloc puts things
        s1 = Session(1, plans=False)
        s0 = Session(0, plans=False)
        s1.backward(SAMPLE, OUT_SIZE, IN_SIZE)
        s0.backward(SAMPLE, OUT_SIZE, IN_SIZE)
        s0.device.activate()  # the thread's current context is now device 0's (calls restore what they find)
        return {"s0": s0, "s1": s1, "sessions": [s0, s1]}

    def op(state: dict) -> Any:
        assert state["s1"].backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED

    def recover(state: dict) -> None:
        for s in (state["s0"], state["s1"], state["s0"]):
            assert s.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED

    return Scenario(setup, op, recover, _close)


def _create() -> Scenario:
    """Session creation (aclInit has already run in this process: see the subprocess tests)."""
    def op(state: dict) -> Any:
        state["s"] = s = Session(0)
        state["sessions"] = [s]

    def recover(state: dict) -> None:
        with Session(0) as s:
            assert s.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED

    return Scenario(dict, op, recover, _close)


def _close_session() -> Scenario:
    """close() of a session holding a plan, a workspace and a live device array."""
    def setup() -> dict:
        s = Session(0)
        s.backward(SAMPLE, OUT_SIZE, IN_SIZE)
        a = s.upload(SAMPLE)
        return {"s": s, "a": a, "sessions": [s]}

    def op(state: dict) -> Any:
        state["s"].close()

    def recover(state: dict) -> None:
        s = state["s"]
        assert s.closed
        with pytest.raises(ClosedError):
            s.backward(SAMPLE, OUT_SIZE, IN_SIZE)
        s.close()  # retries whatever the failed close() could not release
        assert state["a"].closed and s.device.closed
        with Session(0) as fresh:
            assert fresh.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED

    return Scenario(setup, op, recover, _close)


def _device_call(plans: bool) -> Scenario:
    """Session.backward on device arrays: a device array in, a new device array out."""
    def setup() -> dict:
        s = Session(0, plans=plans)
        a = s.upload(SAMPLE)
        return {"s": s, "a": a, "arrays": [a], "sessions": [s]}

    def op(state: dict) -> Any:
        out = state["s"].backward(state["a"], OUT_SIZE, IN_SIZE)
        state["arrays"].append(out)
        assert out.download().ravel().tolist() == EXPECTED

    return Scenario(setup, op, op, _close)


def _repeated_call(plans: bool) -> Scenario:
    """Session.backward repeated on the same device arrays: the kept call, whose host checks passed, runs again."""
    def setup() -> dict:
        s = Session(0, plans=plans)
        a, o = s.upload(SAMPLE), s.empty(IN_SIZE)
        s.backward(a, OUT_SIZE, IN_SIZE, out=o)
        return {"s": s, "a": a, "o": o, "arrays": [a, o], "sessions": [s]}

    def op(state: dict) -> Any:
        state["s"].backward(state["a"], OUT_SIZE, IN_SIZE, out=state["o"])
        state["s"].synchronize()
        assert state["o"].download().ravel().tolist() == EXPECTED

    return Scenario(setup, op, op, _close)


def _prepare(plan: bool) -> Scenario:
    """Session.prepare: host checks, phase 1 once, a workspace."""
    def setup() -> dict:
        s = Session(0)
        a, o = s.upload(SAMPLE), s.empty(IN_SIZE)
        return {"s": s, "a": a, "o": o, "arrays": [a, o], "sessions": [s], "calls": []}

    def op(state: dict) -> Any:
        call = state["s"].prepare(state["a"], OUT_SIZE, IN_SIZE, out=state["o"], plan=plan)
        state["calls"].append(call)
        state["call"] = call

    def recover(state: dict) -> None:
        call = state["s"].prepare(state["a"], OUT_SIZE, IN_SIZE, out=state["o"], plan=plan)
        state["calls"].append(call)
        call()
        assert state["o"].download().ravel().tolist() == EXPECTED

    return Scenario(setup, op, recover, _close, lambda state: state["call"].fallback is not None)


def _prepared_call(plan: bool) -> Scenario:
    """A prepared call (plan: phase 2 only; one-shot: phase 1 and phase 2 on its kept tensors and arrays)."""
    def setup() -> dict:
        s = Session(0)
        a, o = s.upload(SAMPLE), s.empty(IN_SIZE)
        call = s.prepare(a, OUT_SIZE, IN_SIZE, out=o, plan=plan)
        return {"s": s, "a": a, "o": o, "call": call, "arrays": [a, o], "sessions": [s], "calls": [call]}

    def op(state: dict) -> Any:
        state["s"].synchronize()  # (work a failed call left queued may still write the output)
        state["o"].buffer.memset(0)
        state["call"]()
        assert state["o"].download().ravel().tolist() == EXPECTED

    return Scenario(setup, op, op, _close)


def _transfers() -> Scenario:
    """upload (a strided view) and download (into a transposed out)."""
    def setup() -> dict:
        s = Session(0)
        return {"s": s, "sessions": [s], "arrays": []}

    def op(state: dict) -> Any:
        gapped = np.zeros((2, 2, 2, 2, 4), np.float32)
        gapped[..., ::2] = SAMPLE
        arr = state["s"].upload(gapped[..., ::2])
        state["arrays"].append(arr)
        out = np.zeros(SAMPLE.shape[::-1], np.float32).T
        assert arr.download(out) is out and (out == SAMPLE).all()

    return Scenario(setup, op, op, _close)


def _torch_call() -> Scenario:
    """The torch path: CPU tensors in and out, through a session."""
    torch = pytest.importorskip("torch")
    from upsample3d_grad.functional import backward_torch

    def setup() -> dict:
        s = Session(0)
        return {"s": s, "sessions": [s]}

    def op(state: dict) -> Any:
        out = backward_torch(torch.from_numpy(SAMPLE.copy()), OUT_SIZE, IN_SIZE, session=state["s"])
        assert out.flatten().tolist() == EXPECTED

    return Scenario(setup, op, op, _close)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "one-shot cold": lambda: _numpy_call(plans=False, warm=False),
    "one-shot warm": lambda: _numpy_call(plans=False, warm=True),
    "plan cold": lambda: _numpy_call(plans=True, warm=False),
    "plan hit": _plan_hit,
    "timed": _timed,
    "context switch": _context_switch,
    "session create": _create,
    "session close": _close_session,
    "device one-shot": lambda: _device_call(plans=False),
    "device plan": lambda: _device_call(plans=True),
    "repeated one-shot": lambda: _repeated_call(plans=False),
    "repeated plan": lambda: _repeated_call(plans=True),
    "prepare plan": lambda: _prepare(plan=True),
    "prepare one-shot": lambda: _prepare(plan=False),
    "prepared call plan": lambda: _prepared_call(plan=True),
    "prepared call one-shot": lambda: _prepared_call(plan=False),
    "upload and download": _transfers,
    "torch": _torch_call,
}


def _observe(scenario: Scenario) -> dict[str, int]:
    state = scenario.setup()
    try:
        return _calls_of(lambda: scenario.op(state))
    finally:
        scenario.teardown(state)


def _leaks(before: dict[str, int]) -> dict[str, tuple[int, int]]:
    now = sim.live_handles()
    if now != before:
        gc.collect()  # temporaries whose release the library refused are freed by their finalizer
        now = sim.live_handles()
    return {k: (before[k], now[k]) for k in now if now[k] != before[k]}


def _check_error(exc: BaseException | None, func: str, code: int, kind: type, builtin: type) -> list[str]:
    if func in HANDLE_CONSTRUCTORS:
        code, kind, builtin = 561103, AclnnInnerError, RuntimeError
    if exc is None:
        return ["no exception"]
    if not isinstance(exc, AclError):
        return [f"{type(exc).__name__} instead of an AclError: {exc}"]
    problems = []
    if type(exc) is not kind or not isinstance(exc, builtin):
        problems.append(f"class {type(exc).__name__}, expected {kind.__name__}")
    if exc.code != code:
        problems.append(f"code {exc.code}, expected {code}")
    if exc.func != func:
        problems.append(f"func {exc.func!r}")
    if f"{func}: injected fault" not in exc.detail:
        problems.append(f"detail {exc.detail!r}")
    return problems


@pytest.mark.parametrize("error_class", list(ERROR_CLASSES))
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_observed_call_fails_cleanly(name: str, error_class: str, frozen_heap: None) -> None:
    code, kind, builtin = ERROR_CLASSES[error_class]
    make = SCENARIOS[name]
    observed = _observe(make())
    assert observed, "the scenario made no C call"
    failures: list[str] = []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()  # no finalizer of an unrelated object may run (and take the fault) during the operation
    try:
        for func, times in observed.items():
            for nth in range(1, times + 1):
                scenario = make()
                before = sim.live_handles()
                state = scenario.setup()
                exc: BaseException | None = None
                sim.set_fault(f"{func}:{nth}:{code}")
                count = sim.call_count(func)
                try:
                    scenario.op(state)
                except Exception as err:
                    exc = err
                finally:
                    sim.set_fault(None)
                label = f"{func}:{nth}:{code}"
                if sim.call_count(func) - count < nth:
                    failures.append(f"{label}: the call sequence changed; the fault did not fire")
                elif func in PROBES and exc is None:
                    pass  # a failed probe takes the general path (and the operation checked its result)
                elif (func == "aclrtMalloc" and error_class == "memory" and exc is None
                      and sim.call_count(func) - count > nth):
                    pass  # out of memory: the session's allocator freed its cache and asked once more
                elif func == "aclSetAclOpExecutorRepeatable":
                    # refused reuse is not an error: the plan cache runs that call shape one-shot
                    if exc is not None or not scenario.fell_back(state):
                        failures.append(f"{label}: expected the one-shot fallback, got {exc!r}")
                else:
                    failures += [f"{label}: {p}" for p in _check_error(exc, func, code, kind, builtin)]
                del exc  # the caller handled it: temporaries it kept alive are released now (or retried)
                _after_the_fault(label, scenario, state, failures)
                del state, scenario
                leaked = _leaks(before)
                if leaked:
                    failures.append(f"{label}: leaked {leaked}")
    finally:
        if was_enabled:
            gc.enable()
    assert not failures, "\n".join(failures)


def _after_the_fault(label: str, scenario: Scenario, state: dict, failures: list[str]) -> None:
    """After a faulted run: no error message left unread, the state still usable, and its teardown clean."""
    stale = recent_error_message()
    if stale:  # it would be attached to the next, unrelated failure on this thread
        failures.append(f"{label}: an error message was left unread: {stale!r}")
    try:
        scenario.recover(state)
    except Exception as err:
        failures.append(f"{label}: not usable afterwards: {type(err).__name__}: {err}")
    try:
        scenario.teardown(state)
    except Exception as err:
        failures.append(f"{label}: teardown failed: {type(err).__name__}: {err}")


#: The clean-up calls a second fault is injected into.
RELEASES = ("aclDestroyTensor", "aclDestroyIntArray", "aclDestroyAclOpExecutor", "aclrtFree", "aclrtDestroyEvent",
            "aclrtSynchronizeStream")


def _faulted_calls(make: Callable[[], Scenario], spec: str) -> dict[str, int]:
    """The C calls a run of the scenario makes with the fault *spec* in force (the clean-up included)."""
    before = sim.live_handles()
    scenario = make()
    state = scenario.setup()
    sim.set_fault(spec)

    def op() -> None:
        try:
            scenario.op(state)
        except AclError:
            pass

    try:
        calls = _calls_of(op)
    finally:
        sim.set_fault(None)
        recent_error_message()
        scenario.teardown(state)
        state.clear()
        _leaks(before)  # (collects what only the finalizer net releases, so the next run starts clean)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_second_fault_in_the_clean_up_fails_cleanly(name: str, frozen_heap: None) -> None:
    """Every observed call fails, and then, in the same run, every clean-up call made after it fails too
    (each in turn): the error is one of the two injected, nothing leaks, the session still works."""
    make = SCENARIOS[name]
    first_code, second_code = 507899, 107000
    observed = _observe(make())
    failures: list[str] = []
    runs = 0
    gc.collect()
    was_enabled = gc.isenabled()
    try:
        for func, times in observed.items():
            if func == "aclSetAclOpExecutorRepeatable":
                continue  # refused reuse is a fallback, not an error (see the single-fault test)
            for nth in range(1, times + 1):
                first = f"{func}:{nth}:{first_code}"
                after = _faulted_calls(make, first)
                for rel in RELEASES:
                    for m in range(1, after.get(rel, 0) + 1):
                        if rel == func and m == nth:
                            continue
                        label = f"{first},{rel}:{m}:{second_code}"
                        runs += 1
                        scenario = make()
                        before = sim.live_handles()
                        state = scenario.setup()
                        exc: BaseException | None = None
                        gc.disable()
                        sim.set_fault(label)
                        try:
                            scenario.op(state)
                        except Exception as err:
                            exc = err
                        finally:
                            sim.set_fault(None)
                            if was_enabled:
                                gc.enable()
                        if not isinstance(exc, AclError):
                            failures.append(f"{label}: {type(exc).__name__ if exc else 'no exception'}: {exc}")
                        elif exc.func not in (func, rel) or "injected fault" not in exc.detail:
                            failures.append(f"{label}: {type(exc).__name__} from {exc.func}: {exc.detail!r}")
                        del exc
                        _after_the_fault(label, scenario, state, failures)
                        del state, scenario
                        leaked = _leaks(before)
                        if leaked:
                            failures.append(f"{label}: leaked {leaked}")
    finally:
        if was_enabled:
            gc.enable()
    assert runs or name in ("session create",), "no clean-up call to fail"
    assert not failures, f"{len(failures)} of {runs} runs:\n" + "\n".join(failures[:40])


def test_the_enumeration_covers_every_kind_of_call() -> None:
    """The observed calls include everything the issue lists (so a broken observation cannot pass)."""
    seen: set[str] = set()
    for make in SCENARIOS.values():
        seen |= set(_observe(make()))
    wanted = {
        "aclrtSetDevice", "aclrtGetCurrentContext", "aclrtSetCurrentContext", "aclrtCreateStream",
        "aclrtMalloc", "aclrtMemcpy", "aclCreateTensor", "aclCreateIntArray", OP.phase1_name,
        "aclSetAclOpExecutorRepeatable", "aclSetInputTensorAddr", "aclSetOutputTensorAddr", OP.phase2_name,
        "aclrtSynchronizeStream", "aclrtCreateEvent", "aclrtRecordEvent", "aclrtSynchronizeEvent",
        "aclrtEventElapsedTime", "aclrtDestroyEvent", "aclDestroyTensor", "aclDestroyIntArray",
        "aclDestroyAclOpExecutor", "aclrtFree", "aclrtDestroyStream", "aclrtResetDevice",
    }
    assert wanted <= seen, sorted(wanted - seen)


def test_a_refused_release_stays_owned_and_close_retries_it(no_leaks: None) -> None:
    """The rule behind the leak checks above, shown on one device array."""
    with Session(0) as s:
        s.upload(SAMPLE).close()  # its memory goes back to the session's cache
        sim.set_fault("aclrtFree:1:107000")
        try:
            with pytest.raises(AclParamError) as info:
                s.empty_cache()
        finally:
            sim.set_fault(None)
        assert info.value.func == "aclrtFree"
        assert s.allocator.blocks == 1  # the library did not free it: still ours
        s.empty_cache()
        assert s.allocator.blocks == 0


# --------------------------------------------------------------------------- init and finalize

def _run(code: str, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "report.json"
    full = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    full.update({"ACL_BINDINGS_BACKEND": "sim", "CANN_SIM_REPORT": str(report),
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads(report.read_text())


def test_init_failures_then_success(tmp_path: Path) -> None:
    code = f"""
import json
import numpy as np
from acl_bindings import sim, AclError
from upsample3d_grad import Session
errors = []
for code in {[c for c, _, _ in ERROR_CLASSES.values()]}:
    sim.set_fault(f"aclInit:1:{{code}}")
    try:
        Session(0)
        errors.append(None)
    except AclError as exc:
        errors.append([type(exc).__name__, exc.code, exc.func, exc.detail])
    finally:
        sim.set_fault(None)
with Session(0) as s:
    result = s.backward(np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2), (2, 2, 2),
                        (2, 2, 1, 1, 1)).ravel().tolist()
print(json.dumps({{"errors": errors, "result": result, "live": sim.live_handles()}}))
"""
    proc, report = _run(code, tmp_path)
    assert proc.stderr == ""
    out = json.loads(proc.stdout)
    for (name, (code_, kind, _)), got in zip(ERROR_CLASSES.items(), out["errors"]):
        assert got is not None, name
        assert got[0] == kind.__name__ and got[1] == code_ and got[2] == "aclInit", got
        assert "aclInit: injected fault" in got[3], got
    assert out["result"] == EXPECTED
    assert not any(out["live"].values()), out["live"]
    # four failed aclInit calls, one that worked, and exactly one aclFinalizeReference at exit
    assert report["aclInit"] == 5 and report["aclFinalizeReference"] == 1 and report["initialized_at_exit"] is False


def test_a_failing_finalize_at_exit_is_quiet(tmp_path: Path) -> None:
    code = """
import numpy as np
from upsample3d_grad import Session
with Session(0) as s:
    print(s.backward(np.ones((1, 1, 2, 2, 2), np.float32), (2, 2, 2), (1, 1, 1, 1, 1)).item())
"""
    proc, report = _run(code, tmp_path, {"CANN_SIM_FAULT": "aclFinalizeReference:1:507899"})
    assert proc.stdout.strip() == "8.0" and proc.stderr == ""
    assert report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 0
    assert report["initialized_at_exit"] is True  # the injected failure left ACL initialised; nothing to do at exit
    assert not any(report["live"].values()), report["live"]
