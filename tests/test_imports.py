"""Issue 52: what teams already measure gets in. `gemmwatch import` (POST /api/imports) reads an nvbench
JSON file, a CUTLASS profiler CSV or a plain table; its results keep a mode that names the tool, so
charts and verdicts compare like with like only.

The nvbench files are three real runs on an H200 (tests/fixtures/nvbench/README.md): the same
benchmark, again unchanged, then with one more kernel after the product. The CUTLASS CSV is written
by hand in the profiler's column layout (tests/fixtures/cutlass_profiler/README.md)."""

import base64
import json
import statistics
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from core.exchange.imports import ImportRefused, guess_format, read_import
from core.exchange.imports.imported_run import as_batch, variant_name
from tests.conftest import ROOT, make_client

NVBENCH = Path(__file__).parent / "fixtures" / "nvbench"
CUTLASS = Path(__file__).parent / "fixtures" / "cutlass_profiler" / "gemm.csv"
SIZE_AXES = {"m": "Size", "n": "Size", "k": "Size"}


def sample_files(run: str) -> dict[str, bytes]:
    return {str(p.relative_to(NVBENCH)): p.read_bytes() for p in sorted(NVBENCH.glob(f"{run}.json-bin/*.bin"))}


def read_nvbench(run: str = "base", files: dict | None = None, content: str | None = None, **options):
    args = {"axes": SIZE_AXES, "dtype": None, "form": "rrr+ab", "file_name": f"{run}.json",
            "files": sample_files(run) if files is None else files, "timed": None, "device": None} | options
    return read_import("nvbench", content or (NVBENCH / f"{run}.json").read_text(), **args)


def nvbench_summary(state: dict, tag: str) -> float:
    summary = next(s for s in state["summaries"] if s["tag"] == tag)
    return float(summary["data"][0]["value"])


# -- nvbench -----------------------------------------------------------------------------------------

def test_each_nvbench_state_is_a_cold_and_a_batch_result_on_the_gpu_it_names():
    run = read_nvbench()
    assert (run.gpu.name, run.gpu.sm_count, run.gpu.compute_capability) == ("NVIDIA H200", 132, "9.0")
    assert run.skipped == []
    cold = [c for c in run.cases if c.mode == "nvbench:cold"]
    assert len(cold) == 6 and len([c for c in run.cases if c.mode == "nvbench:batch"]) == 6
    assert {(c.m, c.n, c.k, c.compute_mode) for c in cold} == {
        (s, s, s, t) for s in (1024, 2048, 4096) for t in ("fp16", "bf16")}
    assert {c.variant for c in run.cases} == {"torch_matmul"}  # every axis is mapped: no variant axis left


def test_cold_statistics_are_read_from_the_sample_files_and_agree_with_nvbench_s_own():
    """Each cold result's median is the median of its sample file (float32 seconds), computed here
    independently, and within float32 rounding of the median nvbench wrote into the JSON."""
    document = json.loads((NVBENCH / "base.json").read_text())
    states = document["benchmarks"][0]["states"]
    cold = [c for c in read_nvbench().cases if c.mode == "nvbench:cold"]
    for case, state in zip(cold, states):
        name = next(s for s in state["summaries"] if s["tag"] == "nv/json/bin:nv/cold/sample_times")["data"][0]["value"]
        raw = (NVBENCH / name).read_bytes()
        mine = [1e3 * t for t in struct.unpack(f"<{len(raw) // 4}f", raw)]
        assert case.samples_ms == mine and case.source["samples"] == len(mine) > 1000
        assert case.stats["median_ms"] == statistics.median(mine)
        assert case.stats["median_ms"] == pytest.approx(1e3 * nvbench_summary(state, "nv/cold/time/gpu/median"), rel=1e-4)
        assert case.stats["q1_ms"] < case.stats["median_ms"] < case.stats["q3_ms"]
        assert case.source["figure"] == "median"


