"""The process a profile runs in (issue 39): a confirmation's base and head kernels, compiled as
their timing compiled them, each launched once at its case's size inside the NVTX range that
Nsight Compute is told to profile.

    python -m worker.profile.profile_launch SPEC.json REPORT.json

SPEC (written by worker/profile/profile_step.py): the job id, the chosen cases' plan entries and their
indexes, and whether to launch. REPORT: each side's cubin (for the SASS diff, which needs no GPU)
and the profiled launches in the order they were made, which is the order of ncu's rows.

Like the GPU process that timed them (worker/child.py), this process runs no code of a job's but
its device code: the kernels come from the same confined compile (worker/compile/compiler.py; cubins by
content, so a timed kernel's is found in the cache) and are launched by the same device code, with
the same inputs (worker/measure/problem.py). Without `launch` it only compiles: the SASS diff where no
profiler can run, and on machines without a GPU (the CPU double of the tests compiles for real).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from core.settings import Settings
from worker.compile import compiler
from worker.measure import triton_autotune
from worker.measure.cases import cases_from_plan
from worker.child import load_runner
from worker.measure.problem import Problem

# Every profiled launch is made inside this range (`ncu --nvtx --nvtx-include gemmwatch_profile/`),
# so ncu profiles those launches and none of the set-up's kernels (inputs, warm-up launches).
PROFILE_RANGE = "gemmwatch_profile"
SIDES = ("base", "head")


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    cfg = Settings()
    runner = load_runner(cfg.runner)()
    dev = runner.device
    arch = runner.identity()["compute_capability"]  # "9.0": the target its timing compiled for
    cases = cases_from_plan(spec["entries"], spec["job_id"], {})
    report: dict = {"started_at": time.time(), "cubins": {}, "launches": []}
    for index, case in zip(spec["indexes"], cases):
        case = runner.wrappers_read(case)  # a kernel given by its Python wrapper: the launch it makes
        for side, choice in zip(SIDES, (case.base, case.kernel)):
            launch = runner.resolve(choice, case)
            if launch.language == "triton":  # the configuration its timed case chose (kept; nothing timed here)
                launch, _ = triton_autotune.settle(runner, choice, launch, case,
                                                   Problem(runner.device, case, launch.form, launch.precision), None)
            built = compiler.compile_launch(launch, arch, cfg)
            report["cubins"][f"{index}:{side}"] = {
                "path": str(built.cubin_path), "entry": launch.entry,
                "kernels": [k.get("name") or k.get("symbol") for k in built.kernels or []]}
            if spec["launch"]:
                call = _warm_call(runner, case, launch)
                with dev.profile_range(PROFILE_RANGE):
                    call()
                    dev.synchronize()
                report["launches"].append({"case": index, "side": side, "entry": launch.entry})
    report["ended_at"] = time.time()
    Path(argv[2]).write_text(json.dumps(report))
    return 0


def _warm_call(runner, case, launch):
    """The kernel's call over the case's inputs, launched twice before (module load, the first
    launch's one-off costs) so the profiled launch is a steady one."""
    dev = runner.device
    problem = Problem(dev, case, launch.form, launch.precision)
    call = problem.kernel_call(dev.compile(launch), launch, problem.new_c(), 1.0, 0.0)
    call()
    call()
    dev.synchronize()
    return call


if __name__ == "__main__":
    sys.exit(main(sys.argv))
