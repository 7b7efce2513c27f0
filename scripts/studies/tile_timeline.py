#!/usr/bin/env python3
"""Where a persistent half kernel's time goes, block by block: half_wgmma_ss.cu with clock stamps
patched in (its entry, its first slab's arrival, the end of its last slab's wgmmas, the end of its
epilogue), launched straight through CuPy on one size, cold (L2 flushed before each launch), beside
the launch's own event time:
  python3 scripts/studies/tile_timeline.py 2048 [--bn 256] [--launches 20]
Prints, over the blocks of the last launch, the median and the extremes of each stamp in µs after
the block's entry (SM clock cycles at the clock the launch ran at), and each block's entry after the
first block's (the global timer). For one tile a block (2048^3 at 128 x 256) the stamps are the
tile's; with more, they are the first tile's arrival and the last tile's ends."""

import argparse
import sys
import tempfile
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.description.builtins import builtin_kernels  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.arguments import kernel_args, tensor_maps  # noqa: E402
from worker.measure.cases import KernelChoice  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

# (anchor, text put after it): each anchor must be found once.
STAMPS = [
    ("float beta, out_t* __restrict__ C GW_MAP_PARAMS", ", unsigned long long* gw_trace"),
    ("if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten\n",
     "    const long long gw_t0 = clock64();\n"
     "    if (threadIdx.x == 0) { unsigned long long g; asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(g));\n"
     "        gw_trace[blockIdx.x * 4] = g; }\n"),
    ("            mbar_wait(full(stage), (it / STAGES) & 1);\n",
     "            if (it == 0 && threadIdx.x == 128) gw_trace[blockIdx.x * 4 + 1] = clock64() - gw_t0;\n"),
    ("        wgmma_wait<0>();\n        fence_operands(acc);\n#if PERSISTENT\n",
     "        if (threadIdx.x == 128) gw_trace[blockIdx.x * 4 + 2] = clock64() - gw_t0;\n"),
    ("        store_wgmma_rows(C, M, N, m0, bn0, acc, alpha, beta, t);  // 16 bytes a store where it can\n",
     "        if (threadIdx.x == 128) gw_trace[blockIdx.x * 4 + 3] = clock64() - gw_t0;\n"),
]


# --head N: the producer issues the first N slabs, then waits for the first to land before it
# issues the rest, so that the first slab's bytes do not share L2's and DRAM's start-up with the
# ring's other slabs (a question for the timeline, not the kernel as built).
HEAD = "                        mbar_arrive_expect_tx(full(stage), kAStage + kBStage);\n"


def patched_source(head: int = 0) -> str:
    text = (ROOT / "kernels" / "half_wgmma_ss.cu").read_text()
    if head > 0:
        if text.count(HEAD) != 1:
            sys.exit("anchor of --head not found once in half_wgmma_ss.cu")
        text = text.replace(HEAD, f"                        if (it == {head}) mbar_wait(full(0), 0);\n" + HEAD)
    for anchor, extra in STAMPS:
        if text.count(anchor) != 1:
            sys.exit(f"anchor not found once in half_wgmma_ss.cu: {anchor!r}")
        text = text.replace(anchor, anchor + extra)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size", type=int)
    ap.add_argument("--bn", type=int, default=256)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--head", type=int, default=0, help="slabs issued before the first has landed (0: all)")
    args = ap.parse_args()
    s, bn = args.size, args.bn
    name = {256: "bf16_wgmma_persistent", 128: "bf16_wgmma_persistent_128", 64: "bf16_wgmma_persistent_64"}[bn]
    runner = CupyRunner(Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp()))
    dev = runner.device
    desc = builtin_kernels()[name]
    # The stamps' buffer is one more parameter: "null" in args, so the runner's plan still fits the
    # kernel; this script passes the buffer itself.
    traced = type(desc).model_validate({**desc.model_dump(), "args": [*desc.args, "null"],
                                        "files": {**desc.files, desc.source: patched_source(args.head)}})
    launch = runner.resolve(KernelChoice(traced, traced.check_tunables(None), "builtin"))
    fn = dev.compile(launch).function
    smem = launch.dynamic_smem(s, s, s)
    fn.max_dynamic_shared_size_bytes = smem
    grid = launch.grid(s, s, s)[0]
    a = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, launch.form.a)
    b = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, launch.form.b)
    c = dev.matrix(s, s, launch.form.c, fill=0.0)
    maps = [kernel_args.value("map", tensor_maps.encode(tensor_maps.request(
        matrix, "row", s, s, s, x.data.ptr, "bfloat16", launch.tensor_maps[matrix])), None)
        for matrix, x in (("A", a), ("B", b))]
    trace = cp.zeros(grid * 4, dtype=cp.uint64)
    flush = cp.empty(2 * cp.cuda.Device().attributes["L2CacheSize"] // 4, dtype=cp.float32)
    times = []
    for _ in range(args.launches):
        flush.fill(0.0)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn((grid,), (384,), (np.int32(s), np.int32(s), np.int32(s), np.float32(1.0), a, b, np.float32(0.0), c,
                             maps[0], maps[1], trace), shared_mem=smem)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1000)
    t = trace.get().reshape(grid, 4).astype(np.int64)
    kernel_us = float(np.median(times))
    # The clock the launch ran at: the slowest block's cycles over the launch's time is a floor;
    # nvidia-smi's reading is printed beside it.
    try:
        import pynvml

        pynvml.nvmlInit()
        mhz = pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)
    except Exception:
        mhz = 0
    ghz = (mhz or 1740) / 1000
    print(f"head {args.head or 'all'}: size {s}^3, 128x{bn} tiles, {grid} blocks, event time median {kernel_us:.2f} us "
          f"(min {min(times):.2f}), SM clock {mhz or 'unknown (1740 assumed)'} MHz")
    entry = (t[:, 0] - t[:, 0].min()) / 1000.0
    print(f"block entry after the first: median {np.median(entry):.2f} us, max {entry.max():.2f} us (global timer)")
    for i, what in ((1, "first slab arrived"), (2, "last wgmma done"), (3, "epilogue issued")):
        us = t[:, i] / (ghz * 1000.0)
        print(f"{what:>20}: median {np.median(us):7.2f} us  min {us.min():7.2f}  max {us.max():7.2f}  "
              f"(after the block's entry)")


if __name__ == "__main__":
    main()
