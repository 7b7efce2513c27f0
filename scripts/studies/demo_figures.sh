#!/usr/bin/env bash
# The demo's figures (issue 38): this project's own kernels at a few of its commits, measured by
# `gemmwatch ci` on a GPU machine's embedded stack, then every job saved as `GET /api/jobs/{id}`
# returns it. `gemmwatch demo` loads such files into any stack through POST /api/results.
#
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   scripts/studies/demo_figures.sh COMMITS_FILE OUT_DIR
# COMMITS_FILE: one line per commit, oldest first: `SHA PARENTS SIZES`, PARENTS comma-separated,
# SIZES comma-separated edges (e.g. 1024,4096); the commit's kernels folder is
# $(dirname COMMITS_FILE)/SHA/kernels (`git archive SHA kernels | tar -x`).
# CI_FLAGS: `gemmwatch ci`'s confirmation flags (default --no-confirm; "" confirms a change by an A/B job).
# VARIANTS: the kernels measured where a commit has them (default below). Writes OUT_DIR/figures.tgz
# (jobs/JOB.json, ci-SHA.log, up.log, gpu.csv) and OUT_DIR/commits.log.
set -euo pipefail
COMMITS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); OUT=$2; mkdir -p "$OUT/jobs"
VARIANTS=${VARIANTS:-"naive smem_tiled warp_tile_large tf32_mma_sync tf32_wgmma tf32_wgmma_pairs bf16_mma_sync bf16_wgmma bf16_wgmma_ss fp16_wgmma fp16_wgmma_ss fp8_mma_sync"}
PORT=${PORT:-8766}
export GEMMWATCH_DATA_DIR=$(mktemp -d) GEMMWATCH_COMPILE_TIMEOUT_S=300
source scripts/studies/stack.sh
start_stack "$PORT" "$OUT/up.log" 180

while read -r sha parents sizes; do
  [ -n "$sha" ] || continue
  kernels="$(dirname "$COMMITS")/$sha/kernels"
  have=$(python3 - "$kernels" $VARIANTS <<'PY'
import sys
from pathlib import Path
from core.description.kernel_folder import load_folder
names = {d.name for d in load_folder(Path(sys.argv[1]))}
print(",".join(v for v in sys.argv[2:] if v in names))
PY
)
  size_args=(); for s in ${sizes//,/ }; do size_args+=(--size "$s"); done
  echo "$(date -u +%FT%TZ) $sha: $have at ${sizes}" | tee -a "$OUT/commits.log"
  python3 -m cli.main ci --server "http://127.0.0.1:$PORT" --local --kernels-dir "$kernels" --variants "$have" \
    "${size_args[@]}" --commit "$sha" --branch main --parents "$parents" ${CI_FLAGS---no-confirm} --timeout 540 \
    > "$OUT/ci-$sha.log" 2>&1 || echo "ci at $sha ended $?" | tee -a "$OUT/commits.log"
done < "$COMMITS"

# Each job as GET /api/jobs/{id} returns it, each result replaced by GET /api/results/{id}'s, which
# keeps the raw samples (the variant's, cuBLAS's in env): /compare's intervals are drawn from them.
python3 - "http://127.0.0.1:$PORT" "$OUT/jobs" <<'PY'
import json, sys, urllib.request
base, out = sys.argv[1], sys.argv[2]
get = lambda path: json.load(urllib.request.urlopen(base + path))
for summary in get("/api/jobs?limit=100"):
    job = get(f"/api/jobs/{summary['id']}")
    job["results"] = [get(f"/api/results/{r['id']}") for r in job["results"]]
    with open(f"{out}/{job['id']}.json", "w") as f:
        json.dump(job, f)
PY
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv > "$OUT/gpu.csv" || true
echo "$(ls "$OUT/jobs" | wc -l) jobs saved" | tee -a "$OUT/commits.log"
# One file back from the GPU machine, whatever the number of jobs.
tar -czf "$OUT/figures.tgz" -C "$OUT" jobs gpu.csv up.log $(cd "$OUT" && ls ci-*.log) && rm -r "$OUT/jobs" "$OUT"/ci-*.log "$OUT/up.log" "$OUT/gpu.csv"
