"""Close against use on the Python side: ``in_use`` methods and ``Resource.close()`` (no library needed)."""

from __future__ import annotations

import threading
import time
from ctypes import c_void_p

import pytest

from acl_bindings import ClosedError
from acl_bindings._resource import Resource, in_use, release_cell


class _State:
    def __init__(self) -> None:
        self.in_call = False
        self.released_during_use: list[bool] = []


class Handle(Resource):
    """A resource whose release records whether a use was still running."""

    _what = "handle"

    def __init__(self) -> None:
        self.state = _State()
        self._own(_release, self.state)  # (the finalizer must not hold self)

    @property
    def in_call(self) -> bool:
        return self.state.in_call

    @property
    def released_during_use(self) -> list[bool]:
        return self.state.released_during_use

    @in_use
    def use(self, until: threading.Event | None = None, other: Resource | None = None) -> str:
        self.state.in_call = True
        try:
            if until is not None:
                assert until.wait(30)
            return "used"
        finally:
            self.state.in_call = False


def _release(state: _State) -> None:
    state.released_during_use.append(state.in_call)


def _wait_for(condition: object, what: str) -> None:
    for _ in range(3000):  # bounded: at most a few seconds
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.001)
    raise AssertionError(f"never happened: {what}")


def test_close_waits_for_a_use_in_progress_and_later_uses_are_refused() -> None:
    h = Handle()
    go_on = threading.Event()
    user = threading.Thread(target=h.use, args=(go_on,))
    user.start()
    _wait_for(lambda: h.in_call, "the use started")
    closer = threading.Thread(target=h.close)
    closer.start()
    time.sleep(0.05)
    assert closer.is_alive() and h.released_during_use == []  # waits: not released while the use runs
    go_on.set()
    user.join(30)
    closer.join(30)
    assert h.released_during_use == [False] and h.closed
    with pytest.raises(ClosedError, match="this handle is closed"):
        h.use()


def test_hand_made_objects_share_the_process_lock() -> None:
    """A close of one hand-made object waits for a use of another in progress (one lock, no deadlock)."""
    h, other = Handle(), Handle()
    go_on = threading.Event()
    user = threading.Thread(target=h.use, args=(go_on,))
    user.start()
    _wait_for(lambda: h.in_call, "the use started")
    closer = threading.Thread(target=other.close)
    closer.start()
    time.sleep(0.05)
    assert closer.is_alive() and not other.closed
    go_on.set()
    user.join(30)
    closer.join(30)
    assert other.closed and other.released_during_use == [False]
    h.close()


def test_a_release_interrupted_as_it_returns_is_never_repeated() -> None:
    from ctypes import c_void_p

    from acl_bindings._resource import release_cell

    released: list[int] = []

    def destroy_then_interrupted(handle: int) -> int:
        released.append(handle)
        raise KeyboardInterrupt  # where CPython delivers Ctrl-C: as the C release returns

    cell = c_void_p(0x1234)
    with pytest.raises(KeyboardInterrupt):
        release_cell(cell, destroy_then_interrupted)
    assert released == [0x1234] and not cell.value  # released, and no longer owned: no second release
    assert release_cell(cell, destroy_then_interrupted) == 0 and released == [0x1234]


def test_a_refused_release_keeps_the_handle() -> None:
    from ctypes import c_void_p

    from acl_bindings._resource import release_cell

    cell = c_void_p(0x1234)
    assert release_cell(cell, lambda handle: 507033) == 507033 and cell.value == 0x1234


class _CellInterruptedAtTheTake(c_void_p):
    """A cell whose emptying is followed by a KeyboardInterrupt, once: where CPython 3.9 delivers a Ctrl-C (after an
    attribute store), before the C release is called."""

    armed = True

    @property  # type: ignore[override]
    def value(self) -> int | None:
        return c_void_p.value.__get__(self)  # type: ignore[attr-defined, no-any-return]

    @value.setter
    def value(self, v: int | None) -> None:
        c_void_p.value.__set__(self, v)  # type: ignore[attr-defined]
        if v is None and self.armed:
            self.armed = False
            raise KeyboardInterrupt


def test_a_release_interrupted_before_its_call_keeps_the_handle() -> None:
    released: list[int] = []
    cell = _CellInterruptedAtTheTake(0x1234)
    with pytest.raises(KeyboardInterrupt):
        release_cell(cell, lambda handle: released.append(handle) or 0)
    assert released == [] and cell.value == 0x1234  # not released, still owned: the next release releases it
    assert release_cell(cell, lambda handle: released.append(handle) or 0) == 0
    assert released == [0x1234] and not cell.value
