"""Real Ctrl-C at random moments: a SIGINT delivered by a timer over thousands of calls of every public path.

Each *episode* arms ``signal.setitimer(ITIMER_REAL, delay)`` with a delay drawn uniformly from 5-300 us
(seeded: the seed is printed on failure, and ``UPSAMPLE3D_SIGNAL_SEED`` replays it; the moments still depend
on the machine's timing) and runs one path's call over and over until the timer fires.  The ``SIGALRM``
handler sends the process's main thread a real ``SIGINT`` (``signal.raise_signal``), whose handler is Python's
default one: it raises ``KeyboardInterrupt`` wherever the call was.  The contract checked:

* the call ends in ``KeyboardInterrupt``, never another exception type, and never loses it: the one accepted
  loss is an interrupt that CPython reports as unraisable, because it came in a weakref callback (a finalizer
  or a ``WeakSet``'s bookkeeping that the garbage collector ran meanwhile).  CPython drops a finalizer that an
  interrupt cut short, as it would any Python finalizer's: the hook runs the binding's again
  (:func:`_finish_finalizer`), as its uninterrupted run would have, which also checks that a release run twice
  is released once;
* no deadlock: a watchdog (``faulthandler.dump_traceback_later``) ends the process with every thread's
  traceback if a test runs past :data:`WATCHDOG_S`;
* after each interrupt the path's next call gives the reference result (:mod:`upsample3d_grad.reference`);
* no handle is released twice: every release is checked by the simulator (a second one is an error, which
  ``close()`` raises and a finalizer logs), and the simulator's own accounting must balance: for each kind,
  creations minus releases (the C calls it counted) equals the change in its live handles;
* once everything is closed (``Session.close()``, ``close()``, ``close_default_session()``) and the garbage
  collector ran, nothing is live beyond the one documented window: a handle that a C function returns by
  value (``aclCreateTensor``, ``aclCreateIntArray``) is lost when the interrupt comes between its return and
  its store.  Each such interrupt is recognised from its traceback (:func:`_window_kind`), and the handles
  left live must be exactly those: one of that kind per interrupt there, none of any other kind.

Only public APIs are used: :class:`upsample3d_grad.Session` and its arrays and prepared calls, the module
functions, and the raw objects of :mod:`acl_bindings`.
"""

from __future__ import annotations

import collections
import dis
import faulthandler
import gc
import linecache
import os
import random
import re
import signal
import sys
import time
import traceback
import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import acl_bindings as ab
from acl_bindings import sim
from upsample3d_grad import Session, close_default_session, reference, upsample_nearest_exact3d_backward

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")

SEED = int(os.environ.get("UPSAMPLE3D_SIGNAL_SEED", "20261202"))
DELAY_S = (5e-6, 300e-6)
WATCHDOG_S = 120  # seconds one test may run before the watchdog ends the process (a deadlock)

GO = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
GI = reference.upsample_nearest_exact3d_backward(GO, OUT_SIZE, IN_SIZE)
X = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 2, 2)
FWD_SIZE = (3, 3, 3)
Y = reference.upsample_nearest_exact3d(X, FWD_SIZE)

#: the C calls that make and release each kind of handle the simulator counts
ACCOUNTS = {
    "device_buffer": ("aclrtMalloc", "aclrtFree"),
    "host_buffer": ("aclrtMallocHost", "aclrtFreeHost"),
    "tensor": ("aclCreateTensor", "aclDestroyTensor"),
    "int_array": ("aclCreateIntArray", "aclDestroyIntArray"),
    "stream": ("aclrtCreateStream", "aclrtDestroyStream"),
    "event": ("aclrtCreateEvent", "aclrtDestroyEvent"),
    "context": ("aclrtCreateContext", "aclrtDestroyContext"),
    "device_ref": ("aclrtSetDevice", "aclrtResetDevice"),
}
#: the C functions that return a handle by value (the documented window), and the kind each makes
BY_VALUE = {"aclCreateTensor": "tensor", "aclCreateIntArray": "int_array"}


