#!/usr/bin/env python3
"""Three real nvbench runs of one GEMM benchmark, for `gemmwatch import`'s fixtures (issue 52).

An nvbench benchmark as a team would write one (the `cuda-bench` package, torch.matmul on nvbench's
stream), with an int64 axis "Size" (M = N = K) and a string axis "T" (the element type). Each run
writes nvbench's JSON and, with --jsonbin, every sample time in a file beside it:

  python3 scripts/studies/nvbench_gemm_runs.py OUT_DIR/base.json
  python3 scripts/studies/nvbench_gemm_runs.py OUT_DIR/same.json              # the same code again
  GEMM_EXTRA_PASS=1 python3 scripts/studies/nvbench_gemm_runs.py OUT_DIR/slower.json

GEMM_EXTRA_PASS=1 is the regression: after the product, one more kernel reads and writes C (what
an epilogue split out of the GEMM costs), so every state takes longer by that kernel's time.
"""

import os
import sys

import cuda.bench as bench
import torch

SIZES_LOG2 = [10, 11, 12]  # 1024^3 to 4096^3
TYPES = {"F16": torch.float16, "BF16": torch.bfloat16}
EXTRA_PASS = os.environ.get("GEMM_EXTRA_PASS") == "1"


def torch_matmul(state) -> None:
    size, dtype = state.get_int64("Size"), TYPES[state.get_string("T")]
    device = state.get_device()
    stream = torch.cuda.ExternalStream(state.get_stream().addressof(), device=torch.device("cuda", device))
    with torch.cuda.stream(stream):
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        c = torch.empty(size, size, device="cuda", dtype=dtype)
    stream.synchronize()

    def launch(handle) -> None:
        with torch.cuda.stream(torch.cuda.ExternalStream(handle.get_stream().addressof())):
            torch.matmul(a, b, out=c)
            if EXTRA_PASS:
                c.mul_(1.0)

    state.exec(launch)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    (bench.register(torch_matmul)
     .add_int64_power_of_two_axis("Size", SIZES_LOG2)
     .add_string_axis("T", list(TYPES)))
    bench.run_all_benchmarks(["nvbench", "--jsonbin", sys.argv[1], "--timeout", "2", "--min-samples", "20"])
