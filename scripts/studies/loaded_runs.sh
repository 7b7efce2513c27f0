#!/usr/bin/env bash
# Study (issue 38): N consecutive fresh-clone runs of the suite (`bash .ci/run`, which is `make test`)
# of one revision, each while LOAD processes keep the CPUs busy (`yes > /dev/null`), stopping at the
# first that fails. Writes OUT/runs.log (each run's exit status, wall time, closing line and the
# load average at its end) and OUT/runN.log (its whole output).
#   bash scripts/studies/loaded_runs.sh REPO REV OUT [N=5] [LOAD=4]
# Nothing else may run the suite on this machine meanwhile: two suites share the test Redis
# databases and port ranges (tests/parallel.py).
set -uo pipefail
repo=$1 rev=$2 out=$3 n=${4:-5} load=${5:-4}
mkdir -p "$out"
busy=()
for _ in $(seq "$load"); do yes > /dev/null & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
echo "$(date -u +%FT%TZ) $rev: $n runs under $load busy processes on $(nproc) CPUs" >> "$out/runs.log"
for i in $(seq "$n"); do
  dir=$(mktemp -d /tmp/loaded-run-XXXX)
  git clone -q "$repo" "$dir/gemmwatch" && git -C "$dir/gemmwatch" checkout -q "$rev"
  started=$(date +%s)
  (cd "$dir/gemmwatch" && CI=true bash .ci/run) > "$out/run$i.log" 2>&1 < /dev/null
  rc=$?
  closing=$(grep -E '^=+ .*(passed|failed).* in ' "$out/run$i.log" | tail -1)
  echo "run $i: exit $rc, $(( $(date +%s) - started )) s, $closing, load average $(cut -d' ' -f1-3 /proc/loadavg)" \
    | tee -a "$out/runs.log"
  rm -rf "$dir"
  [ "$rc" -eq 0 ] || break
done
