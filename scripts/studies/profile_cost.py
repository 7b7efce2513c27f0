#!/usr/bin/env python3
"""Study (issue 39): where a confirmed pair's profile spends its time, at SIZE^3 on this GPU, for
tail_split_k_overlap against its reverted head: the profile process alone (start, CuPy, runner,
compile from the cache, the launches), then under Nsight Compute with the worker's metrics
(worker/profile/profiler.py), then with the SASS-patched metrics it used to ask for added. Each three times.
  python3 scripts/studies/profile_cost.py OUT [SIZE]
"""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from core.description.builtins import builtin_kernels  # noqa: E402
from core.profile.ncu_metrics import parse_ncu_csv  # noqa: E402
from worker.profile import profiler  # noqa: E402

out, size = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4096
out.mkdir(parents=True, exist_ok=True)
overlap = builtin_kernels()["tail_split_k_overlap"]
reverted = overlap.model_copy(update={"defines": {**overlap.defines, "LAST_K_AFTER_BARRIER": 0}})
frozen = [{"description": d.model_dump(mode="json"), "tunables": {}, "origin": "builtin"} for d in (overlap, reverted)]
entry = {"variant": "tail_split_k_overlap", "m": size, "n": size, "k": size, "tunables": {}, "base": frozen[0],
         "head": frozen[1]}
tmp = Path(tempfile.mkdtemp())
spec, report = tmp / "spec.json", tmp / "report.json"
spec.write_text(json.dumps({"job_id": 1, "indexes": [0], "entries": [entry], "launch": True}))
program = profiler.profile_program(spec, report)
# The metrics ncu counts by patching the kernel's SASS, which the worker asked for until
# 2026-11-26 (executed spills, per-opcode counts, the instruction mix): what they cost, beside.
PATCHED = ["sass__inst_executed_register_spilling", "sass__inst_executed_per_opcode"] + [
    f"smsp__sass_inst_executed_op_{op}.sum" for op in ("shared_ld", "shared_st", "global_ld", "global_st", "local_ld",
                                                       "local_st", "tma_ld")]
worker_ncu = profiler.ncu_command("ncu", program)
with_patched = list(worker_ncu)
with_patched[with_patched.index("--metrics") + 1] += "," + ",".join(PATCHED)
ways = {"process alone": program, "ncu worker metrics": worker_ncu,
        "ncu plus SASS-patched metrics": with_patched}
for label, command in ways.items():
    for attempt in range(3):
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.monotonic() - started
        kernels = len(parse_ncu_csv(done.stdout)) if label != "process alone" and done.returncode == 0 else None
        line = f"{label}: run {attempt + 1}: {wall:.2f} s, rc {done.returncode}, kernels {kernels}"
        print(line, flush=True)
        (out / f"{label.replace(', ', '_').replace(' ', '_')}_{attempt}.txt").write_text(done.stdout + done.stderr)
