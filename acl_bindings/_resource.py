"""Ownership helpers shared by every handle-owning object.

Each object owns one handle, held in a *cell* (a ``c_void_p``) that a ``weakref.finalize``
registered **before** the C call already refers to.  The C function writes the handle into
the cell (an out-parameter), or its result is stored there in the same statement as the call
(a function without a Python ``errcheck``), so no Python line runs between the C call's return
and the moment the handle is owned: an interrupt (``KeyboardInterrupt``) anywhere leaves every
handle either unmade or owned.  A release clears the cell in the same statement as the C call
that succeeded (:func:`release_cell`), so it happens at most once: from ``close()`` (errors
propagate; a release the library refused leaves the handle owned, so it can be retried), or as
a safety net from the finalizer, whose callback holds the cell and the parent objects, never
``self`` (errors are logged, not printed).  After the process finalised ACL, or in a forked
child, releases are skipped: the runtime no longer owns those handles.

An open object's ``_as_parameter_`` is a plain instance attribute (ctypes reads it without
running Python code); once closed, the class-level :class:`ClosedParameter` raises
:class:`ClosedError`, which :mod:`._lib` reports as such (not as ``ctypes.ArgumentError``).

Methods that pass a handle to C are marked :func:`in_use`: while one runs (on any
thread), ``close()`` of that object, and of any object passed to it, waits for it; a use
that starts once a close began raises :class:`ClosedError`.  So a handle is never used
after, or during, its release.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import sys
import threading
import time
import weakref
from ctypes import c_void_p
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar, cast

from .errors import ClosedError

_log = logging.getLogger("acl_bindings")


class _ProcessState:
    """Process-wide facts that releases consult."""

    pid: int | None = None  # the process that initialised ACL (None until then)
    finalized: bool = False
    exiting: bool = False  # the interpreter is exiting: ACL is (being) released under any thread still calling


def exit_error(func: str) -> ClosedError:
    """The one error of a call that fails because ACL was released at interpreter exit (a daemon thread's)."""
    return ClosedError(f"{func}: not run: ACL was released at interpreter exit (a thread still calling then, "
                       "such as a daemon thread, cannot use it any more)")


STATE = _ProcessState()


#: Guards the check-and-mark steps of uses and closes.  Only this C lock is ever taken, and only in
#: ``with`` statements: its ``__enter__``/``__exit__`` run no Python line, so an interrupt cannot leave it
#: held (a ``threading.Condition`` could: its ``__enter__`` and ``wait`` are Python).  Re-entrant: a
#: garbage-collection finalizer may run on a thread that holds it.  Nobody waits while holding it;
#: a close waits for uses by polling (:func:`_pause`).
_uses_lock = threading.RLock()
_serials = itertools.count(1)
_add, _discard = set.add, set.discard

F = TypeVar("F", bound=Callable[..., Any])


def run_using(objs: list[Resource], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with every object of *objs* marked in use (see :func:`in_use`).

    Each call is one *token* (thread, serial), added to every object's set of uses in progress in one
    C-level step and discarded in another, so an interrupt leaves a token either absent or in every set;
    one that an interrupt left behind (at the ``finally`` line) is recognised as stale by
    :func:`_token_live` and ignored.  A closed object, or one being closed, raises :class:`ClosedError`.
    """
    sets = [o.__dict__.setdefault("_uses_now", set()) for o in objs]
    token = (threading.get_ident(), next(_serials))
    try:
        with _uses_lock:
            for obj in objs:
                obj._check_usable()
            list(map(_add, sets, itertools.repeat(token)))
        return fn(*args, **kwargs)
    finally:
        list(map(_discard, sets, itertools.repeat(token)))


_GUARDED_CODE = run_using.__code__


def in_use(method: F) -> F:
    """Mark a method that passes its object's handle (and those of its Resource arguments) to C.

    While it runs (on any thread), ``close()`` of those objects waits for it (:func:`run_using`).
    """

    @functools.wraps(method)
    def guarded(self: Resource, *args: Any, **kwargs: Any) -> Any:
        objs = [self, *(a for a in (*args, *kwargs.values()) if isinstance(a, Resource))]
        return run_using(objs, method, self, *args, **kwargs)

    return cast(F, guarded)


def _frames_of(thread: int) -> Iterator[Any]:
    frame = sys._current_frames().get(thread)
    while frame is not None:
        yield frame
        frame = frame.f_back


def _token_live(token: tuple[int, int]) -> bool:
    """Whether the in_use call that made *token* is still running (on its thread's stack)."""
    return any(f.f_code is _GUARDED_CODE and f.f_locals.get("token") == token for f in _frames_of(token[0]))


def _close_live(obj: Resource, thread: int) -> bool:
    """Whether *thread* is inside ``obj.close()`` (not a mark that an interrupt left behind)."""
    return any(f.f_code is _CLOSE_CODE and f.f_locals.get("self") is obj for f in _frames_of(thread))


def _pause() -> None:
    time.sleep(0.0005)


def run_all(steps: Sequence[Callable[[], Any]]) -> None:
    """Run every step even when one fails, then raise the first error (a failed release must not leak the rest)."""
    first: Optional[Exception] = None
    for step in steps:
        try:
            step()
        except Exception as exc:
            if first is None:
                first = exc
    if first is not None:
        try:
            raise first
        finally:
            first = None  # no cycle through this frame: what is left is released by reference counting


def releases_allowed() -> bool:
    """False after this process released its ACL reference, or in a child forked after ACL was
    initialised (handles there are not ours)."""
    return not STATE.finalized and (STATE.pid is None or os.getpid() == STATE.pid)


def _quiet(release: Callable[..., Any], cell: c_void_p, *args: Any, before: Callable[[], Any] | None = None) -> None:
    if not cell.value or not releases_allowed():
        return
    try:
        if before is not None:
            before()  # e.g. wait for queued work that may still use the memory
    except Exception as exc:
        _log.debug("pre-release step of finalizer failed: %s", exc)
    try:
        release(cell, *args)
    except Exception as exc:  # a safety-net release must never raise from the garbage collector
        _log.debug("release by finalizer failed: %s", exc)


def release_cell(cell: c_void_p, fn: Callable[..., int], *extra: Any) -> int:
    """Call the C release *fn* (no ``errcheck``: it returns the status) on *cell*'s handle; return the status.

    The handle is taken out of the cell *before* the call (and put back when the release is
    refused).  CPython delivers a Ctrl-C's exception when a call returns, so one that arrives
    during the release finds the cell empty: a handle is never released twice.  (Between taking
    and calling no Python-level check runs.)  Nothing is called when the cell is empty.
    """
    handle = cell.value
    if not handle:
        return 0
    cell.value = None
    if rc := fn(handle, *extra):
        cell.value = handle
    return rc


def _release_handle(cell: c_void_p, release: Callable[..., Any], handle: Any, *args: Any) -> None:
    cell.value = None  # (taken first, as in release_cell; see Resource._own)
    try:
        release(handle, *args)
    except Exception:
        cell.value = 1  # refused: still owned
        raise


class ClosedParameter:
    """The class-level ``_as_parameter_`` of handle objects: reached only when the instance has none
    (it is closed, or was never created), and then raises :class:`ClosedError`."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        raise ClosedError(f"this {obj._what} is closed")


class Resource:
    """Base of objects that own one handle: idempotent ``close()``, context manager, finalizer net."""

    _fin: weakref.finalize | None = None
    _cell: c_void_p | None = None
    _release: tuple[Callable[..., Any], tuple[Any, ...]] = (print, ())
    _what: str = "object"
    _closing: int = 0  # the thread closing it (0: none)

    def _arm(self, release: Callable[..., Any], *args: Any, before: Callable[[], Any] | None = None) -> c_void_p:
        """Register the release of the handle about to be created; returns the (empty) cell it goes in.

        Call it **before** the C call that creates the handle, and have that call write the cell.
        ``release(cell, *args)`` must empty the cell when it succeeds (:func:`release_cell`) and raise
        :class:`AclError` otherwise; *args* must not include ``self``.  *before*, if given, runs first
        when the garbage collector (not ``close()``) releases it.
        """
        cell = c_void_p()
        fin = weakref.finalize(self, _quiet, release, cell, *args, before=before)
        fin.atexit = False
        self._release = (release, args)
        self._cell, self._fin = cell, fin
        return cell

    def _own(self, release: Callable[..., Any], handle: Any, *args: Any,
             before: Callable[[], Any] | None = None) -> None:
        """Own a handle created already: ``release(handle, *args)`` releases it (and raises when refused).

        Prefer :meth:`_arm` before the C call: between that call's return and this one, an interrupt
        would lose the handle.
        """
        cell = self._arm(_release_handle, release, handle, *args, before=before)
        cell.value = 1  # armed

    @property
    def closed(self) -> bool:
        """True once the handle was released (or never created)."""
        cell = self._cell
        return cell is None or not cell.value

    def close(self) -> None:
        """Release the handle now.  Calling it again does nothing.

        It waits for the uses in progress on other threads; uses that start once it began raise
        :class:`ClosedError`.  When the library refuses the release (an :class:`AclError`), the
        handle stays owned: the error propagates, ``close()`` may be retried, and the finalizer net
        still runs.
        """
        me = threading.get_ident()
        try:
            while True:
                with _uses_lock:
                    closer = self._closing
                    if not closer or closer == me or not _close_live(self, closer):
                        cell = self._cell
                        if cell is None:
                            return
                        if not cell.value:  # released (an interrupt may have come before the finalizer was detached)
                            self._closed_now()
                            return
                        self._closing = me
                        break
                _pause()  # another thread is closing it
            while self._others_using():
                _pause()
            if releases_allowed():
                release, args = self._release
                release(cell, *args)  # empties the cell, or raises with the handle still owned
            else:
                cell.value = None  # after aclFinalize or in a forked child: not ours to release
            self._closed_now()
        finally:
            if self._closing == me:
                self._closing = 0

    def _closed_now(self) -> None:
        fin = self._fin
        if fin is not None and fin.alive:
            fin.detach()  # (the cell is empty: an interrupt before this line leaves nothing to do)
            self.__dict__.pop("_as_parameter_", None)
            self._on_close()

    def _undo(self) -> None:
        """Release the handle of a constructor that failed after making it (a refused release is logged:
        the constructor's error is the one to report; the finalizer net still owns the handle)."""
        try:
            self.close()
        except Exception as exc:
            _log.debug("release after a failed constructor failed: %s", exc)

    def _on_close(self) -> None:
        """Hook: drop Python-side references after release was decided."""

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"this {self._what} is closed")

    @property
    def _users(self) -> int:
        """in_use calls in progress (on every thread; stale tokens included)."""
        return len(self.__dict__.get("_uses_now", ()))

    def _others_using(self) -> bool:
        """Whether another thread is in an in_use call with this object.  The calling thread's own
        uses are not waited for (it cannot be inside one while it closes, unless an interrupt cut the
        use's bookkeeping short); tokens whose call ended without discarding them are dropped."""
        me = threading.get_ident()
        uses: set[tuple[int, int]] = self.__dict__.get("_uses_now", set())
        for token in [t for t in list(uses) if t[0] != me]:
            if _token_live(token):
                return True
            uses.discard(token)
        return False

    def _check_usable(self) -> None:
        """Raise :class:`ClosedError` if it is closed or being closed (call with ``_uses_lock`` held)."""
        closer = self._closing
        if closer and not _close_live(self, closer):
            self._closing = closer = 0  # a mark an interrupted close left behind
        if closer or self.closed:
            raise ClosedError(f"this {self._what} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CLOSE_CODE = Resource.close.__code__
