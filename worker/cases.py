"""Plain data passed between the job executor and the GPU child process."""

import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from kernels.registry import CUBLAS, VARIANTS, LaunchSpec


@dataclass(frozen=True)
class TimingPolicy:
    warmup_ms: float
    min_samples: int
    max_noise: float
    time_cap_s: float
    max_rel_error: float
    mode: str  # "cold": L2 flushed before every sample; "hot": back-to-back launches

    @classmethod
    def from_settings(cls, s) -> "TimingPolicy":
        return cls(s.warmup_ms, s.min_samples, s.max_noise, s.case_time_cap_s, s.max_rel_error, s.timing_mode)


@dataclass(frozen=True)
class Case:
    index: int
    variant: str
    m: int
    n: int
    k: int
    seed: int
    launch: LaunchSpec | None  # None: cuBLAS alone

    @property
    def label(self) -> str:
        return f"{self.variant} {self.m}x{self.n}x{self.k}"


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
    noise: float | None = None
    converged: bool = False
    mode: str = "cold"
    compute_mode: str = "fp32"
    error: str | None = None
    samples_ms: list[float] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def plan_cases(variants: list[str], sizes: list[list[int]], job_id: int) -> list[Case]:
    """Variants x sizes, in the order the user asked for them, each with its own input seed."""
    cases = []
    for m, n, k in sizes:
        for name in variants:
            launch = None if name == CUBLAS else VARIANTS[name].resolve()
            seed = zlib.crc32(f"{job_id}:{m}:{n}:{k}".encode())  # same inputs for every variant of a size
            cases.append(Case(len(cases), name, m, n, k, seed, launch))
    return cases


def gflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e9
