"""FP16 and BF16 on the GPU: the half-precision kernels verified at odd and skinny sizes, in both
output types, and the correctness gate judged by trying to get past it (a kernel that skips one
k-slab) and by a correct kernel that rounds otherwise than cuBLAS (toward zero)."""

import pytest

from core.description.builtins import builtin_kernels
from core.settings import Settings
from tests.descriptions import builtin_variant as variant_of
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytestmark = pytest.mark.gpu

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))
HALF_KERNELS = [name for name, d in builtin_kernels().items() if d.precision.half]
# 1000^3: every line a multiple of 16 bytes, so the TMA kernels take their TMA path, with partial
# boxes at the edges; 1000x1003x997 and 4097x4095x1023 send them the cp.async way (no map).
SIZES = [(1000, 1003, 997), (1000, 1000, 1000), (4096, 8, 4096), (8, 4096, 1024), (4097, 4095, 1023), (1024, 1024, 4096)]

# The persistent kernels' two ways of issuing a tile's last slab (LAST_HALVES 1: in two halves of
# the tile's width, the left half's C stored while the right half runs; 0: whole): each verified, in
# both output types, and its skipped-slab twins refused, the default's as well as the other's.
LAST_SLAB_WAYS = [(name, value) for name in HALF_KERNELS if "LAST_HALVES" in builtin_kernels()[name].tunables
                  for value in builtin_kernels()[name].tunables["LAST_HALVES"].values]


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


def test_there_are_half_kernels_of_both_types():
    assert {builtin_kernels()[n].compute_mode for n in HALF_KERNELS} == {"fp16", "bf16"}


@pytest.mark.parametrize("output", ["input", "fp32"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", HALF_KERNELS)
def test_half_kernel_is_verified_at_odd_and_skinny_sizes(runner, name, size, output):
    choice = variant_of(name, output)
    out = runner.run_case(Case(0, name, *size, 31, choice), POLICY)
    if out.not_applicable:
        pytest.skip(out.error)
    precision = choice.description.precision
    assert out.verified, out.error
    assert out.compute_mode == precision.compute_mode and out.dtype == precision.input_type
    assert out.env["precision"]["output"] == precision.output_type
    assert out.rel_error <= precision.default_tolerance(size[2])
    assert out.gflops > 0 and out.cublas_gflops > 0 and out.pct_of_cublas > 0
    assert "cublasGemmEx" in out.env["notes"][-1]


@pytest.mark.parametrize("name", HALF_KERNELS)
def test_a_half_kernel_that_skips_one_k_slab_is_wrong_and_gets_no_speed(runner, name):
    out = runner.run_case(Case(0, name, 1024, 1024, 4096, 5, variant_of(name, GEMMWATCH_TEST_SKIP_SLAB=1)), POLICY)
    assert not out.verified and out.gflops is None and out.pct_of_cublas is None
    assert "relative error" in out.error


@pytest.mark.parametrize("name", HALF_KERNELS)
def test_a_half_kernel_that_rounds_toward_zero_is_still_right(runner, name):
    """Truncating each element of C moves it by up to 2 u_out instead of u_out: another rounding
    than cuBLAS's, inside the bound, and measurably further from the reference than rounding to nearest."""
    nearest = runner.run_case(Case(0, name, 1024, 1024, 4096, 5, variant_of(name)), POLICY)
    toward_zero = runner.run_case(Case(0, name, 1024, 1024, 4096, 5,
                                       variant_of(name, GEMMWATCH_ROUND_TOWARD_ZERO=1)), POLICY)
    assert nearest.verified and toward_zero.verified, (nearest.error, toward_zero.error)
    assert toward_zero.rel_error > 1.5 * nearest.rel_error


@pytest.mark.parametrize("name", [n for n in HALF_KERNELS if builtin_kernels()[n].defines.get("SPLIT_K")])
def test_a_split_k_kernel_is_right_again_after_hundreds_of_launches(runner, name):
    """Split-K's partial sums and piece counters live in the module's static memory, and the last
    piece of each tile puts them back to zero. The module is loaded once per runner, so the second
    case's first launch follows the first case's timed ones: left dirty, its sums would be wrong."""
    for seed in (7, 8):
        # 32 tiles of 64 slabs: cut in four on the H100's 132 SMs
        out = runner.run_case(Case(0, name, 1024, 1024, 4096, seed, variant_of(name)), POLICY)
        assert out.verified, out.error


def test_the_persistent_half_kernels_issue_their_last_slab_both_ways():
    assert set(LAST_SLAB_WAYS) >= {(name, value) for value in (0, 1) for name in (
        "bf16_wgmma_persistent", "fp16_wgmma_persistent", "bf16_wgmma_persistent_128", "fp16_wgmma_persistent_128")}


@pytest.mark.parametrize("name,halves", LAST_SLAB_WAYS, ids=lambda v: str(v))
def test_a_half_kernel_with_its_last_slab_either_way_is_verified_and_its_short_twins_refused(runner, name, halves):
    tunables = {"LAST_HALVES": halves}
    # a tile of one slab (K 64), the TMA's edges (1000^3), the cp.async way (1000x1003x997), skinny
    # sizes whose tiles are mostly past N or M, and several tiles a block (2048^2 x 1024 on 132 SMs)
    for size in [(1000, 1003, 997), (1000, 1000, 1000), (256, 8, 4096), (8, 256, 1024), (300, 520, 64),
                 (2048, 2048, 1024)]:
        for output in ("input", "fp32"):
            choice = KernelChoice(variant_of(name, output).description, tunables, "builtin")
            out = runner.run_case(Case(0, name, *size, 31, choice), POLICY)
            assert out.verified, (size, output, out.error)
            assert out.rel_error <= choice.description.precision.default_tolerance(size[2]), (size, output)
    # the second slab skipped, and the last (slab 63 of K 4096: the one issued in halves)
    for skipped in (1, 63):
        short = KernelChoice(variant_of(name, GEMMWATCH_TEST_SKIP_SLAB=skipped).description, tunables, "builtin")
        out = runner.run_case(Case(0, name, 1024, 1024, 4096, 5, short), POLICY)
        assert not out.verified and out.gflops is None and "relative error" in out.error, skipped
