"""The one definition of each rule for argument values: ints, int32s and int arrays.

ctypes converts an out-of-range Python int to a fixed-width C int by silently dropping the high bits
(``2**32 + 5`` arrives as 5 in an ``int32_t``), and accepts ``True`` as 1: so values a caller chooses
are checked here first, with an error that names the parameter.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .errors import AclTypeError

__all__ = ["index_arg", "int32_arg", "int_tuple"]


def index_arg(what: str, value: object) -> int:
    """*value* as an int (a Python or numpy integer; not a bool, not a float), or TypeError naming *what*."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {type(value).__name__} {value!r}") from None


def int32_arg(what: str, value: object, minimum: int = -(2 ** 31), rule: str = "") -> int:
    """*value* checked for an ``int32_t`` parameter: TypeError / ValueError naming *what* otherwise.

    ctypes converts an out-of-range Python int to ``c_int32`` by silently dropping the high
    bits (``2**32 + 5`` arrives as 5), so an int32 argument a caller chooses is checked here
    first.  *rule* describes the accepted values in the message (default: the range).
    """
    number = index_arg(what, value)
    if not minimum <= number < 2 ** 31:
        raise ValueError(f"{what}: expected {rule or f'an int in [{minimum}, 2**31)'}, got {number}")
    return number


def int_tuple(values: Any, param: str, func: str) -> tuple[int, ...]:
    """An int array argument: a sequence of ints (:class:`~acl_bindings.AclTypeError`, 161002, naming *param*
    otherwise; a bool is not an int)."""
    if type(values) is tuple:
        for v in values:
            if type(v) is not int:
                break
        else:
            return values  # (plain ints already: nothing to convert)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise AclTypeError(161002, func, f"{param}: expected a sequence of ints, got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise AclTypeError(161002, func, f"{param}: expected ints, got {type(v).__name__} {v!r}")
        out.append(int(v))
    return tuple(out)
