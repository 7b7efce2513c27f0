"""A Helion kernel's Triton code, written in the confined compile process (worker/compile/compile_sandbox.py
loads this file by path and calls `main` for a request whose tool is "helion").

Helion compiles a `@helion.kernel` function for the shapes, types and strides it is called with; its
`bind(args).to_triton_code(config)` gives that compile as a Triton file (a `@triton.jit` kernel and
the wrapper that launches it). Helion needs torch, and reading the job's file runs the job's code,
so it happens here: torch, Triton and Helion are imported and a throw-away kernel's code written
first (every module they load lazily is then loaded), the network is closed by seccomp, then Landlock
leaves this process reading Python's library and the installed packages, and writing in its own
folder only. Only then are the file's definitions run (worker/compile/triton_module.py: its script is
skipped) and its kernel bound, for each case the request names, to tensors on torch's `meta` device,
which have a shape, a type and strides and no memory (one process for all of a job's sizes: importing
torch and Helion is most of its time): no GPU and no CUDA context is needed, and none is made (CUDA_VISIBLE_DEVICES
is empty). Triton's driver answers for the worker's GPU as it does for a Triton file.

What goes back is text: the Triton file, which the worker then reads and compiles as any Triton
wrapper's (worker/compile/triton_build.py), and the config and versions it was written with.
"""

import importlib.metadata
import importlib.util
import os
import sys
import sysconfig


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Both now, by path: neither can be read once Landlock applies.
triton_sandbox = _sibling("triton_sandbox")  # its folder set-up, seccomp filter and traceback filter
triton_module = triton_sandbox.triton_module  # a file's definitions without its script

# torch's name for each of gemmwatch's element types (worker/compile/triton_build.TORCH_TYPE).
_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn")


def main(request: dict, confine, answer) -> None:
    """confine, answer: worker/compile/compile_sandbox.py's (Landlock, the reply)."""
    triton_sandbox.prepare_folder()
    try:
        import torch
        import triton
        from triton.backends.compiler import GPUTarget

        import helion

        target = GPUTarget("cuda", int(request.get("compute_capability", "90")), 32)
        triton_module.use_target(triton, target)
        _warm_up(torch)
        versions = {"helion": importlib.metadata.version("helion"), "torch": torch.__version__,
                    "triton": triton.__version__}
    except Exception as exc:
        answer(request, {"ok": False, "error": f"Helion unavailable: {type(exc).__name__}: {exc}", "confined": False},
               lambda: {})
        return
    if not request.get("probe"):
        triton_sandbox.write_files(request)
    paths = sysconfig.get_paths()
    # Python's library and the folders the packages are installed in (torch, Helion and Triton read
    # their own files as they write code; a worker may have them beside the interpreter's own): read-only.
    installed = {os.path.dirname(os.path.dirname(m.__file__)) for m in (torch, triton, helion)}
    readable = sorted({d for d in (paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"],
                                   os.path.join(paths["stdlib"], "lib-dynload"), *installed) if os.path.isdir(d)})
    try:
        network = triton_sandbox.no_network()
    except Exception as exc:
        answer(request, {"ok": False, "error": f"the network could not be closed: {exc}", "confined": False},
               lambda: {})
        return
    confined, how = confine(readable, [], [os.getcwd()])
    answer(request, {"confined": confined, "confinement": f"{how}; {network}", **versions},
           lambda: _generate(request, torch, helion))


# Helion reads a kernel's source (and refuses closures): the warm-up kernel is a file of its own.
_WARM_UP = """import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16]), static_shapes=True)
def gemmwatch_helion_warm_up(x):
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2.0
    return out
"""


def _warm_up(torch) -> None:
    """A small kernel's Triton code, written before confinement: what Helion and torch load the first
    time they trace and generate code is loaded now, while files can still be opened."""
    with open("gemmwatch_helion_warm_up.py", "w", encoding="utf-8") as f:
        f.write(_WARM_UP)
    module, _ = triton_module.load("gemmwatch_helion_warm_up.py", name="gemmwatch_helion_warm_up")
    module.gemmwatch_helion_warm_up.bind((torch.empty(64, device="meta"),)).to_triton_code()


def _operand(torch, rows: int, cols: int, layout: str, dtype):
    """A rows x cols matrix on the meta device, lying as the case's operand lies (a column-major one is
    the transpose of a packed cols x rows matrix, as a user's `b.T` is)."""
    if layout == "row":
        return torch.empty(rows, cols, device="meta", dtype=dtype)
    return torch.empty(cols, rows, device="meta", dtype=dtype).T


def _generate(request: dict, torch, helion) -> dict:
    """The job's file read, then its kernel bound to each case's operands and its Triton code written:
    {"ok": True, "written": [per case, in order: {"code", "config"} or {"log"}]}, or a reply whose "log"
    says why the file gives no kernel at all, in the job's own terms."""
    import traceback

    source = os.path.join("src", request["source"])
    sys.path.insert(0, os.path.abspath(os.path.dirname(source)))  # the job's own modules beside it
    try:
        module, skipped = triton_module.load(source)
    except SyntaxError:
        return {"ok": False, "log": f"{request['source']} is not valid Python:\n{traceback.format_exc(limit=0)}"}
    except BaseException:
        return {"ok": False, "log": f"reading {request['source']} failed:\n"
                                    f"{triton_sandbox.job_traceback(traceback.format_exc())}"}
    name = request["wrapper"]
    kernel = getattr(module, name, None)
    if not isinstance(kernel, helion.Kernel):
        return {"ok": False, "log": f"{name} in {request['source']} is not a @helion.kernel function"
                                    + triton_sandbox.raised_said(skipped, "; statements of the file that raised:")}
    written = [_written_for(request, torch, helion, kernel, dims) for dims in request["cases"]]
    return {"ok": True, "written": written, "skipped": skipped}


def _written_for(request: dict, torch, helion, kernel, dims: list) -> dict:
    """One case's Triton code: {"code", "config"}, or {"log"} saying why Helion could not write it."""
    import traceback

    name = request["wrapper"]
    m, n, k = dims
    dtype = getattr(torch, request["input_type"])
    a = _operand(torch, m, k, request["layout"]["A"], dtype)
    b = _operand(torch, k, n, request["layout"]["B"], dtype)
    try:
        bound = kernel.bind((a, b))
        if request.get("config") is not None:
            config = helion.Config(**request["config"])
        else:  # the one config the kernel pins (@helion.kernel(config=...)), if it pins one
            config = _pinned_config(kernel, bound)
            if config is None:
                return {"log": f"{name} in {request['source']} pins no config and the description gives "
                               'none: give the one to run in "helion" (gemmwatch does not run Helion\'s '
                               "autotuner; run it at home and pass the config it chose)"}
        return {"code": bound.to_triton_code(config), "config": dict(config.config)}
    except BaseException:
        return {"log": f"Helion could not write {name}(a, b)'s Triton code for {m}x{k} by {k}x{n}:\n"
                       f"{triton_sandbox.job_traceback(traceback.format_exc())}"}


def _pinned_config(kernel, bound):
    """The one config a @helion.kernel pins, or None: what Helion itself would run without autotuning
    (BoundKernel._implicit_config, Helion 1.4 and later), else the kernel's list of one config."""
    implicit = getattr(bound, "_implicit_config", None)
    if implicit is not None:
        return implicit()
    configs = list(getattr(kernel, "configs", None) or [])
    return configs[0] if len(configs) == 1 else None
