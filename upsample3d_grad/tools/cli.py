"""The ``upsample3d-grad`` command line (also ``python -m upsample3d_grad``), one module per command; options,
reports and exit codes: docs/api.md, "The command line"."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any, Callable, Sequence

import numpy.random  # noqa: F401  (imported now: a Ctrl-C inside numpy's lazy import of it can be lost)

from .. import __version__
from . import _jsonout, compare, hostinfo, smoke
from ._cli_shared import (
    _RUN,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_NO_LIBRARY,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    _hold_sigint,
    _Parser,
    _unavailable_environment,
    _write_json,
)
from .cli_bench import _bench, bench_report
from .cli_doctor import _doctor, _doctor_report, _run
from .cli_smoke import _smoke
from .smoke import summarize

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_NO_LIBRARY", "EXIT_INTERRUPTED"]


def _ints(text: str, n: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        values = ()
    if len(values) != n:
        raise argparse.ArgumentTypeError(f"expected {n} comma-separated integers, got {text!r}")
    negative = [v for v in values if v < 0]
    if negative:
        raise argparse.ArgumentTypeError(f"sizes are >= 0, got {negative[0]} in {text!r}")
    return values


def _join_negative_values(parser: argparse.ArgumentParser, raw: list[str]) -> list[str]:
    """``--opt -1,2`` as ``--opt=-1,2``, which argparse would take for an option (missing its range check)."""
    parsers = [parser, *(sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                         for sub in action.choices.values())]
    takes_value = {opt for p in parsers for action in p._actions if action.nargs is None
                   for opt in action.option_strings}
    out: list[str] = []
    for tok in raw:
        if out and out[-1] in takes_value and len(tok) > 1 and tok[0] == "-" and (tok[1].isdigit() or tok[1] == "."):
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


# --------------------------------------------------------------------------- parser

def _json_path(text: str) -> str:
    if text == "":
        raise argparse.ArgumentTypeError("the path is empty (give a file name, or - for standard output)")
    return text


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= *minimum*."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def _scale(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _compare(args: argparse.Namespace) -> int:
    try:
        paths = compare.expand_paths(args.reports)
        if len(paths) < 2:
            args.parser.error(f"compare needs at least two reports, got {len(paths)}")
        reports = [compare.load_report(path) for path in paths]
    except (OSError, ValueError) as exc:
        args.parser.error(str(exc))
    doc = compare.compare_reports(reports, paths)
    sys.stdout.write((compare.render_markdown if args.markdown else compare.render_text)(doc))
    if args.json and not _write_json(args.json, doc):
        return EXIT_FAIL
    return EXIT_OK if doc["ok"] else EXIT_FAIL


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``upsample3d-grad`` command."""
    parser = _Parser(
        prog=PROG,
        description="CANN's aclnnUpsampleNearestExact3dBackward from Python: check the setup, run the official "
                    "sample, smoke-test and benchmark the operator (on an NPU, or on the CPU simulator), and compare "
                    "smoke reports of several machines.",
        epilog="Backend: ACL_BINDINGS_BACKEND=auto (default: real CANN if found, else the simulator) | cann | sim. "
               "Exit codes: 0 ok, 1 failure, 2 usage (or --require-npu without an NPU), 3 no library found, "
               "130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = _Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="log every C call with its arguments and result on standard error")
    common.add_argument("--backend", choices=("auto", "cann", "sim"), default=None,
                        help="as ACL_BINDINGS_BACKEND: auto (real CANN if it is there, else the simulator; a CANN "
                             "that is there but does not load is an error), cann, or sim (the CPU simulator)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    json_help = ("write the report as JSON to FILE (- for standard output; {{host}}, {{rank}} and {{time}} in FILE are "
                 "replaced: see docs/fleet.md; schema: upsample3d_grad/tools/{})")

    p = sub.add_parser("doctor", parents=[common],
                       help="check the setup: backend, libraries, CANN and driver versions, SoC, devices, operator")
    p.add_argument("--device", type=_int_at_least(0), default=0, help="device for the sample run (default 0)")
    p.add_argument("--no-run", action="store_true", help="do not run the official sample")
    p.add_argument("--json", metavar="FILE", type=_json_path, help=json_help.format("doctor_schema.json"))
    p.set_defaults(func=_doctor, parser=p)

    p = sub.add_parser("run", parents=[common], help="run the official sample case and print the four results")
    p.add_argument("--device", type=_int_at_least(0), default=0, help="device id (default 0)")
    p.set_defaults(func=_run, parser=p)

    p = sub.add_parser("smoke", parents=[common], help="run the smoke matrix against the numpy reference")
    p.add_argument("--devices", default="0", help="'0', '1,2' or 'all' (all: one process per device); default 0")
    p.add_argument("--quick", action="store_true", help="a small matrix")
    p.add_argument("--json", metavar="FILE", type=_json_path, help=json_help.format("smoke_schema.json"))
    p.add_argument("--require-npu", action="store_true",
                   help="fail (exit 2) when only the CPU simulator is available")
    p.add_argument("--no-plans", action="store_true",
                   help="Session(plans=False): run both phases on every call (no executor reuse)")
    p.set_defaults(func=_smoke, parser=p)

    p = sub.add_parser("bench", parents=[common], help="device time (events), host overhead per call, effective GB/s")
    p.add_argument("--device", type=_int_at_least(0), default=0, help="device id (default 0)")
    p.add_argument("--input-size", type=lambda t: _ints(t, 5), default=(2, 16, 16, 32, 32),
                   metavar="N,C,D,H,W", help="gradInput size (default 2,16,16,32,32)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scale", type=_scale, default=2.0,
                   help="forward scale for D, H and W, passed to the operator: 0 < scale <= 50 (default 2)")
    g.add_argument("--output-size", type=lambda t: _ints(t, 3), default=None,
                   metavar="D,H,W", help="gradOut spatial size instead of --scale (scales not passed)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--layout", choices=("NCDHW", "NDHWC"), default="NCDHW")
    p.add_argument("--repeat", type=_int_at_least(1), default=20, help="timed runs, >= 1 (default 20)")
    p.add_argument("--warmup", type=_int_at_least(0), default=3, help="untimed runs first, >= 0 (default 3)")
    p.add_argument("--json", metavar="FILE", type=_json_path,
                   help="also write the figures as JSON (- for stdout; {host}, {rank}, {time} are replaced)")
    p.set_defaults(func=_bench, parser=p)

    p = sub.add_parser("compare",  # (reads report files: no library, so no -v or --backend)
                       help="compare smoke reports of several machines or CANN versions; a fleet (more than "
                            f"{compare.TABLE_MAX_REPORTS} reports) is summarised by group")
    p.add_argument("reports", nargs="+", metavar="REPORT",
                   help="smoke reports (smoke --json), two or more: files, folders (their *.json) or glob patterns")
    p.add_argument("--markdown", action="store_true", help="write Markdown instead of text")
    p.add_argument("--json", metavar="FILE", type=_json_path,
                   help="also write the comparison as JSON to FILE (- for standard output)")
    p.set_defaults(func=_compare, parser=p)
    return parser


def _verbose() -> None:
    """Turn on the C-call log (``ACL_BINDINGS_LOG_CALLS``, read when a function is bound) on standard error."""
    os.environ["ACL_BINDINGS_LOG_CALLS"] = "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log = logging.getLogger("acl_bindings")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def _interrupted(args: argparse.Namespace | None) -> None:
    """Ctrl-C: one ``... interrupted`` line; the partial report, marked, where ``--json`` asks for one."""
    print(f"{PROG} {_RUN.command}: interrupted" if _RUN.command else f"{PROG}: interrupted",
          file=sys.stderr, flush=True)
    report = _RUN.report
    path = getattr(args, "json", None)
    if report is None or not isinstance(path, str):
        return
    report["interrupted"] = True
    if "cases" in report and "summary" in report:
        report["summary"] = summarize(report["cases"])
        report["summary"]["ok"] = False
    if "healthy" in report:
        report["healthy"] = False
    _write_json(path, report)


def _first_report(args: argparse.Namespace) -> dict[str, Any] | None:
    """The report a Ctrl-C writes before the command has read any fact (``--json`` of doctor, smoke and bench)."""
    if args.command == "bench":
        return bench_report(args)
    if args.command not in ("doctor", "smoke"):
        return None
    env = _unavailable_environment("interrupted before the facts were read")
    if args.command == "doctor":
        return _doctor_report(args, env, [], ["interrupted"], {"ran": False})
    return smoke.new_report(env, args.quick, args.argv, plans=not args.no_plans)


def _json_target(args: argparse.Namespace) -> str | None:
    """``--json``'s path, checked before the run; ``{host}``, ``{rank}``, ``{time}`` in it replaced, so that one
    command line serves a fleet."""
    path = getattr(args, "json", None)
    if not isinstance(path, str) or path == _jsonout.STDOUT:
        return path
    try:
        path = args.json = hostinfo.expand_template(path, args.started_utc)
    except ValueError as exc:
        args.parser.error(f"--json: {exc}")
    problem = _jsonout.check_target(path)
    if problem:
        args.parser.error(problem)
    return path


COMMANDS = ("doctor", "run", "smoke", "bench", "compare")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    held = _hold_sigint(True)  # a Ctrl-C waits for the report it writes (the console script holds it from its start)
    raw = list(sys.argv[1:] if argv is None else argv)
    _RUN.report = None
    _RUN.json_stdout = sys.stdout
    _RUN.sigint = False
    _RUN.command = next((tok for tok in raw if tok in COMMANDS), "")  # the subcommand, before the parser has run
    args: argparse.Namespace | None = None
    saved = sys.stdout
    handler = None
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        handler = signal.signal(signal.SIGINT, _RUN.on_sigint)
    try:
        parser = build_parser()
        raw = _join_negative_values(parser, raw)
        args, extra = parser.parse_known_args(raw)
        command = getattr(args, "command", None)
        if extra:
            (args.parser if command else parser).error(f"unrecognized arguments: {' '.join(extra)}")
        if not command:
            parser.print_help()
            return EXIT_USAGE
        _RUN.command = command
        args.argv = [PROG, *raw]
        args.started_utc = hostinfo.utc_now()
        path = _json_target(args)
        _RUN.report = _first_report(args) if path else None
        _hold_sigint(False)  # (a Ctrl-C held until now is raised here)
        if getattr(args, "backend", None):
            os.environ["ACL_BINDINGS_BACKEND"] = args.backend  # read when the backend loads (children inherit it)
        if getattr(args, "verbose", False):
            _verbose()
        if path == _jsonout.STDOUT:
            sys.stdout = sys.stderr  # the report owns standard output; the human-readable lines go to stderr
        rc = int(args.func(args))
        if _RUN.sigint:  # interrupted, but the KeyboardInterrupt was swallowed on the way
            raise KeyboardInterrupt
        return rc
    except SystemExit as exc:  # a usage error (already printed), --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        _interrupted(args)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL
    finally:
        _hold_sigint(True)
        sys.stdout = saved
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        if not held:
            _hold_sigint(False)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