class _Alarm:
    """The SIGALRM handler: while armed, once, a real SIGINT to this thread (Python's handler raises
    KeyboardInterrupt from inside ``raise_signal``, so from wherever the alarm interrupted)."""

    def __init__(self) -> None:
        self.armed = False
        self.fired = 0
        self.unraisable: list[str] = []  # where each interrupt that CPython reported as unraisable came
        self.finished = 0  # binding finalizers cut short by one, run again (_finish_finalizer)

    def __call__(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.armed = False
            self.fired += 1
            signal.raise_signal(signal.SIGINT)


@dataclass
class _Tally:
    episodes: int = 0
    calls: int = 0
    interrupts: int = 0
    unraisable: int = 0
    window: dict[str, int] = field(default_factory=dict)  # interrupts in the documented window, by kind
    failures: list[str] = field(default_factory=list)


@pytest.fixture
def alarm():
    """SIGALRM goes to :class:`_Alarm`, SIGINT to Python's default handler; a watchdog bounds the test; lost
    interrupts that CPython reports as unraisable are counted (``alarm.unraisable``)."""
    handler = _Alarm()
    old_alrm = signal.signal(signal.SIGALRM, handler)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    old_hook = sys.unraisablehook

    def hook(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt):
            where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                               for f in reversed(traceback.extract_tb(info.exc_traceback)[-3:]))
            handler.unraisable.append(where)
            if _finish_finalizer(info.exc_traceback):
                handler.finished += 1
        else:
            old_hook(info)

    sys.unraisablehook = hook
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    try:
        yield handler
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = old_hook
        signal.signal(signal.SIGALRM, old_alrm)
        signal.signal(signal.SIGINT, old_int)


def _finish_finalizer(tb: Any) -> bool:
    """Finish a finalizer that an interrupt cut short, as its uninterrupted run would have; True if it did.

    *tb* is the traceback CPython reported as unraisable; its first frame is the weakref callback's.  A
    finalizer interrupted before it took its registry entry is still alive: it is called (nothing of it ran).
    One that had taken it (its ``info``) is run again only when it is the binding's release net
    (``acl_bindings._resource``), which empties the handle's cell before the C call: run twice, it releases
    once.  Other callbacks (a ``WeakSet``'s, the allocator's append of a dropped block) are left alone.
    """
    frame = tb.tb_frame
    if frame.f_code is not weakref.finalize.__call__.__code__:
        return False
    fin, info = frame.f_locals["self"], frame.f_locals.get("info")
    if info is None:
        if not fin.alive:
            return False
        fin()
    elif getattr(info.func, "__module__", None) == "acl_bindings._resource":
        info.func(*info.args, **(info.kwargs or {}))
    else:
        return False
    return True


def _is_call(ins: dis.Instruction) -> bool:
    return ins.opname.startswith(("CALL", "PRECALL"))


def _window_kind(exc: BaseException) -> str | None:
    """The kind of handle that *exc* lost in the documented window, or None.

    That is when the frame the alarm interrupted (the last one before the handler's in the traceback) had
    just called, on a line naming a function of :data:`BY_VALUE` (by name, or a local or global bound to
    it), a function whose result the next instructions store (or return) before any other call.
    """
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    if len(entries) < 2 or entries[-1].tb_frame.f_code is not _Alarm.__call__.__code__:
        return None
    frame, lasti, line = entries[-2].tb_frame, entries[-2].tb_lasti, entries[-2].tb_lineno
    code = list(dis.get_instructions(frame.f_code))
    at = next((i for i, ins in enumerate(code) if ins.offset == lasti), None)
    if at is None:
        return None
    while at > 0 and not _is_call(code[at]) and code[at].opname.startswith("LOAD"):  # (3.9: after the call)
        at -= 1
    if not _is_call(code[at]):
        return None
    for ins in code[at + 1:]:
        if ins.opname.startswith("STORE") or ins.opname == "RETURN_VALUE":
            break
        if _is_call(ins) or ins.opname in ("KW_NAMES", "PUSH_NULL"):
            return None  # another call comes first: the one that returned was an argument
    else:
        return None
    last = getattr(getattr(code[at], "positions", None), "end_lineno", None) or line  # (its last line; 3.11+)
    text = "".join(linecache.getline(frame.f_code.co_filename, n) for n in range(line, last + 1))
    for name in re.findall(r"[A-Za-z_]\w*", text):
        obj = frame.f_locals.get(name, frame.f_globals.get(name))
        for func in (name, getattr(obj, "__name__", None)):
            if func in BY_VALUE:
                return BY_VALUE[func]
    return None


