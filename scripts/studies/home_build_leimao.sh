#!/usr/bin/env bash
# Study (issue 35): leimao/CUDA-GEMM-Optimization's 13 FP32 kernels, files unchanged, timed by the
# repository's own runner and by `gemmwatch ci` with docs/examples/leimao-CUDA-GEMM-Optimization.gemmwatch.json,
# both built by the same nvcc with the repository's flags (-std=c++14, the GPU's own arch), both hot
# (the same buffers each launch, no L2 flush), at 4096^3, the one size the runner has.
#
# The runner as published takes one warm-up and one timed launch; its copy here takes REPEATS of each
# (its two constants rewritten, nothing else), so each of its figures is a mean of REPEATS launches.
# CUDA 13 removed cudaDeviceProp::memoryClockRate, which the runner prints: a -D on the build line
# stands in for it (only that printed line changes).
#
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   scripts/studies/home_build_leimao.sh REPO_DIR OUT_DIR
# REPO_DIR: `git archive 747e49b | tar -x` of the repository. Writes OUT_DIR/own_runner.log,
# ci.log and results.json.
set -euo pipefail
REPO=$(cd "$1" && pwd); OUT=$2; REPEATS=${REPEATS:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
cp -r "$REPO/." "$work/"
cp "$ROOT/docs/examples/leimao-CUDA-GEMM-Optimization.gemmwatch.json" "$work/gemmwatch.json"

# The repository's own runner.
runner=$(mktemp -d)
cp -r "$REPO/." "$runner/"
sed -i -E "s/constexpr size_t (num_repeats|num_warmups)\{1U\};/constexpr size_t \1{${REPEATS}U};/" \
  "$runner/src/profile_cuda_gemm_fp32.cu"
cc=$(python3 -c "import cupy; d = cupy.cuda.Device(0).compute_capability; print(d)")
libs=$(python3 - <<'PY'
import glob, os
hits = glob.glob("/usr/local/cuda/lib64/libcublas.so*") + glob.glob("/usr/local/lib/python3*/*-packages/nvidia/*/lib/libcublas.so*")
print(os.path.dirname(sorted(hits)[0]) if hits else "")
PY
)
(cd "$runner" && nvcc -std=c++14 -arch=sm_$cc -Iinclude -DmemoryClockRate=memoryBusWidth \
   src/profile_cuda_gemm_fp32.cu src/0*.cu src/cuda_gemm_utils.cu ${libs:+-L$libs -Xlinker -rpath=$libs} \
   -l:$(basename "$(ls "${libs:-/usr/local/cuda/lib64}"/libcublas.so* | head -1)") -o runner_fp32 \
 && ./runner_fp32) > "$OUT/own_runner.log" 2>&1 || echo "own runner failed: see own_runner.log"

# gemmwatch, hot, on this machine's embedded stack.
export GEMMWATCH_DATA_DIR=$(mktemp -d) GEMMWATCH_TIMING_MODE=hot
source scripts/studies/stack.sh
start_stack 8765 "$OUT/up.log" 120
python3 -m cli.main ci --server http://127.0.0.1:8765 --kernels-dir "$work" --size 4096 --commit 747e49b \
  --branch main --parents "" --no-confirm --local --timeout 500 > "$OUT/ci.log" 2>&1 || true
curl -s "http://127.0.0.1:8765/api/results?limit=100" > "$OUT/results.json"
