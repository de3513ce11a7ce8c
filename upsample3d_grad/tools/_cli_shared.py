"""What the ``upsample3d-grad`` commands share: exit codes, the backend header line, the report writer,
progress lines and the partial report that Ctrl-C writes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings
from typing import Any, NoReturn, TextIO

from acl_bindings import (
    AclError,
    BackendFallbackWarning,
    LibraryNotFoundError,
    SimulatorUnavailableError,
    device_count,
    load_backend,
)

from . import _jsonout, smoke
from .report_files import clean

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NO_LIBRARY = 0, 1, 2, 3
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
PROG = "upsample3d-grad"

#: Seconds after which a long command starts to print progress, and the time between progress lines.
PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 1.0


def _header(command: str, backend: Any) -> str:
    if backend.is_simulator:
        return f"{PROG} {command}: backend sim - the CPU simulator of the CANN libraries (no NPU is used)"
    return f"{PROG} {command}: backend cann - real CANN ({backend.runtime.path})"


def _error(command: str, message: str) -> None:
    """Print ``upsample3d-grad <command>: error: <message>`` on standard error, each further line of *message* after
    ``upsample3d-grad <command>: ``."""
    print(f"{PROG} {command}: error: {message}".replace("\n", f"\n{PROG} {command}: "), file=sys.stderr, flush=True)


def _simulator_missing(message: str) -> str:
    """One line from the loader's SimulatorUnavailableError: why no CANN, and what failed in the build."""
    lines = message.splitlines() or [""]
    head, sep, _ = lines[0].partition(" the CPU simulator is unavailable")
    if not sep:
        return lines[0]
    what = next((line[len("What failed: "):] for line in lines if line.startswith("What failed: ")), "")
    return f"{head} the CPU simulator is not built" + (f": {what}" if what else "")


def _fallback_line(command: str, backend: Any) -> str:
    """The first line of a command refused because a present CANN did not load (the simulator stood in)."""
    return (f"{PROG} {command}: error: {backend.fallback}, so this run would test the simulator, not CANN: fix "
            "CANN (see 'upsample3d-grad doctor'), or ask for the simulator with --backend sim")


def _load(command: str, refuse_fallback: bool = True) -> Any:
    """Load the backend and print the header line, or print why not and how to fix it and return None."""
    requested = os.environ.get("ACL_BINDINGS_BACKEND", "auto") or "auto"
    try:
        with warnings.catch_warnings():  # the fallback notice is printed as the first line instead
            warnings.simplefilter("ignore", BackendFallbackWarning)
            backend = load_backend()
    except LibraryNotFoundError as exc:
        print(f"{PROG} {command}: backend {requested} - not available: no usable library was found", flush=True)
        if isinstance(exc, SimulatorUnavailableError):  # no usable CANN, and no compiler built the simulator
            _error(command, f"{_simulator_missing(str(exc))}\nfix: install a C compiler (gcc or clang) and run "
                   "`python -m acl_bindings.sim.build --force` (or reinstall), or source CANN's set_env.sh to use real "
                   "CANN; `python -m acl_bindings` says where it looked")
        else:
            _error(command, str(exc))
        return None
    except ValueError as exc:  # a bad ACL_BINDINGS_BACKEND value
        print(f"{PROG} {command}: backend {requested!r} - not available", flush=True)
        _error(command, str(exc))
        return None
    if backend.fallback:  # a CANN install is present but did not load: never a silent simulator
        print(_fallback_line(command, backend), flush=True)
        if refuse_fallback:
            return None
    print(_header(command, backend), flush=True)
    return backend


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line naming the (sub)command's own help."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {clean(message)} (see '{self.prog} --help')\n")


class _Run:
    """What a command has done so far: the partial report written on Ctrl-C, and the real stdout."""

    def __init__(self) -> None:
        self.report: dict[str, Any] | None = None
        self.json_stdout: TextIO = sys.stdout
        self.sigint = False
        self.command = ""

    def on_sigint(self, signum: int, frame: Any) -> None:
        """SIGINT: remembered (so that one swallowed by third-party code still counts), then KeyboardInterrupt."""
        self.sigint = True
        raise KeyboardInterrupt


_RUN = _Run()


def _hold_sigint(hold: bool) -> bool:
    """Block (hold) or unblock SIGINT on this thread, where the platform can (a pending one is delivered on unblock);
    whether it was held before."""
    if not hasattr(signal, "pthread_sigmask"):
        return False
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK if hold else signal.SIG_UNBLOCK, {signal.SIGINT})


def _write_json(path: str, data: Any) -> bool:
    """Write the report (``-``: the real standard output); on failure print why and return False."""
    try:
        _jsonout.write_json(path, data, stdout=_RUN.json_stdout)
    except (OSError, ValueError) as exc:
        _error(_RUN.command, f"cannot write the report to {clean(path)}: {exc}")
        return False
    if path != _jsonout.STDOUT:
        print(f"report: {path}")
    return True


class _Progress:
    """Progress lines for long runs: nothing for the first :data:`PROGRESS_AFTER_S` seconds."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.t0 = self.last = time.perf_counter()

    def tick(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.t0 >= PROGRESS_AFTER_S and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            print(f"  ... {self.what}: {done}/{total} ({now - self.t0:.0f} s)", flush=True)


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:.1f} GiB"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _check_device(args: argparse.Namespace) -> None:
    """``--device`` out of range (the backend is loaded): a usage error, as ``smoke --devices``."""
    try:
        count = device_count()
    except AclError:
        return  # the call that follows says what is wrong
    if not 0 <= args.device < count:
        args.parser.error(f"--device: device id {args.device} out of range: {count} device(s) visible")


def _no_library_reason() -> str:
    """Why no library loads, in one line (the loader's message)."""
    try:
        load_backend()
    except (LibraryNotFoundError, ValueError) as exc:
        return _one_line(exc)
    return "no library could be loaded"


def _unavailable_environment(reason: str) -> dict[str, Any]:
    """The report's environment before (or without) a loaded library: the host facts, *reason* and the backend asked
    for."""
    requested = os.environ.get("ACL_BINDINGS_BACKEND", "auto") or "auto"
    return smoke.unavailable_environment(reason, requested if requested in ("auto", "cann", "sim") else "auto")
