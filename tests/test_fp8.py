"""FP8 (E4M3 inputs with per-tensor scales, FP32 accumulate, BF16, FP32 or FP16 C) without a GPU: the
rounding to E4M3, the precision's scales, tolerance and peak, the product's runner judging FP8
kernels over the CPU double, and FP8 through the API and the dashboard's filters
(tests/test_gpu_fp8.py runs the kernels and cuBLASLt on the H100)."""

import numpy as np
import pytest
from pydantic import ValidationError

from core.description.builtins import builtin_kernels
from core.description.kernel_description import KernelDescription
from core.description.precision import Precision, peak_tflops
from core.settings import Settings
from tests.descriptions import builtin_variant, one_file
from tests.fake_gpu import CpuRunner
from worker.arguments import half_arrays
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def every_e4m3_value() -> np.ndarray:
    """The 254 finite E4M3 numbers, from their definition (sign, 4-bit exponent biased by 7,
    3-bit fraction; exponent 0 subnormal; S.1111.111 is NaN), not from the code under test."""
    values = []
    for sign in (1.0, -1.0):
        for exponent in range(16):
            for fraction in range(8):
                if exponent == 15 and fraction == 7:
                    continue
                if exponent == 0:
                    values.append(sign * fraction / 8 * 2.0**-6)
                else:
                    values.append(sign * (1 + fraction / 8) * 2.0 ** (exponent - 7))
    return np.array(values, dtype=np.float64)


# -- rounding -------------------------------------------------------------------------------
def test_every_finite_e4m3_bit_pattern_reads_as_its_value_and_rounds_back_to_itself():
    bits = np.array([b for b in range(256) if b & 0x7F != 0x7F], dtype=np.uint8)
    values = half_arrays.as_float32(np, bits)
    expected = np.array([(-1.0 if b & 0x80 else 1.0) * ((b & 7) / 8 * 2.0**-6 if (b >> 3) & 15 == 0
                                                         else (1 + (b & 7) / 8) * 2.0 ** (((b >> 3) & 15) - 7))
                         for b in bits.tolist()])
    assert np.array_equal(values.astype(np.float64), expected)
    assert np.array_equal(half_arrays.rounded(np, values, "float8_e4m3"), bits)
    assert half_arrays.type_of(bits) == "float8_e4m3" and values.max() == 448.0


def test_e4m3_rounding_goes_to_the_nearest_value_with_ties_to_even_and_saturates_at_448():
    table = np.unique(every_e4m3_value())
    x = (np.random.default_rng(5).standard_normal(20_000) * 128).astype(np.float32)
    got = half_arrays.as_float32(np, half_arrays.rounded(np, x, "float8_e4m3")).astype(np.float64)
    inside = np.abs(x) <= 448
    nearest_distance = np.min(np.abs(x[inside, None].astype(np.float64) - table[None, :]), axis=1)
    assert np.array_equal(np.abs(got[inside] - x[inside]), nearest_distance)
    assert np.all(np.abs(got[~inside]) == 448.0) and np.any(~inside)
    # Halfway cases: 1.0625 between 1 and 1.125 goes to 1 (even fraction), 1.1875 to 1.25,
    # 248 between 240 and 256 to 256, 3 x 2^-10 between two subnormals to the even one.
    halfway = np.array([1.0625, 1.1875, 248.0, -248.0, 3 * 2.0**-10, 2.0**-10], dtype=np.float32)
    back = half_arrays.as_float32(np, half_arrays.rounded(np, halfway, "float8_e4m3"))
    assert back.tolist() == [1.0, 1.25, 256.0, -256.0, 2 * 2.0**-9, 0.0]


def test_a_column_major_matrix_stays_column_major_in_e4m3():
    x = np.asfortranarray(np.random.default_rng(1).random((5, 7), dtype=np.float32))
    assert half_arrays.rounded(np, x, "float8_e4m3").flags.f_contiguous


