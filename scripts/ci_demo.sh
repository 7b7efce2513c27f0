#!/usr/bin/env bash
# Demonstrates the CI hook against a running gemmwatch (used for docs/BENCHMARKS.md):
# commit A = the kernels as they are; commit B = the same with smem_tiled's inner loop no
# longer unrolled (slower on purpose); commit C = unchanged again. Prints each exit code.
# Usage: scripts/ci_demo.sh SERVER SIZE
set -u
server=${1:-http://127.0.0.1:8000}; size=${2:-4096}
work=$(mktemp -d)
cp -r kernels "$work/a"; cp -r kernels "$work/b"
sed -i 's/^#pragma unroll$/#pragma unroll 1/' "$work/b/smem_tiled.cu"
grep -q "pragma unroll 1" "$work/b/smem_tiled.cu" || { echo "could not slow smem_tiled down"; exit 9; }
run() { python3 -m cli.main ci --server "$server" --variants smem_tiled,warp_tile_large --size "$size" "$@"; echo "exit code: $?"; }
run --commit a0a0a0a1 --branch main --kernels-dir "$work/a"
run --commit b0b0b0b2 --branch slow-pr --base a0a0a0a1 --kernels-dir "$work/b"
run --commit c0c0c0c3 --branch same-pr --base a0a0a0a1 --kernels-dir "$work/a"
