"""GPU tests: the real CuPy runner and a real worker on a real GPU (run on the lent H100).

Skipped where no CUDA device exists (CI), never faked.
"""

import json
import os
import time
from pathlib import Path

import pytest

from core.description.builtins import builtin_kernels
from core.records.db import upgrade_database
from core.description.description_fields import TileGrid
from core.description.kernel_description import KernelDescription
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.descriptions import one_file
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu

KERNELS = list(builtin_kernels())
ODD_SIZES = [(1, 1, 1), (7, 13, 5), (1000, 1003, 997), (1000, 1024, 1000), (4097, 4095, 1023)]
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


def run(runner, variant, m, n, k):
    return runner.run_case(builtin_case(variant, m, n, k, seed=1234), POLICY)


def job_kernel(name: str, text: str, entry: str, block: list, tile: list, **extra) -> KernelChoice:
    """A kernel as a job would bring it (compiled as hostile, through the confined compile)."""
    return KernelChoice(KernelDescription.model_validate(one_file(name, text, entry, block, tile, **extra)), {}, "job")


@pytest.mark.parametrize("size", ODD_SIZES + [(4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", KERNELS)
def test_kernel_matches_cublas(runner, variant, size):
    out = run(runner, variant, *size)
    if out.not_applicable:  # built for another GPU target (tf32_wgmma: sm_90a only)
        pytest.skip(out.error)
    assert out.verified, out.error
    # TF32 keeps 10 mantissa bits: its own bound (the runner's), and a cuBLAS TF32 baseline; FP16
    # and BF16 theirs, by K (core/description/precision.py), beside cuBLAS in the same precision.
    desc = builtin_kernels()[variant]
    bound = {"fp32": 1e-4, "tf32": POLICY.max_rel_error_tf32}.get(desc.compute_mode) or \
        desc.precision.default_tolerance(size[2])
    assert out.compute_mode == desc.compute_mode and out.dtype == desc.precision.input_type
    assert out.rel_error is not None and out.rel_error <= bound
    assert out.gflops > 0 and out.cublas_gflops > 0 and out.pct_of_cublas > 0
    assert out.n_samples >= 10
    assert out.env["before"]["sm_clock_mhz"] is not None


@pytest.mark.parametrize("size", [(1000, 1024, 1000), (4097, 4095, 1023)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("params", builtin_kernels()["tf32_wgmma"].configurations(),
                         ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_every_tf32_wgmma_configuration_matches_cublas(runner, params, size):
    """Each tile height, ring depth and rasterisation of the wgmma kernel, on the aligned fast path
    (1000 x 1024 x 1000) and the 4-byte edge path (4097 x 4095 x 1023)."""
    case = builtin_case("tf32_wgmma", *size, seed=77, tunables=params)
    out = runner.run_case(case, POLICY)
    if out.not_applicable:
        pytest.skip(out.error)
    assert out.verified, out.error
    assert out.compute_mode == "tf32" and out.rel_error <= POLICY.max_rel_error_tf32
    assert out.env["resources"]["dynamic_smem_bytes"] == runner.resolve(case.kernel).dynamic_smem(*size)


# Where the TMA describes A (K a multiple of 4): M and K past the last whole tile and slab (the copy
# engine's zeros: M = 1000 is no multiple of 256, K = 1000 and 996 none of 32), skinny both ways.
TMA_SHAPES = [(1000, 1100, 1000), (4096, 8, 4096), (8, 4096, 1024), (1000, 1003, 996)]
TMA_A_VARIANTS = ["tf32_wgmma_tma", "tf32_wgmma_pairs", "tf32_wgmma_pairs_2frags", "tf32_wgmma_pairs_tma_b",
                  "tf32_wgmma_pairs_staged_c", "tf32_wgmma_tn"]


@pytest.mark.parametrize("size", TMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", TMA_A_VARIANTS)
def test_the_tma_kernels_match_cublas_where_the_tma_copies_a(runner, variant, size):
    """tf32_wgmma_pairs at 1000 x 1100 x 1000 and 4096 x 8 x 4096: an odd count of tile-columns, so
    the last pair's second block lies past N and must write nothing."""
    out = run(runner, variant, *size)
    if out.not_applicable:
        pytest.skip(out.error)
    assert out.verified, out.error
    assert out.rel_error <= POLICY.max_rel_error_tf32 and out.gflops > 0


@pytest.mark.parametrize("variant", TMA_A_VARIANTS)
def test_a_tf32_wgmma_kernel_that_skips_one_k_slab_is_wrong_and_gets_no_speed(runner, variant):
    """One slab (32 of K; tf32_wgmma_tn: 8 of it) left out of every tile must show against cuBLAS,
    the pair's second block's tiles included."""
    from tests.descriptions import builtin_variant

    out = runner.run_case(Case(0, variant, 1024, 1024, 4096, 5, builtin_variant(variant, GEMMWATCH_TEST_SKIP_SLAB=1)),
                          POLICY)
    assert not out.verified and out.gflops is None and out.pct_of_cublas is None
    assert "relative error" in out.error


def test_a_kernel_that_leaves_c_unwritten_is_not_verified(runner):
    """The sentinel check catches a kernel that skips elements (here: a grid one tile short)."""
    tiled = builtin_kernels()["smem_tiled"]
    short = tiled.model_copy(update={"grid": TileGrid(tile=["TILE * 2", "TILE"])})  # half the rows get no block
    out = runner.run_case(Case(0, "smem_tiled", 256, 256, 256, 5, KernelChoice(short, {}, "builtin")), POLICY)
    assert not out.verified and out.gflops is None
    assert "32768 of 65536 elements of C never written" in out.error


def test_a_kernel_that_skips_the_last_k_tile_is_not_verified(runner):
    source = (Path(__file__).parent / "fixtures" / "skip_last_k_tile.cu").read_text()
    wrong = job_kernel("skip_last_k_tile", source, "sgemm_skip_last_k_tile", [32, 32, 1], [32, 32])
    out = runner.run_case(Case(0, "skip_last_k_tile", 512, 512, 512, 9, wrong), POLICY)
    assert not out.verified and out.gflops is None and out.median_ms is None
    assert out.rel_error > 1e-2 and "wrong result: relative error" in out.error


def test_gpu_identity_is_recorded(runner):
    ident = runner.identity()
    assert ident["sm_count"] > 0 and ident["compute_capability"]
    assert ident["uuid"].startswith("GPU-") and ident["driver"] and ident["cuda_runtime"] > 0
    assert os.environ.get("CUPY_TF32", "0") in ("", "0")


# Memory bandwidth on NVIDIA's data sheets, GB/s: the roofline's memory roof is made from NVML's
# bus width and memory clock (dashboard/roofs.py) and must land on it.
DATA_SHEET_GBS = {"NVIDIA H100 80GB HBM3": 3350, "NVIDIA H200": 4800, "NVIDIA A100-SXM4-80GB": 2039}


def test_the_memory_roof_from_nvml_matches_the_data_sheet(runner):
    from dashboard.roofs import bandwidth

    ident = runner.identity()
    roof = bandwidth(ident["memory_bus_bits"], ident["max_mem_clock_mhz"])
    print(f"{ident['name']}: {roof.how}")
    assert roof.gbs and ident["memory_bus_bits"] >= 64
    if ident["name"] in DATA_SHEET_GBS:
        assert roof.gbs == pytest.approx(DATA_SHEET_GBS[ident["name"]], rel=0.03)


def test_job_through_the_api_and_a_real_worker(tmp_path, sqlite_url, redis_url, start_worker):
    from worker.gpu.gpu_identity import visible_gpus

    model = visible_gpus()[0].model
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, queues=f"gpu.{model},gpu.any", runner=None, GEMMWATCH_CASE_TIME_CAP_S="3")

    t0 = time.monotonic()
    resp = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[4096, 4096, 4096]],
                                          "gpu": model, "commit": {"sha": "feedbeef01", "branch": "main"}})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=60)
    elapsed = time.monotonic() - t0

    assert job["status"] == "succeeded", job["error"]
    assert elapsed < 60
    assert {r["variant"] for r in job["results"]} == {"naive", "smem_tiled"}
    for r in job["results"]:
        assert r["verified"] and r["gflops"] > 0 and r["pct_of_cublas"] > 0 and r["cublas_gflops"] > 0
        assert r["gpu"] == job["ran_on"] and r["commit"] == "feedbeef01"

    page = client.get("/history").text
    assert "history-chart" in page and '"naive"' in page and '"smem_tiled"' in page

    if os.environ.get("GEMMWATCH_BENCH_OUT"):
        out = Path(os.environ["GEMMWATCH_BENCH_OUT"])
        out.write_text(json.dumps({"post_to_succeeded_s": elapsed, "job": job}, indent=1, default=str))


def test_a_faulting_kernel_restarts_the_gpu_process_and_the_next_job_runs():
    """Sticky CUDA error: the child reports it, exits, and a fresh child serves the next job."""
    from worker import gpu_process

    source = (Path(__file__).parent / "fixtures" / "out_of_bounds.cu").read_text()
    bad = job_kernel("out_of_bounds", source, "sgemm_out_of_bounds", [32, 1, 1], [32, 32])
    gpu, conn = gpu_process.acquire("worker.measure.runner:CupyRunner", POLICY)
    try:
        conn.send("job")
        assert conn.recv()[0] == "identity"
        conn.send(Case(0, "out_of_bounds", 64, 64, 64, 3, bad))  # one case at a time (worker/child.py)
        assert conn.recv() == ("started", 0)
        kind, _, outcome = conn.recv()
        assert kind == "result" and not outcome.verified and outcome.error
        kind, message = conn.recv()
        assert kind == "fatal" and "left the GPU unusable" in message
        assert gpu.exitcode is not None
    finally:
        gpu_process.discard()

    fresh, conn = gpu_process.acquire("worker.measure.runner:CupyRunner", POLICY)
    try:
        conn.send("job")
        assert conn.recv()[0] == "identity"
        conn.send(builtin_case("smem_tiled", 256, 256, 256, seed=3))
        assert conn.recv() == ("started", 0)
        kind, _, outcome = conn.recv()
        assert outcome.verified, outcome.error
        conn.send(None)  # the job is over
        assert conn.recv() == ("done",)
    finally:
        gpu_process.discard()


ENDLESS = """
extern "C" __global__ void endless(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
    long long start = clock64();
    while (clock64() >= start) { }  // the clock only grows: never ends (and cannot be optimised away)
}
"""


def test_faulting_and_endless_kernels_fail_their_jobs_and_the_worker_goes_on(tmp_path, sqlite_url, redis_url, start_worker):
    """Through the API and a real worker: an out-of-bounds kernel and a kernel that never ends
    each fail their job with a clear message; the next job on the same worker succeeds."""
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, runner=None, GEMMWATCH_CASE_TIMEOUT_S="20")
    oob = (Path(__file__).parent / "fixtures" / "out_of_bounds.cu").read_text()

    def src(name, text, entry):
        return one_file(name, text, entry, [32, 1, 1], [32, 32])

    bad = wait_for_job(client, client.post("/api/jobs", json={
        "sources": [src("oob", oob, "sgemm_out_of_bounds")], "sizes": [[256, 256, 256]]}).json()["id"], timeout=120)
    assert bad["status"] == "failed" and "left the GPU unusable" in bad["error"]

    hung = wait_for_job(client, client.post("/api/jobs", json={
        "sources": [src("endless", ENDLESS, "endless")], "sizes": [[64, 64, 64]]}).json()["id"], timeout=120)
    assert hung["status"] == "failed" and "exceeded the 20 s case time limit; killed" in hung["error"]

    good = wait_for_job(client, client.post("/api/jobs", json={"variants": ["smem_tiled"], "sizes": [[512, 512, 512]]}).json()["id"],
                        timeout=120)
    assert good["status"] == "succeeded" and good["results"][0]["verified"]


def test_a_faulting_and_an_endless_kernel_fail_alone_and_the_rest_of_their_job_runs(
        tmp_path, sqlite_url, redis_url, start_worker):
    """One job of three cases on a real GPU, in this order: a kernel that leaves the GPU unusable, one
    that never ends, and a good one. Each bad case fails alone with its reason, and the case after it
    runs on a fresh GPU process: the good one is verified, not lost with the spoilt ones."""
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, runner=None, GEMMWATCH_CASE_TIMEOUT_S="20")
    oob = (Path(__file__).parent / "fixtures" / "out_of_bounds.cu").read_text()
    sources = [one_file("oob", oob, "sgemm_out_of_bounds", [32, 1, 1], [32, 32]),
               one_file("endless", ENDLESS, "endless", [32, 1, 1], [32, 32])]
    job = wait_for_job(client, client.post("/api/jobs", json={
        "sources": sources, "variants": ["oob", "endless", "smem_tiled"], "sizes": [[256, 256, 256]]}).json()["id"],
        timeout=240)
    assert job["status"] == "failed"
    assert "left the GPU unusable" in job["error"] and "exceeded the 20 s case time limit; killed" in job["error"]
    by_variant = {r["variant"]: r for r in job["results"]}
    assert set(by_variant) == {"oob", "endless", "smem_tiled"}, job["results"]
    assert not by_variant["oob"]["verified"] and by_variant["oob"]["error"]
    assert by_variant["endless"]["error"] == "exceeded the 20 s case time limit; killed with its GPU process"
    assert by_variant["smem_tiled"]["verified"] and by_variant["smem_tiled"]["gflops"] > 0


