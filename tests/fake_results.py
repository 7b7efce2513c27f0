"""Rows written straight into the database, for tests of the read side (API, dashboard)."""

import random
import statistics
from datetime import datetime, timedelta, timezone

from core.records.db import session_factory
from core.description.precision import peak_tflops
from core.records.models import Job, Result
from api.schemas import CommitIn
from core.records.store import upsert_commit, upsert_gpu

# As worker/measure/runner.py identity() reports them; upsert_gpu keeps the columns it has, and the
# whole dict goes into each result's env["gpu"] (that is where the max SM clock lives).
# The memory bus and clock as NVML reports them (2 x clock x bus / 8: 3.35 and 2.04 TB/s).
H100 = {"uuid": "GPU-test-h100", "name": "NVIDIA H100 80GB HBM3", "model": "H100", "sm_count": 132,
        "compute_capability": "9.0", "max_sm_clock_mhz": 1980, "memory_bus_bits": 5120, "max_mem_clock_mhz": 2619}
A100 = {"uuid": "GPU-test-a100", "name": "NVIDIA A100-SXM4-80GB", "model": "A100", "sm_count": 108,
        "compute_capability": "8.0", "max_sm_clock_mhz": 1410, "memory_bus_bits": 5120, "max_mem_clock_mhz": 1593}
_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def samples_around(median_ms: float, noise: float, n: int = 10, seed: str = "") -> list[float]:
    """n samples whose median is median_ms, spread with a relative standard deviation of about noise
    (seeded by the case, so every run writes the same rows)."""
    rng = random.Random(seed)
    z = [rng.gauss(0.0, 1.0) for _ in range(n)]
    mid = statistics.median(z)
    return [median_ms * (1 + noise * (x - mid)) for x in z]


def _result(job, case_index, variant, size, gflops, verified, gpu_id, commit_id, mode, noise, error, gpu,
            cublas_gflops=None, form="rrr"):
    m, n, k = size
    ms = 2 * m * n * k / (gflops * 1e9) * 1e3
    cublas = cublas_gflops or 2 * gflops
    return Result(job_id=job.id, case_index=case_index, variant=variant, m=m, n=n, k=k, mode=mode, form=form,
                  gpu_id=gpu_id, commit_id=commit_id, verified=verified,
                  # as status_of reads these fields (core/results)
                  status="passed" if verified else ("not applicable" if (error or "").startswith("not applicable")
                                                    else "incorrect"),
                  rel_error=1e-7 if verified else 0.5, median_ms=ms if verified else None,
                  gflops=gflops if verified else None, cublas_gflops=cublas if verified else None,
                  pct_of_cublas=100 * gflops / cublas if verified else None, n_samples=10, noise=noise,
                  samples_ms=samples_around(ms, noise, seed=f"{variant}{size}{gflops}{mode}") if verified else [],
                  converged=True, error=None if verified else error, env=_env(gpu, gflops if verified else None))


def _env(gpu: dict, gflops: float | None) -> dict:
    """env.gpu, and env.peak as worker/measure/runner.py peak() writes it (FP32, at the top SM clock)."""
    tflops = peak_tflops(gpu.get("compute_capability"), "fp32", gpu.get("sm_count"), gpu.get("max_sm_clock_mhz"))
    if not (tflops and gflops):
        return {"gpu": gpu}
    return {"gpu": gpu, "peak": {"tflops": tflops, "sm_clock_mhz": gpu["max_sm_clock_mhz"], "pct": gflops / 10 / tflops}}


def add_result(cfg, variant, size, sha, gflops, verified=True, commit_index=0, gpu=H100, mode="cold",
               noise=0.003, message=None, error="wrong result", form="rrr"):
    """One succeeded job with one result; returns the job id."""
    return add_job(cfg, sha, [(variant, size, gflops, verified)], commit_index=commit_index, gpu=gpu, mode=mode,
                   noise=noise, message=message, error=error, form=form)


def add_job(cfg, sha, cases, commit_index=0, gpu=H100, mode="cold", noise=0.003, message=None,
            error="wrong result", status="succeeded", total=None, current_case=None, form="rrr"):
    """A job with a result per case (variant, size, gflops, verified[, cublas_gflops]), each of GEMM form
    `form` (core/description/gemm_form.py key); returns its id.

    `total` larger than len(cases) leaves the job part-way, as a running job looks.
    """
    with session_factory(cfg)() as db:
        commit = None
        if sha:
            commit = upsert_commit(db, CommitIn(sha=sha, message=message,
                                                committed_at=_T0 + timedelta(hours=commit_index)))
        gpu_row = upsert_gpu(db, gpu)
        job = Job(status=status, variants=sorted({c[0] for c in cases}) or ["naive"],
                  sizes=[list(s) for s in dict.fromkeys(c[1] for c in cases)] or [[64, 64, 64]], queue="gpu.any",
                  commit=commit, gpu_id=gpu_row.id, progress_total=total or len(cases), progress_done=len(cases),
                  current_case=current_case)
        db.add(job)
        db.flush()
        for i, (variant, size, gflops, verified, *cublas) in enumerate(cases):
            db.add(_result(job, i, variant, size, gflops, verified, gpu_row.id, commit.id if commit else None, mode,
                           noise, error, gpu, *cublas, form=form))
        db.commit()
        return job.id


