"""Reading the reports ``compare`` is given (strict JSON, checked against the smoke schema), and :func:`clean`."""

from __future__ import annotations

import functools
import glob
import json
import math
import os
from collections.abc import Sequence
from typing import Any

from . import _schema

__all__ = ["clean", "expand_paths", "load_report"]


def clean(text: Any, limit: int = 0) -> str:
    """*text* for a terminal: control and format characters (ANSI escapes, newlines, bidi overrides) written
    as escapes; cut to *limit* characters (with ``...``) when *limit* is set."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))
    return out if not limit or len(out) <= limit else out[:limit - 3] + "..."


def expand_paths(items: Sequence[str]) -> list[str]:
    """The report files named by *items*: files as given, folders as their ``*.json`` and glob patterns that name
    no file as their matches (sorted); ``ValueError`` for a folder without reports or a pattern matching nothing."""
    out: list[str] = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(glob.glob(os.path.join(glob.escape(item), "*.json")))
            if not found:
                raise ValueError(f"{clean(item)}: a folder without *.json reports")
        elif not os.path.exists(item) and any(ch in item for ch in "*?["):
            found = sorted(p for p in glob.glob(item) if not os.path.isdir(p))
            if not found:
                raise ValueError(f"{clean(item)}: no file matches this pattern")
        else:
            found = [item]
        out.extend(found)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (a report holds no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range (a report holds finite numbers)")
    return value


@functools.lru_cache(maxsize=1)
def _smoke_schema() -> dict[str, Any]:
    return _schema.load_schema(_schema.SMOKE_SCHEMA_PATH)


def load_report(path: str) -> dict[str, Any]:
    """Read one smoke report and check it against the smoke schema: a one-line ``ValueError`` naming the file if it
    is not strict UTF-8 JSON (no NaN), nests too deeply or is no smoke report, ``OSError`` if it cannot be read."""
    name = clean(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh, parse_constant=_reject_constant, parse_float=_finite)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not a report: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"{name}: not a report: nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    except OSError as exc:
        raise OSError(f"{name}: cannot read it: {exc.strerror or exc}") from None
    try:
        problems = _schema.errors(data, _smoke_schema())
    except RecursionError:
        raise ValueError(f"{name}: not a report: nested too deeply") from None
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"{name}: not a smoke report of this version: {clean(problems[0])}{more}")
    return data
