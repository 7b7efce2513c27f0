"""A repository's own runner beside gemmwatch, on one GPU (issue 48's must-show 1, docs/BENCHMARKS.md).

The repository's runner is built with its Makefile's command line, as the manifest's flags spell it,
and run as it is; then the same folder, its files unchanged and the manifest beside them, goes
through `gemmwatch ci` on the whole stack (scripts/studies/gpu_kernel_folders.py): once in the
manifest's mode (burst, the mode of a runner's back-to-back loop) and once cold (gemmwatch's
default). The table: each kernel's TFLOPS by its runner and by gemmwatch in each mode, and their ratio.

- fast.cu (`pranjalssh/fast.cu`): `matmul.cu` checks every kernel against cuBLAS at 8192^3 and times
  8 back-to-back calls after a 5 s rest, printing "performance: (x) TFLOPS" per kernel.
- cuda-hgemm-mma (`yencal/cuda-hgemm-mma`): `src/main.cu` autotunes each kernel family at each size
  (5 warm-up calls, then 10 back-to-back calls between two events, per template instance, printed
  as "<instance> <ms> ms <TFLOPS> TFLOPS"); the instances the manifest names are read from its
  N = 8192 block, and the runner is stopped once it starts 16384.
- omkarnabar/triton-gemm (Triton, issue 50): `benchmarks/bench_gemm.py` times its `matmul(A, B)`
  wrapper (10 warm-up calls, its autotune among them, then 50 back-to-back calls between two
  events, over randn inputs) at 512..4096 and prints "Triton: <ms> ms | <TFLOPS> TFLOPS" and its
  torch.matmul's "cuBLAS: ..." per size; the --size block is read.
- matmul-playground (`alexarmbr/matmul-playground`): `runner <kernel> <iterations> M N K` times one kernel
  per process, each call alone between two events with 100 ms of sleep after it, and prints the mean
  as "<g> GFLOPS/sec for MxNxK" ("cuBLAS: ..." for kernel 99); built as its CMake file builds it (the
  kernels' options, `--keep` left out, and the GPU's own architecture), 50 iterations as its
  profile.sh runs them, without profile.sh's clock locks (gemmwatch never sets clocks).
- yf225/simplegemm: `main.cu` checks run_pingpong against cuBLAS at 8448x9216x640, then, with its
  `benchmark` switch on (it ships off), times 1000 back-to-back calls between two events and prints
  "TFLOPS: <t>"; three runs, the median kept (`sustained`, the manifest's mode, is that loop's).
- ThunderKittens (`HazyResearch/ThunderKittens`): `make` in each kernel's folder (kernels/common.mk's
  nvcc line; `LEVEL=xx` for the tutorial's levels), then its main: bf16_h100's three times (4096^3,
  10 back-to-back calls over buffers three times L2 after a rest and 5 warm-ups), each level's once
  (launch.cu: 4096^3, timed on the host's clock), "Achieved performance: <t> TFLOPs".
- cute-gemm-101 (`HuyNguyen-hust/cute-gemm-101`): its two profilers, built as its CMake file builds them,
  each checking its kernels against cuBLAS at 4096^3 and timing one call after 1-2 warm-ups, printing
  "Effective TFLOPs: <t> tflops" for its cuBLAS and for the kernel; three runs, the median kept. One
  line of its device-information printout is rewritten for CUDA 13 (see the function).
- gemm-zoo (`AD2605/gemm-zoo`): each nvidia/bench/bench_*.cu builds its kernel functor once per size, checks
  one call against cuBLASLt and times 50 calls, each alone between two events, printing "GFLOPS: <g>" per
  size; built as its CMake file builds them, three runs each, the median kept (see the function).
- triton-lang/kernels: its `kernels/matmul.py` wrapper `matmul(a, b)` in FP16, its autotune (pruned by its
  perf model) run once, then timed by `triton.testing.do_bench` (median), with torch.matmul beside it.
- alfin3/triton-kernel-opt: each kernel's call as the manifest's `wrapper` writes it, timed as its
  benchmark_matmul.py times it (do_bench, warmup 100, rep 100, the median), with torch.matmul beside it.
- hands-on-gemm (`bjmsong/hands-on-gemm`): every `.cu` a main of its own, built with plain nvcc and run at
  SIZE^3 once (see the function).
- simpleGEMM (`andylolu2/simpleGEMM`): `main.cu`, built as its CMake file builds it, `main S S S 100`
  (each call alone after an L2-sized memset, cold), three runs (see the function).
- CUTLASS's example 48 (Hopper warp-specialised TF32, issue 50): built with the manifest's flags
  against the same CUTLASS headers the worker pins, run as
  `48_hopper_warp_specialized_gemm --m=S --n=S --k=S --iterations=1000` (one check, then 1000
  back-to-back initialize+run between two events), three times; "GFLOPS: <g>" each.

Usage (GPU machine, project root, Redis on 127.0.0.1:6379):
  python3 scripts/studies/home_runner_compare.py {fastcu,hgemm_mma,matmul_playground,omkarnabar,cutlass48,simplegemm,thunderkittens,cutegemm101,gemmzoo,
  tritonkernels,alfin3,handsongemm,andylolu2} REPO OUT
      [--steps check,runner,burst,cold] [--only a,b] [--size 8192 | --shape 1024x1024x16384]
(check: the repository's own correctness check where its runner leaves it off, matmul_playground only)
(REPO for cutlass48: CUTLASS's examples/ folder, or the nvidia-cutlass wheel's cutlass_library/source/examples)
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
SIZE = 8192
SHAPE = None  # --shape MxNxK: the gemmwatch steps' size, and the runner's where it takes one (tritonkernels)
CHECK_SIZE = 512  # the repository's own CPU check: M, N, K multiples of every kernel's tile


def _build(repo: Path, out: Path, flags: list[str], unit: str, output: bool = True) -> str:
    nvcc = os.environ.get("NVCC", "nvcc")
    started = time.monotonic()
    subprocess.run([nvcc, *flags, unit, *(["-o", str(out / "runner")] if output else [])], cwd=repo, check=True)
    return f"# built in {time.monotonic() - started:.0f} s with: {nvcc} {' '.join(flags)} {unit}\n"


def sm90a_alone(flags: list[str]) -> list[str]:
    """A Makefile's -arch=sm_90a makes compute_90 PTX beside sm_90a's code with nvcc 13, where wgmma
    is no instruction ("'wgmma.fence' not supported on .target 'sm_90'"): a runner is built for
    sm_90a alone, as fast.cu's own logs.txt builds it and as gemmwatch builds a launcher's library."""
    return ["-gencode=arch=compute_90a,code=sm_90a" if f == "-arch=sm_90a" else f for f in flags]


def fastcu_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per variant (its cuBLAS as "cublas")."""
    header = _build(repo, out, sm90a_alone(manifest["kernels"][0]["flags"]), "matmul.cu")
    done = subprocess.run([str(out / "runner")], cwd=repo, capture_output=True, text=True, timeout=400)
    (out / "runner.txt").write_text(header + done.stdout + done.stderr)
    figures, kernel = {}, None
    for line in done.stdout.splitlines():
        if m := re.match(r"KERNEL (\d+)", line):
            kernel = int(m.group(1))
        elif (m := re.search(r"performance: \(\s*([\d.]+)\) TFLOPS", line)) and kernel is not None:
            figures["cublas" if kernel == 0 else f"fastcu_matmul_{kernel}"] = float(m.group(1))
    return figures


