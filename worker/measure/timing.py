"""The paired timing loop: variant and baseline samples, batch by batch, until the stop rule holds.

The device supplies each batch's sample times (CUDA events behind a stream hold on a GPU, see
worker/gpu/cupy_device.py; a CPU double in the tests) with the throttle reasons NVML reported meanwhile
and whether the stream hold ran out; everything else is decided here, the same on a GPU and on
CI: how batches grow, which samples are dropped, when the case has converged or run out of time.
"""

from dataclasses import dataclass, field
from typing import Callable, Protocol

from worker.gpu.samples import Batch  # noqa: F401 (what a Sampler answers; timing.Batch to its callers)
from worker.measure.cases import TimingPolicy

# Pairs per batch (the stop rule is judged once per batch): a batch grows while its GPU time is
# under 20 ms. Cold samples are each queued behind a stream hold of their own (isolate_samples);
# otherwise a whole batch is queued behind one.
FIRST_BATCH_PAIRS = 4
MAX_BATCH_PAIRS = 32
SHORT_BATCH_MS = 20.0
# "burst": a batch stays this short (the ten launches a repository's Tester times take 3.4 ms of a
# 0.3 ms kernel), so it ends before the card's power controller lowers the clock.
BURST_BATCH_MS = 5.0



class Sampler(Protocol):
    def clock(self) -> float: ...

    def warm_up(self, calls: list[Callable[[], None]], warmup_ms: float) -> None: ...

    def sample(self, order: list[Callable[[], None]], policy: TimingPolicy) -> Batch: ...

    def rest(self, seconds: float) -> None: ...


@dataclass
class PairedSamples:
    variant_ms: list[float] = field(default_factory=list)
    cublas_ms: list[float] = field(default_factory=list)
    converged: bool = False
    discarded: int = 0  # pairs dropped because the clocks were throttled
    reasons_seen: int = 0
    throttled_kept: bool = False  # throttled most of the time: every sample kept, throttled or not
    hold_timeouts: int = 0  # batches dropped because the stream hold gave up before the host released it
    settle_samples: int = 0  # "sustained": samples run and thrown away while the card settled under load
    power_capped_kept: int = 0  # "sustained": batches kept although NVML reported the power cap


def time_pair(device: Sampler, run_variant: Callable[[], None], run_cublas: Callable[[], None],
              policy: TimingPolicy) -> PairedSamples:
    """Paired samples of the two calls until both series satisfy the policy (worker/measure/stats.py: the
    median known to +-max_noise, no drift) or the time cap is hit. Batches during which NVML
    reported a throttled clock are dropped when the policy says so."""
    device.warm_up([run_variant, run_cublas], policy.warmup_ms)
    got = PairedSamples()
    got.settle_samples = settle(device, [run_variant, run_cublas], policy)
    every_v: list[float] = []  # all samples in order, throttled or not (not those of a hold that ran out)
    every_c: list[float] = []
    sampling_since = device.clock()
    deadline = sampling_since + policy.time_cap_s
    batch = FIRST_BATCH_PAIRS  # pairs queued behind one hold; grows while a batch is short (fewer host round trips)
    blocks = policy.interleave == "blocks"
    while True:
        order = [run_variant] * batch + [run_cublas] * batch if blocks else [run_variant, run_cublas] * batch
        if policy.rest_s:
            device.rest(policy.rest_s)
        sampled = device.sample(order, policy)
        times = sampled.times_ms
        if blocks:  # back into pairs: the i-th variant sample with the batch's i-th cuBLAS sample
            times = [t for pair in zip(times[:batch], times[batch:]) for t in pair]
        got.reasons_seen |= sampled.throttle_reasons
        disturbed = policy.disturbing(sampled.throttle_reasons)
        if sampled.timed_out:
            got.hold_timeouts += 1  # the GPU may have waited for launches: not a clean batch
        else:
            every_v += times[0::2]
            every_c += times[1::2]
            if disturbed and policy.discard_throttled:
                got.discarded += len(order) // 2
            else:
                got.variant_ms += times[0::2]
                got.cublas_ms += times[1::2]
                got.power_capped_kept += bool(sampled.throttle_reasons) and not disturbed
        batch = grown(batch, times, BURST_BATCH_MS if policy.rest_s else SHORT_BATCH_MS)
        # Throttled most of the time (a power cap on heavy tensor-core work, TF32 at 4096^3 and
        # up on the H100): that is the kernel's steady state, and both sides ran under it. The few
        # clean batches between caps are no better a figure, so every sample is judged and
        # reported, flagged (env.throttled_samples_kept).
        steady_throttle = got.discarded > len(got.variant_ms)
        v, c = (every_v, every_c) if steady_throttle else (got.variant_ms, got.cublas_ms)
        now = device.clock()
        got.converged = policy.satisfied(v, c, sampled_s=now - sampling_since)
        out_of_time = now >= deadline and len(v) >= policy.min_samples
        # A slow kernel goes on past the cap to min_samples (the case time limit bounds it); only
        # holds that kept running out end a case with nothing.
        nothing = not v and now >= deadline + policy.time_cap_s
        if got.converged or out_of_time or nothing:
            if steady_throttle:
                got.variant_ms, got.cublas_ms, got.throttled_kept = every_v, every_c, True
            return got


def settle(device: Sampler, pair: list[Callable[[], None]], policy: TimingPolicy) -> int:
    """"sustained": batches sampled and thrown away until settle_s has passed, so the samples kept
    are taken after the power controller has brought the clock down to what it holds under this
    load (on the H100 that takes a few hundred ms of a tensor-core GEMM). Batches grow as in
    time_pair, so a slow kernel is not queued 64 times over. Returns how many samples it threw away."""
    thrown, batch = 0, 1
    until = device.clock() + policy.settle_s
    while device.clock() < until:
        times = device.sample(pair * batch, policy).times_ms
        thrown += len(times)
        batch = grown(batch, times)
    return thrown


def grown(batch: int, times: list[float], short_ms: float = SHORT_BATCH_MS) -> int:
    """The next batch's pairs: twice as many while a batch takes under short_ms of GPU time
    (fewer host round trips), up to MAX_BATCH_PAIRS."""
    return batch * 2 if sum(times) < short_ms and batch < MAX_BATCH_PAIRS else batch
