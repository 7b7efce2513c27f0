"""Study: gemmwatch's cuBLAS FP16/BF16 medians against torch.matmul, and why do_bench reads lower.

For each precision and size, in one process on one GPU: gemmwatch's case (variant cublas_fp16 or
cublas_bf16, the job defaults: cold, isolated samples), triton's do_bench over torch.matmul (L2
zeroed before each call, calls queued back to back for ~1 s), and torch.matmul timed one sample
at a time (the same 256 MiB zeroing, then events, then a wait), each with NVML's SM clock sampled
every 5 ms while it runs: a tensor-core GEMM near the 700 W cap is clocked by its duty cycle.
Run on a GPU: python scripts/studies/half_agreement.py [sizes...]
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
from worker.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.runner import CupyRunner  # noqa: E402


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


def main(sizes):
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    for precision in ("fp16", "bf16"):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
        for n in sizes:
            flops = 2.0 * n**3
            with ClockSampler() as ours_clock:
                ours = runner.run_case(builtin_case(f"cublas_{precision}", n, n, n, seed=11), policy)
            gen = torch.Generator(device="cuda").manual_seed(11)
            a = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)
            b = (torch.rand((n, n), device="cuda", generator=gen) * 2 - 1).to(dtype)
            with ClockSampler() as bench_clock:
                bench_ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=100, rep=1000,
                                                   return_mode="median")
            with ClockSampler() as single_clock:
                single_ms = one_at_a_time(lambda: torch.matmul(a, b))
            print(json.dumps({
                "precision": precision, "n": n,
                "gemmwatch_cublas_tflops": ours.cublas_gflops / 1e3, "gemmwatch_sm_mhz": ours_clock.median_mhz,
                "do_bench_tflops": flops / bench_ms / 1e9, "do_bench_sm_mhz": bench_clock.median_mhz,
                "torch_one_at_a_time_tflops": flops / single_ms / 1e9, "one_at_a_time_sm_mhz": single_clock.median_mhz,
                "gemmwatch_vs_one_at_a_time": ours.cublas_gflops / 1e3 / (flops / single_ms / 1e9),
                "gemmwatch_vs_do_bench": ours.cublas_gflops / 1e3 / (flops / bench_ms / 1e9),
            }), flush=True)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [4096, 8192])
