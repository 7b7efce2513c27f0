"""The product's runner over the CPU double (issue 21): the double only supplies what a GPU would
(outputs, event times from a seeded model, NVML readings); the verdict, the statistics and the
% of cuBLAS are made by worker/measure/runner.py, worker/measure/verify.py, worker/measure/timing.py and worker/measure/stats.py.
So each test below fails if that code is broken in worker/:
  - the correctness gate (worker/measure/verify.py, Runner.run_case): a wrong kernel must be unverified,
    an unwritten one too, a C-reading one verified and labelled;
  - the paired ratio (worker/measure/runner.py pct_of_cublas): % of cuBLAS must be the median of the
    per-pair ratios of the stored samples, and must agree with the double's known speeds;
  - the timing loop (worker/measure/timing.py): throttled batches dropped, or all kept when throttling is
    the steady state; the stop rule reached.
Everything is seeded (the case's seed drives the double's noise): each test gives the same
numbers every run.
"""

import statistics

import pytest

from core.settings import Settings
from tests.fake_gpu import CUBLAS_GFLOPS, SAMPLE_OVERHEAD_MS, CpuRunner
from tests.test_kernel_repo import REPO
from worker.measure.cases import Case, KernelChoice, TimingPolicy, builtin_case
from worker.measure.verify import LEAVES_C, READS_C

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


@pytest.fixture
def runner():
    return CpuRunner()


def test_a_correct_kernel_is_verified_and_timed(runner):
    out = runner.run_case(builtin_case("smem_tiled", 96, 80, 64, seed=5), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6
    assert out.converged and out.n_samples >= POLICY.min_samples and out.gflops > 0
    assert out.env["c_convention"] == LEAVES_C


def test_a_wrong_kernel_is_not_verified_and_gets_no_speed(runner, monkeypatch):
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "smem_tiled")
    out = runner.run_case(builtin_case("smem_tiled", 96, 80, 64, seed=5), POLICY)
    assert not out.verified and out.gflops is None and out.median_ms is None and out.pct_of_cublas is None
    assert out.error.startswith("wrong result: relative error") and out.rel_error > 1e-3


