"""The worst a write token may post and still be accepted: every schema-valid extreme (issue 20).

Each batch here is valid for POST /api/results (or POST /api/jobs), so the server stores it; a
reader must then render every page, export and API read of it. Values sit at the bounds of
core/wire_types.py and core/results/result_env.py, and every free text carries what broke a reader once:
HTML and Plotly markup, a bare carriage return before a formula, quotes, a right-to-left override,
characters outside the BMP.
"""

from core.results.result_env import EXTRA_MAX_DEPTH

I32 = 2**31 - 1
MASK = 2**63 - 1
TEXT = ('<a href="https://evil.example/">x</a><span style="font-size:60px">big</span></script><script>alert(1)</script>'
        "\r=cmd|' /C calc'!A0\n+1\t@SUM(A1)\r\n-2 \"quoted\" 'single' \\ %{x} {{ 7*7 }} \u202eevil\u202c \U0001F680 ")


def text(length: int) -> str:
    return (TEXT * (length // len(TEXT) + 1))[:length]


def one_line(length: int) -> str:
    """A name: no control characters (core/wire_types.py Name)."""
    flat = "".join(c for c in TEXT if c >= " " and not "\x7f" <= c <= "\x9f")
    return (flat * (length // len(flat) + 1))[:length]


def deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def resources(fill) -> dict:
    keys = ("registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes", "local_bytes_per_thread",
            "max_threads_per_block", "threads_per_block", "blocks_per_sm", "warps_per_sm")
    out = {k: fill for k in keys}
    out.update(limited_by=one_line(40) if fill is not None else None, compiler=one_line(60) if fill is not None else None, occupancy=1.0 if fill is not None else None,
               limits={one_line(10) + str(i): I32 for i in range(16)} if fill is not None else None,
               sm={f"k{i}": I32 for i in range(32)} if fill is not None else None)
    return out


def full_env() -> dict:
    state = {"sm_clock_mhz": I32, "mem_clock_mhz": I32, "temperature_c": -(2**31), "power_w": 1e6,
             "throttle_reasons": MASK, "unreadable": [text(300)] * 16}
    stats = {k: 1e7 for k in ("median_ms", "mean_ms", "stddev_ms", "min_ms", "max_ms", "q1_ms", "q3_ms")}
    return {
        "notes": [text(500)] * 16,
        "gpu": {"name": one_line(120), "model": one_line(60), "uuid": one_line(80), "driver": one_line(40),
                "memory_mib": I32, "max_sm_clock_mhz": 100_000, "sm_count": 100_000, "compute_capability": one_line(10),
                "l2_bytes": I32, "cuda_runtime": I32, "cuda_driver_api": I32, "cupy": one_line(40),
                "nvrtc_flush_to_zero": True, "cublas_math_mode": I32, "index": I32, "gpu_process_pid": I32,
                "unknown_gpu_key": text(100)},
        "before": state, "after": {k: None for k in state},
        "cublas_samples_ms": [1e7, 0.0] * 500, "cublas_stats": {**stats, "noise": 1e6},
        "throttled_samples_discarded": I32, "throttle_reasons_seen": MASK, "throttled_samples_kept": True,
        "stream_hold": {"used": False, "batches_dropped": I32}, "l2_flush": one_line(40),
        "convergence": {"variant": {"median_ci_rel": 1e6, "drift_rel": 0.0}, "cublas": {"median_ci_rel": None}},
        "resources": resources(I32), "base_resources": resources(None),
        "launch": {"entry": text(200), "block": [I32] * 3, "grid": [0, 0, 0],
                   "defines": {f"D{i}": (-(2**31) if i % 2 else one_line(64)) for i in range(64)},
                   "dynamic_smem": I32, "layout": one_line(10), "target": one_line(20), "swizzle": text(50)},
        "ab": {"base_ms": [1e7] * 100, "base_stats": stats, "base_gflops": 1e9},
        "not_applicable": False,
        "c_convention": text(200),
        "c_layout": text(100),  # a key a later worker may add: kept in env.extra
        "extra": {f"x{i}": (deep(EXTRA_MAX_DEPTH - 1) if i == 0 else text(700)) for i in range(60)},
    }


def result(variant: str, size: tuple[int, int, int], **fields) -> dict:
    m, n, k = size
    return {"variant": variant, "m": m, "n": n, "k": k, **fields}


def fast(variant: str, size, gflops: float, **fields) -> dict:
    return result(variant, size, verified=True, median_ms=1.0, gflops=gflops, cublas_median_ms=1.0,
                  cublas_gflops=gflops, pct_of_cublas=100.0, n_samples=10, noise=0.01, **fields)


MAX = 1 << 20


def batches() -> list[dict]:
    """Bodies for POST /api/results, each accepted (201)."""
    gpu_evil = {"uuid": "GPU-hostile-0001", "name": one_line(120), "model": "H100", "sm_count": 100_000,
                "compute_capability": "99.99", "memory_mib": I32, "driver": one_line(40)}
    gpu_min = {"uuid": "G", "name": "<", "model": "a"}
    gpu_long_model = {"uuid": "GPU-hostile-0002", "name": '<a href="https://evil.example/">x</a>', "model": "M" * 60}
    commit_max = {"sha": "f" * 64, "repo": text(200), "branch": text(200), "message": text(10_000),
                  "committed_at": "9000-12-31T23:59:59-14:00", "parents": ["e" * 64] * 64}
    commit_min = {"sha": "0000", "committed_at": "1970-01-01T00:00:00+14:00", "parents": []}
    extremes = [
        result("a", (1, 1, 1), verified=False),  # the least a result may say
        result("naive", (MAX, MAX, MAX), verified=True, median_ms=1e7, gflops=1e9, cublas_median_ms=1e7,
               cublas_gflops=1e9, pct_of_cublas=1e6, noise=1e6, rel_error=1e30, n_samples=10_000_000,
               mean_ms=1e7, stddev_ms=1e7, min_ms=1e7, max_ms=1e7, q1_ms=1e7, q3_ms=1e7, converged=True,
               tunables={f"T{i}": (I32 if i % 2 else -(2**31)) for i in range(32)}, samples_ms=[1e7] * 1000,
               env=full_env()),
        result("naive", (MAX, 1, MAX), verified=True, median_ms=5e-324, gflops=5e-324, cublas_median_ms=5e-324,
               cublas_gflops=0.0, pct_of_cublas=0.0, noise=0.0, rel_error=0.0, mode="hot", compute_mode="tf32",
               env={"resources": resources(None), "gpu": {}, "ab": {}, "launch": {}, "notes": []}),
        result("z" + "9" * 59, (128, 128, 128), verified=False, error=text(100_000), env={"not_applicable": True}),
    ]
    ladder = [fast(v, (128, 128, 128), g) for v, g in (("naive", 5e-324), ("smem_tiled", 1e9), ("warp_tile", 1.0))]
    sweep = [fast("naive", (m, 4096, 4096), float(m)) for m in (1, 2, 3, 5, 8, 13, 4096)]
    return [
        {"run_id": "hostile-extremes-1", "gpu": gpu_evil, "commit": commit_max, "results": extremes + ladder + sweep},
        {"run_id": "hostile-extremes-2", "gpu": gpu_min, "commit": commit_min, "results": ladder + extremes[:1]},
        {"run_id": "hostile-extremes-3", "gpu": gpu_long_model, "commit": {"sha": "f" * 63 + "e", "parents": ["f" * 64]},
         "results": [fast("naive", (128, 128, 128), 2.0), fast("smem_tiled", (128, 128, 128), 1e9)]},
        # 200 variants on one ladder: the most rungs a chart, a table and an export hold at once.
        {"run_id": "hostile-extremes-4", "gpu": gpu_evil, "results": [fast(f"v{i}", (64, 64, 64), 10.0 + i)
                                                                       for i in range(200)]},
    ]


def jobs() -> list[dict]:
    """Bodies for POST /api/jobs, each accepted (202); no worker runs them: they stay queued."""
    return [
        {"variants": ["naive"], "sizes": [[16384, 16384, 16384]] * 64, "gpu": "M" * 60,
         "commit": {"sha": "a" * 64, "repo": text(200), "branch": text(200), "message": text(10_000),
                    "committed_at": "1970-01-01T00:00:00Z", "parents": ["b" * 64]}},
        {"variants": ["naive", "smem_tiled"], "sizes": [[1, 1, 1]]},
    ]
