"""Plain data passed between the job executor and the GPU child process, and a job's plan: which
kernel, with which tunables, each of its cases runs."""

import zlib
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from core.description.builtins import CUBLAS_VARIANTS, builtin_kernels
from core.description.precision import Precision
from core.results.result_status import NOT_APPLICABLE, status_of
from core.description.gemm_form import DEFAULT_KEY, GemmForm
from core.description.inputs import SIGNED
from core.description.kernel import dotted, target_refusal
from core.description.kernel_description import KernelDescription
from core.records.kernel_store import description_from_stored, freeze
from core.results.timing_stats import TimingStats, timing_dataclass
from worker.measure import stats


SW_POWER_CAP = 0x4  # NVML's clocks-event reason: the board is at its software power limit


@dataclass(frozen=True)
class TimingPolicy:
    warmup_ms: float
    min_samples: int
    max_noise: float
    time_cap_s: float
    max_rel_error: float
    # "cold": L2 flushed before every sample, each sample on its own (the default);
    # "hot": back-to-back launches, no flush;
    # "sustained": cold samples back to back, after the card has run them for sustained_warmup_s.
    mode: str
    min_time_s: float = 0.0
    discard_throttled: bool = True
    max_rel_error_tf32: float = 2e-3
    hold_stream: bool = True  # nvbench's blocking kernel: no host launch overhead inside a sample
    flush: str = "readwrite"  # how a cold sample's L2 is evicted: "readwrite" or "memset"
    max_drift: float = 0.01
    interleave: str = "blocks"  # "blocks": a batch's variant samples, then its cuBLAS ones; "pairs": V C V C ...
    isolate_samples: bool = True  # cold: each sample behind its own stream hold, synchronised before the next
    sustained_warmup_s: float = 1.0
    burst_rest_s: float = 0.1  # "burst": the card idle this long before each batch
    cublas_baseline: str = "best"  # "best" or "default": worker/measure/cublas_best.py

    @classmethod
    def from_settings(cls, s) -> "TimingPolicy":
        return cls(s.warmup_ms, s.min_samples, s.max_noise, s.case_time_cap_s, s.max_rel_error, s.timing_mode,
                   s.min_time_s, s.discard_throttled, s.max_rel_error_tf32, s.hold_stream, s.l2_flush, s.max_drift,
                   s.interleave, s.isolate_samples, s.sustained_warmup_s, s.burst_rest_ms / 1000.0, s.cublas_baseline)

    # A tensor-core GEMM at 4096^3 and up runs an H100 into its power cap, and from then on its
    # clock follows how busy the card is kept (docs/BENCHMARKS.md, issue 23). "cold" takes each
    # sample with the card idle just before (nvbench's reading: the clock the card holds in
    # bursts); "sustained" keeps the card as busy as a loop of GEMMs does (do_bench's reading:
    # the clock it settles at under the cap).
    @property
    def flushes(self) -> bool:
        return self.mode in ("cold", "sustained")

    @property
    def isolated(self) -> bool:
        return self.isolate_samples and self.mode == "cold"

    @property
    def holds_stream(self) -> bool:
        """Sustained samples are queued without a hold: the flush before each gives the host time to
        queue the sample's launches, and a hold would leave the card idle while a batch is queued."""
        return self.hold_stream and self.mode != "sustained"

    @property
    def rest_s(self) -> float:
        """How long the card is left idle before each batch ("burst"): a repository's quick runner
        times a few launches after a pause, before the power controller lowers the clock."""
        return self.burst_rest_s if self.mode == "burst" else 0.0

    @property
    def settle_s(self) -> float:
        return self.sustained_warmup_s if self.mode == "sustained" else 0.0

    def disturbing(self, reasons: int) -> int:
        """The throttle reasons that make a batch unlike the others. Under "sustained" the power cap
        is the state being measured, not a disturbance; a thermal or hardware slowdown still is."""
        return reasons & ~SW_POWER_CAP if self.mode == "sustained" else reasons

    def satisfied(self, *series: list[float], sampled_s: float) -> bool:
        """For every series: enough samples, a median known to within max_noise and no drift
        between its halves (worker/measure/stats.py says why not stddev/mean); and at least min_time_s
        spent sampling, so a clock still settling can show up as drift.

        min_time counts the time spent sampling, not the kernels' summed time: a 10 us kernel
        timed cold spends most of each sample's wall time in its L2 flush, so 0.1 s of kernel time
        took more samples (10,000) than the 3 s cap allows, and no case at 256^3 converged on
        the H100 although its median was known to 0.1 %."""
        return sampled_s >= self.min_time_s and all(
            stats.has_converged(x, self.min_samples, self.max_noise, self.max_drift) for x in series)


