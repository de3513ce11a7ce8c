"""A ``KeyboardInterrupt`` at each Python function return of a session's life, one run per return.

:mod:`tests.sim.test_signals` sends real signals at random moments; this test is its deterministic companion for
the moments that matter most to handle ownership: right after a function returns (where CPython delivers a
pending signal), including a constructor's return before its object is stored.  A trace function raises at the
*k*-th ``return`` event of ``Session(0)``, one backward call and ``Session.close()``; whatever the interrupted run
left open is closed as a user would (``close()`` again on the session, when it was made), and then the simulator
must have every kind of handle as before, each release counted by its C call (none implicit, e.g. a stream that
a device reset destroyed under a live ``Stream`` object).
"""

from __future__ import annotations

import _weakrefset
import gc
import inspect
import sys
import weakref
from typing import Any

import numpy as np

from acl_bindings import sim
from upsample3d_grad import Session, reference

GO = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_CALLBACKS = {weakref.__file__, _weakrefset.__file__}
ACCOUNTS = {"stream": ("aclrtCreateStream", "aclrtDestroyStream"),
            "device_ref": ("aclrtSetDevice", "aclrtResetDevice"),
            "device_buffer": ("aclrtMalloc", "aclrtFree"),
            "tensor": ("aclCreateTensor", "aclDestroyTensor"),
            "int_array": ("aclCreateIntArray", "aclDestroyIntArray"),
            "executor": ("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclDestroyAclOpExecutor")}


def _life(made: list[Session]) -> None:
    s = Session(0)
    made.append(s)
    got = s.backward(GO, OUT_SIZE, IN_SIZE)
    s.close()
    np.testing.assert_array_equal(got, reference.upsample_nearest_exact3d_backward(GO, OUT_SIZE, IN_SIZE))


def _accounts() -> dict[str, int]:
    return {kind: sim.call_count(make) - sim.call_count(free) for kind, (make, free) in ACCOUNTS.items()}


def _interrupted_at(k: int, made: list[Session]) -> bool:
    """Run :func:`_life` with a KeyboardInterrupt at its *k*-th return event, of a function outside the weakref
    machinery (a raise in a generator's close or a weakref callback, which the garbage collector runs, CPython
    can only report as unraisable); whether there was a *k*-th."""
    seen = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "return" and not frame.f_code.co_flags & _GENERATOR and frame.f_code.co_filename not in _CALLBACKS:
            seen[0] += 1
            if seen[0] == k:
                raise KeyboardInterrupt
        return trace

    sys.settrace(trace)
    try:
        _life(made)
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return seen[0] >= k


def test_an_interrupt_at_any_return_of_a_session_life_leaves_nothing(no_leaks) -> None:
    _life([])  # (first-use work: libraries loaded, the op's tables built)
    k, interrupted = 0, True
    while interrupted:
        k += 1
        made: list[Session] = []
        live, counted = sim.live_handles(), _accounts()
        interrupted = _interrupted_at(k, made)
        for s in made:  # (an interrupted close: the next close finishes it)
            s.close()
        del made
        gc.collect()
        live_now, counted_now = sim.live_handles(), _accounts()
        assert live_now == live, (k, {n: (live[n], live_now[n]) for n in live if live[n] != live_now[n]})
        assert counted_now == counted, (k, "a handle was released by no call of its own", counted, counted_now)
    assert k > 300  # (the life has that many returns: each was interrupted once)
