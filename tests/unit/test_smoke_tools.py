"""The smoke matrix as data, its comparison rule, the SoC table and the report schema validator.

No library is loaded here: these tests cover the pieces of ``upsample3d_grad.tools.smoke`` and
``upsample3d_grad.tools._schema`` that do not touch a device.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import ml_dtypes
import numpy as np
import pytest

from acl_bindings.enums import as_dtype
from upsample3d_grad import checks, reference
from upsample3d_grad.tools import _schema, smoke

# --------------------------------------------------------------------------- the matrix

@pytest.mark.parametrize("quick", [False, True])
def test_matrix_crosses_every_axis(quick: bool) -> None:
    cases = smoke.build_matrix(quick)
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    assert {c.dtype for c in cases} == {"float32", "float16", "bfloat16"}
    assert {c.layout for c in cases} == {"NCDHW", "NDHWC"}
    assert {c.mode for c in cases} == {"sizes", "scales"}
    assert {"", "sliced", "permuted"} <= {c.strided for c in cases}
    assert {"integer", "non-integer", "downsampling", "empty"} <= {c.ratio for c in cases}


def test_full_matrix_is_the_cross_product() -> None:
    cases = smoke.build_matrix(False)
    geometries = {c.name.split("-fp")[0].split("-bf")[0] for c in cases if c.ratio != "empty"}
    compute = [c for c in cases if c.ratio != "empty" and not c.name.startswith("official-sample")]
    # every geometry x 3 dtypes x 2 layouts x (contiguous, strided)
    assert len(compute) == (len(geometries) - 1) * 3 * 2 * 2


@pytest.mark.parametrize("case", smoke.build_matrix(False), ids=lambda c: c.name)
def test_cases_are_valid_and_consistent(case: smoke.SmokeCase) -> None:
    g = smoke.make_grad_output(case)
    assert g.shape == case.grad_out_shape
    assert g.dtype == case.np_dtype
    assert g.flags.c_contiguous == (case.strided == "" or g.size == 0)
    spec = checks.TensorSpec(g.shape, checks.F32 if case.dtype == "float32" else
                             checks.F16 if case.dtype == "float16" else checks.BF16,
                             checks.NCDHW if case.layout == "NCDHW" else checks.NDHWC)
    gi = checks.TensorSpec(case.grad_in_shape, spec.dtype, spec.format)
    checks.check_params(spec, case.output_size, case.input_size, *case.scale_args, gi)  # strict: consistent sizes
    if case.scales:
        for k in range(3):
            assert case.output_size[k] == int(np.floor(case.input_size[2 + k] * case.scales[k]))


def test_inputs_are_deterministic() -> None:
    case = smoke.build_matrix(True)[3]
    assert np.array_equal(smoke.make_grad_output(case), smoke.make_grad_output(case))


def test_official_sample_case_gives_the_known_answer() -> None:
    case = smoke.build_matrix(True)[0]
    g = smoke.make_grad_output(case)
    ref = reference.upsample_nearest_exact3d_backward(g, case.output_size, case.input_size, *case.scale_args)
    assert ref.ravel().tolist() == smoke.SAMPLE_EXPECTED


def test_bad_cases_are_those_cann_checks() -> None:
    bad = smoke.bad_cases()
    assert bad and all(c.cann_checks for c in bad)
    assert len(bad) == sum(1 for c in checks.BAD_CASES if c.cann_checks)


def test_window_size_matches_the_reference_windows() -> None:
    case = next(c for c in smoke.build_matrix(False) if c.name.startswith("ratio-50"))
    # D: 1 -> 50 is one window of 50; H: 2 -> 3 has windows of 1 and 2; W: 1 -> 20 one of 20
    assert smoke.window_size(case) == 50 * 2 * 20


# --------------------------------------------------------------------------- the comparison rule

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_tolerance_accepts_one_rounding_and_rejects_more(dtype: str) -> None:
    dt = as_dtype(dtype)
    ref = np.array([1.0, -3.5, 1000.0, 0.0], dtype=np.float32).astype(dt)
    assert smoke.compare(ref, ref, dtype, 1)[2]
    if dtype == "float32":
        near = (ref.astype(np.float64) * (1 + 5e-6)).astype(dt)
        far = (ref.astype(np.float64) * (1 + 1e-3) + 1e-3).astype(dt)
    else:
        near = (ref.view(np.uint16) + np.uint16(1)).view(dt)  # one unit in the last place away from zero
        assert not np.array_equal(near.astype(np.float32), ref.astype(np.float32))
        step = smoke.EPS[dtype]
        far = (ref.astype(np.float32) * (1 + 4 * step) + 4 * step).astype(dt)
    assert smoke.compare(near, ref, dtype, 1)[2]
    max_abs, max_rel, ok = smoke.compare(far, ref, dtype, 1)
    assert not ok
    assert max_abs > 0 and max_rel > 0


def test_tolerance_treats_nan_mismatch_as_failure() -> None:
    ref = np.array([1.0, 2.0], np.float32)
    got = np.array([1.0, np.nan], np.float32)
    assert not smoke.compare(got, ref, "float32", 1)[2]
    assert smoke.compare(np.array([np.nan], np.float32), np.array([np.nan], np.float32), "float32", 1)[2]


def test_bfloat16_eps_is_one_rounding() -> None:
    assert float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) == smoke.EPS["bfloat16"]
    assert np.finfo(np.float16).eps == smoke.EPS["float16"]


# --------------------------------------------------------------------------- the SoC table (cann-abi.md §5, §11)

@pytest.mark.parametrize("soc, supported", [
    ("Ascend910B1", True), ("Ascend910B4", True), ("Ascend910B4-1", True), ("Ascend910B2C", True),
    ("Ascend910_9391", True), ("Ascend910_9382", True),
    ("Ascend910B", False),  # a bare Ascend910B is a legacy 910 (its ascend910/ kernels), not an Atlas A2
    ("Ascend910B9", None),
    ("Ascend950PR", True), ("Ascend950DT", True),
    ("Ascend310P3", False), ("Ascend310B1", False), ("Ascend310", None),  # (the 310P has the forward only)
    ("Ascend910", None),  # not in nnopbase's SoC table: no kernel directory is searched
    ("Ascend910A", False), ("Ascend910ProA", False), ("Ascend910PremiumA", False), ("Kirin9030", False),
    ("SomethingElse", None),
])
def test_soc_support(soc: str, supported: bool | None) -> None:
    got, note = smoke.soc_support(soc)
    assert got is supported
    assert note and (supported is not False or "561000" in note), note
    # the simulator decides every name: a name CANN's table lacks has no kernel there
    sim_got, sim_note = smoke.soc_support(soc, True)
    assert sim_got is bool(supported) and "simulated" in sim_note, (soc, sim_got, sim_note)


def test_simulator_is_supported_simulated() -> None:
    """The simulator's own SoC name is an Atlas A2 there; on real CANN it is no SoC name at all."""
    assert smoke.soc_support("CANN-Simulator", True) == (
        True, "supported (simulated): the CPU simulator follows the Atlas A2/A3 kernel law")
    assert smoke.soc_support("CANN-Simulator")[0] is None
    got, note = smoke.soc_support("Ascend310P3", True)  # another name: decided as CANN decides it
    assert got is False and "simulated" in note and "Atlas 310P" in note and "561000" in note, note


