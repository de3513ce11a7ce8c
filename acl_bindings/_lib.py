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

A closed handle object passed to a bound function raises :class:`ClosedError` (ctypes would
report it as ``ctypes.ArgumentError``), and an interrupt is always a ``KeyboardInterrupt``.
:meth:`Lib.unchecked` gives function objects without the Python ``errcheck``, for the calls
whose result must be stored in the same statement (:mod:`._resource`).
"""

from __future__ import annotations

import ctypes
import logging
import threading
from ctypes import c_void_p
from enum import IntEnum
from typing import Any, Callable

from . import _config, _loader
from ._codes import ACLNN_ERR_INNER_NULLPTR
from ._resource import Resource, run_using
from ._types import HANDLE_TYPES, STATUS_TYPES, aclIntArray_p, aclOpExecutor_p, aclTensor_p, c_int_result
from .errors import AclError, ClosedError, LibraryNotFoundError
from .prototypes import OPTIONAL, PROTOTYPES, SIM_ONLY, Prototype

__all__ = ["lib", "Lib", "LeanHandle", "lean_types", "MissingSymbolError", "recent_error_message", "show_arg",
           "raise_for_status", "null_handle_error"]

_log = logging.getLogger("acl_bindings")
_OPAQUE = (aclTensor_p, aclIntArray_p, aclOpExecutor_p)
_BYREF = type(ctypes.byref(ctypes.c_int()))


class MissingSymbolError(LibraryNotFoundError):
    """A function is not exported by the loaded libraries (an OSError)."""


def recent_error_message() -> str:
    """Read (and thereby clear) this thread's pending CANN error message; '' when none."""
    fn = lib._raw("aclGetRecentErrMsg")
    if fn is None:
        return ""
    raw = fn()
    return raw.decode("utf-8", "replace").strip() if raw else ""


def raise_for_status(status: int, func: str) -> None:
    """Raise the :class:`AclError` of a non-zero *status* returned by the C function *func* (a no-op for 0)."""
    if status:
        raise AclError.from_status(int(status), func, recent_error_message())


def _argument_error(name: str, args: tuple[Any, ...], exc: ctypes.ArgumentError) -> BaseException:
    """What a ``ctypes.ArgumentError`` from converting *args* really was."""
    for arg in args:
        if isinstance(arg, Resource) and arg.closed:
            return ClosedError(f"{name}: this {arg._what} is closed")
    if ": KeyboardInterrupt" in str(exc):  # an interrupt while ctypes ran an _as_parameter_ or from_param
        return KeyboardInterrupt()
    return exc


def _guarded(fn: Any, mark_uses: bool = False) -> Callable[..., Any]:
    """*fn* with ``ctypes.ArgumentError`` turned into what it was (:func:`_argument_error`); with *mark_uses*,
    the :class:`Resource` arguments are marked in use for the call (their ``close()`` waits for it)."""
    name = fn.__name__

    def call(*args: Any) -> Any:
        try:
            if mark_uses and (objs := [a for a in args if isinstance(a, Resource)]):
                return run_using(objs, fn, *args)
            return fn(*args)
        except ctypes.ArgumentError as exc:
            error = _argument_error(name, args, exc)
            if error is exc:
                raise
            raise error from None

    call.__name__ = call.__qualname__ = name
    return call


def _check_status(result: int, func: Any, args: tuple[Any, ...]) -> int:
    if result:
        raise AclError.from_status(result, func.__name__, recent_error_message())
    return result


def null_handle_error(func: str) -> AclError:
    """The error of a handle constructor *func* that returned NULL (code 561103)."""
    return AclError.from_status(ACLNN_ERR_INNER_NULLPTR, func, recent_error_message() or f"{func} returned NULL")


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
    """A logged argument or result as its value: array contents (the first few items), handles as
    ``aclTensor@0x...``, pointers in hex, out-parameters as ``&<value>``, enums by name; never a ctypes
    object repr.  *argtype* is the parameter's ctypes type, when known (an int passed for a ``void*``
    is shown as an address)."""
    if isinstance(value, int) and not isinstance(value, (bool, IntEnum)) and argtype is c_void_p:
        return f"0x{value:x}" if value else "NULL"
    if isinstance(value, _BYREF):
        return "&" + show_arg(value._obj)  # type: ignore[attr-defined]
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


