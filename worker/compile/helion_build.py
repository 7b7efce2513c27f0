"""A Helion kernel (`"language": "helion"`) as the Triton code Helion writes for one case: the request
for the confined compile process (worker/compile/helion_sandbox.py writes the code there, on torch's
`meta` device, with no GPU), its cache, and the Triton description that code becomes. From there the
kernel goes the way of any Triton wrapper (worker/compile/triton_build.py): its one launch read, its
kernel compiled, checked and timed. Nothing of Helion or torch is loaded in the worker.
"""

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


# Per kernel files, function, config, case shape, layout and type, target: only answers are kept, the
# last KEPT of them (a worker lives through many jobs; each entry is a file of some 10 KB).
KEPT = 256
_written: "OrderedDict[str, HelionCode]" = OrderedDict()


def triton_code(desc: KernelDescription, dims: tuple[int, int, int], compute_capability: str, cfg) -> HelionCode:
    """The Triton file Helion writes for `desc`'s kernel called on this case's A (M x K) and B (K x N),
    in the compile process; CompileRefused with the job's own error where it cannot be written."""
    layout = {x: desc.form.layout(x) for x in ("A", "B")}
    request = {"tool": "helion", "files": dict(desc.files), "source": desc.source, "wrapper": desc.wrapper,
               "config": desc.helion, "dims": list(dims), "layout": layout,
               "input_type": TORCH_TYPE[desc.precision.input_type], "compute_capability": compute_capability.replace(".", ""),
               # A job's Python, always: where the compile process cannot be confined, only the
               # settings' GEMMWATCH_UNCONFINED_SOURCES=warn lets it run.
               "require_confinement": cfg.unconfined_sources != "warn", "log_max_bytes": cfg.compile_log_max_bytes}
    key = digest_of([sorted(desc.files.items()), desc.source, desc.wrapper, desc.helion, list(dims), layout,
                     request["input_type"], request["compute_capability"]])
    if key not in _written:
        # Importing torch and Helion takes seconds of the compile time limit before the first line is written.
        reply = run_sandbox(request, cfg.compile_timeout_s, cfg.helion_memory_mb)
        if not reply.get("ok"):
            if "log" in reply:  # the job's file or Helion on it: the kernel's own error
                raise CompileError(reply["log"])
            raise CompileRefused(reply.get("error") or "no answer")
        _written[key] = HelionCode(reply["code"], reply["config"],
                                   {name: reply[name] for name in ("helion", "torch", "triton")},
                                   tuple(reply.get("skipped") or ()))
        while len(_written) > KEPT:
            _written.popitem(last=False)
    _written.move_to_end(key)
    return _written[key]
