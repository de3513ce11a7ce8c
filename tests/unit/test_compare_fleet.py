"""``compare`` of a fleet: 500 generated reports in a folder, a glob, the groups and outliers, an output that
does not grow with the number of machines, and work and memory that grow linearly with reports x cases."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from upsample3d_grad.tools import cli, compare, smoke

FLEET = 500
CASES = 24


class CountingStr(str):
    """A case name that counts how often it is hashed or compared: the work compare does per case."""

    calls = 0

    def __hash__(self) -> int:
        CountingStr.calls += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        CountingStr.calls += 1
        return str.__eq__(self, other)


def fleet_report(k: int, cases: int = CASES, name_type: type = str) -> dict[str, Any]:
    """Machine *k* of a generated fleet: most alike; a few with another CANN, a failing case, a fallback from
    a broken CANN, an interruption."""
    env = smoke.unavailable_environment("", "auto")
    env.update({"hostname": f"node{k:04d}", "backend": "cann", "cann_version": "8.5.0", "driver_version": "25.2.0",
                "soc_name": "Ascend910B3", "error": None})
    if k % 40 == 7:
        env["cann_version"] = "8.3.RC1"
    if k == 123:
        env.update(backend="sim", fallback="CANN at /usr/local/Ascend/cann/lib64 failed to load: libascendcl.so: "
                                           "it needs libdrvdsmi_host.so, which was not found; using the simulator")
    report = smoke.new_report(env, True, ["upsample3d-grad", "smoke", "--json", "r.json"])
    for c in range(cases):
        entry = smoke._base_entry(0, "compute", name_type(f"case{c:03d}-fp32-NCDHW"))
        failed = k in (42, 314, 271) and c == 5
        entry.update(status="fail" if failed else "pass", digest=f"sha256:{c:064d}", max_abs_err=0.0,
                     workspace_size=512, time_ms=0.5 + (k % 7) / 10)
        report["cases"].append(entry)
    report["summary"] = smoke.summarize(report["cases"])
    if k == 400:
        report["interrupted"] = True
        report["summary"]["ok"] = False
    return report


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    for k in range(FLEET):
        (folder / f"node{k:04d}.json").write_text(json.dumps(fleet_report(k)))
    return folder


def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    rc = cli.main(["compare", *argv])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


@pytest.mark.parametrize("markdown", [False, True])
def test_a_fleet_folder_is_summarised_by_group(fleet_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str], markdown: bool) -> None:
    out = tmp_path / "cmp.json"
    rc, lines, err = _compare(capsys, str(fleet_dir), "--json", str(out), *(["--markdown"] if markdown else []))
    assert rc == 1, err  # some machines are not ok
    text = "\n".join(lines)
    assert lines[0].startswith(f"{FLEET} reports: {FLEET - 5} ok, 5 NOT ok (1 interrupted)"), lines[0]
    assert len(lines) <= 80 and max(map(len, lines)) <= 400, (len(lines), max(map(len, lines)))
    assert not any(f"node{k:04d}" in text for k in range(100, 120))  # no line or column per machine
    bullet = "- " if markdown else "  "
    assert f"{bullet}#1 482 machines, ok; backend=cann cann_version=8.5.0: node0000, " in text  # 500 - 13 - 5
    assert f"{bullet}#2 13 machines, ok; backend=cann cann_version=8.3.RC1: node0007, node0047" in text
    for host in ("node0042", "node0314", "node0271"):  # the outliers are named
        assert f"{bullet}{host}: NOT ok: 1 case(s) failed: case005-fp32-NCDHW" in text
    assert f"{bullet}node0123: NOT ok: the simulator stood in for a CANN that did not load" in text
    assert f"{bullet}node0400: NOT ok: interrupted" in text
    assert "case005-fp32-NCDHW <- MISMATCH: pass 497, fail 3" in text
    assert "cases that differ between machines: 1 of 24" in text
    doc = json.loads(out.read_text())
    assert len(doc["reports"]) == FLEET and sum(len(g["machines"]) for g in doc["groups"]) == FLEET
    assert sorted(o["machine"] for o in doc["outliers"]) == ["node0042", "node0123", "node0271", "node0314",
                                                             "node0400"]


def test_a_glob_and_several_folders(fleet_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines, err = _compare(capsys, str(fleet_dir / "node00[0-4]*.json"), "--json", "-")
    doc = json.loads("\n".join(lines))
    assert len(doc["reports"]) == 50 and doc["reports"][0]["label"] == "node0000"
    rc, lines, err = _compare(capsys, str(fleet_dir / "nothing*.json"))
    assert rc == 2 and "no file matches this pattern" in err
    rc, lines, err = _compare(capsys, str(fleet_dir.parent))
    assert rc == 2 and "a folder without *.json reports" in err


def test_the_output_does_not_grow_with_the_fleet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sizes = {}
    for n in (compare.TABLE_MAX_REPORTS + 1, 60, FLEET):
        reports = [fleet_report(k) for k in range(n)]
        text = compare.render_text(compare.compare_reports(reports, [f"{k}.json" for k in range(n)]))
        sizes[n] = (len(text.splitlines()), max(map(len, text.splitlines())))
    assert sizes[FLEET][0] <= sizes[60][0] + 8 and sizes[FLEET][1] <= 400, sizes


def _work(reports: int, cases: int) -> int:
    batch = [fleet_report(k, cases, CountingStr) for k in range(reports)]
    CountingStr.calls = 0
    doc = compare.compare_reports(batch, [f"{k}.json" for k in range(reports)])
    compare.render_text(doc)
    compare.render_markdown(doc)
    return CountingStr.calls


def test_work_grows_linearly_with_reports_and_cases() -> None:
    base = _work(40, 20)
    assert base > 0
    more_reports = _work(160, 20) / base
    more_cases = _work(40, 80) / base
    # linear: 4x the reports or the cases is about 4x the work (a scan per case, quadratic, would be 16x)
    assert 3.0 < more_reports < 5.0 and 3.0 < more_cases < 5.0, (more_reports, more_cases)


def _peak(reports: int, cases: int) -> int:
    batch = [fleet_report(k, cases) for k in range(reports)]
    tracemalloc.start()
    try:
        doc = compare.compare_reports(batch, [f"{k}.json" for k in range(reports)])
        compare.render_text(doc)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_grows_linearly_with_reports_and_cases() -> None:
    base = _peak(50, 20)
    assert 2.5 < _peak(200, 20) / base < 5.0
    assert 2.5 < _peak(50, 80) / base < 5.0
