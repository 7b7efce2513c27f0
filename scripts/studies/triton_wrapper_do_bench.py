"""A repository's Triton wrapper timed as its users would time it at home: `triton.testing.do_bench`
on the wrapper itself (its C allocation, its Python and its launch in the time), beside
`torch._scaled_mm` (cuBLASLt) for FP8, so gemmwatch's figure for the same kernel has a number to
stand beside (docs/BENCHMARKS.md). For a repository with no runner of its own for the kernel:
pytorch-labs/applied-ai's split-K FP8 kernels.

Usage (GPU machine):
  python3 scripts/studies/triton_wrapper_do_bench.py FILE.py WRAPPER --dtype fp8 --size 4096 [--size MxNxK]
Prints one JSON line per size: the wrapper's and torch's milliseconds (do_bench's median, its L2
flush between calls) and TFLOPS, and the wrapper's C against torch's (relative Frobenius error).
"""

import argparse
import importlib.util
import json
from pathlib import Path

import torch
import triton.testing


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dims(text: str) -> tuple[int, int, int]:
    parts = [int(x) for x in text.lower().split("x")]
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", type=Path)
    ap.add_argument("wrapper")
    ap.add_argument("--dtype", choices=["fp8", "fp16", "bf16"], default="fp8")
    ap.add_argument("--size", action="append", default=None)
    args = ap.parse_args()
    wrapper = getattr(load(args.file), args.wrapper)
    generator = torch.Generator("cuda").manual_seed(7)
    for size in args.size or ["4096"]:
        m, n, k = dims(size)
        a = torch.rand(m, k, device="cuda", generator=generator) * 2 - 1
        b = torch.rand(k, n, device="cuda", generator=generator) * 2 - 1
        if args.dtype == "fp8":
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.tensor(1.0, device="cuda")
            b_k_major = b.t().contiguous().t()  # cuBLASLt's FP8 GEMM reads B K-major
            theirs = lambda: torch._scaled_mm(a, b_k_major, scale_a=one, scale_b=one, out_dtype=torch.float16)  # noqa: E731
        else:
            a, b = (x.to(getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[args.dtype])) for x in (a, b))
            theirs = lambda: a @ b  # noqa: E731
        ours = wrapper(a, b).float()
        ref = theirs().float()
        flops = 2 * m * n * k
        wrapper_ms = triton.testing.do_bench(lambda: wrapper(a, b))
        torch_ms = triton.testing.do_bench(theirs)
        print(json.dumps({"file": args.file.name, "wrapper": args.wrapper, "size": [m, n, k],
                          "wrapper_ms": wrapper_ms, "wrapper_tflops": flops / wrapper_ms / 1e9,
                          "torch_ms": torch_ms, "torch_tflops": flops / torch_ms / 1e9,
                          "rel_error_vs_torch": float((ours - ref).norm() / ref.norm())}), flush=True)


if __name__ == "__main__":
    main()