# A small but lifelike history for the browser test and the screenshots: two GPUs, a kernel
# ladder at three sizes over twelve commits, one regression, one kernel that breaks.
LADDER = {"naive": 0.115, "smem_tiled": 0.175, "thread_tile_8x8": 0.52, "warp_tile": 0.74, "smem_swizzle_xor": 0.6}
CUBLAS = {H100["model"]: {1024: 23_200, 2048: 44_000, 4096: 51_000}, A100["model"]: {1024: 12_500, 2048: 17_800, 4096: 18_900}}
DEMO_COMMITS = 12
REGRESSION_AT = 9  # warp_tile loses 9 % on the H100 from this commit on
BROKEN_AT = 11  # smem_swizzle_xor fails verification at the newest commit


def demo_sha(c: int) -> str:
    """The sha of the demo history's commit number c."""
    return f"{0x5eed000 + 977 * c:07x}{c:02d}d1ce"


def add_demo_history(cfg, seed: int = 7) -> None:
    rng = random.Random(seed)
    for c in range(DEMO_COMMITS):
        sha = demo_sha(c)
        for gpu in (H100, A100):
            cases = []
            for dim, cublas in CUBLAS[gpu["model"]].items():
                for variant, frac in LADDER.items():
                    g = cublas * frac * rng.gauss(1.0, 0.004)
                    if variant == "warp_tile" and gpu is H100 and c >= REGRESSION_AT:
                        g *= 0.91
                    ok = not (variant == "smem_swizzle_xor" and c >= BROKEN_AT)
                    cases.append((variant, (dim, dim, dim), g, ok, cublas * rng.gauss(1.0, 0.002)))
            add_job(cfg, sha, cases, commit_index=c, gpu=gpu, noise=0.002 + 0.004 * rng.random(),
                    message=f"kernels: step {c} of the tuning work", error="wrong result: relative error 0.031 > 0.0001")


# Skinny shapes, the GEMMs of inference (M or N of 1-64 against K of thousands), for the sweep of
# one dimension: M walked at N=K=4096, N walked at M=K=4096, and the four shapes.
SKINNY_M = (1, 4, 16, 64, 256, 1024, 4096)  # at N = K = 4096
SKINNY_N = (16, 64, 256, 4096)  # at M = K = 4096
SKINNY = [(m, 4096, 4096) for m in SKINNY_M] + [(4096, n, 4096) for n in SKINNY_N if n != 4096] + [
    (64, 8192, 8192), (8192, 8192, 64)]
SKINNY_SHA = "5c1a9e0ffee5"
_BANDWIDTH_GBS = {H100["model"]: 3350, A100["model"]: 2039}  # HBM, as the data sheets give it
# The C tile each block computes whole (naive: one element a thread, nothing wasted).
_TILE = {"naive": 1, "smem_tiled": 32}
_TILE_DEFAULT = 128


def roofline_gflops(model: str, size, cube_gflops: float) -> float:
    """cuBLAS-like GFLOPS at a shape: the cube's figure, or what memory can feed at the shape's
    arithmetic intensity (every operand read once, C written once), whichever is lower. The 35 %
    of the data sheet's bandwidth is made up, to give test data a lifelike shape; no measurement."""
    m, n, k = size
    intensity = 2 * m * n * k / (4 * (m * k + k * n + m * n))  # flop per byte
    return min(cube_gflops, 0.35 * _BANDWIDTH_GBS[model] * intensity)


def tile_use(size, tile: int) -> float:
    """Share of a tiled kernel's work that is real when M or N is not a multiple of its tile."""
    m, n, _ = size
    return (m / (-(-m // tile) * tile)) * (n / (-(-n // tile) * tile))


def add_skinny_results(cfg, seed: int = 11) -> None:
    """One job per GPU at one commit: the ladder at every shape of SKINNY, verified."""
    rng = random.Random(seed)
    for gpu in (H100, A100):
        cube = CUBLAS[gpu["model"]][4096]
        cases = []
        for size in SKINNY:
            cublas = roofline_gflops(gpu["model"], size, cube) * rng.gauss(1.0, 0.002)
            for variant, frac in LADDER.items():
                use = tile_use(size, _TILE.get(variant, _TILE_DEFAULT))
                cases.append((variant, size, cublas * frac * use * rng.gauss(1.0, 0.004), True, cublas))
        add_job(cfg, SKINNY_SHA, cases, gpu=gpu, noise=0.004, message="skinny shapes")