def _accounts() -> dict[str, int]:
    """Per kind: handles made minus handles released, by the C calls the simulator counted."""
    return {kind: sim.call_count(make) - sim.call_count(free) for kind, (make, free) in ACCOUNTS.items()}


def _episode(alarm: _Alarm, op: Callable[[], Any], delay: float, max_calls: int) -> tuple[int, BaseException | None]:
    """Run *op* until the alarm, *delay* seconds from now, interrupts it; returns (calls completed, exception)."""
    done = [0]
    try:
        try:
            alarm.armed = True
            signal.setitimer(signal.ITIMER_REAL, delay)
            _calls_until_the_alarm(alarm, op, max_calls, done)
        finally:
            alarm.armed = False  # (an alarm after this line does nothing)
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as exc:  # noqa: B036 - its type is what is checked
        return done[0], exc
    return done[0], None


def _calls_until_the_alarm(alarm: _Alarm, op: Callable[[], Any], max_calls: int, done: list[int]) -> None:
    # its own frame: CPython 3.13.0 lets an exception raised by a signal handler at a while loop's jump back
    # escape the try around the loop (seen here); raised in a callee, it reaches the caller's try
    while alarm.armed and done[0] < max_calls:  # (a lost interrupt ends the loop too)
        op()
        done[0] += 1


class Path:
    """One public path: ``op()`` is the call to interrupt, ``check()`` one call that must give the reference
    result afterwards, ``close()`` closes everything the path made."""

    max_calls = 10_000

    def op(self) -> Any:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _expect(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"{what}: got {got.ravel().tolist()}, expected {want.ravel().tolist()}")


class _SessionPath(Path):
    def __init__(self) -> None:
        self.s = Session(0)

    def check(self) -> None:
        _expect(self.s.backward(GO, OUT_SIZE, IN_SIZE), GI, "Session.backward after the interrupt")

    def close(self) -> None:
        self.s.close()


class BackwardNumpy(_SessionPath):
    def op(self) -> Any:
        return self.s.backward(GO, OUT_SIZE, IN_SIZE)


class BackwardNumpyOut(_SessionPath):
    def __init__(self) -> None:
        super().__init__()
        self.out = np.empty(IN_SIZE, np.float32)

    def op(self) -> Any:
        return self.s.backward(GO, OUT_SIZE, IN_SIZE, out=self.out)

    def check(self) -> None:
        self.out[...] = -1
        assert self.s.backward(GO, OUT_SIZE, IN_SIZE, out=self.out) is self.out
        _expect(self.out, GI, "Session.backward(out=numpy) after the interrupt")


class Forward(_SessionPath):
    def op(self) -> Any:
        return self.s.forward(X, FWD_SIZE)

    def check(self) -> None:
        _expect(self.s.forward(X, FWD_SIZE), Y, "Session.forward after the interrupt")
        super().check()


class DeviceArraysOut(_SessionPath):
    """``backward`` on device arrays with ``out=``, then ``synchronize``."""

    def __init__(self) -> None:
        super().__init__()
        self.go, self.gi = self.s.upload(GO), self.s.empty(IN_SIZE)

    def op(self) -> Any:
        self.s.backward(self.go, OUT_SIZE, IN_SIZE, out=self.gi)
        self.s.synchronize()

    def check(self) -> None:
        assert self.s.backward(self.go, OUT_SIZE, IN_SIZE, out=self.gi) is self.gi
        self.s.synchronize()
        _expect(self.gi.download(), GI, "backward(out=device array) after the interrupt")


class DeviceArraysFresh(_SessionPath):
    """``upload``, ``empty``, ``backward(out=)``, ``download`` and the arrays' ``close``, all interrupted."""

    def op(self) -> Any:
        go = self.s.upload(GO)
        gi = self.s.empty(IN_SIZE)
        self.s.backward(go, OUT_SIZE, IN_SIZE, out=gi)
        result = gi.download()
        gi.close()
        go.close()
        return result

    def check(self) -> None:
        _expect(self.op(), GI, "upload/empty/backward/download after the interrupt")


