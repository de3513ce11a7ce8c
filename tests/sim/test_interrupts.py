"""Ctrl-C at every line: a ``KeyboardInterrupt`` raised at the k-th traced line of a public call, for every k.

A ``sys.settrace`` function counts the ``line`` events of every Python frame the call runs (the
package, the standard library, numpy) and raises ``KeyboardInterrupt`` soon after the k-th, where
CPython would deliver a real Ctrl-C (see :class:`_Interrupter`).  For each k:

* the call raises exactly ``KeyboardInterrupt`` (never ``ctypes.ArgumentError`` or anything else),
  or completes when k is past its last line;
* once the objects are closed and the garbage collector ran, the simulator's live-handle counts
  are back where they were (``acl_bindings.sim.live_handles()``): no handle leaked;
* the session (where the call had one) still gives the sample result;
* closing the objects from another thread does not wait for anything the interrupt left behind on
  this one (a lock still held, a use or a close whose bookkeeping it cut short).

The garbage collector is off while the call runs, so that no unrelated object's finalizer takes
the interrupt.  Every line is tried: k runs over 1..N+1, where N is the number of lines the call
runs uninterrupted (measured after one warm-up call, so that first-use work such as loading the
operator library is not counted).  The paths are those of ``Session.backward`` (plans and
one-shot), ``Session.prepare``, a prepared call (plan and one-shot, on its arrays and on new ones) and
``Session()``.

One kind of line cannot deliver an interrupt: CPython runs weakref callbacks (here the
``WeakSet`` bookkeeping of ``_weakrefset.py`` when a temporary dies) as "unraisable", so an
exception raised there is reported and dropped, never propagated.  Such a lost interrupt is
accepted (and must still leak nothing); one lost anywhere else fails the test.
"""

from __future__ import annotations

import ctypes
import dis
import functools
import gc
import signal
import sys
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

from acl_bindings import sim
from upsample3d_grad import Session

# an interrupt raised in a weakref callback is reported as unraisable (see the module docstring)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


_CALLS = frozenset(dis.opmap[name] for name in ("CALL", "CALL_FUNCTION_EX", "CALL_KW") if name in dis.opmap)
_STORES: dict[Any, frozenset[int]] = {}  # code -> offsets (just after a call) where its result is stored or returned


def _stores_result(code: Any, offset: int) -> bool:
    """Whether the instructions from *offset* (just after a call) store the call's result, or return it as it
    is, before any other call or line."""
    stores = _STORES.get(code)
    if stores is None:
        found = set()
        instructions = list(dis.get_instructions(code))
        for i, ins in enumerate(instructions):
            for later in instructions[i:]:
                # (starts_line: a line number or None before CPython 3.13, a bool since)
                if later is not ins and (later.opcode in _CALLS or later.starts_line):
                    break
                if later.opname.startswith("STORE_") or later.opname == "RETURN_VALUE":
                    found.add(ins.offset)
                    break
        stores = _STORES[code] = frozenset(found)
    return offset in stores


def _returns_handle(obj: Any) -> bool:
    """Whether *obj* is a C function that returns a handle by value (a pointer), or the package's thin
    wrapper of one (``acl_bindings._lib``'s call guard, which returns the result as it is)."""
    if isinstance(obj, ctypes._CFuncPtr):
        restype = obj.restype
        return isinstance(restype, type) and issubclass(restype, (ctypes._Pointer, ctypes.c_void_p))
    return any(_returns_handle(c.cell_contents) for c in getattr(obj, "__closure__", None) or ()
               if isinstance(c.cell_contents, ctypes._CFuncPtr))


def _line_makes_a_handle(frame: Any) -> bool:
    """Whether the current line of *frame* calls a C function that returns a handle by value."""
    line, names = frame.f_lineno, []
    for ins in dis.get_instructions(frame.f_code):
        if ins.positions is not None and ins.positions.lineno == line and ins.opname in _LOADS:
            names.append(ins.argval)
    scopes = (frame.f_locals, frame.f_globals)
    return any(_returns_handle(scope[name]) for name in names for scope in scopes if name in scope)


