"""One call of a job's launcher in a fresh, confined process: `run_confined_call`.

A job's `.cu` is built into a shared library with a host launcher (`launch(M, N, K, alpha, A, B,
beta, C, stream)`); calling it runs a stranger's host code. Here that happens in a process started
for the one call, from a fresh interpreter with an environment of a few harmless variables, which
  1. dies with its parent, drops every capability and sets no_new_privs (while single-threaded,
     so every thread made later has none either);
  2. imports its set-up hook (a class named "module:Class" or "/path/file.py:Class"), then, still
     single-threaded, puts a first Landlock layer in place: only the Python installation, the
     system's library folders and what the hook says its set-up needs can be read (no data
     folder, no token, no /etc/passwd), no TCP. Threads the set-up makes (CUDA's) have that
     layer's rights at most, whatever the job's code later gets them to run;
  3. runs the hook's set-up (the GPU's: import CuPy, initialise the device, allocate, make a
     stream; the CPU's here: three matrices), loads the system libraries the job's library
     names (DT_NEEDED, by soname: no code of the job runs), then `host_jail.confine`: a second
     Landlock layer (the library's folder and the hook's devices only) and the seccomp filter;
  4. says so on its report pipe, dlopens the library (its static constructors run confined),
     lets the hook call the launcher (once, here), then read what it produced, and
     exits.
The parent kills the child's process group at the deadline and turns whatever happened into a
`CallOutcome` whose message says it: returned, crashed (which signal), called exit(N), ran past
its limit, could not be loaded, broke the device.

What the child says after the library is loaded is the job's word, not ours: its code can write on
the report pipe too. Only the exit status (the kernel's), the clock and the phase it reached before
loading are facts. Replies are JSON, never pickle (unpickling a hostile process's bytes would run
its code in the parent).

The child is worker/launch/launcher_child.py, run as a script; this module is the parent's side, and the
shape of a set-up hook (`LauncherHook`; the GPU's in worker/measure/launcher_gpu.py, the CPU double's in
tests/cpu_gemm_hook.py).
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from worker.launch import setup_kernels
from worker.launch.jail_terms import Allowance

CHILD = Path(__file__).with_name("launcher_child.py").resolve()
# What the child may inherit: where programs and libraries are, the GPU it may see, and nothing
# else (no DATABASE_URL, BROKER_URL, token or GEMMWATCH_* setting: the launcher can getenv()).
PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LANG",
              "LC_ALL")
# NumPy's OpenBLAS starts a thread per core when it is imported, before the set-up layer exists
# (seen on the H100 machine: 15 threads, outside any Landlock domain): one thread, no pool.
SINGLE_THREADED_IMPORTS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
OUTPUT_KEPT = 16 * 1024  # the tail of the job's own stdout and stderr kept for its report
REPORT_LIMIT = 1 << 20  # bytes the report pipe may carry before the child is taken to be flooding it
FILE_LIMIT = 64 << 20  # RLIMIT_FSIZE: the largest file the child may write (scratch, output)

# --- what the parent gets ----------------------------------------------------------------------

RETURNED = "returned"  # the launcher returned and its results were read
CRASHED = "crashed"  # a signal ended the process (SIGSEGV, SIGABRT, ...)
EXITED = "exited"  # the process ended by itself, exit(N), before the call's end
TIMED_OUT = "timed_out"  # still running at the deadline; killed
LOAD_FAILED = "load_failed"  # dlopen failed, or no such function
AFTER_CALL_FAILED = "after_call_failed"  # it returned, but what it left is unusable (the device reset ...)
SETUP_FAILED = "setup_failed"  # our own set-up failed: no job code ran
SET_UP = "set_up"  # a set-up-only call: the set-up ran and the process ended, nothing of the job's loaded
REFUSED = "refused"  # the process could not be confined, so the job's code was not loaded


@dataclass(frozen=True)
class CallOutcome:
    kind: str
    message: str  # what happened, in words, for the case's report
    result: dict | None = None  # what the hook read after the call (only for RETURNED)
    confinement: str | None = None  # what was applied, as the child said before loading anything of the job's
    exit_status: int | None = None  # the child's: -N for signal N
    output: str = ""  # the tail of the child's stdout and stderr (the job's own printing)
    seconds: float = 0.0  # from the library's loading to the end

    @property
    def ok(self) -> bool:
        return self.kind == RETURNED


_SIGNAL_WORDS = {
    signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error", signal.SIGFPE: "arithmetic exception",
    signal.SIGILL: "illegal instruction", signal.SIGABRT: "abort", signal.SIGKILL: "killed",
    signal.SIGXCPU: "CPU time limit", signal.SIGSYS: "bad system call", signal.SIGTRAP: "trap",
}


def signal_words(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    words = _SIGNAL_WORDS.get(signum)
    return f"{words}, {name}" if words else name


def run_confined_call(library: str | os.PathLike, symbol: str = "launch", *,
                      hook: str, hook_args: dict | None = None,
                      readable: tuple[str, ...] = (), devices: tuple[str, ...] = (), scratch: bool = False,
                      timeout_s: float = 10.0, setup_timeout_s: float = 60.0, require: bool = True,
                      extra_env: dict[str, str] | None = None, through_address: bool = False,
                      kernels: Path | None = None, setup_only: bool = False) -> CallOutcome:
    """Call `symbol` of `library` once, in a fresh confined process; what happened comes back.

    hook: the set-up (a LauncherHook, below), named "module:Class" or "/file.py:Class".
    readable, devices: paths the call may still open besides the library's folder and what the hook
    names (read-only; read/write/ioctl). scratch: a temporary folder, the child's HOME and working
    folder, that it may write (else nothing is writable).
    timeout_s: from the library's loading to the child's end (constructors, the call, reading
    the results); setup_timeout_s: before that. At the deadline the process group is killed.
    require: refuse to load the library where Landlock or seccomp cannot be applied (else go on,
    and say what is missing in `confinement`). through_address: `symbol` returns the address of the
    function to call (a launcher library's gemmwatch_launcher_address) rather than being it.
    kernels: a folder of the kernels set-ups compiled before (worker/launch/setup_kernels.py): the
    child's CuPy cache starts as a copy of it. setup_only: run the set-up and end there, loading
    nothing of the job's (the outcome's kind is SET_UP); what its set-up compiled is added to `kernels`.
    """
    library = Path(library).resolve()
    request = {"library": str(library), "symbol": symbol, "through_address": through_address, "hook": hook,
               "hook_args": hook_args or {},
               "allowance": Allowance(readable=(str(library.parent), *readable), devices=tuple(devices)).as_dict(),
               "setup_readable": [str(library.parent)], "require": require, "setup_only": setup_only,
               "cpu_seconds": int(setup_timeout_s + timeout_s) + 2, "file_bytes": FILE_LIMIT}
    with tempfile.TemporaryDirectory(prefix="gemmwatch-launcher-") as home:
        if scratch:
            request["allowance"]["writable"] = [home]
        # HOME and TMPDIR: the set-up's own files (CuPy's kernel cache and NVRTC's sources, CUDA's
        # JIT cache) go to a folder of this call's, never the worker's.
        cache = Path(home) / setup_kernels.IN_HOME
        setup_kernels.seed(cache, kernels)
        env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ} | SINGLE_THREADED_IMPORTS | dict(
            extra_env or {}) | {"HOME": home, "TMPDIR": home, "CUPY_CACHE_DIR": str(cache)}
        outcome = _Conversation(request, env, home, timeout_s, setup_timeout_s).run()
        if setup_only and kernels is not None and outcome.kind == SET_UP:  # no job code ran there: see setup_kernels
            setup_kernels.keep(cache, kernels)
        return outcome


class _Conversation:
    """The parent's side: start the child, read its report and output, enforce the deadlines."""

    def __init__(self, request: dict, env: dict, home: str, timeout_s: float, setup_timeout_s: float):
        self.request, self.env, self.home = request, env, home
        self.timeout_s, self.setup_timeout_s = timeout_s, setup_timeout_s
        self.phase = "starting"  # -> confined -> loading -> calling -> returned -> finished
        self.events: dict[str, dict] = {}
        self.output = bytearray()
        self.report = bytearray()
        self.loaded_at: float | None = None

    def run(self) -> CallOutcome:
        report_r, report_w = os.pipe()
        try:
            # No preexec_fn (unsafe where the caller has threads, as a GPU process does): the child
            # sets its own limits. A session of its own, so its process group is killed whole.
            proc = subprocess.Popen(
                [sys.executable, "-s", "-B", str(CHILD), str(report_w), str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(report_w,),
                env=self.env, cwd=self.home, start_new_session=True)
        finally:
            os.close(report_w)
        try:
            try:
                proc.stdin.write(json.dumps(self.request).encode())
                proc.stdin.close()
            except BrokenPipeError:  # it died before reading: its exit status says why
                pass
            timed_out = self._read_until_exit(proc, report_r)
        finally:
            _kill(proc)
            os.close(report_r)
            proc.stdout.close()
        return self._outcome(proc.returncode, timed_out)

    def _deadline(self, started: float) -> float:
        if self.loaded_at is None:
            return started + self.setup_timeout_s
        return self.loaded_at + self.timeout_s

    def _read_until_exit(self, proc: subprocess.Popen, report_r: int) -> bool:
        """Read until both pipes close and the process has ended; True if the deadline came first.
        Polls on the pipes and the clock only: no sleep orders anything here."""
        started = time.monotonic()
        sel = selectors.DefaultSelector()
        sel.register(report_r, selectors.EVENT_READ, "report")
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "output")
        open_pipes = 2
        while open_pipes:
            left = self._deadline(started) - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    open_pipes -= 1
                elif key.data == "output":
                    self.output += chunk
                    del self.output[:-OUTPUT_KEPT]
                else:
                    self.report += chunk
                    if len(self.report) > REPORT_LIMIT:
                        self.events["flood"] = {}
                        return False
                    self._take_messages()
        sel.close()
        # Both pipes closed: the process is ending, or its code closed them and goes on (a spin).
        while True:
            left = self._deadline(started) - time.monotonic()
            if left <= 0:
                return True
            try:
                proc.wait(timeout=min(left, 1.0))
                return False
            except subprocess.TimeoutExpired:
                continue

    def _take_messages(self) -> None:
        *lines, rest = self.report.split(b"\n")
        self.report = bytearray(rest)
        for line in lines:
            try:
                msg = json.loads(line)
                event = msg["event"]
            except (ValueError, KeyError, TypeError):
                continue  # not ours: the job's code may write here too
            if event in self.events or not isinstance(event, str):
                continue  # each event counts once: a second "returned" would be a forgery
            if event == "set_up" and not self.request["setup_only"]:
                continue  # said only where no job code runs: elsewhere, the job's forgery
            self.events[event] = msg
            if event in ("set_up", "confined", "loading", "calling", "returned", "finished"):
                self.phase = event
            if event == "loading":
                self.loaded_at = time.monotonic()

    def _outcome(self, status: int | None, timed_out: bool) -> CallOutcome:
        kind, message = self._what_happened(status, timed_out)
        confined = self.events.get("confined", {}).get("confinement")
        result = self.events.get("finished", {}).get("result") if kind == RETURNED else None
        seconds = time.monotonic() - self.loaded_at if self.loaded_at else 0.0
        output = self.output.decode(errors="replace")
        return CallOutcome(kind, message, result if isinstance(result, dict) else None, confined, status, output,
                           seconds)

    def _what_happened(self, status: int | None, timed_out: bool) -> tuple[str, str]:
        limit = self.timeout_s
        if "flood" in self.events:
            return CRASHED, f"the launcher flooded its report pipe (over {REPORT_LIMIT} bytes); killed"
        in_set_up = self.phase in ("starting", "confined", "set_up")  # nothing of the job's loaded yet
        if timed_out:
            if in_set_up:
                return SETUP_FAILED, f"the set-up ran past its {self.setup_timeout_s:g} s limit; killed"
            return {
                "loading": (TIMED_OUT, f"the library's loading (its static constructors) ran past the {limit:g} s "
                                       "limit; killed"),
                "calling": (TIMED_OUT, f"the launcher ran past its {limit:g} s limit; killed"),
            }.get(self.phase, (TIMED_OUT, f"the launcher returned, but what it started did not end within the "
                                          f"{limit:g} s limit; killed"))
        for failure in ("refused", "setup_failed", "load_failed"):
            if failure in self.events:
                return failure, str(self.events[failure].get("message", failure))[:2000]
        if self.request["setup_only"] and self.phase == "set_up" and status == 0:  # nothing of the job's was loaded
            return SET_UP, "the set-up ran; nothing of the job's was loaded (a set-up-only call)"
        if self.phase == "finished" and status == 0:
            if "after_call_failed" in self.events:
                return AFTER_CALL_FAILED, ("the launcher returned, but then: "
                                           f"{str(self.events['after_call_failed'].get('message'))[:2000]}")
            return RETURNED, "the launcher returned normally"
        if status is not None and status < 0:
            words = signal_words(-status)
            if in_set_up:
                return CRASHED, f"the confined process crashed during its set-up ({words})"
            return CRASHED, {
                "loading": f"the library crashed while loading ({words})",
                "calling": f"the launcher crashed ({words})",
            }.get(self.phase, f"the launcher returned, then its process crashed ({words})")
        return (SETUP_FAILED, f"the confined process ended during its set-up (exit status {status})") \
            if in_set_up else {
                "loading": (EXITED, f"the library called exit({status}) while loading"),
                "calling": (EXITED, f"the launcher called exit({status})"),
            }.get(self.phase, (EXITED, f"the launcher returned, then its process exited with status {status} "
                                       "before its results were read"))


