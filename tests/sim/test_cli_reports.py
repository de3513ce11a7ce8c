"""The CLI as a fleet uses it, in subprocesses on the simulator: reports and their schemas, ``compare``,
``--json`` paths, ``bench`` argument checks and progress, ``-v``, and Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.sim.test_examples_cli import REPO, assert_no_leaks, first_line, run
from upsample3d_grad.tools import _schema, cli

CLI = ["-m", "upsample3d_grad"]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def schema(name: str) -> dict[str, Any]:
    return json.loads((REPO / "upsample3d_grad" / "tools" / name).read_text())


def no_library_env(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "nothing"
    empty.mkdir(exist_ok=True)
    return {"ACL_BINDINGS_BACKEND": "cann", "ASCEND_HOME_PATH": str(empty), "ASCEND_TOOLKIT_HOME": "",
            "ACL_BINDINGS_LIB_DIR": "", "LD_LIBRARY_PATH": ""}


def assert_usage_error(proc: subprocess.CompletedProcess[str], command: str, fragment: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one line, no traceback
    assert lines[0].startswith(f"upsample3d-grad {command}: error: ") and fragment in lines[0], lines[0]
    assert f"'upsample3d-grad {command} --help'" in lines[0]  # the subcommand's own usage


# --------------------------------------------------------------------------- reports a fleet can use

def test_doctor_json_carries_the_fleet_facts(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    proc = run([*CLI, "doctor", "--json", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("doctor_schema.json"))
    _schema.validate(data, _schema.load_schema(_schema.DOCTOR_SCHEMA_PATH))
    env = data["environment"]
    assert env["hostname"] and ISO_UTC.match(data["created_utc"])
    assert env["package_version"] and env["python"] == sys.version.split()[0] and env["numpy"]
    assert env["cann_version"] == "8.5.0-cannsim" and env["soc_name"] == "CANN-Simulator"
    assert env["driver_version"] and env["driver_version_source"]
    if not Path("/usr/local/Ascend/driver/version.info").exists():
        assert env["driver_version"] == "unknown" and "version.info" in env["driver_version_source"]
    assert [d["id"] for d in data["devices"]] == [0, 1]
    assert data["argv"][1:] == ["doctor", "--json", str(out)] and "doctor --json" in data["command_line"]
    assert data["interrupted"] is False and data["healthy"] is True


def test_smoke_json_to_stdout_validates(tmp_path: Path) -> None:
    proc = run([*CLI, "smoke", "--quick", "--json", "-"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # standard output is the report alone
    assert "summary:" in proc.stderr and first_line(proc) != ""  # the human-readable lines went to stderr
    jsonschema.validate(data, schema("smoke_schema.json"))
    env = data["environment"]
    assert env["hostname"] and env["driver_version"] and ISO_UTC.match(data["created_utc"])
    compute = [c for c in data["cases"] if c["kind"] == "compute" and c["status"] == "pass"]
    assert compute and all(re.fullmatch(r"sha256:[0-9a-f]{64}", c["digest"]) for c in compute)
    assert all(c["digest"] is None for c in data["cases"] if c["kind"] == "bad_input")


@pytest.mark.parametrize("command", ["doctor", "smoke"])
def test_a_machine_without_libraries_still_gets_a_report(tmp_path: Path, command: str) -> None:
    if Path("/usr/local/Ascend").exists():
        pytest.skip("a CANN install exists on this machine")
    out = tmp_path / "r.json"
    proc = run([*CLI, command, "--json", str(out)], tmp_path, env=no_library_env(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema(f"{command}_schema.json"))
    env = data["environment"]
    assert env["backend"] is None and env["hostname"] and env["requested"] == "cann"
    assert str(tmp_path / "nothing") in env["error"]  # says why: where it looked


# --------------------------------------------------------------------------- compare

def _smoke(tmp_path: Path, name: str, *extra: str, env: dict[str, str] | None = None) -> Path:
    out = tmp_path / f"{name}.json"
    proc = run([*CLI, "smoke", "--quick", "--json", str(out), *extra], tmp_path, env=env)
    assert out.is_file(), proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def report_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``smoke --quick --json`` report, shared by the compare tests (one subprocess)."""
    return _smoke(tmp_path_factory.mktemp("report_a"), "plans")


