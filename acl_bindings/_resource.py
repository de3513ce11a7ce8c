"""Ownership of handles: one cell per handle, a finalizer net, one lock per object (docs/design.md, "Lifetimes and
interrupts" and "Handle objects")."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import weakref
from ctypes import c_void_p
from typing import Any, Callable, Optional, Sequence, TypeVar, cast

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


def run_all(steps: Sequence[Callable[[], Any]]) -> None:
    """Run every step even when one fails, then raise the first error (a failed release must not leak the rest)."""
    first: Optional[Exception] = None
    for step in steps:
        try:
            step()
        except Exception as exc:
            first = first or exc
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
    """Call the C release *fn* (no ``errcheck``) on *cell*'s handle and return the status (nothing for an empty cell);
    the handle leaves the cell before the call (back when refused, or when an interrupt came before the call), so
    it is never released twice nor lost (docs/design.md, Ctrl-C)."""
    handle = cell.value
    if not handle:
        return 0
    args, called = (handle, *extra), False
    try:
        cell.value = None
        called = True  # (from this store of a local to the call CPython delivers no signal)
        rc = fn(*args)
    except BaseException:
        if not called:  # (CPython 3.9 delivers one right after the take)
            cell.value = handle
        raise
    if rc:
        cell.value = handle
    return rc


def _release_handle(cell: c_void_p, release: Callable[..., Any], handle: Any, *args: Any) -> None:
    cell.value = None  # taken first, as in release_cell
    try:
        release(handle, *args)
    except Exception:
        cell.value = 1  # refused: still owned
        raise


#: The lock of objects no owner made (hand-made objects of the raw API); re-entrant, so a finalizer or a
#: nested use on a thread that holds it goes on.
RAW = threading.RLock()

#: The class-level ``_as_parameter_`` of a closed (or never created) handle object: ctypes refuses it.
DEAD = object()

F = TypeVar("F", bound=Callable[..., Any])


def in_use(method: F) -> F:
    """Mark a method that passes its object's handle to C: it runs holding the object's lock, so ``close()``
    waits for it, and raises :class:`ClosedError` once the object is closed."""

    @functools.wraps(method)
    def guarded(self: Resource, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._check_open()
            result = method(self, *args, **kwargs)
        return result  # (after the block: an interrupt right after the call is then inside it)

    return cast(F, guarded)


def lock_of(objs: Sequence[Any]) -> Any:
    """The lock a C call on *objs* holds: :data:`RAW` when one of them is a hand-made object, else their owner's
    (the caller holds it already: taking it again costs nothing); a context that does nothing for no handle."""
    owner = None
    for obj in objs:
        if isinstance(obj, Resource):
            if obj._lock is RAW:
                return RAW
            owner = obj._lock
    return owner if owner is not None else contextlib.nullcontext()


class Resource:
    """Base of objects that own one handle: idempotent ``close()``, context manager, finalizer net."""

    _fin: weakref.finalize | None = None
    _cell: c_void_p | None = None
    _release: tuple[Callable[..., Any], tuple[Any, ...]] = (print, ())
    _what: str = "object"
    _lock: Any = RAW
    _as_parameter_: Any = DEAD

    def _arm(self, release: Callable[..., Any], *args: Any, before: Callable[[], Any] | None = None) -> c_void_p:
        """Register the release of the handle about to be made (before its C call); return its empty cell."""
        cell = c_void_p()
        fin = weakref.finalize(self, _quiet, release, cell, *args, before=before)
        fin.atexit = False
        self._release = (release, args)
        self._cell, self._fin = cell, fin
        return cell

    def _own(self, release: Callable[..., Any], handle: Any, *args: Any,
             before: Callable[[], Any] | None = None) -> None:
        """Own a handle made already (prefer :meth:`_arm`: an interrupt before this call loses the handle)."""
        cell = self._arm(_release_handle, release, handle, *args, before=before)
        cell.value = 1  # armed

    @property
    def closed(self) -> bool:
        """True once the handle was released (or never created)."""
        cell = self._cell
        return cell is None or not cell.value

    def close(self) -> None:
        """Release the handle now (after a use in progress, under the object's lock); idempotent.  A refused release
        (an :class:`AclError`) propagates with the handle still owned: ``close()`` may be retried."""
        with self._lock:
            cell = self._cell
            if cell is not None and cell.value:
                if releases_allowed():
                    release, args = self._release
                    release(cell, *args)  # empties the cell, or raises with the handle still owned
                else:
                    cell.value = None  # after aclFinalize or in a forked child: not ours to release
            fin = self._fin
            if fin is not None and fin.alive:
                fin.detach()
                self.__dict__.pop("_as_parameter_", None)

    def _undo(self) -> None:
        """Release the handle of a constructor that failed after making it (a refused release is only logged)."""
        try:
            self.close()
        except Exception as exc:
            _log.debug("release after a failed constructor failed: %s", exc)

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"this {self._what} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