def _kill(proc: subprocess.Popen) -> None:
    """The whole process group, then the process itself (in case it left the group)."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.kill()
    proc.wait()


# --- the set-up hook ------------------------------------------------------------------------------


class LauncherHook(Protocol):
    """The set-up of a launcher call, named "module:Class" or "/file.py:Class" and loaded in the
    confined process (worker/launch/launcher_child.py). The GPU's is worker/measure/launcher_gpu.CupyLauncherCase;
    the CPU double's lives in tests/.

      __init__(args)        the request's hook_args (JSON); runs before any Landlock layer (import
                            here what the set-up needs: NumPy, CuPy)
      setup_allowance()     Allowance the set-up needs beyond the Python installation and the
                            system's libraries (the GPU's: /dev/nvidia*, /proc/devices ...)
      call_allowance()      Allowance the call needs beyond the library's folder (the device files:
                            a cudaMalloc in the launcher opens /dev/nvidia0 anew); both are asked
                            for before the first layer, while /dev can still be listed
      set_up()              under the first layer: initialise, allocate
      call(launcher)        call the launcher (a ctypes function): once, or for each run it needs
                            (verification, warm-up, timing), on its stream
      after_call()          a JSON-able dict of what the call produced; raise if it left the device
                            (or anything else) unusable: that is reported on the case
    Whatever set_up and after_call need must be imported in __init__ or set_up: after
    confinement nothing but the allowance can be read, Python's own modules included.
    """

    def __init__(self, args: dict) -> None: ...

    def setup_allowance(self) -> Allowance: ...

    def call_allowance(self) -> Allowance: ...

    def set_up(self) -> None: ...

    def call(self, launcher) -> None: ...

    def after_call(self) -> dict: ...
