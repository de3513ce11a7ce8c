"""Ownership helpers shared by every handle-owning object.

Each object owns one handle.  Its release succeeds at most once: from ``close()``
(errors propagate; a release the library refused leaves the handle owned, so it
can be retried), or as a safety net from a ``weakref.finalize`` whose callback
holds the raw handle and the parent objects, never ``self`` (errors are logged,
not printed).  After the process finalised ACL, or in a forked child, releases
are skipped: the runtime no longer owns those handles.

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
from typing import Any, Callable, TypeVar, cast

from .errors import AclError, ClosedError

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


def _quiet(release: Callable[..., Any], *args: Any, before: Callable[[], Any] | None = None) -> None:
    if not releases_allowed():
        return
    try:
        if before is not None:
            before()  # e.g. wait for queued work that may still use the memory
    except Exception as exc:
        _log.debug("pre-release step of finalizer failed: %s", exc)
    try:
        release(*args)
    except Exception as exc:  # a safety-net release must never raise from the garbage collector
        _log.debug("release by finalizer failed: %s", exc)


class Resource:
    """Base of objects that own one handle: idempotent ``close()``, context manager, finalizer net."""

    _fin: weakref.finalize | None = None
    _what: str = "object"
    _users: int = 0  # in_use calls in progress
    _closing: bool = False

    def _own(self, release: Callable[..., Any], *args: Any, before: Callable[[], Any] | None = None) -> None:
        """Register the release of the handle just created; *args* must not include ``self``.

        *before*, if given, runs first when the garbage collector (not ``close()``) releases it.
        """
        fin = weakref.finalize(self, _quiet, release, *args, before=before)
        fin.atexit = False
        self._fin = fin

    @property
    def closed(self) -> bool:
        """True once the handle was released (or never created)."""
        return self._fin is None or not self._fin.alive

    def close(self) -> None:
        """Release the handle now.  Calling it again does nothing.

        When the library refuses the release (an :class:`AclError`), the handle stays
        owned: the error propagates, ``close()`` may be retried, and the finalizer net
        still runs.
        """
        with _uses:  # wait for the uses in progress; later ones raise ClosedError
            while self._closing:  # (another thread is closing it)
                _uses.wait()
            fin = self._fin
            if fin is None or not fin.alive:
                return
            self._closing = True
            try:
                while self._users:
                    _uses.wait()
            except BaseException:  # (an interrupt while waiting: the object stays open and usable)
                self._closing = False
                _uses.notify_all()
                raise
        try:
            info = fin.detach()
            if info is None:
                return
            _obj, _quiet_fn, args, kwargs = info
            release, rest = args[0], args[1:]
            if releases_allowed():
                try:
                    release(*rest)
                except AclError:
                    self._own(release, *rest, **kwargs)  # not released: keep owning it
                    raise
            self._on_close()
        finally:
            with _uses:
                self._closing = False
                _uses.notify_all()

    def _on_close(self) -> None:
        """Hook: drop Python-side references after release was decided."""

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"this {self._what} is closed")

    def _enter_use(self) -> None:
        with _uses:
            if self._closing or self.closed:
                raise ClosedError(f"this {self._what} is closed")
            self._users += 1

    def _exit_use(self) -> None:
        with _uses:
            self._users -= 1
            if not self._users and self._closing:
                _uses.notify_all()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
