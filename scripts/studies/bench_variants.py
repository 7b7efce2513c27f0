#!/usr/bin/env python3
"""Quick look at kernels on this machine's GPU, straight through the runner (no API, no database).

For kernel development between gemmwatch jobs; figures for the docs come from gemmwatch jobs.
The timing follows the worker's settings (core/settings.py), so a launcher case's conditions can be
put on a built-in: GEMMWATCH_L2_FLUSH=memset GEMMWATCH_HOLD_STREAM=false GEMMWATCH_CUBLAS_BASELINE=default.
  python3 scripts/studies/bench_variants.py warp_tile smem_padding --size 4096 --size 1000x1003x997 \
      --set warp_tile:BK=16
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.description.builtins import builtin_kernels, variant_names  # noqa: E402
from core.description.problem_size import required_dims  # noqa: E402
from core.description.timing_modes import OWN_MODES  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="variant names (default: all)")
    ap.add_argument("--size", action="append", default=[], help="MxNxK or N for a cube (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="variant:NAME=VALUE tunable override (repeatable)")
    ap.add_argument("--mode", default="cold", choices=OWN_MODES)
    args = ap.parse_args()

    overrides: dict[str, dict[str, int]] = {}
    for item in args.set:
        variant, _, assignment = item.partition(":")
        name, _, value = assignment.partition("=")
        overrides.setdefault(variant, {})[name] = int(value)
    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_TIMING_MODE=args.mode))
    runner = CupyRunner()
    names = args.variants or list(builtin_kernels())
    unknown = [n for n in names if n not in variant_names()]
    if unknown:  # else a misspelt name would be timed as cuBLAS alone (a case with no kernel)
        ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(variant_names())}")
    print(f"{'variant':34} {'size':>16} {'ok':>3} {'rel_err':>9} {'GFLOPS':>9} {'cuBLAS':>9} {'%':>6} {'noise':>7}")
    for size in [required_dims(s) for s in args.size or ["4096"]]:
        for name in names:
            out = runner.run_case(builtin_case(name, *size, seed=7, tunables=overrides.get(name)), policy)
            label = name + ("" if name not in overrides else str(overrides[name]))
            fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
            print(f"{label:34} {'x'.join(map(str, size)):>16} {'yes' if out.verified else 'NO':>3} "
                  f"{fmt(out.rel_error, '.1e'):>9} {fmt(out.gflops, ',.0f'):>9} {fmt(out.cublas_gflops, ',.0f'):>9} "
                  f"{fmt(out.pct_of_cublas, '.1f'):>6} {fmt(out.noise and 100 * out.noise, '.2f'):>7}"
                  + (f"  {out.error.splitlines()[0]}" if out.error else ""), flush=True)


if __name__ == "__main__":
    main()
