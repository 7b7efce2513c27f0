#!/usr/bin/env python3
"""Launch one built-in kernel three times at size^3, compiled as the runner compiles it (its
dynamic shared memory raised as the runner raises it), for Nsight Compute to profile the third:
  ncu --clock-control none --kernel-name regex:sgemm_tf32 --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats python3 scripts/studies/ncu_launch_variant.py tf32_wgmma 4096
"""
import sys, tempfile
from pathlib import Path
import cupy as cp
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root
from core.builtins import builtin_kernels
from core.settings import Settings
from worker.cases import builtin_case
from worker.runner import CupyRunner
name, s = sys.argv[1], int(sys.argv[2])
if name not in builtin_kernels():  # cuBLAS or a misspelt name: no kernel of ours to launch
    sys.exit(f"{name}: not a built-in kernel; built-ins: {', '.join(builtin_kernels())}")
runner = CupyRunner(Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp()))
dev = runner.device
# The description resolved with this GPU's own figures, compiled and launched by the device as a job's case is.
L = runner.resolve(builtin_case(name, s, s, s).kernel)
f = dev.compile(L)
a = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, L.form.a)
b = dev.in_layout(cp.random.random((s, s), dtype=cp.float32) - 0.5, L.form.b)
c = dev.matrix(s, s, L.form.c, fill=0.0)
launch = dev.kernel_call(f, L, s, s, s, a, b, c, 1.0, 0.0)  # raises the kernel's dynamic shared memory limit
for _ in range(3):
    launch()
cp.cuda.Device().synchronize()
ref = a @ b
print(name, "rel err", float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref)))
