"""Exceptions of the binding, keyed by status code (the classes and their codes: docs/api.md, "Errors").

Every :class:`AclError` carries ``code``, ``name``, ``explanation``, ``func`` (the C function) and ``detail`` (the
``aclGetRecentErrMsg`` text, or a host check's message); every exception pickles.
"""

from __future__ import annotations

from typing import Any

from . import _codes

__all__ = [
    "AclError", "AclParamError", "AclnnParamError", "AclTypeError", "AclMemoryError", "AclRuntimeError",
    "AclnnInnerError", "AclStateError", "LibraryNotFoundError", "ClosedError", "SimulatorUnavailableError",
    "ProcessForkedError", "LoaderWarning", "BackendFallbackWarning", "error_class_for",
]

_PARAM_CODES = {100000, 107000, 107001, 161001, 161002, 200002}
_MEMORY_CODES = {200000, 207001, 207018, 300000}
_STATE_CODES = {100001, 100002, 100037, 107002, 107003}


class AclError(RuntimeError):
    """A CANN status *code* that is not success, from the C function *func* (or whose host check failed), with
    *detail*: the ``aclGetRecentErrMsg`` text, or the host check's message."""

    def __init__(self, code: int, func: str = "", detail: str = "") -> None:
        self.code = int(code)
        self.func = func
        self.detail = detail or ""
        self.name, self.explanation = _codes.describe(self.code)
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.func} failed: " if self.func else ""
        text = f"{head}{self.name} ({self.code}): {self.explanation}"
        if self.detail:
            text += "\n" + self.detail
        return text

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.func, self.detail))

    @classmethod
    def from_status(cls, code: int, func: str = "", detail: str = "") -> AclError:
        """Build the exception of the right subclass for *code*."""
        return error_class_for(code)(code, func, detail)


class AclParamError(AclError, ValueError):
    """A parameter error: 100000, 107000, 107001, 161001, 161002 or 200002."""


#: The aclnn parameter errors (161001 / 161002) use the same class.
AclnnParamError = AclParamError


class AclTypeError(AclParamError, TypeError):
    """A parameter of the wrong Python type (a list for an array, a str for a size): also a :class:`TypeError`."""


class AclMemoryError(AclError, MemoryError):
    """An allocation failure: 200000, 207001, 207018 or 300000."""


class AclStateError(AclError):
    """A lifecycle error: not initialised, initialised twice, no current context."""


class AclRuntimeError(AclError):
    """A runtime or device fault (107xxx, 207xxx, 507xxx, 361001, 5000xx; the simulator's 908401, 908402)."""


class AclnnInnerError(AclError):
    """An aclnn internal error (561xxx), e.g. 561003: the kernel package is missing."""


def error_class_for(code: int) -> type[AclError]:
    """Return the :class:`AclError` subclass used for *code*."""
    if code in _PARAM_CODES:
        return AclParamError
    if code in _MEMORY_CODES:
        return AclMemoryError
    if code in _STATE_CODES:
        return AclStateError
    family = code // 1000
    if family == 561:
        return AclnnInnerError
    if family in (107, 207, 507, 361, 500) or code in (_codes.CANNSIM_ERR_QUEUED_WORK, _codes.CANNSIM_ERR_OTHER_DEVICE):
        return AclRuntimeError
    return AclError


class LibraryNotFoundError(OSError):
    """No usable CANN (or simulator) library was found; ``tried`` lists ``(path, reason)`` for every candidate."""

    def __init__(self, message: str, tried: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.tried = list(tried or [])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.tried))


class TwoRuntimesError(LibraryNotFoundError):
    """Another copy of the CANN runtime is already loaded in this process (by torch_npu, say) from another
    file than the one the loader chose: the two would share no devices, streams or memory."""


class SimulatorUnavailableError(LibraryNotFoundError):
    """The simulator was asked for but is not built (no C compiler at install time)."""


class ClosedError(ValueError):
    """An object was used after ``close()``."""


class ProcessForkedError(RuntimeError):
    """ACL state was inherited through ``fork()``; it cannot be used in the child."""


class LoaderWarning(UserWarning):
    """A library or configuration entry was found but is not used (the message says which and why)."""


class SimulatorNotBuiltWarning(LoaderWarning):
    """The embedded simulator was not built at install (no C compiler) and no CANN install is found: given once,
    when the package is first imported, in the words of the install's warning."""


class BackendFallbackWarning(LoaderWarning):
    """A CANN install is present but does not load, so ``ACL_BINDINGS_BACKEND=auto`` uses the simulator."""
