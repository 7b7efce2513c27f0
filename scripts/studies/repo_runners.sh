#!/usr/bin/env bash
# The two public SGEMM repositories' own runners, built and run as their READMEs say (nvcc and
# cuBLAS instead of their CMake/Makefile, for this GPU's sm_90), to set their figures beside
# gemmwatch's (docs/BENCHMARKS.md, issue 19). Files unchanged; each prints GFLOPS per size.
#   siboehm/SGEMM_CUDA: ./sgemm K for K in 1..12 (sizes 128..4096, 50 back-to-back launches
#     between two events: hot); its check: |cuBLAS - kernel| <= 0.01 per element.
#   yzhaiustc/Optimizing-SGEMM-on-NVIDIA-Turing-GPUs: ./sgemm_gpu K for K in 1..11 (sizes 256 up to
#     2048 for K <= 4, 6144 beyond; 10 launches, each between two device synchronisations: hot);
#     its check: |cuBLAS - kernel| <= 1e-2 per element.
# Usage: scripts/studies/repo_runners.sh SIBOEHM_DIR YZHAIUSTC_DIR OUT_DIR
set -u
sib=$1; yz=$2; out=$3
mkdir -p "$out"
(cd "$sib" && nvcc -O3 -std=c++17 -arch=sm_90 -Isrc sgemm.cu src/runner.cu -lcublas -o /tmp/sgemm_sib) \
  || echo "siboehm: build failed"
(cd "$yz" && nvcc -O3 -std=c++14 -arch=sm_90 test.cu utils.cu -lcublas -o /tmp/sgemm_yz) || echo "yzhaiustc: build failed"
for k in $(seq 1 12); do
  echo "== kernel $k"; (cd "$sib" && timeout 120 /tmp/sgemm_sib "$k") 2>&1; echo "== exit $?"
done > "$out/siboehm_runner.txt"
for k in $(seq 1 11); do
  echo "== kernel $k"; (cd "$yz" && timeout 120 /tmp/sgemm_yz "$k") 2>&1; echo "== exit $?"
done > "$out/yzhaiustc_runner.txt"
