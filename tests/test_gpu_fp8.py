"""FP8 on the GPU: E4M3 rounding against torch's float8_e4m3fn, cuBLASLt's FP8 GEMM (the
baseline) against the exact product and against torch._scaled_mm (its output and its time, sample
for sample in one loop), the FP8 kernels verified at odd sizes, and the correctness gate tried
(a kernel that skips one k-slab; one that rounds C toward zero)."""

import json
import os

import pytest

from core.description.builtins import builtin_kernels
from core.description.precision import Precision
from core.settings import Settings
from tests.descriptions import builtin_variant as variant_of
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))
FP8_KERNELS = [name for name, d in builtin_kernels().items() if d.precision.fp8]
SIZES = [(1000, 1003, 997), (256, 8, 4096), (8, 256, 1024), (1024, 1024, 1024)]
# The FP8 TN kernels' other way of issuing a slab (SPLIT_N: in parts of the tile's width, or whole),
# the one their default does not take: verified as the default is, its one-slab-short twin refused.
OTHER_SPLITS = [(name, value) for name in FP8_KERNELS if "SPLIT_N" in builtin_kernels()[name].tunables
                for value in builtin_kernels()[name].tunables["SPLIT_N"].values
                if value != builtin_kernels()[name].tunables["SPLIT_N"].default]


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


def test_e4m3_rounding_is_torchs_bit_for_bit():
    torch = pytest.importorskip("torch")
    import cupy as cp

    from worker.arguments import half_arrays

    x = (torch.randn(1 << 20, device="cuda", generator=torch.Generator("cuda").manual_seed(3)) * 100).clamp(-448, 448)
    ours = half_arrays.rounded(cp, cp.asarray(x), "float8_e4m3")
    theirs = cp.asarray(x.to(torch.float8_e4m3fn).view(torch.uint8))
    assert int((ours != theirs).sum()) == 0


@pytest.mark.parametrize("output", ["input", "fp16"])
@pytest.mark.parametrize("size", [(4096, 4096, 4096), (1000, 1003, 997)], ids=lambda s: "x".join(map(str, s)))
def test_cublaslt_fp8_is_the_scaled_product_and_torchs_scaled_mm(runner, size, output):
    """cuBLASLt's FP8 GEMM with the scales, against the FP32 product of the same E4M3 numbers times
    the scales (within the FP8 bound) and against torch._scaled_mm on the same bytes (which calls
    cuBLASLt too), writing BF16 or FP16."""
    torch = pytest.importorskip("torch")
    import cupy as cp

    from worker.arguments import half_arrays
    from worker.measure.runner import Problem

    m, n, k = size
    case = builtin_case("cublas_fp8", m, n, k, seed=11)
    precision = Precision("fp8", output)
    problem = Problem(runner.device, case, case.form, precision)
    run = problem.cublas_call()
    run()
    cp.cuda.get_current_stream().synchronize()
    ours = half_arrays.as_float32(cp, run.out[:, :n])
    ref = runner.device.reference(problem.a, problem.b)
    rel = float(cp.linalg.norm(ours - ref) / cp.linalg.norm(ref))
    assert rel <= precision.default_tolerance(k), rel
    assert run.plan["call"] == "cublasLtMatmul" and run.plan["trans"] == "TN" and "id" in run.plan["algo"]
    assert run.plan["c_type"] == {"input": "CUDA_R_16BF", "fp16": "CUDA_R_16F"}[output]
    if m % 16 or n % 16 or k % 16:
        return  # torch._scaled_mm takes multiples of 16 only
    a = torch.as_tensor(problem.a_stored, device="cuda").view(torch.float8_e4m3fn)
    b = torch.as_tensor(problem.b_stored, device="cuda").view(torch.float8_e4m3fn)
    scale = torch.tensor(case.precision.tensor_scale, device="cuda")
    c_type = torch.float16 if output == "fp16" else torch.bfloat16
    theirs = torch._scaled_mm(a, b.t().contiguous().t(), scale_a=scale, scale_b=scale, out_dtype=c_type)
    mismatch = float((torch.as_tensor(run.out, device="cuda").view(c_type) != theirs).float().mean())
    print(json.dumps({"size": size, "rel_error": rel, "differs_from_scaled_mm": mismatch, "plan": run.plan}))
    assert mismatch <= 0.01, mismatch


