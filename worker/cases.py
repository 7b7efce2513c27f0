"""Plain data passed between the job executor and the GPU child process."""

import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from kernels.registry import CUBLAS, VARIANTS, LaunchSpec
from kernels.tuning import configurations
from worker import stats


@dataclass(frozen=True)
class TimingPolicy:
    warmup_ms: float
    min_samples: int
    max_noise: float
    time_cap_s: float
    max_rel_error: float
    mode: str  # "cold": L2 flushed before every sample; "hot": back-to-back launches
    min_time_s: float = 0.0
    discard_throttled: bool = True
    max_rel_error_tf32: float = 2e-3
    hold_stream: bool = True  # nvbench's blocking kernel: no host launch overhead inside a sample
    flush: str = "readwrite"  # how a cold sample's L2 is evicted: "readwrite" or "memset"
    max_drift: float = 0.01
    interleave: str = "blocks"  # "blocks": a batch's variant samples, then its cuBLAS ones; "pairs": V C V C ...
    isolate_samples: bool = True  # cold: each sample behind its own stream hold, synchronised before the next

    @classmethod
    def from_settings(cls, s) -> "TimingPolicy":
        return cls(s.warmup_ms, s.min_samples, s.max_noise, s.case_time_cap_s, s.max_rel_error, s.timing_mode,
                   s.min_time_s, s.discard_throttled, s.max_rel_error_tf32, s.hold_stream, s.l2_flush, s.max_drift,
                   s.interleave, s.isolate_samples)

    def satisfied(self, *series: list[float], sampled_s: float) -> bool:
        """For every series: enough samples, a median known to within max_noise and no drift
        between its halves (worker/stats.py says why not stddev/mean); and at least min_time_s
        spent sampling, so a clock still settling can show up as drift.

        min_time counts the time spent sampling, not the kernels' summed time: a 10 us kernel
        timed cold spends most of each sample's wall time in its L2 flush, so 0.1 s of kernel time
        took more samples (10,000) than the 3 s cap allows, and no case at 256^3 converged on
        the H100 although its median was known to 0.1 %."""
        return sampled_s >= self.min_time_s and all(
            stats.has_converged(x, self.min_samples, self.max_noise, self.max_drift) for x in series)


@dataclass(frozen=True)
class Case:
    index: int
    variant: str
    m: int
    n: int
    k: int
    seed: int
    launch: LaunchSpec | None  # None: cuBLAS alone
    tunables: dict[str, int] = field(default_factory=dict)
    base: LaunchSpec | None = None  # a confirmation case: the base commit's kernel, timed against `launch`

    @property
    def label(self) -> str:
        params = "".join(f" {k}={v}" for k, v in sorted(self.tunables.items()))
        return f"{self.variant} {self.m}x{self.n}x{self.k}{params}" + (" head vs base" if self.base else "")


@dataclass
class CaseOutcome:
    """What one case produced; field names match the result row."""

    verified: bool = False
    rel_error: float | None = None
    median_ms: float | None = None
    gflops: float | None = None
    cublas_median_ms: float | None = None
    cublas_gflops: float | None = None
    pct_of_cublas: float | None = None
    n_samples: int = 0
    mean_ms: float | None = None
    stddev_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    q1_ms: float | None = None
    q3_ms: float | None = None
    noise: float | None = None
    converged: bool = False
    mode: str = "cold"
    compute_mode: str = "fp32"
    error: str | None = None
    samples_ms: list[float] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def not_applicable_here(cls, reason: str, mode: str) -> "CaseOutcome":
        """A kernel this GPU cannot run (it was built for another target): not run, not verified,
        and not a failure of the job. The reason is the result's error; env marks it."""
        return cls(mode=mode, error=reason, env={"not_applicable": True})

    @property
    def not_applicable(self) -> bool:
        return bool(self.env.get("not_applicable"))

    def add_timing(self, samples_ms: list[float], summary: dict[str, float]) -> None:
        """Copy a summary from worker.stats.summarise (same key names) and keep the raw samples."""
        self.samples_ms = samples_ms
        self.n_samples = len(samples_ms)
        for key, value in summary.items():
            setattr(self, key, value)


