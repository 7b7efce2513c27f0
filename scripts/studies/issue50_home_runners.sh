#!/usr/bin/env bash
# Issue 50's must-show 2 on a GPU machine: CUTLASS's example 48 (Hopper warp-specialised) and
# omkarnabar/triton-gemm, files unchanged, beside their own runners (scripts/studies/home_runner_compare.py).
# Usage: scripts/studies/issue50_home_runners.sh OUT {cutlass48|omkarnabar} SIZE STEPS [REPO]
# CUTLASS's examples come from the installed nvidia-cutlass wheel unless REPO is given.
set -u
out=$1; kind=$2; size=$3; steps=$4; repo=${5:-}
work=/tmp/home-runners/$kind-$size
mkdir -p "$out" "$work"
if [ "$kind" = cutlass48 ] && [ -z "$repo" ]; then
  repo=$(python3 -c "import importlib.util as u; print(list(u.find_spec('cutlass_library').submodule_search_locations)[0])")/source/examples
fi
export GEMMWATCH_COMPILE_TIMEOUT_S=${GEMMWATCH_COMPILE_TIMEOUT_S:-600}
python3 scripts/studies/home_runner_compare.py "$kind" "$repo" "$work" --size "$size" --steps "$steps" \
  > "$out/$kind-$size.log" 2>&1
echo "exit $?" >> "$out/$kind-$size.log"
{ cat "$work/table.md" 2>/dev/null; echo; cat "$work/runner.txt" 2>/dev/null | tail -40
  for m in burst cold sustained hot; do
    [ -d "$work/$m" ] || continue
    echo "== $m"; cat "$work/$m"/*.md 2>/dev/null | head -60; grep -i -m5 "error\|refused\|traceback" "$work/$m/stack.log"
  done; } > "$out/$kind-$size.md"
