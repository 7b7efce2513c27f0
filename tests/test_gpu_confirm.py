"""GPU tests for issue 11 (run on the lent H100): kernel resources and occupancy from the loaded
functions, checked against the driver's own occupancy calculator; A/B cases on the real runner.

Skipped where no CUDA device exists (CI), never faked.
"""

from dataclasses import replace

import pytest

from core.verdicts.regression import judge_paired
from tests.test_gpu import KERNELS, POLICY, runner  # noqa: F401 (fixture)
from worker.measure.cases import builtin_case

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("variant", KERNELS)
def test_resources_and_occupancy_match_the_driver(runner, variant):  # noqa: F811
    from cupy.cuda import driver

    case = builtin_case(variant, 512, 512, 512, seed=3)
    launch = runner.resolve(case.kernel)
    out = runner.run_case(case, POLICY)
    assert out.verified, out.error
    res = out.env["resources"]
    assert 0 < res["registers_per_thread"] <= 255 and res["threads_per_block"] == launch.block[0] * launch.block[1] * launch.block[2]
    assert res["max_threads_per_block"] >= res["threads_per_block"]
    compiled = runner.device.compile(launch)
    expected = driver.occupancyMaxActiveBlocksPerMultiprocessor(compiled.function.kernel.ptr, res["threads_per_block"], 0)
    assert res["blocks_per_sm"] == expected, res


def test_the_same_kernel_against_itself_is_no_change_and_a_faster_one_is_an_improvement(runner):  # noqa: F811
    size = (4096, 4096, 4096)
    same = builtin_case("warp_tile_large", *size, seed=7)
    # The production cap (3 s), not the suite's 1 s: the GPU suite runs eight test processes on one
    # card, and 100 pairs under that load once gave [0.977, 1.001], undecided. What must never happen
    # is a false alarm; "no change" is what an idle card gives (test_verdict_units holds the judge).
    out = runner.run_case(replace(same, base=same.kernel), replace(POLICY, time_cap_s=3.0))
    assert out.verified and out.mode == "ab", out.error
    v = judge_paired(out.env["ab"]["base_ms"], out.samples_ms)
    assert v.status in ("no change", "undecided"), v.reason
    assert out.env["resources"] == out.env["base_resources"]

    slower_base = builtin_case("smem_tiled", *size, seed=7).kernel
    # One variant name, two kernels: the head (warp_tile_large's code) is much faster.
    out = runner.run_case(replace(same, variant="smem_tiled", base=slower_base), POLICY)
    v = judge_paired(out.env["ab"]["base_ms"], out.samples_ms)
    assert v.status == "improvement" and v.high < 0.5, v.reason
