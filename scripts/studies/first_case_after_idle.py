#!/usr/bin/env python3
"""Does the first case after the GPU sat idle read slower? (issue 10)

tests/test_gpu_nvbench.py once read its first case (smem_tiled 128^3, a 5 us kernel) 4 % above
nvbench while the same case agreed within 1 % elsewhere. A worker's first case after an idle
spell is every job's first case, so this matters beyond the test. Each round: the GPU idles
for a few seconds, optionally runs the variant back to back for a while (the GPU fully busy),
then the runner times the case as a job does, and times it again at once. NVML's SM clock is
read before and after each. Prints JSON lines.
    python3 scripts/studies/first_case_after_idle.py [idle_s]
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402


def main() -> None:
    idle_s = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    case = builtin_case("smem_tiled", 128, 128, 128, seed=1)
    run_variant, _ = runner.calls(case)  # the kernel over the case's inputs, as a job launches it

    def busy(ms: float) -> None:
        """The variant back to back, no synchronise between launches: the GPU never idles."""
        end = time.perf_counter() + ms / 1000
        while time.perf_counter() < end:
            for _ in range(50):
                run_variant()
        runner.device.synchronize()

    for round_ in range(2):
        for busy_ms in (0, 25, 200):
            time.sleep(idle_s)
            busy(busy_ms)
            for attempt in ("first", "again"):
                out = runner.run_case(case, policy)
                print(json.dumps({"round": round_, "busy_before_ms": busy_ms, "attempt": attempt,
                                  "median_us": round(1e3 * out.median_ms, 3),
                                  "cublas_median_us": round(1e3 * out.cublas_median_ms, 3),
                                  "converged": out.converged, "samples": len(out.samples_ms),
                                  "sm_mhz_before": out.env["before"].get("sm_clock_mhz"),
                                  "sm_mhz_after": out.env["after"].get("sm_clock_mhz"),
                                  "first_10_samples_us": [round(1e3 * t, 2) for t in out.samples_ms[:10]],
                                  "median_first_half_us": round(1e3 * statistics.median(out.samples_ms[: len(out.samples_ms) // 2]), 3)}),
                      flush=True)


if __name__ == "__main__":
    main()
