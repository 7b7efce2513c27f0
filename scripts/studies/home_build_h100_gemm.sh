#!/usr/bin/env bash
# HamzaElshafie/h100_gemm@3788686, files unchanged, on a Hopper GPU: (i) its own runner (src/main.cu,
# built with its CMake flags) for the Hopper kernels at its sizes 512..8192, and (ii) the same kernels
# through gemmwatch (`gemmwatch run --kernels-dir`, the worker's own runner, a confined process per
# case) in burst and in cold mode, with the gemmwatch.json beside the repository. Optionally (NCU=1,
# default) ncu's kernel-only duration at 4096^3, to size the cudaDeviceSynchronize each launcher call
# makes (the runner's and gemmwatch's per-call figures both contain it; ncu's does not).
#
# Usage (GPU machine, gemmwatch's project root, the repository at .devkit/repos/h100_gemm):
#   git clone https://github.com/HamzaElshafie/h100_gemm .devkit/repos/h100_gemm && git -C .devkit/repos/h100_gemm checkout 3788686
#   OUT=/some/dir bash scripts/studies/home_build_h100_gemm.sh      (or: bash scripts/studies/home_build_h100_gemm.sh OUT_DIR)
# The manifest is docs/examples/HamzaElshafie-h100_gemm.gemmwatch.json, copied beside the repository's files.
# Knobs: REPO (default .devkit/repos/h100_gemm), GW_SIZES ("4096"; "4096 8192" adds ~1.5 min), GW_MODES ("burst cold"),
#   DIRECT=0 (leave out the *_kernel variants: the same three kernels launched by gemmwatch itself, no launcher),
#   NCU=0 (skip ncu),
#   RUNNER=0 (skip the repository's runner), NVCC (the runner's nvcc; default gemmwatch's),
#   CUBLAS_INCLUDE (a folder with cublas_v2.h for the runner's own build, where none is found), SETUP=0 (do not source .devkit/setup.sh: gemmwatch's deps already importable by python3).
# Writes under OUT: setup.log preflight.log runner_build.log runner_<impl>_<id>_<dtype>.log
#   gw_<mode>.log gw_<mode>.json ncu_<id>.log summary.txt
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-${1:-/tmp/h100_out}}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
REPO=${REPO:-$ROOT/.devkit/repos/h100_gemm}
GW_SIZES=${GW_SIZES:-"4096"}; GW_MODES=${GW_MODES:-"burst cold"}
S=$OUT/summary.txt; : > "$S"
started=$(date +%s)
say() { echo "[$(( $(date +%s) - started )) s] $*" | tee -a "$S" >&2; }

[ -f "$REPO/src/kernels/hopper/launcher.cu" ] || { say "no repository at $REPO"; exit 1; }
if [ "${SETUP:-1}" = 1 ] && [ -f .devkit/setup.sh ]; then source .devkit/setup.sh > "$OUT/setup.log" 2>&1 || say "setup.sh failed (setup.log)"; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader >> "$S" 2>&1

VARIANTS="h100_wgmma_tma,h100_wgmma_tma_shapes,h100_pc_pipeline"
[ "${DIRECT:-1}" = 1 ] && VARIANTS+=",h100_wgmma_tma_kernel,h100_wgmma_tma_shapes_kernel,h100_pc_pipeline_kernel"

# --- the folder as a user has it: the repository's files, gemmwatch.json beside them ---------------
work=$(mktemp -d /tmp/h100_gw.XXXX)
mkdir -p "$work/repo"; cp -r "$REPO/." "$work/repo/"
cp "$ROOT/docs/examples/HamzaElshafie-h100_gemm.gemmwatch.json" "$work/repo/gemmwatch.json"  # the manifest a user writes

