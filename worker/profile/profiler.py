"""Running the tools behind a profile (issue 39): Nsight Compute over worker/profile/profile_launch.py,
and cuobjdump over the cubins it reports. Each run's output is read by core/profile/ncu_metrics.py and
core/profile/sass_stats.py; here only the command lines, and why a tool could not run, in words.

Nsight Compute is run with `--clock-control none`: it never locks or changes the card's clocks
(a worker shares its GPU with nothing else, but its figures are measured at the clocks the card
chooses, and a profile must not leave it otherwise). Only the launches inside the NVTX range
`gemmwatch_profile` are profiled, one kernel each, in launch order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from core.profile.ncu_metrics import METRICS, MIX, OCCUPANCY_LIMITS
from worker.compile.nvcc import toolkit_program
from worker.profile.profile_launch import PROFILE_RANGE

# ncu's own expression for every stall reason core/profile/ncu_metrics.py's STALL_RE reads.
STALL_METRICS = r"regex:^smsp__average_warps_issue_stalled_\w+_per_issue_active\.ratio$"


@dataclass
class NcuRun:
    text: str | None  # ncu's raw CSV page, with whatever the program printed before it
    reason: str | None  # why there is no profile, where there is none
    wall_s: float
    version: str | None = None


def ncu_path(cfg) -> str | None:
    """GEMMWATCH_NCU (a name on PATH or a path; "" for none), else None."""
    if not cfg.ncu:
        return None
    return shutil.which(cfg.ncu) if os.sep not in cfg.ncu else (cfg.ncu if Path(cfg.ncu).is_file() else None)


def ncu_command(ncu: str, program: list[str]) -> list[str]:
    """ncu over `program`, asking for just the metrics core/profile/ncu_metrics.py reads: fewer replay
    passes than ncu's sections, and no SASS-patched metric (each costs a replay of its own)."""
    return [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{PROFILE_RANGE}/",
            # Only the profile process: ncu would otherwise inject itself into every process it
            # starts too (the confined compile's probe), which launches no kernel of interest.
            "--target-processes", "application-only",
            "--metrics", ",".join(read_metrics()),
            "--print-metric-instances", "values", "--csv", "--page", "raw", "--print-units", "base", *program]


def read_metrics() -> list[str]:
    """Every metric core/profile/ncu_metrics.py reads, the stall reasons by a regular expression."""
    names = [m.metric for m in (*METRICS, *MIX)] + list(OCCUPANCY_LIMITS.values())
    return [*dict.fromkeys(names), STALL_METRICS]


def profile_program(spec: Path, report: Path) -> list[str]:
    return [sys.executable, "-m", "worker.profile.profile_launch", str(spec), str(report)]


def run_ncu(cfg, spec: Path, report: Path, timeout_s: float) -> NcuRun:
    """ncu over the profile process; its CSV, or the reason there is none (no ncu, no permission to
    the GPU's counters, no kernel profiled, a failure or a timeout, in ncu's own words)."""
    ncu = ncu_path(cfg)
    if ncu is None:
        why = (f"Nsight Compute (GEMMWATCH_NCU={cfg.ncu!r}) is not found on this worker" if cfg.ncu
               else "GEMMWATCH_NCU is empty: Nsight Compute is off on this worker")
        return NcuRun(None, why, 0.0)
    started = time.monotonic()
    try:
        done = subprocess.run(ncu_command(ncu, profile_program(spec, report)), capture_output=True, text=True,
                              timeout=timeout_s, cwd=_project_root())
    except subprocess.TimeoutExpired:
        return NcuRun(None, f"Nsight Compute did not finish within {timeout_s:g} s (GEMMWATCH_PROFILE_TIMEOUT_S)",
                      time.monotonic() - started)
    wall = time.monotonic() - started
    text = done.stdout + done.stderr
    reason = _ncu_failure(done.returncode, text)
    return NcuRun(None if reason else done.stdout, reason, wall, ncu_version(ncu))


def _ncu_failure(returncode: int, text: str) -> str | None:
    if "ERR_NVGPUCTRPERM" in text:
        return ("no permission to the GPU's performance counters (ERR_NVGPUCTRPERM): the worker needs "
                "NVreg_RestrictProfilingToAdminUsers=0 or CAP_SYS_ADMIN (docs/SECURITY.md)")
    if "No kernels were profiled" in text:
        return "Nsight Compute profiled no kernel (" + _ncu_line(text, "No kernels were profiled") + ")"
    if returncode != 0:
        return f"Nsight Compute exited with status {returncode}: {_ncu_line(text, '==ERROR==') or text.strip()[-400:]}"
    return None


def _ncu_line(text: str, marker: str) -> str:
    return next((line.strip() for line in text.splitlines() if marker in line), "")


_NCU_VERSIONS: dict[str, str] = {}  # path -> version line: asked once per worker process


def ncu_version(ncu: str) -> str | None:
    """`ncu --version`'s version line (an answer is remembered; a failure is asked again next time)."""
    if ncu in _NCU_VERSIONS:
        return _NCU_VERSIONS[ncu]
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = next((line.strip() for line in out.splitlines() if "Version" in line), out.strip() or None)
    if found:
        _NCU_VERSIONS[ncu] = found
    return found


def run_program(spec: Path, report: Path, timeout_s: float) -> str | None:
    """The profile process alone (compile only, no profiler): None, or why it failed."""
    try:
        done = subprocess.run(profile_program(spec, report), capture_output=True, text=True, timeout=timeout_s,
                              cwd=_project_root())
    except subprocess.TimeoutExpired:
        return f"the compile for the SASS did not finish within {timeout_s:g} s"
    return None if done.returncode == 0 else (done.stderr.strip()[-600:] or f"exit status {done.returncode}")


def cuobjdump(cubin: str, what: str) -> tuple[str | None, str | None]:
    """`cuobjdump -sass` or `-res-usage` of a cubin: its text, or why there is none."""
    tool = toolkit_program("cuobjdump")
    if tool is None:
        return None, "no cuobjdump on this worker (the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels, gemmwatch[compile])"
    env = dict(os.environ)
    nvdisasm = toolkit_program("nvdisasm")  # what cuobjdump disassembles with, found on PATH
    if nvdisasm is not None:
        env["PATH"] = os.pathsep.join((str(Path(nvdisasm).parent), env.get("PATH", "")))
    try:
        done = subprocess.run([tool, f"-{what}", cubin], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return None, f"cuobjdump -{what} did not finish within 120 s"
    if done.returncode != 0:
        return None, f"cuobjdump -{what} failed: {done.stderr.strip()[-300:]}"
    return done.stdout, None


def _project_root() -> str:
    """The folder `python -m worker.profile.profile_launch` resolves the project's packages from."""
    return str(Path(__file__).resolve().parents[2])  # the project root, above worker/profile/
