"""A kernel built for one GPU target (tf32_wgmma: sm_90a) is reported as not applicable on any other
GPU: a clear result with the reason, the job still succeeds, nothing is compiled or launched.

The CPU double stands in for the GPU and reports the compute capability FAKE_GPU_COMPUTE_CAPABILITY
says, so the same job is tried as if on an A100 (8.0) and on an H100 (9.0).
"""

import pytest

from core.description.builtins import builtin_kernels
from core.records.db import upgrade_database
from core.description.kernel import resolve, target_compute_capability
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import H100_FIGURES
from worker.measure.cases import builtin_case, not_applicable


def wgmma(tunables=None):
    return resolve(builtin_kernels()["tf32_wgmma"], tunables, H100_FIGURES)


def test_a_target_names_its_one_compute_capability():
    assert target_compute_capability("sm_90a") == "9.0"
    assert target_compute_capability("sm_100a") == "10.0"
    with pytest.raises(ValueError):
        target_compute_capability("compute_90")


@pytest.mark.parametrize("cc", ["9.0", "90"])
def test_the_wgmma_kernel_runs_on_compute_capability_9_0(cc):
    launch = wgmma()
    assert launch.target == "sm_90a" and launch.dynamic_smem(64, 64, 64) > 48 * 1024
    assert launch.not_applicable_on(cc) is None
    assert not_applicable(builtin_case("tf32_wgmma", 64, 64, 64), cc, "cold") is None


@pytest.mark.parametrize("cc", ["8.0", "80", "8.9", "10.0", "12.0"])
def test_the_wgmma_kernel_is_not_applicable_elsewhere(cc):
    reason = wgmma().not_applicable_on(cc)
    assert reason.startswith("not applicable: tf32_wgmma is built for sm_90a")
    outcome = not_applicable(builtin_case("tf32_wgmma", 64, 64, 64), cc, "cold")
    assert outcome.not_applicable and not outcome.verified and outcome.error == reason
    assert outcome.gflops is None and outcome.n_samples == 0


def test_kernels_without_a_target_run_anywhere():
    for name in ("naive", "tf32_mma_sync", "warp_tile_large"):
        assert resolve(builtin_kernels()[name], None, H100_FIGURES).not_applicable_on("8.0") is None
        assert not_applicable(builtin_case(name, 8, 8, 8), "8.0", "cold") is None
    assert not_applicable(builtin_case("cublas", 8, 8, 8), "8.0", "cold") is None


def test_dynamic_shared_memory_follows_the_tunables():
    big, small = wgmma({"BM": 256, "STAGES": 4}), wgmma({"BM": 128, "STAGES": 3})
    assert big.dynamic_smem(64, 64, 64) > small.dynamic_smem(64, 64, 64)
    # Every configuration fits the H100's 227 KiB of shared memory per block.
    configs = builtin_kernels()["tf32_wgmma"].configurations()
    assert max(wgmma(p).dynamic_smem(64, 64, 64) for p in configs) <= H100_FIGURES.smem_per_block


@pytest.mark.parametrize(("cc", "wgmma_runs"), [("8.0", False), ("9.0", True)])
def test_a_job_on_another_gpu_reports_the_wgmma_variant_as_not_applicable(
        tmp_path, sqlite_url, redis_url, start_worker, cc, wgmma_runs):
    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, FAKE_GPU_COMPUTE_CAPABILITY=cc)
    resp = client.post("/api/jobs", json={"variants": ["tf32_wgmma", "naive"], "sizes": [[64, 48, 32]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=90)

    assert job["status"] == "succeeded", job["error"]  # not applicable is no failure of the job
    assert job["error"] is None
    by_variant = {r["variant"]: r for r in job["results"]}
    assert by_variant["naive"]["verified"] and by_variant["naive"]["gflops"] > 0
    assert by_variant["naive"]["status"] == "passed"
    assert by_variant["tf32_wgmma"]["status"] == ("passed" if wgmma_runs else "not applicable")
    wgmma = by_variant["tf32_wgmma"]
    if wgmma_runs:
        assert wgmma["verified"] and wgmma["gflops"] > 0 and wgmma["error"] is None
    else:
        assert not wgmma["verified"] and wgmma["gflops"] is None
        assert wgmma["error"] == (f"not applicable: tf32_wgmma is built for sm_90a and runs only on compute "
                                  f"capability 9.0; this GPU has {cc}")
        assert wgmma["env"]["not_applicable"] is True


def test_a_not_applicable_case_is_its_own_verdict_and_fails_no_build(tmp_path, sqlite_url, redis_url, start_worker):
    """The CI hook's verdict for a case not run by design (here sm_90a on an A100): "not applicable",
    shown as such, and neither "unverified" (exit 2) nor taken to a confirmation."""
    from cli.ci import OK, exit_code, summary

    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg, FAKE_GPU_COMPUTE_CAPABILITY="8.0")
    resp = client.post("/api/jobs", json={"variants": ["tf32_wgmma", "naive"], "sizes": [[64, 48, 32]],
                                          "commit": {"sha": "c0ffee1", "branch": "main"}})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=90)
    verdicts = client.get(f"/api/jobs/{job['id']}/verdicts").json()
    by_variant = {v["variant"]: v for v in verdicts}
    assert by_variant["tf32_wgmma"]["status"] == "not applicable", by_variant["tf32_wgmma"]
    assert by_variant["tf32_wgmma"]["reason"].startswith("not applicable: tf32_wgmma is built for sm_90a")
    assert by_variant["naive"]["status"] == "no baseline"
    assert exit_code(job, verdicts) == OK
    assert "➖ not applicable" in summary(job, verdicts, "main")
    assert exit_code(job, [{**by_variant["tf32_wgmma"], "status": "unverified"}]) != OK  # what it was before


