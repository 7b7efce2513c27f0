#!/usr/bin/env python3
"""Launch one registered kernel three times at size^3, compiled as the runner compiles it (its
dynamic shared memory raised as the runner raises it), for Nsight Compute to profile the third:
  ncu --clock-control none --kernel-name regex:sgemm_tf32 --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats python3 scripts/ncu_launch_variant.py tf32_wgmma 4096
"""
import sys, tempfile
import cupy as cp
sys.path.insert(0, ".")
from api.settings import Settings
from kernels.registry import VARIANTS
from worker import compiler
name, s = sys.argv[1], int(sys.argv[2])
L = VARIANTS[name].resolve()
cc = "".join(map(str, cp.cuda.Device().compute_capability))
built = compiler.compile_launch(L, cc[:-1] + "." + cc[-1], Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp()))
f = cp.RawModule(path=str(built.cubin_path)).get_function(built.lowered.get(L.entry, L.entry))
if L.dynamic_smem:
    f.max_dynamic_shared_size_bytes = L.dynamic_smem
a = cp.random.random((s, s), dtype=cp.float32) - 0.5
b = cp.random.random((s, s), dtype=cp.float32) - 0.5
c = cp.zeros((s, s), dtype=cp.float32)
for _ in range(3):
    f(L.grid(s, s), L.block, (cp.int32(s), cp.int32(s), cp.int32(s), cp.float32(1), a, b, cp.float32(0), c), shared_mem=L.dynamic_smem)
cp.cuda.Device().synchronize()
ref = a @ b
print(name, "rel err", float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref)))