@dataclass(frozen=True)
class KernelChoice:
    """A kernel as a case runs it: its description, the tunables chosen, and where it came from
    ("builtin": this project's kernels/; "job": brought by a job, so compiled as hostile)."""

    description: KernelDescription
    tunables: dict[str, int] = field(default_factory=dict)
    origin: str = "job"
    # Where a tool wrote the code the description now holds (a Helion kernel's Triton code for this
    # case: worker/compile/helion_build.py), what wrote it, for the result's env; None for a job's own code.
    written_by: dict | None = None

    @property
    def target(self) -> str | None:
        return self.description.effective_target


@dataclass(frozen=True)
class Case:
    index: int
    variant: str
    m: int
    n: int
    k: int
    seed: int
    kernel: KernelChoice | None  # None: cuBLAS alone
    base: KernelChoice | None = None  # a confirmation case: the base commit's kernel, timed against `kernel`
    batch: int = 1  # matrices per call (a batched GEMM: the fourth of a size [M, N, K, batch])
    timing: str | None = None  # the mode asked for this case (the job's or its kernel's); None: the worker's

    @property
    def inputs(self) -> str:
        """What its timed runs multiply (core/description/inputs.py): its kernel's choice (a confirmation: the
        head's, for both sides), else signed inputs."""
        return self.kernel.description.inputs if self.kernel is not None else SIGNED

    def policy(self, worker_policy: "TimingPolicy") -> "TimingPolicy":
        """The worker's timing policy in the mode this case asks for."""
        return replace(worker_policy, mode=self.timing) if self.timing else worker_policy

    @property
    def form(self) -> GemmForm:
        """The kernel's form (cuBLAS alone: the default one)."""
        return self.kernel.description.form if self.kernel is not None else GemmForm()

    @property
    def tunables(self) -> dict[str, int]:
        return dict(self.kernel.tunables) if self.kernel is not None and self.base is None else {}

    @property
    def precision(self) -> Precision:
        """What cuBLAS runs in when it runs alone (variant cublas_bf16, say); a kernel's own otherwise."""
        if self.kernel is not None:
            return self.kernel.description.precision
        return Precision(CUBLAS_VARIANTS.get(self.variant, "fp32"))

    @property
    def label(self) -> str:
        params = "".join(f" {k}={v}" for k, v in sorted(self.tunables.items()))
        batch = f"x{self.batch}" if self.batch > 1 else ""
        return f"{self.variant} {self.m}x{self.n}x{self.k}{batch}{params}" + (" head vs base" if self.base else "")


# The statistics a case fills from summarise() (core/results/timing_stats.py RESULT_STATISTICS), each None
# until timed.
CaseTiming = timing_dataclass("CaseTiming", __name__)


@dataclass
class CaseOutcome(CaseTiming):
    """What one case produced; field names match the result row (its statistics: CaseTiming)."""

    verified: bool = False
    rel_error: float | None = None
    gflops: float | None = None
    cublas_gflops: float | None = None
    pct_of_cublas: float | None = None
    n_samples: int = 0
    converged: bool = False
    mode: str = "cold"
    compute_mode: str = "fp32"
    dtype: str = "float32"  # of A and B
    form: str = DEFAULT_KEY  # the GEMM's form (core/description/gemm_form.py key): layouts, epilogue, accumulate, batch
    error: str | None = None
    # core/results/result_status.py; None: read from verified, error and rel_error when stored. The runner
    # says "incorrect" itself where the error was NaN or Inf (no rel_error to store).
    status: str | None = None
    samples_ms: list[float] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        row = asdict(self)
        if row["status"] is None:
            row["status"] = status_of(self.verified, self.error, self.rel_error, self.not_applicable)
        return row

    @classmethod
    def not_applicable_here(cls, reason: str, mode: str) -> "CaseOutcome":
        """A kernel this GPU cannot run (it was built for another target): not run, not verified,
        and not a failure of the job. The reason is the result's error; env marks it."""
        return cls(mode=mode, error=reason, status=NOT_APPLICABLE, env={"not_applicable": True})

    @property
    def not_applicable(self) -> bool:
        return bool(self.env.get("not_applicable"))

    def add_timing(self, samples_ms: list[float], summary: TimingStats) -> None:
        """Copy a summary from worker.measure.stats.summarise (its keys are fields here: core/results/timing_stats.py)
        and keep the raw samples."""
        self.samples_ms = samples_ms
        self.n_samples = len(samples_ms)
        for key, value in summary.items():
            setattr(self, key, value)


# Tuned configurations known for the GPU at hand: (variant, m, n, k) -> tunables.
TunedLookup = dict[tuple[str, int, int, int], dict[str, int]]


