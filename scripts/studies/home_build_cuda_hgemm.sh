#!/usr/bin/env bash
# Study (issue 36): Bruce-Lee-LY/cuda_hgemm's 18 FP16 kernels (simt_naive, 8 WMMA, 9 mma.sync), files
# unchanged, timed by the repository's own Tester and by `gemmwatch ci` with
# docs/examples/Bruce-Lee-LY-cuda_hgemm.gemmwatch.json (each kernel through its own host launcher:
# B column-major, C = A·B, FP16 sums), both built by the same nvcc with the repository's CMake Release
# flags for the GPU's own arch, both hot (the same buffers each launch, no L2 flush; gemmwatch in burst
# mode by default, the card idle before each short batch as the Tester's 100 ms pause leaves it), at 4096^3 (and
# the runner alone at 8192^3, simt_naive left out there: a scalar FP16 loop, seconds a launch).
#
# The runner: the repository's main.cu needs gflags, which the GPU machine has not; its stand-in
# scripts/studies/cuda_hgemm_runner.cu includes the repository's src/common/tester.h unchanged and
# calls every launcher through the Tester as main.cu does (1 warm-up, the mean of 10 back-to-back
# launches between two CUDA events, 100 ms sleep before each; HGEMM_WARMUP, HGEMM_PROFILE change the
# counts), the five launchers main.cu comments out included. It is compiled with the repository's
# other .cu files, each on its own as CMake's cuda_add_executable does, and linked with cuBLAS.
#
# Usage (GPU machine, project root, after `source .devkit/setup.sh`):
#   scripts/studies/home_build_cuda_hgemm.sh REPO_DIR OUT_DIR
# REPO_DIR: `git archive 0d26c2e | tar -x` of the repository (.devkit/repos/cuda_hgemm). Writes to
# OUT_DIR (8 files at most): preflight.log (the manifest loaded as `gemmwatch ci` loads it, the nvcc
# gemmwatch builds with, the prebuild of its compile cache), own_runner.log (the runner's build and its
# 4096^3 run), own_runner_8192.log, up.log, ci.log, results.json, and summary.md
# (scripts/studies/compare_home_build.py: the two side by side).
# Knobs: SIZES ("4096 8192": the runner's sizes; gemmwatch runs the first), RUNNER_NAMES (the Tester's
# names of the kernels the runner runs, e.g. "Mma-Async Wmma-Base"; default all), NVCC, GPU_ARCH (e.g. 90; read
# from the GPU otherwise), CUBLAS_LIB (the folder of libcublas.so*), PREBUILD=0 (gemmwatch compiles
# in the job instead), BUILD_ONLY=1 (build the runner and stop: a check on a machine without a GPU).
set -euo pipefail
REPO=$(cd "$1" && pwd); OUT=$2; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${SIZES:-"4096 8192"}; first=${SIZES%% *}
started=$(date +%s)
say() { echo "[$(( $(date +%s) - started )) s] $*"; }

work=$(mktemp -d)
cp -r "$REPO/." "$work/"
cp "$ROOT/docs/examples/Bruce-Lee-LY-cuda_hgemm.gemmwatch.json" "$work/gemmwatch.json"
runner=$(mktemp -d)  # the runner's build: a copy of its own, so the kernels folder holds the repository alone
cp -r "$REPO/." "$runner/"

# --- which nvcc ---------------------------------------------------------------------------------------
# The runner is built with the nvcc gemmwatch's worker builds with (worker/compile/nvcc.py), which must find
# cublas_v2.h in its toolkit (the repository's common.h includes it). Where that toolkit has none and
# the nvcc on PATH's has, gemmwatch is pointed at that one (GEMMWATCH_NVCC) and both use it.
python3 scripts/studies/folder_preflight.py "$work" > "$OUT/preflight.log" 2>&1 || true
gw_nvcc=$(sed -n 's/^GW_NVCC=//p' "$OUT/preflight.log"); gw_cublas=$(sed -n 's/^GW_CUBLAS=//p' "$OUT/preflight.log")
path_nvcc=$(command -v nvcc || true)
if [ -z "${NVCC:-}" ]; then
  NVCC=${gw_nvcc:-$path_nvcc}
  if [ "$gw_cublas" != 1 ] && [ -n "$path_nvcc" ] \
     && [ -f "$(dirname "$(dirname "$(readlink -f "$path_nvcc")")")/include/cublas_v2.h" ]; then
    NVCC=$path_nvcc; export GEMMWATCH_NVCC=$path_nvcc
    echo "GEMMWATCH_NVCC=$path_nvcc: its toolkit has cublas_v2.h" >> "$OUT/preflight.log"
  elif [ "$gw_cublas" != 1 ]; then
    echo "WARNING: no nvcc here has cublas_v2.h in its toolkit: gemmwatch's builds will fail on common.h" \
      >> "$OUT/preflight.log"
  fi
