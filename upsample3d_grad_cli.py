"""The ``upsample3d-grad`` console script's entry point.

It lives outside the package so that it runs before the package's imports (numpy, the
bindings): from here on SIGINT is held (blocked) until the command has read its arguments and
made the report a Ctrl-C writes, so a Ctrl-C at any moment, those imports included, ends the
command with one line, that report and exit 130, not a traceback.  Everything else is
:func:`upsample3d_grad.tools.cli.main`.
"""

from __future__ import annotations

import signal
import warnings

# (raised inside an extension module's initialisation, a KeyboardInterrupt turns into a SystemError traceback)
if signal.getsignal(signal.SIGINT) is signal.default_int_handler and hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def main() -> int:
    """Import the command line and run it; a Ctrl-C at any moment gives one line and 130."""
    # a simulator not built at install: each command that needs it says so, with the fix, in its error lines
    warnings.filterwarnings("ignore", message="the CPU simulator was not built", category=UserWarning)
    from upsample3d_grad.tools.cli import main as cli_main

    try:
        return cli_main()
    finally:  # the command is done: a Ctrl-C while the interpreter shuts down cannot change its exit status
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    raise SystemExit(main())
