#!/usr/bin/env bash
# Study: does a repository's own runner read what it reads because of its loop's length? yf225/simplegemm's
# main.cu times run_pingpong over `repeat_times` back-to-back calls between two events (1000 as it ships,
# once its `benchmark` switch is on). Its copy here is built three times, with 100, 1000 and 10000 calls
# (those two lines rewritten, nothing else), and each is run three rounds, 2 s apart, while nvidia-smi
# logs the SM clock and the board's (averaged) power every 100 ms. On an H100 its figure fell 10 % from
# the shortest loop to the longest; gemmwatch's `sustained` read the longest (docs/BENCHMARKS.md).
#
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   scripts/studies/runner_loop_length.sh REPO_DIR OUT_DIR
# REPO_DIR: `git archive e17a48d | tar -x` of yf225/simplegemm. Writes OUT_DIR/loops.log and clocks.csv.
set -euo pipefail
REPO=$(cd "$1" && pwd); OUT=$2; CALLS=${CALLS:-"100 1000 10000"}
mkdir -p "$OUT"; work=$(mktemp -d)
for n in $CALLS; do
  sed -e 's/auto benchmark = false;/auto benchmark = true;/' -e "s/int repeat_times = 1000;/int repeat_times = $n;/" \
    "$REPO/main.cu" > "$work/main_$n.cu"
  grep -q "repeat_times = $n;" "$work/main_$n.cu" || { echo "main.cu no longer reads 'int repeat_times = 1000;'" >&2; exit 2; }
  # Its Makefile's flags, with the target given as -gencode: nvcc 13's -arch=sm_90a also emits compute_90
  # PTX, where wgmma is refused.
  nvcc -std=c++17 -O3 -DNDEBUG -w --expt-relaxed-constexpr --expt-extended-lambda -Xcompiler=-fPIE \
    -Xcompiler=-Wno-psabi -Xcompiler=-fno-strict-aliasing -gencode arch=compute_90a,code=sm_90a \
    -I"$REPO" "$work/main_$n.cu" -lcublas -lcuda -o "$work/gemm_$n"
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 100 > "$OUT/clocks.csv" &
smi=$!
trap 'kill $smi 2>/dev/null || true' EXIT
for round in 1 2 3; do
  for n in $CALLS; do
    echo "== calls=$n round=$round $(date +%T.%N)"
    (cd "$REPO" && "$work/gemm_$n" | grep -E "TFLOPS|Fail")
    sleep 2
  done
done | tee "$OUT/loops.log"
