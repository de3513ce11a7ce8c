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
import logging
import os
import threading
import weakref
from ctypes import c_void_p
from typing import Any, Callable, TypeVar, cast

from .errors import ClosedError

_log = logging.getLogger("acl_bindings")


class _ProcessState:
    """Process-wide facts that releases consult."""

    pid: int | None = None  # the process that initialised ACL (None until then)
    finalized: bool = False


STATE = _ProcessState()


#: Guards every object's count of uses in progress (re-entrant: a garbage-collection finalizer may
#: run on a thread that holds it).
_uses = threading.Condition(threading.RLock())

F = TypeVar("F", bound=Callable[..., Any])


def in_use(method: F) -> F:
    """Mark a method that passes its object's handle (and those of its Resource arguments) to C."""

    @functools.wraps(method)
    def guarded(self: Resource, *args: Any, **kwargs: Any) -> Any:
        objs = [self, *(a for a in (*args, *kwargs.values()) if isinstance(a, Resource))]
        entered: list[Resource] = []
        try:
            with _uses:
                for obj in objs:
                    obj._enter_use()
                    entered.append(obj)
            return method(self, *args, **kwargs)
        finally:
            if entered:
                with _uses:
                    for obj in entered:
                        obj._exit_use()

    return cast(F, guarded)


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

    The cell is emptied in the same statement as the call when it succeeds, so an interrupt can
    never separate "released" from "no longer owned".  Nothing is called when the cell is empty.
    """
    handle = cell.value
    if not handle:
        return 0
    cell.value = None if not (rc := fn(handle, *extra)) else handle
    return rc


def _release_handle(cell: c_void_p, release: Callable[..., Any], handle: Any, *args: Any) -> None:
    release(handle, *args)  # (see Resource._own)
    cell.value = None


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
    _uses_by: dict[int, int] | None = None  # in_use calls in progress, by thread
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

        When the library refuses the release (an :class:`AclError`), the handle stays
        owned: the error propagates, ``close()`` may be retried, and the finalizer net
        still runs.
        """
        with _uses:  # wait for the uses in progress; later ones raise ClosedError
            me = threading.get_ident()
            while self._closing and self._closing != me:  # (another thread is closing it; never wait for
                _uses.wait()  # this thread's own close that an interrupt cut short)
            cell = self._cell
            if cell is None:
                return
            if not cell.value:  # released (an interrupt may have come before the finalizer was detached)
                self._closed_now()
                return
            self._closing = me
            try:
                while self._others_using():
                    _uses.wait()
            except BaseException:  # (an interrupt while waiting: the object stays open and usable)
                self._closing = 0
                _uses.notify_all()
                raise
        try:
            if releases_allowed():
                release, args = self._release
                release(cell, *args)  # empties the cell, or raises with the handle still owned
            else:
                cell.value = None  # after aclFinalize or in a forked child: not ours to release
            self._closed_now()
        finally:
            self._closing = 0  # (before taking the lock: an interrupt there cannot leave it set)
            with _uses:
                _uses.notify_all()

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
        """in_use calls in progress (on every thread)."""
        return sum(self._uses_by.values()) if self._uses_by else 0

    def _others_using(self) -> bool:
        """Whether another thread is in an in_use call.  The calling thread's own count is not waited
        for: it cannot be inside a use while it closes, unless an interrupt cut the use's bookkeeping
        short, and then waiting would never end."""
        me = threading.get_ident()
        uses = self._uses_by
        return bool(uses) and any(n > 0 for t, n in uses.items() if t != me)  # type: ignore[union-attr]

    def _enter_use(self) -> None:
        with _uses:
            if self._closing or self.closed:
                raise ClosedError(f"this {self._what} is closed")
            if self._uses_by is None:
                self._uses_by = {}
            me = threading.get_ident()
            self._uses_by[me] = self._uses_by.get(me, 0) + 1

    def _exit_use(self) -> None:
        with _uses:
            me = threading.get_ident()
            left = self._uses_by.get(me, 0) - 1 if self._uses_by else 0
            if left > 0:
                self._uses_by[me] = left  # type: ignore[index]
            elif self._uses_by:
                self._uses_by.pop(me, None)
            if self._closing and not self._others_using():
                _uses.notify_all()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
