"""Does the data a GEMM multiplies change its speed? A power-limited card lowers its clock when
the tensor cores draw more, and how much they draw depends on how many bits flip between operands
(random signs flip more than values of one sign). This study times cuBLAS's FP16 GEMM (FP32 and FP16
accumulate) over inputs drawn from several distributions, in interleaved rounds so drift over the
run falls on every distribution alike, and records the SM clock and power each round ran at.

    python3 scripts/studies/input_power.py --size 8192 --rounds 3 --seconds 2 > $OUT/input_power.json

Needs CuPy and nvidia-smi on a GPU machine; prints one JSON document.
"""

import argparse
import json
import statistics
import time

import subprocess

import cupy as cp
import numpy as np

DISTRIBUTIONS = {
    "uniform(-1,1)": lambda rng, shape: rng.random(shape, dtype=cp.float32) * 2 - 1,
    "uniform(0,1)": lambda rng, shape: rng.random(shape, dtype=cp.float32),
    "normal(0,1)": lambda rng, shape: rng.standard_normal(shape, dtype=cp.float32),
}


def gemm_16f(a, b, c, handle):
    """C = A B with FP16 sums (cublasGemmEx, CUBLAS_COMPUTE_16F), row-major through the swapped
    column-major call home runners use."""
    n, k = b.shape[1], a.shape[1]
    m = a.shape[0]
    one_h, zero_h = np.ones(1, dtype=np.float16), np.zeros(1, dtype=np.float16)
    cp.cuda.cublas.gemmEx(handle, 0, 0, n, m, k, one_h.ctypes.data, b.data.ptr, 2, n, a.data.ptr, 2, k,
                          zero_h.ctypes.data, c.data.ptr, 2, n, 64, 0)  # 64: CUBLAS_COMPUTE_16F


def clock_and_power() -> tuple[float, float]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True, check=True).stdout
    clock, power = out.strip().split(",")
    return float(clock), float(power)


def timed(call, seconds: float):
    """Calls back to back for `seconds`, then the median of ten 20-call batches at that load."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(10):
            call()
        cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    batches = []
    for _ in range(10):
        start.record()
        for _ in range(20):
            call()
        end.record()
        end.synchronize()
        batches.append(cp.cuda.get_elapsed_time(start, end) / 20)
    return statistics.median(batches)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args()
    n = args.size
    handle = cp.cuda.device.get_cublas_handle()
    rng = cp.random.default_rng(1)
    inputs = {name: (draw(rng, (n, n)).astype(cp.float16), draw(rng, (n, n)).astype(cp.float16))
              for name, draw in DISTRIBUTIONS.items()}
    c = cp.empty((n, n), dtype=cp.float16)
    rows = []
    for rnd in range(args.rounds):
        for name, (a, b) in inputs.items():
            for accumulate, call in (("fp32", lambda: cp.matmul(a, b, out=c)),
                                     ("fp16", lambda: gemm_16f(a, b, c, handle))):
                ms = timed(call, args.seconds)
                clock, power = clock_and_power()  # read at once: the load is a few ms old
                rows.append({"round": rnd, "inputs": name, "accumulate": accumulate, "ms": ms,
                             "tflops": 2 * n**3 / ms / 1e9, "sm_clock_mhz": clock, "power_w": power})
    summary = {}
    for name in DISTRIBUTIONS:
        for accumulate in ("fp32", "fp16"):
            mine = [r for r in rows if r["inputs"] == name and r["accumulate"] == accumulate]
            summary[f"{name} {accumulate}"] = {
                "tflops_median": statistics.median(r["tflops"] for r in mine),
                "tflops_range": [min(r["tflops"] for r in mine), max(r["tflops"] for r in mine)],
                "sm_clock_mhz_median": statistics.median(r["sm_clock_mhz"] for r in mine),
                "power_w_median": statistics.median(r["power_w"] for r in mine)}
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True, check=True).stdout.strip()
    print(json.dumps({"gpu": name, "size": n, "summary": summary, "rows": rows},
                     indent=1))


if __name__ == "__main__":
    main()
