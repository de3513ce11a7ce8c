"""Report plumbing without a library: the driver version file, report files, result digests, compare."""

from __future__ import annotations

import copy
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from acl_bindings.enums import as_dtype
from upsample3d_grad.tools import _jsonout, compare, hostinfo, smoke

PKG = Path(smoke.__file__).resolve().parent


# --------------------------------------------------------------------------- the driver version

def test_driver_version_from_the_folder_the_install_record_names(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    (root / "driver").mkdir(parents=True)
    (root / "driver" / "version.info").write_text("Version=24.1.rc1\nascendhal_version=7.35.19\n")
    info = tmp_path / "ascend_install.info"
    info.write_text(f"Driver_Install_Type=run\nDriver_Install_Path_Param={root}\n")
    got = hostinfo.driver_version(str(info), default_root=str(tmp_path / "elsewhere"))
    assert got == {"version": "24.1.rc1", "source": str(root / "driver" / "version.info")}


def test_driver_version_falls_back_to_the_default_folder(tmp_path: Path) -> None:
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "version.info").write_text("Version=23.0.3\n")
    got = hostinfo.driver_version(str(tmp_path / "no-install-record"), default_root=str(tmp_path))
    assert got["version"] == "23.0.3"


def test_driver_version_unknown_says_why(tmp_path: Path) -> None:
    got = hostinfo.driver_version(str(tmp_path / "none"), default_root=str(tmp_path))
    assert got["version"] == "unknown" and "version.info" in got["source"] and "No such file" in got["source"]
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "version.info").write_text("ascendhal_version=7\n")
    got = hostinfo.driver_version(str(tmp_path / "none"), default_root=str(tmp_path))
    assert got == {"version": "unknown", "source": f"not read: {tmp_path / 'driver' / 'version.info'} has no "
                                                   "Version= line"}


def test_toolkit_version_from_the_install_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x86_64-linux").mkdir()
    record = tmp_path / "x86_64-linux" / "ascend_toolkit_install.info"
    record.write_text("package_name=Ascend-cann-toolkit\nversion=8.5.0\narch=x86_64\n")
    assert hostinfo.toolkit_version([str(tmp_path)]) == {"version": "8.5.0", "source": str(record)}
    assert hostinfo.toolkit_version([str(tmp_path / "none")]) is None
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    env = smoke.unavailable_environment("no library", "cann")
    assert env["cann_version"] == "8.5.0" and env["cann_version_source"] == str(record)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "none"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    env = smoke.unavailable_environment("no library", "cann")
    assert env["cann_version"] is None and "unknown" in env["cann_version_source"]


def test_utc_time_is_iso_8601() -> None:
    import datetime as dt

    parsed = dt.datetime.strptime(hostinfo.utc_now(), "%Y-%m-%dT%H:%M:%SZ")
    assert abs((dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - parsed).total_seconds()) < 60


def test_unavailable_environment_matches_both_schemas() -> None:
    env = smoke.unavailable_environment("no CANN at /x", "auto")
    report = smoke.new_report(env, True, ["upsample3d-grad", "smoke", "--json", "a b.json"])
    jsonschema.validate(report, json.loads((PKG / "smoke_schema.json").read_text()))
    assert report["command_line"] == "upsample3d-grad smoke --json 'a b.json'"
    doctor = json.loads((PKG / "doctor_schema.json").read_text())
    assert doctor["$defs"]["environment"] == json.loads((PKG / "smoke_schema.json").read_text())["$defs"][
        "environment"]  # one environment entry for both reports


# --------------------------------------------------------------------------- writing a report