# -- the precision ----------------------------------------------------------------------------
def test_fp8_is_e4m3_in_with_a_power_of_two_scale_each_and_bf16_or_fp32_out():
    fp8 = builtin_kernels()["fp8_naive"].precision
    assert fp8.describe() == {"input": "float8_e4m3", "accumulate": "float32", "output": "bfloat16",
                              "scale_a": 2.0**-8, "scale_b": 2.0**-8}
    assert fp8.label() == "fp8" and Precision("fp8", "fp32").label() == "fp8->fp32"
    assert Precision("fp8", "fp16").output_type == "float16" and Precision("fp8", "fp16").label() == "fp8->fp16"
    assert Precision("fp8", "fp32").output_type == "float32" and fp8.sentinel() == pytest.approx(3.004e38, rel=1e-3)
    # [-1, 1) over the scale is [-256, 256): inside E4M3's +-448 with no saturation.
    assert 1 / fp8.tensor_scale <= 448 and np.log2(fp8.tensor_scale).is_integer()


def test_the_fp8_tolerance_allows_a_14_bit_accumulator_and_still_catches_a_skipped_slab():
    assert Precision("fp8").default_tolerance(4096) == pytest.approx(2 * 2**-8 + 2 * 128 * 2**-14)
    for k in (256, 1024, 4096, 8192):
        assert Precision("fp8").default_tolerance(k) < (32 / k) ** 0.5  # one 32-deep slab dropped
    assert Precision("fp8").default_tolerance(4096) > Precision("bf16").default_tolerance(4096)


def test_the_fp8_peak_is_twice_the_16_bit_one_on_hopper_and_unknown_before():
    assert peak_tflops("9.0", "fp8", 132, 1830) == pytest.approx(1979, rel=1e-3)  # NVIDIA's H100 SXM figure
    assert peak_tflops("8.0", "fp8", 108, 1410) is None  # A100: no FP8 tensor cores


# -- the runner over the double -----------------------------------------------------------------
@pytest.fixture
def runner(monkeypatch):
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")
    return CpuRunner()


def fp8_kernel(output: str = "input", marker: str = "") -> KernelChoice:
    return builtin_variant("fp8_naive", output, marker)


@pytest.mark.parametrize("output, c_type", [("input", "bfloat16"), ("fp32", "float32"), ("fp16", "float16")])
@pytest.mark.parametrize("size", [(64, 48, 40), (100, 103, 97), (128, 128, 256)])
def test_an_fp8_kernel_is_verified_with_its_scales_in_alpha_and_timed_beside_cublas_fp8(runner, output, c_type, size):
    choice = fp8_kernel(output)
    out = runner.run_case(Case(0, "fp8_naive", *size, 7, choice), POLICY)
    assert out.verified, out.error
    assert out.compute_mode == "fp8" and out.dtype == "float8_e4m3" and out.env["precision"]["output"] == c_type
    assert out.env["precision"]["scale_a"] == 2.0**-8
    assert out.rel_error <= Precision("fp8", output).default_tolerance(size[2])
    assert out.gflops > 0 and out.cublas_gflops > 0 and out.env["peak"]["tflops"] == pytest.approx(132 * 1980e6 * 8192 / 1e12)


def test_an_fp8_kernel_given_alpha_without_the_scales_is_wrong(runner, monkeypatch):
    """The scales reach a kernel folded into alpha: a kernel that left them out (here, handed alpha
    as it was) reads 2^16 times too large, and the gate says so."""
    from worker.measure.runner import Problem

    monkeypatch.setattr(Problem, "kernel_call", lambda self, function, launch, c, alpha, beta: self.device.kernel_call(
        function, launch, self.m, self.n, self.k, self.a_in, self.b_in, c, alpha, beta))
    wrong = runner.run_case(Case(0, "fp8_naive", 64, 64, 64, 7, fp8_kernel()), POLICY)
    assert not wrong.verified and wrong.gflops is None
    assert wrong.error.startswith("wrong result: relative error"), wrong.error


