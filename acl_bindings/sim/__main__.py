"""``python -m acl_bindings.sim env``: the shell lines that make a process's torch_npu use the simulator.

What they set: docs/design.md, "The simulator's build"; only a process started after they ran sees them.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from . import build as _build

DEFAULT_SOC = "Ascend910B1"


def env_lines(soc: str = DEFAULT_SOC) -> list[str]:
    """The ``export`` lines for a POSIX shell, in order.

    ValueError for a *soc* that is empty or has spaces or control characters; RuntimeError when the simulator's
    libraries or layout folders are missing (build it first).
    """
    if not soc or not soc.isprintable() or any(ch.isspace() for ch in soc):
        raise ValueError(f"--soc: a SoC name is a non-empty word (for example {DEFAULT_SOC}), got {soc!r}")
    root = _build.HERE
    lib64 = root / "lib64"
    names = list(_build.library_names().values()) + [f"lib{n}.so" for n in _build.STUB_LIBRARIES]
    missing = [n for n in names if not (lib64 / n).is_file()]
    for folder in _build.LAYOUT_DIRS:  # empty folders: a wheel does not carry them, so make them here
        try:
            (root / folder).mkdir(exist_ok=True)
        except OSError:
            missing.append(f"{folder}/")
    if missing:
        raise RuntimeError(f"the simulator in {root} is not built (missing: {', '.join(missing)}); "
                           "run `python -m acl_bindings.sim.build` first")
    q = shlex.quote
    return [
        f"export ASCEND_HOME_PATH={q(str(root))}",
        f"export ASCEND_OPP_PATH={q(str(root / 'opp'))}",
        f"export LD_LIBRARY_PATH={q(str(lib64))}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
        f"export CANN_SIM_SOC={q(soc)}",
    ]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m acl_bindings.sim", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("env", help="print the export lines that point torch_npu at the simulator")
    env.add_argument("--soc", default=DEFAULT_SOC, help=f"SoC name the simulator answers (default {DEFAULT_SOC})")
    args = parser.parse_args(argv)
    try:
        lines = env_lines(args.soc)
    except (ValueError, RuntimeError) as exc:
        print(f"python -m acl_bindings.sim env: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
