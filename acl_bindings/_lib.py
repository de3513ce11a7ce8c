"""The raw C functions, bound lazily under their C names, with status checks (docs/design.md, "The raw functions")."""

from __future__ import annotations

import ctypes
import logging
import threading
from ctypes import c_void_p
from enum import IntEnum
from typing import Any, Callable

from . import _config, _loader
from ._codes import ACLNN_ERR_INNER_NULLPTR
from ._resource import STATE, Resource, exit_error, release_cell
from ._types import HANDLE_TYPES, STATUS_TYPES, aclIntArray_p, aclOpExecutor_p, aclTensor_p, c_int_result
from .errors import AclError, ClosedError, LibraryNotFoundError
from .prototypes import HOLDS_GIL, OPTIONAL, PROTOTYPES, SIM_ONLY, Prototype

__all__ = ["lib", "Lib", "plain_types", "MissingSymbolError", "recent_error_message", "show_arg",
           "raise_for_status", "null_handle_error", "destroy"]

_log = logging.getLogger("acl_bindings")
_OPAQUE = (aclTensor_p, aclIntArray_p, aclOpExecutor_p)
#: What :func:`plain_types` makes of an opaque handle pointer, and of a pointer to one
_PLAIN: dict[Any, Any] = {**dict.fromkeys(_OPAQUE, c_void_p),
                          **dict.fromkeys((ctypes.POINTER(t) for t in _OPAQUE), ctypes.POINTER(c_void_p))}
_BYREF = type(ctypes.byref(ctypes.c_int()))


class MissingSymbolError(LibraryNotFoundError):
    """A function is not exported by the loaded libraries (an OSError)."""


_last_read = threading.local()


def recent_error_message() -> str:
    """This thread's CANN error message since its last read (docs/design.md, "The raw functions"); '' when none."""
    fn = lib._raw("aclGetRecentErrMsg")
    if fn is None:
        return ""
    raw = fn()
    text = raw.decode("utf-8", "replace") if raw else ""
    last = getattr(_last_read, "text", "")
    _last_read.text = text
    if last and text == last:
        return ""
    if last and text.endswith("\n" + last):
        text = text[: -len(last) - 1]
    return text.strip()


def raise_for_status(status: int, func: str) -> None:
    """Raise the :class:`AclError` of a non-zero *status* returned by the C function *func* (a no-op for 0)."""
    if status:
        raise failure(int(status), func)


def destroy(cell: c_void_p, func: str) -> None:
    """Release the handle in *cell* with the C function *func* (:func:`release_cell`); AclError when refused."""
    raise_for_status(release_cell(cell, lib.unchecked(func)), func)


def failure(status: int, func: str, default: str = "") -> Exception:
    """The exception of a non-zero *status* from *func*: its :class:`AclError` (with this thread's recent error message,
    else *default*), or, once ACL was released at interpreter exit, the one :func:`exit_error` of every such call."""
    if STATE.exiting:
        return exit_error(func)
    return AclError.from_status(status, func, recent_error_message() or default)


def _bind(fn: Any, argtypes: tuple[Any, ...]) -> Callable[..., Any]:
    """*fn* wrapped so that a closed handle object among the arguments raises :class:`ClosedError` (no lock)."""
    name = fn.__name__

    def bound(*args: Any) -> Any:
        try:
            return fn(*args)
        except ctypes.ArgumentError:
            for arg in args:
                if isinstance(arg, Resource) and arg.closed:
                    raise ClosedError(f"{name}: this {arg._what} is closed") from None
            raise

    bound.__name__ = name
    bound.__qualname__ = f"lib.{name}"
    bound.__doc__ = f"{name}: the C function (argtypes {', '.join(t.__name__ for t in argtypes) or 'none'})."
    return bound


def _check_status(result: int, func: Any, args: tuple[Any, ...]) -> int:
    if result:
        raise failure(result, func.__name__)
    return result


def null_handle_error(func: str) -> Exception:
    """The error of a handle constructor *func* that returned NULL (code 561103)."""
    return failure(ACLNN_ERR_INNER_NULLPTR, func, f"{func} returned NULL")