def test_an_fp8_kernel_that_drops_a_k_column_is_wrong_and_gets_no_speed(runner, monkeypatch):
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "fp8_naive")
    out = runner.run_case(Case(0, "fp8_naive", 100, 96, 256, 7, fp8_kernel()), POLICY)
    assert not out.verified and out.gflops is None and out.pct_of_cublas is None
    assert out.error.startswith("wrong result: relative error")


def test_an_fp8_kernel_that_rounds_c_toward_zero_is_right_though_further_off(runner):
    nearest = runner.run_case(Case(0, "fp8_naive", 64, 64, 256, 3, fp8_kernel()), POLICY)
    truncating = runner.run_case(Case(0, "fp8_naive", 64, 64, 256, 3, fp8_kernel(marker="#define FAKE_GPU_TRUNCATE 1\n")),
                                 POLICY)
    assert nearest.verified and truncating.verified, (nearest.error, truncating.error)
    assert truncating.rel_error > 1.5 * nearest.rel_error


def test_cublas_fp8_alone_runs_in_fp8(runner):
    out = runner.run_case(builtin_case("cublas_fp8", 64, 48, 32, seed=2), POLICY)
    assert out.verified and out.compute_mode == "fp8" and out.dtype == "float8_e4m3" and out.cublas_gflops > 0


@pytest.mark.parametrize("cc", ["8.0", "7.5"])
def test_fp8_before_compute_capability_8_9_is_not_applicable(monkeypatch, cc):
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", cc)
    for case in (builtin_case("cublas_fp8", 64, 64, 64), Case(0, "fp8_naive", 64, 64, 64, 1, fp8_kernel())):
        out = CpuRunner().run_case(case, POLICY)
        assert out.not_applicable and not out.verified
        assert out.error == f"not applicable: FP8 tensor cores came with compute capability 8.9; this GPU has {cc}"


# -- descriptions, posted results, the dashboard ---------------------------------------------------
def test_a_description_says_fp8_and_may_ask_for_an_fp32_or_an_fp16_c():
    src = "#include <cuda_fp8.h>\n__global__ void k() {}"
    desc = KernelDescription.model_validate(one_file("k", src, "k", [1], compute_mode="fp8", output="fp32"))
    assert desc.precision.output_type == "float32"
    desc = KernelDescription.model_validate(one_file("k", src, "k", [1], compute_mode="fp8", output="fp16"))
    assert desc.precision.output_type == "float16" and desc.precision.label() == "fp8->fp16"
    with pytest.raises(ValidationError, match="compute_mode"):
        KernelDescription.model_validate(one_file("k", src, "k", [1], compute_mode="e4m3"))


def test_a_posted_fp8_result_says_its_input_type_consistently():
    from api.posted_schemas import ResultIn

    row = {"variant": "mine", "m": 8, "n": 8, "k": 8, "verified": True}
    got = ResultIn.model_validate({**row, "dtype": "float8_e4m3", "compute_mode": "fp8",
                                   "env": {"precision": {"input": "float8_e4m3", "output": "bfloat16",
                                                         "scale_a": 0.5, "scale_b": 0.25}}})
    assert got.env.precision.scale_b == 0.25
    with pytest.raises(ValidationError, match="dtype bfloat16 does not fit compute_mode fp8"):
        ResultIn.model_validate({**row, "dtype": "bfloat16", "compute_mode": "fp8"})
    with pytest.raises(ValidationError, match="scale_a"):
        ResultIn.model_validate({**row, "dtype": "float8_e4m3", "compute_mode": "fp8",
                                 "env": {"precision": {"scale_a": -1.0}}})