_HGEMM_FAMILIES = {"01a_MMADirect": "mma_direct", "01b_MMALdmatrix": "mma_ldmatrix", "02_MMASwizzle": "mma_swizzle",
                   "03_MMAMultistage": "mma_multistage", "04_MMAPipelining": "mma_pipelining",
                   "05_MMAFinal": "mma_final"}


def hgemm_mma_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per template instance at N = 8192, named as the manifest names them."""
    header = _build(repo, out, manifest["kernels"][0]["flags"], "src/main.cu")
    lines, figures, family, size = [], {}, None, None
    with subprocess.Popen([str(out / "runner")], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as runner:
        for line in runner.stdout:
            lines.append(line)
            if m := re.match(r"N = (\d+)", line):
                size = int(m.group(1))
                if size > SIZE:
                    runner.kill()
                    break
            elif m := re.match(r"Autotuning (\w+) for N=(\d+)", line):
                family = _HGEMM_FAMILIES.get(m.group(1))
            elif size == SIZE and (m := re.match(r"\s+(\S+)\s+[\d.]+ ms\s+([\d.]+) TFLOPS", line)) and family:
                figures[f"{family}_{m.group(1).lower()}"] = float(m.group(2))
            elif size == SIZE and (m := re.match(r"00_cuBLAS: [\d.e-]+ ms, ([\d.]+) TFLOPS", line)):
                figures["cublas"] = float(m.group(1))
    (out / "runner.txt").write_text(header + "".join(lines))
    return figures


def matmul_playground_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """Each kernel's and its cuBLAS's TFLOPS at SIZE, one runner process each."""
    sys.path.insert(0, str(ROOT))
    from core.description.compile_flags import parse

    # The flags as the worker builds with them (--keep dropped, "-Xptxas -dlcm=cg" two words), the
    # target replaced by the GPU's own below.
    flags = list(parse(manifest["kernels"][0]["flags"]).nvcc)
    units = [f"src/kernel{i}.cu" for i in range(1, 7)] + ["src/cublas_benchmark.cu", "-lcublas"]
    header = _build(repo, out, ["-std=c++17", "-arch=native", *flags, *units], "src/main.cu")
    figures, lines = {}, [header]
    for kernel in [*range(1, 7), 99]:
        done = subprocess.run([str(out / "runner"), str(kernel), "50", str(SIZE), str(SIZE), str(SIZE)], cwd=repo,
                              capture_output=True, text=True, timeout=300)
        lines.append(f"$ runner {kernel} 50 {SIZE} {SIZE} {SIZE}\n{done.stdout}{done.stderr}")
        if m := re.search(r"([\d.e+]+) GFLOPS/sec for", done.stdout):
            figures["cublas" if kernel == 99 else f"matmul_playground_{kernel}"] = float(m.group(1)) / 1000
    (out / "runner.txt").write_text("".join(lines))
    return figures


def matmul_playground_check(repo: Path, out: Path, manifest: dict) -> dict[str, bool]:
    """Whether each kernel passes the repository's own check: main.cu's `sgemm_verify` (a CPU GEMM in half,
    every element within 0.5), which its `bool check_on_cpu = false;` leaves off. A scratch copy of the
    repository with that one word turned on is built as the runner is and run once per kernel at CHECK_SIZE
    (the CPU reference is too slow at the timed size); the folder gemmwatch measures is not touched."""
    scratch = out / "checked-repo"
    subprocess.run(["rm", "-rf", str(scratch)], check=True)
    subprocess.run(["cp", "-r", str(repo), str(scratch)], check=True)
    main_cu = scratch / "src" / "main.cu"
    text = main_cu.read_text()
    if "bool check_on_cpu = false;" not in text:
        raise SystemExit("main.cu no longer reads `bool check_on_cpu = false;`: the check step needs a look")
    main_cu.write_text(text.replace("bool check_on_cpu = false;", "bool check_on_cpu = true;"))
    sys.path.insert(0, str(ROOT))
    from core.description.compile_flags import parse

    flags = list(parse(manifest["kernels"][0]["flags"]).nvcc)
    units = [f"src/kernel{i}.cu" for i in range(1, 7)] + ["src/cublas_benchmark.cu", "-lcublas"]
    checked = out / "checked-runner"
    header = _build(scratch, out, ["-std=c++17", "-arch=native", *flags, *units, "-o", str(checked)], "src/main.cu",
                    output=False)
    passed, lines = {}, [header]
    for kernel in range(1, 7):
        size = str(CHECK_SIZE)
        done = subprocess.run([str(checked), str(kernel), "1", size, size, size], cwd=scratch,
                              capture_output=True, text=True, timeout=600)
        lines.append(f"$ runner {kernel} 1 {size} {size} {size} (check on)\nexit {done.returncode}\n"
                     f"{done.stdout}{done.stderr}")
        passed[f"matmul_playground_{kernel}"] = done.returncode == 0 and "Mismatch" not in done.stdout
    (out / "check.txt").write_text("".join(lines))
    return passed


def omkarnabar_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """Its Triton kernel's and its torch.matmul's TFLOPS at SIZE, as its benchmark prints them."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "benchmarks/bench_gemm.py"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    (out / "runner.txt").write_text(done.stdout + done.stderr)
    figures, size = {}, None
    for line in done.stdout.splitlines():
        if m := re.match(r"M=N=K=(\d+)", line):
            size = int(m.group(1))
        elif size == SIZE and (m := re.match(r"\s+(Triton|cuBLAS): [\d.]+ ms \| ([\d.]+) TFLOPS", line)):
            figures[manifest["kernels"][0]["name"] if m.group(1) == "Triton" else "cublas"] = float(m.group(2))
    return figures


