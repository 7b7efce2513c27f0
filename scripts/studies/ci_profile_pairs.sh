#!/usr/bin/env bash
# Study (issue 39): `gemmwatch ci` on two base/head pairs on this machine's GPU, each head confirmed
# against its base in one job and the confirmed change profiled (Nsight Compute, --clock-control
# none) by the worker. Leaves in OUT: each ci summary, the SQLite database (for the commit pages'
# screenshots), every profile as JSON, the worker's log.
#   split: tail_split_k_overlap, its last k-step moved back in front of the barrier
#          (LAST_K_AFTER_BARRIER 1 -> 0: the optimisation reverted)
#   wgmma: bf16_wgmma at 433b9ef and at 4e40129 (the head spills 8 bytes); their kernels folders in
#          DEMO_DIR/<sha>/kernels (`git archive SHA kernels`)
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   bash scripts/studies/ci_profile_pairs.sh OUT [SIZE]     (DEMO_DIR default .devkit/demo)
set -euo pipefail
out=$1; size=${2:-4096}; demo=${DEMO_DIR:-.devkit/demo}
mkdir -p "$out"
export GEMMWATCH_DATA_DIR=${GEMMWATCH_DATA_DIR:-/tmp/gw-profile-pairs}
mkdir -p "$GEMMWATCH_DATA_DIR"
source scripts/studies/stack.sh
start_stack 8000 "$out/up.log" 120

ci() {  # label side sha parents kernels_dir variant [more ci options]
  local branch=$1 label=$1-$2 sha=$3 parents=$4 dir=$5 variant=$6; shift 6
  local started; started=$(date +%s.%N)
  python3 -m cli.main ci --local --commit "$sha" --branch "$branch" --parents "$parents" --kernels-dir "$dir" \
    --variants "$variant" --size "$size" "$@" > "$out/summary-$label.md" 2> "$out/ci-$label.log" \
    || echo "ci $label ${sha:0:7}: exit $?" | tee -a "$out/timings.log"
  echo "ci $label ${sha:0:7}: $(python3 -c "import time; print(round(time.time() - $started, 1))") s" | tee -a "$out/timings.log"
}

base=$(mktemp -d); head=$(mktemp -d)
cp -r kernels/. "$base"; cp -r kernels/. "$head"
python3 - "$head/gemmwatch.json" <<'PY'
import json, sys
path = sys.argv[1]; d = json.load(open(path))
for k in d["kernels"] if isinstance(d, dict) else d:
    if k["name"] == "tail_split_k_overlap":
        k["defines"]["LAST_K_AFTER_BARRIER"] = 0
json.dump(d, open(path, "w"), indent=2)
PY
ci split base 5b1e000000000000000000000000000000000001 "" "$base" tail_split_k_overlap
ci split head 5b1e000000000000000000000000000000000002 5b1e000000000000000000000000000000000001 "$head" \
  tail_split_k_overlap --always-confirm

wb=433b9efd85a5497abe42a7f3d110aaecf735d4b5; wh=4e4012905a2e057d69d3235d640682317502a87b
ci wgmma base $wb "" "$demo/${wb:0:7}/kernels" bf16_wgmma
ci wgmma head $wh $wb "$demo/${wh:0:7}/kernels" bf16_wgmma --always-confirm

python3 - "$GEMMWATCH_DATA_DIR/gemmwatch.db" "$out" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1]); out = sys.argv[2]
rows = db.execute("select p.result_id, p.job_id, p.status, p.reason, p.summary, p.data, p.started_at, p.finished_at,"
                  " r.variant from profile p join result r on r.id = p.result_id").fetchall()
profiles = [dict(zip(("result_id", "job_id", "status", "reason", "summary", "data", "started_at", "finished_at",
                      "variant"), r)) for r in rows]
for p in profiles:
    p["data"] = json.loads(p["data"])
    print(p["variant"], p["status"], "ncu wall", p["data"].get("ncu_wall_s"), "s;", p["started_at"], "->", p["finished_at"])
    print("  " + p["summary"])
json.dump(profiles, open(f"{out}/profiles.json", "w"), indent=1)
src = sqlite3.connect(sys.argv[1]); dst = sqlite3.connect(f"{out}/gemmwatch.db"); src.backup(dst)
PY
cp "$GEMMWATCH_DATA_DIR"/*.log "$out/" 2>/dev/null || true
