#!/usr/bin/env bash
# Demonstrates the CI hook against a running gemmwatch (used for docs/BENCHMARKS.md):
# commit A = the kernels as they are; commit B = the same with smem_tiled's inner loop no
# longer unrolled (slower on purpose, about 28 %); commit C = unchanged again; commit D = a small
# real change, warp_tile_large's default GROUP_M 8 -> 1 (blocks rasterised without grouping, so
# less L2 reuse; SLOW_FROM and SLOW_TO choose another one-line edit, of kernels/$SLOW_FILE, default
# registry.py); commit E =
# unchanged, confirmed anyway (--always-confirm) to show "no change".
# B..E name A as their parent, so history follows ancestry; a change the history sees is
# confirmed by an A/B job (base and head kernels interleaved on one GPU). Prints each exit code.
# Usage: scripts/ci_demo.sh SERVER SIZE   (STEPS=ad runs only commits A and D, say)
set -u
server=${1:-http://127.0.0.1:8000}; size=${2:-4096}; steps=${STEPS:-abcde}; d_sha=${D_SHA:-d0d0d0d4}
work=$(mktemp -d)
cp -r kernels "$work/a"; cp -r kernels "$work/b"; cp -r kernels "$work/d"
sed -i 's/^#pragma unroll$/#pragma unroll 1/' "$work/b/smem_tiled.cu"
grep -q "pragma unroll 1" "$work/b/smem_tiled.cu" || { echo "could not slow smem_tiled down"; exit 9; }
# The small change: one default tunable of the ladder's best kernel, nothing else (warp_tile_large's
# GROUP_M is the one followed by FMA_ORDER; tf32_wgmma has a GROUP_M too). Made only for commit D.
from=${SLOW_FROM:-$'Tunable("GROUP_M", (1, 8), 8),\n                Tunable("FMA_ORDER"'}
to=${SLOW_TO:-$'Tunable("GROUP_M", (1, 8), 1),\n                Tunable("FMA_ORDER"'}
case "$steps" in *d*) python3 - "$work/d/${SLOW_FILE:-registry.py}" "$from" "$to" <<'PY' || exit 9
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
open(path, "w").write(text.replace(old, new))
PY
;; esac
run() {
  case "$steps" in *"$1"*) ;; *) return ;; esac; shift
  echo "== commit $2 (${SLOW_TO:-GROUP_M 1} for D)"
  python3 -m cli.main ci --server "$server" --variants smem_tiled,warp_tile_large --size "$size" "$@"; echo "exit code: $?"
}
run a --commit a0a0a0a1 --branch main --parents "" --kernels-dir "$work/a"
run b --commit b0b0b0b2 --branch slow-pr --parents a0a0a0a1 --base a0a0a0a1 --kernels-dir "$work/b"
run c --commit c0c0c0c3 --branch same-pr --parents a0a0a0a1 --base a0a0a0a1 --kernels-dir "$work/a"
run d --commit "$d_sha" --branch small-pr --parents a0a0a0a1 --base a0a0a0a1 --kernels-dir "$work/d" --always-confirm
run e --commit e0e0e0e5 --branch same-pr2 --parents a0a0a0a1 --base a0a0a0a1 --kernels-dir "$work/a" --always-confirm
