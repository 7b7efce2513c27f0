"""GPU tests for issue 40 (run on the lent H100): cuBLAS's best chosen from cuBLASLt's real
candidates, its C right, and the kernel timed beside it. Skipped where no CUDA device exists (CI)."""

import pytest

from core.settings import Settings
from worker.measure.cases import TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    from worker.measure.runner import CupyRunner

    return CupyRunner(Settings(GEMMWATCH_DATA_DIR=str(tmp_path_factory.mktemp("data"))))


POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))


@pytest.mark.parametrize("variant", ["cublas", "cublas_tf32", "cublas_fp16", "cublas_bf16", "cublas_fp8"])
def test_cublass_best_is_chosen_from_real_candidates_and_is_no_slower_than_the_default(runner, variant):
    out = runner.run_case(builtin_case(variant, 2048, 2048, 2048, seed=3), POLICY)
    assert out.verified and out.error is None, out.error
    best = out.env["cublas_best"]
    ran = [c for c in best["candidates"] if c.get("median_ms")]
    assert len(ran) >= 2 and best["candidates"][0]["call"] == "default"
    assert best["best"]["median_ms"] == min(c["median_ms"] for c in ran)
    assert "why" not in best, best.get("why")  # where a candidate won, its C was right
    if best["against"] == "best":
        assert out.env["cublas_plan"]["algo"] == best["best"]["algo"]


def test_a_kernel_is_timed_beside_the_chosen_call(runner):
    out = runner.run_case(builtin_case("bf16_wgmma_ss", 4096, 4096, 4096, seed=3), POLICY)
    assert out.verified, out.error
    best = out.env["cublas_best"]
    # The pair loop's cuBLAS median is the chosen call's, within the two measurements' noise.
    assert out.cublas_median_ms == pytest.approx(best["best"]["median_ms"], rel=0.05)


@pytest.mark.parametrize("name", ["bf16_wgmma_tn", "tf32_wgmma_tn", "fp8_wgmma_tn"])
def test_a_tn_kernel_is_timed_beside_cublass_best_in_the_tn_form(runner, name):
    """B column-major (the TN form): cuBLASLt's candidates are timed beside the default call (before,
    a TN kernel had no candidates: "why" said so) and the chosen one is the TN call, its C checked."""
    tn = runner.run_case(builtin_case(name, 2048, 2048, 2048, seed=3), POLICY)
    assert tn.verified and tn.form == "rcr", tn.error
    best = tn.env["cublas_best"]
    assert "why" not in best, best.get("why")
    ran = [c for c in best["candidates"] if c.get("median_ms")]
    assert len(ran) >= 2 and best["candidates"][0]["call"] == "default"
    if best["against"] == "best":
        assert tn.env["cublas_plan"]["trans"] == "TN" and tn.env["cublas_plan"]["algo"] == best["best"]["algo"]