# triton-lang/kernels has no benchmark of its matmul: its own wrapper timed by Triton's own tool, as its
# users time it. Its package's __init__ imports every kernel; where one of those fails on this Triton,
# the package is made without it (said in the output) and kernels/matmul.py is imported as it is.
TRITON_KERNELS_RUNNER = """
import importlib, sys, types, torch, triton
try:
    matmul_module = importlib.import_module("kernels.matmul")
except Exception as exc:
    print("kernels/__init__.py failed here:", repr(exc))
    for name in [n for n in sys.modules if n == "kernels" or n.startswith("kernels.")]:
        del sys.modules[name]
    package = types.ModuleType("kernels")
    package.__path__ = ["kernels"]
    sys.modules["kernels"] = package
    matmul_module = importlib.import_module("kernels.matmul")
M, N, K = map(int, sys.argv[1:4])
for dtype in (torch.float16,):
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = matmul_module.matmul(a, b)  # its autotune, pruned by its perf model to top_k, runs here
    print("max |c - a@b|:", (c.float() - (a.float() @ b.float())).abs().max().item())
    print("chosen:", matmul_module._kernel.best_config)
    for label, fn in (("kernel", lambda: matmul_module.matmul(a, b)), ("cuBLAS", lambda: torch.matmul(a, b))):
        ms = triton.testing.do_bench(fn, warmup=100, rep=2000, return_mode="median")
        print(f"{label} {dtype}: {ms:.4f} ms | {2 * M * N * K / ms / 1e9:.1f} TFLOPS")
"""


def triton_kernels_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """Its matmul's and torch.matmul's TFLOPS at SIZE cubed (or --shape) by triton.testing.do_bench (median; an
    L2 flush before each call, as gemmwatch's cold mode)."""
    dims = (SHAPE or f"{SIZE}x{SIZE}x{SIZE}").split("x")
    done = subprocess.run([sys.executable, "-c", TRITON_KERNELS_RUNNER, *dims], cwd=repo, capture_output=True,
                          text=True, timeout=900)
    (out / "runner.txt").write_text(done.stdout + done.stderr)
    figures = {}
    for line in done.stdout.splitlines():
        if m := re.match(r"(kernel|cuBLAS) torch.float16: [\d.]+ ms \| ([\d.]+) TFLOPS", line):
            figures[manifest["kernels"][0]["name"] if m.group(1) == "kernel" else "cublas"] = float(m.group(2))
    return figures


