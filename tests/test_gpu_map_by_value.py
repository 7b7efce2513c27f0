"""Issue 48 on the GPU: tensor maps taken by value (`const __grid_constant__ CUtensorMap`), as
cuBLAS, CUTLASS and most Hopper repositories take them, and the map of C, not only of A and B.

- The built-in tf32_wgmma_tma, which takes its A_map by value with zeros for "no map"
  (`zeros_when_absent`): verified where the TMA can describe A and, from its pointer, where it
  cannot; without `zeros_when_absent` that case is refused with the reason (no value says "none").
- The same kernel with its map declared by address (0 for "no map"), as a job may bring it.
- A kernel that writes C by a TMA store through C_map alone (no C pointer), its map by value.

Skipped where no CUDA device exists (CI), never faked.
"""

import pytest

from core.description.builtins import builtin_kernels
from core.description.kernel_description import KernelDescription
from core.results.result_env import ResultEnv
from core.settings import Settings
from tests.descriptions import one_file
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytestmark = pytest.mark.gpu

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))
# NVRTC has no cuda.h: the struct is spelled out, as repositories built by NVRTC do.
MAP_STRUCT = "struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };\n"
BY_VALUE = "#define GW_A_MAP_PARAM , const __grid_constant__ TmaMap A_map_v\n"
ZEROS_ARE_NONE = "    const void* const A_map = map_or_null(A_map_v);\n"
# By address: the map in global memory, read by the tensor-map proxy after an acquire of the
# generic proxy's writes; address 0 where the TMA cannot describe A.
BY_ADDRESS = "#define GW_A_MAP_PARAM , const void* A_map_address\n"
ADDRESS_OR_NONE = ("    const void* const A_map = A_map_address;\n"
                   "    if (A_map) asm volatile(\"fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\" "
                   ":: \"l\"(A_map) : \"memory\");\n")
ODD = (1000, 1003, 997)  # K * 4 bytes is no multiple of 16: no map of A


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


def tf32_tma(by_address: bool = False, zeros_when_absent: bool = True) -> KernelChoice:
    desc = builtin_kernels()["tf32_wgmma_tma"]
    text = desc.files[desc.source]
    assert BY_VALUE in text and ZEROS_ARE_NONE in text  # else this test changes nothing
    if by_address:
        text = text.replace(BY_VALUE, BY_ADDRESS).replace(ZEROS_ARE_NONE, ADDRESS_OR_NONE)
    fields = desc.model_dump()
    fields["tensor_maps"]["A"]["zeros_when_absent"] = zeros_when_absent
    return KernelChoice(type(desc).model_validate({**fields, "files": {**desc.files, desc.source: text}}), {}, "job")


@pytest.mark.parametrize("by_address", [False, True], ids=["by_value", "by_address"])
@pytest.mark.parametrize("size", [(1000, 1100, 1000), (4096, 4096, 4096), ODD], ids=lambda s: "x".join(map(str, s)))
def test_a_tma_kernel_is_verified_with_its_map_by_value_or_by_address_and_without_one(runner, size, by_address):
    out = runner.run_case(Case(0, "tf32_wgmma_tma", *size, 7, tf32_tma(by_address)), POLICY)
    assert out.verified, out.error
    assert out.rel_error <= POLICY.max_rel_error_tf32 and out.gflops > 0
    # The result says which path ran: at the odd size the TMA had no map of A, and the record says so
    # in a form the posted result's model accepts.
    env = ResultEnv.model_validate(out.env)
    assert not env.extra, env.extra  # every key the runner wrote is one the schema declares
    assert env.launch.maps_absent == (["A"] if size == ODD else None)


def test_a_map_by_value_at_a_size_the_tma_cannot_describe_is_refused_without_zeros_when_absent(runner):
    """Refused before any launch (worker/measure/problem.py); the GPU process makes the case's error of it,
    as tests/test_user_kernels.py shows through the stack."""
    with pytest.raises(ValueError, match="reaches A through A_map, which it takes by value .* a line of 997 elements "
                                         "is 3988 bytes, not a multiple of 16"):
        runner.run_case(Case(0, "tf32_wgmma_tma", *ODD, 7, tf32_tma(zeros_when_absent=False)), POLICY)


# Each block computes a 64 x 64 tile of C into shared memory and one thread stores it with a TMA
# store through C's map (by value); the TMA clips the parts of the box past M and N.
TMA_STORE = MAP_STRUCT + r"""
extern "C" __global__ void __launch_bounds__(256) tma_store_gemm(int M, int N, int K, float alpha, const float* A,
        const float* B, float beta, const __grid_constant__ CUtensorMap_st C_map) {
    __shared__ alignas(128) float tile[64 * 64];
    const int bm = blockIdx.y * 64, bn = blockIdx.x * 64;
    for (int e = threadIdx.x; e < 64 * 64; e += 256) {
        const int row = bm + e / 64, col = bn + e % 64;
        float acc = 0.0f;
        if (row < M && col < N)
            for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        tile[e] = alpha * acc;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the tile's writes, seen by the TMA
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned src = static_cast<unsigned>(__cvta_generic_to_shared(tile));
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                     ::"l"(&C_map), "r"(bn), "r"(bm), "r"(src) : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
}
"""


def tma_store(skip_tile: bool = False) -> KernelChoice:
    text = TMA_STORE.replace("if (threadIdx.x == 0) {", "if (threadIdx.x == 0 && blockIdx.x != 1) {") \
        if skip_tile else TMA_STORE
    desc = one_file("tma_store", text, "tma_store_gemm", [256], [64, 64], target="sm_90",
                    args=["M", "N", "K", "alpha", "A", "B", "ignored", "C_map"],
                    tensor_maps={"C": {"box": [64, 64]}}, compute_mode="fp32")
    return KernelChoice(KernelDescription.model_validate(desc), {}, "job")


@pytest.mark.parametrize("size", [(1000, 1100, 300), (256, 256, 256)], ids=lambda s: "x".join(map(str, s)))
def test_a_kernel_that_writes_c_through_its_map_alone_is_verified(runner, size):
    out = runner.run_case(Case(0, "tma_store", *size, 7, tma_store()), POLICY)
    assert out.verified, out.error
    assert out.gflops > 0
    assert ResultEnv.model_validate(out.env).launch.tensor_maps == {"C": [64, 64, 0]}  # box and swizzle (none)


def test_a_tma_store_that_leaves_a_tile_unwritten_is_not_verified(runner):
    """The check must see what the TMA did not write: here every tile of the second column of tiles."""
    out = runner.run_case(Case(0, "tma_store", 256, 256, 256, 7, tma_store(skip_tile=True)), POLICY)
    assert not out.verified and out.gflops is None
    assert "never written" in out.error, out.error
