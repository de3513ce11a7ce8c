"""``upsample3d-grad compare``: smoke reports of several machines (or CANN versions) in one table.

:func:`compare_reports` lines the reports up:

* the environment keys whose values differ between the reports (host, backend,
  CANN and driver versions, SoC, package versions...);
* per case (by name, and the k-th device of each report): each report's status, max abs error, workspace size
  and time, and whether the results are bitwise identical where every report that
  ran the case gives a digest (sha256 of the result bytes).

A case that passes in one report and fails (or errors) in another is a *status
mismatch*; :func:`compare_reports` then says ``ok: False`` and the command exits 1.
:func:`render_text`, :func:`render_markdown` and the JSON document itself are the
three outputs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from . import _schema

__all__ = ["ENV_KEYS", "RUN_KEYS", "load_report", "compare_reports", "render_text", "render_markdown"]

#: The environment entries compared, in display order.
ENV_KEYS = ("hostname", "backend", "fallback", "cann_version", "driver_version", "acl_version", "soc_name",
            "simulator_version", "device_count", "operator_library", "package_version", "python", "numpy", "platform")
#: How the smoke run itself was asked for (compared too).
RUN_KEYS = ("quick", "plans")
_FAILED = ("fail", "error")


def load_report(path: str) -> dict[str, Any]:
    """Read one smoke report and check it against the smoke schema.

    Raises
    ------
    ValueError
        If the file is not JSON or not a smoke report (the message names the file).
    OSError
        If it cannot be read.
    """
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from None
    problems = _schema.errors(data, _schema.load_schema(_schema.SMOKE_SCHEMA_PATH))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"{path}: not a smoke report of this version: {problems[0]}{more}")
    return data


def _labels(reports: Sequence[dict[str, Any]], paths: Sequence[str]) -> list[str]:
    names = [str(r["environment"].get("hostname") or os.path.basename(p)) for r, p in zip(reports, paths)]
    if len(set(names)) == len(names):
        return names
    return [os.path.splitext(os.path.basename(p))[0] if names.count(n) > 1 else n for n, p in zip(names, paths)]


def _bitwise(digests: list[str | None]) -> str:
    present = [d for d in digests if d is not None]
    if len(present) < 2 or len(present) != len(digests):
        return "n/a"
    return "identical" if len(set(present)) == 1 else "different"


def compare_reports(reports: Sequence[dict[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """The comparison document of *reports* (read from *paths*, used for labels); see the module docstring."""
    if len(reports) < 2:
        raise ValueError("compare needs at least two reports")
    labels = _labels(reports, paths)
    env_diff: dict[str, list[Any]] = {}
    for key in (*ENV_KEYS, *RUN_KEYS):
        values = [r["environment"].get(key) if key in ENV_KEYS else r.get(key) for r in reports]
        if len({json.dumps(v) for v in values}) > 1:
            env_diff[key] = values
    keys: list[tuple[str, int]] = []
    by_report: list[dict[tuple[str, int], dict[str, Any]]] = []
    for r in reports:
        # the k-th device of one report is lined up with the k-th device of another (device ids may differ)
        ordinal = {dev: k for k, dev in enumerate(sorted({int(c["device"]) for c in r["cases"]}))}
        table = {(c["name"], ordinal[int(c["device"])]): c for c in r["cases"]}
        by_report.append(table)
        keys.extend(k for k in table if k not in keys)
    cases: list[dict[str, Any]] = []
    for name, slot in keys:
        entries = [t.get((name, slot)) for t in by_report]
        results = [None if e is None else {"device": e["device"], "status": e["status"],
                                           "max_abs_err": e["max_abs_err"],
                                           "workspace_size": e["workspace_size"], "time_ms": e["time_ms"],
                                           "digest": e.get("digest")} for e in entries]
        statuses = {e["status"] for e in entries if e is not None}
        ran = [e for e in entries if e is not None and e["kind"] == "compute" and e["status"] != "skip"]
        cases.append({
            "name": name, "slot": slot,
            "results": results,
            "status_mismatch": "pass" in statuses and bool(statuses & set(_FAILED)),
            "bitwise": _bitwise([e.get("digest") for e in ran]) if len(ran) == len(reports) else "n/a",
        })
    mismatches = [c["name"] for c in cases if c["status_mismatch"]]
    bitwise = [c["bitwise"] for c in cases]
    return {
        "tool": "upsample3d-grad compare",
        "reports": [{"label": lab, "path": p, "hostname": r["environment"].get("hostname"),
                     "created_utc": r.get("created_utc"), "ok": r["summary"]["ok"],
                     "interrupted": bool(r.get("interrupted", False))}
                    for lab, p, r in zip(labels, paths, reports)],
        "environment_differences": env_diff,
        "cases": cases,
        "summary": {"cases": len(cases), "status_mismatches": mismatches,
                    "bitwise_identical": bitwise.count("identical"), "bitwise_different": bitwise.count("different"),
                    "bitwise_not_comparable": bitwise.count("n/a")},
        "ok": not mismatches,
    }


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    labels = [r["label"] for r in doc["reports"]]
    head = ["case"]
    for lab in labels:
        head += [f"{lab} status", "dev", "abs err", "ws B", "ms"]
    head.append("bitwise")
    rows = []
    for c in doc["cases"]:
        row = [c["name"] + (" <- MISMATCH" if c["status_mismatch"] else "")]
        for res in c["results"]:
            if res is None:
                row += ["absent", "-", "-", "-", "-"]
            else:
                row += [res["status"].upper(), str(res["device"]), _num(res["max_abs_err"], ".1e"),
                        "-" if res["workspace_size"] is None else str(res["workspace_size"]),
                        _num(res["time_ms"], ".2f")]
        row.append(c["bitwise"])
        rows.append(row)
    return head, rows


def _summary_lines(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    lines = [f"{s['cases']} cases; results bitwise identical in {s['bitwise_identical']}, different in "
             f"{s['bitwise_different']}, not comparable in {s['bitwise_not_comparable']} (no result in every report: "
             "bad-input cases, errors, absent cases)"]
    if s["status_mismatches"]:
        lines.append(f"status mismatch (passes in one report, fails in another): {', '.join(s['status_mismatches'])}")
    else:
        lines.append("no status mismatch")
    return lines


def render_text(doc: dict[str, Any]) -> str:
    """The comparison as plain text (aligned columns)."""
    out = ["reports:"]
    for r in doc["reports"]:
        flag = " (interrupted)" if r["interrupted"] else ""
        out.append(f"  {r['label']}: {r['path']} ({r['created_utc']}, {'ok' if r['ok'] else 'NOT ok'}{flag})")
    labels = [r["label"] for r in doc["reports"]]
    if doc["environment_differences"]:
        out.append("environment differences:")
        width = max(len(k) for k in doc["environment_differences"])
        for key, values in doc["environment_differences"].items():
            shown = "  ".join(f"{lab}={v}" for lab, v in zip(labels, values))
            out.append(f"  {key:<{width}}  {shown}")
    else:
        out.append("environment differences: none")
    head, rows = _rows(doc)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        out.append("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
    out.extend(_summary_lines(doc))
    return "\n".join(out) + "\n"


def render_markdown(doc: dict[str, Any]) -> str:
    """The comparison as Markdown tables."""
    labels = [r["label"] for r in doc["reports"]]
    out = ["| report | file | created (UTC) | ok |", "|---|---|---|---|"]
    for r in doc["reports"]:
        out.append(f"| {r['label']} | `{r['path']}` | {r['created_utc']} | {'yes' if r['ok'] else 'no'} |")
    out.append("")
    if doc["environment_differences"]:
        out.append("| environment | " + " | ".join(labels) + " |")
        out.append("|---" * (len(labels) + 1) + "|")
        for key, values in doc["environment_differences"].items():
            out.append(f"| {key} | " + " | ".join(f"`{v}`" for v in values) + " |")
    else:
        out.append("No environment differences.")
    out.append("")
    head, rows = _rows(doc)
    out.append("| " + " | ".join(head) + " |")
    out.append("|---" * len(head) + "|")
    for row in rows:
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.extend(_summary_lines(doc))
    return "\n".join(out) + "\n"