def test_without_its_sample_files_a_state_keeps_nvbench_s_statistics_and_an_old_one_its_mean():
    """No sample files: nvbench's own median, quartiles and noise, in milliseconds. An nvbench that
    reports no median (before 0.1): its mean is the figure, and the result says so."""
    state = json.loads((NVBENCH / "base.json").read_text())["benchmarks"][0]["states"][2]  # 4096, F16
    case = next(c for c in read_nvbench(files={}).cases if c.mode == "nvbench:cold" and c.m == 4096)
    assert case.samples_ms == [] and case.source["figure"] == "median"
    assert case.stats["median_ms"] == pytest.approx(1e3 * nvbench_summary(state, "nv/cold/time/gpu/median"))
    assert case.stats["noise"] == pytest.approx(nvbench_summary(state, "nv/cold/time/gpu/stdev/relative"))
    old = json.loads((NVBENCH / "base.json").read_text())
    for s in old["benchmarks"][0]["states"]:
        s["summaries"] = [x for x in s["summaries"] if not x["tag"].endswith(("/median", "/q1", "/q3"))]
    case = next(c for c in read_nvbench(files={}, content=json.dumps(old)).cases if c.mode == "nvbench:cold")
    assert case.source["figure"] == "mean" and "median_ms" not in case.stats
    row = as_batch(read_nvbench(files={}, content=json.dumps(old)), gpu=None, commit=None, run_id=None,
                   digest_of="x", max_samples=10)["results"][0]
    assert row["median_ms"] == row["mean_ms"] and row["env"]["imported"]["figure"] == "mean"


def test_a_run_s_speeds_are_2mnk_over_its_figure_and_its_samples_are_kept_within_the_budget():
    run = read_nvbench()
    body = as_batch(run, gpu=None, commit={"sha": "aaaa0001"}, run_id=None, digest_of="base", max_samples=1_000_000)
    first = body["results"][0]
    assert first["gflops"] == pytest.approx(2 * 1024**3 / (first["median_ms"] * 1e-3) / 1e9)
    assert first["samples_ms"] == run.cases[0].samples_ms and first["env"]["imported"]["samples_stored"] is True
    assert first["verified"] is True and first["env"]["imported"]["checked"].startswith("not checked")
    assert body["gpu"] == {"name": "NVIDIA H200", "model": "H200", "sm_count": 132, "compute_capability": "9.0",
                           "memory_mib": 143155, "uuid": "imported-h200_132"}
    # Past the post's sample budget: the statistics of all the samples, none stored, and it says so.
    lean = as_batch(run, gpu={"uuid": "GPU-1234"}, commit=None, run_id=None, digest_of="base", max_samples=1000)
    assert "samples_ms" not in lean["results"][0] and lean["results"][0]["median_ms"] == first["median_ms"]
    assert lean["results"][0]["env"]["imported"]["samples_stored"] is False and lean["gpu"]["uuid"] == "GPU-1234"
    assert body["run_id"] == as_batch(run, gpu=None, commit=None, run_id=None, digest_of="base", max_samples=10)["run_id"]
    assert body["run_id"] != as_batch(run, gpu=None, commit=None, run_id=None, digest_of="same", max_samples=10)["run_id"]


def test_the_axes_are_mapped_once_and_an_unmapped_axis_names_a_variant():
    with pytest.raises(ImportRefused, match=r"no axis says m, n, k \(its axes: Size, T\); map them once, e.g. --axis m=Size"):
        read_nvbench(axes={})
    with pytest.raises(ImportRefused, match=r"has no axis 'N' \(for n\); its axes: Size, T"):
        read_nvbench(axes={"m": "Size", "n": "N", "k": "Size"})
    document = json.loads((NVBENCH / "base.json").read_text())
    run = read_nvbench(axes=SIZE_AXES | {"dtype": "T"})
    assert {c.variant for c in run.cases} == {"torch_matmul"}
    with pytest.raises(ImportRefused, match="no axis says the element type"):
        read_nvbench(content=json.dumps(_renamed_type_axis(document)), files={})
    run = read_nvbench(content=json.dumps(_renamed_type_axis(document)), files={}, dtype="bf16")
    assert {c.variant for c in run.cases} == {"torch_matmul_kind_f16", "torch_matmul_kind_bf16"}
    assert {c.compute_mode for c in run.cases} == {"bf16"}


