"""Ownership helpers shared by every handle-owning object.

Each object owns one handle.  Its release runs exactly once: from ``close()``
(errors propagate), or as a safety net from a ``weakref.finalize`` whose callback
holds the raw handle and the parent objects, never ``self`` (errors are logged,
not printed).  After the process finalised ACL, or in a forked child, releases
are skipped: the runtime no longer owns those handles.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any, Callable

from .errors import ClosedError

_log = logging.getLogger("acl_bindings")


class _ProcessState:
    """Process-wide facts that releases consult."""

    pid: int = os.getpid()
    finalized: bool = False


STATE = _ProcessState()


def releases_allowed() -> bool:
    """False after aclFinalize, or in a forked child (handles there are not ours)."""
    return not STATE.finalized and os.getpid() == STATE.pid


def _quiet(release: Callable[..., Any], *args: Any) -> None:
    if not releases_allowed():
        return
    try:
        release(*args)
    except Exception as exc:  # a safety-net release must never raise from the garbage collector
        _log.debug("release by finalizer failed: %s", exc)


class Resource:
    """Base of objects that own one handle: idempotent ``close()``, context manager, finalizer net."""

    _fin: weakref.finalize | None = None
    _what: str = "object"

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        """Register the release of the handle just created; *args* must not include ``self``."""
        fin = weakref.finalize(self, _quiet, release, *args)
        fin.atexit = False
        self._fin = fin

    @property
    def closed(self) -> bool:
        """True once the handle was released (or never created)."""
        return self._fin is None or not self._fin.alive

    def close(self) -> None:
        """Release the handle now.  Calling it again does nothing."""
        fin = self._fin
        if fin is None:
            return
        info = fin.detach()
        if info is None:
            return
        _obj, _quiet_fn, args, _kwargs = info
        release, rest = args[0], args[1:]
        self._on_close()
        if releases_allowed():
            release(*rest)

    def _on_close(self) -> None:
        """Hook: drop Python-side references after release was decided."""

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"this {self._what} is closed")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
