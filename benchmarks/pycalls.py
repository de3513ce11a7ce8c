"""The Python-level calls a function makes, counted: what benchmarks/run.py and benchmarks/torch_npu_peer.py report
per steady call of each path."""

from __future__ import annotations

import sys
from typing import Any, Callable


def python_calls(fn: Callable[[], Any]) -> int:
    """The function and builtin calls (``sys.setprofile``'s "call" and "c_call" events) of one ``fn()``."""
    seen = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            seen[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen[0]
