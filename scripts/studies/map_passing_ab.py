#!/usr/bin/env python3
"""A built-in TMA kernel with its tensor maps by value (as it is) beside the same kernel with them by
address (a map in global memory, read by the TMA at the first copy), alternated on one GPU, each case
timed beside cuBLAS's best by the runner:
  python3 scripts/studies/map_passing_ab.py bf16_wgmma_persistent --size 2048 --rounds 3 [--mode cold]
The by-address twin is made from the source text (half_wgmma_ss.cu, wgmma_tn.cu); the runner passes
it a map in device memory, or address 0 where the TMA cannot describe the matrix."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.description.builtins import builtin_kernels  # noqa: E402
from core.description.problem_size import required_dims  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import Case, KernelChoice, TimingPolicy  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

# The by-value declaration and its zero check, and what the by-address twin has in their place.
TWIN = [
    (", const __grid_constant__ TmaMap A_map_v, const __grid_constant__ TmaMap B_map_v",
     ", const void* A_map_address, const void* B_map_address"),
    ("const __grid_constant__ TmaMap A_map_v, const __grid_constant__ TmaMap B_map_v",
     "const void* A_map_address, const void* B_map_address"),
    ("map_or_null(A_map_v)", "acquired(A_map_address)"),
    ("map_or_null(B_map_v)", "acquired(B_map_address)"),
]
ACQUIRE = ("\n__device__ __forceinline__ const void* acquired(const void* map) {\n"
           "    if (map) asm volatile(\"fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\" :: \"l\"(map) : \"memory\");\n"
           "    return map;\n}\n")


def by_address(name: str) -> KernelChoice:
    desc = builtin_kernels()[name]
    text = desc.files[desc.source]
    changed = text
    for old, new in TWIN:
        changed = changed.replace(old, new)
    if changed == text:
        sys.exit(f"{name}: no by-value map declaration found in {desc.source}")
    anchor = '#include "wgmma.cuh"\n'
    changed = changed.replace(anchor, anchor + ACQUIRE, 1)
    fields = desc.model_dump()
    for spec in fields["tensor_maps"].values():
        spec["zeros_when_absent"] = False  # by address, 0 says "no map"
    twin = type(desc).model_validate({**fields, "files": {**desc.files, desc.source: changed}})
    return KernelChoice(twin, twin.check_tunables(None), "job")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--size", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", default="cold", choices=["cold", "hot", "burst", "sustained"])
    args = ap.parse_args()
    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE=args.mode))
    runner = CupyRunner()
    print(f"{'variant':28} {'maps':>10} {'size':>16} {'ok':>3} {'GFLOPS':>9} {'cuBLAS':>9} {'%':>6}")
    for size in [required_dims(s) for s in args.size or ["2048"]]:
        for r in range(args.rounds):
            for name in args.variants:
                desc = builtin_kernels()[name]
                for label, choice in (("by value", KernelChoice(desc, desc.check_tunables(None), "builtin")),
                                      ("by address", by_address(name))):
                    out = runner.run_case(Case(0, name, *size, 7 + r, choice), policy)
                    print(f"{name:28} {label:>10} {'x'.join(map(str, size)):>16} {'yes' if out.verified else 'NO':>3} "
                          f"{out.gflops or 0:9,.0f} {out.cublas_gflops or 0:9,.0f} {out.pct_of_cublas or 0:6.1f}"
                          + (f"  {out.error.splitlines()[0]}" if out.error else ""), flush=True)


if __name__ == "__main__":
    main()
