"""Every environment variable the binding reads, in one place.

=============================  ==============================================================
``ACL_BINDINGS_BACKEND``       ``auto`` (default): real CANN if found, else the simulator;
                               ``cann``: real CANN or a clear error; ``sim``: the simulator.
``ACL_BINDINGS_LIB_DIR``       a folder holding the libraries (or a root with ``lib64/``),
                               searched first.
``ACL_BINDINGS_LOG_CALLS``     ``1``: log every raw call, its arguments and result at DEBUG
                               on the ``acl_bindings`` logger.
``ACL_BINDINGS_REQUIRE_SIM``   ``1``: tests fail, rather than skip, when the simulator is missing.
``ASCEND_HOME_PATH``,          set by CANN's ``set_env.sh``; ``<p>/lib64`` and
``ASCEND_TOOLKIT_HOME``        ``<p>/<arch>-linux/lib64`` are searched.
``ASCEND_CUSTOM_OPP_PATH``     ':'-separated custom operator packages (``op_api/lib/libcust_opapi.so``).
``ASCEND_OPP_PATH``            its ``vendors/config.ini`` names vendor operator packages.
``LD_LIBRARY_PATH``            searched after the variables above.
=============================  ==============================================================
"""

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


def lib_dir() -> str | None:
    """``ACL_BINDINGS_LIB_DIR`` or None."""
    return os.environ.get("ACL_BINDINGS_LIB_DIR") or None


def log_calls() -> bool:
    """Whether ``ACL_BINDINGS_LOG_CALLS`` asks for call logging."""
    return _flag("ACL_BINDINGS_LOG_CALLS")


def require_sim() -> bool:
    """Whether ``ACL_BINDINGS_REQUIRE_SIM`` is set."""
    return _flag("ACL_BINDINGS_REQUIRE_SIM")


def env(name: str) -> str | None:
    """A CANN environment variable (``ASCEND_*``, ``LD_LIBRARY_PATH``), or None when unset or empty."""
    return os.environ.get(name) or None
