#!/usr/bin/env python3
"""Launch one kernel three times at size^3, compiled as the runner compiles it (its dynamic shared
memory raised as the runner raises it), for Nsight Compute to profile the third. A built-in, or with
a third argument a kernel of that folder (its gemmwatch.json, as `gemmwatch ci --kernels-dir` reads it):
  ncu --clock-control none --kernel-name regex:sgemm_tf32 --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats python3 scripts/studies/ncu_launch_variant.py tf32_wgmma 4096
  ... python3 scripts/studies/ncu_launch_variant.py bf16_wgmma 4096 path/to/commit/kernels
"""
import sys
import tempfile
from pathlib import Path
import cupy as cp
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root
from core.description.builtins import builtin_kernels
from core.description.kernel_folder import load_folder
from core.settings import Settings
from worker.measure.cases import KernelChoice, builtin_case
from worker.measure.runner import CupyRunner
name, s = sys.argv[1], int(sys.argv[2])
folder = {d.name: d for d in load_folder(Path(sys.argv[3]))} if len(sys.argv) > 3 else None
if folder is not None and name not in folder:
    sys.exit(f"{name}: not in {sys.argv[3]}; there: {', '.join(folder)}")
if folder is None and name not in builtin_kernels():  # cuBLAS or a misspelt name: no kernel of ours to launch
    sys.exit(f"{name}: not a built-in kernel; built-ins: {', '.join(builtin_kernels())}")
runner = CupyRunner(Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp()))
dev = runner.device
# The description resolved with this GPU's own figures, compiled and launched by the device as a job's case is.
choice = (KernelChoice(folder[name], folder[name].check_tunables(None), "builtin") if folder is not None
          else builtin_case(name, s, s, s).kernel)
L = runner.resolve(choice)
f = dev.compile(L)
a = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, L.form.a)
b = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, L.form.b)
c = dev.matrix(s, s, L.form.c, fill=0.0)
launch = dev.kernel_call(f, L, s, s, s, a, b, c, 1.0, 0.0)  # raises the kernel's dynamic shared memory limit
launch()
launch()
# The third launch inside an NVTX range, for `ncu --nvtx --nvtx-include gemmwatch_profile/`: every
# kernel of the launch (a split-K's second kernel, a launcher's), none of CuPy's set-up kernels.
from cupyx.profiler import time_range  # noqa: E402

with time_range("gemmwatch_profile"):
    launch()
cp.cuda.Device().synchronize()
ref = a @ b
print(name, "rel err", float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref)))
