"""A Helion kernel (`"language": "helion"`) as the Triton code Helion writes for one case: the request
for the confined compile process (worker/compile/helion_sandbox.py writes the code there, on torch's
`meta` device, with no GPU), its cache, and the Triton description that code becomes. From there the
kernel goes the way of any Triton wrapper (worker/compile/triton_build.py): its one launch read, its
kernel compiled, checked and timed. Nothing of Helion or torch is loaded in the worker.
"""

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from core.description.kernel_description import KernelDescription
from worker.compile.compile_process import run_sandbox
from worker.compile.compiled import CompileError, CompileRefused
from worker.compile.failed_compiles import digest_of
from worker.compile.triton_build import TORCH_TYPE


@dataclass(frozen=True)
class HelionCode:
    """What Helion wrote for one case: the Triton file, and what it was written with (on the result)."""

    code: str
    config: dict
    versions: dict  # helion, torch and triton, as the compile process found them
    skipped: tuple[str, ...] = ()  # the file's statements that raised as it was read ("line 12: PermissionError: ...")

    def record(self) -> dict:
        """The result's env["helion"]."""
        return {"version": self.versions["helion"], "torch": self.versions["torch"], "config": self.config}


# Per kernel files, function, config, case shape, layout and type, target: what Helion wrote, or the
# job's error where it could not (so a job's later cases of a failing kernel start no process again),
# the last KEPT of them (a worker lives through many jobs; each entry is a file of some 10 KB).
KEPT = 256
_written: "OrderedDict[str, HelionCode | str]" = OrderedDict()
# One writing at a time, a job's prefetch (write_beside) or a case: a case that asks while the
# prefetch writes waits for it and then finds its code kept, instead of writing it a second time.
_writing = threading.Lock()
log = logging.getLogger(__name__)


def _request(desc: KernelDescription, compute_capability: str, cfg) -> dict:
    return {"tool": "helion", "files": dict(desc.files), "source": desc.source, "wrapper": desc.wrapper,
            "config": desc.helion,
            "layout": {x: desc.form.layout(x) for x in ("A", "B")},
            "input_type": TORCH_TYPE[desc.precision.input_type], "compute_capability": compute_capability.replace(".", ""),
            # A job's Python, always: where the compile process cannot be confined, only the
            # settings' GEMMWATCH_UNCONFINED_SOURCES=warn lets it run.
            "require_confinement": cfg.unconfined_sources != "warn", "log_max_bytes": cfg.compile_log_max_bytes}


def _key(request: dict, dims) -> str:
    return digest_of([sorted(request["files"].items()), request["source"], request["wrapper"], request["config"],
                      list(dims), request["layout"], request["input_type"], request["compute_capability"]])


def write_all(desc: KernelDescription, cases: list[tuple[int, int, int]], compute_capability: str, cfg) -> dict:
    """The Triton code Helion writes for `desc`'s kernel at each of these sizes (M, N, K) that is not kept
    yet, all in one compile process (importing torch and Helion is most of its time), kept as it comes:
    {size: HelionCode, or the job's error (a str) where Helion could not write that one}. CompileError
    where the file gives no kernel at all; CompileRefused where the process could not run it."""
    with _writing:
        return _write_all(desc, cases, compute_capability, cfg)


def write_beside(kernels: list[tuple[KernelDescription, list[tuple[int, int, int]]]], compute_capability: str,
                 cfg) -> threading.Thread:
    """write_all for each (kernel, sizes) of a job, in a thread of its own, so that the job's first cases
    run meanwhile; the writing is claimed before this returns, so a case that asks for Helion code
    first waits for it. A kernel Helion cannot write is its cases' to report (its error is kept).
    Where an earlier job's writing still runs (a job cancelled early), the thread waits for it and this
    returns at once: the job's cases are not held up, though one may then write its own size first."""
    claimed = _writing.acquire(blocking=False)

    def write() -> None:
        if not claimed:
            _writing.acquire()
        try:
            for desc, sizes in kernels:
                try:
                    _write_all(desc, sizes, compute_capability, cfg)
                except Exception as exc:  # its cases say what is wrong with it
                    log.debug("Helion prefetch of %s: %s", desc.name, exc)
        finally:
            _writing.release()

    thread = threading.Thread(target=write, name="helion-prefetch", daemon=True)
    thread.start()
    return thread


def _write_all(desc: KernelDescription, cases: list[tuple[int, int, int]], compute_capability: str, cfg) -> dict:
    request = _request(desc, compute_capability, cfg)
    wanted = list(dict.fromkeys(tuple(dims) for dims in cases))
    missing = [dims for dims in wanted if _key(request, dims) not in _written]
    if missing:
        reply = run_sandbox({**request, "cases": [list(dims) for dims in missing]}, cfg.helion_timeout_s,
                            cfg.helion_memory_mb, ("GEMMWATCH_HELION_TIMEOUT_S", "GEMMWATCH_HELION_MEMORY_MB"))
        if not reply.get("ok") and "log" not in reply:  # no answer on the kernel: nothing kept
            raise CompileRefused(reply.get("error") or "no answer")
        versions = {name: reply.get(name) for name in ("helion", "torch", "triton")}
        for dims, one in zip(missing, reply.get("written") or [{"log": reply.get("log")}] * len(missing)):
            _keep(_key(request, dims), HelionCode(one["code"], one["config"], versions, tuple(reply.get("skipped") or ()))
                  if "code" in one else one.get("log") or "Helion wrote no code")
        if not reply.get("ok"):  # the job's file gives no kernel: the kernel's own error, kept for each size
            raise CompileError(reply["log"])
    found: dict = {}
    for dims in wanted:
        key = _key(request, dims)
        if key in _written:
            _written.move_to_end(key)
        found[dims] = _written.get(key)  # None: dropped already past KEPT; its case asks again
    return found


def _keep(key: str, written: "HelionCode | str") -> None:
    _written[key] = written
    while len(_written) > KEPT:
        _written.popitem(last=False)


def triton_code(desc: KernelDescription, dims: tuple[int, int, int], compute_capability: str, cfg) -> HelionCode:
    """The Triton file Helion writes for `desc`'s kernel called on this case's A (M x K) and B (K x N):
    kept, or written now in the compile process; CompileError with the job's own error where it cannot be."""
    dims = tuple(dims)
    written = write_all(desc, [dims], compute_capability, cfg)[dims]
    if written is None:  # written by an earlier call and dropped since (past KEPT): written again
        written = write_all(desc, [dims], compute_capability, cfg)[dims]
    if not isinstance(written, HelionCode):
        raise CompileError(written or "Helion wrote no code")
    return written