# alfin3/triton-kernel-opt's benchmark_matmul.py needs `fire` and writes plots; this is its timing alone:
# fp32 randn cast to FP16, each call as its sweep makes it, triton.testing.do_bench(warmup=100, rep=100) and
# the median of its quantiles [0.5, 0.2, 0.8]. Each kernel's call is the manifest's `wrapper`, made here as
# Python at home (the repository is trusted here; in gemmwatch it is never evaluated, see wrapper_call.py).
ALFIN3_RUNNER = """
import json, sys, torch, triton
import triton.language as tl
import kernels  # its __init__ rebinds kernels.matmul to the class of that name: the file is the module's
matmul_file = sys.modules["kernels.matmul"]
S, calls = int(sys.argv[1]), json.loads(sys.argv[2])
torch.manual_seed(0)
a = torch.randn((S, S), device="cuda", dtype=torch.float32).to(torch.float16)
b = torch.randn((S, S), device="cuda", dtype=torch.float32).to(torch.float16)
scope = {**vars(matmul_file), "torch": torch, "tl": tl, "a": a, "b": b}
for name, call in [*calls.items(), ("cuBLAS", "torch.matmul(a, b)")]:
    fn = lambda: eval(call, scope)
    c = fn()
    print(name, "max |c - a@b|:", (c.float() - (a.float() @ b.float())).abs().max().item())
    ms = triton.testing.do_bench(fn, warmup=100, rep=100, quantiles=[0.5, 0.2, 0.8])[0]
    print(f"{name}: {ms:.4f} ms | {2 * S**3 / ms / 1e9:.1f} TFLOPS")
"""


def alfin3_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """Each kernel's TFLOPS at SIZE by triton.testing.do_bench as its benchmark_matmul.py times it, and
    torch.matmul's as its "cuBLAS" line."""
    calls = {k["name"]: k["wrapper"] for k in manifest["kernels"]}
    done = subprocess.run([sys.executable, "-c", ALFIN3_RUNNER, str(SIZE), json.dumps(calls)], cwd=repo,
                          capture_output=True, text=True, timeout=900)
    (out / "runner.txt").write_text(done.stdout + done.stderr)
    return {("cublas" if m.group(1) == "cuBLAS" else m.group(1)): float(m.group(2))
            for m in re.finditer(r"^(\w+): [\d.]+ ms \| ([\d.]+) TFLOPS", done.stdout, re.M)}


