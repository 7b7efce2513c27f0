"""FP16 and BF16 (issue 23) without a GPU: the precision in the kernel description, the rounding of
inputs and outputs, the tolerance and the peak formulas, and the product's runner judging half
kernels over the CPU double (tests/test_gpu_half.py runs the same kernels on the H100).

The double only supplies matrices in the types asked for (its kernels write C rounded to the
output type, as a GPU kernel stores it); the verdicts below are made by worker/measure/runner.py and
worker/measure/verify.py."""

import numpy as np
import pytest
from pydantic import ValidationError

from core.description.builtins import builtin_kernels
from core.description.kernel_description import KernelDescription
from core.description.precision import Precision, peak_tflops, unit_roundoff
from core.settings import Settings
from tests.descriptions import one_file
from tests.fake_gpu import CpuRunner
from worker.arguments import half_arrays
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


@pytest.fixture
def runner(monkeypatch):
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")  # an H100's, so the peak is known
    return CpuRunner()


def half_kernel(name: str, output: str = "input", marker: str = "") -> KernelChoice:
    desc = builtin_kernels()[name]
    files = {**desc.files, desc.source: marker + desc.files[desc.source]} if marker else desc.files
    return KernelChoice(desc.model_copy(update={"output": output, "files": files}), {}, "builtin")


# -- rounding ---------------------------------------------------------------------------
def test_bf16_rounds_to_nearest_with_ties_to_even_and_keeps_nan_and_inf():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -3.0, np.inf, -np.inf, np.nan], np.float32)
    bits = half_arrays.rounded(np, x, "bfloat16")
    assert bits.dtype == np.uint16
    back = half_arrays.as_float32(np, bits)
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8: to even (1 + 2^-6);
    # a hair above halfway goes up.
    assert back[:7].tolist() == [1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -3.0, np.inf, -np.inf]
    assert np.isnan(back[7])


def test_fp16_is_numpys_and_every_bf16_value_survives_the_round_trip():
    x = np.random.default_rng(3).random(1000, dtype=np.float32) * 2 - 1
    assert np.array_equal(half_arrays.rounded(np, x, "float16"), x.astype(np.float16))
    once = half_arrays.as_float32(np, half_arrays.rounded(np, x, "bfloat16"))
    assert np.array_equal(half_arrays.as_float32(np, half_arrays.rounded(np, once, "bfloat16")), once)
    assert np.max(np.abs(once - x) / np.abs(x)) <= unit_roundoff("bfloat16")


def test_a_column_major_matrix_stays_column_major_in_bf16():
    x = np.asfortranarray(np.random.default_rng(1).random((5, 7), dtype=np.float32))
    assert half_arrays.rounded(np, x, "bfloat16").flags.f_contiguous


# -- the description, tolerance and peak --------------------------------------------------
def test_the_precision_is_part_of_the_description():
    bf16 = builtin_kernels()["bf16_mma_sync"]
    assert bf16.precision.describe() == {"input": "bfloat16", "accumulate": "float32", "output": "bfloat16"}
    to_fp32 = bf16.model_copy(update={"output": "fp32"}).precision
    assert to_fp32.label() == "bf16->fp32" and to_fp32.output_type == "float32"
    with pytest.raises(ValidationError, match='output "fp32" is for fp16, bf16 and fp8 kernels'):
        KernelDescription.model_validate(one_file("k", "__global__ void k() {}", "k", [1], output="fp32"))
    with pytest.raises(ValidationError, match="compute_mode"):
        KernelDescription.model_validate(one_file("k", "__global__ void k() {}", "k", [1], compute_mode="fp4"))


def test_the_half_tolerance_is_two_output_roundings_plus_two_k_fp32_roundings():
    assert Precision("bf16").default_tolerance(4096) == pytest.approx(2 * 2**-8 + 2 * 4096 * 2**-24)
    assert Precision("fp16").default_tolerance(4096) == pytest.approx(2 * 2**-11 + 2 * 4096 * 2**-24)
    assert Precision("fp16", "fp32").default_tolerance(4096) == pytest.approx(2 * 2**-24 + 2 * 4096 * 2**-24)
    # One skipped 32-deep slab of K = 4096 is an error near sqrt(32 / 4096): far outside every bound.
    assert all(Precision(m, o).default_tolerance(4096) < (32 / 4096) ** 0.5 / 8
               for m in ("fp16", "bf16") for o in ("input", "fp32"))


