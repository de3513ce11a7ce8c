"""``upsample3d-grad compare``: smoke reports of several machines (or CANN versions) side by side, or a fleet's
summary (docs/operators.md, "compare")."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .report_files import clean, expand_paths, load_report

__all__ = ["ENV_KEYS", "RUN_KEYS", "TABLE_MAX_REPORTS", "expand_paths", "load_report", "compare_reports",
           "render_text", "render_markdown", "clean"]

#: The environment entries compared, in display order.
ENV_KEYS = ("hostname", "backend", "fallback", "cann_version", "driver_version", "acl_version", "soc_name",
            "simulator_version", "device_count", "operator_library", "package_version", "python", "numpy", "platform")
#: How the smoke run itself was asked for (compared too).
RUN_KEYS = ("quick", "plans")
#: Up to this many reports, the text and Markdown show one column per report; beyond, the fleet summary.
TABLE_MAX_REPORTS = 6
#: The fleet summary shows at most this many groups, outliers and differing cases (the JSON has them all).
SHOW_GROUPS, SHOW_OUTLIERS, SHOW_CASES, SHOW_NAMES = 12, 20, 30, 4
#: A group of at most this share of the machines (and at least one machine) is made of outliers.
OUTLIER_SHARE = 0.02
_FAILED = ("fail", "error")
#: What the comparison keeps of each report's case entry.
_RESULT_KEYS = ("device", "status", "max_abs_err", "workspace_size", "time_ms", "digest")


def _labels(reports: Sequence[dict[str, Any]], paths: Sequence[str]) -> list[str]:
    """Each report's host name; where those repeat, its file stem, then ``folder/stem``, then its path."""
    names = [str(r["environment"].get("hostname") or os.path.basename(p)) for r, p in zip(reports, paths)]
    def stem(p: str) -> str:
        return os.path.splitext(os.path.basename(p))[0]

    for tier in (stem, lambda p: os.path.join(os.path.basename(os.path.dirname(p)), stem(p)), str):
        counts = Counter(names)
        if len(counts) == len(names):
            break
        names = [tier(p) if counts[n] > 1 else n for n, p in zip(names, paths)]
    return names


def _bitwise(digests: list[str | None]) -> str:
    present = [d for d in digests if d is not None]
    if len(present) < 2 or len(present) != len(digests):
        return "n/a"
    return "identical" if len(set(present)) == 1 else "different"


def report_problem(report: dict[str, Any]) -> str:
    """Why *report* is not ok (``""`` when it is): a fallback from a present CANN, an interruption, failures."""
    env = report["environment"]
    if env.get("fallback"):
        return f"the simulator stood in for a CANN that did not load ({env['fallback']})"
    if report.get("interrupted"):
        return "interrupted"
    if not report["summary"]["ok"]:
        failed = [c["name"] for c in report["cases"] if c["status"] in _FAILED]
        if failed:
            return f"{len(failed)} case(s) failed: {', '.join(failed[:3])}{' ...' if len(failed) > 3 else ''}"
        return env.get("error") or "no case ran"
    return ""