# --------------------------------------------------------------------------- the schema and its validator

def _valid_report() -> dict:
    env = {"backend": "sim", "backend_label": "CPU simulator", "requested": "sim", "simulator_version": "x",
           "libraries": [{"role": "runtime", "name": "libascendcl.so", "path": "/x", "found_via": "test"}],
           "operator_symbol": "op", "operator_found": True, "operator_library": "/y", "cann_version": None,
           "acl_version": "1.17.0", "soc_name": "CANN-Simulator", "soc_supported": True, "soc_note": "",
           "device_count": 2, "determinism": smoke.DETERMINISM_SIM, "reference": "r", "package_version": "0.1.0",
           "python": "3.11", "numpy": "2", "platform": "linux", "error": None, "hostname": "node1",
           "driver_version": "unknown", "driver_version_source": "not read: /x/driver/version.info",
           "cann_version_source": "unknown", "fallback": None}
    report = smoke.new_report(env, True, ["upsample3d-grad", "smoke"])
    case = smoke._base_entry(0, "compute", "c1")
    case.update(status="pass", workspace_size=0, time_ms=0.5, max_abs_err=0.0, max_rel_err=0.0, got_code=0)
    report["cases"] = [case]
    report["devices"] = [smoke.device_report(0, [case], (1, 2), True)]
    report["summary"] = smoke.summarize([case])
    return report


