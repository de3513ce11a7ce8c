"""Timing the operator with device events.

An event recorded on a stream completes when the device reaches it, so the time
between two events brackets exactly the work queued between them (``aclrtRecordEvent``,
``aclrtSynchronizeEvent``, ``aclrtEventElapsedTime``; cann-abi.md §1.1).  Host-side
timers would also count the Python and phase-1 overhead, and return before the
kernel has even run.

This example times the backward of a x2 upsampling two ways: by hand with two
:class:`acl_bindings.Event` objects, then with :meth:`upsample3d_grad.Session.timed_backward`.
The data stays on the device between runs.  On the CPU simulator the figures time
the simulator, not an NPU.

Runs unchanged on an NPU and on the CPU simulator::

    python examples/timing_events.py
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

from acl_bindings import Event
from upsample3d_grad import Session, reference

INPUT_SIZE = (2, 8, 8, 16, 16)  # gradInput (N, C, D, H, W)
OUTPUT_SIZE = (16, 32, 32)  # gradOut (D, H, W): x2 in every dim
SCALES = (2.0, 2.0, 2.0)


def main() -> int:
    """Time the operator; return 0 when its result matches the reference."""
    n, c = INPUT_SIZE[:2]
    host = np.random.default_rng(0).standard_normal((n, c, *OUTPUT_SIZE)).astype(np.float32)
    with Session(0) as s:
        print(f"timing_events: {s!r}")
        go = s.upload(host)  # gradOut stays on the device
        gi = s.empty(INPUT_SIZE, np.float32)  # the result too

        # by hand: record an event before and after the call, wait for the second one
        with Event(s.device) as start, Event(s.device) as end:
            for run in range(3):
                start.record(s.stream)
                s.backward(go, OUTPUT_SIZE, INPUT_SIZE, *SCALES, out=gi)  # queued, returns at once
                end.record(s.stream)
                end.synchronize()
                print(f"  run {run}: {end.elapsed_ms(start):.3f} ms (events)")

        # the same, done by the session: one event pair per run
        times = s.timed_backward(go, OUTPUT_SIZE, INPUT_SIZE, SCALES, out=gi, repeat=10)
        moved = host.nbytes + int(np.prod(INPUT_SIZE)) * 4
        best = min(times)
        print(f"  timed_backward x{len(times)}: min {best:.3f} ms, median {statistics.median(times):.3f} ms, "
              f"{moved / (best * 1e-3) / 1e9:.2f} GB/s effective at the min")

        got = gi.download()
    want = reference.upsample_nearest_exact3d_backward(host, OUTPUT_SIZE, INPUT_SIZE, *SCALES)
    if not np.allclose(got, want, rtol=1e-5, atol=1e-4):
        print("WRONG: the timed result differs from the reference")
        return 1
    print("result matches the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