def test_write_json_replaces_a_regular_file_atomically_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    _jsonout.write_json(str(path), {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_write_json_writes_into_a_link_and_a_fifo(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _jsonout.write_json(str(link), [1])
    assert link.is_symlink() and json.loads(target.read_text()) == [1]

    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    _jsonout.write_json(str(fifo), {"b": 2})
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and json.loads(got[0]) == {"b": 2}


def test_write_json_refuses_nan_and_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")
    with pytest.raises(ValueError):
        _jsonout.write_json(str(path), {"x": float("nan")})
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_check_target(tmp_path: Path) -> None:
    assert _jsonout.check_target("-") is None
    assert _jsonout.check_target(str(tmp_path / "new.json")) is None
    assert "empty" in (_jsonout.check_target("") or "")
    assert "does not exist" in (_jsonout.check_target(str(tmp_path / "no" / "r.json")) or "")
    assert "is a folder" in (_jsonout.check_target(str(tmp_path)) or "")
    assert _jsonout.check_target(os.devnull) is None


# --------------------------------------------------------------------------- digests and compare

def test_result_digest_is_of_the_bytes_in_c_order() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert smoke.result_digest(a) == smoke.result_digest(np.ascontiguousarray(a.T).T)
    b = a.copy()
    b.view(np.uint32)[0, 0] ^= 1  # one bit
    assert smoke.result_digest(a) != smoke.result_digest(b)
    assert smoke.result_digest(a).startswith("sha256:") and len(smoke.result_digest(a)) == 7 + 64


def _report(host: str, cases: list[tuple[str, str, str | None]], device: int = 0) -> dict[str, Any]:
    env = smoke.unavailable_environment("", "auto")
    env.update(hostname=host, backend="cann", cann_version="8.5.0")
    report = smoke.new_report(env, True, ["upsample3d-grad", "smoke"])
    for name, status, digest in cases:
        entry = smoke._base_entry(device, "compute", name)
        entry.update(status=status, digest=digest, max_abs_err=0.0, workspace_size=512, time_ms=1.0)
        report["cases"].append(entry)
    report["summary"] = smoke.summarize(report["cases"])
    return report


def test_compare_lines_up_cases_and_finds_mismatches() -> None:
    a = _report("node1", [("c1", "pass", "sha256:1"), ("c2", "pass", "sha256:2"), ("c3", "pass", "sha256:3")])
    b = _report("node2", [("c1", "pass", "sha256:1"), ("c2", "pass", "sha256:X"), ("c3", "error", None)], device=3)
    b["environment"]["cann_version"] = "9.0.0"
    doc = compare.compare_reports([a, b], ["a.json", "b.json"])
    assert doc["environment_differences"] == {"hostname": ["node1", "node2"], "cann_version": ["8.5.0", "9.0.0"]}
    by = {c["name"]: c for c in doc["cases"]}
    assert by["c1"]["bitwise"] == "identical" and by["c2"]["bitwise"] == "different"
    assert by["c3"]["status_mismatch"] and not by["c2"]["status_mismatch"]
    assert [r["device"] for r in by["c1"]["results"]] == [0, 3]  # the first device of each report
    assert doc["ok"] is False and doc["summary"]["status_mismatches"] == ["c3"]
    text = compare.render_text(doc)
    assert "c3 <- MISMATCH" in text and "cann_version" in text
    md = compare.render_markdown(doc)
    assert "| cann_version | `8.5.0` | `9.0.0` |" in md


def test_compare_a_case_missing_from_one_report_is_not_a_mismatch() -> None:
    a = _report("n1", [("c1", "pass", "sha256:1"), ("c2", "pass", "sha256:2")])
    b = _report("n2", [("c1", "pass", "sha256:1")])
    doc = compare.compare_reports([a, copy.deepcopy(b)], ["a", "b"])
    c2 = next(c for c in doc["cases"] if c["name"] == "c2")
    assert c2["results"][1] is None and c2["bitwise"] == "n/a" and not c2["status_mismatch"] and doc["ok"]
    assert "absent" in compare.render_text(doc)


def test_compare_says_why_each_case_is_not_comparable() -> None:
    cases = [("c1", "pass", "sha256:1"), ("c2", "pass", "sha256:2"), ("c3", "pass", None), ("c4", "pass", None),
             ("c5", "pass", None)]
    a, b = _report("n1", cases), _report("n2", cases[:1] + [("c2", "error", None)] + cases[2:])
    for r in (a, b):
        r["cases"][2]["kind"] = "bad_input"
        r["cases"][3]["kind"] = r["cases"][4]["kind"] = "adjoint"
    b["cases"].pop()  # c5 is absent from b
    doc = compare.compare_reports([a, b], ["a", "b"])
    assert doc["summary"]["bitwise_not_comparable"] == 4
    assert doc["summary"]["not_comparable_why"] == {"bad-input": 1, "adjoint": 1, "absent": 1, "errors or skips": 1}
    assert ("5 cases; results bitwise identical in 1, different in 0, not comparable in 4 (no result to compare "
            "bitwise: 1 bad-input, 1 adjoint, 1 absent, 1 errors or skips)") in compare.render_text(doc)


def test_compare_labels_reports_of_one_host_by_file() -> None:
    a = _report("same", [("c1", "pass", None)])
    doc = compare.compare_reports([a, copy.deepcopy(a)], ["x/run1.json", "y/run2.json"])
    assert [r["label"] for r in doc["reports"]] == ["run1", "run2"]
    with pytest.raises(ValueError, match="at least two"):
        compare.compare_reports([a], ["a"])


# --------------------------------------------------------------------------- the C-call log and bench data

def test_logged_arguments_are_values() -> None:
    import ctypes

    from acl_bindings._lib import show_arg
    from acl_bindings._types import aclTensor, aclTensor_p
    from acl_bindings.enums import MemcpyKind

    assert show_arg((ctypes.c_int64 * 3)(1, 2, 3)) == "[1, 2, 3]"
    assert show_arg((ctypes.c_int64 * 9)(*range(9))) == "[0, 1, 2, 3, 4, 5, ... (9 items)]"
    assert show_arg(ctypes.byref(ctypes.c_uint64(512))) == "&512"
    assert show_arg(ctypes.byref(ctypes.c_void_p(0x1234))) == "&0x1234"
    # an out-parameter's cell passed itself (ctypes' automatic byref for a pointer argtype)
    assert show_arg(ctypes.c_uint64(512), ctypes.POINTER(ctypes.c_uint64)) == "&512"
    assert show_arg(ctypes.c_void_p(0x1234), ctypes.POINTER(ctypes.c_void_p)) == "&0x1234"
    assert show_arg(ctypes.c_void_p(0x1234), ctypes.c_void_p) == "0x1234"
    assert show_arg(ctypes.cast(0xABC0, aclTensor_p)) == "aclTensor@0xabc0"
    assert show_arg(aclTensor_p()) == "aclTensor@NULL"
    assert show_arg(0x55F0, ctypes.c_void_p) == "0x55f0" and show_arg(0, ctypes.c_void_p) == "NULL"
    assert show_arg(5, ctypes.c_uint64) == "5"
    assert show_arg(MemcpyKind.HOST_TO_DEVICE) == "HOST_TO_DEVICE(1)"
    assert show_arg(None) == "NULL" and show_arg(b"cann") == "'cann'" and show_arg(2.5) == "2.5"
    assert aclTensor.__name__ == "aclTensor"


@pytest.mark.parametrize("dtype", [as_dtype(name) for name in smoke.DTYPES])
def test_bench_data_is_built_in_the_target_dtype(dtype: np.dtype) -> None:
    from upsample3d_grad.tools import cli_bench

    data = cli_bench._random_data((3, (1 << 20) + 5), dtype)  # more than one chunk
    assert data.dtype == dtype and data.shape == (3, (1 << 20) + 5)
    assert np.isfinite(data.astype(np.float32)).all() and float(data.astype(np.float32).std()) > 0.5
    assert np.array_equal(data, cli_bench._random_data((3, (1 << 20) + 5), dtype))  # seeded


def test_compare_labels_reports_collected_per_host_folder() -> None:
    a = _report("same", [("c1", "pass", None)])
    doc = compare.compare_reports([a, copy.deepcopy(a), copy.deepcopy(a)],
                                  ["c/h1/smoke.json", "c/h2/smoke.json", "c/h2/other.json"])
    assert [r["label"] for r in doc["reports"]] == ["h1/smoke", "h2/smoke", "other"]  # as pslurp lays them out


def test_compare_leaves_a_report_without_cases_out_of_the_case_comparison() -> None:
    a = _report("n1", [("c1", "pass", "sha256:1")])
    b = _report("n2", [("c1", "pass", "sha256:1")])
    refused = _report("n3", [])  # no library, or a refused fallback: no case ran
    doc = compare.compare_reports([a, b, refused], ["a", "b", "c"])
    c1 = doc["cases"][0]
    assert c1["bitwise"] == "identical" and c1["absent"] == 0
    assert doc["ok"] is False and [r["ok"] for r in doc["reports"]] == [True, True, False]
