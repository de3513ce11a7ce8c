"""Every environment variable the binding reads, in one place (their effects: docs/api.md, "Environment variables")."""

from __future__ import annotations

import os
import warnings

BACKENDS = ("auto", "cann", "sim")


def _flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    warnings.warn(f"{name}={value!r} is not a boolean (use 1 or 0); treating it as 1", stacklevel=3)
    return True


def backend() -> str:
    """The requested backend: ``auto``, ``cann`` or ``sim``."""
    value = os.environ.get("ACL_BINDINGS_BACKEND", "auto").strip().lower() or "auto"
    if value not in BACKENDS:
        raise ValueError(f"ACL_BINDINGS_BACKEND must be one of {', '.join(BACKENDS)}; got {value!r}")
    return value


def log_calls() -> bool:
    """Whether ``ACL_BINDINGS_LOG_CALLS`` asks for call logging."""
    return _flag("ACL_BINDINGS_LOG_CALLS")


def require_sim() -> bool:
    """Whether ``ACL_BINDINGS_REQUIRE_SIM`` is set."""
    return _flag("ACL_BINDINGS_REQUIRE_SIM")


def env(name: str) -> str | None:
    """A search path variable (``ACL_BINDINGS_LIB_DIR``, ``ASCEND_*``, ``LD_LIBRARY_PATH``); None if unset or empty."""
    return os.environ.get(name) or None
