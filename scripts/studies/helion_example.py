"""Helion's own examples/matmul.py, unchanged, through gemmwatch (issue 50): Helion writes its Triton
code for each size (`matmul.bind((x, y)).to_triton_code(config)`, static_shapes as the example asks),
Helion's call is timed by `triton.testing.do_bench`, and the generated files go into a kernels folder
(each described by its wrapper, `matmul`, and its one size) for `gemmwatch ci`
(scripts/studies/gpu_kernel_folders.py ... repo FOLDER) to time the kernel Helion launches.

Usage (GPU machine with torch, Triton and Helion importable; project root):
  python3 scripts/studies/helion_example.py HELION_CHECKOUT FOLDER [--sizes 1024,2048,4096,8192]
      [--config '{"block_sizes": [128, 256, 64], "num_warps": 8, "num_stages": 3}'] [--by-worker]
      [--example matmul_split_k]
HELION_CHECKOUT holds examples/matmul.py (or --example's file, whose kernel has the file's name) as
the Helion repository ships it. Writes FOLDER/gemmwatch.json,
FOLDER/matmul_<n>.py and FOLDER/helion_do_bench.json (Helion's own figures). With --by-worker the folder
holds examples/matmul.py itself, described as `"language": "helion"` with the config: the worker has
Helion write the Triton code for each case.
"""

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout", type=Path)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--sizes", default="1024,2048,4096,8192")
    ap.add_argument("--config", default='{"block_sizes": [128, 256, 64], "num_warps": 8, "num_stages": 3}')
    ap.add_argument("--by-worker", action="store_true")
    ap.add_argument("--example", default="matmul", help="examples/<name>.py, its @helion.kernel <name>")
    args = ap.parse_args()
    sys.path.insert(0, str(args.checkout))
    import helion
    import torch
    import triton
    import importlib

    matmul = getattr(importlib.import_module(f"examples.{args.example}"), args.example)

    config = helion.Config(**json.loads(args.config))
    args.folder.mkdir(parents=True, exist_ok=True)
    kernels, figures = [], []
    for n in [int(s) for s in args.sizes.split(",")]:
        x = torch.randn(n, n, device="cuda", dtype=torch.float16)
        y = torch.randn(n, n, device="cuda", dtype=torch.float16)
        bound = matmul.bind((x, y))
        name = f"matmul_{n}.py"
        (args.folder / name).write_text(bound.to_triton_code(config))
        compiled = bound.compile_config(config)
        ms = triton.testing.do_bench(lambda: compiled(x, y))  # noqa: B023 (called here, in this iteration)
        figures.append({"size": n, "ms": ms, "gflops": 2 * n**3 / ms / 1e6, "config": str(config),
                        "helion": helion.__version__ if hasattr(helion, "__version__") else "?",
                        "torch": torch.__version__, "triton": triton.__version__})
        print(json.dumps(figures[-1]), flush=True)
        if args.by_worker:
            continue
        kernels.append({"name": f"helion_matmul_{n}", "language": "triton", "source": name,
                        "wrapper": "matmul", "sizes": [str(n)], "compute_mode": "fp16", "inputs": "normal(0,1)",
                        "technique": f"Helion's examples/matmul.py, its Triton code for {n}³ under {config}"})
    if args.by_worker:
        source = f"{args.example}.py"
        (args.folder / source).write_text((args.checkout / "examples" / source).read_text())
        kernels = [{"name": f"helion_{args.example}", "language": "helion", "source": source, "wrapper": args.example,
                    "helion": json.loads(args.config), "compute_mode": "fp16", "inputs": "normal(0,1)",
                    "technique": f"Helion's examples/{source}, unchanged; the worker has Helion write its Triton "
                                 f"code for each case under {config}"}]
    (args.folder / "gemmwatch.json").write_text(json.dumps({"kernels": kernels}, indent=1))
    (args.folder / "helion_do_bench.json").write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
