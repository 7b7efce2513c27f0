"""Device harness for tf32_wgmma (not part of the product): SASS summary, correctness at the odd
sizes, and gemmwatch's own runner (CupyRunner.run_case: NVRTC cubin, TF32-bound verification, cold-L2
timing paired with cuBLAS TF32) at 4096^3 for a few configurations. Usage on the GPU machine:
  HARNESS_CUBES=1024,4096 python3 scripts/studies/wgmma_harness.py [sass|correct|perf|all] [VARIANT:K=V,K=V ...]
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("GEMMWATCH_DATA_DIR", tempfile.mkdtemp(prefix="gw-harness-"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.settings import Settings  # noqa: E402
from worker.compile import compiler  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))
ODD = [(1, 1, 1), (7, 13, 5), (1000, 1003, 997), (1000, 1024, 1000), (4097, 4095, 1023), (4096, 4096, 4096)]


def sass_summary(runner, name, params):
    launch = runner.resolve(builtin_case(name, 1, 1, 1, tunables=params).kernel)  # with this GPU's figures
    built = compiler.compile_launch(launch, "9.0", Settings())
    tool = shutil.which("cuobjdump")
    if not tool:
        print("no cuobjdump")
        return
    sass = subprocess.run([tool, "-sass", str(built.cubin_path)], capture_output=True, text=True).stdout
    res = subprocess.run([tool, "-res-usage", str(built.cubin_path)], capture_output=True, text=True).stdout
    out = os.environ.get("OUT")
    if out:
        open(os.path.join(out, f"{name}-{'-'.join(f'{k}{v}' for k, v in params.items())}.sass"), "w").write(sass)
    ops = {op: sass.count(op) for op in ("HGMMA", "LDL", "STL", "LDS", "LDGSTS", "WARPGROUP", "SYNCS", "BAR.SYNC")}
    print(f"SASS {name} {params}: {ops}\n{res.strip()[-300:]}")


def parse(arg):
    name, _, rest = arg.partition(":")
    params = dict((k, int(v)) for k, v in (p.split("=") for p in rest.split(",") if p))
    return name, params


def run(runner, name, params, size):
    m, n, k = size
    out = runner.run_case(builtin_case(name, m, n, k, seed=1234, tunables=params), POLICY)
    pct = f"{out.pct_of_cublas:.1f}%" if out.pct_of_cublas else "-"
    gf = f"{out.gflops:,.0f}" if out.gflops else "-"
    cb = f"{out.cublas_gflops:,.0f}" if out.cublas_gflops else "-"
    err = f"{out.rel_error:.2e}" if out.rel_error is not None else "-"
    print(f"{name:14s} {str(params):40s} {m}x{n}x{k:<6} verified={out.verified!s:5s} err={err} "
          f"GFLOPS={gf:>9s} cuBLAS={cb:>9s} {pct:>7s} {out.error or ''}", flush=True)
    return out


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    configs = [parse(a) for a in sys.argv[2:]] or [("tf32_wgmma", {})]
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    print(runner.identity()["name"], runner.identity()["compute_capability"])
    if what in ("sass", "all"):
        for name, params in configs:
            sass_summary(runner, name, params)
    if what in ("correct", "all"):
        for size in ODD:
            run(runner, *configs[0], size)
    if what in ("perf", "all"):
        cubes = [int(x) for x in os.environ.get("HARNESS_CUBES", "4096").split(",")]
        for n in cubes:
            for name, params in configs:
                run(runner, name, params, (n, n, n))


if __name__ == "__main__":
    main()
