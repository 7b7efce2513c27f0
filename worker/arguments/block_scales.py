"""FP8's block scales (core/description/precision.py) for one case: drawn, applied to A's and B's
stored values (what the reference multiplies), and laid out as cuBLASLt's block scaling reads them.
Array code only, NumPy's or CuPy's (`xp`): the CPU double and the GPU run the same functions.

The kernel's arrays are DeepSeek-V3's and vLLM's: scale_A [M, ceil(K/128)] and scale_B
[ceil(N/128), ceil(K/128)] ("128x128") or [N, ceil(K/128)] ("1x128"), FP32, row-major, a row's
K-slabs side by side. cuBLASLt (13.1, on the H200; docs/BENCHMARKS.md) reads its operand's scales
as it found them there:
  - 1x128 (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F): [ceil(K/128), rows], the rows side by side;
  - 128x128 (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F): [ceil(rows/128), ceil(K/128)], the
    K-slabs side by side.
It was seen to do so where the rows are a multiple of 4 and the K-slabs too (16 bytes), and the call
(worker/gpu/cublaslt_fp8.py) pads to those, so no other stride has to be guessed.
"""

from core.description.description_fields import SCALE_ARGS
from core.description.precision import BLOCK_SCALES, Precision

# Each block's scale is the storage scale times one of these: powers of two, so every value the
# reference multiplies stays exact in FP32, and unlike from block to block, so a kernel that reads
# another block's scale (its row's neighbour, B's array transposed) is off by far more than its bound.
FACTORS = (0.5, 1.0, 2.0)
ROLES = SCALE_ARGS  # the kernel's arguments they are, A's then B's


def draw(device, precision: Precision, m: int, n: int, k: int, seed: int) -> dict:
    """scale_A and scale_B for a case, from its seed: FP32, row-major, the shapes precision.scale_shapes says."""
    xp = device.xp
    drawn = {}
    for i, (role, (rows, cols)) in enumerate(zip(ROLES, precision.scale_shapes(m, n, k))):
        u = device.uniform(seed + 6 + 2 * i, rows, cols)  # [-1, 1): a third of it to each factor
        step = xp.minimum(xp.floor((u + 1) * (len(FACTORS) / 2)), len(FACTORS) - 1)
        drawn[role] = xp.ascontiguousarray((xp.exp2(step - 1) * precision.storage_scale).astype(xp.float32))
    return drawn


def spread(xp, scale, block: tuple[int, int], rows: int, cols: int):
    """A scale array as one value per element of its (rows x cols) operand: each block's scale repeated."""
    return xp.repeat(xp.repeat(scale, block[0], axis=0), block[1], axis=1)[:rows, :cols]


def applied(xp, a32, b32, scales: dict, precision: Precision):
    """A (M x K) and B (K x N), FP32 stored values, times their block scales: the values the kernel's
    product stands for. B's scales run along its columns (N x K, as scale_B is laid)."""
    m, k = a32.shape
    n = b32.shape[1]
    a_block, b_block = BLOCK_SCALES[precision.scales]
    return (a32 * spread(xp, scales["scale_A"], a_block, m, k),
            b32 * spread(xp, scales["scale_B"], b_block, n, k).T)


def for_cublaslt(xp, scale, block: tuple[int, int], rows: int, slabs: int):
    """One operand's scales (the kernel's array, [rows or row blocks, K-slabs]) as cuBLASLt reads them,
    padded with 1s to `rows` rows (padded themselves: a multiple of 4) and `slabs` K-slabs (a multiple
    of 4): 1x128 as [slabs, rows], 128x128 as [row blocks, slabs], each row-major."""
    if block[0] == 1:
        out = xp.ones((slabs, rows), dtype=xp.float32)
        out[:scale.shape[1], :scale.shape[0]] = scale.T
    else:
        out = xp.ones((-(-rows // block[0]), slabs), dtype=xp.float32)
        out[:scale.shape[0], :scale.shape[1]] = scale
    return xp.ascontiguousarray(out)