def compare_reports(reports: Sequence[dict[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """The comparison document of *reports* (read from *paths*, used for labels)."""
    if len(reports) < 2:
        raise ValueError("compare needs at least two reports")
    labels = _labels(reports, paths)
    env_diff: dict[str, list[Any]] = {}
    for key in (*ENV_KEYS, *RUN_KEYS):
        values = [r["environment"].get(key) if key in ENV_KEYS else r.get(key) for r in reports]
        if len({json.dumps(v) for v in values}) > 1:
            env_diff[key] = values
    by_report: list[dict[tuple[str, int], dict[str, Any]]] = []
    for r in reports:
        # the k-th device of one report is lined up with the k-th device of another (device ids may differ)
        ordinal = {dev: k for k, dev in enumerate(sorted({int(c["device"]) for c in r["cases"]}))}
        by_report.append({(c["name"], ordinal[int(c["device"])]): c for c in r["cases"]})
    keys = dict.fromkeys(key for table in by_report for key in table)  # every (name, slot), first seen first
    ran_any = sum(1 for t in by_report if t)
    cases: list[dict[str, Any]] = []
    why_not: list[str] = []  # (one reason per case with no bitwise comparison)
    for name, slot in keys:
        entries = [t.get((name, slot)) for t in by_report]
        results = [None if e is None else {k: e.get(k) for k in _RESULT_KEYS} for e in entries]
        statuses = {e["status"] for e in entries if e is not None}
        ran = [e for e in entries if e is not None and e["kind"] == "compute" and e["status"] != "skip"]
        cases.append({
            "name": name, "slot": slot,
            "results": results,
            "status_mismatch": "pass" in statuses and bool(statuses & set(_FAILED)),
            # a report that ran no case at all (no library, a refused fallback) is no comparison point
            "bitwise": _bitwise([e.get("digest") for e in ran]) if len(ran) == ran_any else "n/a",
            "absent": sum(1 for t, e in zip(by_report, entries) if e is None and t),
        })
        if cases[-1]["bitwise"] == "n/a":
            why_not.append(_why_not_comparable(cases[-1], {e["kind"] for e in entries if e is not None}))
    mismatches = [c["name"] for c in cases if c["status_mismatch"]]
    bitwise = [c["bitwise"] for c in cases]
    problems = [report_problem(r) for r in reports]
    summaries = [{"label": lab, "path": p, "hostname": r["environment"].get("hostname"),
                  "created_utc": r.get("created_utc"), "ok": not problem, "problem": problem,
                  "interrupted": bool(r.get("interrupted", False))}
                 for lab, p, r, problem in zip(labels, paths, reports, problems)]
    groups = _groups(labels, env_diff, problems)
    return {
        "tool": "upsample3d-grad compare",
        "reports": summaries,
        "environment_differences": env_diff,
        "groups": groups,
        "outliers": _outliers(groups, len(reports)),
        "cases": cases,
        "summary": {"cases": len(cases), "reports": len(reports), "not_ok": sum(1 for p in problems if p),
                    "status_mismatches": mismatches,
                    "bitwise_identical": bitwise.count("identical"), "bitwise_different": bitwise.count("different"),
                    "bitwise_not_comparable": bitwise.count("n/a"),
                    "not_comparable_why": {why: why_not.count(why) for why in _WHY_NOT if why in why_not}},
        "ok": not mismatches and not any(problems),
    }


_WHY_NOT = ("bad-input", "adjoint", "absent", "errors or skips")  # (the summary line's order)


def _why_not_comparable(case: dict[str, Any], kinds: set[str]) -> str:
    """Why *case* (of *kinds* in the reports that have it) has no result to compare bitwise."""
    if case["absent"]:
        return "absent"
    if kinds == {"bad_input"}:
        return "bad-input"  # (a refused call: its code is compared, not a result)
    if kinds == {"adjoint"}:
        return "adjoint"  # (a check of two results against each other, pass or fail)
    return "errors or skips"


def _groups(labels: list[str], env_diff: dict[str, list[Any]], problems: list[str]) -> list[dict[str, Any]]:
    """Machines grouped by environment (the differing keys but host name and fallback) and outcome, largest first."""
    keys = [k for k in env_diff if k not in ("hostname", "fallback")]
    index: dict[str, dict[str, Any]] = {}
    for i, (label, problem) in enumerate(zip(labels, problems)):
        env = {k: env_diff[k][i] for k in keys}
        outcome = "ok" if not problem else f"NOT ok: {problem}"
        group = index.setdefault(json.dumps([env, outcome]), {"environment": env, "outcome": outcome, "machines": []})
        group["machines"].append(label)
    return sorted(index.values(), key=lambda g: (-len(g["machines"]), g["outcome"] != "ok"))


def _outliers(groups: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """Each machine not ok or in a group of at most OUTLIER_SHARE of them, with what sets it apart from the largest."""
    if not groups:
        return []
    base = groups[0]
    small = max(1, int(total * OUTLIER_SHARE))
    out: list[dict[str, Any]] = []
    for g in groups:
        if g["outcome"] == "ok" and (g is base or len(g["machines"]) > small):
            continue
        why = [] if g["outcome"] == "ok" else [g["outcome"]]
        why += [f"{k}={v}" for k, v in g["environment"].items() if base["environment"].get(k) != v]
        out.extend({"machine": m, "why": "; ".join(why) or "differs from the largest group"} for m in g["machines"])
    return out


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    labels = [clean(r["label"], 40) for r in doc["reports"]]
    head = ["case"]
    for lab in labels:
        head += [f"{lab} status", "dev", "abs err", "ws B", "ms"]
    head.append("bitwise")
    rows = []
    for c in doc["cases"]:
        row = [clean(c["name"], 60) + (" <- MISMATCH" if c["status_mismatch"] else "")]
        for res in c["results"]:
            if res is None:
                row += ["absent", "-", "-", "-", "-"]
            else:
                row += [clean(res["status"]).upper(), str(res["device"]), _num(res["max_abs_err"], ".1e"),
                        _num(res["workspace_size"], ""), _num(res["time_ms"], ".2f")]
        row.append(c["bitwise"])
        rows.append(row)
    return head, rows


def _summary_lines(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    why = ", ".join(f"{n} {what}" for what, n in s["not_comparable_why"].items())
    lines = [f"{s['cases']} cases; results bitwise identical in {s['bitwise_identical']}, different in "
             f"{s['bitwise_different']}, not comparable in {s['bitwise_not_comparable']}"
             + (f" (no result to compare bitwise: {why})" if why else "")]
    if s["status_mismatches"]:
        shown = _names(s["status_mismatches"], SHOW_CASES, 60)
        lines.append(f"status mismatch (passes in one report, fails in another): {shown}")
    else:
        lines.append("no status mismatch")
    if s["not_ok"]:
        lines.append(f"{s['not_ok']} of {s['reports']} report(s) NOT ok")
    return lines


def _is_fleet(doc: dict[str, Any]) -> bool:
    """Whether *doc* is shown as a fleet's summary (more than :data:`TABLE_MAX_REPORTS` reports)."""
    return len(doc["reports"]) > TABLE_MAX_REPORTS


def _names(names: list[str], show: int = SHOW_NAMES, width: int = 40) -> str:
    """The first *show* of *names* (each cut to *width*), and how many more there are."""
    shown = ", ".join(clean(n, width) for n in names[:show])
    return shown + (f" (+{len(names) - show} more)" if len(names) > show else "")


def _case_counts(c: dict[str, Any]) -> dict[str, Any]:
    """One case across a fleet: how many reports gave each status, the worst error, the median time."""
    present = [r for r in c["results"] if r is not None]
    by = Counter(r["status"] for r in present)
    errs = [r["max_abs_err"] for r in present if r["max_abs_err"] is not None]
    times = [r["time_ms"] for r in present if r["time_ms"] is not None]
    return {"pass": by["pass"], "fail": by["fail"], "error": by["error"], "skip": by["skip"],
            "absent": c["absent"], "max_abs_err": max(errs, default=None),
            "median_ms": statistics.median(times) if times else None}


def _fleet_lines(doc: dict[str, Any], bullet: str) -> list[str]:
    """The fleet summary: counts, the groups, the outliers and the cases that differ (bounded line count)."""
    reps, groups, outliers = doc["reports"], doc["groups"], doc["outliers"]
    labels = [r["label"] for r in reps]
    not_ok = sum(1 for r in reps if not r["ok"])
    interrupted = sum(1 for r in reps if r["interrupted"])
    out = [f"{len(reps)} reports: {len(reps) - not_ok} ok, {not_ok} NOT ok ({interrupted} interrupted)"]
    keys = [k for k in doc["environment_differences"] if k != "hostname"]
    out.append(f"environment keys that differ between machines: {', '.join(keys) if keys else 'none'}")
    out.append(f"{len(groups)} group(s) of machines with the same environment and outcome, largest first:")
    for k, g in enumerate(groups[:SHOW_GROUPS], 1):
        size = len(g["machines"])
        env = "".join(f" {key}={clean(v, 48)}" for key, v in g["environment"].items())
        out.append(f"{bullet}#{k} {size} machine{'s' if size != 1 else ''}, {clean(g['outcome'], 100)}"
                   f"{';' if env else ''}{env}: {_names(g['machines'])}")
    if len(groups) > SHOW_GROUPS:
        rest = sum(len(g["machines"]) for g in groups[SHOW_GROUPS:])
        out.append(f"{bullet}... {len(groups) - SHOW_GROUPS} more group(s), {rest} machine(s) (see --json)")
    out.append(f"outliers (not ok, or in a group of at most {OUTLIER_SHARE:.0%} of the machines): {len(outliers)}")
    for o in outliers[:SHOW_OUTLIERS]:
        out.append(f"{bullet}{clean(o['machine'], 40)}: {clean(o['why'], 160)}")
    if len(outliers) > SHOW_OUTLIERS:
        out.append(f"{bullet}... {len(outliers) - SHOW_OUTLIERS} more outlier(s) (see --json)")
    counted = [(c, _case_counts(c)) for c in doc["cases"]]
    differing = [(c, n) for c, n in counted if c["status_mismatch"] or c["bitwise"] == "different" or n["fail"]
                 or n["error"] or n["absent"]]
    out.append(f"cases that differ between machines: {len(differing)} of {len(doc['cases'])} "
               "(the others pass everywhere, bitwise identical where comparable)")
    for c, n in differing[:SHOW_CASES]:
        failing = [lab for lab, r in zip(labels, c["results"]) if r is not None and r["status"] in _FAILED]
        tail = f"; fails on {_names(failing)}" if failing else ""
        out.append(f"{bullet}{clean(c['name'], 60)}{' <- MISMATCH' if c['status_mismatch'] else ''}: "
                   f"pass {n['pass']}, fail {n['fail']}, error {n['error']}, skip {n['skip']}, absent {n['absent']}; "
                   f"bitwise {c['bitwise']}; max abs err {_num(n['max_abs_err'], '.1e')}{tail}")
    if len(differing) > SHOW_CASES:
        out.append(f"{bullet}... {len(differing) - SHOW_CASES} more case(s) (see --json)")
    return out


def render_text(doc: dict[str, Any]) -> str:
    """The comparison as plain text (aligned columns; a fleet's summary beyond :data:`TABLE_MAX_REPORTS`)."""
    if _is_fleet(doc):
        return "\n".join([*_fleet_lines(doc, "  "), *_summary_lines(doc)]) + "\n"
    out = ["reports:"]
    for r in doc["reports"]:
        flag = " (interrupted)" if r["interrupted"] else ""
        status = "ok" if r["ok"] else f"NOT ok: {clean(r['problem'], 120)}"
        out.append(f"  {clean(r['label'], 40)}: {clean(r['path'])} ({clean(r['created_utc'])}, {status}{flag})")
    labels = [clean(r["label"], 40) for r in doc["reports"]]
    if doc["environment_differences"]:
        out.append("environment differences:")
        width = max(len(k) for k in doc["environment_differences"])
        for key, values in doc["environment_differences"].items():
            shown = "  ".join(f"{lab}={clean(v, 80)}" for lab, v in zip(labels, values))
            out.append(f"  {key:<{width}}  {shown}")
    else:
        out.append("environment differences: none")
    head, rows = _rows(doc)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        out.append("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
    out.extend(_summary_lines(doc))
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(head: list[str], rows: Iterable[list[str]]) -> list[str]:
    """A Markdown table's lines: *head*, its rule, then *rows* (cells as given, already escaped)."""
    lines = ["| " + " | ".join(cells) + " |" for cells in (head, *rows)]
    return [lines[0], "|---" * len(head) + "|", *lines[1:]]


def render_markdown(doc: dict[str, Any]) -> str:
    """The comparison as Markdown tables (a fleet's summary as a list beyond :data:`TABLE_MAX_REPORTS`)."""
    if _is_fleet(doc):
        return "\n".join([_md(line) for line in _fleet_lines(doc, "- ")] + ["", *_summary_lines(doc)]) + "\n"
    labels = [_md(clean(r["label"], 40)) for r in doc["reports"]]
    out = _md_table(["report", "file", "created (UTC)", "ok"],
                    [[lab, f"`{_md(clean(r['path']))}`", clean(r["created_utc"]),
                      "yes" if r["ok"] else "no: " + _md(clean(r["problem"], 120))]
                     for lab, r in zip(labels, doc["reports"])])
    out.append("")
    if doc["environment_differences"]:
        out += _md_table(["environment", *labels], [[key, *(f"`{_md(clean(v, 80))}`" for v in values)]
                                                   for key, values in doc["environment_differences"].items()])
    else:
        out.append("No environment differences.")
    head, rows = _rows(doc)
    out += ["", *_md_table([_md(h) for h in head], [[_md(x) for x in row] for row in rows]), ""]
    out.extend(_summary_lines(doc))
    return "\n".join(out) + "\n"