def _renamed_type_axis(document: dict) -> dict:
    """The type axis renamed "Kind": no longer a default name, so the mapping must say it."""
    out = json.loads(json.dumps(document))
    bench = out["benchmarks"][0]
    bench["axes"][1]["name"] = "Kind"
    for state in bench["states"]:
        for value in state["axis_values"]:
            if value["name"] == "T":
                value["name"] = "Kind"
    return out


def test_a_damaged_sample_file_or_a_skipped_state_is_said_not_guessed():
    files = sample_files("base")
    first = sorted(files)[0]
    with pytest.raises(ImportRefused, match=rf"sample file {first} holds \d+ bytes, not \d+ float32 times"):
        read_nvbench(files=files | {first: files[first][:-4]})
    nan = struct.pack("<f", float("nan")) + files[first][4:]
    with pytest.raises(ImportRefused, match="holds a time that is not a positive number"):
        read_nvbench(files=files | {first: nan})
    document = json.loads((NVBENCH / "base.json").read_text())
    document["benchmarks"][0]["states"][0] |= {"is_skipped": True, "skip_reason": "not enough memory"}
    run = read_nvbench(content=json.dumps(document))
    assert len(run.cases) == 10 and run.skipped == ["torch_matmul [Device=0 Size=2^10 T=F16]: skipped by nvbench "
                                                    "(not enough memory)"]
    two = json.loads((NVBENCH / "base.json").read_text())
    two["benchmarks"][0]["states"][1]["device"] = 1
    with pytest.raises(ImportRefused, match=r"states of devices \[0, 1\]: one import is one GPU"):
        read_nvbench(content=json.dumps(two))
    assert len(read_nvbench(content=json.dumps(two), device=1).cases) == 2
    with pytest.raises(ImportRefused, match="not an nvbench JSON file"):
        read_nvbench(content='{"rows": []}')


# -- CUTLASS profiler ---------------------------------------------------------------------------------

def test_a_cutlass_profiler_csv_gives_each_kernel_its_form_its_check_and_cublas_s_time():
    run = read_import("cutlass-profiler", CUTLASS.read_text(), axes={}, dtype=None, form="rrr", file_name="gemm.csv",
                      files={}, timed=None, device=None)
    by_row = {c.source["entry"].split(":")[0]: c for c in run.cases}
    tn = by_row["row 2"]
    assert (tn.m, tn.compute_mode, tn.form, tn.mode, tn.status) == (4096, "fp16", "rcc+ab", "cutlass:profiler", "passed")
    assert tn.stats == {"mean_ms": 0.2} and tn.cublas_median_ms == 0.25 and tn.source["figure"] == "mean"
    assert tn.source["checked"] == "checked by the CUTLASS profiler against its reference: passed"
    # Another raster order of the same kernel is a variant of its own (the long name keeps its
    # start and a digest of the whole, raster order included).
    assert by_row["row 4"].variant != tn.variant and by_row["row 4"].variant[:40] == tn.variant[:40]
    assert (by_row["row 5"].compute_mode, by_row["row 5"].form, by_row["row 5"].m) == ("bf16", "ccc", 2048)
    assert by_row["row 5"].cublas_median_ms is None
    wrong = by_row["row 6"]
    assert (wrong.compute_mode, wrong.status, wrong.stats) == ("tf32", "incorrect", {})
    assert by_row["row 8"].form == "rcc+ab+acc16+batch8"
    assert [s.split(":")[0] for s in run.skipped] == ["row 7", "row 9"]
    assert "not_supported" in run.skipped[0] and "A is f16 and B is s8" in run.skipped[1]
    assert len(tn.variant) <= 60 and tn.variant.startswith("cutlass3x_sm90_tensorop_gemm_f16")

    body = as_batch(run, gpu={"name": "NVIDIA H100 80GB HBM3"}, commit=None, run_id=None, digest_of="c", max_samples=10)
    rows = {r["env"]["imported"]["entry"].split(":")[0]: r for r in body["results"]}
    assert rows["row 2"]["pct_of_cublas"] == pytest.approx(125.0) and rows["row 2"]["cublas_gflops"] > 0
    assert rows["row 8"]["gflops"] == pytest.approx(8 * 2 * 4096**3 / 2.0e-3 / 1e9)  # the batch's flops
    assert rows["row 6"]["verified"] is False and "gflops" not in rows["row 6"]
    assert body["gpu"]["model"] == "H100"
    with pytest.raises(ImportRefused, match="does not say which GPU it ran on: name it"):
        as_batch(run, gpu=None, commit=None, run_id=None, digest_of="c", max_samples=10)


