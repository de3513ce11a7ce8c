"""How ``upsample3d-grad compare`` scales with a fleet: time and peak memory for N generated reports.

Run from a checkout::

    python benchmarks/compare_fleet.py                  # 125, 250, 500, 1000 reports of 69 cases
    python benchmarks/compare_fleet.py --reports 500 2000 --cases 69 200

For each size it writes N smoke reports (machines alike but for a few with another CANN, a
failed case, a fallback, an interruption; see ``tests/unit/test_compare_fleet.py``) into a
temporary folder and runs ``compare FOLDER --json OUT`` in a fresh process, three times:
it prints the best wall time, the peak resident memory of that process (``ru_maxrss``) and
the lines of text output.  Each process also imports numpy and the package, which is the
fixed part of both figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.unit.test_compare_fleet import fleet_report  # noqa: E402  (the generated fleet of the tests)


def measure(reports: int, cases: int, repeat: int = 3) -> tuple[float, int, int]:
    """``(best seconds, peak RSS bytes, output lines)`` of ``compare`` over *reports* generated reports."""
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        folder = Path(tmp) / "reports"
        folder.mkdir()
        for k in range(reports):
            (folder / f"node{k:05d}.json").write_text(json.dumps(fleet_report(k, cases)))
        code = ("import resource, sys, time\n"
                "t0 = time.perf_counter()\n"
                "from upsample3d_grad.tools import cli\n"
                "rc = cli.main(['compare', sys.argv[1], '--json', sys.argv[2]])\n"
                "print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
                "file=sys.stderr)\n")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        best, rss, lines = float("inf"), 0, 0
        for _ in range(repeat):
            proc = subprocess.run([sys.executable, "-c", code, str(folder), str(Path(tmp) / "cmp.json")],
                                  capture_output=True, text=True, env=env, check=False)
            seconds, maxrss = proc.stderr.split()[-2:]
            best = min(best, float(seconds))
            rss = max(rss, int(maxrss) * 1024)
            lines = len(proc.stdout.splitlines())
        return best, rss, lines


def main() -> int:
    """Print one line per (reports, cases)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, nargs="+", default=[125, 250, 500, 1000])
    parser.add_argument("--cases", type=int, nargs="+", default=[69])
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s); this process's own peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")
    print(f"{'reports':>8} {'cases':>6} {'seconds':>8} {'peak RSS MiB':>13} {'lines':>6}")
    for cases in args.cases:
        for n in args.reports:
            t0 = time.perf_counter()
            seconds, rss, lines = measure(n, cases)
            print(f"{n:>8} {cases:>6} {seconds:>8.2f} {rss / 2 ** 20:>13.1f} {lines:>6}"
                  f"   (generating and measuring took {time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
