#!/usr/bin/env bash
# Study (issue 53): where a CI run's wall time goes, for every kernel of kernels/ base then head with
# --always-confirm, on this machine's GPU. Prints each `gemmwatch ci` run's wall seconds and, per job
# the run made (bench or confirm), its wait in the queue and its run time from the job records.
#   bash scripts/studies/ci_wall_time.sh OUT [SIZE]        (SIZE default 4096; PORT default 8000)
set -euo pipefail
out=$1; size=${2:-4096}
export GEMMWATCH_DATA_DIR=${GEMMWATCH_DATA_DIR:-/tmp/gw-ci-wall}
mkdir -p "$GEMMWATCH_DATA_DIR" "$out"
source scripts/studies/stack.sh
began=$(date +%s.%N)
start_stack "${PORT:-8000}" "$out/up.log" 120
# A CI run meets a worker that is up: its GPU process warmed at its start (worker/measure/warm_up.py).
wait_for_worker "${PORT:-8000}" 300
echo "stack up, its worker warm, after $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" \
    "$began" "$(date +%s.%N)") s" | tee -a "$out/wall.txt"
for run in base:c0ffee0001: head:c0ffee0002:c0ffee0001; do
    IFS=: read -r name sha parent <<< "$run"
    start=$(date +%s.%N)
    python3 -m cli.main ci --local --commit "$sha" --branch main --parents "$parent" --kernels-dir kernels \
        --size "$size" --always-confirm > "$out/summary-$name.md" 2> "$out/ci-$name.log" || echo "$name: exit $?"
    echo "$name: $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)") s wall" \
        | tee -a "$out/wall.txt"
done
python3 - "$GEMMWATCH_DATA_DIR" <<'PY' | tee -a "$out/wall.txt"
import json, sqlite3, sys
from datetime import datetime
db = sqlite3.connect(f"{sys.argv[1]}/gemmwatch.db")
def t(s): return datetime.fromisoformat(s) if s else None
for jid, kind, status, n, created, started, finished in db.execute(
        "select id, kind, status, progress_total, created_at, started_at, finished_at from job order by id"):
    c, s, f = t(created), t(started), t(finished)
    wait = (s - c).total_seconds() if c and s else None
    ran = (f - s).total_seconds() if s and f else None
    print(f"job {jid} {kind:8} {status:10} {n:3} cases  queued {wait} s  ran {ran} s")
    # Where the job's time went: each result's stages (env.stages_s) summed, and the cases' wall
    # time in the GPU process beyond them (case_s: IPC, the result's record, the device's state).
    stages, case_total, slowest = {}, 0.0, []
    for variant, case_s, n, median, env in db.execute(
            "select variant, case_s, n_samples, median_ms, env from result where job_id = ?", (jid,)):
        case_total += case_s or 0.0
        own = json.loads(env or "{}").get("stages_s") or {}
        for name, secs in own.items():
            stages[name] = stages.get(name, 0.0) + (secs or 0.0)
        slowest.append((case_s or 0.0, variant, n, median, own))
    inside = sum(stages.values())
    parts = "  ".join(f"{k} {v:.1f}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1]))
    print(f"    stages (s): {parts}  | cases {case_total:.1f}, of which outside the stages {case_total - inside:.1f};"
          f" job beyond its cases {(ran or 0) - case_total:.1f}")
    for case_s, variant, n, median, own in sorted(slowest, key=lambda x: -x[0])[:8]:  # the cases that cost most
        print(f"      {variant:32} {case_s:5.2f} s  {n} samples of {median} ms  {own}")
PY