def test_the_profiler_s_console_output_and_a_csv_of_another_tool_are_told_apart():
    console = "=============================\n\nCSV Results:\n\n" + CUTLASS.read_text()
    options = {"axes": {}, "dtype": None, "form": "rrr", "file_name": None, "files": {}, "timed": None, "device": None}
    from_console = read_import("cutlass-profiler", console, **options)
    assert from_console.cases == read_import("cutlass-profiler", CUTLASS.read_text(), **options).cases
    assert len(from_console.cases) == 5
    with pytest.raises(ImportRefused, match="not a CUTLASS profiler CSV: no column Provider"):
        read_import("cutlass-profiler", "kernel,m,n,k\nx,1,2,3\n", axes={}, dtype=None, form="rrr", file_name=None,
                    files={}, timed=None, device=None)
    assert guess_format("report.gemm.csv", CUTLASS.read_text()[:4096]) == "cutlass-profiler"
    assert guess_format("base.json", (NVBENCH / "base.json").read_text()[:4096]) == "nvbench"
    assert guess_format("t.csv", "kernel,m,n,k,dtype,median_ms\n") == "csv"
    assert guess_format("t.json", '[{"kernel": "x"}]') == "json"


# -- a plain table ------------------------------------------------------------------------------------

def read_table(text: str, as_json: bool = False, **options):
    args = {"axes": {}, "dtype": None, "form": "rrr", "file_name": "t", "files": {}, "timed": "do_bench, 100 reps",
            "device": None} | options
    return read_import("json" if as_json else "csv", text, **args)


def test_a_table_s_rows_are_read_by_their_column_names():
    run = read_table("kernel,m,n,k,dtype,times_ms,form\nMy Kernel,128,256,512,bf16,0.3 0.1 0.2,rcr\n"
                     "other,64,64,64,int8,0.1,\nMy Kernel,128,256,512,bf16,0.4,rcr\n")
    assert run.skipped == ["row 3: element type 'int8' is none gemmwatch files (fp32, tf32, fp16, bf16, fp8)",
                           "row 4: my_kernel 128x256x512 rcr again (one result a kernel, shape and form)"]
    mine = run.cases[0]
    assert (mine.variant, mine.form, mine.compute_mode, mine.stats["median_ms"]) == ("my_kernel", "rcr", "bf16", 0.2)
    assert mine.source["timed"] == "do_bench, 100 reps" and mine.source["samples"] == 3
    run = read_table('{"results": [{"kernel": "k", "m": 8, "n": 8, "k": 8, "dtype": "fp32", "mean_ms": 0.5}]}', as_json=True)
    assert run.cases[0].source["figure"] == "mean" and run.cases[0].stats == {"mean_ms": 0.5}


@pytest.mark.parametrize("text, refusal", [
    ("kernel,m,n,k\nx,1,2,3\n", "row 2: no dtype"),
    ("kernel,m,n,k,dtype\nx,1,2,3,fp16\n", "row 2: no time"),
    ("kernel,m,n,k,dtype,median_ms\nx,1,2,3.5,fp16,1\n", "row 2: m, n and k are whole numbers"),
    ("kernel,m,n,k,dtype,median_ms\nx,1,2,3,fp16,-1\n", "row 2: median_ms '-1' is not a finite, non-negative number"),
    ("kernel,m,n,k,dtype,median_ms\nx,1,2,3,fp16,nan\n", "not a finite"),
    ("kernel,m,n,k,dtype,median_ms,form\nx,1,2,3,fp16,1,rrx\n", "form 'rrx' is no form key"),
    ("kernel,m,n,k,dtype,times_ms\nx,1,2,3,fp16,1;0\n", "times_ms holds a time that is not positive"),
])
def test_a_table_s_bad_row_is_refused_naming_the_row_and_the_column(text, refusal):
    with pytest.raises(ImportRefused, match=refusal):
        read_table(text)