def _logged(check: Callable[..., Any]) -> Callable[..., Any]:
    def errcheck(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
        if _log.isEnabledFor(logging.DEBUG):
            types = list(getattr(func, "argtypes", None) or ())
            shown = ", ".join(show_arg(a, types[k] if k < len(types) else None) for k, a in enumerate(args))
            _log.debug("%s(%s) -> %s", func.__name__, shown, show_arg(result))
        return check(result, func, args)

    return errcheck


def _logged_unchecked(restype: Any) -> Callable[..., Any]:
    """The logging ``errcheck`` of an :meth:`Lib.unchecked` function (*restype*: the table's): it logs and
    returns the result unchanged.  (Logging runs Python code between the call and the store of its result.)"""
    def errcheck(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
        if _log.isEnabledFor(logging.DEBUG):
            types = list(getattr(func, "argtypes", None) or ())
            shown = ", ".join(show_arg(a, types[k] if k < len(types) else None) for k, a in enumerate(args))
            value = ctypes.cast(result, restype) if restype in _OPAQUE and result else result
            _log.debug("%s(%s) -> %s", func.__name__, shown, show_arg(value))
        return result

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


class LeanHandle(c_void_p):
    """Restype of lean handle constructors: a ``c_void_p`` subclass, so ctypes returns the object
    itself (passed straight back to the library) rather than a Python int."""


def lean_types(proto: Prototype) -> tuple[Any, tuple[Any, ...]]:
    """``(restype, argtypes)`` of a prototype for a lean function: opaque handle pointers become
    ``c_void_p`` (handle results :class:`LeanHandle`); everything else is the table's own type."""
    _role, restype, argtypes = proto

    def plain(t: Any) -> Any:
        return c_void_p if t in _OPAQUE else t

    return (LeanHandle if restype in _OPAQUE else restype), tuple(plain(t) for t in argtypes)


class Lib:
    """Namespace of bound raw functions; attribute access binds lazily."""

    def __init__(self) -> None:
        self._extra: dict[str, Prototype] = {}
        self._bound: dict[str, Any] = {}
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
        guarded = _guarded(fn, mark_uses=True)  # (a handle object passed here is not closed under the call)
        with self._lock:
            self._bound[name] = guarded
        return guarded

    def unchecked(self, name: str) -> Any:
        """A function object for *name* with the table's argtypes (handle pointers as ``c_void_p``) and
        restype (a handle result as a Python int or None), **without errcheck**: the caller checks the
        result (:func:`raise_for_status`).  For calls whose result must be stored in the same statement
        as the call (see :mod:`._resource`)."""
        fn = self._unchecked.get(name)
        if fn is not None:
            return fn
        proto = self._prototype(name)
        if proto is None or self._raw(name) is None:
            raise MissingSymbolError(f"{name} is not exported by the loaded libraries")
        restype, argtypes = lean_types(proto)
        fn = self._dll_of(name)[name]  # a new function object: the bound one keeps its errcheck
        fn.restype = c_void_p if restype is LeanHandle else restype
        fn.argtypes = list(argtypes)
        if _config.log_calls():  # ACL_BINDINGS_LOG_CALLS, read at bind time as for the bound functions
            fn.errcheck = _logged_unchecked(proto[1])
        guarded = _guarded(fn)  # (its Python lines all run before the C call: the result is stored in time)
        with self._lock:
            self._unchecked[name] = guarded
        return guarded

    def lean(self, name: str, release_gil: bool = True) -> Any:
        """A fresh function object for *name* for hot loops: restype from the prototype table (see
        :func:`lean_types`), **no argtypes and no errcheck**.

        The caller passes ctypes objects of exactly the table's types (check once with
        :meth:`conforms`) and checks the result itself; ``ACL_BINDINGS_LOG_CALLS`` does not log
        these calls.  With ``release_gil=False`` the call keeps the GIL (for sub-microsecond
        metadata calls that never wait).
        """
        proto = self._prototype(name)
        if proto is None or self._raw(name) is None:
            raise MissingSymbolError(f"{name} is not exported by the loaded libraries")
        dll = self._dll_of(name)
        if not release_gil:
            dll = ctypes.PyDLL(dll._name, handle=dll._handle)
        fn = dll[name]  # a new function object: the bound one keeps its argtypes and errcheck
        fn.restype = lean_types(proto)[0]
        return fn

    def conforms(self, name: str, args: Any) -> bool:
        """Whether *args* are ctypes objects of exactly the C types of *name* (for :meth:`lean`).

        None stands for a NULL pointer; a Python int is accepted for a C ``int`` (ctypes passes
        it as one without argtypes); ``byref(x)`` and ctypes arrays for pointer arguments.
        """
        proto = self._prototype(name)
        if proto is None:
            return False
        want = lean_types(proto)[1]
        if len(args) != len(want):
            return False
        for arg, typ in zip(args, want):
            if arg is None and issubclass(typ, (c_void_p, ctypes._Pointer)):
                continue
            if typ is ctypes.c_int and type(arg) is int and -(2 ** 31) <= arg < 2 ** 31:
                continue
            if isinstance(arg, typ):
                continue
            if issubclass(typ, ctypes._Pointer) and (
                    (isinstance(arg, ctypes.Array) and arg._type_ is typ._type_) or isinstance(arg, _BYREF)):
                continue
            return False
        return True

    def _dll_of(self, name: str) -> Any:
        role = self._prototype(name)[0]  # type: ignore[index]
        backend = _loader.load()
        if role == "opapi":
            found = backend.find_op_symbol(name)
            assert found is not None
            return found[0]
        return backend.handle(role)

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
