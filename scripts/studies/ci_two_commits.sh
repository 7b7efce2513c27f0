#!/usr/bin/env bash
# Study: `gemmwatch ci` on two commits of a kernels folder on this machine's GPU, the second with
# one kernel made slower (smem_tiled's tile cut from 32 to 16 by its description's default), for
# the commit page and the CI summary's links (docs/DASHBOARD.md). Leaves the SQLite database and
# the two summaries in OUT.  Usage: bash scripts/studies/ci_two_commits.sh OUT [SIZE...]
# START_DB=path: begin from that database (another GPU's run of this study), so one database holds
# both GPUs' jobs for the commit page, the compare view and the roofline.  VARIANTS: which to run.
set -euo pipefail
out=$1; shift
sizes=("${@:-2048 4096}")
export GEMMWATCH_DATA_DIR=${GEMMWATCH_DATA_DIR:-/tmp/gw-two-commits}
mkdir -p "$GEMMWATCH_DATA_DIR"
if [ -n "${START_DB:-}" ]; then cp "$START_DB" "$GEMMWATCH_DATA_DIR/gemmwatch.db"; fi
source scripts/studies/stack.sh
start_stack 8000 "$out/up.log" 60
base=$(mktemp -d); head=$(mktemp -d)
cp -r kernels/. "$base"; cp -r kernels/. "$head"
python3 - "$head/gemmwatch.json" <<'PY'
import json, sys
path = sys.argv[1]; d = json.load(open(path))
for k in d["kernels"] if isinstance(d, dict) else d:
    if k["name"] == "smem_tiled":
        k["tunables"]["TILE"]["default"] = 16
json.dump(d, open(path, "w"), indent=2)
PY
size_args=(); for s in ${sizes[@]}; do size_args+=(--size "$s"); done
variants=${VARIANTS:-smem_tiled,warp_tile_large,tail_split_k_overlap,bf16_wgmma_ss}
python3 -m cli.main ci --commit c0ffee0001 --branch main --parents "" --kernels-dir "$base" --variants $variants \
  "${size_args[@]}" > "$out/summary-base.md" 2> "$out/ci-base.log" || echo "base: exit $?"
python3 -m cli.main ci --commit c0ffee0002 --branch main --parents c0ffee0001 --kernels-dir "$head" --variants $variants \
  "${size_args[@]}" > "$out/summary-head.md" 2> "$out/ci-head.log" || echo "head: exit $?"
sqlite3 "$GEMMWATCH_DATA_DIR/gemmwatch.db" ".backup '$out/gemmwatch.db'" 2>/dev/null \
  || python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
       "$GEMMWATCH_DATA_DIR/gemmwatch.db" "$out/gemmwatch.db"
