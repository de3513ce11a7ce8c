"""The package against torch_npu's own op on the same kernel: host time per call, interleaved, min and median.

Run after ``eval "$(python -m acl_bindings.sim env)"`` (or on an NPU):
``python benchmarks/torch_npu_peer.py [--rounds N] [--batch N]``.  Prints a markdown table (benchmarks/README.md,
"The torch_npu peer").  Paths, tiny case ``[2,2,2,2,2]``:

- torch_npu's aten op on an NPU tensor, and the package's ``backward_torch`` on the same tensor;
- torch_npu's round trip from numpy (``.npu()``, the aten op, ``.cpu()``), and the package's ``Session.backward``
  on the numpy array;
- the first call of a new shape, each (one call each, a new shape per round).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from pycalls import python_calls  # (benchmarks/, this script's folder)


def _batch(fn: Callable[[], Any], n: int, sync: Callable[[], Any]) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--batch", type=int, default=300, help="calls per timed batch (default 300)")
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    import torch_npu  # noqa: F401  (torch.npu)

    from upsample3d_grad import Session
    from upsample3d_grad.functional import backward_torch

    aten = torch.ops.aten._upsample_nearest_exact3d_backward
    host = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
    g = torch.from_numpy(host).npu()
    out3, in5 = (2, 2, 2), (2, 2, 1, 1, 1)
    sync = torch.npu.synchronize
    with Session(0) as s:
        paths: dict[str, Callable[[], Any]] = {
            "torch_npu aten op (NPU tensor)": lambda: aten(g, list(out3), list(in5)),
            "backward_torch (NPU tensor)": lambda: backward_torch(g, out3, in5),
            "torch_npu round trip (numpy -> .npu(), aten op, .cpu())":
                lambda: aten(torch.from_numpy(host).npu(), list(out3), list(in5)).cpu(),
            "Session.backward (numpy in and out)": lambda: s.backward(host, out3, in5),
        }
        for fn in paths.values():  # warm-up: each path's first call of this shape
            for _ in range(50):
                fn()
        times: dict[str, list[float]] = {name: [] for name in paths}
        first: dict[str, list[float]] = {"torch_npu aten op": [], "backward_torch": []}
        for r in range(args.rounds):
            for name, fn in paths.items():
                times[name].append(_batch(fn, args.batch, sync))
            n = 3 + r  # a shape neither has seen: the first call of it
            gn = torch.ones(1, 1, n, 2, 2).npu()
            sync()
            t0 = time.perf_counter()
            aten(gn, [n, 2, 2], [1, 1, 1, 1, 1])
            sync()
            first["torch_npu aten op"].append((time.perf_counter() - t0) * 1e6)
            gm = torch.ones(1, 1, 2, n, 2).npu()
            sync()
            t0 = time.perf_counter()
            backward_torch(gm, (2, n, 2), (1, 1, 1, 1, 1))
            sync()
            first["backward_torch"].append((time.perf_counter() - t0) * 1e6)

        calls = {name: python_calls(fn) for name, fn in paths.items()}  # one steady call each
        n = 3 + args.rounds  # and one first call of a new shape each
        gn, gm = torch.ones(1, 1, n, 2, 2).npu(), torch.ones(1, 1, 2, n, 2).npu()
        calls["first call of a new shape: torch_npu aten op"] = python_calls(
            lambda: aten(gn, [n, 2, 2], [1, 1, 1, 1, 1]))
        calls["first call of a new shape: backward_torch"] = python_calls(
            lambda: backward_torch(gm, (2, n, 2), (1, 1, 1, 1, 1)))
        sync()

    def row(name: str, v: list[float], peer: list[float] | None) -> str:
        ratio = "" if peer is None else \
            f"{min(v) / min(peer):.2f} ({statistics.median(v) / statistics.median(peer):.2f})"
        return f"| {name} | {min(v):.1f} / {statistics.median(v):.1f} | {ratio} | {calls.get(name, '-')} |"

    print(f"{args.rounds} interleaved rounds, batches of {args.batch} calls; µs per call, min / median; ratio to the "
          "peer from minima (medians in brackets)\n")
    print("| path | µs per call | / peer | Python calls |\n|---|---|---|---|")
    names = list(paths)
    print(row(names[0], times[names[0]], None))
    print(row(names[1], times[names[1]], times[names[0]]))
    print(row(names[2], times[names[2]], None))
    print(row(names[3], times[names[3]], times[names[2]]))
    print(row("first call of a new shape: torch_npu aten op", first["torch_npu aten op"], None))
    print(row("first call of a new shape: backward_torch", first["backward_torch"], first["torch_npu aten op"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
