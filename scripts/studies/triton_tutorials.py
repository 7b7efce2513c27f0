"""Triton's own tutorial kernels, files unchanged, timed by gemmwatch and by `triton.testing.do_bench`
in a separate process on the same GPU (issue 50's must-show 1, docs/BENCHMARKS.md).

gemmwatch side: the tutorial file and a description (below) go through the runner as a job's kernel
would: read for its definitions in the confined compile process, its @triton.autotune run once per
bucket outside the timing, verified against cuBLAS, timed in the mode asked. do_bench side: a
process of its own loads the same file's definitions (worker/compile/triton_module.py: its script is not
run) and times the same @triton.jit function with the configuration gemmwatch chose, launched by
Triton as the tutorial's wrapper launches it, with do_bench's defaults (its L2 flush before each
call, the median of its samples).

Usage (GPU machine, project root):
  python3 scripts/studies/triton_tutorials.py TUTORIALS_DIR OUT [--sizes 1024,2048,4096,8192] [--modes sustained,cold]
      [--pin] [--kernels tutorial_matmul_fp16,descriptor_persistent_fp16,...]
TUTORIALS_DIR holds 03-matrix-multiplication.py and 09-persistent-matmul.py as Triton ships them.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TN = {"A": "row", "B": "col", "C": "row"}
# What the tutorials' own benchmarks multiply (torch.randn), and so what do_bench's side multiplies below:
# the manifest says it too ("inputs"), as a home runner's data is part of its number.
INPUTS = "normal(0,1)"
DO_BENCH_RUNS = 5  # three until the seventeenth session
# The @triton.autotune configuration each case chose on the H200 (eleventh session), for --pin: each
# case then compiles the one it ran, instead of tuning again on a fresh machine.
CHOSEN = {("tutorial_matmul_fp16", 1024): 13, ("tutorial_matmul_fp16", 2048): 0, ("tutorial_matmul_fp16", 4096): 0,
          ("tutorial_matmul_fp16", 8192): 0, ("persistent_matmul_fp16", 1024): 2, ("persistent_matmul_fp16", 2048): 9,
          ("persistent_matmul_fp16", 4096): 11, ("persistent_matmul_fp16", 8192): 11,
          ("persistent_matmul_fp8", 1024): 7, ("persistent_matmul_fp8", 2048): 15, ("persistent_matmul_fp8", 4096): 13,
          ("persistent_matmul_fp8", 8192): 13}
KERNELS = {
    "tutorial_matmul_fp16": {
        "file": "03-matrix-multiplication.py", "entry": "matmul_kernel", "compute_mode": "fp16",
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "ldb", "=1", "ldc", "=1"],
        # ACTIVATION as the tutorial's matmul(a, b) passes it: the word "" (no epilogue); until the
        # sixteenth session the integer 0, which compiles the same branch away.
        "defines": {}, "words": {"ACTIVATION": ""}, "grid": {"x": "cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"}},
    "persistent_matmul_fp16": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_persistent", "compute_mode": "fp16", "layout": TN,
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "=1", "ldb", "ldc", "=1"],
        "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
    "persistent_matmul_fp8": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_persistent", "compute_mode": "fp8", "layout": TN,
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "=1", "ldb", "ldc", "=1"],
        "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
}
# Not yet measured, so not in docs/examples/triton-lang-triton.gemmwatch.json (which holds KERNELS):
# 09's kernel that makes its TMA descriptors on the device, given Triton's global scratch by the runner
# since the seventeenth session (worker/arguments/kernel_args.Scratch). Run by naming them in --kernels.
NOT_YET_MEASURED = {
    "descriptor_persistent_fp16": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_descriptor_persistent", "compute_mode": "fp16",
        "layout": TN, "args": ["A", "B", "C", "M", "N", "K"], "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
    "descriptor_persistent_fp8": {
        "file": "09-persistent-matmul.py", "entry": "matmul_kernel_descriptor_persistent", "compute_mode": "fp8",
        "layout": TN, "args": ["A", "B", "C", "M", "N", "K"], "defines": {"NUM_SMS": "SM_COUNT"},
        "grid": {"x": "min(SM_COUNT, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"}},
}


def description(name: str, spec: dict, folder: Path, config: int | None = None) -> dict:
    text = (folder / spec["file"]).read_text()
    described = {"name": name, "language": "triton", "source": spec["file"], "files": {spec["file"]: text},
                 "entry": spec["entry"], "compute_mode": spec["compute_mode"], "args": spec["args"],
                 "defines": spec["defines"], "grid": spec["grid"], "inputs": INPUTS}
    if "layout" in spec:
        described["layout"] = spec["layout"]
    options = {**({"string_constexprs": spec["words"]} if spec.get("words") else {}),
               **({"config": config} if config is not None else {})}
    if options:
        described["triton"] = options
    return described


def gemmwatch_side(folder: Path, sizes: list[int], modes: list[str], pin: bool = False,
                   names: list[str] | None = None) -> list[dict]:
    from core.description.kernel_description import KernelDescription
    from core.settings import Settings
    from worker.measure.cases import Case, KernelChoice, TimingPolicy
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    rows = []
    for mode in modes:
        policy = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE=mode))
        for name, spec in ({**KERNELS, **NOT_YET_MEASURED} if names else KERNELS).items():
            if names and name not in names:
                continue
            for n in sizes:
                choice = KernelChoice(KernelDescription.model_validate(
                    description(name, spec, folder, CHOSEN.get((name, n)) if pin else None)), {}, "job")
                try:
                    out = runner.run_case(Case(0, name, n, n, n, 7, choice), policy)
                except Exception as exc:  # said in the table; a fault ends this kernel's sizes (the context is gone)
                    rows.append({"kernel": name, "n": n, "mode": mode, "verified": False, "gflops": None,
                                 "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                    break
                rows.append({"kernel": name, "n": n, "mode": mode, "verified": out.verified, "error": out.error,
                             "gflops": out.gflops, "pct_of_cublas": out.pct_of_cublas,
                             "triton": out.env.get("triton"), "gpu": runner.gpu_name()})
                print(json.dumps(rows[-1])[:400], flush=True)
    return rows


def do_bench_side(folder: Path, rows: list[dict]) -> list[dict]:
    """In this (separate) process: each row's kernel and configuration, timed by do_bench."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget

    from worker.compile import triton_module

    loaded = {}
    out = []
    # A kernel that makes its descriptors on the device takes its global scratch from Triton's allocator,
    # as the tutorial's own wrapper sets it.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    for row in rows:
        spec = {**KERNELS, **NOT_YET_MEASURED}[row["kernel"]]
        if spec["file"] not in loaded:
            triton_module.use_target(triton, GPUTarget("cuda", 90, 32))  # the file's script finds no GPU
            loaded[spec["file"]] = triton_module.load(str(folder / spec["file"]), spec["file"].replace("-", "_")[:-3])
            triton.runtime.driver.reset_active()
        module, _ = loaded[spec["file"]]
        kernel, _ = triton_module.kernel_and_configs(triton, getattr(module, spec["entry"]))
        config = row["triton"]["config"]
        n = row["n"]
        fp8 = spec["compute_mode"] == "fp8"
        a = torch.randn((n, n), device="cuda", dtype=torch.float16)
        b = torch.randn((n, n), device="cuda", dtype=torch.float16)
        if fp8:
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        if spec.get("layout") == TN:
            b = b.T.contiguous().T  # K x N, column-major: strides (1, K), as the tutorial's b.T
        c = torch.empty((n, n), device="cuda", dtype=torch.bfloat16 if fp8 else torch.float16)
        constants = {**{k: v for k, v in spec["defines"].items() if k != "NUM_SMS"}, **spec.get("words", {}),
                     **config["kwargs"]}
        if "NUM_SMS" in spec["defines"]:
            constants["NUM_SMS"] = torch.cuda.get_device_properties("cuda").multi_processor_count
        tiles = triton.cdiv(n, constants["BLOCK_SIZE_M"]) * triton.cdiv(n, constants["BLOCK_SIZE_N"])
        grid = (min(constants["NUM_SMS"], tiles),) if "NUM_SMS" in constants else (tiles,)

        strides = () if spec["args"] == ["A", "B", "C", "M", "N", "K"] else (
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

        def call():
            kernel[grid](a, b, c, n, n, n, *strides, num_warps=config["num_warps"], num_stages=config["num_stages"],
                         **constants)

        call()
        # do_bench's own spread at one size is several per cent at the power cap and at 1024^3 (a
        # 10 us kernel behind its 256 MiB flush; 7-8 % over three runs at 4096^3 in the eleventh
        # session): DO_BENCH_RUNS runs, their median and range kept.
        runs = sorted(triton.testing.do_bench(call, return_mode="median") for _ in range(DO_BENCH_RUNS))
        ms = runs[len(runs) // 2]
        out.append({**row, "do_bench_ms": ms, "do_bench_runs_ms": runs,
                    "do_bench_gflops": 2 * n ** 3 / (ms * 1e-3) / 1e9})
        print(row["kernel"], n, row["mode"], f"{ms:.4f} ms", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--sizes", default="1024,2048,4096,8192")
    parser.add_argument("--modes", default="sustained,cold")
    parser.add_argument("--kernels", default=None, help="names of KERNELS or NOT_YET_MEASURED to run (default: all of KERNELS)")
    parser.add_argument("--pin", action="store_true", help="run each case's configuration chosen before (CHOSEN)")
    parser.add_argument("--do-bench", dest="rows", type=Path, help=argparse.SUPPRESS)  # the second process
    args = parser.parse_args()
    if args.rows:
        args.out.write_text(json.dumps(do_bench_side(args.folder, json.loads(args.rows.read_text()))))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = gemmwatch_side(args.folder, [int(s) for s in args.sizes.split(",")], args.modes.split(","), args.pin,
                          args.kernels.split(",") if args.kernels else None)
    (args.out / "gemmwatch.json").write_text(json.dumps(rows))
    timed = [r for r in rows if r["verified"] and r["gflops"]]
    (args.out / "timed.json").write_text(json.dumps(timed))
    subprocess.run([sys.executable, __file__, str(args.folder), str(args.out / "do_bench.json"),
                    "--do-bench", str(args.out / "timed.json")], check=True)
    both = json.loads((args.out / "do_bench.json").read_text())
    lines = [f"| kernel | n | mode | config | gemmwatch TFLOPS | do_bench TFLOPS (median of {DO_BENCH_RUNS}; range) | ratio | "
             "% of cuBLAS |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in both:
        cfg = r["triton"]["config"]
        lines.append(f"| {r['kernel']} | {r['n']} | {r['mode']} | #{cfg['index']} {cfg['kwargs']} w{cfg['num_warps']} "
                     f"s{cfg['num_stages']} | {r['gflops'] / 1e3:.1f} | {r['do_bench_gflops'] / 1e3:.1f} "
                     f"({2 * r['n'] ** 3 / r['do_bench_runs_ms'][-1] / 1e9:.0f}–"
                     f"{2 * r['n'] ** 3 / r['do_bench_runs_ms'][0] / 1e9:.0f}) | "
                     f"{r['gflops'] / r['do_bench_gflops']:.3f} | {r['pct_of_cublas']:.1f} |")
    for r in rows:
        if not (r["verified"] and r["gflops"]):  # noqa: SIM102
            lines.append(f"| {r['kernel']} | {r['n']} | {r['mode']} | not timed: {r['error']} | | | | |")
    (args.out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