def test_cancel_on_a_real_gpu_stops_at_a_boundary_or_replaces_an_endless_kernels_process(
        tmp_path, sqlite_url, redis_url, start_worker):
    """Cancel through the API with the real runner: a job of many cases stops after the case in
    hand and keeps its results; an endless kernel is stopped with its GPU process after the grace
    period; the next job succeeds on a fresh GPU process."""
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, runner=None, GEMMWATCH_CANCEL_GRACE_S="3", GEMMWATCH_CASE_TIMEOUT_S="120")

    def wait(check, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = client.get(f"/api/jobs/{job_id}").json()
            if check(job):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id}: {job}")

    sizes = [[n, n, n] for n in (512, 640, 768, 896, 1024, 1152, 1280, 1408)]
    job_id = client.post("/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": sizes}).json()["id"]
    wait(lambda j: j["progress"]["done"] >= 2)
    assert client.post(f"/api/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    job = wait(lambda j: (j["error"] or "").startswith("cancelled after"))
    assert 2 <= len(job["results"]) < 16 and all(r["verified"] for r in job["results"])
    assert job["status"] == "cancelled" and job["current_case"] is None
    kept_pid = job["results"][0]["env"]["gpu"]["gpu_process_pid"]

    src = one_file("endless", ENDLESS, "endless", [32, 1, 1], [32, 32])
    job_id = client.post("/api/jobs", json={"sources": [src], "sizes": [[64, 64, 64]]}).json()["id"]
    # The case has begun (compiling or in the kernel: no sleep guesses which). Either way it is in hand
    # and never ends by itself, so it outlives the grace and goes with its GPU process.
    wait(lambda j: (j["current_case"] or "").startswith("endless"))
    assert client.post(f"/api/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    hung = wait(lambda j: (j["error"] or "").startswith("cancelled after"), timeout=60)
    assert "still running 3 s after the job was cancelled; stopped with its GPU process" in hung["error"]

    good = wait_for_job(client, client.post("/api/jobs", json={"variants": ["smem_tiled"], "sizes": [[512, 512, 512]]}).json()["id"],
                        timeout=120)
    assert good["status"] == "succeeded" and good["results"][0]["verified"]
    assert good["results"][0]["env"]["gpu"]["gpu_process_pid"] != kept_pid
