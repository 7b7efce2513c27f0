"""Study (issue 19): is a repository kernel's figure in gemmwatch the kernel's, or the compiler's?

gemmwatch compiles with NVRTC (-ftz=true, as CuPy always did); a repository's own runner with
nvcc. This builds each named kernel three ways, loads each cubin into the same process and
times it with gemmwatch's own timing loop (beside cuBLAS, the mode GEMMWATCH_TIMING_MODE says):
  nvrtc      gemmwatch's compile step, as a job's kernel is compiled
  nvrtc-noftz the same without -ftz=true
  nvcc       the repository's file compiled by nvcc -cubin -O3 -arch=sm_90 (its runner's flags)
and prints registers per thread, spills and the median time of each.

Usage (GPU machine, project root):
  python3 scripts/studies/nvcc_vs_nvrtc.py REPO_DIR NVCC_SOURCE SIZE [NAME ...]   (no NAME: every kernel)
  e.g. scripts/studies/nvcc_vs_nvrtc.py .devkit/repos/siboehm src/runner.cu 4096 sib_10_warptiling
GEMMWATCH_NVRTC_LIBRARY picks the NVRTC (core/settings.py); STUDY_BUILDS=nvrtc,nvcc skips a build.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # scripts/studies/ -> the project root
sys.path.insert(0, str(ROOT))

from core.description import kernel_includes  # noqa: E402
from core.description.kernel_folder import load_folder  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.compile import compiler  # noqa: E402
from worker.gpu import resources  # noqa: E402
from worker.measure import timing  # noqa: E402
from core.results.timing_stats import gflops  # noqa: E402
from worker.measure.cases import Case, KernelChoice, TimingPolicy  # noqa: E402
from worker.measure.runner import CupyRunner, Problem  # noqa: E402


def main() -> None:
    repo, nvcc_source, size, names = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    cfg = Settings(GEMMWATCH_DATA_DIR=tempfile.mkdtemp())
    policy = TimingPolicy.from_settings(cfg)
    runner = CupyRunner(cfg)
    dev, cp = runner.device, runner.device.cp
    include = [f"-I{repo / d}" for d in ("src", "include", ".")]
    cubin = Path(tempfile.mkdtemp()) / "nvcc.cubin"
    subprocess.run(["nvcc", "-cubin", "-O3", "-std=c++17", "-arch=sm_90", *include, "-o", str(cubin),
                    str(repo / nvcc_source)], check=True, capture_output=True)
    nvcc_module = cp.RawModule(path=str(cubin))
    kernels = {d.name: d for d in load_folder(repo, names or None)}
    names = names or list(kernels)
    wanted = os.environ.get("STUDY_BUILDS", "nvrtc,nvrtc-noftz,nvcc").split(",")
    for name in names:
        desc = kernels[name]
        case = Case(0, name, size, size, size, 11, KernelChoice(desc, {}, "job"))
        launch = runner.resolve(case.kernel)
        headers = kernel_includes.resolve(launch.files, launch.source, list(launch.include_dirs))
        dirs = kernel_includes.toolkit_include_dirs() if headers.needs_toolkit else ()
        base = ["-arch=sm_90", *launch.compile_options(), *(f"-I{d}" for d in dirs)]
        builds = {}
        for label, options in (("nvrtc", [base[0], "-ftz=true", *base[1:]]), ("nvrtc-noftz", base)):
            if label not in wanted and label != "nvrtc":
                continue
            built = compiler.compile_kernel(launch.files[launch.source], name=launch.source, options=options,
                                            name_expressions=(launch.entry,), untrusted=False, cfg=cfg,
                                            headers=headers.by_name, include_dirs=dirs)
            builds[label] = cp.RawModule(path=str(built.cubin_path)).get_function(built.lowered[launch.entry])
            mangled = built.lowered[launch.entry]
        if "nvcc" in wanted:
            builds["nvcc"] = nvcc_module.get_function(mangled)
        row_nvrtc = compiler.probe(cfg).nvrtc
        problem = Problem(dev, case, launch.form)
        run_cublas = problem.cublas_call()
        row = {"kernel": name, "size": size, "mode": policy.mode, "nvrtc_version": row_nvrtc}
        for label, function in builds.items():
            call = problem.kernel_call(function, launch, problem.new_c(), 1.0, 0.0)
            with dev.measuring():
                t = timing.time_pair(dev, call, run_cublas, policy)
            ms = sorted(t.variant_ms)[len(t.variant_ms) // 2]
            attrs = resources.function_attributes(function)
            row[label] = {"gflops": round(gflops(size, size, size, ms)), "median_ms": ms,
                          "registers": attrs.get("num_regs"), "spill_bytes": attrs.get("local_size_bytes")}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