class DeviceArraysResult(_SessionPath):
    """``backward`` on a device array, returning a new device array."""

    def __init__(self) -> None:
        super().__init__()
        self.go = self.s.upload(GO)

    def op(self) -> Any:
        gi = self.s.backward(self.go, OUT_SIZE, IN_SIZE)
        try:
            return gi.download()
        finally:
            gi.close()

    def check(self) -> None:
        _expect(self.op(), GI, "backward(device array) after the interrupt")


class PreparedCall(_SessionPath):
    """A prepared call, called again and again."""

    def __init__(self) -> None:
        super().__init__()
        self.go, self.gi = self.s.upload(GO), self.s.empty(IN_SIZE)
        self.call = self.s.prepare(self.go, OUT_SIZE, IN_SIZE, out=self.gi)

    def op(self) -> Any:
        return self.call()

    def check(self) -> None:
        _expect(self.call().download(), GI, "a prepared call after the interrupt")
        super().check()

    def close(self) -> None:
        self.call.close()
        super().close()


class Prepare(_SessionPath):
    """``prepare`` itself, a call of it, and its ``close``."""

    def __init__(self) -> None:
        super().__init__()
        self.go, self.gi = self.s.upload(GO), self.s.empty(IN_SIZE)

    def op(self) -> Any:
        call = self.s.prepare(self.go, OUT_SIZE, IN_SIZE, out=self.gi)
        call()
        call.close()

    def check(self) -> None:
        call = self.s.prepare(self.go, OUT_SIZE, IN_SIZE, out=self.gi)
        try:
            _expect(call().download(), GI, "prepare and call after the interrupt")
        finally:
            call.close()


class ModuleFunction(Path):
    """The module function on the default session, which is closed every few calls."""

    def __init__(self) -> None:
        self.n = 0

    def op(self) -> Any:
        self.n += 1
        if self.n % 8 == 0:
            close_default_session()
        return upsample_nearest_exact3d_backward(GO, OUT_SIZE, IN_SIZE)

    def check(self) -> None:
        _expect(upsample_nearest_exact3d_backward(GO, OUT_SIZE, IN_SIZE), GI, "the module function after the "
                "interrupt")

    def close(self) -> None:
        close_default_session()


class SessionLifetime(Path):
    """``Session()``, one call and ``Session.close()``; an interrupted session is closed by the next episode."""

    def __init__(self) -> None:
        self.left: list[Session] = []

    def op(self) -> Any:
        s = Session(0)
        self.left.append(s)
        s.backward(GO, OUT_SIZE, IN_SIZE)
        s.close()
        self.left.pop()

    def check(self) -> None:
        while self.left:  # (the close of a session that an interrupt cut short finishes the job)
            self.left.pop().close()
        with Session(0) as s:
            _expect(s.backward(GO, OUT_SIZE, IN_SIZE), GI, "a new session after the interrupt")


class RawObjects(Path):
    """``acl_bindings`` objects made, used and closed: DeviceBuffer, Stream, Event, Tensor."""

    def __init__(self) -> None:
        self.device = ab.Device(0)
        self.host = np.arange(16, dtype=np.float32)

    def op(self) -> Any:
        buf = ab.DeviceBuffer(self.device, self.host.nbytes)
        stream = ab.Stream(self.device)
        event = ab.Event(self.device)
        tensor = ab.Tensor((4, 4), np.float32, buf)
        buf.upload(self.host, stream=stream)
        event.record(stream)
        event.synchronize()
        stream.synchronize()
        got = buf.download(np.empty_like(self.host))
        tensor.close()
        event.close()
        stream.close()
        buf.close()
        return got

    def check(self) -> None:
        _expect(self.op(), self.host, "raw objects after the interrupt")

    def close(self) -> None:
        self.device.close()


PATHS: dict[str, tuple[Callable[[], Path], int]] = {  # path -> (maker, episodes)
    "Session.backward numpy": (BackwardNumpy, 2000),
    "Session.backward numpy out=": (BackwardNumpyOut, 2000),
    "Session.forward numpy": (Forward, 2000),
    "Session.backward device arrays out=, synchronize": (DeviceArraysOut, 1000),
    "upload, empty, backward, download, array close": (DeviceArraysFresh, 2000),
    "Session.backward device array in, device array out": (DeviceArraysResult, 1500),
    "prepared call": (PreparedCall, 1000),
    "prepare, call, close": (Prepare, 2000),
    "upsample_nearest_exact3d_backward, close_default_session": (ModuleFunction, 2000),
    "Session(), backward, Session.close()": (SessionLifetime, 2000),
    "DeviceBuffer, Stream, Event, Tensor": (RawObjects, 2000),
}