def test_the_pct_of_cublas_is_the_median_of_the_paired_ratios(runner):
    out = runner.run_case(builtin_case("warp_tile", 256, 256, 256, seed=11), POLICY)
    pairs = zip(out.samples_ms, out.env["cublas_samples_ms"])
    ratios = sorted(cublas / variant for variant, cublas in pairs)
    assert out.pct_of_cublas == pytest.approx(100 * ratios[len(ratios) // 2], rel=1e-12)
    # and the double's known speeds: the variant runs at FakeKernel.gflops, cuBLAS at CUBLAS_GFLOPS
    speed = runner.device.compile(runner.resolve(builtin_case("warp_tile", 1, 1, 1).kernel)).gflops
    assert out.pct_of_cublas == pytest.approx(100 * speed / CUBLAS_GFLOPS, rel=0.01)
    assert out.gflops == pytest.approx(speed, rel=0.01) and out.cublas_gflops == pytest.approx(CUBLAS_GFLOPS, rel=0.01)
    assert out.median_ms == pytest.approx(statistics.median(out.samples_ms), rel=1e-12)


def test_the_c_convention_and_unwritten_elements(runner):
    from core.description.kernel_folder import load_folder

    rowwise = next(d for d in load_folder(REPO) if d.name == "rowwise")  # reads C at beta = 0
    out = runner.run_case(Case(0, "rowwise", 40, 33, 20, 3, KernelChoice(rowwise, {}, "job")), POLICY)
    assert out.verified and out.env["c_convention"] == READS_C
    header = "src/kernels/1_rowwise.cuh"
    skipping = rowwise.model_copy(update={"files": {**rowwise.files, header: "#define FAKE_GPU_UNWRITTEN 7\n"
                                                    + rowwise.files[header]}})
    out = runner.run_case(Case(0, "rowwise", 40, 33, 20, 3, KernelChoice(skipping, {}, "job")), POLICY)
    assert not out.verified and out.error.startswith("wrong result: 7 of 1320 elements of C never written")
    assert out.status == "incorrect"
    nan = rowwise.model_copy(update={"files": {**rowwise.files, header: "#define FAKE_GPU_WRITES_NAN 1\n"
                                               + rowwise.files[header]}})
    out = runner.run_case(Case(0, "rowwise", 40, 33, 20, 3, KernelChoice(nan, {}, "job")), POLICY)
    assert not out.verified and out.error.startswith("wrong result: C holds NaN")
    assert out.status == "incorrect" and out.rel_error is None  # wrong, though no error could be measured


def test_throttled_batches_are_dropped_unless_throttling_is_the_steady_state(runner, monkeypatch):
    from dataclasses import replace

    many = replace(POLICY, min_samples=200)  # many batches, so some are throttled and most are not
    monkeypatch.setenv("FAKE_GPU_THROTTLED", "30")
    some = runner.run_case(builtin_case("naive", 64, 64, 64, seed=21), many)
    assert some.env["throttled_samples_discarded"] > 0 and not some.env["throttled_samples_kept"]
    assert some.env["throttle_reasons_seen"] == 0x4 and some.verified
    monkeypatch.setenv("FAKE_GPU_THROTTLED", "95")
    mostly = runner.run_case(builtin_case("naive", 64, 64, 64, seed=21), many)
    assert mostly.env["throttled_samples_kept"] and mostly.n_samples >= mostly.env["throttled_samples_discarded"] > 0


def test_the_same_case_gives_the_same_numbers(runner):
    """Seeded: a statistical test on the double is repeatable, never right by chance."""
    first = runner.run_case(builtin_case("smem_tiled", 64, 64, 64, seed=9), POLICY)
    again = CpuRunner().run_case(builtin_case("smem_tiled", 64, 64, 64, seed=9), POLICY)
    assert first.samples_ms == again.samples_ms and first.pct_of_cublas == again.pct_of_cublas


SUSTAINED = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0,
                                                GEMMWATCH_TIMING_MODE="sustained", GEMMWATCH_SUSTAINED_WARMUP_S=0.2))


def test_sustained_samples_come_after_the_settle_and_keep_the_power_cap(runner, monkeypatch):
    """Under "sustained" the card is first kept busy for sustained_warmup_s (those samples thrown
    away), then the power cap is the state being measured: its batches are kept, where "cold"
    drops them. A thermal or hardware slowdown is still dropped in both."""
    from dataclasses import replace

    monkeypatch.setenv("FAKE_GPU_THROTTLED", "30")  # the double reports the SW power cap in 30 % of batches
    case = builtin_case("naive", 64, 64, 64, seed=21)
    cold = runner.run_case(case, replace(POLICY, min_samples=200))
    assert cold.mode == "cold" and cold.env["throttled_samples_discarded"] > 0 and "sustained" not in cold.env
    loaded = runner.run_case(case, replace(SUSTAINED, min_samples=200))
    assert loaded.mode == "sustained" and loaded.verified and loaded.n_samples >= 200
    assert loaded.env["throttled_samples_discarded"] == 0 and loaded.env["throttle_reasons_seen"] == 0x4
    got = loaded.env["sustained"]
    assert got["power_capped_batches_kept"] > 0 and got["settle_s"] == 0.2
    # the settle ran 0.2 s of the double's clock (each sample costs its time and the double's
    # overhead per sample): thousands of samples of a 64^3 kernel, none of them kept
    per_sample_ms = statistics.median(loaded.samples_ms) + SAMPLE_OVERHEAD_MS
    assert 0.9 * 200 / per_sample_ms <= got["settle_samples"] <= 1.1 * 200 / per_sample_ms + 64
    assert loaded.env["l2_flush"] == "readwrite" and loaded.env["stream_hold"]["used"] is False


