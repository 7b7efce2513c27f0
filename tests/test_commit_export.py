"""Issue 52: a commit's results and verdicts go where teams already look. `GET /api/commits/{sha}/export`
(and `gemmwatch export`) writes them in gemmwatch's versioned schema, validated here against the
JSON Schema kept in docs/schemas/, and in the Bencher Metric Format, validated against the schema
and checked beside the example bencher.dev publishes (tests/fixtures/bencher/)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from core.exchange import bmf
from core.exchange.commit_export import SCHEMA, json_schema
from tests.conftest import ROOT, make_client
from tests.fake_results import H100, REGRESSION_AT, add_demo_history, add_job, demo_sha

SCHEMA_FILE = ROOT / "docs" / "schemas" / "commit-export-1.json"
BENCHER = Path(__file__).parent / "fixtures" / "bencher"


@pytest.fixture
def demo(cfg):
    add_demo_history(cfg)
    return make_client(cfg)


def exported(client, sha: str, **params) -> dict:
    resp = client.get(f"/api/commits/{sha}/export", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()


def validator(path: Path):
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_the_schema_file_is_the_exports_own_schema():
    """docs/schemas/commit-export-1.json cannot drift from the models that write the export."""
    assert json.loads(SCHEMA_FILE.read_text()) == json_schema()


def test_a_commits_export_fits_its_schema_and_says_what_its_page_says(demo):
    sha = demo_sha(REGRESSION_AT)
    got = exported(demo, sha)
    validator(SCHEMA_FILE).validate(got)
    assert got["schema"] == SCHEMA and got["version"] == 1 and got["commit"]["sha"] == sha
    page = demo.get(f"/commits/{sha}", params={"format": "json"}).json()["rows"]
    # One rule: the export's verdicts are the commit page's, row for row and in its order.
    assert [(r["variant"], r["gpu"], r["m"], r["verdict"], r["delta"]) for r in got["results"]] == \
        [(r["variant"], r["gpu"], r["m"], r["status"], r["delta"]) for r in page]
    first = got["results"][0]
    assert first["verdict"] == "regression" and first["variant"] == "warp_tile" and first["gpu"] == "H100"
    assert first["timing"]["median_ms"] > 0 and first["timing"]["mode"] == "cold" and first["status"] == "passed"


@pytest.mark.parametrize("spoil", [
    lambda e: e.pop("version"),
    lambda e: e.update(version=2),
    lambda e: e["results"][0].update(status="fine"),
    lambda e: e["results"][0]["timing"].pop("median_ms"),
    lambda e: e["results"][0].update(surprise=1),
    lambda e: e["commit"].update(sha=7),
])
def test_the_schema_refuses_an_export_that_is_not_version_1(demo, spoil):
    """The schema has teeth: each of these readers of version 1 would misread is refused."""
    got = exported(demo, demo_sha(REGRESSION_AT))
    spoilt = copy.deepcopy(got)
    spoil(spoilt)
    with pytest.raises(jsonschema.ValidationError):
        validator(SCHEMA_FILE).validate(spoilt)


def test_bencher_metric_format_fits_bencher_s_schema_as_its_own_example_does(demo):
    check = validator(BENCHER / "bmf.schema.json")
    check.validate(json.loads((BENCHER / "bmf.example.json").read_text()))  # the format's published example
    with pytest.raises(jsonschema.ValidationError):  # and the schema refuses a measure without its value
        check.validate({"x": {"latency": {"lower_value": 1.0}}})
    sha = demo_sha(REGRESSION_AT)
    got = exported(demo, sha, format="bmf")
    check.validate(got)
    assert all(len(name) <= bmf.NAME_MAX and set(measures) <= set(bmf.MEASURES) for name, measures in got.items())
    assert all(len(slug) <= 64 for measures in got.values() for slug in measures)
    full = exported(demo, sha)
    passed = [r for r in full["results"] if r["status"] == "passed"]
    assert len(got) == len(passed) and passed, "one benchmark a passed result, each its own series"
    r = passed[0]
    latency = got[f"{r['variant']} {r['m']}x{r['n']}x{r['k']} {r['form']} {r['compute_mode']} {r['gpu']} cold"]["latency"]
    assert latency["value"] == pytest.approx(r["timing"]["median_ms"] * 1e6)  # nanoseconds, Bencher's latency unit
    assert "lower_value" not in latency  # these results keep no quartiles: no bounds are made up


def test_latencys_bounds_are_the_samples_quartiles():
    from core.exchange.commit_export import CommitExport

    one = {"result_id": 1, "job_id": 1, "variant": "naive", "gpu": "H200", "gpu_name": "NVIDIA H200", "m": 8, "n": 8,
           "k": 8, "form": "rrr", "compute_mode": "fp32", "status": "passed", "gflops": 2.0, "pct_of_cublas": 50.0,
           "timing": {"median_ms": 0.5, "q1_ms": 0.25, "q3_ms": 0.75, "min_ms": 0.2, "max_ms": 0.9, "n_samples": 9,
                      "noise": 0.1, "mode": "hot"},
           "verdict": "ok", "delta": 0.0, "confirmed": None, "ratio": None, "ratio_low": None, "ratio_high": None,
           "reason": "", "resource_changes": []}
    export = CommitExport.model_validate({"schema": SCHEMA, "version": 1, "exported_at": "2026-11-29T00:00:00Z",
                                          "commit": {"sha": "ab" * 20, "repo": "", "branch": "main"}, "results": [one]})
    got = bmf.to_bmf(export)
    assert got == {"naive 8x8x8 rrr fp32 H200 hot": {"latency": {"value": 500_000.0, "lower_value": 250_000.0,
                                                                 "upper_value": 750_000.0}, "gflops": {"value": 2.0}}}


def test_a_wrong_kernel_is_no_measure_and_two_modes_are_two_benchmarks(cfg):
    add_job(cfg, "c0ffee42", [("naive", (64, 64, 64), 100.0, True), ("smem_tiled", (64, 64, 64), 90.0, False)])
    add_job(cfg, "c0ffee42", [("naive", (64, 64, 64), 130.0, True)], mode="burst")
    client = make_client(cfg)
    got = exported(client, "c0ffee42", format="bmf")
    assert sorted(got) == [f"naive 64x64x64 rrr fp32 {H100['model']} burst", f"naive 64x64x64 rrr fp32 {H100['model']} cold"]
    assert {r["status"] for r in exported(client, "c0ffee42")["results"]} == {"passed", "incorrect"}


def test_an_unknown_commit_or_format_is_refused_saying_why(demo):
    unknown = demo.get("/api/commits/0123456789abcdef/export")
    assert unknown.status_code == 404 and "No commit 0123456789abcdef has been measured" in unknown.json()["detail"]
    assert demo.get(f"/api/commits/{demo_sha(REGRESSION_AT)}/export", params={"format": "csv"}).status_code == 422
    assert demo.get("/api/commits/not-hex/export").status_code == 422


def test_gemmwatch_export_writes_the_file_a_bencher_run_reads(cfg, live_server, tmp_path):
    add_demo_history(cfg)
    server = live_server(cfg)
    out = tmp_path / "bmf.json"
    sha = demo_sha(REGRESSION_AT)
    done = subprocess.run([sys.executable, "-m", "cli.main", "export", sha, "--format", "bmf", "--out", str(out),
                           "--server", server], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    validator(BENCHER / "bmf.schema.json").validate(json.loads(out.read_text()))
    missing = subprocess.run([sys.executable, "-m", "cli.main", "export", "0123456789abcdef", "--server", server],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    said = " ".join((missing.stdout + missing.stderr).split())  # the console wraps long lines
    assert missing.returncode == 2 and "404 No commit 0123456789abcdef has been measured" in said, said
