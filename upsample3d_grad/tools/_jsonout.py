"""Writing a JSON report to ``--json PATH`` (``-``: standard output), checked before the work starts and replaced
atomically (docs/operators.md, "Reports")."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from typing import Any, TextIO

__all__ = ["STDOUT", "check_target", "write_json", "dumps"]

#: The ``--json`` value that means standard output.
STDOUT = "-"


def check_target(path: str) -> str | None:
    """Why *path* cannot take a report (one line), or None when it can."""
    if path == "":
        return "--json: the path is empty (give a file name, or - for standard output)"
    if path == STDOUT:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return f"--json: cannot use {path!r}: {exc.strerror or exc}"
    if st is not None and stat.S_ISDIR(st.st_mode):
        return f"--json: {path!r} is a folder, not a file"
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None if os.access(path, os.W_OK) else f"--json: {path!r} is not writable"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"--json: the folder {folder!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--json: the folder {folder!r} is not writable"
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def dumps(data: Any) -> str:
    """The report's text: indented, strict JSON (no NaN), one trailing newline."""
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def write_json(path: str, data: Any, stdout: TextIO | None = None) -> None:
    """Write *data* to *path* (``-``: *stdout*, default ``sys.stdout``); an ``OSError`` if it cannot (nothing at
    *path* is damaged then)."""
    text = dumps(data)
    if path == STDOUT:
        out = stdout if stdout is not None else sys.stdout
        out.write(text)
        out.flush()
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "w", encoding="utf-8") as fh:  # a device, FIFO or link: write into it
            fh.write(text)
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
