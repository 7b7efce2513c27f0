"""A repository's own runner beside gemmwatch, on one GPU (issue 48's must-show 1, docs/BENCHMARKS.md).

fast.cu's runner (`matmul.cu`) is built with its Makefile's command line, as the manifest's flags
spell it, and run as it is: at 8192^3 it checks every kernel against cuBLAS and times 8 back-to-back
calls after a 5 s rest, printing "performance: (x) TFLOPS" per kernel. Then the same folder, its
files unchanged and the manifest beside them, goes through `gemmwatch ci` on the whole stack
(scripts/studies/gpu_kernel_folders.py): once in the manifest's mode (burst, the mode of a quick
runner) and once cold (gemmwatch's default). The table: each kernel's TFLOPS by its runner and by
gemmwatch in each mode, and their ratio.

Usage (GPU machine, project root, Redis on 127.0.0.1:6379):
  python3 scripts/studies/home_runner_compare.py REPO OUT [--steps runner,burst,cold] [--only 3,10,11,12]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docs" / "examples" / "pranjalssh-fast.cu.gemmwatch.json"


def run_repo_runner(repo: Path, out: Path) -> dict[int, float]:
    """Build and run the repository's runner; its TFLOPS per kernel number (0 is its cuBLAS)."""
    # The Makefile's -arch=sm_90a makes compute_90 PTX beside sm_90a's code with nvcc 13, where
    # wgmma is no instruction ("'wgmma.fence' not supported on .target 'sm_90'"): the runner is built
    # for sm_90a alone, as the repository's own logs.txt builds it and as gemmwatch builds the library.
    flags = ["-gencode=arch=compute_90a,code=sm_90a" if f == "-arch=sm_90a" else f
             for f in json.loads(MANIFEST.read_text())["kernels"][0]["flags"]]
    nvcc = os.environ.get("NVCC", "nvcc")
    started = time.monotonic()
    subprocess.run([nvcc, *flags, "matmul.cu", "-o", str(out / "matmul")], cwd=repo, check=True)
    built = time.monotonic() - started
    done = subprocess.run([str(out / "matmul")], cwd=repo, capture_output=True, text=True, timeout=400)
    (out / "runner.txt").write_text(f"# built in {built:.0f} s with: {nvcc} {' '.join(flags)} matmul.cu\n"
                                    + done.stdout + done.stderr)
    figures, kernel = {}, None
    for line in done.stdout.splitlines():
        if m := re.match(r"KERNEL (\d+)", line):
            kernel = int(m.group(1))
        elif (m := re.search(r"performance: \(\s*([\d.]+)\) TFLOPS", line)) and kernel is not None:
            figures[kernel] = float(m.group(1))
    return figures


def gemmwatch_figures(jobs_file: Path) -> dict[int, dict]:
    """Each fastcu_matmul_N's result from a gpu_kernel_folders.py run: TFLOPS, mode, verified."""
    out = {}
    for job in json.loads(jobs_file.read_text()):
        for r in job.get("results", []):
            if m := re.fullmatch(r"fastcu_matmul_(\d+)", r["variant"]):
                out[int(m.group(1))] = {"tflops": (r["gflops"] or 0) / 1000, "mode": r["mode"],
                                        "verified": r["verified"], "error": r["error"],
                                        "cublas_tflops": (r["cublas_gflops"] or 0) / 1000}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", default="runner,burst,cold")
    ap.add_argument("--only", default=None, help="kernel numbers for the gemmwatch steps (default: all 12)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    steps = args.steps.split(",")
    folder = args.out / "repo"
    if not folder.exists():
        subprocess.run(["cp", "-r", str(args.repo), str(folder)], check=True)
    manifest = json.loads(MANIFEST.read_text())
    if args.only:
        keep = {f"fastcu_matmul_{n}" for n in args.only.split(",")}
        manifest["kernels"] = [k for k in manifest["kernels"] if k["name"] in keep]
    (folder / "gemmwatch.json").write_text(json.dumps(manifest))
    if "runner" in steps:
        (args.out / "runner.json").write_text(json.dumps(run_repo_runner(folder, args.out)))
    for mode in [s for s in steps if s in ("burst", "cold", "hot")]:
        started = time.monotonic()
        timing = [] if mode == manifest.get("timing") else ["--timing", mode]
        subprocess.run([sys.executable, str(ROOT / "scripts" / "studies" / "gpu_kernel_folders.py"),
                        str(args.out / mode), "--size", "8192", *timing, "repo", str(folder)], check=False)
        print(f"gemmwatch {mode}: {time.monotonic() - started:.0f} s", flush=True)
    table(args.out)


def table(out: Path) -> None:
    runner = {int(k): v for k, v in json.loads((out / "runner.json").read_text()).items()} \
        if (out / "runner.json").is_file() else {}
    modes = {m: gemmwatch_figures(out / m / "jobs.json") for m in ("burst", "cold", "hot")
             if (out / m / "jobs.json").is_file()}
    lines = ["| kernel | its runner TFLOPS | " + " | ".join(f"gemmwatch {m} TFLOPS | ratio" for m in modes) + " |",
             "| --- | ---: | " + " | ".join("---: | ---:" for _ in modes) + " |"]
    for n in range(0, 13):
        cells = []
        for m, got in modes.items():
            g = got.get(n)
            if g is None:
                cells.append(" | ")
            elif not g["verified"]:
                cells.append(f"not verified: {(g['error'] or '')[:80]} | ")
            else:
                cells.append(f"{g['tflops']:.1f} | " + (f"{g['tflops'] / runner[n]:.3f}" if runner.get(n) else ""))
        lines.append(f"| {n or 'cuBLAS (its runner)'} | {runner.get(n, '')} | " + " | ".join(cells) + " |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
