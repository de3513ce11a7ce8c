"""The CLI's grammar, in process (no library is loaded): every error line names its subcommand, usage errors
exit 2, negative numbers in lists reach their range check, ``compare --json PATH``, reports that are not
strict JSON, control characters, and the ``--json`` path templates."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from upsample3d_grad.tools import cli, compare, hostinfo, smoke


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _report(host: str, statuses: dict[str, str] | None = None, **env: Any) -> dict[str, Any]:
    e = smoke.unavailable_environment("", "auto")
    e.update({"hostname": host, "backend": "cann", "cann_version": "8.5.0", "error": None, **env})
    report = smoke.new_report(e, True, ["upsample3d-grad", "smoke"])
    for name, status in (statuses or {"c1": "pass", "c2": "pass"}).items():
        entry = smoke._base_entry(0, "compute", name)
        entry.update(status=status, digest="sha256:" + name, max_abs_err=0.0, workspace_size=512, time_ms=1.0)
        report["cases"].append(entry)
    report["summary"] = smoke.summarize(report["cases"])
    return report


def _write(path: Path, report: dict[str, Any]) -> Path:
    path.write_text(json.dumps(report))
    return path


@pytest.mark.parametrize("argv, fragment", [
    (["run", "extra"], "unrecognized arguments: extra"),
    (["doctor", "--no-run", "x"], "unrecognized arguments: x"),
    (["run", "--device", "-1"], "--device: expected an integer >= 0, got -1"),
    (["bench", "--device", "-3"], "--device: expected an integer >= 0, got -3"),
    (["bench", "--input-size", "-1,2,3,4,5"], "sizes are >= 0, got -1 in '-1,2,3,4,5'"),
    (["bench", "--output-size", "-2,2,2"], "sizes are >= 0, got -2"),
    (["bench", "--input-size", "1,2,3"], "expected 5 comma-separated integers, got '1,2,3'"),
    (["smoke", "--backend", "npu"], "invalid choice: 'npu'"),
    (["compare", "--json"], "expected one argument"),
    (["smoke", "--json", "r-{nosuch}.json"], "unknown placeholder {nosuch}"),
])
def test_usage_errors_name_the_subcommand_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                     fragment: str) -> None:
    rc, out, err = _main(capsys, *argv)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"upsample3d-grad {argv[0]}: error: "), err
    assert fragment in lines[0], lines[0]
    assert out == ""  # nothing ran


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    shallow_deep = tmp_path / "deep.json"  # parses, but the validator would recurse as deep
    shallow_deep.write_text('{"schema_version": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}")
    nan = _report("n")
    nan["cases"][0]["max_abs_err"] = float("nan")
    nan_path = tmp_path / "nan.json"
    nan_path.write_text(json.dumps(nan))  # json.dumps writes NaN
    big = tmp_path / "inf.json"
    big.write_text(json.dumps(_report("i")).replace('"time_ms": 1.0', '"time_ms": 1e999', 1))
    return {"binary": (binary, "not UTF-8"), "nested": (nested, "nested too deeply"),
            "deep": (shallow_deep, "not a"), "nan": (nan_path, "NaN is not JSON"),
            "inf": (big, "out of range")}


@pytest.mark.parametrize("which", ["binary", "nested", "deep", "nan", "inf"])
def test_compare_refuses_a_bad_report_in_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  which: str) -> None:
    good = _write(tmp_path / "good.json", _report("a"))
    bad, fragment = _bad_files(tmp_path)[which]
    rc, out, err = _main(capsys, "compare", str(good), str(bad), "--json", "-")
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"upsample3d-grad compare: error: {bad}: "), err
    assert fragment in lines[0] and "Traceback" not in err, lines[0]


def test_compare_json_path_as_the_other_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.json", _report("a"))
    b = _write(tmp_path / "b.json", _report("b"))
    target = tmp_path / "cmp.json"
    rc, out, err = _main(capsys, "compare", str(a), str(b), "--json", str(target))
    assert rc == 0, err
    assert json.loads(target.read_text())["tool"] == "upsample3d-grad compare"
    assert "no status mismatch" in out and f"report: {target}" in out  # the text too, as smoke --json FILE
    rc, out, err = _main(capsys, "compare", str(a), str(b), "--json", "-")
    assert rc == 0 and json.loads(out)["ok"] is True and "no status mismatch" in err  # text to stderr
    rc, out, err = _main(capsys, "compare", str(a), str(b), "--json", str(tmp_path / "no" / "x.json"))
    assert rc == 2 and err.startswith("upsample3d-grad compare: error: --json: the folder"), err


def test_compare_neutralises_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "\x1b[2J\x1b]0;pwned\x07host\r\nfake: ok\u202e"
    a = _write(tmp_path / "a.json", _report(evil, {"c1\x1b[31m": "pass"}))
    b = _write(tmp_path / "b.json", _report("b", {"c1\x1b[31m": "pass"}))
    for fmt in ([], ["--markdown"]):
        rc, out, err = _main(capsys, "compare", str(a), str(b), *fmt)
        assert rc == 0, err
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", out), repr(out)
        assert "\\x1b[2J" in out and "\\r\\nfake" in out and "\\u202e" in out  # shown, as escapes
    reports = [_write(tmp_path / f"m{k}.json", _report(evil if k == 3 else f"m{k}", {"c\x1b": "pass"}))
               for k in range(compare.TABLE_MAX_REPORTS + 1)]
    rc, out, err = _main(capsys, "compare", *map(str, reports))  # the fleet summary too
    assert rc == 0 and not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", out), repr(out)


def test_compare_marks_a_fallback_report_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.json", _report("a"))
    b = _write(tmp_path / "b.json", _report("b", backend="sim",
                                            fallback="CANN at /x/lib64 failed to load: libascendcl.so: broken; "
                                                     "using the simulator"))
    rc, out, err = _main(capsys, "compare", str(a), str(b), "--json", "-")
    doc = json.loads(out)
    assert rc == 1 and doc["ok"] is False
    assert [r["ok"] for r in doc["reports"]] == [True, False]
    assert "the simulator stood in" in doc["reports"][1]["problem"]
    rc, out, _ = _main(capsys, "compare", str(a), str(b))
    assert rc == 1 and re.search(r"^  b: .*NOT ok: the simulator stood in", out, re.M), out


def test_json_path_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in hostinfo.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    t = "2026-12-02T13:52:48Z"
    host = hostinfo.expand_template("{host}", t)
    assert host and "/" not in host
    assert hostinfo.expand_template("out/{host}-{time}.json", t) == f"out/{host}-20261202T135248Z.json"
    with pytest.raises(ValueError, match="none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK"):
        hostinfo.expand_template("r{rank}.json", t)
    for k, name in enumerate(reversed(hostinfo.RANK_VARIABLES)):  # the first in the list wins
        monkeypatch.setenv(name, str(k + 10))
        assert hostinfo.expand_template("r{rank}.json", t) == f"r{k + 10}.json"
    monkeypatch.setenv("SLURM_PROCID", "../7")
    assert hostinfo.expand_template("r{rank}.json", t) == "r.._7.json"  # no folder from a variable
    assert hostinfo.expand_template("{{x}}.json", t) == "{x}.json"
    for bad in ("{", "{host:>9x}", "{0}"):
        with pytest.raises(ValueError):
            hostinfo.expand_template(bad, t)


def test_json_template_in_a_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "5")
    for name in ("SLURM_PROCID",):
        monkeypatch.delenv(name, raising=False)
    a = _write(tmp_path / "a.json", _report("a"))
    rc, out, err = _main(capsys, "compare", str(a), str(a), "--json", str(tmp_path / "cmp-{rank}.json"))
    assert rc == 0, err
    assert (tmp_path / "cmp-5.json").is_file()