@pytest.mark.parametrize("change, refused", [
    ({"compute_mode": "FP8"}, "compute_mode"),
    ({"compute_mode": " fp8"}, "compute_mode"),
    ({"compute_mode": "fp8_e5m2"}, "compute_mode"),
    ({"compute_mode": "fp8", "output": "bf16"}, "output"),
    ({"compute_mode": "fp8", "output": "input ", }, "output"),
    ({"compute_mode": "bf16", "output": "fp16"}, 'output "fp16" is for fp8 kernels; a kernel in bf16 has no cuBLAS GEMM'),
    ({"compute_mode": "fp16", "output": "fp16"}, r'a kernel in fp16 writes FP16 already \(leave output as "input"\)'),
    ({"compute_mode": "fp32", "output": "fp32"}, r'a kernel in fp32 writes FP32 already'),
    ({"compute_mode": "tf32", "output": "fp16"}, 'output "fp16" is for fp8 kernels'),
])
def test_fp8_descriptions_that_try_to_slip_past_are_refused_by_name(change, refused):
    src = "#include <cuda_fp8.h>\n__global__ void k() {}"
    with pytest.raises(ValidationError, match=refused):
        KernelDescription.model_validate(one_file("k", src, "k", [1], **change))


@pytest.mark.parametrize("plan, refused", [
    ({"trans": "tn"}, "trans"),
    ({"algo": {"id": 1 << 40}}, "id"),
    ({"padded_n_k": [16, 16, 16]}, "padded_n_k"),
    ({"padded_n_k": [0, 16]}, "padded_n_k"),
    ({"waves": float("nan")}, "waves"),
    ({"call": "x" * 41}, "call"),
])
def test_a_posted_cublas_plan_out_of_its_bounds_is_refused(plan, refused):
    from api.posted_schemas import ResultIn

    good = {"call": "cublasLtMatmul", "compute_type": "CUBLAS_COMPUTE_32F", "scale_type": "CUDA_R_32F",
            "a_b_type": "CUDA_R_8F_E4M3", "c_type": "CUDA_R_16BF", "trans": "TN", "algo": {"id": 66}}
    row = {"variant": "mine", "m": 8, "n": 8, "k": 8, "verified": True, "dtype": "float8_e4m3", "compute_mode": "fp8"}
    assert ResultIn.model_validate({**row, "env": {"cublas_plan": good}}).env.cublas_plan.algo.id == 66
    with pytest.raises(ValidationError, match=refused):
        ResultIn.model_validate({**row, "env": {"cublas_plan": {**good, **plan}}})


@pytest.mark.parametrize("layout", ["row", "column"])
def test_an_e4m3_matrix_gets_a_tensor_map_of_bytes_where_its_lines_allow(layout):
    """An E4M3 map is a map of bytes (UINT8: the TMA only moves them). Its line is K bytes for A,
    and for a column-major B (the TN form): K must be a multiple of 16 where BF16 needs 8. (Before
    E4M3 had a map, such a description got through validation and failed as a KeyError.)"""
    from worker.arguments import tensor_maps

    src = "#include <cuda_fp8.h>\n__global__ void k() {}"
    desc = KernelDescription.model_validate(one_file(
        "k", src, "k", [1], compute_mode="fp8", layout={"A": "row", "B": "col", "C": "row"},
        args=["M", "N", "K", "alpha", "A", "B", "beta", "C", "A_map", "B_map"],
        tensor_maps={"A": {"box": [128, 128], "swizzle": 128}, "B": {"box": [128, 128], "swizzle": 128}}))
    assert set(desc.tensor_maps) == {"A", "B"} and desc.form.key() == "rcr"
    matrix = "A" if layout == "row" else "B"  # both K-major: lines of K bytes
    made = tensor_maps.request(matrix, layout, 1000, 1000, 1024, 1 << 20, "float8_e4m3", (128, 128, 128))
    assert made is not None and made.line_bytes == 1024 and made.dims == (1024, 1000)
    assert tensor_maps._DATA_TYPE[made.data_type] == 0  # CU_TENSOR_MAP_DATA_TYPE_UINT8
    assert tensor_maps.request(matrix, layout, 1000, 1000, 1000, 1 << 20, "float8_e4m3", (128, 128, 128)) is None
    assert tensor_maps.request(matrix, layout, 1000, 1000, 1000, 1 << 20, "bfloat16", (64, 128, 128)) is not None
    # a row-major B's line is N bytes
    assert tensor_maps.request("B", "row", 1000, 1008, 1000, 1 << 20, "float8_e4m3", (128, 128, 128)).dims == (1008, 1000)