def cutlass48_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """Example 48's TFLOPS at SIZE: the median of three runs, each of its own 1000-iteration loop."""
    sys.path.insert(0, str(ROOT))
    from core.settings import settings
    from worker.compile.header_libraries import cutlass

    kernel = manifest["kernels"][0]
    flags = sm90a_alone(kernel["flags"])
    includes = [f"-I{d}" for d in cutlass(settings.cutlass_dir).include_dirs] + ["-Icommon"]
    header = _build(repo, out, [*flags, *includes], kernel["source"])
    runs, lines = [], [header]
    for _ in range(3):
        done = subprocess.run([str(out / "runner"), f"--m={SIZE}", f"--n={SIZE}", f"--k={SIZE}", "--iterations=1000"],
                              cwd=repo, capture_output=True, text=True, timeout=600)
        lines.append(done.stdout + done.stderr)
        runs += [float(m.group(1)) / 1000 for m in re.finditer(r"GFLOPS: ([\d.]+)", done.stdout)]
    (out / "runner.txt").write_text("".join(lines))
    return {kernel["name"]: sorted(runs)[len(runs) // 2], f"{kernel['name']} runs": runs} if runs else {}


def simplegemm_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """run_pingpong's TFLOPS at its main.cu's own shape (SHAPES), the median of three runs: main.cu
    checks it against cuBLAS, then times 1000 back-to-back calls between two events once its
    `auto benchmark = false;` is turned on, as a user timing it at home turns it on (a copy of main.cu
    in OUT, built against the repository's folder; the folder gemmwatch measures is not touched)."""
    text = (repo / "main.cu").read_text()
    if "auto benchmark = false;" not in text:
        raise SystemExit("main.cu no longer reads `auto benchmark = false;`: the runner step needs a look")
    timed = out / "main_timed.cu"
    timed.write_text(text.replace("auto benchmark = false;", "auto benchmark = true;"))
    header = _build(repo, out, [*sm90a_alone(manifest["flags"]), f"-I{repo}"], str(timed))
    runs, lines = [], [header]
    for _ in range(3):
        done = subprocess.run([str(out / "runner")], cwd=repo, capture_output=True, text=True, timeout=300)
        lines.append(f"exit {done.returncode}\n" + "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                                                            if "TFLOPS" in line or "Failed" in line) + "\n")
        runs += [float(m.group(1)) for m in re.finditer(r"TFLOPS: ([\d.]+)", done.stdout)]
    (out / "runner.txt").write_text("".join(lines))
    return {"simplegemm_pingpong": sorted(runs)[len(runs) // 2], "simplegemm_pingpong runs": runs} if runs else {}


def thunderkittens_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per kernel of the manifest, as each `make run` prints it ("Achieved performance: <t> TFLOPs").
    bf16_h100's main times matmul_template<2,4,8> at 4096^3: a 500 ms rest, 5 warm-up calls, then 10
    back-to-back calls between two events over buffer sets that together hold three times L2, then its
    check; three runs, the median kept. The tutorial's levels (educational_h100, `make LEVEL=xx`) share
    launch.cu: 4096^3, 2 warm-up calls, then its calls timed on the host's clock; one run each."""
    nvcc = os.environ.get("NVCC", "nvcc")
    figures: dict = {}
    lines = []
    for kernel in manifest["kernels"]:
        name = kernel["name"]
        folder = repo / Path(kernel["source"]).parent
        level = re.search(r"level_(\d+)\.cu$", kernel["source"])
        make = ["make", f"NVCC={nvcc}", *([f"LEVEL={level.group(1)}"] if level else [])]
        binary = f"./level_{level.group(1)}.out" if level else "./bf16_h100_gemm.out"
        started = time.monotonic()
        built = subprocess.run(make, cwd=folder, capture_output=True, text=True, timeout=900)
        lines.append(f"# {name}: {' '.join(make)} in {folder.relative_to(repo)}, {time.monotonic() - started:.0f} s, "
                     f"exit {built.returncode}\n" + built.stdout[-1500:] + built.stderr[-3000:])
        runs = []
        for _ in range((1 if level else 3) if built.returncode == 0 else 0):
            done = subprocess.run([binary], cwd=folder, capture_output=True, text=True, timeout=300)
            lines.append(f"exit {done.returncode}\n{done.stdout}{done.stderr}")
            runs += [float(m.group(1)) for m in re.finditer(r"Achieved performance: ([\d.]+) TFLOPs", done.stdout)]
        if runs:
            figures[name], figures[f"{name} runs"] = sorted(runs)[len(runs) // 2], runs
    (out / "runner.txt").write_text("".join(lines))
    return figures


def _compile_object(nvcc: str, flags: list[str], repo: Path, unit: str, out: Path) -> str:
    obj = out / (Path(unit).stem + ".o")
    subprocess.run([nvcc, *flags, "-c", unit, "-o", str(obj)], cwd=repo, check=True)
    return str(obj)


_CUTE_GEMM_101_NAMES = {"official cute gemm kernel V01": "cute_gemm_101_official_v01_fp32",
                        "official cute gemm kernel V02": "cute_gemm_101_official_v02_fp32",
                        "custom cute gemm kernel V00": "cute_gemm_101_v00_tf32",
                        "custom cute gemm kernel V01": "cute_gemm_101_v01", "custom cute gemm kernel V02": "cute_gemm_101_v02",
                        "custom cute gemm kernel V03": "cute_gemm_101_v03"}


def cutegemm101_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per kernel as its two profilers print them ("custom gemm kernel performance:", then "Effective
    TFLOPs: <t> tflops"): profile_cuda_gemm_fp32 (official V01, V02 and V00 in float) and _fp16 (V01-V03 in
    half_t), each at 4096^3 with its own check against cuBLAS, then 1 (fp32: 1, fp16: 2) warm-up calls and
    one call between two events on a cudaStreamCreate stream. Built as src/CMakeLists.txt builds them: the
    library's files one object each, each profiler linked to them and cuBLAS; CUTLASS's include and
    tools/util/include (the headers the worker pins), its `CUDA_ARCHITECTURES 80`. Three runs each, the median kept."""
    sys.path.insert(0, str(ROOT))
    from core.settings import settings
    from worker.compile.header_libraries import cutlass

    includes = [f"-I{d}" for d in ("include", *cutlass(settings.cutlass_dir).include_dirs)]
    library = [f"src/{f}" for f in ("cutlass_cute_official_gemm_v01.cu", "cutlass_cute_official_gemm_v02.cu",
                                    "cutlass_cute_00_block_tiling_thread_tiling_without_shared_memory.cu",
                                    "cutlass_cute_01_block_tiling_thread_tiling_with_swizzle_shared_memory.cu",
                                    "cutlass_cute_02_block_tiling_thread_tiling_with_swizzle_shared_memory_pipeline.cu",
                                    "cutlass_cute_03_block_tiling_thread_tiling_with_swizzle_shared_memory_pipeline_epilouge.cu",
                                    "profile_utils.cu", "cuda_utils.cu")]
    flags = ["-std=c++17", "--generate-code=arch=compute_80,code=[compute_80,sm_80]", *includes]
    # CUDA 13 dropped cudaDeviceProp::memoryClockRate, which its print_device_info reads for a line it
    # prints: this copy reads the same value through cudaDeviceGetAttribute (no kernel or timing line changed).
    utils = repo / "src" / "profile_utils.cu"
    utils.write_text(utils.read_text().replace(
        "device_prop.memoryClockRate",
        "[&] { int khz = 0; cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device_id); return khz; }()"))
    nvcc = os.environ.get("NVCC", "nvcc")
    started = time.monotonic()
    # CMake's library target, one object per file, compiled side by side as `make -j` would
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        objects = list(pool.map(lambda unit: _compile_object(nvcc, flags, repo, unit, out), library))
    lines = [f"# library built in {time.monotonic() - started:.0f} s with: {nvcc} {' '.join(flags)} -c <each file>\n"]
    runs: dict[str, list[float]] = {}
    for profiler in ("profile_cuda_gemm_fp32", "profile_cuda_gemm_fp16"):
        command = [nvcc, *flags, f"src/{profiler}.cu", *objects, "-lcublas", "-o", str(out / profiler)]
        subprocess.run(command, cwd=repo, check=True)
        lines.append(f"# {' '.join(command)}\n")
        for _ in range(3):
            done = subprocess.run([str(out / profiler)], cwd=repo, capture_output=True, text=True, timeout=300)
            lines.append(f"exit {done.returncode}\n{done.stdout}{done.stderr}")
            kernel, mine = None, False
            for line in done.stdout.splitlines():
                if line.strip() in _CUTE_GEMM_101_NAMES:
                    kernel = _CUTE_GEMM_101_NAMES[line.strip()]
                mine = {"custom gemm kernel performance:": True, "cuBLAS gemm kernel performance:": False}.get(
                    line.strip(), mine)
                if (m := re.match(r"Effective TFLOPs: ([\d.]+)", line)) and kernel:
                    runs.setdefault(kernel if mine else f"cublas ({kernel})", []).append(float(m.group(1)))
    (out / "runner.txt").write_text("".join(lines))
    return {name: sorted(r)[len(r) // 2] for name, r in runs.items()} | {f"{n} runs": r for n, r in runs.items()}


def gemmzoo_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per kernel at SIZE^3 as each of its benches prints it ("GEMM Problem: [m: S n: S k: S], GFLOPS:
    <g>"). Each nvidia/bench/bench_*.cu builds its functor once per size, checks one call against cuBLASLt, then
    times 50 calls, each alone between two events on its stream, over normal(0,1) data, and prints the mean.
    Its GFLOPS count m*n*(2k+3) operations (the alpha/beta epilogue too): converted here to gemmwatch's 2*m*n*k.
    Built as its CMakeLists.txt builds them (no build type: -lineinfo -Xptxas --verbose, -I nvidia,
    cublasLt and curand), for the GPU's own architecture (its CMAKE_CUDA_ARCHITECTURES default, 89, is
    set to the card's as its README says to). Three runs each, the median kept."""
    nvcc = os.environ.get("NVCC", "nvcc")
    flags = ["-std=c++17", "-lineinfo", "-Xptxas", "--verbose", "-arch=native", "-Invidia"]
    benches = {k["name"]: k["source"] for k in manifest["kernels"]}

    def build(item):
        name, source = item
        done = subprocess.run([nvcc, *flags, source, "-lcublasLt", "-lcurand", "-o", str(out / name)], cwd=repo,
                              capture_output=True, text=True)
        return name, done.returncode
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        builds = dict(pool.map(build, benches.items()))
    lines = [f"# built in {time.monotonic() - started:.0f} s with: {nvcc} {' '.join(flags)} <bench> -lcublasLt -lcurand: "
             f"{builds}\n"]
    figures: dict = {}
    for name in benches:
        runs = []
        for _ in range(3 if builds[name] == 0 else 0):
            done = subprocess.run([str(out / name)], cwd=repo, capture_output=True, text=True, timeout=600)
            lines.append(f"# {name}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
            for m in re.finditer(r"\[m: (\d+) n: (\d+) k: (\d+)\], GFLOPS: ([\d.]+)", done.stdout):
                if int(m.group(1)) == int(m.group(2)) == int(m.group(3)) == SIZE:
                    runs.append(round(float(m.group(4)) * 2 * SIZE / (2 * SIZE + 3) / 1000, 2))
        if runs:
            figures[name], figures[f"{name} runs"] = sorted(runs)[len(runs) // 2], runs
    (out / "runner.txt").write_text("".join(lines))
    return figures


def handsongemm_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """TFLOPS per kernel as each of its programs prints it at SIZE^3: each `.cu` is a main of its own, built
    with plain nvcc (the repository has no build file; its CUTLASS ones against the worker's CUTLASS,
    examples/common included, as CUTLASS's examples are built) and run once. cuda_imp's mains take `M N K`
    (N the inner dimension), run 100 warm-up calls, then time 100 back-to-back calls between two events
    ("Computational Throughput: <t> TFLOPS"); cutlass_imp's read their sizes from argv[1..3] too (atoi: a
    `--m=` flag would read as 0) and print " TFLOPs: <t>" (ampere.cu: 20 back-to-back runs, no warm-up, the
    figure printed only when its result equals the reference; ampere_streamk.cu: 100 each of four GEMMs, the
    second, "StreamK GEMM with default load-balancing", is the type the manifest names)."""
    sys.path.insert(0, str(ROOT))
    from core.settings import settings
    from worker.compile.header_libraries import cutlass

    nvcc = os.environ.get("NVCC", "nvcc")
    cutlass_includes = [f"-I{d}" for d in cutlass(settings.cutlass_dir).include_dirs]

    def build(kernel: dict) -> str:
        is_cutlass = "cutlass" in kernel.get("libraries", [])
        flags = [*kernel.get("flags", []), *(cutlass_includes if is_cutlass else []), "-arch=sm_90", "-lcublas"]
        done = subprocess.run([nvcc, *flags, kernel["source"], "-o", str(out / kernel["name"])], cwd=repo,
                              capture_output=True, text=True)
        return f"# {kernel['name']}: {nvcc} {' '.join(flags)} {kernel['source']} -> rc {done.returncode}\n{done.stderr[-2000:]}"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        lines = list(pool.map(build, manifest["kernels"]))
    figures = {}
    for kernel in manifest["kernels"]:
        program = out / kernel["name"]
        if not program.exists():
            continue
        argv = [str(SIZE)] * 3
        done = subprocess.run([str(program), *argv], cwd=repo, capture_output=True, text=True, timeout=600)
        lines.append(f"# {kernel['name']} {' '.join(argv)}\n{done.stdout}{done.stderr}")
        found = [float(m.group(1)) for m in re.finditer(r"(?:Computational Throughput:|TFLOPs:) *([\d.]+)", done.stdout)]
        pick = 1 if "streamk" in kernel["source"] else 0  # the stream-K main's second GEMM
        if len(found) > pick:
            figures[kernel["name"]] = found[pick]
    (out / "runner.txt").write_text("\n".join(lines))
    return figures


def andylolu2_runner(repo: Path, out: Path, manifest: dict) -> dict[str, float]:
    """simplegemm_sm80's TFLOPS as main.cu prints it ("TFLOPS: <t>"), `main SIZE SIZE SIZE 100`, three runs,
    the median kept: each call alone between two events after a cudaMemset of an L2-sized buffer (cold),
    the events' times summed. Built as its CMake file builds it (CUDA_SEPARABLE_COMPILATION: -rdc=true; its
    error check calls cudaGetErrorString on the device), against the worker's CUTLASS, since its `cutlass`
    submodule is no part of the repository's own files. Its main runs GemmConfigSm80 only."""
    sys.path.insert(0, str(ROOT))
    from core.settings import settings
    from worker.compile.header_libraries import cutlass

    includes = [f"-I{d}" for d in cutlass(settings.cutlass_dir).include_dirs]
    header = _build(repo, out, ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-rdc=true", "-arch=native",
                                f"-I{repo}", *includes], "main.cu")
    runs, lines = [], [header]
    for _ in range(3):
        done = subprocess.run([str(out / "runner"), *[str(SIZE)] * 3, "100"], cwd=repo, capture_output=True,
                              text=True, timeout=300)
        lines.append(f"exit {done.returncode}\n{done.stdout}{done.stderr[-2000:]}")
        runs += [float(m.group(1)) for m in re.finditer(r"TFLOPS: ([\d.]+)", done.stdout)]
    (out / "runner.txt").write_text("".join(lines))
    return {"simplegemm_sm80": sorted(runs)[len(runs) // 2], "simplegemm_sm80 runs": runs} if runs else {}


REPOS = {"fastcu": ("pranjalssh-fast.cu.gemmwatch.json", fastcu_runner),
         "hgemm_mma": ("yencal-cuda-hgemm-mma.gemmwatch.json", hgemm_mma_runner),
         "matmul_playground": ("alexarmbr-matmul-playground.gemmwatch.json", matmul_playground_runner),
         "omkarnabar": ("omkarnabar-triton-gemm.gemmwatch.json", omkarnabar_runner),
         "cutlass48": ("NVIDIA-cutlass-examples.gemmwatch.json", cutlass48_runner),
         "simplegemm": ("yf225-simplegemm.gemmwatch.json", simplegemm_runner),
         "thunderkittens": ("HazyResearch-ThunderKittens.gemmwatch.json", thunderkittens_runner),
         "cutegemm101": ("HuyNguyen-hust-cute-gemm-101.gemmwatch.json", cutegemm101_runner),
         "gemmzoo": ("AD2605-gemm-zoo.gemmwatch.json", gemmzoo_runner),
         "tritonkernels": ("triton-lang-kernels.gemmwatch.json", triton_kernels_runner),
         "alfin3": ("alfin3-triton-kernel-opt.gemmwatch.json", alfin3_runner),
         "handsongemm": ("bjmsong-hands-on-gemm.gemmwatch.json", handsongemm_runner),
         "andylolu2": ("andylolu2-simpleGEMM.gemmwatch.json", andylolu2_runner)}
# The size a repository's runner times, where it is not SIZE cubed: gemmwatch's steps take it too.
SHAPES = {"simplegemm": "8448x9216x640", "thunderkittens": "4096x4096x4096", "cutegemm101": "4096x4096x4096"}
# The repositories whose own correctness check is off in the runner as it times (see each function).
CHECKS = {"matmul_playground": matmul_playground_check}


def gemmwatch_figures(jobs_file: Path) -> dict[str, dict]:
    """Each variant's result from a gpu_kernel_folders.py run: TFLOPS, mode, verified."""
    out = {}
    for job in json.loads(jobs_file.read_text()):
        for r in job.get("results", []):
            out[r["variant"]] = {"tflops": (r["gflops"] or 0) / 1000, "mode": r["mode"], "verified": r["verified"],
                                 "error": r["error"], "cublas_tflops": (r["cublas_gflops"] or 0) / 1000}
    return out


def main() -> None:
    global SIZE, SHAPE
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(REPOS))
    ap.add_argument("repo", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", default="runner,burst,cold")
    ap.add_argument("--size", type=int, default=SIZE, help="M = N = K of every step")
    ap.add_argument("--shape", default=None, help="MxNxK instead (the gemmwatch steps; tritonkernels' runner)")
    ap.add_argument("--only", default=None, help="variant names for the gemmwatch steps (default: the manifest's)")
    ap.add_argument("--inputs", default=None, help='what the timed runs multiply, over the manifest\'s "inputs" '
                                                   "(core/description/inputs.py): to see what the runner's data is worth")
    args = ap.parse_args()
    SIZE, SHAPE = args.size, args.shape
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_name, runner = REPOS[args.kind]
    manifest = json.loads((EXAMPLES / manifest_name).read_text())
    steps = args.steps.split(",")
    folder = args.out / "repo"
    if not folder.exists():
        subprocess.run(["cp", "-r", str(args.repo), str(folder)], check=True)
    if args.only:
        keep = set(args.only.split(","))
        manifest["kernels"] = [k for k in manifest["kernels"] if k["name"] in keep]
    if args.inputs:
        manifest["inputs"] = args.inputs
    (folder / "gemmwatch.json").write_text(json.dumps(manifest))
    if "check" in steps:
        if args.kind not in CHECKS:
            raise SystemExit(f"no check step for {args.kind}: {sorted(CHECKS)} have one")
        (args.out / "check.json").write_text(json.dumps(CHECKS[args.kind](folder, args.out, manifest)))
    if "runner" in steps:
        (args.out / "runner.json").write_text(json.dumps(runner(folder, args.out, manifest)))
    for mode in [s for s in steps if s in ("burst", "cold", "hot", "sustained")]:
        started = time.monotonic()
        timing = [] if mode == manifest.get("timing") else ["--timing", mode]
        subprocess.run([sys.executable, str(ROOT / "scripts" / "studies" / "gpu_kernel_folders.py"),
                        str(args.out / mode), "--size", SHAPE or SHAPES.get(args.kind, str(SIZE)), *timing, "repo", str(folder)],
                       check=False)
        print(f"gemmwatch {mode}: {time.monotonic() - started:.0f} s", flush=True)
    table(args.out, [k["name"] for k in manifest["kernels"]])


def table(out: Path, variants: list[str]) -> None:
    runner = json.loads((out / "runner.json").read_text()) if (out / "runner.json").is_file() else {}
    modes = {m: gemmwatch_figures(out / m / "jobs.json") for m in ("burst", "cold", "hot", "sustained")
             if (out / m / "jobs.json").is_file()}
    checked = json.loads((out / "check.json").read_text()) if (out / "check.json").is_file() else None
    check_head = [f"its own check ({CHECK_SIZE}³)"] if checked is not None else []
    lines = ["| kernel | " + " | ".join(check_head + ["its runner TFLOPS"])
             + " | " + " | ".join(f"gemmwatch {m} TFLOPS | ratio" for m in modes) + " |",
             "| --- | " + " | ".join(["---"] * len(check_head) + ["---:"]) + " | "
             + " | ".join("---: | ---:" for _ in modes) + " |"]
    for name in variants:
        cells = []
        for got in modes.values():
            g = got.get(name)
            if g is None:
                cells.append(" | ")
            elif not g["verified"]:
                cells.append(f"not verified: {(g['error'] or '')[:80]} | ")
            else:
                cells.append(f"{g['tflops']:.1f} | " + (f"{g['tflops'] / runner[name]:.3f}" if runner.get(name) else ""))
        check_cell = [{True: "passed", False: "FAILED"}.get(checked.get(name), "")] if checked is not None else []
        lines.append(f"| {name} | " + " | ".join(check_cell + [str(runner.get(name, ""))]) + " | "
                     + " | ".join(cells) + " |")
    if any(f"cublas ({name})" in runner for name in variants):  # a runner that times its cuBLAS beside each kernel
        lines += ["", "| kernel | its runner's cuBLAS TFLOPS | " + " | ".join(f"gemmwatch {m} cuBLAS TFLOPS" for m in modes)
                  + " |", "| --- | ---: | " + " | ".join("---:" for _ in modes) + " |"]
        lines += [f"| {name} | {runner.get(f'cublas ({name})', '')} | " + " | ".join(
            f"{got[name]['cublas_tflops']:.1f}" if name in got else "" for got in modes.values()) + " |" for name in variants]
    # the first kernel that was timed beside cuBLAS (one that failed its check has no cuBLAS figure)
    cublas = [f"{m} {next(g['cublas_tflops'] for g in got.values() if g['cublas_tflops']):.1f}"
              for m, got in modes.items() if any(g["cublas_tflops"] for g in got.values())]
    its_cublas = f"its runner {runner['cublas']} TFLOPS" if "cublas" in runner else "its runner prints none"
    lines.append(f"\ncuBLAS: {its_cublas}; gemmwatch's in the same form: " + ", ".join(cublas))
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
