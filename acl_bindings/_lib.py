"""The raw functions, bound lazily under their C names, with automatic checks.

``lib.aclrtMalloc(...)`` loads the libraries on first use (:mod:`._loader`),
binds the symbol with the restype and argtypes of :data:`.prototypes.PROTOTYPES`,
and attaches a ctypes ``errcheck`` chosen by the restype:

* ``aclError`` / ``aclnnStatus``: a non-zero status raises :class:`AclError`;
* ``aclTensor*`` / ``aclIntArray*``: NULL raises (561103, inner null pointer);
* anything else is returned unchanged.

With ``ACL_BINDINGS_LOG_CALLS=1`` (read when a function is first bound) every call
is logged with its arguments and result on the ``acl_bindings`` logger.

On failure the ``aclGetRecentErrMsg`` text is read once, immediately, on the
failing thread, and stored in the exception.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from . import _config, _loader
from ._types import HANDLE_TYPES, STATUS_TYPES, c_int_result
from .errors import AclError, LibraryNotFoundError
from .prototypes import OPTIONAL, PROTOTYPES, SIM_ONLY, Prototype

__all__ = ["lib", "Lib", "MissingSymbolError", "recent_error_message"]

_log = logging.getLogger("acl_bindings")
_NULL_HANDLE_CODE = 561103  # ACLNN_ERR_INNER_NULLPTR: a constructor gave NULL


class MissingSymbolError(LibraryNotFoundError):
    """A function is not exported by the loaded libraries (an OSError)."""


def recent_error_message() -> str:
    """Read (and thereby clear) this thread's pending CANN error message; '' when none."""
    fn = lib._raw("aclGetRecentErrMsg")
    if fn is None:
        return ""
    raw = fn()
    return raw.decode("utf-8", "replace").strip() if raw else ""


def _check_status(result: int, func: Any, args: tuple[Any, ...]) -> int:
    if result:
        raise AclError.from_status(result, func.__name__, recent_error_message())
    return result


def _check_handle(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
    if not result:
        detail = recent_error_message() or f"{func.__name__} returned NULL"
        raise AclError.from_status(_NULL_HANDLE_CODE, func.__name__, detail)
    return result


def _int_value(result: Any, func: Any, args: tuple[Any, ...]) -> int:
    return int(result.value)


def _passthrough(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
    return result


def _logged(check: Callable[..., Any]) -> Callable[..., Any]:
    def errcheck(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
        _log.debug("%s%r -> %r", func.__name__, args, result)
        return check(result, func, args)

    return errcheck


def errcheck_for(restype: Any, log: bool = False) -> Callable[..., Any]:
    """The ``errcheck`` used for a restype (see the module docstring); *log* adds call logging."""
    if restype is c_int_result:
        check = _int_value
    elif restype in STATUS_TYPES:
        check = _check_status
    elif restype in HANDLE_TYPES:
        check = _check_handle
    else:
        check = _passthrough
    return _logged(check) if log else check


class Lib:
    """Namespace of bound raw functions; attribute access binds lazily."""

    def __init__(self) -> None:
        self._extra: dict[str, Prototype] = {}
        self._bound: dict[str, Any] = {}
        self._lock = threading.Lock()

    def declare(self, table: dict[str, Prototype]) -> None:
        """Add prototypes (an operator's two phases, for example) to those this object can bind."""
        with self._lock:
            self._extra.update(table)

    def _prototype(self, name: str) -> Prototype | None:
        return PROTOTYPES.get(name) or self._extra.get(name) or SIM_ONLY.get(name)

    def _raw(self, name: str) -> Any:
        """Bind *name* (None when absent); no error on absence."""
        fn = self._bound.get(name)
        if fn is not None:
            return fn
        proto = self._prototype(name)
        if proto is None:
            raise AttributeError(f"{name} is not in the prototype table")
        role, restype, argtypes = proto
        backend = _loader.load()
        if role == "opapi":
            found = backend.find_op_symbol(name)
            if found is None:
                return None
            dll = found[0]
        else:
            dll = backend.handle(role)
            if not hasattr(dll, name):
                return None
        fn = getattr(dll, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)
        fn.errcheck = errcheck_for(restype, _config.log_calls())  # ACL_BINDINGS_LOG_CALLS is read at bind time
        with self._lock:
            self._bound[name] = fn
        return fn

    def has(self, name: str) -> bool:
        """Whether the loaded libraries export *name* (loads them if needed)."""
        return self._raw(name) is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._raw(name)
        if fn is None:
            backend = _loader.load()
            role = self._prototype(name)[0]  # type: ignore[index]
            where = ([p for p, _ in backend.op_candidates] if role == "opapi"
                     else [backend.runtime.path if role == "runtime" else backend.nnopbase.path])
            hint = " It is optional; probe with lib.has()." if name in OPTIONAL else ""
            raise MissingSymbolError(
                f"{name} is not exported by the loaded {role} libraries ({', '.join(where) or 'none found'}).{hint}")
        return fn


#: The process-wide raw library namespace.
lib: Any = Lib()