# --- which nvcc gemmwatch builds with, and whether its toolkit has cuBLAS's headers --------------
# Both launcher units include <cublas_v2.h>; the nvidia-cuda-nvcc wheel has no cuBLAS headers.
export GEMMWATCH_DATA_DIR=$(mktemp -d /tmp/h100_gwdata.XXXX) GEMMWATCH_COMPILE_TIMEOUT_S=300
export GEMMWATCH_KERNEL_CACHE_DIR=$GEMMWATCH_DATA_DIR/kernel-cache
python3 scripts/studies/folder_preflight.py "$work/repo" > "$OUT/preflight.log" 2>&1
gw_nvcc=$(sed -n 's/^GW_NVCC=//p' "$OUT/preflight.log"); gw_cublas=$(sed -n 's/^GW_CUBLAS=//p' "$OUT/preflight.log")
hdr=${CUBLAS_INCLUDE:-}; [ -n "$hdr" ] || hdr=$(python3 -c "
import glob; h = sorted(glob.glob('/usr/local/cuda*/include/cublas_v2.h') + glob.glob('/usr/local/lib/python3*/*-packages/nvidia/*/include/cublas_v2.h') + glob.glob('/usr/lib/python3*/*-packages/nvidia/*/include/cublas_v2.h') + glob.glob('/tmp/site/nvidia/*/include/cublas_v2.h'))
print(h[0].rsplit('/', 1)[0] if h else '')")
cat "$OUT/preflight.log" >> "$S"

# gemmwatch's compile cache filled now, beside the runner's build (CPU work both).
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
python3 - "$work/repo" "$cc" "$VARIANTS" > "$OUT/prebuild.log" 2>&1 <<'PY' &
import sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from core.description.kernel import DeviceFigures, resolve
from core.description.kernel_folder import load_folder
from core.settings import Settings
from worker.compile import compiler, launcher_library
cc, names = sys.argv[2], set(sys.argv[3].split(","))
fig = DeviceFigures(sm_count=132, smem_per_sm=233472, smem_per_block=232448, regs_per_sm=65536,
                    max_threads_per_sm=2048, l2_bytes=52428800, compute_capability=f"{cc[:-1]}.{cc[-1]}")
cfg = Settings()
def both(d):
    t = time.time()
    try:
        launch = resolve(d, {}, fig, "job")
        if launch.launcher:
            launcher_library.build(launch, cc, cfg)
        if launch.entry is not None:
            compiler.compile_launch(launch, cc, cfg)
        return f"{d.name}: built in {time.time() - t:.1f} s"
    except Exception as exc:
        return f"{d.name}: {type(exc).__name__}: {exc}"
with ThreadPoolExecutor(4) as pool:
    for line in pool.map(both, [d for d in load_folder(Path(sys.argv[1])) if d.name in names]):
        print(line, flush=True)
PY
prebuild_pid=$!

# --- (i) the repository's own runner -----------------------------------------------------------------
runner_ok=0
if [ "${RUNNER:-1}" = 1 ]; then
  rb=$(mktemp -d /tmp/h100_runner.XXXX); cp -r "$REPO/." "$rb/"
  NVCC=${NVCC:-${GEMMWATCH_NVCC:-$gw_nvcc}}; NVCC=${NVCC:-nvcc}
  {
    # CMakeLists.txt sets CMAKE_CUDA_COMPILER to /root/miniconda3/envs/h100gemm_env/bin/nvcc after project():
    # the generated rules call that path, so CMake builds nowhere but the author's conda env. Tried first anyway.
    echo "## cmake"; (cd "$rb" && cmake -B build -DCMAKE_CUDA_COMPILER="$NVCC" > cmake.log 2>&1 && cmake --build build -j 8 >> cmake.log 2>&1) \
      && cp "$rb/build/gemm" "$rb/gemm"; tail -5 "$rb/cmake.log"
    if [ ! -x "$rb/gemm" ]; then
      # CMake's own compile line for each unit (build/CMakeFiles/gemm.dir/flags.make), then its link.
      echo "## nvcc with CMake's CUDA_FLAGS: -O3 -Xcompiler -fPIC --ptxas-options=-v --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -std=c++17"
      tk=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
      libdir=$(python3 - "$tk" <<'PY'
import glob, os, sys
hits = [h for d in (f"{sys.argv[1]}/lib", f"{sys.argv[1]}/lib64", "/usr/local/cuda/lib64") for h in sorted(glob.glob(f"{d}/libcublas.so*"))]
hits += sorted(glob.glob("/usr/local/lib/python3*/*-packages/nvidia/*/lib/libcublas.so*")) + sorted(glob.glob("/tmp/site/nvidia/*/lib/libcublas.so*"))
print(os.path.dirname(hits[0]) if hits else "")
PY
)
      inc=""
      if [ ! -f "$tk/include/cublas_v2.h" ] && [ -n "${hdr:-}" ]; then
        mkdir -p "$rb/.cublas_include" && cp "$hdr"/cublas*.h "$rb/.cublas_include/" && inc=-I.cublas_include
      fi
      cub=$(ls "$libdir" 2>/dev/null | grep -m1 '^libcublas\.so'); lt=$(ls "$libdir" 2>/dev/null | grep -m1 '^libcublasLt\.so')
      # the driver's library by its full path (a container often has libcuda.so.1 and no libcuda.so)
      cuda=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}'); cuda=${cuda:-$(ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null | head -1)}; if [ -n "$cuda" ]; then cuda="-L$(dirname "$cuda") -l:libcuda.so.1"; else cuda=-lcuda; fi
      flags=(-O3 -Xcompiler -fPIC --ptxas-options=-v "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" -std=c++17 -Isrc $inc)
      (cd "$rb" && for u in src/main.cu src/runner.cu src/kernels/general/launcher.cu src/kernels/hopper/launcher.cu; do
          "$NVCC" "${flags[@]}" -c "$u" -o "${u//\//_}.o" > "${u//\//_}.build.log" 2>&1 &
        done; wait
        grep -h "error" ./*.build.log | head -20
        "$NVCC" -O3 ./*.o ${libdir:+-L$libdir -Xlinker -rpath=$libdir} -l:"${cub:-libcublas.so}" -l:"${lt:-libcublasLt.so}" \
          $cuda -o gemm)
      grep -h "Used" "$rb"/*hopper*.build.log | head -12
    fi
  } > "$OUT/runner_build.log" 2>&1
  [ -x "$rb/gemm" ] && runner_ok=1
  say "runner built: $runner_ok (runner_build.log)"
  if [ "$runner_ok" = 1 ]; then
    runs=("hopper 0 bf16" "hopper 1 bf16" "hopper 2 bf16")
    for r in "${runs[@]}"; do
      (cd "$rb" && timeout 180 ./gemm $r) > "$OUT/runner_${r// /_}.log" 2>&1; echo "exit $?" >> "$OUT/runner_${r// /_}.log"
    done
    say "runner runs done"
    if [ "${NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
      # 51 launches a size (1 check + 50 timed) at 512, 1024, 2048, then the 4096 check: skip 154.
      for id in 0 1 2; do
        name=$(case $id in 0) echo gemm_bf16_wgmma_tma;; 1) echo gemm_bf16_wgmma_tma_shapes;; 2) echo gemm_bf16_pc_pipeline;; esac)
        (cd "$rb" && timeout 150 ncu --clock-control none --kernel-name "regex:^${name}" --launch-skip 154 \
          --launch-count 5 --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second ./gemm hopper $id bf16) \
          > "$OUT/ncu_$id.log" 2>&1
      done
      say "ncu done"
    fi
  fi
fi
wait "$prebuild_pid" 2>/dev/null; say "gemmwatch prebuild: $(grep -c 'built in' "$OUT/prebuild.log") built ($(grep -vc 'built in' "$OUT/prebuild.log") other lines: prebuild.log)"

# --- (ii) gemmwatch, burst and cold ------------------------------------------------------------------
sizes=(); for s in $GW_SIZES; do sizes+=(--size "$s"); done
for mode in $GW_MODES; do
  timeout 420 python3 -m cli.main run --kernels-dir "$work/repo" --timing "$mode" --variants "$VARIANTS" "${sizes[@]}" \
    --save "$OUT/gw_$mode.json" > "$OUT/gw_$mode.log" 2>&1
  say "gemmwatch $mode: exit $? (gw_$mode.log)"
done

# --- summary --------------------------------------------------------------------------------------------
python3 - "$OUT" >> "$S" 2>&1 <<'PY'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
names = {("hopper", "0"): "h100_wgmma_tma", ("hopper", "1"): "h100_wgmma_tma_shapes", ("hopper", "2"): "h100_pc_pipeline",
         ("general", "6", "bf16"): "h100_general_warptiling_bf16", ("general", "5", "bf16"): "h100_general_vectorised_bf16",
         ("general", "6", "fp32"): "h100_general_warptiling_fp32"}
runner = {}  # (variant, size) -> (TFLOPS, cuBLAS TFLOPS, avg s per call)
for log in sorted(out.glob("runner_hopper_*.log")):
    impl, kid, dtype = log.stem.split("_")[1:4]
    var = names.get((impl, kid)) if impl == "hopper" else names.get((impl, kid, dtype))
    size = None
    text = log.read_text(errors="replace")
    for line in text.splitlines():
        if m := re.match(r"Dimensions \(M = N = K\) = (\d+)", line):
            size = int(m.group(1))
        elif (m := re.search(r"Average elapsed time: ([\d.]+) s, TFLOPS: ([\d.]+), cuBLAS TFLOPS: ([\d.]+)", line)) and size:
            runner[(var, size)] = (float(m.group(2)), float(m.group(3)), float(m.group(1)))
    if "do not match" in text or "Mismatch" in text:
        print(f"{log.name}: its own check FAILED: {[l for l in text.splitlines() if 'Mismatch' in l][:1]}")
ncu = {}
scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "ns": 1e-6, "us": 1e-3, "ms": 1.0}
for id_ in "012":
    f = out / f"ncu_{id_}.log"
    if f.is_file():
        vals = re.findall(r"gpu__time_duration\.sum\s+(\w+)\s+([\d.,]+)", f.read_text(errors="replace"))
        ms = [float(v.replace(",", "")) * scale.get(u, float("nan")) for u, v in vals]
        if ms:
            ncu[names[("hopper", id_)]] = sorted(ms)[len(ms) // 2]
gw = {}
for mode_file in sorted(out.glob("gw_*.json")):
    for r in json.loads(mode_file.read_text()).get("results", []):
        gw[(r["variant"], r["m"], r.get("mode"))] = r
modes = sorted({k[2] for k in gw})
print("\nTFLOPS (runner: 50 calls between two events, each call ending in the launcher's cudaDeviceSynchronize; "
      "its FLOP count adds 3MN)")
head = "| kernel | size | runner | runner cuBLAS | runner % | " + " | ".join(
    f"gw {m} | gw {m} cuBLAS | gw {m} % | gw {m}/runner" for m in modes) + " |"
print(head); print("|" + "---|" * (head.count("|") - 1))
for var, size in sorted({(k[0], k[1]) for k in gw} | set(runner)):
    rt = runner.get((var, size)) or runner.get((var.removesuffix("_kernel"), size))  # *_kernel: its launcher's runner figure
    cells = [var, str(size)] + ([f"{rt[0]:.1f}", f"{rt[1]:.1f}", f"{100 * rt[0] / rt[1]:.1f}"] if rt else ["", "", ""])
    for m in modes:
        r = gw.get((var, size, m))
        if r is None:
            cells += ["", "", "", ""]
        elif not r.get("verified"):
            cells += [f"{r.get('status')}: {(r.get('error') or '')[:120]}", "", "", ""]
        else:
            t = (r.get("gflops") or 0) / 1000
            cells += [f"{t:.1f}", f"{(r.get('cublas_gflops') or 0) / 1000:.1f}", f"{r.get('pct_of_cublas') or 0:.1f}",
                      f"{t / rt[0]:.3f}" if rt else ""]
    print("| " + " | ".join(cells) + " |")
print("\nper call at 4096^3 (ms): runner's mean, gemmwatch's medians, ncu's kernel-only duration (the difference: "
      "host launch + cudaFuncSetAttribute + the launcher's cudaDeviceSynchronize)")
for var in sorted({k[0] for k in gw} | {k[0] for k in runner}):
    rt = runner.get((var, 4096))
    parts = [f"runner {rt[2] * 1e3:.4f}" if rt else "runner -"]
    for m in modes:
        r = gw.get((var, 4096, m))
        if r and r.get("median_ms"):
            parts.append(f"gw {m} {r['median_ms']:.4f} (cuBLAS {r.get('cublas_median_ms') or 0:.4f})")
    if var in ncu:
        parts.append(f"ncu kernel {ncu[var]:.4f}")
    print(f"  {var}: " + ", ".join(parts))
print("\ngemmwatch notes per case:")
for (var, size, m), r in sorted(gw.items()):
    env = r.get("env", {})
    print(f"  {var} {size} {m}: status={r.get('status')} rel_error={r.get('rel_error')} n={r.get('n_samples')} "
          f"form={r.get('form')} c_convention={env.get('c_convention')!r} "
          f"launcher={str((env.get('launcher') or {}).get('what_happened'))[:80]!r} "
          f"cublas_call={str(env.get('cublas_call'))[:80]!r} l2_flush={env.get('l2_flush')} "
          f"hold={env.get('stream_hold')}")
PY
say "done"