def _run(name: str, alarm: _Alarm, episodes: int) -> _Tally:
    seed = SEED ^ zlib.crc32(name.encode())
    rng = random.Random(seed)
    tally = _Tally()
    path = PATHS[name][0]()
    try:
        path.check()  # warm-up: first-use work (loading libraries) is not what is tested
        for i in range(episodes):
            delay = rng.uniform(*DELAY_S)
            fired = alarm.fired
            lost = len(alarm.unraisable)
            calls, exc = _episode(alarm, path.op, delay, path.max_calls)
            tally.episodes += 1
            tally.calls += calls + (exc is not None)
            where = f"episode {i} (delay {delay * 1e6:.0f} us, after {calls} calls)"
            if alarm.fired == fired:
                tally.failures.append(f"{where}: the alarm never fired"
                                      + (f"; {type(exc).__name__}: {exc}" if exc else ""))
            elif type(exc) is KeyboardInterrupt:
                tally.interrupts += 1
                kind = _window_kind(exc)
                if kind is not None:
                    tally.window[kind] = tally.window.get(kind, 0) + 1
            elif exc is None and len(alarm.unraisable) > lost:
                tally.unraisable += 1
            elif exc is None:
                tally.failures.append(f"{where}: the interrupt was lost (the call returned normally)")
            else:
                tally.failures.append(f"{where}: {type(exc).__name__}: {exc}")
            del exc
            try:
                path.check()
            except Exception as err:
                tally.failures.append(f"{where}: not usable afterwards: {type(err).__name__}: {err}")
            if len(tally.failures) >= 20:
                break
    finally:
        path.close()
    return tally


@pytest.mark.parametrize("name", list(PATHS))
def test_a_real_sigint_at_random_moments(name: str, alarm: _Alarm, window_losses: collections.Counter[str]) -> None:
    close_default_session()
    gc.collect()
    live, made = sim.live_handles(), _accounts()
    start = time.monotonic()
    tally = _run(name, alarm, PATHS[name][1])
    gc.collect()
    live_now, made_now = sim.live_handles(), _accounts()
    seed = SEED ^ zlib.crc32(name.encode())
    summary = (f"{name}: seed {seed} (UPSAMPLE3D_SIGNAL_SEED={SEED}), {tally.episodes} episodes, {tally.calls} "
               f"calls, {tally.interrupts} interrupts ({tally.window} in the window), {tally.unraisable} lost as "
               f"unraisable ({alarm.finished} finalizers cut short, finished by the hook), "
               f"{time.monotonic() - start:.1f} s")
    print(summary)
    assert not tally.failures, summary + "\n" + "\n".join(tally.failures)
    assert tally.interrupts >= tally.episodes * 0.9, summary  # (the timer really interrupts the calls)
    # the simulator's accounting: every release it counted was of a live handle (none twice)
    unbalanced = {k: (made_now[k] - made[k], live_now[k] - live[k]) for k in ACCOUNTS
                  if made_now[k] - made[k] != live_now[k] - live[k]}
    assert not unbalanced, f"{summary}\n(made - released, live change) by kind: {unbalanced}"
    # nothing live but what the documented window lost: one handle per interrupt that came there
    leaked = {k: live_now[k] - live[k] for k in live if live_now[k] != live[k]}
    lost = collections.Counter(alarm.unraisable)
    why = (f"{summary}\nleaked {leaked}, lost in the window {tally.window}; interrupts lost as unraisable, by place "
           "(one in a finalizer before its release loses that handle too):\n"
           + "\n".join(f"{n} x {w}" for w, n in lost.most_common()))
    if sys.version_info >= (3, 11):
        assert leaked == tally.window, why
    else:  # (no instruction positions before 3.11: an interrupt just after such a call may be counted in the window)
        assert all(0 < n <= tally.window.get(k, 0) for k, n in leaked.items()), why
    window_losses.update(leaked)  # the run's final accounting expects them (tests/conftest.py)