fi
echo "runner's nvcc: $NVCC" >> "$OUT/preflight.log"
cat "$OUT/preflight.log" >&2

# --- the repository's own Tester -----------------------------------------------------------------
cc=${GPU_ARCH:-$(python3 -c "import cupy; d = cupy.cuda.Device(0).compute_capability; print(d)")}
# CMakeLists.txt, Release: CUDA_NVCC_FLAGS "-std=c++11 -Xcompiler -fopenmp --expt-relaxed-constexpr
# -gencode arch=compute_XX,code=sm_XX --use_fast_math -O3", include dir src/common.
flags=(-std=c++11 -Xcompiler -fopenmp --expt-relaxed-constexpr -gencode "arch=compute_$cc,code=sm_$cc"
       --use_fast_math -O3 -Isrc/common)
toolkit=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
# cuBLAS's header, where the toolkit has none: the wheel's (nvidia-cublas), copied alone into a
# folder of its own (no other toolkit's headers in front of nvcc's own).
if [ ! -f "$toolkit/include/cublas_v2.h" ]; then
  inc=$(python3 -c "
import glob; hits = sorted(glob.glob('/usr/local/cuda/include/cublas_v2.h') + glob.glob('/usr/local/lib/python3*/*-packages/nvidia/*/include/cublas_v2.h') + glob.glob('/usr/lib/python3*/*-packages/nvidia/*/include/cublas_v2.h'))
print(hits[0].rsplit('/', 1)[0] if hits else '')")
  if [ -n "$inc" ]; then
    mkdir -p "$runner/.cublas_include" && cp "$inc"/cublas*.h "$runner/.cublas_include/" && flags+=(-I.cublas_include)
  fi
fi
libs=${CUBLAS_LIB:-$(python3 - "$toolkit" <<'PY'
import glob, os, sys
hits = [h for d in (f"{sys.argv[1]}/lib", f"{sys.argv[1]}/lib64", "/usr/local/cuda/lib64")
        for h in sorted(glob.glob(f"{d}/libcublas.so*"))]
hits += sorted(glob.glob("/usr/local/lib/python3*/*-packages/nvidia/*/lib/libcublas.so*"))
print(os.path.dirname(hits[0]) if hits else "")
PY
)}
lib=$(ls "${libs:-/nonexistent}" 2>/dev/null | grep -m1 '^libcublas\.so' || true)
if [ -n "$lib" ]; then link=(-L"$libs" -Xlinker -rpath="$libs" -l:"$lib"); else link=(-lcublas); fi
build() {
  cd "$runner" && cp "$ROOT/scripts/studies/cuda_hgemm_runner.cu" runner.cu || return 1
  local sources=(runner.cu src/cublas_tensor_op.cu src/simt_naive.cu src/wmma/*.cu src/mma/*.cu)  # all but main.cu
  echo "$NVCC ${flags[*]} -c <each of ${#sources[@]} files>; $("$NVCC" --version | grep -m1 release)"
  printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -I{} sh -c '"$0" "$@" -c {} -o {}.o' "$NVCC" "${flags[@]}" \
    && "$NVCC" "${flags[@]}" "${sources[@]/%/.o}" "${link[@]}" -o hgemm_runner
}
# gemmwatch's settings for this study, burst as the Tester times (GW_MODE: another mode); its compile cache filled now, beside the
# runner's build (CPU work both; the job then finds each library and cubin built, as a second job would).
export GEMMWATCH_DATA_DIR=$(mktemp -d) GEMMWATCH_TIMING_MODE=${GW_MODE:-burst} GEMMWATCH_COMPILE_TIMEOUT_S=300
prebuild_pid=
if [ "${PREBUILD:-1}" = 1 ] && [ "${BUILD_ONLY:-0}" != 1 ]; then
  python3 - "$work" "$cc" >> "$OUT/preflight.log" 2>&1 <<'PY' &
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from core.description.kernel import DeviceFigures, resolve
from core.description.kernel_folder import load_folder
from core.settings import Settings
from worker.compile import compiler, launcher_library
cc = sys.argv[2]  # "90", as the worker passes it
figures = DeviceFigures(sm_count=132, smem_per_sm=233472, smem_per_block=232448, regs_per_sm=65536,
                        max_threads_per_sm=2048, l2_bytes=52428800, compute_capability=f"{cc[:-1]}.{cc[-1]}")
cfg = Settings()
def both(desc):
    t = time.time()
    launch = resolve(desc, {}, figures, "job")
    try:
        launcher_library.build(launch, cc, cfg)
        compiler.compile_launch(launch, cc, cfg)
        return f"{desc.name}: built in {time.time() - t:.1f} s"
    except Exception as exc:  # the job meets the same error and reports it
        return f"{desc.name}: {type(exc).__name__}: {exc}"
with ThreadPoolExecutor(max(1, min(8, (os.cpu_count() or 2) // 2))) as pool:
    for line in pool.map(both, load_folder(Path(sys.argv[1]))):
        print(line, flush=True)
PY
  prebuild_pid=$!
fi

say "building the runner (sm_$cc)" >&2
runner_ok=1
if ! (build) > "$OUT/own_runner.log" 2>&1; then
  runner_ok=0
  if [ "$(sed 1d "$OUT/own_runner.log" | grep -ci 'openmp\|gomp')" -gt 0 ]; then
    echo "-- with -Xcompiler -fopenmp the build failed; again without it (nothing the runner compiles uses OpenMP)" \
      >> "$OUT/own_runner.log"
    kept=(); for f in "${flags[@]}"; do [ "$f" = -Xcompiler ] || [ "$f" = -fopenmp ] || kept+=("$f"); done
    flags=("${kept[@]}")
    (build) >> "$OUT/own_runner.log" 2>&1 && runner_ok=1
  fi
fi
if [ "$runner_ok" = 1 ]; then say "runner built" >&2; else say "own runner: build failed, see own_runner.log" >&2; fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit $((1 - runner_ok))

if [ -n "$prebuild_pid" ]; then
  wait "$prebuild_pid" || true
  say "gemmwatch's builds: $(grep -c ': built in' "$OUT/preflight.log") of 18 (preflight.log)" >&2
fi

# gemmwatch on this machine's embedded stack: started now (its start overlaps the runner's runs; its
# worker is idle until the job is posted).
python3 -m cli.main up --port 8765 > "$OUT/up.log" 2>&1 &
up_pid=$!

# --- the runner's runs -----------------------------------------------------------------------------
for s in $SIZES; do
  [ "$runner_ok" = 1 ] || break
  log="$OUT/own_runner_$s.log"; [ "$s" = "$first" ] && log="$OUT/own_runner.log"
  read -r -a names <<< "${RUNNER_NAMES:-}"; [ "$s" -gt 4096 ] && [ -z "${RUNNER_NAMES:-}" ] && names=(Wmma-Naive Wmma-Base Wmma-Padding Wmma-Async Wmma-Async-Pg2s
    Wmma-Async-Pg2s-Ps2r Wmma-Async-Stage2 Wmma-Async-Stage3 Mma-Naive Mma-Base Mma-Permuted Mma-Async
    Mma-Async-Pg2s Mma-Async-Pg2s-Ps2r Mma-Async-Stage2 Mma-Async-Stage3 Mma-Async-Stage4)  # no Simt-Naive
  say "runner at ${s}^3" >&2
  (cd "$runner" && timeout 300 ./hgemm_runner "$s" "$s" "$s" "${names[@]}") >> "$log" 2>&1 \
    || echo "own runner at $s failed: see $(basename "$log")" >&2
done

# --- gemmwatch ci ------------------------------------------------------------------------------------
for _ in $(seq 120); do curl -sf http://127.0.0.1:8765/healthz >/dev/null && break; sleep 1; done
say "gemmwatch ci at ${first}^3" >&2
# --local: the write token `gemmwatch up` left in the data folder (ci takes none from there otherwise).
python3 -m cli.main ci --server http://127.0.0.1:8765 --local --kernels-dir "$work" --size "$first" \
  --commit 0d26c2e --branch main --parents "" --no-confirm --timeout 500 > "$OUT/ci.log" 2>&1 || true
curl -s "http://127.0.0.1:8765/api/results?limit=100" > "$OUT/results.json"
kill "$up_pid" 2>/dev/null || true
python3 "$ROOT/scripts/studies/compare_home_build.py" --results "$OUT/results.json" \
  "$OUT"/own_runner*.log > "$OUT/summary.md" 2>&1 || true
cat "$OUT/summary.md"
say "done" >&2
