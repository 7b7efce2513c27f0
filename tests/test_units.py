"""Small pure pieces: statistics, a kernel description's launch geometry, GPU model names, sizes."""

import statistics

import pytest
import typer

from cli.main import parse_size
from core.description.builtins import builtin_kernels
from core.description.kernel import resolve
from tests.fake_gpu import H100_FIGURES
from worker.measure import stats
from worker.measure.cases import plan, plan_cases
from core.records.gpu_records import gpu_model


def test_noise_and_convergence():
    assert stats.noise([1.0, 1.0, 1.0]) == 0.0
    assert stats.noise([1.0]) == float("inf")
    steady = [1.0, 1.001, 0.999] * 4
    assert stats.has_converged(steady, 10, 0.005)
    assert not stats.has_converged(steady[:9], 10, 0.005)  # too few samples
    assert not stats.has_converged([1.0, 1.2] * 6, 10, 0.005)  # too noisy
    s = stats.summarise([4.0, 1.0, 3.0, 2.0])
    assert (s["median_ms"], s["min_ms"], s["max_ms"], s["mean_ms"]) == (2.5, 1.0, 4.0, 2.5)


def test_a_few_far_outliers_do_not_stop_convergence_but_stddev_would():
    import random

    rng = random.Random(3)
    samples = [1.0 + rng.gauss(0, 0.002) for _ in range(200)]
    for i in (17, 60, 99, 150, 190):
        samples[i] = 3.0  # a clock step or an interrupt, as seen in stored raw samples
    assert stats.noise(samples) > 0.1  # stddev/mean: "noisy" by 20x the old 0.5 % limit
    assert stats.has_converged(samples, 10, 0.005)
    lo, hi = stats.median_ci(samples)
    assert lo < statistics.median(samples) < hi and (hi - lo) / 2 < 0.001


def test_a_wandering_figure_never_converges():
    ramp = [1.0 + 0.05 * i / 400 for i in range(400)]  # clocks stepping down over the case: +5 %
    c = stats.convergence(ramp)
    assert c["median_ci_rel"] < 0.005  # precise about a median that is not there to be found
    assert c["drift_rel"] > 0.02 and not stats.has_converged(ramp, 10, 0.005)


def test_policy_needs_samples_quiet_series_and_sampling_time():
    from worker.measure.cases import TimingPolicy

    policy = TimingPolicy(0, min_samples=10, max_noise=0.005, time_cap_s=1, max_rel_error=1e-4, mode="cold",
                          min_time_s=0.05)
    quiet = [10.0, 10.01] * 5
    tiny_kernel = [0.01, 0.01001] * 5  # 10 us samples: their sum is tiny, the time spent sampling is not
    assert policy.satisfied(quiet, sampled_s=0.05)
    assert policy.satisfied(tiny_kernel, sampled_s=0.06)
    assert not policy.satisfied(quiet, sampled_s=0.04)  # too soon, however quiet
    assert not policy.satisfied(quiet[:8], sampled_s=1.0)  # too few samples
    assert not policy.satisfied(quiet, [10.0, 12.0] * 5, sampled_s=1.0)  # the baseline is noisy


def test_grid_covers_c_for_any_size():
    spec = resolve(builtin_kernels()["smem_tiled"], {"TILE": 16}, H100_FIGURES)
    assert spec.block == (16, 16, 1) and spec.defines == {"TILE": 16}
    assert spec.grid(1000, 1003, 7) == (63, 63, 1)  # ceil(1003/16), ceil(1000/16)
    assert spec.grid(1, 1, 1) == (1, 1, 1)
    assert "-DTILE=16" in spec.compile_options()


def test_tunables_are_checked():
    with pytest.raises(ValueError, match="allowed: \\[8, 16, 32\\]"):
        resolve(builtin_kernels()["smem_tiled"], {"TILE": 64}, H100_FIGURES)
    with pytest.raises(ValueError, match="no tunable 'WARP'"):
        resolve(builtin_kernels()["naive"], {"WARP": 2}, H100_FIGURES)


