"""The confined compile process as the compiling side sees it: its command line and environment,
one request and its reply (`run_sandbox`), and whether this machine can confine it, asked once per process
by really trying (`probe` for NVRTC, `probe_nvcc` for nvcc). The process's own code is
worker/compile/compile_sandbox.py; what it may do is in worker/compile/compiler.py's docstring."""

import functools
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from worker.compile import nvcc
from worker.compile.compiled import CompileRefused, CompilerConfinement

SANDBOX = Path(__file__).with_name("compile_sandbox.py")
# What the compile process may inherit: where programs and libraries are, and nothing else.
_PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL")


@functools.lru_cache(maxsize=4)
def probe_nvcc(path: str, timeout_s: float, memory_mb: int) -> CompilerConfinement:
    """nvcc's release, and whether its compile process can be confined (asked once per process)."""
    try:
        reply = run_sandbox({"tool": "nvcc", "probe": True, "nvcc": path,
                              "executable": [nvcc.toolkit_root(path), *nvcc.host_compiler_dirs()]}, timeout_s, memory_mb)
    except CompileRefused as exc:
        return CompilerConfinement(False, str(exc), None)
    if not reply.get("ok"):
        return CompilerConfinement(False, reply.get("error", "no answer"), None)
    return CompilerConfinement(bool(reply["confined"]), reply["confinement"], reply["nvcc"])


def probe(cfg) -> CompilerConfinement:
    """Whether this machine can confine the compiler (asked once per process, by really trying)."""
    found = _probe(str(SANDBOX), cfg.compile_timeout_s, cfg.compile_memory_mb, nvrtc_library(cfg))
    if found.version is None:
        # Only an answer is remembered: a probe that got none (a compile process starved of time
        # on a busy machine, say) is tried again by the next compile instead of failing all of them.
        _probe.cache_clear()
    return found


@functools.lru_cache(maxsize=4)
def _probe(_sandbox: str, timeout_s: float, memory_mb: int, library: str | None = None) -> CompilerConfinement:
    try:
        reply = run_sandbox({"probe": True, "options": ["-arch=sm_90"], "nvrtc_library": library}, timeout_s, memory_mb)
    except CompileRefused as exc:
        return CompilerConfinement(False, str(exc), None)
    if not reply.get("ok"):
        return CompilerConfinement(False, reply.get("error", "no answer"), None)
    return CompilerConfinement(bool(reply["confined"]), reply["confinement"], reply["nvrtc"])


def nvrtc_library(cfg) -> str | None:
    """GEMMWATCH_NVRTC_LIBRARY: the libnvrtc the compile process loads (else cuda-pathfinder's
    choice: a wheel's, then the system's). Pin it to the toolkit your repository builds with, and
    NVRTC makes the same code as that toolkit's nvcc (docs/BENCHMARKS.md, issue 19)."""
    found = getattr(cfg, "nvrtc_library", None)
    return str(found) if found else None


def sandbox_command(timeout_s: float, memory_mb: int) -> list[str]:
    """The compile process's command line. It sets its own limits as its first act, before it
    reads the request: RLIMIT_AS, no core file, and RLIMIT_CPU just past the time limit, so a
    runaway compile ends even if the process that waits for it is killed first (a GPU process
    past its case time limit, say). No preexec_fn here: that is unsafe in the GPU process
    (CUDA's threads) and would rule out the vfork/posix_spawn start."""
    return [sys.executable, "-s", "-B", str(SANDBOX), str(memory_mb * 1024 * 1024), str(math.ceil(timeout_s) + 1)]


def run_sandbox(request: dict, timeout_s: float, memory_mb: int,
                limits: tuple[str, str] = ("GEMMWATCH_COMPILE_TIMEOUT_S", "GEMMWATCH_COMPILE_MEMORY_MB")) -> dict:
    """One request to a fresh compile process and its reply; CompileRefused where the process met a limit
    (named by the settings in `limits`: its time, its memory) or gave no readable reply."""
    time_setting, memory_setting = limits
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    argv = sandbox_command(timeout_s, memory_mb)
    with tempfile.TemporaryDirectory(prefix="gemmwatch-compile-") as home:
        env["HOME"] = home
        try:
            proc = subprocess.run(
                argv, input=json.dumps(request), capture_output=True,
                text=True, env=env, cwd=home, timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise CompileRefused(
                f"compile exceeded the {timeout_s:g} s compile time limit ({time_setting}); "
                "killed"
            ) from None
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:300]
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in proc.stderr:
            raise CompileRefused(
                f"compile exceeded its CPU time limit ({timeout_s:g} s, {time_setting}); killed"
            )
        if "MemoryError" in proc.stderr or "std::bad_alloc" in proc.stderr or proc.returncode < 0:
            raise CompileRefused(
                f"compile process ended (exit {proc.returncode}) under its {memory_mb} MiB memory limit "
                f"({memory_setting}): {last}"
            )
        raise CompileRefused(f"compile process failed (exit {proc.returncode}): {last}")
    try:
        return json.loads(proc.stdout)
    except ValueError:  # its reply channel is its own (compile_sandbox._reply): this is not meant to happen
        raise CompileRefused(f"the compile process's reply could not be read: {proc.stdout[:200]!r}") from None
