"""A kernel's precision: what its inputs are, what it accumulates in, what it writes, and what
that means for its correctness bound and for the GPU's peak.

`compute_mode` (in the kernel description) names the inputs and the math:
  fp32  FP32 inputs, FP32 FMA (CUDA cores); baseline cuBLAS SGEMM with TF32 off
  tf32  FP32 inputs rounded to TF32 on the tensor cores; baseline cuBLAS SGEMM with TF32 allowed
  fp16  FP16 inputs, FP32 accumulate (tensor cores); baseline cublasGemmEx in FP16, FP32 compute
  bf16  BF16 inputs, FP32 accumulate; baseline cublasGemmEx in BF16, FP32 compute
  fp8   FP8 E4M3 inputs with a per-tensor scale each, FP32 accumulate; baseline cublasLtMatmul
        with the two scales (worker/gpu/cublaslt_fp8.py)
and `output` the type of C: "input" (the inputs' type; FP32 for fp32 and tf32; BF16 for fp8, as
an FP8 C would need a scale and an amax of its own), "fp32", or for fp8 "fp16" (an FP16 C, as
many FP8 inference kernels write it; cuBLASLt's FP8 GEMM writes FP16 too). Alpha and beta are
FP32 in every mode.

FP8's per-tensor scales: A and B are drawn in [-1, 1) and divided by TENSOR_SCALE before they are
rounded to E4M3, so they use its range; A's value is the stored E4M3 number times the scale. The
scale is a power of two, so the values the reference multiplies (stored number x scale) are exact
in FP32. A kernel gets alpha x scale_A x scale_B as its alpha (the scales folded into the one
factor every kernel already applies), cuBLASLt the scales by pointer, as an FP8 GEMM is usually
called.

FP8's block scales (`scales`, DeepSeek-V3's recipe, as inference repositories carry it): A has one
scale per row and 128-deep slab of K ("1x128"), B one per 128 x 128 block ("128x128") or per column
and slab ("1x128"). The kernel reads them from two FP32 arrays (scale_A, scale_B among its args),
A's [M, ceil(K/128)] and B's [ceil(N/128), ceil(K/128)] (or [N, ceil(K/128)]), each row-major, as
DeepSeek-V3's and vLLM's kernels take them; worker/arguments/block_scales.py draws them (powers of
two, so the values stay exact) and the baseline is cuBLASLt's own block scaling.
"""

from dataclasses import dataclass
from typing import Any, Literal

ComputeMode = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
COMPUTE_MODES: tuple[str, ...] = ComputeMode.__args__  # type: ignore[attr-defined]
# The storage type of A and B per compute mode.
INPUT_TYPE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3"}
HALF_MODES = ("fp16", "bf16")
# Modes whose C may be "input" or "fp32" (the rest write FP32 already).
NARROW_MODES = ("fp16", "bf16", "fp8")
# The C types `output` may name besides "input", and the modes that may name each.
OUTPUT_TYPES = {"fp32": "float32", "fp16": "float16"}
OUTPUT_MODES = {"fp32": NARROW_MODES, "fp16": ("fp8",)}
# Significand bits, the implicit one included: a value rounded to nearest is within 2^-bits of
# itself, relatively (the unit roundoff).
SIGNIFICAND_BITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float8_e4m3": 4}
# Bytes per element of each type.
TYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3": 1}
# The largest finite value of each type (bfloat16 keeps float32's exponent range; E4M3 has no
# infinity and saturates at 448).
LARGEST = {"float32": 3.4028234663852886e38, "float16": 65504.0, "bfloat16": 3.3895313892515355e38,
           "float8_e4m3": 448.0}
# FP8's per-tensor scale: [-1, 1) / 2^-8 = [-256, 256), inside E4M3's +-448, every value a normal
# number or zero down to 2^-6 x 2^-8.
TENSOR_SCALE = {"fp8": 2.0**-8}
# Hopper's FP8 tensor cores add each 32-deep product into the accumulator keeping about 14 bits
# of it, not FP32's 24 (DeepSeek-V3 technical report, section 3.3.2, measured on H800).
FP8_MMA_K = 32
FP8_ACCUMULATE_BITS = 14
# FP8's block scales: the side of a scale's block along K (and along N for B's 128 x 128 blocks).
SCALE_BLOCK = 128
# `scales` as results name them -> each operand's block, (rows, columns) of A (M x K) and of B taken
# N x K (the way its scales are laid: per column of B, along K). "tensor": one scale each.
BLOCK_SCALES = {"1x128,128x128": ((1, SCALE_BLOCK), (SCALE_BLOCK, SCALE_BLOCK)),
                "1x128,1x128": ((1, SCALE_BLOCK), (1, SCALE_BLOCK))}


def unit_roundoff(dtype: str) -> float:
    return 2.0 ** -SIGNIFICAND_BITS[dtype]