def test_fp16_inputs_are_scaled_only_where_an_fp16_c_could_overflow():
    assert Precision("fp16").input_scale(4096) == 1.0 and Precision("bf16").input_scale(1 << 20) == 1.0
    s = Precision("fp16").input_scale(1 << 20)
    assert s * s * (1 << 20) == pytest.approx(32768) and Precision("fp16").sentinel() == 65504.0


def test_the_peak_is_sms_times_clock_times_operations_per_clock():
    assert peak_tflops("9.0", "bf16", 132, 1830) == pytest.approx(989.4, rel=1e-3)  # NVIDIA's H100 SXM figure
    assert peak_tflops("9.0", "fp32", 132, 1980) == pytest.approx(66.9, rel=1e-3)
    assert peak_tflops("8.0", "fp16", 108, 1410) == pytest.approx(312, rel=1e-2)  # A100
    assert peak_tflops("7.5", "bf16", 40, 1590) is None  # Turing has no BF16 tensor cores
    assert peak_tflops("6.1", "fp32", 20, 1733) == pytest.approx(8.87, rel=1e-3)  # GTX 1080: 128 lanes


# -- the runner over the double -------------------------------------------------------------
@pytest.mark.parametrize("output", ["input", "fp32"])
@pytest.mark.parametrize("name", ["bf16_mma_sync", "fp16_mma_sync"])
def test_a_half_kernel_is_verified_timed_beside_cublas_in_its_precision_and_given_its_peak(runner, name, output):
    choice = half_kernel(name, output)
    out = runner.run_case(Case(0, name, 100, 103, 97, 7, choice), POLICY)
    precision = choice.description.precision
    assert out.verified, out.error
    assert out.compute_mode == precision.compute_mode and out.dtype == precision.input_type
    assert out.env["precision"]["output"] == precision.output_type
    assert 0 < out.rel_error <= precision.default_tolerance(97)
    assert out.gflops > 0 and out.cublas_gflops > 0 and out.pct_of_cublas > 0
    peak = out.env["peak"]
    assert peak["tflops"] == pytest.approx(132 * 1980e6 * 4096 / 1e12)
    assert peak["pct"] == pytest.approx(100 * out.gflops / 1e3 / peak["tflops"])


def test_a_half_kernel_that_drops_a_k_column_is_wrong_and_gets_no_speed(runner, monkeypatch):
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "bf16_mma_sync")
    out = runner.run_case(Case(0, "bf16_mma_sync", 100, 103, 97, 7, half_kernel("bf16_mma_sync")), POLICY)
    assert not out.verified and out.gflops is None and out.pct_of_cublas is None
    assert out.error.startswith("wrong result: relative error")


@pytest.mark.parametrize("name", ["bf16_mma_sync", "fp16_mma_sync"])
def test_a_half_kernel_that_rounds_c_toward_zero_is_right_though_further_off(runner, name):
    nearest = runner.run_case(Case(0, name, 64, 64, 256, 3, half_kernel(name)), POLICY)
    truncating = runner.run_case(Case(0, name, 64, 64, 256, 3, half_kernel(name, marker="#define FAKE_GPU_TRUNCATE 1\n")),
                                 POLICY)
    assert nearest.verified and truncating.verified, (nearest.error, truncating.error)
    assert truncating.rel_error > 1.5 * nearest.rel_error


def test_an_unwritten_element_of_a_half_c_is_found_by_its_sentinel(runner):
    out = runner.run_case(Case(0, "fp16_mma_sync", 30, 20, 10, 3,
                               half_kernel("fp16_mma_sync", marker="#define FAKE_GPU_UNWRITTEN 5\n")), POLICY)
    assert not out.verified
    assert out.error.startswith("wrong result: 5 of 600 elements of C never written (C was filled with 65504")


@pytest.mark.parametrize("variant, precision", [("cublas_bf16", "bf16"), ("cublas_fp16", "fp16"),
                                                ("cublas_tf32", "tf32"), ("cublas", "fp32")])
def test_cublas_alone_runs_in_the_precision_its_variant_names(runner, variant, precision):
    out = runner.run_case(builtin_case(variant, 64, 48, 32, seed=2), POLICY)
    assert out.verified and out.compute_mode == precision and out.cublas_gflops > 0


def test_a_posted_result_says_its_precision_consistently():
    from api.posted_schemas import ResultIn

    row = {"variant": "mine", "m": 8, "n": 8, "k": 8, "verified": True}
    assert ResultIn.model_validate({**row, "dtype": "bfloat16", "compute_mode": "bf16"}).dtype == "bfloat16"
    with pytest.raises(ValidationError, match="dtype float32 does not fit compute_mode bf16"):
        ResultIn.model_validate({**row, "compute_mode": "bf16"})