def test_a_long_name_keeps_its_start_and_two_long_names_stay_two():
    a, b = variant_name("x" * 70 + "a"), variant_name("x" * 70 + "b")
    assert len(a) == len(b) == 60 and a != b and a.startswith("x" * 50)
    assert variant_name("8x8 tile") == "v_8x8_tile" and variant_name("Tile 128-64") == "tile_128_64"


# -- through the API: stored, kept apart, judged ---------------------------------------------------------

def nvbench_body(run: str, sha: str, parents: list[str]) -> dict:
    return {"format": "nvbench", "content": (NVBENCH / f"{run}.json").read_text(), "file_name": f"{run}.json",
            "files": {name: base64.b64encode(raw).decode() for name, raw in sample_files(run).items()},
            "axes": SIZE_AXES, "form": "rrr+ab", "commit": {"sha": sha, "repo": "acme/gemm", "parents": parents}}


def imported(client, run: str, sha: str, parents: list[str]) -> tuple[dict, list[dict]]:
    resp = client.post("/api/imports", json=nvbench_body(run, sha, parents))
    assert resp.status_code == 201, resp.text
    job = resp.json()
    return job, client.get(f"/api/jobs/{job['job_id']}/verdicts").json()


def test_a_verdict_between_two_imported_runs(cfg):
    """The base run, the same code again (no regression), then the slower code: every cold state a
    regression, each against the same mode's history only. The batch times carry no spread, so a
    one-run baseline cannot call them: they stay within the cap, said so."""
    client = make_client(cfg)
    base, first = imported(client, "base", "aaaa0001", [])
    assert base["results"] == 12 and base["modes"] == ["nvbench:batch", "nvbench:cold"] and base["skipped"] == []
    assert {v["status"] for v in first} == {"no baseline"}
    _, same = imported(client, "same", "bbbb0002", ["aaaa0001"])
    assert not [v for v in same if v["status"] == "regression"], same
    _, slower = imported(client, "slower", "cccc0003", ["bbbb0002"])
    cold = [v for v in slower if v["mode"] == "nvbench:cold"]
    assert len(cold) == 6 and {v["status"] for v in cold} == {"regression"}, cold
    assert all(v["baseline_points"] == 2 and v["delta"] < -0.05 for v in cold)
    batch = [v for v in slower if v["mode"] == "nvbench:batch"]
    assert {v["status"] for v in batch} == {"ok"} and all("noise is unknown" in v["reason"] for v in batch)

    # Importing the same file again adds nothing.
    again = client.post("/api/imports", json=nvbench_body("slower", "cccc0003", ["bbbb0002"]))
    assert again.status_code == 200 and again.json()["created"] is False


