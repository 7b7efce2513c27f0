#!/usr/bin/env bash
# Study (issue 50, must-show 3): `gemmwatch ci` on two commits of a folder that mixes a CUDA kernel
# (the built-in warp_tile_large) and a Triton kernel (tests/fixtures/triton_repo's matmul.py, its
# file unchanged, 128x128x64 tiles, 8 warps), the second commit cutting the Triton kernel's
# pipeline from 4 stages to HEAD_STAGES (default 2) and changing nothing else. The head's run confirms in one A/B job and
# profiles what it confirms (Nsight Compute, where the machine has it). Leaves both summaries, the
# logs and the SQLite database in OUT.  Usage: bash scripts/studies/ci_triton_mixed.sh OUT [SIZE]
set -euo pipefail
out=$1; size=${2:-4096}
mkdir -p "$out"
export GEMMWATCH_DATA_DIR=${GEMMWATCH_DATA_DIR:-/tmp/gw-triton-mixed}
mkdir -p "$GEMMWATCH_DATA_DIR"
source scripts/studies/stack.sh
start_stack 8000 "$out/up.log" 120
base=$(mktemp -d); head=$(mktemp -d)
for side in "$base:4" "$head:${HEAD_STAGES:-2}"; do
  dir=${side%%:*}; stages=${side##*:}
  cp -r kernels/. "$dir"; cp tests/fixtures/triton_repo/matmul.py "$dir/"
  python3 - "$dir/gemmwatch.json" "$stages" <<'PY'
import json, sys
path, stages = sys.argv[1], int(sys.argv[2])
d = json.load(open(path))
kernels = d["kernels"] if isinstance(d, dict) else d
triton = json.load(open("tests/fixtures/triton_repo/gemmwatch.json"))["kernels"][0]
triton.update(defines={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, triton={"num_warps": 8, "num_stages": stages})
kernels.append(triton)
json.dump(d, open(path, "w"), indent=2)
PY
done
variants=warp_tile_large,triton_matmul_fp16
python3 -m cli.main ci --local --commit 7a1a0001 --branch main --parents "" --kernels-dir "$base" --variants $variants \
  --size "$size" > "$out/summary-base.md" 2> "$out/ci-base.log" || echo "base: exit $?"
python3 -m cli.main ci --local --commit 7a1a0002 --branch main --parents 7a1a0001 --kernels-dir "$head" --variants $variants \
  --size "$size" > "$out/summary-head.md" 2> "$out/ci-head.log" || echo "head: exit $?"
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
  "$GEMMWATCH_DATA_DIR/gemmwatch.db" "$out/gemmwatch.db"