def not_applicable(case: Case, compute_capability: str, mode: str) -> CaseOutcome | None:
    """The outcome of a case whose kernel (or confirmation base) needs another GPU target or does not run at
    the case's size by its description, else None."""
    have = dotted(compute_capability)
    if case.precision.fp8 and tuple(int(x) for x in have.split(".")) < (8, 9):
        return CaseOutcome.not_applicable_here(
            f"not applicable: FP8 tensor cores came with compute capability 8.9; this GPU has {have}", mode)
    for choice in (case.kernel, case.base):
        why = target_refusal(choice.description.name, choice.target, have) if choice is not None else None
        if why is not None:
            return CaseOutcome.not_applicable_here(why, mode)
        why = choice.description.size_refusal(case.m, case.n, case.k) if choice is not None else None
        if why is not None:
            return CaseOutcome.not_applicable_here(why, mode)
    return None


def plan(
    kind: str,
    variants: list[str],
    sizes: list[list[int]],
    explicit: dict[str, dict[str, int]],
    tuned: TunedLookup,
    kernels: dict[str, KernelDescription],
    timing: str | None = None,
) -> list[dict[str, Any]]:
    """The job's cases as plain data, in the order the user asked for them.

    bench: each variant once per size, with its explicit tunables, else the tuned ones for this
    GPU model and size (where they fit the kernel), else its defaults. autotune: every
    combination of tunables. Each case's timing mode: the job's (`timing`), else its kernel's own,
    else none (the worker's GEMMWATCH_TIMING_MODE).
    """
    entries = []
    for size in sizes:
        m, n, k, batch = (*size, 1)[:4]
        for name in variants:
            desc = kernels.get(name) if name not in CUBLAS_VARIANTS else None
            if desc is None:
                options = [{}]
            elif kind == "autotune":
                options = desc.configurations()
            else:
                options = [desc.chosen_tunables(explicit.get(name), tuned.get((name, m, n, k)))]
            mode = timing or (desc.timing if desc is not None else None)
            entries += [{"variant": name, "m": m, "n": n, "k": k, "tunables": params,
                         **({"batch": batch} if batch > 1 else {}), **({"timing": mode} if mode else {})}
                        for params in options]
    return entries


def freeze_plan(db, entries: list[dict[str, Any]], kernels: dict[str, KernelDescription], own: set[str]) -> list[dict[str, Any]]:
    """Record in each plan entry the kernel it runs, its files kept by digest, so this commit's
    kernel can be measured again after the registry and the repository have moved on."""
    for e in entries:
        if "head" not in e:
            desc = kernels.get(e["variant"]) if e["variant"] not in CUBLAS_VARIANTS else None
            e["kernel"] = (freeze(db, desc, e["tunables"], "job" if e["variant"] in own else "builtin")
                           if desc is not None else None)
    return entries


def choice_from_stored(stored: dict[str, Any]) -> KernelChoice:
    """A kernel thawed from the store (core/records/kernel_store.py thaw) as a case runs it; a confirmation
    planned before kernels had one description holds the old shape (one source text), read as such."""
    described = stored["description"] if "description" in stored else stored
    return KernelChoice(description_from_stored(described), dict(stored.get("tunables") or {}),
                        stored.get("origin", "job"))


def cases_from_plan(entries: list[dict[str, Any]], job_id: int, kernels: dict[str, KernelDescription],
                    own: set[str] = frozenset(), timing: str | None = None) -> list[Case]:
    """The plan's cases; `timing`: the job's mode, for entries planned without one of their own (a
    confirmation's, which takes its head job's)."""
    cases = []
    for index, e in enumerate(entries):
        name, m, n, k = e["variant"], e["m"], e["n"], e["k"]
        seed = zlib.crc32(f"{job_id}:{m}:{n}:{k}".encode())  # same inputs for every variant of a size
        if "head" in e:  # a confirmation: the head's kernel timed against the base's
            kernel, base = choice_from_stored(e["head"]), choice_from_stored(e["base"])
        else:
            desc = kernels.get(name) if name not in CUBLAS_VARIANTS else None
            kernel = KernelChoice(desc, dict(e["tunables"]), "job" if name in own else "builtin") if desc else None
            base = None
        cases.append(Case(index, name, m, n, k, seed, kernel, base, e.get("batch", 1), e.get("timing") or timing))
    return cases


def plan_cases(variants: list[str], sizes: list[list[int]], job_id: int) -> list[Case]:
    """A bench job's cases of built-in kernels with their defaults (for callers without a database)."""
    kernels = builtin_kernels()
    return cases_from_plan(plan("bench", variants, sizes, {}, {}, kernels), job_id, kernels)


def builtin_case(name: str, m: int, n: int, k: int, seed: int = 1, tunables: dict[str, int] | None = None,
                 index: int = 0) -> Case:
    """One case of a built-in kernel (or cuBLAS), for callers without a job: studies, GPU tests."""
    desc = builtin_kernels().get(name)
    kernel = KernelChoice(desc, desc.check_tunables(tunables), "builtin") if desc is not None else None
    return Case(index, name, m, n, k, seed, kernel)
