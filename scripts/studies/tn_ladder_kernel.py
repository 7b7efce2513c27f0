"""Study (issue 36): the TN ladder kernel (bf16_wgmma_tn, B column-major) beside cuBLAS TN, and its
NN sibling (bf16_wgmma_ss) beside cuBLAS NN, cold, through the product's runner.

Usage on a GPU machine, project root: python3 scripts/studies/tn_ladder_kernel.py [SIZE ...]
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

sizes = [int(s) for s in sys.argv[1:]] or [4096, 8192]
cfg = Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp())
runner, policy = CupyRunner(cfg), TimingPolicy.from_settings(cfg)
print(f"{runner.identity()['name']}, cold, {policy.max_noise:g} noise target")
print("| kernel | form | size | TFLOPS | cuBLAS TFLOPS | % of cuBLAS | rel error | cuBLAS call |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
for s in sizes:
    for name in ("bf16_wgmma_tn", "bf16_wgmma_ss"):
        out = runner.run_case(builtin_case(name, s, s, s, seed=s), policy)
        print(f"| {name} | {out.form} | {s}³ | {(out.gflops or 0) / 1000:.0f} | {(out.cublas_gflops or 0) / 1000:.0f} | "
              f"{out.pct_of_cublas or 0:.1f} | {out.rel_error:.2e} | {out.env.get('cublas_call', 'cublasGemmEx NN')} |",
              flush=True)
