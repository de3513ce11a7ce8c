"""Checked calls a session can repeat without checking them again.

A :meth:`Session.backward <upsample3d_grad.Session.backward>` call on two device arrays runs the host checks,
converts its arguments and computes its plan key.  All three are functions of what such a call repeats: the
same two array objects (whose shape, dtype, layout, strides and offset never change) and equal arguments.  So
the session remembers them for the last calls and repeats a call as phase 2 through its plan cache.

Two arguments are "equal" here only when the checks cannot tell them apart: the key takes sizes as tuples of
ints only, scales as None or floats only, ``strict`` as a bool (``True == 1``, ``2.0 == 2`` and ``0 == 0.0``
would otherwise hide a refused argument).  The arrays are held weakly and compared by identity: an entry is
never served to a new array that happens to get the id of a freed one.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

from acl_bindings.calls import PlanKey

__all__ = ["RememberedCalls"]

_INTS = {int}
_SCALE_TYPES = {type(None), float}
_BOOLS = (True, False)


class RememberedCalls:
    """At most *capacity* checked calls on device arrays of *array_type*, the oldest dropped first."""

    def __init__(self, array_type: type, capacity: int = 16) -> None:
        self.array_type = array_type
        self.capacity = capacity
        self._entries: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        #: the arguments (the very objects), entry and key of the latest call found
        self._last: Optional[tuple[Any, ...]] = None

    def takes(self, go: Any, gi: Any) -> bool:
        """Whether a call on *go* and *gi* may be remembered: both arrays of :attr:`array_type` (exactly)."""
        return type(go) is self.array_type and type(gi) is self.array_type

    def key(self, go: Any, gi: Any, output_size: Any, input_size: Any, sd: Any, sh: Any, sw: Any, layout: Any,
            strict: Any) -> Optional[tuple[Any, ...]]:
        """The key of a call, or None when it is not one to remember (see the module docstring): two arrays it
        :meth:`takes`, and the arguments above."""
        if not self.takes(go, gi) or type(output_size) is not tuple or type(input_size) is not tuple or \
                type(layout) is not str or strict not in _BOOLS:
            return None
        sizes = output_size + input_size
        if not _INTS.issuperset(map(type, sizes)) or type(sd) not in _SCALE_TYPES or type(sh) not in _SCALE_TYPES \
                or type(sw) not in _SCALE_TYPES:
            return None
        return (id(go), id(gi), len(output_size), sizes, sd, sh, sw, layout, strict)

    def same_as_last(self, go: Any, gi: Any, output_size: Any, input_size: Any, sd: Any, sh: Any, sw: Any,
                     layout: Any, strict: Any) -> Optional[tuple[tuple[Any, ...], PlanKey]]:
        """What :meth:`find` gave the latest call, when this one passes the very same objects (the usual loop);
        else None.  (The objects of a remembered call are immutable: tuples of ints, floats, None, a str, a bool.)"""
        last = self._last
        if last is None or last[0] is not output_size or last[1] is not input_size or last[2] is not sd or \
                last[3] is not sh or last[4] is not sw or last[5] is not layout or last[6] is not strict:
            return None
        entry: tuple[Any, ...] = last[7]
        if entry[0]() is not go or entry[1]() is not gi or self._entries.get(last[8]) is not entry:
            return None
        return entry[2], entry[3]

    def find(self, key: tuple[Any, ...], go: Any, gi: Any, args: tuple[Any, ...]) -> Optional[tuple[tuple[Any, ...],
                                                                                                 PlanKey]]:
        """``(the arguments between the two arrays, converted; the plan key)`` of the call *key* on *go* and *gi*,
        or None; *args* are the call's other arguments, as passed (for :meth:`same_as_last`)."""
        entry = self._entries.get(key)
        if entry is None or entry[0]() is not go or entry[1]() is not gi:
            return None
        self._last = (*args, entry, key)
        return entry[2], entry[3]

    def remember(self, key: tuple[Any, ...], go: Any, gi: Any, middle: tuple[Any, ...], plan: PlanKey) -> None:
        """Keep the checked call *key* (:meth:`key`) on *go* and *gi*."""
        entries = self._entries
        entries.pop(key, None)
        while len(entries) >= self.capacity:
            del entries[next(iter(entries))]
        entries[key] = (weakref.ref(go), weakref.ref(gi), middle, plan)

    def __len__(self) -> int:
        return len(self._entries)