def tiled(**multiple):
    """naive, described as a kernel that reads and writes whole tiles with no bounds checks."""
    from core.description.kernel_description import KernelDescription
    from worker.measure.cases import KernelChoice

    data = builtin_kernels()["naive"].model_dump(mode="json", exclude_none=True)
    return KernelChoice(KernelDescription.model_validate({**data, "size_multiple": multiple}), {}, "job")


@pytest.mark.parametrize(("size", "misses"), [((1000, 1003, 997), ["M 1000 (not a multiple of 128)",
                                                                   "K 997 (not a multiple of 64)"]),
                                              ((256, 8, 4096 + 32), ["K 4128 (not a multiple of 64)"]),
                                              ((128, 5, 64), [])])
def test_a_size_that_is_not_a_multiple_of_the_tile_is_not_applicable_and_says_which(size, misses):
    from worker.measure.cases import Case

    case = Case(0, "tiled", *size, 3, tiled(M=128, K=64))  # N left at 1: any N
    outcome = not_applicable(case, "9.0", "cold")
    if not misses:
        assert outcome is None
        return
    assert outcome.not_applicable and not outcome.verified and outcome.gflops is None
    assert outcome.error == ("not applicable: naive runs only where each size is a multiple of its tile (its "
                             f"description's size_multiple); this case is {'×'.join(map(str, size))}: "
                             + ", ".join(misses))


def test_a_confirmation_s_base_that_does_not_run_at_the_size_makes_the_case_not_applicable():
    from worker.measure.cases import Case

    case = Case(0, "naive", 96, 96, 96, 3, builtin_case("naive", 96, 96, 96).kernel, base=tiled(N=64))
    assert "N 96 (not a multiple of 64)" in not_applicable(case, "9.0", "cold").error


@pytest.mark.parametrize("bad", [{"M": 0}, {"K": -64}, {"B": 4}, {"M": "128"}, {"N": 1 << 20}])
def test_a_size_multiple_that_is_no_positive_step_of_m_n_or_k_is_refused(bad):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="size_multiple"):
        tiled(**bad)


def test_a_job_s_kernel_with_a_size_multiple_runs_where_it_fits_and_says_why_not_elsewhere(
        tmp_path, sqlite_url, redis_url, start_worker):
    """Through the API, a worker and the store: one kernel of the job's own, two sizes."""
    from tests.descriptions import one_file

    cfg = make_settings(tmp_path, sqlite_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg)
    naive = builtin_kernels()["naive"]
    source = {**one_file("whole_tiles", "", "sgemm_naive", [32, 32], [32, 32]), "files": naive.files,
              "source": naive.source, "size_multiple": {"M": 32, "N": 32}}
    resp = client.post("/api/jobs", json={"variants": ["whole_tiles"], "sources": [source],
                                          "sizes": [[64, 64, 48], [64, 48, 48]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=90)
    assert job["status"] == "succeeded", job["error"]
    by_n = {r["n"]: r for r in job["results"]}
    assert by_n[64]["status"] == "passed" and by_n[64]["gflops"] > 0
    assert by_n[48]["status"] == "not applicable" and by_n[48]["gflops"] is None
    assert by_n[48]["error"].endswith("this case is 64×48×48: N 48 (not a multiple of 32)")