def test_imported_results_are_charted_apart_and_never_a_baseline_of_gemmwatch_s_own(cfg):
    client = make_client(cfg)
    imported(client, "base", "aaaa0001", [])
    imported(client, "slower", "cccc0003", ["aaaa0001"])
    # A worker-timed (here posted) cold result of the same kernel and shape at the head commit is judged
    # against gemmwatch cold results only: there are none before it, whatever nvbench said.
    own = {"run_id": "own-cold-0001", "gpu": {"uuid": "imported-h200_132", "name": "NVIDIA H200", "model": "H200",
                                              "sm_count": 132, "compute_capability": "9.0", "memory_mib": 143155},
           "commit": {"sha": "cccc0003", "repo": "acme/gemm", "parents": ["aaaa0001"]},
           "results": [{"variant": "torch_matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "float16",
                        "compute_mode": "fp16", "form": "rrr+ab", "verified": True, "gflops": 1000.0, "median_ms": 137.0,
                        "noise": 0.01}]}
    resp = client.post("/api/results", json=own)
    assert resp.status_code == 201, resp.text
    verdict = client.get(f"/api/jobs/{resp.json()['job_id']}/verdicts").json()[0]
    assert (verdict["mode"], verdict["status"]) == ("cold", "no baseline")

    history = client.get("/history", params={"gpu": "H200", "size": "4096", "mode": "nvbench:cold",
                                             "precision": "fp16", "form": "rrr+ab", "format": "json"})
    assert history.status_code == 200, history.text
    rows = history.json()["rows"]
    assert [r["sha"][:8] for r in rows] == ["aaaa0001", "cccc0003"] and rows[1]["regression"] is True
    page = client.get("/history", params={"gpu": "H200", "size": "4096", "mode": "nvbench:cold", "precision": "fp16",
                                          "form": "rrr+ab"}).text
    assert "imported: nvbench:cold" in page and 1000.0 not in [r["gflops"] for r in rows]
    # Set beside each other on purpose only: the compare view by mode, on one commit and GPU.
    beside = client.get("/compare", params={"by": "mode", "a": "cold", "b": "nvbench:cold", "gpu": "H200",
                                            "sha": "cccc0003", "precision": "fp16", "form": "rrr+ab", "format": "json"})
    assert beside.status_code == 200, beside.text
    pairs = [r for r in beside.json()["rows"] if r["ratio"] is not None]  # a size timed in both modes
    nvbench_4096 = next(c for c in read_nvbench("slower").cases if c.mode == "nvbench:cold" and c.m == 4096
                        and c.compute_mode == "fp16")
    assert [(r["variant"], r["m"]) for r in pairs] == [("torch_matmul", 4096)], pairs
    assert pairs[0]["ratio"] == pytest.approx(137.0 / nvbench_4096.stats["median_ms"], rel=1e-6)

    # The front page, with no FP32 "rrr" result to show, opens on the newest result's precision and form.
    front = client.get("/", params={"format": "json"}).json()
    assert front["filters"]["precision"] == "fp16" and front["filters"]["form"] == "rrr+ab", front["filters"]
    assert {r["variant"] for r in front["rows"]} == {"torch_matmul"} and front["filters"]["mode"] == "cold"
    stored = client.get("/api/results", params={"sha": "aaaa0001", "m": 4096}).json()
    detail = client.get(f"/api/results/{stored[0]['id']}").json()
    assert detail["env"]["imported"]["tool"] == "nvbench" and detail["env"]["imported"]["file"] == "base.json"


def test_a_refused_import_says_why_and_stores_nothing(cfg):
    client = make_client(cfg)
    csv_without_gpu = {"format": "cutlass-profiler", "content": CUTLASS.read_text()}
    resp = client.post("/api/imports", json=csv_without_gpu)
    assert resp.status_code == 422 and "does not say which GPU it ran on" in resp.text
    climbing = nvbench_body("base", "aaaa0001", []) | {"files": {"../../etc/passwd": "AAAA"}}
    assert client.post("/api/imports", json=climbing).status_code == 422
    unmapped = nvbench_body("base", "aaaa0001", []) | {"axes": {}}
    resp = client.post("/api/imports", json=unmapped)
    assert resp.status_code == 422 and "map them once, e.g. --axis m=Size" in resp.text
    huge = {"format": "csv", "content": "kernel,m,n,k,dtype,median_ms\nx,1,2,2000000,fp16,1\n", "gpu": {"name": "NVIDIA H200"}}
    resp = client.post("/api/imports", json=huge)
    assert resp.status_code == 422 and "row 2: " in resp.text and "results.0.k" in resp.text
    assert client.get("/api/results").json() == []
    # A token without the results scope imports nothing.
    from core.records.db import session_factory
    from core.records.tokens import create_token
    with session_factory(cfg)() as db:
        jobs_only = create_token(db, "jobs-only", scopes=["jobs"])
    resp = client.post("/api/imports", json=nvbench_body("base", "aaaa0001", []),
                       headers={"Authorization": f"Bearer {jobs_only}"})
    assert resp.status_code == 403 and client.get("/api/results").json() == []


