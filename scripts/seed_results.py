"""Fill a scratch PostgreSQL database with many results, then time the dashboard's pages.

    .venv/bin/python scripts/seed_results.py --results 1000000
    .venv/bin/python scripts/seed_results.py --results 1000000 --skinny   # skinny shapes too

Creates its own database on the server (default postgresql://postgres@127.0.0.1:5432), builds the
schema with Alembic, bulk-loads GPUs, commits, jobs and results with COPY, runs ANALYZE and
VACUUM as autovacuum would, then requests each page in-process through the real app
(FastAPI's TestClient, so the time is the server's: routing, SQL, figures, templates; no
network) and prints the median and worst of several runs. The database is dropped afterwards
unless --keep is given. Not part of the test suite: loading a million rows takes minutes.

The rows look like the worker's: every column filled, env with the GPU identity, clocks
before and after, launch geometry and cuBLAS samples; samples_ms with the kept samples.
"""

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.records.db import engine_for, upgrade_database  # noqa: E402
from core.settings import Settings  # noqa: E402

GPUS = [  # (uuid, name, model, sm_count, cc, max clock MHz, cuBLAS GFLOPS at 4096^3)
    ("GPU-seed-h100-0", "NVIDIA H100 80GB HBM3", "H100", 132, "9.0", 1980, 51_000),
    ("GPU-seed-h100-1", "NVIDIA H100 80GB HBM3", "H100", 132, "9.0", 1980, 51_000),
    ("GPU-seed-a100-0", "NVIDIA A100-SXM4-80GB", "A100", 108, "8.0", 1410, 18_900),
    ("GPU-seed-l40s-0", "NVIDIA L40S", "L40S", 142, "8.9", 2520, 60_000),
    ("GPU-seed-4090-0", "NVIDIA GeForce RTX 4090", "RTX-4090", 128, "8.9", 2520, 55_000),
]
MODELS = sorted({g[2] for g in GPUS})
VARIANTS = ["naive", "naive_16x16_alpha_beta", "guide_global_strided", "guide_smem_submatrix_16", "smem_tiled",
            "smem_padding", "smem_a_transposed", "smem_swizzle_xor", "smem_prefetch_registers", "smem_block_tile",
            "register_staged_at", "pitched_b_transposed_tile", "thread_tile_8x8", "float4_thread_tile_4x4",
            "global_prefetch_double_buffer", "warp_tile", "warp_tile_large", "cp_async_multistage", "cublas",
            "tiled_extra"]
SIZES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 2048, 1024)]
# --skinny: the inference shapes of issue 10, and M walked at N=K=4096 for the sweep of one dimension.
SKINNY = [(16, 4096, 4096), (4096, 16, 4096), (64, 8192, 8192), (8192, 8192, 64), (1, 4096, 4096),
          (64, 4096, 4096), (256, 4096, 4096)]
BANDWIDTH_GBS = {"H100": 3350, "A100": 2039, "L40S": 864, "RTX-4090": 1008}  # data sheets
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)

NOTES = ["kernels compiled by NVRTC with -ftz=true (CuPy adds it): denormals flush to zero",
         "cuBLAS baseline: cupy.matmul, FP32 compute, TF32 off"]
RESULT_COLUMNS = ("id", "job_id", "case_index", "variant", "m", "n", "k", "dtype", "mode", "compute_mode", "gpu_id",
                  "commit_id", "verified", "rel_error", "median_ms", "gflops", "cublas_median_ms", "cublas_gflops",
                  "pct_of_cublas", "tunables", "n_samples", "mean_ms", "stddev_ms", "min_ms", "max_ms", "q1_ms",
                  "q3_ms", "noise", "converged", "error", "env", "samples_ms", "created_at")


def identity(g) -> dict:
    uid, name, model, sms, cc, clock, _ = g
    return {"name": name, "model": model, "uuid": uid, "driver": "580.159.04", "memory_mib": 81559,
            "max_sm_clock_mhz": clock, "sm_count": sms, "compute_capability": cc, "l2_bytes": 52428800,
            "cuda_runtime": 13020, "cuda_driver_api": 13020, "cupy": "14.2.0", "nvrtc_flush_to_zero": True,
            "cublas_math_mode": "CUBLAS_DEFAULT_MATH"}