def compare_cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``upsample3d-grad compare ARGS`` in this process (it loads no library)."""
    capsys.readouterr()
    rc = cli.main(["compare", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["compare", *args], rc, out, err)


def test_compare_two_machines_and_a_failing_one(tmp_path: Path, report_a: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    a = report_a
    b = _smoke(tmp_path, "noplans", "--no-plans", "--devices", "1")
    proc = compare_cli(capsys, str(a), str(b))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^  plans\s+.*=True\s+.*=False$", proc.stdout, re.M)  # the run's difference is shown
    assert re.search(r"^ut-scales-fp32-NCDHW-contig\s+PASS\s+0\s.*PASS\s+1\s.*identical$", proc.stdout, re.M)
    assert "no status mismatch" in proc.stdout

    c = _smoke(tmp_path, "faulty", env={"CANN_SIM_FAULT": "aclnnUpsampleNearestExact3dBackward:3:507015"})
    proc = compare_cli(capsys, str(a), str(b), str(c), "--json", "-")
    assert proc.returncode == 1  # a case passes on one machine and fails on another
    doc = json.loads(proc.stdout)
    bad = [case for case in doc["cases"] if case["status_mismatch"]]
    assert len(bad) == 1 and [r["status"] for r in bad[0]["results"]] == ["pass", "pass", "error"]
    assert doc["summary"]["status_mismatches"] == [bad[0]["name"]] and doc["ok"] is False
    assert [r["ok"] for r in doc["reports"]] == [True, True, False]

    proc = compare_cli(capsys, str(a), str(c), "--markdown")
    assert proc.returncode == 1
    assert re.search(rf"^\| {re.escape(bad[0]['name'])} <- MISMATCH \| PASS \|", proc.stdout, re.M)


def test_compare_sees_a_result_that_differs_in_one_bit(tmp_path: Path, report_a: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    a = report_a
    data = json.loads(a.read_text())
    case = next(c for c in data["cases"] if c["digest"])
    case["digest"] = "sha256:" + "0" * 64
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    proc = compare_cli(capsys, str(a), str(b), "--json", "-")
    assert proc.returncode == 0  # both pass: not a status mismatch
    doc = json.loads(proc.stdout)
    assert [c["name"] for c in doc["cases"] if c["bitwise"] == "different"] == [case["name"]]


def test_compare_refuses_what_is_not_a_report(tmp_path: Path, report_a: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a = report_a
    junk = tmp_path / "junk.json"
    junk.write_text('{"tool": "something else"}')
    assert_usage_error(compare_cli(capsys, str(a), str(junk)), "compare", "not a smoke report")
    assert_usage_error(compare_cli(capsys, str(a), str(tmp_path / "missing.json")), "compare", "missing.json")
    assert_usage_error(compare_cli(capsys, str(a)), "compare", "at least two reports")


# --------------------------------------------------------------------------- --json as on any CLI

@pytest.mark.parametrize("command", ["doctor", "smoke", "bench"])
def test_json_empty_path_is_a_usage_error(tmp_path: Path, command: str) -> None:
    assert_usage_error(run([*CLI, command, "--json", ""], tmp_path), command, "the path is empty")


@pytest.mark.parametrize("command", ["doctor", "smoke", "bench"])
def test_json_folder_is_checked_before_the_run(tmp_path: Path, command: str) -> None:
    target = tmp_path / "no-such-folder" / "r.json"
    proc = run([*CLI, command, "--json", str(target)], tmp_path)
    assert_usage_error(proc, command, "does not exist")
    assert proc.stdout == ""  # nothing ran: not even the backend line
    assert_usage_error(run([*CLI, command, "--json", str(tmp_path)], tmp_path), command, "is a folder")


def test_json_never_replaces_a_non_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    proc = run([*CLI, "doctor", "--no-run", "--json", str(fifo)], tmp_path)
    text, _ = reader.communicate(timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, written into
    assert json.loads(text)["tool"] == "upsample3d-grad doctor"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.fifo", "sim_report.json"]  # no temporary file


def test_json_ignores_a_file_planted_at_the_old_temporary_name(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    # the old code wrote to PATH.tmp.<pid>: a link planted under every likely pid would have been followed
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    next_pid = child.pid + 1
    child.kill()
    child.wait()
    for pid in range(next_pid, next_pid + 50):
        (tmp_path / f"r.json.tmp.{pid}").symlink_to(victim)
    proc = run([*CLI, "doctor", "--no-run", "--json", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert victim.read_text() == "keep me"
    assert json.loads(out.read_text())["tool"] == "upsample3d-grad doctor"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask  # as open() would have made it


def test_sim_report_never_replaces_a_non_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "sim.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    proc = run([*CLI, "run"], tmp_path, env={"CANN_SIM_REPORT": str(fifo)})
    text, _ = reader.communicate(timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(text)["aclInit"] >= 1
    assert [p.name for p in tmp_path.iterdir()] == ["sim.fifo"]  # no temporary file left beside it


# --------------------------------------------------------------------------- bench checks its arguments first

@pytest.mark.parametrize("args, fragment", [
    (["--scale", "nan"], "--scale: expected a finite number in (0, 50], got nan"),
    (["--scale", "-2"], "got -2.0"),
    (["--scale", "100"], "got 100.0"),
    (["--scale", "inf"], "got inf"),
    (["--scale", "two"], "expected a number, got 'two'"),
    (["--input-size", "64,64,64,64,64"], "60 GiB (documented limit)"),
    (["--input-size", "1,1,2000000,1,1", "--scale", "1"], "outside the operator's limits"),
    (["--output-size", "200,2,2", "--input-size", "1,1,2,2,2"], "outside the operator's limits"),
    (["--input-size", "16,64,64,64,64", "--scale", "3"], "of device memory"),
    (["--repeat", "0"], "--repeat: expected an integer >= 1, got 0"),
    (["--warmup", "-1"], "--warmup: expected an integer >= 0, got -1"),
])
def test_bench_usage_errors(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = run([*CLI, "bench", *args], tmp_path, timeout=60)
    assert_usage_error(proc, "bench", fragment)


def test_bench_builds_float16_data_and_shows_progress(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    proc = run([*CLI, "bench", "--dtype", "float16", "--repeat", "5", "--warmup", "0", "--input-size", "1,1,2,2,2",
                "--json", str(out)], tmp_path, env={"CANN_SIM_DEFER": "1", "CANN_SIM_DELAY_MS": "400"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^  \.\.\. bench runs: \d+/\d+ \(\d+ s\)$", proc.stdout, re.M)  # a run longer than 2 s
    data = json.loads(out.read_text())
    assert data["bytes_read"] == 1 * 1 * 4 * 4 * 4 * 2 and len(data["device_ms"]) == 5


# --------------------------------------------------------------------------- -v on every command

@pytest.mark.parametrize("args", [["doctor", "--no-run"], ["run"], ["smoke", "--quick"],
                                  ["bench", "--repeat", "1", "--warmup", "0", "--input-size", "1,1,2,2,2"]])
def test_verbose_logs_the_c_calls_with_values(tmp_path: Path, args: list[str]) -> None:
    proc = run([*CLI, args[0], "-v", *args[1:]], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "acl_bindings: aclInit(NULL) -> 0" in proc.stderr
    assert "object at 0x" not in proc.stderr and "<cparam" not in proc.stderr
    if args[0] != "doctor":
        assert re.search(r"aclCreateTensor\(\[\d+(, \d+)*\], 5, ", proc.stderr)
        assert re.search(r"-> aclTensor@0x[0-9a-f]+$", proc.stderr, re.M)
    assert_no_leaks(tmp_path)


@pytest.mark.parametrize("option", [["-v"], ["--backend", "sim"]])
def test_compare_offers_no_library_options(tmp_path: Path, report_a: Path, option: list[str]) -> None:
    # compare reads report files and loads no library: -v and --backend would do nothing, so it refuses them
    a = report_a
    proc = run([*CLI, "compare", *option, str(a), str(a)], tmp_path)
    assert proc.returncode == 2 and f"unrecognized arguments: {option[0]}" in proc.stderr, proc.stderr
    helped = run([*CLI, "compare", "--help"], tmp_path)
    assert helped.returncode == 0 and "--verbose" not in helped.stdout and "--backend" not in helped.stdout
    proc = run([*CLI, "compare", str(a), str(a)], tmp_path)
    assert proc.returncode == 0 and "no status mismatch" in proc.stdout


# --------------------------------------------------------------------------- Ctrl-C

def _interrupt(args: list[str], tmp_path: Path, wait_for: str | tuple[str, ...],
               env: dict[str, str] | None = None, delay_s: float = 0.0) -> tuple[int, str, str]:
    """Run the CLI and send SIGINT once every pattern of ``wait_for`` has matched a line of its stdout."""
    waiting = {wait_for} if isinstance(wait_for, str) else set(wait_for)
    full = os.environ.copy()
    for var in ("CANN_SIM_FAULT", "ACL_BINDINGS_LOG_CALLS"):
        full.pop(var, None)
    full.update({"ACL_BINDINGS_BACKEND": "sim", "CANN_SIM_DEVICE_COUNT": "2", "CANN_SIM_DEFER": "1",
                 "CANN_SIM_DELAY_MS": "150", "PYTHONUNBUFFERED": "1",
                 "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])})
    full.update(env or {})
    proc = subprocess.Popen([sys.executable, *CLI, *args], cwd=REPO, env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        seen.append(line)
        waiting = {pattern for pattern in waiting if not re.search(pattern, line)}
        if not waiting or time.monotonic() > deadline:
            break
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, "".join(seen) + out, err


def _assert_interrupted(rc: int, err: str, command: str) -> None:
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert [line for line in err.splitlines() if "interrupted" in line] == [f"upsample3d-grad {command}: interrupted"]


#: Modules the command imports, in order: a Ctrl-C is sent as soon as each has been imported.
IMPORT_POINTS = ("upsample3d_grad_cli", "numpy", "acl_bindings.enums", "acl_bindings", "upsample3d_grad.session",
                 "upsample3d_grad.tools.cli")


def _entry_point(*args: str) -> subprocess.Popen[str]:
    """The console script's entry point (upsample3d_grad_cli:main) as pip's wrapper calls it, import times on stderr."""
    env = os.environ.copy()
    env.update({"ACL_BINDINGS_BACKEND": "sim", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])})
    code = "import sys\nfrom upsample3d_grad_cli import main\nsys.exit(main())"
    return subprocess.Popen([sys.executable, "-X", "importtime", "-c", code, *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("command", [["doctor", "--no-run"], ["smoke", "--devices", "all"]])
@pytest.mark.parametrize("after", IMPORT_POINTS)
def test_ctrl_c_during_the_imports(tmp_path: Path, after: str, command: list[str]) -> None:
    proc = _entry_point(*command, "--json", str(tmp_path / "{host}-r.json"))
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("import time:") and line.split("|")[-1].strip() == after:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert seen[-1].split("|")[-1].strip() == after, "the import point was never reached"
    lines = [x for x in "".join([*seen, err]).splitlines() if not x.startswith("import time:")]
    _assert_interrupted(proc.returncode, "\n".join(lines), command[0])
    assert "verdict" not in out and "summary" not in out  # it stopped
    reports = list(tmp_path.glob("*-r.json"))  # at the path given, {host} replaced
    assert len(reports) == 1, "no report was written"
    data = json.loads(reports[0].read_text())
    jsonschema.validate(data, schema(f"{command[0]}_schema.json"))
    assert data["interrupted"] is True and data["environment"]["error"] == "interrupted before the facts were read"
    assert data.get("healthy", False) is False and data.get("summary", {"ok": False})["ok"] is False


def test_ctrl_c_during_the_imports_of_bench_writes_its_first_report(tmp_path: Path) -> None:
    proc = _entry_point("bench", "--json", str(tmp_path / "{host}-b.json"))
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("import time:") and line.split("|")[-1].strip() == "upsample3d_grad.tools.cli":
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    _assert_interrupted(proc.returncode, "\n".join(x for x in err.splitlines() if not x.startswith("import time:")),
                        "bench")
    reports = list(tmp_path.glob("*-b.json"))
    assert len(reports) == 1, "no report was written"
    data = json.loads(reports[0].read_text())
    assert data["interrupted"] is True and data["device_ms"] == [] and data["dtype"] == "float32"


def test_ctrl_c_after_the_command_keeps_its_exit_status(tmp_path: Path) -> None:
    # a SIGINT once main() has returned (while the interpreter shuts down) is ignored, not a death by signal 2
    code = "import os, signal, sys\nfrom upsample3d_grad_cli import main\nrc = main()\nos.kill(os.getpid(), " \
           "signal.SIGINT)\nsys.exit(rc)"
    proc = run(["-c", code, "run"], tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK: matches")


@pytest.mark.parametrize("delay_s", [0.0, 0.3])
def test_ctrl_c_while_the_children_start(tmp_path: Path, delay_s: float) -> None:
    out = tmp_path / "partial.json"
    rc, stdout, err = _interrupt(["smoke", "--devices", "all", "--json", str(out)], tmp_path,
                                 r"one process each", env={"CANN_SIM_DEVICE_COUNT": "3"}, delay_s=delay_s)
    _assert_interrupted(rc, err, "smoke")
    assert "Traceback" not in stdout and "KeyboardInterrupt" not in stdout, stdout
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("smoke_schema.json"))
    assert data["interrupted"] is True and data["summary"]["ok"] is False


def test_ctrl_c_smoke_writes_the_partial_report(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    rc, stdout, err = _interrupt(["smoke", "--json", str(out)], tmp_path, r"^\[\s*3/")
    _assert_interrupted(rc, err, "smoke")
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("smoke_schema.json"))
    assert data["interrupted"] is True and data["summary"]["ok"] is False
    assert 3 <= len(data["cases"]) < data["summary"]["total"] + 1000 and data["cases"][0]["status"] == "pass"


def test_ctrl_c_smoke_all_devices_ends_the_children(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    rc, stdout, err = _interrupt(["smoke", "--devices", "all", "--json", str(out)], tmp_path,
                                 (r"^\[device 0\] \[\s*2/", r"^\[device 1\] \[\s*2/"))
    _assert_interrupted(rc, err, "smoke")
    pids = [int(p) for p in re.search(r"one process each \(pids ([\d, ]+)\)", stdout).group(1).split(", ")]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("smoke_schema.json"))
    assert data["interrupted"] is True and {c["device"] for c in data["cases"]} == {0, 1}


def test_ctrl_c_bench(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    rc, _, err = _interrupt(["bench", "--repeat", "500", "--warmup", "0", "--input-size", "1,1,2,2,2", "--json",
                             str(out)], tmp_path, r"bench: backend", env={"CANN_SIM_DELAY_MS": "50"})
    _assert_interrupted(rc, err, "bench")
    data = json.loads(out.read_text())
    assert data["interrupted"] is True and len(data["device_ms"]) < 500


@pytest.mark.parametrize("args", [["doctor"], ["run"]])
def test_ctrl_c_doctor_and_run(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "d.json"
    extra = ["--json", str(out)] if args == ["doctor"] else []
    rc, _, err = _interrupt([*args, *extra], tmp_path, r"backend sim", env={"CANN_SIM_DELAY_MS": "3000"})
    _assert_interrupted(rc, err, args[0])
    if extra:
        data = json.loads(out.read_text())
        jsonschema.validate(data, schema("doctor_schema.json"))
        assert data["interrupted"] is True and data["healthy"] is False


# --------------------------------------------------------------------------- one grammar on the simulator

@pytest.mark.parametrize("argv", [["run", "--device", "99"], ["doctor", "--device", "99"],
                                  ["bench", "--device", "99", "--input-size", "1,1,2,2,2"],
                                  ["smoke", "--devices", "99"], ["smoke", "--devices", "-1,0"]])
def test_a_missing_device_is_a_usage_error_everywhere(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"upsample3d-grad {argv[0]}: error: --device"), err
    assert "out of range" in lines[0] and "result[" not in out


@pytest.mark.parametrize("args", [["run"], ["bench", "--repeat", "1", "--warmup", "0", "--input-size", "1,1,2,2,2"]])
def test_a_failed_call_is_one_line_naming_the_subcommand(tmp_path: Path, args: list[str]) -> None:
    proc = run([*CLI, *args], tmp_path, env={"CANN_SIM_FAULT": "aclnnUpsampleNearestExact3dBackward:1:561103"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"upsample3d-grad {args[0]}: error: FAILED: "), proc.stderr
    assert "561103" in lines[0]


def test_every_line_of_a_multi_line_error_names_the_subcommand(tmp_path: Path) -> None:
    if Path("/usr/local/Ascend").exists():
        pytest.skip("a CANN install exists on this machine")
    proc = run([*CLI, "run", "--backend", "cann"], tmp_path, env=no_library_env(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) > 3 and lines[0].startswith("upsample3d-grad run: error: "), proc.stderr  # tried, and the fix
    assert all(line.startswith("upsample3d-grad run: ") for line in lines), proc.stderr
    assert any("Tried:" in line for line in lines) and any("set_env.sh" in line for line in lines)