def test_gemmwatch_import_sends_the_file_with_its_samples_and_exits_1_on_a_regression(cfg, live_server, tmp_path):
    from core.records.db import session_factory
    from core.records.tokens import create_token
    with session_factory(cfg)() as db:
        token = create_token(db, "importer")
    server = live_server(cfg)
    mapping = tmp_path / "nvbench-map.json"
    mapping.write_text(json.dumps({"axes": SIZE_AXES, "form": "rrr+ab"}))

    def cli(run: str, sha: str, parents: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli.main", "import", str(NVBENCH / f"{run}.json"), "--commit", sha,
                               "--parents", parents, "--map", str(mapping), "--server", server, "--token", token],
                              cwd=ROOT, capture_output=True, text=True, timeout=180)

    first = cli("base", "aaaa0001", "")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "12 results imported" in " ".join(first.stdout.split())
    slower = cli("slower", "cccc0003", "aaaa0001")
    said = " ".join(slower.stdout.split())
    assert slower.returncode == 1 and "regression" in said, said
    detail = make_client(cfg).get("/api/results", params={"variant": "torch_matmul"}).json()
    stored = [r for r in detail if r["mode"] == "nvbench:cold"]
    assert len(stored) == 12 and all(r["n_samples"] > 1000 for r in stored)
    bad = subprocess.run([sys.executable, "-m", "cli.main", "import", str(CUTLASS), "--commit", "aaaa0001",
                          "--server", server, "--token", token], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert bad.returncode == 2 and "does not say which GPU" in " ".join((bad.stdout + bad.stderr).split())


# -- hostile files: refused as what they are, never a server error -------------------------------------

def _json_values():
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=8)
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["benchmarks", "devices", "states", "axes", "name", "axis_values", "summaries", "tag", "data",
                         "value", "id", "device", "results", "kernel", "m", "n", "k", "dtype", "median_ms"]), inner,
        max_size=5), max_leaves=30)


def test_any_json_in_any_format_is_read_or_refused_never_an_error():
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(_json_values())
    def check(value):
        for format in ("nvbench", "json", "csv", "cutlass-profiler"):
            try:
                read_import(format, json.dumps(value), axes=SIZE_AXES, dtype="fp16", form="rrr", file_name=None,
                            files={}, timed=None, device=None)
            except ImportRefused:
                pass

    check()


@pytest.mark.parametrize("content", [
    "[" * 100_000,  # deeper than any JSON parser goes
    '{"benchmarks": [{"name": "g", "axes": "Size", "states": [{"axis_values": 7}]}]}',
    '{"benchmarks": [{"name": "g", "axes": [{"name": "M"}, {"name": "N"}, {"name": "K"}], "states": [{"device": 0, '
    '"axis_values": [{"name": "M", "value": "1e3"}], "summaries": "x"}]}]}',
    '{"meta": {"version": "x"}, "devices": [1], "benchmarks": [{"name": 5, "axes": [{"name": "M"}, {"name": "N"}, '
    '{"name": "K"}, {"name": "T"}], "states": [{"device": 0, "axis_values": [{"name": "M", "value": 8}, {"name": "N", '
    '"value": 8}, {"name": "K", "value": 8}, {"name": "T", "value": "F16"}], "summaries": [{"tag": '
    '"nv/cold/time/gpu/mean", "data": [{"name": "value", "value": "nan"}]}]}]}]}',
])
def test_a_malformed_nvbench_file_is_refused_saying_so(content):
    run = None
    try:
        run = read_nvbench(content=content, axes={}, files={})
    except ImportRefused as refused:
        assert str(refused)
    if run is not None:  # read, but nothing in it is a measured GEMM: an import of it says so
        with pytest.raises(ImportRefused, match="nothing to import"):
            as_batch(run, gpu={"name": "NVIDIA H200"}, commit=None, run_id=None, digest_of="x", max_samples=10)
