"""A real Ctrl-C while a prepared call waits for its session's lock.

The interrupt contract at random moments over thousands of calls of every public path (real SIGINTs from
``signal.setitimer``) is tested in ``tests/sim/test_signals.py``; the bytecode-stepping interrupter that was
here modelled CPython's delivery and pinned the code's form, and is gone with the machinery it guarded.
"""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from acl_bindings import sim
from upsample3d_grad import Session

SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
OUT_SIZE, IN_SIZE = (2, 2, 2), (2, 2, 1, 1, 1)
EXPECTED = [36.0, 100.0, 164.0, 228.0]


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signal.pthread_kill")
@pytest.mark.parametrize("plan", [True, False])
def test_a_real_ctrl_c_while_a_prepared_call_waits_for_the_lock(plan: bool) -> None:
    """A real SIGINT while a prepared call waits for its session's lock, which another thread holds (it waits in
    Session.synchronize() for a slow kernel): the call raises KeyboardInterrupt, makes no C call, and leaves
    the lock to its holder; afterwards the call works."""
    assert threading.current_thread() is threading.main_thread()  # (where Python delivers SIGINT)
    s = Session(0)
    previous = sim.set_delay(0)
    try:
        go, gi = s.upload(SAMPLE), s.empty(IN_SIZE)
        call = s.prepare(go, OUT_SIZE, IN_SIZE, out=gi, plan=plan, sync=False)
        sim.set_delay(1500)
        call()  # queued: a 1.5 s kernel
        sim.set_delay(0)
        holder_error: list[BaseException] = []

        def hold() -> None:
            try:
                s.synchronize()  # holds the session's lock while it waits
            except BaseException as exc:  # noqa: B036 - reported below
                holder_error.append(exc)

        holder = threading.Thread(target=hold)
        holder.start()
        time.sleep(0.2)
        counted = ("aclrtGetCurrentContext", call.op.phase2_name, call.op.phase1_name)
        before = [sim.call_count(f) for f in counted]
        timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                call()
        finally:
            timer.cancel()
            holder.join(30)
        assert not holder_error and not holder.is_alive()
        assert [sim.call_count(f) for f in counted] == before and call.calls == 1
        assert call() is gi and call.calls == 2
        np.testing.assert_array_equal(gi.download().ravel(), EXPECTED)
    finally:
        sim.set_delay(previous)
        s.close()
