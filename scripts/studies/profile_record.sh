#!/usr/bin/env bash
# Recordings for the profile diff (issue 39): Nsight Compute's raw metrics and cuobjdump's SASS of a
# base and a head kernel, one launch each at SIZE^3, clocks left as found (--clock-control none).
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   scripts/studies/profile_record.sh OUT_DIR LABEL NAME SIZE [KERNELS_DIR] [-- LABEL NAME SIZE [KERNELS_DIR] ...]
# Writes OUT_DIR/LABEL.ncu.csv (`--page raw --csv --print-units base`, one row per kernel),
# OUT_DIR/LABEL.sass (cuobjdump -sass of the kernel's cubin), OUT_DIR/LABEL.res (cuobjdump -res-usage),
# and OUT_DIR/timings.log (each ncu run's wall time).
set -uo pipefail
OUT=$1; shift; mkdir -p "$OUT"
# The worker's own ncu arguments (worker/profile/profiler.py: clocks left alone, the NVTX range, its metrics).
mapfile -t ncu_args < <(python3 -c "from worker.profile.profiler import ncu_command; print(*ncu_command('ncu', [])[1:], sep='\n')")
while [ $# -gt 0 ]; do
  label=$1 name=$2 size=$3; shift 3; dir=""
  if [ $# -gt 0 ] && [ "$1" != "--" ]; then dir=$1; shift; fi
  [ "${1:-}" = "--" ] && shift
  cache=$(mktemp -d)
  started=$(date +%s.%N)
  GEMMWATCH_KERNEL_CACHE_DIR=$cache ncu "${ncu_args[@]}" python3 scripts/studies/ncu_launch_variant.py "$name" "$size" $dir > "$OUT/$label.ncu.csv" 2> "$OUT/$label.ncu.err"
  rc=$?
  echo "$label $name ${size}^3 ${dir:-builtin}: ncu rc $rc, $(python3 -c "import time; print(round(time.time() - $started, 2))") s" \
    | tee -a "$OUT/timings.log"
  # Without the profiler: the same launches, the SASS of what was compiled.
  cubin=$(find "$cache" -name '*.cubin' | head -1)
  if [ -n "$cubin" ]; then
    cuobjdump -sass "$cubin" > "$OUT/$label.sass" 2>&1
    cuobjdump -res-usage "$cubin" > "$OUT/$label.res" 2>&1
  else
    echo "no cubin in $cache" | tee -a "$OUT/timings.log"
  fi
done