def test_the_three_timing_modes_flush_isolate_and_hold_as_documented():
    hot = replace_mode("hot")
    assert (POLICY.flushes, POLICY.isolated, POLICY.holds_stream, POLICY.settle_s) == (True, True, True, 0.0)
    assert (hot.flushes, hot.isolated, hot.holds_stream, hot.settle_s) == (False, False, True, 0.0)
    assert (SUSTAINED.flushes, SUSTAINED.isolated, SUSTAINED.holds_stream, SUSTAINED.settle_s) == (True, False, False, 0.2)
    thermal_and_cap = 0x20 | 0x4
    assert POLICY.disturbing(thermal_and_cap) == thermal_and_cap and SUSTAINED.disturbing(thermal_and_cap) == 0x20
    with pytest.raises(ValueError, match="GEMMWATCH_TIMING_MODE"):
        Settings(GEMMWATCH_TIMING_MODE="warm")


def replace_mode(mode):
    from dataclasses import replace

    return replace(POLICY, mode=mode)


def test_the_settle_grows_its_batches_and_stops_when_its_time_is_spent():
    """A slow kernel is not queued 64 times over to settle: batches start at one pair and double
    while they are short, as the timing loop's do."""
    from worker.measure import timing

    class Clocked:
        def __init__(self, ms):
            self.now, self.ms, self.batches = 0.0, ms, []

        def clock(self):
            return self.now

        def sample(self, order, policy):
            self.batches.append(len(order))
            self.now += self.ms * len(order) / 1e3
            return timing.Batch([self.ms] * len(order), False, 0)

    quick = Clocked(0.25)
    thrown = timing.settle(quick, [None, None], SUSTAINED)
    assert quick.batches[:4] == [2, 4, 8, 16] and max(quick.batches) == 2 * timing.MAX_BATCH_PAIRS
    assert thrown == sum(quick.batches) and 0.2 <= quick.now < 0.2 + 0.25e-3 * 2 * timing.MAX_BATCH_PAIRS
    slow = Clocked(150.0)  # 150 ms a launch: two pairs spend the 0.2 s
    assert timing.settle(slow, [None, None], SUSTAINED) == 2 and slow.batches == [2]
    assert timing.settle(quick, [None, None], POLICY) == 0  # cold: no settle


def test_burst_mode_rests_the_card_before_every_batch_and_keeps_batches_short(runner, monkeypatch):
    """GEMMWATCH_TIMING_MODE=burst (issue 36): a repository's quick runner times a few launches after a
    pause, before an H200's power cap lowers the clock; burst leaves the card idle before each batch
    and keeps each batch under 5 ms of GPU time."""
    from worker.measure.timing import BURST_BATCH_MS

    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE="burst", GEMMWATCH_BURST_REST_MS=50,
                                                 GEMMWATCH_CASE_TIME_CAP_S=0.5, GEMMWATCH_MIN_TIME_S=0))
    monkeypatch.setattr("tests.fake_gpu.CUBLAS_GFLOPS", 500.0)  # slow calls: a first batch of 4 pairs is over 5 ms
    device = runner.device
    rests, batches = [], []
    real_rest, real_sample = device.rest, device.sample
    device.rest = lambda s: (rests.append(s), real_rest(s))[1]
    device.sample = lambda order, p: (batches.append(sum(c.model_ms for c in order)), real_sample(order, p))[1]
    out = runner.run_case(builtin_case("warp_tile", 600, 600, 600, seed=3), policy)
    assert out.verified and out.mode == "burst" and out.n_samples > 0, out.error
    assert len(rests) == len(batches) > 1 and set(rests) == {0.05}
    assert BURST_BATCH_MS <= batches[0] < 20  # over burst's limit, under hot's: hot would double it
    assert max(batches) < 1.1 * batches[0]  # so it never grew
    hot = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE="hot", GEMMWATCH_CASE_TIME_CAP_S=0.5))
    rests.clear()
    batches.clear()
    runner.run_case(builtin_case("warp_tile", 600, 600, 600, seed=3), hot)
    assert rests == [] and max(batches) > 1.5 * batches[0]  # only burst rests; hot batches grow
