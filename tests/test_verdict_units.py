"""Pure parts of issue 11: the paired A/B verdict and theoretical occupancy (no GPU, no services)."""

import numpy as np
import pytest

from hypothesis import given, settings, strategies as st

from core.verdicts.regression import PairedThresholds, judge_paired, resampled_medians
from core.verdicts.confirm import resource_changes as changes
from worker.gpu.resources import H100, SmLimits, describe, occupancy


def _confirm_job(rng, gpu_speed: float, true_ratio: float, pairs: int = 40, noise: float = 0.005):
    # 0.5 % per sample: the runner stops sampling once the relative noise is that low (GEMMWATCH_MAX_NOISE).
    """One confirmation job: base and head timed interleaved on a GPU whose speed that day is
    `gpu_speed`; within the job the speed also wanders a little from pair to pair."""
    base_true = 1.0
    wander = gpu_speed * (1 + 0.005 * np.cumsum(rng.standard_normal(pairs)) / np.sqrt(pairs))
    base = base_true * wander * (1 + noise * rng.standard_normal(pairs))
    head = base_true * true_ratio * wander * (1 + noise * rng.standard_normal(pairs))
    outliers = rng.random(pairs) < 0.05  # a preempted sample now and then
    head[outliers] *= 1.5
    return base.tolist(), head.tolist()


def test_drift_of_3_percent_never_confirms_a_regression_and_a_3_percent_step_is_confirmed_at_its_commit():
    rng = np.random.default_rng(11)
    step_at = 60
    confirmed = []
    statuses = []
    for commit in range(100):
        day_speed = 1 + rng.uniform(-0.03, 0.03)  # day-to-day drift of the GPU, +-3 %
        true_ratio = 1.03 if commit == step_at else 1.0  # the head vs its base: a step only there
        base, head = _confirm_job(rng, day_speed, true_ratio)
        v = judge_paired(base, head)
        statuses.append(v.status)
        if v.status == "regression":
            confirmed.append(commit)
    assert confirmed == [step_at]
    assert statuses.count("no change") >= 90  # unchanged commits are mostly called so, not undecided


def test_paired_verdict_interval_contains_the_true_ratio_and_sees_improvements():
    rng = np.random.default_rng(3)
    base, head = _confirm_job(rng, 1.0, 0.95)
    v = judge_paired(base, head)
    assert v.status == "improvement"
    assert v.low <= 0.95 <= v.high
    assert "CI" in v.reason and "pairs" in v.reason


def test_too_few_or_too_noisy_pairs_are_undecided_never_a_regression():
    assert judge_paired([1.0] * 3, [1.1] * 3).status == "undecided"
    rng = np.random.default_rng(5)
    base, head = _confirm_job(rng, 1.0, 1.015, pairs=12, noise=0.08)
    assert judge_paired(base, head).status in ("undecided", "no change")
    assert judge_paired([0.0] * 20, [1.0] * 20).status == "undecided"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.floats(0.5, 2.0, allow_nan=False, width=32), min_size=1, max_size=40), st.integers(1, 25),
       st.integers(0, 2**32 - 1), st.booleans())
def test_a_resample_s_median_by_counting_is_numpy_s_median(values, rows, seed, tied):
    """The bootstrap's medians by counting draws (regression.resampled_medians) are np.median's, to the bit:
    odd and even counts, one value, ties (rounded values), repeated draws."""
    v = np.round(np.asarray(values), 1) if tied else np.asarray(values)
    draws = np.random.default_rng(seed).integers(0, len(v), size=(rows, len(v)))
    assert np.array_equal(resampled_medians(v, draws), np.median(v[draws], axis=1))


def test_the_band_is_a_setting():
    rng = np.random.default_rng(9)
    base, head = _confirm_job(rng, 1.0, 1.03)
    assert judge_paired(base, head, PairedThresholds(min_change=0.01)).status == "regression"
    assert judge_paired(base, head, PairedThresholds(min_change=0.05)).status == "no change"


# -- occupancy, against the CUDA occupancy calculator's rules for an H100 (cc 9.0) -----------------

def test_registers_128_to_168_halve_the_blocks_of_a_256_thread_kernel():
    # 128 regs x 32 = 4096 per warp; 16384 per sub-partition -> 4 warps each, 16 per SM, 2 blocks of 8.
    before = occupancy(256, 128, 0)
    assert before["blocks_per_sm"] == 2 and before["limited_by"] == "registers"
    # 168 x 32 = 5376 (a multiple of 256); 16384 // 5376 = 3 warps per partition, 12 per SM: 1 block.
    after = occupancy(256, 168, 0)
    assert after["blocks_per_sm"] == 1 and after["limited_by"] == "registers"
    assert after["occupancy"] == pytest.approx(8 / 64)


def test_register_allocation_rounds_up_per_warp():
    # 65 regs: 2080 per warp rounds to 2304; 16384 // 2304 = 7 warps per partition -> 28 warps.
    assert occupancy(32, 65, 0)["limits"]["registers"] == 28
    # 64 regs: exactly 2048 per warp, 8 per partition, 32 warps, but only 32 blocks may be resident.
    r = occupancy(32, 64, 0)
    assert r["limits"]["registers"] == 32 and r["blocks_per_sm"] == 32


def test_shared_memory_counts_the_reserved_kib_and_the_allocation_unit():
    # 48 KiB + 1 KiB reserved = 50176 bytes; 233472 // 50176 = 4 blocks.
    r = occupancy(128, 32, 48 * 1024)
    assert r["blocks_per_sm"] == 4 and r["limited_by"] == "shared memory"
    # 100 bytes + 1024 rounds to 1152; the thread limit (2048 / 1024 = 2 blocks) binds first.
    r = occupancy(1024, 16, 100)
    assert r["limits"]["shared memory"] == 233472 // 1152 and r["limited_by"] == "threads"


def test_full_occupancy_of_a_light_kernel_and_other_limits():
    r = occupancy(256, 32, 4096)
    assert r["blocks_per_sm"] == 8 and r["occupancy"] == 1.0
    small_sm = SmLimits(regs_per_sm=32768, smem_per_sm=102400, max_threads_per_sm=1536, max_blocks_per_sm=16)
    assert occupancy(256, 32, 0, small_sm)["limits"]["threads"] == 6


def test_describe_and_changes_read_like_the_issue():
    base = describe({"num_regs": 128, "shared_size_bytes": 16384, "local_size_bytes": 0,
                     "max_threads_per_block": 512}, (256, 1, 1))
    head = describe({"num_regs": 168, "shared_size_bytes": 16384, "local_size_bytes": 0,
                     "max_threads_per_block": 384}, (256, 1, 1))
    assert base["threads_per_block"] == 256 and base["static_smem_bytes"] == 16384
    assert changes(base, head) == ["registers 128 -> 168", "occupancy 2 -> 1 block/SM, limited by registers"]
    assert changes(base, base) == [] and changes(None, head) == []
    assert H100.regs_per_sm == 65536
