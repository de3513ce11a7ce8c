"""The ``upsample3d-grad`` console script's entry point.

It lives outside the package so that it runs before the package's imports (numpy, the
bindings): a Ctrl-C at any moment, those imports included, ends the command with one
line and exit 130, not a traceback.  Everything else is
:func:`upsample3d_grad.tools.cli.main`.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

#: Exit status after Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130
_COMMANDS = ("doctor", "run", "smoke", "bench", "compare")
_pending: list[int] = []


def _remember(signum: int, frame: Any) -> None:
    _pending.append(signum)


# Until the imports are done, a Ctrl-C is remembered, not raised wherever it lands (raised inside an extension
# module's initialisation, it turns into a SystemError traceback).
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _remember)


def main() -> int:
    """Import the command line and run it; a Ctrl-C at any moment gives one line and 130."""
    try:
        from upsample3d_grad.tools.cli import main as cli_main

        if signal.getsignal(signal.SIGINT) is _remember:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if _pending:
            raise KeyboardInterrupt
        return cli_main()
    except KeyboardInterrupt:  # before or during the imports (later ones are handled by cli_main)
        command = next((a for a in sys.argv[1:] if a in _COMMANDS), "")
        sys.stderr.write(f"upsample3d-grad {command}: interrupted\n" if command else "upsample3d-grad: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