@pytest.mark.parametrize("n", [4096, 8192])
def test_cublaslt_fp8_times_as_torchs_scaled_mm_within_2_percent(runner, n):
    """gemmwatch's FP8 baseline beside torch._scaled_mm timed by do_bench's method, sample for
    sample in gemmwatch's cold loop (tests/test_gpu_agreement.py says why they alternate)."""
    pytest.importorskip("torch")
    from tests.test_gpu_agreement import torch_beside_gemmwatch

    line = torch_beside_gemmwatch(runner, "fp8", n, TimingPolicy.from_settings(Settings()))
    line["ratio"] = line["torch_do_bench_flush_ms"] / line["gemmwatch_cublas_ms"]
    print(json.dumps(line))
    if os.environ.get("GEMMWATCH_BENCH_OUT"):
        with open(os.environ["GEMMWATCH_BENCH_OUT"] + ".agreement.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
    assert line["gemmwatch_samples"] >= 10 and abs(line["ratio"] - 1) <= 0.02, line


def test_there_is_an_fp8_kernel():
    assert FP8_KERNELS


@pytest.mark.parametrize("output", ["input", "fp32"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", FP8_KERNELS)
def test_fp8_kernel_is_verified_at_odd_and_skinny_sizes(runner, name, size, output):
    choice = variant_of(name, output)
    out = runner.run_case(Case(0, name, *size, 31, choice), POLICY)
    assert out.verified, out.error
    assert out.compute_mode == "fp8" and out.dtype == "float8_e4m3"
    assert out.rel_error <= choice.description.precision.default_tolerance(size[2])
    assert out.gflops > 0 and out.cublas_gflops > 0 and "cublasLtMatmul" in out.env["notes"][-1]
    assert out.env["cublas_plan"]["a_b_type"] == "CUDA_R_8F_E4M3"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_an_fp8_kernel_writing_an_fp16_c_is_verified_beside_cublaslt_writing_fp16(runner, size):
    choice = variant_of("fp8_naive", "fp16")
    out = runner.run_case(Case(0, "fp8_naive", *size, 31, choice), POLICY)
    assert out.verified, out.error
    assert out.env["precision"]["output"] == "float16" and out.env["cublas_plan"]["c_type"] == "CUDA_R_16F"
    assert out.rel_error <= choice.description.precision.default_tolerance(size[2]) and out.gflops > 0
    wrong = runner.run_case(Case(0, "fp8_naive", *size, 31, variant_of("fp8_naive", "fp16", GEMMWATCH_TEST_SKIP_SLAB=1)),
                            POLICY)
    assert not wrong.verified and "relative error" in (wrong.error or ""), wrong.error


@pytest.mark.parametrize("name", FP8_KERNELS)
def test_an_fp8_kernel_that_skips_one_k_slab_is_wrong_and_gets_no_speed(runner, name):
    out = runner.run_case(Case(0, name, 512, 512, 4096, 5, variant_of(name, GEMMWATCH_TEST_SKIP_SLAB=1)), POLICY)
    assert not out.verified and out.gflops is None and "relative error" in out.error


def test_the_fp8_tn_kernels_have_another_split_to_try():
    assert {name for name, _ in OTHER_SPLITS} >= {"fp8_wgmma_tn", "fp8_wgmma_tn_176", "fp8_wgmma_tn_192"}


@pytest.mark.parametrize("name,split", OTHER_SPLITS, ids=lambda v: str(v))
def test_an_fp8_kernel_split_the_other_way_is_verified_and_its_short_twin_refused(runner, name, split):
    for size in [(1000, 1003, 997), (256, 8, 4096), (1024, 1024, 1024), (512, 768, 4096)]:
        choice = KernelChoice(variant_of(name).description, {"SPLIT_N": split}, "builtin")
        out = runner.run_case(Case(0, name, *size, 31, choice), POLICY)
        assert out.verified, (size, out.error)
        assert out.rel_error <= choice.description.precision.default_tolerance(size[2]), size
    short = KernelChoice(variant_of(name, GEMMWATCH_TEST_SKIP_SLAB=1).description, {"SPLIT_N": split}, "builtin")
    out = runner.run_case(Case(0, name, 512, 512, 4096, 5, short), POLICY)
    assert not out.verified and out.gflops is None and "relative error" in out.error


@pytest.mark.parametrize("name", FP8_KERNELS)
def test_an_fp8_kernel_that_rounds_toward_zero_is_still_right(runner, name):
    nearest = runner.run_case(Case(0, name, 512, 512, 4096, 5, variant_of(name)), POLICY)
    toward_zero = runner.run_case(Case(0, name, 512, 512, 4096, 5, variant_of(name, GEMMWATCH_ROUND_TOWARD_ZERO=1)),
                                  POLICY)
    assert nearest.verified and toward_zero.verified, (nearest.error, toward_zero.error)
    assert toward_zero.rel_error > 1.5 * nearest.rel_error


def test_cublaslt_fp8_in_the_tn_form_reads_b_where_it_lies_and_gives_the_same_c(runner):
    """An FP8 kernel in the TN form (B column-major) is timed beside the same cuBLASLt call as one in
    the default form: B is already K-major, so the call reads the kernel's own B (no copy), and its C
    is the default form's, bit for bit, for the same numbers."""
    import cupy as cp

    from core.description.gemm_form import GemmForm
    from worker.measure.runner import Problem

    case = builtin_case("cublas_fp8", 512, 384, 1024, seed=11)
    default = Problem(runner.device, case, GemmForm(), case.precision)
    tn = Problem(runner.device, case, GemmForm(b="column"), case.precision)
    assert tn.b_in.flags.f_contiguous and not default.b_in.flags.f_contiguous
    calls = [p.cublas_call() for p in (default, tn)]
    for call in calls:
        call()
    cp.cuda.get_current_stream().synchronize()
    assert calls[1].b_t.data.ptr == tn.b_in.data.ptr and calls[0].b_t.data.ptr != default.b_in.data.ptr
    assert calls[1].plan["trans"] == "TN" and bool((calls[0].out == calls[1].out).all())
