#!/usr/bin/env bash
# Demonstrates the CI hook against a running gemmwatch (used for docs/BENCHMARKS.md):
# commit A = the kernels as they are; commit B = the same with smem_tiled's inner loop no
# longer unrolled (slower on purpose, about 28 %); commit C = unchanged again; commit D = a small
# real change, warp_tile_large's default GROUP_M 8 -> 1 in kernels/gemmwatch.json (blocks rasterised
# without grouping, so less L2 reuse), or with SLOW_FILE, SLOW_FROM and SLOW_TO another one-line
# edit: SLOW_FROM replaced by SLOW_TO in kernels/$SLOW_FILE (a .cu file, say); commit E =
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
# The small change, made only for commit D. By default one default tunable of the ladder's best
# kernel, nothing else: warp_tile_large's GROUP_M, found by the kernel's name in the JSON (tf32_wgmma
# has a GROUP_M too, so no text edit would be unambiguous), the file written back as it was laid out.
edit_text() {
  [ -n "${SLOW_FILE:-}" ] || { echo "SLOW_FILE must name the file under kernels/ that SLOW_FROM is in"; return 1; }
  [ -n "${SLOW_TO+set}" ] || { echo "SLOW_TO must say what replaces SLOW_FROM"; return 1; }
  python3 - "$work/d/$SLOW_FILE" "$SLOW_FROM" "$SLOW_TO" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
open(path, "w").write(text.replace(old, new))
PY
}
edit_group_m() {
  python3 - "$work/d/gemmwatch.json" <<'PY'
import json
import sys
path = sys.argv[1]
kernels = json.load(open(path))
(group_m,) = [k["tunables"]["GROUP_M"] for k in kernels if k["name"] == "warp_tile_large"]
assert group_m["default"] == 8 and 1 in group_m["values"], f"warp_tile_large's GROUP_M is {group_m}"
group_m["default"] = 1
open(path, "w").write(json.dumps(kernels, indent=2) + "\n")
PY
}
case "$steps" in *d*) if [ -n "${SLOW_FROM:-}" ]; then edit_text; else edit_group_m; fi || exit 9 ;; esac
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