def test_schema_file_is_json_and_accepts_a_report() -> None:
    schema = _schema.load_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    report = _valid_report()
    assert _schema.errors(report, schema) == []
    _schema.validate(json.loads(json.dumps(report)))


@pytest.mark.parametrize("mutate, fragment", [
    (lambda r: r.pop("environment"), "missing required property 'environment'"),
    (lambda r: r["cases"][0].update(status="maybe"), "is not one of"),
    (lambda r: r["cases"][0].update(time_ms="fast"), "expected number or null"),
    (lambda r: r["cases"][0].update(workspace_size=-1), "less than the minimum"),
    (lambda r: r["cases"][0].update(surprise=1), "unexpected property 'surprise'"),
    (lambda r: r["devices"][0].update(id=True), "expected integer"),
    (lambda r: r["environment"].update(backend="gpu"), "is not one of"),
    (lambda r: r["tolerances"].update(float32=1), "expected string"),
    (lambda r: r["cases"][0]["shape"].append(2.5), "expected integer"),
    (lambda r: r.update(cases={}), "expected array"),
])
def test_validator_rejects(mutate, fragment: str) -> None:
    report = _valid_report()
    mutate(report)
    found = _schema.errors(report, _schema.load_schema())
    assert any(fragment in e for e in found), found
    with pytest.raises(ValueError):
        _schema.validate(report)


def test_validator_refuses_unsupported_keywords() -> None:
    with pytest.raises(_schema.SchemaError):
        _schema.errors({}, {"type": "object", "pattern": "x"})
    with pytest.raises(_schema.SchemaError):
        _schema.errors({}, {"$ref": "http://elsewhere/x"})


def test_validator_agrees_with_jsonschema() -> None:
    schema = _schema.load_schema()
    good = _valid_report()
    jsonschema.validate(good, schema)
    bad = copy.deepcopy(good)
    bad["cases"][0]["status"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_soc_facts_have_one_definition_and_its_values() -> None:
    """socs.json is the one definition (the simulator's C is compiled from the header build.py writes from it);
    its values against the sources (cann-abi.md §11)."""
    from acl_bindings import socs
    from acl_bindings.sim import build

    assert socs.FIXED_WORKSPACE == 16 << 20  # OCV upsample_nearest3d_grad_tiling.cpp GetWorkSpace
    assert socs.names_of("ascend910") == ("Ascend910A", "Ascend910B", "Ascend910ProA", "Ascend910PremiumA",
                                          "Ascend910ProB")  # OPB op_kernel_lib.cpp socOpMap
    assert socs.kernel_dir("Ascend950PR_9579") == "ascend950" and socs.kernel_dir("Ascend910") is None
    header = build.socs_header()
    assert "#define CANNSIM_FIXED_WORKSPACE_BYTES ((uint64_t)16 << 20)" in header
    assert '{"Ascend910ProA", "ascend910"}' in header and '#define CANNSIM_SIM_SOC_NAME "CANN-Simulator"' in header