def test_a_bench_case_takes_its_job_s_tunables_then_this_gpu_s_tuned_ones_that_still_fit_then_the_defaults():
    kernels = builtin_kernels()
    tuned = {("smem_tiled", 64, 64, 64): {"TILE": 16}, ("smem_tiled", 128, 128, 128): {"TILE": 64},
             ("naive", 64, 64, 64): {"WARP": 2}}  # a value and a name this version of the kernel no longer has

    def chosen(explicit, name="smem_tiled", size=64):
        return plan("bench", [name], [[size] * 3], explicit, tuned, kernels)[0]["tunables"]

    assert chosen({"smem_tiled": {"TILE": 8}}) == {"TILE": 8}  # the job's own, over the tuned one
    assert chosen({}) == {"TILE": 16}  # tuned for this GPU and size
    assert chosen({}, size=128) == {"TILE": 32}  # tuned, but no longer allowed: the defaults, no error
    assert chosen({}, name="naive") == {"BLOCK": 32}
    assert chosen({}, size=256) == {"TILE": 32}  # nothing tuned at this size
    with pytest.raises(ValueError, match="allowed"):  # the job's own wrong value is an error, never passed over
        chosen({"smem_tiled": {"TILE": 64}})


def test_cases_are_sizes_times_variants_sharing_inputs_per_size():
    cases = plan_cases(["naive", "cublas"], [[8, 8, 8], [16, 8, 4]], job_id=3)
    assert [(c.index, c.variant, c.m) for c in cases] == [(0, "naive", 8), (1, "cublas", 8), (2, "naive", 16), (3, "cublas", 16)]
    assert cases[0].seed == cases[1].seed != cases[2].seed
    assert cases[1].kernel is None and cases[0].kernel.description.entry == "sgemm_naive"


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H100 PCIe", "H100"), ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA GeForce RTX 3080", "RTX-3080"), ("NVIDIA L40S", "L40S"),
])
def test_gpu_model_names_queues(name, model):
    assert gpu_model(name) == model


def test_parse_size():
    assert parse_size("4096") == [4096, 4096, 4096]
    assert parse_size("1000x1003x997") == [1000, 1003, 997]
    assert parse_size("16x4096x4096") == [16, 4096, 4096] and parse_size("8192×8192×64") == [8192, 8192, 64]
    assert parse_size("1024x1024x1024x32") == [1024, 1024, 1024, 32]
    for bad in ("10x10", "10x10x10x10x10", "-5", "4096x", "٤٠٩٦", "1e3"):
        with pytest.raises(typer.BadParameter):
            parse_size(bad)


@pytest.mark.parametrize(("text", "dims"), [("4096", (4096,) * 3), (" 1000 x 1003 x 997 ", (1000, 1003, 997)),
                                            ("8192×8192×64", (8192, 8192, 64)), ("2*3*4", (2, 3, 4)),
                                            ("2,3,4", (2, 3, 4)), ("2X3X4", (2, 3, 4)), ("2x3x4x5", None),
                                            ("2x3", None), ("", None), ("x", None), ("²", None)])
def test_one_reading_of_a_size_for_the_cli_the_dashboard_and_a_description(text, dims):
    from core.description.problem_size import read_dims

    assert read_dims(text) == dims
    assert read_dims(text, allow_batch=True) == (dims or ((2, 3, 4, 5) if text == "2x3x4x5" else None))


def test_the_cli_offers_gemmwatch_s_own_timing_modes_and_only_those():
    """One list of modes (core/description/timing_modes.py): the CLI's choices are its own modes,
    never an imported tool's (a job cannot be timed "nvbench:cold")."""
    from cli.main import TimingChoice
    from core.description.timing_modes import IMPORTED_MODES, OWN_MODES, mode_words

    assert [c.value for c in TimingChoice] == list(OWN_MODES)
    assert mode_words("cold") == "cold L2" and mode_words("nvbench:cold") == "imported: nvbench:cold"
    assert not set(IMPORTED_MODES) & set(OWN_MODES)


def test_a_script_s_size_is_read_the_same_way_and_a_bad_one_says_what_a_size_is():
    from core.description.problem_size import required_dims

    assert required_dims("1000x1003x997") == (1000, 1003, 997) and required_dims("64") == (64, 64, 64)
    for bad in ("10x10", "64x64x64x2", "big"):
        with pytest.raises(ValueError, match="MxNxK"):
            required_dims(bad)