# Tuned configurations known for the GPU at hand: (variant, m, n, k) -> tunables.
TunedLookup = dict[tuple[str, int, int, int], dict[str, int]]


def not_applicable(case: Case, compute_capability: str, mode: str) -> CaseOutcome | None:
    """The outcome of a case whose kernel (or confirmation base) needs another GPU target, else None."""
    for launch in (case.launch, case.base):
        reason = launch.not_applicable_on(compute_capability) if launch is not None else None
        if reason:
            return CaseOutcome.not_applicable_here(reason, mode)
    return None


def plan(
    kind: str,
    variants: list[str],
    sizes: list[list[int]],
    explicit: dict[str, dict[str, int]],
    tuned: TunedLookup,
    own: set[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The job's cases as plain data, in the order the user asked for them.

    bench: each variant once per size, with its explicit tunables, else the tuned ones for this
    GPU model and size, else the registry defaults. autotune: every combination of tunables.
    A job's own kernels (not in the registry) have no tunables: their defines are fixed.
    """
    entries = []
    for m, n, k in sizes:
        for name in variants:
            spec = VARIANTS.get(name)
            if spec is None or name in own:
                options = [{}]
            elif kind == "autotune":
                options = configurations(spec)
            else:
                options = [spec.check_params(explicit.get(name) or tuned.get((name, m, n, k)))]
            entries += [{"variant": name, "m": m, "n": n, "k": k, "tunables": params} for params in options]
    return entries


def launch_for(name: str, tunables: dict[str, int], sources: dict[str, dict[str, Any]]) -> LaunchSpec | None:
    """One path for built-in and user kernels: both become a LaunchSpec."""
    if name == CUBLAS:
        return None
    if name in sources:
        return spec_from_dict(name, {**sources[name], "origin": "job"})
    return VARIANTS[name].resolve(tunables)


def spec_from_dict(name: str, k: dict[str, Any]) -> LaunchSpec:
    """A job's own source, or a kernel thawed from the store (api/kernel_store.py), as a LaunchSpec."""
    return LaunchSpec(name, k["source"], k["entry"], tuple(k["block"]), tuple(k["tile"]), dict(k["defines"]),
                      k.get("compute_mode", "fp32"), k.get("origin", "job"), k.get("arch"), k.get("dynamic_smem", 0))


def freeze_plan(db, entries: list[dict[str, Any]], sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record in each plan entry the kernel it resolves to, its source kept by digest, so this
    commit's kernel can be measured again after the registry has moved on."""
    from api.kernel_store import freeze

    by_name = {s["name"]: s for s in sources}
    for e in entries:
        if "head" not in e:
            launch = launch_for(e["variant"], e["tunables"], by_name)
            e["kernel"] = freeze(db, launch) if launch is not None else None
    return entries


def cases_from_plan(entries: list[dict[str, Any]], job_id: int, sources: list[dict[str, Any]] = ()) -> list[Case]:
    by_name = {s["name"]: s for s in sources}
    cases = []
    for index, e in enumerate(entries):
        name, m, n, k = e["variant"], e["m"], e["n"], e["k"]
        seed = zlib.crc32(f"{job_id}:{m}:{n}:{k}".encode())  # same inputs for every variant of a size
        if "head" in e:  # a confirmation: the head's kernel timed against the base's
            launch, base = spec_from_dict(name, e["head"]), spec_from_dict(name, e["base"])
        else:
            launch, base = launch_for(name, e["tunables"], by_name), None
        cases.append(Case(index, name, m, n, k, seed, launch, dict(e["tunables"]), base))
    return cases


def plan_cases(variants: list[str], sizes: list[list[int]], job_id: int) -> list[Case]:
    """A bench job's cases with default tunables (for callers without a database)."""
    return cases_from_plan(plan("bench", variants, sizes, {}, {}), job_id)


def gflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e9