_LOADS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"})


class _Interrupter:
    """A trace function that delivers a KeyboardInterrupt soon after the *k*-th line event (0: never;
    it only counts lines).

    It is delivered where CPython delivers a real signal's exception: on return from a call (the
    eval-breaker check at the end of a call instruction), that is at the first instruction after a
    call, in the frame that made it (or in a caller, when the interrupted line makes no call).
    Raising at the line event itself would not model Ctrl-C: there the instruction about to run may
    be one the compiler knows cannot raise (a ``try:``'s NOP, the constants before a ``with``'s
    ``__exit__`` call), which since CPython 3.11 the exception table does not cover, so the enclosing
    ``with`` and ``finally`` blocks would be skipped (python/cpython#148278) - something no real
    signal can do.

    One window is left out on purpose: between the return of a C function that returns a handle by
    value (a pointer restype: ``aclCreateTensor``, ``aclCreateIntArray``) and the store of that handle
    in the same statement (``cell.value = create(...)``, also through the call guard that returns it
    as it is).  A real Ctrl-C there loses that handle, and no Python code can close that window (the
    README says so); the interrupt is delivered after the next call instead.  Releases do not depend on
    it: a handle leaves its cell before its release is called (``release_cell``), which this test
    checks (a release returns a status, not a handle).
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.lines = 0
        self.pending = False  # past the k-th line: waiting for a delivery point
        self.after_call: dict[int, bool] = {}  # frames whose next instruction follows a call
        self.fired = False
        self.where = ""

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if self.pending:
            if event == "opcode":
                if self.after_call.pop(id(frame), False):
                    window = _stores_result(frame.f_code, frame.f_lasti) and _line_makes_a_handle(frame)
                    if not window:  # (see the class docstring)
                        self.pending = False
                        self.fired = True
                        self.where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
                        raise KeyboardInterrupt
                if frame.f_code.co_code[frame.f_lasti] in _CALLS:
                    self.after_call[id(frame)] = True
            elif event == "call":
                frame.f_trace_opcodes = True
            elif event == "return":
                self.after_call.pop(id(frame), None)
        elif event == "line" and not self.fired:
            self.lines += 1
            if self.lines == self.k:
                self.pending = True
                frame.f_trace_opcodes = True
                caller = frame.f_back
                while caller is not None:  # (each caller is inside a call: its next instruction follows it)
                    if caller.f_trace is not None:
                        caller.f_trace_opcodes = True
                        self.after_call[id(caller)] = True
                    caller = caller.f_back
        return self

    def run(self, op: Callable[[], Any]) -> None:
        sys.settrace(self)
        try:
            op()
        finally:
            sys.settrace(None)


def _backward(plans: bool) -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    def setup() -> dict:
        return {"s": Session(0, plans=plans)}

    def op(state: dict) -> Any:
        return state["s"].backward(SAMPLE, OUT_SIZE, IN_SIZE)

    return setup, op


def _remembered(plans: bool) -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    def setup() -> dict:
        s = Session(0, plans=plans)
        go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
        s.backward(go, OUT_SIZE, IN_SIZE, out=gi)  # checked now: the next call on these arrays is remembered
        return {"s": s, "go": go, "gi": gi}

    def op(state: dict) -> Any:
        state["s"].backward(state["go"], OUT_SIZE, IN_SIZE, out=state["gi"])
        state["s"].synchronize()

    return setup, op


def _prepare(plan: bool) -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    def setup() -> dict:
        s = Session(0)
        return {"s": s, "go": s.upload(SAMPLE), "gi": s.empty(IN_SIZE)}

    def op(state: dict) -> Any:
        state["call"] = state["s"].prepare(state["go"], OUT_SIZE, IN_SIZE, out=state["gi"], plan=plan)

    return setup, op


def _prepared_call(plan: bool, new_arrays: bool = False) -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    def setup() -> dict:
        s = Session(0)
        go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
        call = s.prepare(go, OUT_SIZE, IN_SIZE, out=gi, plan=plan)
        return {"s": s, "go": go, "gi": gi, "call": call, "others": (s.upload(SAMPLE), s.empty(IN_SIZE))}

    def op(state: dict) -> Any:
        if new_arrays:  # (a plan points its executor at them, a one-shot call makes them aclTensors)
            state["call"](*state["others"])
        else:
            state["call"]()

    return setup, op


def _elsewhere(path: Callable[[], tuple[Callable[[], dict], Callable[[dict], Any]]]
               ) -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    """*path* with another device's context current on the thread: the call takes the device guard, and that
    context must be current again after it, however it ends."""
    setup, op = path()

    def setup_elsewhere() -> dict:
        state = setup()
        state["other"] = Session(1)
        state["other"].device.activate()
        return state

    return setup_elsewhere, op


def _session() -> tuple[Callable[[], dict], Callable[[dict], Any]]:
    def op(state: dict) -> Any:
        state["s"] = Session(0)

    return dict, op


PATHS: dict[str, Callable[[], tuple[Callable[[], dict], Callable[[dict], Any]]]] = {
    "backward plans": lambda: _backward(True),
    "backward one-shot": lambda: _backward(False),
    "remembered backward plans": lambda: _remembered(True),
    "remembered backward one-shot": lambda: _remembered(False),
    "prepare plan": lambda: _prepare(True),
    "prepare one-shot": lambda: _prepare(False),
    "prepared call plan": lambda: _prepared_call(True),
    "prepared call one-shot": lambda: _prepared_call(False),
    "prepared call plan, new arrays": lambda: _prepared_call(True, True),
    "prepared call one-shot, new arrays": lambda: _prepared_call(False, True),
    "prepared call plan, another device current": lambda: _elsewhere(lambda: _prepared_call(True)),
    "remembered backward plans, another device current": lambda: _elsewhere(lambda: _remembered(True)),
    "Session()": _session,
}


def _teardown(state: dict) -> None:
    call = state.get("call")
    if call is not None:
        call.close()
    for name in ("s", "other"):
        s = state.get(name)
        if s is not None:
            s.close()


def _teardown_on_another_thread(state: dict) -> None:
    """Close from a second thread, which must not wait for anything the interrupt left on this one
    (a lock still held, a use or close whose bookkeeping was cut short)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            _teardown(state)
        except BaseException as err:  # noqa: B036 - reported by the caller
            errors.append(err)

    closer = threading.Thread(target=target, daemon=True)
    closer.start()
    closer.join(30)
    if closer.is_alive():
        raise AssertionError("close from another thread still waits after 30 s")
    if errors:
        raise errors[0]


