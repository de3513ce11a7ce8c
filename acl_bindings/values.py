"""The one definition of each rule for argument values (ints, int32s, int arrays), checked before ctypes sees them
(it drops the high bits of a too-large int, and takes ``True`` for 1), with an error that names the parameter."""

from __future__ import annotations

import operator
from typing import Any

from .errors import AclnnParamError, AclTypeError

__all__ = ["index_arg", "int32_arg", "int64_values", "int_tuple"]


def index_arg(what: str, value: object) -> int:
    """*value* as an int (a Python or numpy integer; not a bool, not a float), or TypeError naming *what*."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {type(value).__name__} {value!r}") from None


def int32_arg(what: str, value: object, minimum: int = -(2 ** 31), rule: str = "") -> int:
    """*value* checked for an ``int32_t`` parameter (TypeError / ValueError naming *what*, and *rule*: the accepted
    values, default the range)."""
    number = index_arg(what, value)
    if not minimum <= number < 2 ** 31:
        raise ValueError(f"{what}: expected {rule or f'an int in [{minimum}, 2**31)'}, got {number}")
    return number


def int64_values(values: Any, what: str) -> list[int]:
    """*values*, a sequence of ints that fit in ``int64_t``: TypeError (not a sequence, or an item that is not an
    int, as :func:`index_arg`) or ValueError (out of range), naming *what*."""
    if type(values) is tuple or type(values) is list:
        for v in values:
            if type(v) is not int or not -(2 ** 63) <= v < 2 ** 63:
                break
        else:
            return list(values)  # (plain ints in range already: nothing to convert)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{what}: expected a sequence of ints, got {type(values).__name__} {values!r}")
    out = []
    for v in values:
        number = index_arg(what, v)
        if not -(2 ** 63) <= number < 2 ** 63:
            raise ValueError(f"{what}: {number} does not fit in int64")
        out.append(number)
    return out


def int_tuple(values: Any, param: str, func: str) -> tuple[int, ...]:
    """An int array argument of the C function *func*: :func:`int64_values` as a tuple, its errors as CANN's
    161002 naming *param* (:class:`~acl_bindings.AclTypeError` for a wrong type)."""
    if type(values) is tuple:
        for v in values:
            if type(v) is not int or not -(2 ** 63) <= v < 2 ** 63:
                break
        else:
            return values  # (plain ints already: nothing to convert)
    try:
        return tuple(int64_values(values, param))
    except TypeError as exc:
        raise AclTypeError(161002, func, str(exc)) from None
    except ValueError as exc:
        raise AclnnParamError(161002, func, str(exc)) from None
