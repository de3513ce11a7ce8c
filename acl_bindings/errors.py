"""Exceptions of the binding, keyed by status code.

* :class:`AclError` is the base of every failure that a CANN (or simulator)
  function reported, and of the host-side checks that speak the same codes.
* :class:`AclParamError` (also a :class:`ValueError`) for parameter errors:
  ``100000``, ``107000``, ``161001`` and ``161002``.
* :class:`AclMemoryError` (also a :class:`MemoryError`) for allocation failures.
* :class:`AclRuntimeError` for runtime and device faults (``107xxx``, ``207xxx``,
  ``507xxx``, ``361001``), and the simulator's ``908401`` (memory raced queued work).
* :class:`AclnnInnerError` for aclnn internal errors (``561xxx``).
* :class:`LibraryNotFoundError` (an :class:`OSError`, not an :class:`AclError`)
  when no library could be loaded.
* :class:`ClosedError` for use of an object after ``close()``.
* :class:`AclTypeError` (an :class:`AclParamError` that is also a :class:`TypeError`)
  for an argument of the wrong Python type: it carries the code CANN gives.
* :class:`LoaderWarning` when a library or configuration that was found is not used,
  and its subclass :class:`BackendFallbackWarning` when a CANN install is present but
  does not load, so the simulator is used.

Every :class:`AclError` carries ``code``, ``name``, ``explanation``, ``func``
(the C function) and ``detail`` (the ``aclGetRecentErrMsg`` text, read once, on
the failing thread, right after the failure).  All of them pickle.
"""

from __future__ import annotations

from typing import Any

from . import _codes

__all__ = [
    "AclError",
    "AclParamError",
    "AclnnParamError",
    "AclTypeError",
    "AclMemoryError",
    "AclRuntimeError",
    "AclnnInnerError",
    "AclStateError",
    "LibraryNotFoundError",
    "ClosedError",
    "SimulatorUnavailableError",
    "ProcessForkedError",
    "LoaderWarning",
    "BackendFallbackWarning",
    "error_class_for",
]

_PARAM_CODES = {100000, 107000, 107001, 161001, 161002, 200002}
_MEMORY_CODES = {200000, 207001, 207018, 300000}
_STATE_CODES = {100001, 100002, 100037, 107002, 107003}


class AclError(RuntimeError):
    """A CANN status code that is not success.

    Parameters
    ----------
    code:
        The ``aclError`` / ``aclnnStatus`` value.
    func:
        Name of the C function that returned it (or whose check failed).
    detail:
        The ``aclGetRecentErrMsg`` text, or the host-side check's message.
    """

    def __init__(self, code: int, func: str = "", detail: str = "") -> None:
        self.code = int(code)
        self.func = func
        self.detail = detail or ""
        self.name, self.explanation = _codes.describe(self.code)
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"{self.func} failed: " if self.func else ""
        text = f"{head}{self.name} ({self.code}): {self.explanation}"
        if self.detail:
            text += "\n" + self.detail
        return text

    def __str__(self) -> str:
        return self._format()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.code, self.func, self.detail))

    @classmethod
    def from_status(cls, code: int, func: str = "", detail: str = "") -> AclError:
        """Build the exception of the right subclass for *code*."""
        return error_class_for(code)(code, func, detail)


def _rebuild(kind: type[AclError], code: int, func: str, detail: str) -> AclError:
    return kind(code, func, detail)


class AclParamError(AclError, ValueError):
    """A parameter error: 100000, 107000, 107001, 161001, 161002 or 200002."""


#: The aclnn parameter errors (161001 / 161002) use the same class.
AclnnParamError = AclParamError


class AclTypeError(AclParamError, TypeError):
    """A parameter of the wrong Python type (a list for an array, a str for a size or a scale).

    Also a :class:`TypeError`, and an :class:`AclParamError` with the code CANN gives for it.
    """


class AclMemoryError(AclError, MemoryError):
    """An allocation failure: 200000, 207001, 207018 or 300000."""


class AclStateError(AclError):
    """A lifecycle error: not initialised, initialised twice, no current context."""


class AclRuntimeError(AclError):
    """A runtime or device fault (107xxx, 207xxx, 507xxx, 361001, 5000xx)."""


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
    """No usable CANN (or simulator) library was found.

    ``tried`` lists ``(path, reason)`` for every candidate.
    """

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


class BackendFallbackWarning(LoaderWarning):
    """A CANN install is present but does not load, so ``ACL_BINDINGS_BACKEND=auto`` uses the simulator."""