def _check_handle(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
    if not result:
        raise null_handle_error(func.__name__)
    return result


def _int_value(result: Any, func: Any, args: tuple[Any, ...]) -> int:
    return int(result.value)


def _passthrough(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
    return result


_SHOWN_ITEMS = 6


def _address(value: Any) -> str:
    addr = ctypes.cast(value, c_void_p).value
    return f"0x{addr:x}" if addr else "NULL"


def show_arg(value: Any, argtype: Any = None) -> str:
    """A logged argument or result as its value (arrays' first items, ``aclTensor@0x...``, ``&<out>``, enum names),
    never a ctypes repr; *argtype*, the parameter's ctypes type when known, shows an int for a ``void*`` in hex."""
    if isinstance(value, int) and not isinstance(value, (bool, IntEnum)) and argtype is c_void_p:
        return f"0x{value:x}" if value else "NULL"
    if isinstance(value, _BYREF):
        return "&" + show_arg(value._obj)  # type: ignore[attr-defined]
    if (isinstance(argtype, type) and issubclass(argtype, ctypes._Pointer)
            and isinstance(value, argtype._type_)):  # an out-parameter's cell passed itself (see Lib.unchecked)
        return "&" + show_arg(value)
    if isinstance(value, ctypes.Array):
        items = [show_arg(v) for v in value[:_SHOWN_ITEMS]]
        more = f", ... ({len(value)} items)" if len(value) > _SHOWN_ITEMS else ""
        return "[" + ", ".join(items) + more + "]"
    if isinstance(value, ctypes._Pointer):
        return f"{type(value)._type_.__name__}@{_address(value)}"
    if isinstance(value, c_void_p):
        return _address(value)
    if isinstance(value, ctypes._SimpleCData):
        return show_arg(value.value)
    if isinstance(value, IntEnum):
        return f"{value.name}({int(value)})"
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return repr(value.decode("utf-8", "replace"))
    return repr(value) if isinstance(value, str) else str(value)


def _logged(check: Callable[..., Any], restype: Any = None) -> Callable[..., Any]:
    """The ``errcheck`` *check* with call logging; *restype*, the table's for an unchecked function, shows its
    handle result (a plain int there) as that handle."""
    def errcheck(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
        if _log.isEnabledFor(logging.DEBUG):
            types = list(getattr(func, "argtypes", None) or ())
            shown = ", ".join(show_arg(a, types[k] if k < len(types) else None) for k, a in enumerate(args))
            value = ctypes.cast(result, restype) if restype in _OPAQUE and result else result
            _log.debug("%s(%s) -> %s", func.__name__, shown, show_arg(value))
        return check(result, func, args)

    return errcheck


#: The ``errcheck`` of each checked restype (docs/design.md, "The raw functions"); any other is passed through
_CHECKS: dict[Any, Callable[..., Any]] = {c_int_result: _int_value, **dict.fromkeys(STATUS_TYPES, _check_status),
                                          **dict.fromkeys(HANDLE_TYPES, _check_handle)}


def plain_types(proto: Prototype) -> tuple[Any, tuple[Any, ...]]:
    """``(restype, argtypes)`` of a prototype for :meth:`Lib.unchecked`: opaque handle pointers become ``c_void_p`` (a
    handle result an int or None), pointers to them ``c_void_p *`` (a ``c_void_p`` cell); the rest are the table's."""
    _role, restype, argtypes = proto
    return _PLAIN.get(restype, restype), tuple(_PLAIN.get(t, t) for t in argtypes)


class Lib:
    """Namespace of bound raw functions; attribute access binds lazily, and the bound function becomes an attribute
    (as in numba's CUDA driver): a later lookup is a plain one."""

    def __init__(self) -> None:
        self._extra: dict[str, Prototype] = {}
        self._unchecked: dict[str, Any] = {}
        self._lock = threading.Lock()

    def declare(self, table: dict[str, Prototype]) -> None:
        """Add prototypes (an operator's two phases, for example) to those this object can bind."""
        with self._lock:
            self._extra.update(table)

    def _prototype(self, name: str) -> Prototype | None:
        return PROTOTYPES.get(name) or self._extra.get(name) or SIM_ONLY.get(name)

    def _raw(self, name: str) -> Any:
        """Bind *name* (None when absent); no error on absence."""
        fn = self.__dict__.get(name)
        if fn is not None:
            return fn
        proto = self._prototype(name)
        if proto is None:
            raise AttributeError(f"{name} is not in the prototype table")
        role, restype, argtypes = proto
        dll = self._dll(role, name)
        if dll is None:
            return None
        fn = self._function(dll, name, restype, argtypes)
        check = _CHECKS.get(restype, _passthrough)
        fn.errcheck = _logged(check) if _config.log_calls() else check  # (ACL_BINDINGS_LOG_CALLS: read at bind time)
        bound = _bind(fn, argtypes)
        with self._lock:
            setattr(self, name, bound)
        return bound

    @staticmethod
    def _dll(role: str, name: str) -> Any:
        """The library of *role* that exports *name* (loading it if needed), or None."""
        backend = _loader.load()
        if role == "opapi":
            found = backend.find_op_symbol(name)
            return None if found is None else found[0]
        dll = backend.handle(role)
        return dll if hasattr(dll, name) else None

    @staticmethod
    def _function(dll: Any, name: str, restype: Any, argtypes: tuple[Any, ...]) -> Any:
        """A new ctypes function object for *name* in *dll*, of these types (keeping the GIL: :data:`HOLDS_GIL`)."""
        if name in HOLDS_GIL:
            dll = ctypes.PyDLL(dll._name, handle=dll._handle)
        fn = dll[name]
        fn.restype = restype
        fn.argtypes = list(argtypes)
        return fn

    def unchecked(self, name: str) -> Any:
        """The ctypes function of *name* itself, **without errcheck** (the caller checks: :func:`raise_for_status`),
        of the :func:`plain_types` (docs/design.md, "The raw functions"); :class:`MissingSymbolError` if absent."""
        fn = self._unchecked.get(name)
        if fn is not None:
            return fn
        proto = self._prototype(name)
        if proto is None or self._raw(name) is None:
            raise MissingSymbolError(f"{name} is not exported by the loaded libraries")
        # a new function object: the bound one keeps its errcheck
        fn = self._function(self._dll(proto[0], name), name, *plain_types(proto))
        if _config.log_calls():  # read at bind time, as for the bound functions
            fn.errcheck = _logged(_passthrough, proto[1])
        with self._lock:  # the ctypes function itself: no Python line between the call and its caller's store
            self._unchecked[name] = fn
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
            failed = "".join(f" {path} failed to load: {why}." for path, why in backend.op_failures()
                             if role == "opapi")
            raise MissingSymbolError(
                f"{name} is not exported by the loaded {role} libraries ({', '.join(where) or 'none found'})."
                f"{failed}{hint}")
        return fn


#: The process-wide raw library namespace.
lib: Any = Lib()