def state(clock: int, temp: int) -> dict:
    return {"sm_clock_mhz": clock, "mem_clock_mhz": 2619, "temperature_c": temp, "power_w": 310.5,
            "throttle_reasons": 0}


def load(dsn: str, n_results: int, seed: int, sizes: list[tuple[int, int, int]]) -> dict:
    rng = random.Random(seed)
    cases_per_job = len(VARIANTS) * len(sizes)
    n_commits = max(1, n_results // (cases_per_job * len(MODELS)))
    idents = [identity(g) for g in GPUS]
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY gpu (id, uuid, name, model, sm_count, compute_capability, memory_mib, driver, first_seen,"
                      " last_seen) FROM STDIN") as cp:
            for i, (uid, name, model, sms, cc, _, _) in enumerate(GPUS, 1):
                cp.write_row((i, uid, name, model, sms, cc, 81559, "580.159.04", T0, T0))
        with cur.copy("COPY commit (id, sha, repo, branch, message, committed_at, created_at) FROM STDIN") as cp:
            for c in range(1, n_commits + 1):
                t = T0 + timedelta(hours=3 * c)
                cp.write_row((c, uuid.UUID(int=rng.getrandbits(128)).hex[:40], "me/kernels", "main",
                              f"kernels: change {c}\n\nTuning notes for change {c}.", t, t))
        # One job per commit and GPU model, on one of that model's cards; jobs go in before
        # their results so that every foreign key holds as the rows arrive.
        jobs = []
        for c in range(1, n_commits + 1):
            for model in MODELS:
                gpu_i = rng.choice([i for i, g in enumerate(GPUS) if g[2] == model])
                jobs.append((len(jobs) + 1, c, gpu_i, T0 + timedelta(hours=3 * c, minutes=5)))
        with cur.copy("COPY job (id, status, kind, variants, sizes, tunables, gpu_model, queue, commit_id, gpu_id,"
                      " progress_done, progress_total, created_at, started_at, finished_at) FROM STDIN") as cp:
            variants, sizes_json = json.dumps(VARIANTS), json.dumps([list(s) for s in sizes])
            for jid, c, gpu_i, t in jobs:
                model = GPUS[gpu_i][2]
                cp.write_row((jid, "succeeded", "bench", variants, sizes_json, "{}", model, f"gpu.{model}", c, gpu_i + 1,
                              cases_per_job, cases_per_job, t, t, t + timedelta(minutes=4)))
        result_id = 0
        started = time.monotonic()
        drift: dict[str, float] = {}
        with cur.copy(f"COPY result ({', '.join(RESULT_COLUMNS)}) FROM STDIN") as rcp:
            for jid, c, gpu_i, t in jobs:
                if jid % len(MODELS) == 1:  # each commit moves each kernel a little, on every GPU alike
                    drift = {v: rng.gauss(1.0, 0.01) for v in VARIANTS}
                for case, (size, variant) in enumerate((s, v) for s in sizes for v in VARIANTS):
                    if result_id >= n_results:
                        break
                    result_id += 1
                    rcp.write_row(result_row(rng, result_id, jid, case, variant, size, gpu_i + 1, c, GPUS[gpu_i],
                                             idents[gpu_i], drift[variant], t))
        print(f"  {result_id:,} results in {time.monotonic() - started:.0f} s", flush=True)
        # Ids were given explicitly: move the sequences past them, so later inserts still work.
        for table in ("gpu", "commit", "job", "result"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM \"{table}\"))")
        conn.commit()
    return {"results": result_id, "jobs": len(jobs), "commits": n_commits}


def result_row(rng, rid, job_id, case, variant, size, gpu_id, commit_id, g, ident, drift, t):
    m, n, k = size
    frac = 0.06 + 0.9 * (VARIANTS.index(variant) / len(VARIANTS)) ** 1.5
    cublas = g[6] * min(1.0, (m * n * k) ** (1 / 3) / 4096) ** 0.5
    # A skinny shape is bound by memory: what a made-up 35 % of the bandwidth feeds at its
    # arithmetic intensity (operands read once, C written once). Lifelike data, not a measurement.
    cublas = min(cublas, 0.35 * BANDWIDTH_GBS[g[2]] * 2 * m * n * k / (4 * (m * k + k * n + m * n)))
    cublas *= rng.gauss(1.0, 0.002)
    gflops = cublas * frac * drift
    verified = rng.random() > 0.02
    ms = 2 * m * n * k / (gflops * 1e9) * 1e3
    cb_ms = 2 * m * n * k / (cublas * 1e9) * 1e3
    noise = abs(rng.gauss(0.003, 0.002))
    samples = [round(ms * rng.gauss(1.0, noise), 6) for _ in range(12)] if verified else []
    env = {"gpu": ident, "before": state(g[5], 41), "after": state(g[5], 44),
           "launch": {"entry": "sgemm", "block": [256, 1, 1], "grid": [n // 128, m // 128, 1], "dynamic_smem": 0,
                      "defines": {}, "layout": "row", "target": None},
           "notes": NOTES}
    if verified:
        env["cublas_samples_ms"] = [round(cb_ms * rng.gauss(1.0, 0.002), 6) for _ in range(12)]
    env = json.dumps(env)
    if not verified:
        return (rid, job_id, case, variant, m, n, k, "float32", "cold", "fp32", gpu_id, commit_id, False, 0.03,
                None, None, None, None, None, "{}", 0, None, None, None, None, None, None, None, False,
                "wrong result: relative error 0.03 > 0.0001", env, "[]", t)
    return (rid, job_id, case, variant, m, n, k, "float32", "cold", "fp32", gpu_id, commit_id, True,
            rng.random() * 1e-6, ms, gflops, cb_ms, cublas, 100 * gflops / cublas, "{}", len(samples), ms,
            ms * noise, min(samples), max(samples), ms * (1 - noise), ms * (1 + noise), noise, True, None, env,
            json.dumps(samples), t)


def time_pages(url: str, runs: int) -> list[tuple[str, float, float]]:
    from fastapi.testclient import TestClient

    from api.app import create_app

    client = TestClient(create_app(Settings(DATABASE_URL=url, GEMMWATCH_DATA_DIR="/tmp/gemmwatch-seed")))
    h100 = "gpu=H100&size=4096x4096x4096&mode=cold"
    pages = ["/history", f"/history?{h100}", f"/history?{h100}&format=csv", f"/history?{h100}&last=500",
             "/", "/sweep?mode=cold", "/sweep?mode=cold&vary=m&n=4096&k=4096", "/compare", "/jobs", "/jobs/1"]
    out = []
    for page in pages:
        started = time.perf_counter()
        client.get(page).raise_for_status()  # warm-up: a fresh process also imports plotly's validators here
        first = time.perf_counter() - started
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            client.get(page).raise_for_status()
            times.append(time.perf_counter() - started)
        out.append((page, statistics.median(times), max(times)))
        print(f"  {page:58s} median {1000 * out[-1][1]:6.0f} ms  worst {1000 * out[-1][2]:6.0f} ms"
              f"  (warm-up {1000 * first:5.0f} ms)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=int, default=1_000_000)
    ap.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server (no db)")
    ap.add_argument("--runs", type=int, default=9, help="timed requests per page (after one warm-up)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the database (its name is printed)")
    ap.add_argument("--skinny", action="store_true", help="every job also measures the skinny shapes in SKINNY")
    args = ap.parse_args()

    name = f"gemmwatch_seed_{uuid.uuid4().hex[:8]}"
    admin = f"{args.server}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = f"{args.server}/{name}"
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        upgrade_database(Settings(DATABASE_URL=url, GEMMWATCH_DATA_DIR="/tmp/gemmwatch-seed"))
        started = time.monotonic()
        print(f"loading into {name}", flush=True)
        counts = load(dsn, args.results, args.seed, SIZES + SKINNY if args.skinny else SIZES)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('result'))").fetchone()[0]
        print(f"loaded {counts} in {time.monotonic() - started:.0f} s; result table with indexes: {size}", flush=True)
        print(f"timing each page, {args.runs} runs after one warm-up (TestClient, in-process):", flush=True)
        time_pages(url, args.runs)
    finally:
        engine_for.cache_clear()
        if args.keep:
            print(f"kept database {name}")
        else:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