@dataclass(frozen=True)
class Precision:
    compute_mode: str
    output: str = "input"
    accumulate: str = "fp32"  # "fp16": FP16 sums (fp16 kernels, C in FP16 or FP32; core/description/gemm_form.py)
    # FP8: whether A and B carry per-tensor scales. A kernel that takes no alpha (C = A·B, Triton's
    # tutorials) has nowhere to apply them: its inputs are drawn unscaled, and cuBLASLt gets 1s.
    scaled: bool = True
    # FP8: "tensor" (one scale for A, one for B) or a key of BLOCK_SCALES ("1x128,128x128").
    scales: str = "tensor"

    @property
    def input_type(self) -> str:
        return INPUT_TYPE[self.compute_mode]

    @property
    def output_type(self) -> str:
        if self.output in OUTPUT_TYPES:
            return OUTPUT_TYPES[self.output]
        return "bfloat16" if self.fp8 else self.input_type

    @property
    def half(self) -> bool:
        return self.compute_mode in HALF_MODES

    @property
    def fp16_accumulate(self) -> bool:
        return self.accumulate == "fp16"

    @property
    def baseline_fp16_sums(self) -> bool:
        """Whether cuBLAS sums in FP16 too (CUBLAS_COMPUTE_16F). It does only where C is FP16: that
        compute type writes no other C. A kernel of FP16 sums that writes FP32 (FP16 partial sums
        added into FP32, spatters/mma-matmul's kernels 3.2-3.4) is timed beside the one cuBLAS GEMM
        writing FP32 from FP16 inputs, FP32 compute, and checked with FP16 sums' bound all the same."""
        return self.fp16_accumulate and self.output_type == "float16"

    @property
    def fp8(self) -> bool:
        return self.compute_mode == "fp8"

    @property
    def block_scaled(self) -> bool:
        return self.scales in BLOCK_SCALES

    @property
    def storage_scale(self) -> float:
        """What A's and B's values are divided by before they are rounded to the input type, so E4M3
        holds them near its range (FP8 with scales of either kind); 1 elsewhere."""
        return TENSOR_SCALE.get(self.compute_mode, 1.0) if self.scaled or self.block_scaled else 1.0

    @property
    def tensor_scale(self) -> float:
        """FP8's per-tensor scale of each of A and B (the storage scale, folded into the kernel's
        alpha and given to cuBLASLt); 1 elsewhere, and with block scales, which carry it themselves."""
        return 1.0 if self.block_scaled else self.storage_scale

    def scale_shapes(self, m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The shapes of scale_A ([M rows, K slabs]) and scale_B ([N rows or blocks, K slabs]), row-major."""
        (a_rows, a_cols), (b_rows, b_cols) = BLOCK_SCALES[self.scales]
        return ((-(-m // a_rows), -(-k // a_cols)), (-(-n // b_rows), -(-k // b_cols)))

    def label(self) -> str:
        """How results name it: "bf16" (BF16 in and out), "bf16->fp32", "fp32", "tf32", "fp8" (E4M3
        in, BF16 out), "fp8->fp32", "fp8->fp16"."""
        named = self.output in OUTPUT_TYPES and self.compute_mode in OUTPUT_MODES[self.output]
        return f"{self.compute_mode}->{self.output}" if named else self.compute_mode

    def describe(self) -> dict:
        d: dict[str, Any] = {"input": self.input_type, "accumulate": "float16" if self.fp16_accumulate else "float32",
             "output": self.output_type}
        if self.block_scaled:
            d["scales"] = dict(zip(("A", "B"), self.scales.split(",")))
        elif self.fp8:
            d["scale_a"] = d["scale_b"] = self.tensor_scale
        return d

    def default_tolerance(self, k: int) -> float:
        """The largest relative Frobenius error a correct kernel can show against the reference,
        which is the exact-ish product (FP32 cuBLAS, or FP64 on the CPU) of the same rounded inputs,
        so rounding A and B costs nothing here. What is left:
          - writing C: each element rounded to the output type, relatively within u_out (round to
            nearest) or 2 u_out (a kernel that truncates);
          - accumulating K products in FP32: each addition within u_32 of its partial sum. With
            the partial sums near sqrt(k)/3 for uniform [-1, 1) inputs and |C| near sqrt(K)/3, the
            errors' sum relative to C is at most about K u_32 even when every one leans the same
            way (truncating tensor-core adders), and near sqrt(K) u_32 when they do not.
        So 2 u_out + 2 K u_32: at K = 4096, 2.5e-4 for FP32 output, 1.2e-3 for FP16, 8.3e-3 for
        BF16. A kernel that drops one 32-deep k-slab of K = 4096 is off by sqrt(32/4096) = 8.8e-2.
        FP32 and TF32 keep their fixed bounds (1e-4 and 2e-3), measured on the ladder.

        FP8: the same output term, and for the accumulation one step of at most 2^-14 of the
        running sum (FP8_ACCUMULATE_BITS) per 32-deep tensor-core product, as a kernel may keep
        all of K in the tensor cores' accumulator: 2 u_out + 2 (K / 32) 2^-14. At K = 4096 with a
        BF16 C that is 2.3e-2; a kernel that drops one 32-deep slab is off by 8.8e-2 there, 6.2e-2
        at K = 8192 (bound 3.9e-2)."""
        if self.fp16_accumulate:
            return fp16_accumulate_tolerance(k)
        if self.fp8:
            steps = -(-k // FP8_MMA_K)
            return 2 * unit_roundoff(self.output_type) + 2 * steps * 2.0**-FP8_ACCUMULATE_BITS
        if not self.half:
            return {"fp32": 1e-4, "tf32": 2e-3}[self.compute_mode]
        return 2 * unit_roundoff(self.output_type) + 2 * k * unit_roundoff("float32")

    def input_scale(self, k: int) -> float:
        """Inputs are uniform in [-s, s): with s = 1, |C| <= K, which FP16 cannot hold past 65504.
        For an FP16 C, s^2 K <= 32768 keeps every element of alpha A B + beta C (alpha = 0.75,
        beta = -0.5, |C| < 1) below FP16's largest value, so the sentinel stays unreachable."""
        if self.output_type != "float16" or k <= 32768:
            return 1.0
        return (32768 / k) ** 0.5

    def sentinel(self) -> float:
        """What C is filled with to find elements a kernel never writes: a value of C's type no
        result of these inputs comes near (3e38 in FP32 and BF16; FP16's largest, 65504)."""
        return {"float32": 3.0e38, "bfloat16": 3.00405527047391e38, "float16": 65504.0}[self.output_type]


# FP32 lanes per SM: 128 from Pascal GP10x on, except the data-centre parts that spend the area on
# FP64 instead (P100, V100, T4-era Turing and A100 have 64). An FMA is two flops.
_FP32_LANES_64 = {"6.0", "7.0", "7.2", "7.5", "8.0"}
# Dense tensor-core flops per SM per clock with FP32 accumulate, by compute capability (NVIDIA's
# architecture whitepapers: V100, T4, A100, A10/L40, H100).
TENSOR_FLOPS_PER_SM_PER_CLOCK = {
    "7.0": {"fp16": 1024},
    "7.5": {"fp16": 1024},
    "8.0": {"tf32": 1024, "fp16": 2048, "bf16": 2048},
    "8.6": {"tf32": 512, "fp16": 1024, "bf16": 1024},
    "8.9": {"tf32": 512, "fp16": 1024, "bf16": 1024},
    "9.0": {"tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192},
}


def flops_per_sm_per_clock(compute_capability: str | None, compute_mode: str) -> int | None:
    if compute_mode == "fp32":
        return 2 * (64 if compute_capability in _FP32_LANES_64 else 128)
    return TENSOR_FLOPS_PER_SM_PER_CLOCK.get(compute_capability or "", {}).get(compute_mode)


def peak_tflops(compute_capability: str | None, compute_mode: str, sm_count: int | None,
                sm_clock_mhz: float | None) -> float | None:
    """SMs x clock x flops per SM per clock: the H100 SXM at 1980 MHz, 132 SMs: FP32 66.9,
    TF32 535, FP16/BF16 1070, FP8 2141 TFLOPS (NVIDIA's 989 for FP16 and 1979 for FP8 are at the
    1830 MHz boost clock). None
    where a figure is missing or the GPU's tensor cores are not in the table."""
    per_clock = flops_per_sm_per_clock(compute_capability, compute_mode)
    if per_clock is None or not sm_count or not sm_clock_mhz:
        return None
    return sm_count * sm_clock_mhz * 1e6 * per_clock / 1e12


def fp16_accumulate_tolerance(k: int) -> float:
    """The bound for FP16 sums (a `half` accumulator: WMMA's, mma .f16.f16.f16.f16's, a scalar
    `half sum`), against the exact product of the same FP16 inputs.

    FP32's bound (2 K u_32) assumes every error leans the same way; at u_16 = 2^-11 that is
    2 K u_16 = 4 at K = 4096, no bound at all. What a correct FP16-sum kernel does: it rounds its
    running sum S_j to FP16 once per step (per product for a scalar sum, per 16-deep tensor-core
    product for WMMA and mma), an error uniform within half an FP16 spacing of S_j (RN), so of
    variance about u_16^2 S_j^2 / 3. For inputs uniform in [-1, 1), S_j^2 is about j/9 and |C|^2
    about K/9; summed over K steps the errors, relative to C, have a standard deviation of about
    u_16 sqrt(K/6): 1.3e-2 at K = 4096 for a per-product sum, less for tensor cores' fewer steps.
    The bound is 2 u_16 sqrt(K) + 2 u_16 (writing C): 6.3e-2 at K = 4096, five times that spread;
    on the H200 CUBLAS_COMPUTE_16F read 2.4e-3 there and a per-product `half` sum (cuda_hgemm's
    simt_naive) 9.4e-3 (docs/BENCHMARKS.md). A kernel
    that drops one 32-deep slab of K = 4096 is off by sqrt(32/4096) = 8.8e-2, one that drops a
    16-deep one at K = 1024 by 1.25e-1 (bound 3.2e-2)."""
    u16 = unit_roundoff("float16")
    return 2 * u16 * k**0.5 + 2 * u16
