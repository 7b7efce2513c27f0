"""FP8 with DeepSeek-V3's block scales on the GPU (tests/fixtures/fp8_block_repo): the CUDA and the
Triton kernel verified at 1000x1003x997 and a skinny shape through a real worker, beside cuBLASLt's
block-scaled FP8 GEMM; the twin that reads B's scales with their sides swapped and the one that
leaves a k-slab out refused; and cuBLASLt's block-scaled call itself checked against the FP32
product of the same scaled values at sizes that need its padding (M not a multiple of 4, fewer
than 4 K-slabs) and at sizes that need none."""

from pathlib import Path

import pytest

from core.description.kernel_folder import load_folder
from core.description.precision import Precision
from tests.test_gpu_forms import run_job
from worker.measure.cases import Case

pytestmark = pytest.mark.gpu

REPO = Path(__file__).parent / "fixtures" / "fp8_block_repo"
SIZES = [[1000, 1003, 997], [64, 4096, 1024]]


def kernels() -> dict:
    return {d.name: d.model_dump(mode="json") for d in load_folder(REPO)}


@pytest.mark.parametrize("name", ["fp8_block_tn", "fp8_block_triton", "fp8_block_triton_sized", "fp8_block_grouped"])
def test_a_block_scaled_kernel_verifies_beside_cublaslts_block_scaled_gemm(gpu_stack, name):
    for r in run_job(gpu_stack, kernels()[name], SIZES):
        assert r["verified"], (name, r["m"], r["error"])
        assert r["gflops"] > 0 and r["cublas_gflops"] > 0
        assert r["env"]["precision"]["scales"] == {"A": "1x128", "B": "128x128"}
        plan = r["env"]["cublas_plan"]
        assert plan["a_scale_mode"].endswith("BLK128x128_32F") and plan["b_scale_mode"].endswith("VEC128_32F"), plan
        assert r["env"]["cublas_rel_error"] < 2e-2, r["env"]


def stride_off_by_one() -> dict:
    """fp8_block_triton told its scale arrays' rows lie one slab further apart than they do."""
    desc = kernels()["fp8_block_triton"]
    desc["args"] = [a.replace("=(K + 127) // 128", "=(K + 127) // 128 + 1") for a in desc["args"]]
    return desc


@pytest.mark.parametrize("name", ["fp8_block_tn_swapped", "fp8_block_tn_skip", "stride_off_by_one"])
def test_a_block_scaled_kernel_with_a_fault_is_refused(gpu_stack, name):
    desc = stride_off_by_one() if name == "stride_off_by_one" else kernels()[name]
    (r,) = run_job(gpu_stack, desc, [[512, 384, 640]], succeeds=False)
    assert not r["verified"] and r["gflops"] is None, (name, r)
    assert r["error"].startswith("wrong result"), r["error"]


@pytest.mark.parametrize("scales", ["1x128,128x128", "1x128,1x128"])
@pytest.mark.parametrize("size", [(200, 384, 512), (198, 300, 640), (1000, 1003, 997), (256, 256, 4096)])
def test_cublaslts_block_scaled_candidates_compute_the_scaled_product(scales, size):
    from worker.measure.runner import CupyRunner, Problem
    from worker.measure.verify import rel_error

    dev = CupyRunner().device
    precision = Precision("fp8", scales=scales)
    problem = Problem(dev, Case(0, "cublas", *size, 5, None), precision=precision)
    gemm = dev.cublas_candidates(problem, 4)
    assert gemm.candidates
    for i in range(len(gemm.candidates)):
        gemm.use(i)
        gemm()
        dev.synchronize()
        error = rel_error(dev.xp, problem.read(gemm.c), dev.reference(problem.a, problem.b))
        assert error <= precision.default_tolerance(size[2]), (scales, size, i, error, gemm.plan)
    # The same call with A's scales halved is off: the scales are read, not ignored.
    problem.scales["scale_A"] *= 0.5
    halved = dev.cublas_candidates(problem, 1)
    halved()
    dev.synchronize()
    error = rel_error(dev.xp, problem.read(halved.c), dev.reference(problem.a, problem.b))
    assert error > 0.4, error
