"""The ``upsample3d-grad`` console script's entry point.

It lives outside the package so that it runs before the package's imports (numpy, the
bindings): a Ctrl-C during those imports ends the command with one line and exit 130,
not a traceback.  Everything else is :func:`upsample3d_grad.tools.cli.main`.
"""

from __future__ import annotations

import sys

#: Exit status after Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


def main() -> int:
    """Import the command line and run it; a Ctrl-C at any moment gives one line and 130."""
    try:
        from upsample3d_grad.tools.cli import main as cli_main

        return cli_main()
    except KeyboardInterrupt:  # during the imports (later ones are handled by cli_main)
        command = next((a for a in sys.argv[1:] if a in ("doctor", "run", "smoke", "bench", "compare")), "")
        sys.stderr.write(f"upsample3d-grad {command}: interrupted\n" if command else "upsample3d-grad: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
