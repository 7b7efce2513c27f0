"""Study: gemmwatch's cuBLAS FP16/BF16 medians against torch.matmul, and why do_bench reads lower.

For each precision and size, in one process on one GPU: gemmwatch's case (variant cublas_fp16 or
cublas_bf16) in its default mode (cold: isolated samples) and in "sustained" mode (cold samples back
to back after GEMMWATCH_SUSTAINED_WARMUP_S of them), triton's do_bench over torch.matmul (L2
zeroed before each call, calls queued back to back for ~1 s), and torch.matmul timed one sample
at a time (the same 256 MiB zeroing, then events, then a wait), and "beside": gemmwatch's cold
loop with torch.matmul in the other slot, timed by its own events after do_bench's flush, the two
alternating sample by sample (tests/test_gpu_agreement.py's torch_beside_gemmwatch); each with
NVML's SM clock sampled every 5 ms while it runs: a tensor-core GEMM near the 700 W cap is clocked
by its duty cycle, so only "beside" compares the two at the same clock.
Run on a GPU: python scripts/studies/half_agreement.py [--rounds R] [--nvbench] [sizes...]
With --rounds R the three are measured R times in turn, the order reversed every other round, so
that neither meets the card warmer or nearer its power cap than the other; the medians over the
rounds are printed last. With --nvbench, NVIDIA's nvbench (cuda-bench) then times torch.matmul in
each case with its cold measurement (its L2 flush and blocking kernel, a sample per launch), a
third opinion beside do_bench's.
"""

import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pynvml  # noqa: E402
import torch  # noqa: E402
import triton.testing  # noqa: E402

from cold_1024_study import torch_flushed  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from tests.test_gpu_agreement import torch_beside_gemmwatch  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402


class ClockSampler:
    def __enter__(self):
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.mhz, self.stop = [], False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def run(self):
        while not self.stop:
            self.mhz.append(pynvml.nvmlDeviceGetClockInfo(self.h, pynvml.NVML_CLOCK_SM))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()

    @property
    def median_mhz(self):
        return statistics.median(self.mhz) if self.mhz else None


def one_at_a_time(fn):
    return torch_flushed(fn, torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda"))


def measure(runner, policies, precision, n, order):
    """The three readings of one round, in the given order, with the SM clock during each."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    flops = 2.0 * n**3
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)

    def ours(mode):
        case = builtin_case(f"cublas_{precision}", n, n, n, seed=11)
        return lambda: runner.run_case(case, policies[mode]).cublas_gflops / 1e3

    def bench():
        return flops / triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=100, rep=1000, return_mode="median") / 1e9

    def single():
        return flops / one_at_a_time(lambda: torch.matmul(a, b)) / 1e9

    def beside():
        got = torch_beside_gemmwatch(runner, precision, n, policies["cold"])
        return flops / got["gemmwatch_cublas_ms"] / 1e9, flops / got["torch_do_bench_flush_ms"] / 1e9

    readings = {}
    for name in order:
        with ClockSampler() as clock:
            if name == "beside":  # two readings from one loop, at one clock
                ours_tflops, torch_tflops = beside()
                readings["beside_gemmwatch"] = (ours_tflops, clock.median_mhz)
                readings["beside_torch"] = (torch_tflops, clock.median_mhz)
                continue
            tflops = {"gemmwatch": ours("cold"), "gemmwatch_sustained": ours("sustained"), "do_bench": bench,
                      "one_at_a_time": single}[name]()
        readings[name] = (tflops, clock.median_mhz)
    return readings


def nvbench_torch(cases):
    """nvbench's cold median (ms) of torch.matmul for each (precision, n), on nvbench's own stream."""
    import tempfile

    from tests.test_gpu_nvbench import nvbench_medians

    benchmarks = {}
    for precision, n in cases:
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
        gen = torch.Generator(device="cuda").manual_seed(11)
        a = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)
        b = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)
        out = torch.empty((n, n), device="cuda", dtype=dtype)

        def call(a=a, b=b, out=out):
            # nvbench_medians runs this inside a CuPy stream made from nvbench's; torch follows it.
            import cupy as cp

            with torch.cuda.stream(torch.cuda.ExternalStream(cp.cuda.get_current_stream().ptr)):
                torch.matmul(a, b, out=out)

        benchmarks[f"{precision}-{n}"] = call
    return nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))


def main(sizes, rounds=1, nvbench=False):
    runner = CupyRunner()
    policies = {mode: TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE=mode)) for mode in ("cold", "sustained")}
    first = ("gemmwatch", "gemmwatch_sustained", "do_bench", "one_at_a_time", "beside")
    orders = [first, first[::-1]]
    medians = {}
    for precision in ("fp16", "bf16"):
        for n in sizes:
            per_round = []
            for r in range(rounds):
                got = measure(runner, policies, precision, n, orders[r % 2])
                per_round.append(got)
                print(json.dumps({"precision": precision, "n": n, "round": r, "order": orders[r % 2],
                                  **{f"{k}_tflops": v[0] for k, v in got.items()},
                                  **{f"{k}_sm_mhz": v[1] for k, v in got.items()},
                                  "gemmwatch_vs_do_bench": got["gemmwatch"][0] / got["do_bench"][0],
                                  "sustained_vs_do_bench": got["gemmwatch_sustained"][0] / got["do_bench"][0],
                                  "gemmwatch_vs_one_at_a_time": got["gemmwatch"][0] / got["one_at_a_time"][0],
                                  "beside_gemmwatch_vs_torch": got["beside_gemmwatch"][0] / got["beside_torch"][0]}), flush=True)
            med = {k: statistics.median(g[k][0] for g in per_round) for k in per_round[0]}
            medians[(precision, n)] = med
            print(json.dumps({"precision": precision, "n": n, "rounds": rounds, "median_tflops": med,
                              "gemmwatch_vs_do_bench": med["gemmwatch"] / med["do_bench"],
                              "sustained_vs_do_bench": med["gemmwatch_sustained"] / med["do_bench"],
                              "gemmwatch_vs_one_at_a_time": med["gemmwatch"] / med["one_at_a_time"],
                              "beside_gemmwatch_vs_torch": med["beside_gemmwatch"] / med["beside_torch"]}), flush=True)
    if nvbench:
        for name, ms in nvbench_torch(list(medians)).items():
            precision, n = name.split("-")
            tflops = 2.0 * int(n) ** 3 / ms / 1e9
            ours = medians[(precision, int(n))]
            print(json.dumps({"precision": precision, "n": int(n), "nvbench_tflops": tflops,
                              "gemmwatch_vs_nvbench": ours["gemmwatch"] / tflops,
                              "do_bench_vs_nvbench": ours["do_bench"] / tflops}), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    rounds, nvbench = 1, "--nvbench" in args
    args = [a for a in args if a != "--nvbench"]
    if args[:1] == ["--rounds"]:
        rounds, args = int(args[1]), args[2:]
    main([int(x) for x in args] or [4096, 8192], rounds, nvbench)