def _usable(state: dict) -> None:
    s = state.get("s")
    if s is None or s.closed:
        with Session(0) as fresh:
            assert fresh.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED
        return
    assert s.backward(SAMPLE, OUT_SIZE, IN_SIZE).ravel().tolist() == EXPECTED
    call = state.get("call")
    if call is not None and not call.closed:
        assert call().download().ravel().tolist() == EXPECTED  # (on whichever arrays it is bound to now)


def _lines_of(setup: Callable[[], dict], op: Callable[[dict], Any]) -> int:
    state = setup()
    try:
        op(state)  # warm-up: first-use work (binding functions, loading libraries) is not counted
    finally:
        _teardown(state)
    state = setup()
    counter = _Interrupter(0)
    try:
        counter.run(lambda: op(state))
    finally:
        _teardown(state)
    return counter.lines


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="the interrupter models CPython 3.11+'s delivery of a signal's "
                    "exception (at the end of a call instruction, read with dis positions); 3.9 and 3.10 deliver at "
                    "other instructions")
@pytest.mark.parametrize("path", list(PATHS))
def test_an_interrupt_at_every_line_leaks_nothing(path: str) -> None:
    setup, op = PATHS[path]()
    total = _lines_of(setup, op)
    assert total > 10, total  # the trace sees the call's lines (a broken counter cannot pass)
    failures: list[str] = []
    gc.collect()
    before = sim.live_handles()
    was_enabled = gc.isenabled()
    try:
        for k in range(1, total + 2):  # the last k is past the end: the call completes
            state = setup()
            interrupter = _Interrupter(k)
            exc: BaseException | None = None
            gc.disable()
            try:
                interrupter.run(functools.partial(op, state))
            except BaseException as err:  # noqa: B036 - the class is what is checked
                exc = err
            finally:
                if was_enabled:
                    gc.enable()
            unraisable = "_weakrefset.py" in interrupter.where  # (see the module docstring)
            if interrupter.fired and type(exc) is not KeyboardInterrupt and not (exc is None and unraisable):
                failures.append(f"line {k} {interrupter.where}: " + (f"{type(exc).__name__}: {exc}" if exc
                                                                      else "interrupt lost"))
            elif not interrupter.fired and exc is not None:
                failures.append(f"line {k}: {type(exc).__name__} without an interrupt: {exc}")
            del exc
            if "other" in state and not state["other"].device.is_current():
                failures.append(f"line {k} {interrupter.where}: the caller's current context was not made current "
                                "again")
            try:
                _usable(state)
            except Exception as err:
                failures.append(f"line {k}: not usable afterwards: {type(err).__name__}: {err}")
            try:
                _teardown_on_another_thread(state)
            except Exception as err:
                failures.append(f"line {k} {interrupter.where}: close failed: {type(err).__name__}: {err}")
                if "still waits" in str(err):
                    break
            del state
            now = sim.live_handles()
            if now != before:
                gc.collect()  # what only the finalizer net releases (objects in reference cycles)
                now = sim.live_handles()
            if now != before:
                failures.append(f"line {k} {interrupter.where}: leaked "
                                f"{ {n: (before[n], now[n]) for n in now if now[n] != before[n]} }")
                before = now
    finally:
        if was_enabled:
            gc.enable()
    assert not failures, f"{len(failures)} of {total} lines:\n" + "\n".join(failures[:40])


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signal.pthread_kill")
@pytest.mark.parametrize("plan", [True, False])
def test_a_real_ctrl_c_while_a_prepared_call_waits_for_the_lock(plan: bool) -> None:
    """A real SIGINT while a prepared call waits for its session's lock, which another thread holds (it waits in
    Session.synchronize() for a slow kernel): the call raises KeyboardInterrupt, makes no C call, and leaves
    the lock to its holder; afterwards the call works."""
    assert threading.current_thread() is threading.main_thread()  # (where Python delivers SIGINT)
    s = Session(0)
    previous = sim.set_delay(0)
    try:
        go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
        call = s.prepare(go, OUT_SIZE, IN_SIZE, out=gi, plan=plan, sync=False)
        sim.set_delay(1500)
        call()  # queued: a 1.5 s kernel
        sim.set_delay(0)
        holder_error: list[BaseException] = []

        def hold() -> None:
            try:
                s.synchronize()  # holds the session's lock while it waits
            except BaseException as exc:  # noqa: B036 - reported below
                holder_error.append(exc)

        holder = threading.Thread(target=hold)
        holder.start()
        time.sleep(0.2)
        counted = ("aclrtGetCurrentContext", call.op.phase2_name, call.op.phase1_name)
        before = [sim.call_count(f) for f in counted]
        timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                call()
        finally:
            timer.cancel()
            holder.join(30)
        assert not holder_error and not holder.is_alive()
        assert [sim.call_count(f) for f in counted] == before and call.calls == 1
        assert call() is gi and call.calls == 2
        np.testing.assert_array_equal(gi.download().ravel(), EXPECTED)
    finally:
        sim.set_delay(previous)
        s.close()
