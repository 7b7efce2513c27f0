"""A Triton kernel's compile, in the confined compile process (worker/compile/compile_sandbox.py loads this
file by path and calls `main` for a request whose tool is "triton").

A job's Triton kernel is Python: reading its file runs the job's code. So the file is read here,
after confinement, never in the worker: Triton and its compiler are loaded and a throw-away kernel
compiled first (every library and file Triton opens lazily is then open), then Landlock leaves this
process reading Python's own library and Triton's package, running Triton's ptxas and writing in
its own folder, nothing else, and a seccomp filter leaves it no socket. Only then are the file's
definitions run (worker/compile/triton_module.py: its script is skipped, torch and the like are never
loaded, Triton's driver answers for the worker's GPU), and either its kernel is described (its
parameters and @triton.autotune configurations) or compiled ahead of time for the GPU the worker
has (triton.compile with an explicit target and the case's specialization: no GPU is needed here).
The cubin goes back with what launching it needs: the kernel's shared memory, warps and which of
its parameters remain. Only the standard library, Triton and pyseccomp are imported.
"""

import importlib.util
import os
import sys
import sysconfig

# worker/compile/triton_module.py, by path as this file is (worker/ is not on sys.path in the compile
# process), now: it cannot be read once Landlock applies.
def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


triton_module = _sibling("triton_module")
triton_wrapper = _sibling("triton_wrapper")  # a repository's wrapper read for its one launch


def main(request: dict, confine, answer, built) -> None:
    """confine, answer, built: worker/compile/compile_sandbox.py's (Landlock, the reply, a cubin's reply)."""
    prepare_folder()
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        target = GPUTarget("cuda", int(request.get("compute_capability", "90")), 32)
        _warm_up(triton, ASTSource, target)
        version = triton.__version__
    except Exception as exc:
        answer(request, {"ok": False, "error": f"Triton unavailable: {type(exc).__name__}: {exc}", "confined": False},
               lambda: {})
        return
    if not request.get("probe"):
        write_files(request)
    package = os.path.dirname(triton.__file__)
    readable = [d for d in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"], package,
                            os.path.join(sysconfig.get_paths()["stdlib"], "lib-dynload")} if os.path.isdir(d)]
    try:  # before Landlock: pyseccomp finds libseccomp as it is imported
        network = no_network()
    except Exception as exc:
        answer(request, {"ok": False, "error": f"the network could not be closed: {exc}", "confined": False},
               lambda: {})
        return
    # ptxas, and what the dynamic loader maps to start it (it is linked against the C library).
    system = [d for d in ("/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                          "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu") if os.path.isdir(d)]
    confined, how = confine(readable, [os.path.join(package, "backends", "nvidia", "bin"), *system], [os.getcwd()])
    answer(request, {"confined": confined, "confinement": f"{how}; {network}", "triton": version},
           lambda: _compile(request, triton, ASTSource, target, built))


def prepare_folder() -> None:
    """This folder, the only one the process may write once confined: Triton's cache, its home, and the
    temporary files it hands ptxas. No GPU here: the kernel is compiled for an explicit target, and a
    file's script (torch on "cuda") must find none rather than the worker's."""
    os.makedirs("tmp", exist_ok=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.update(TRITON_CACHE_DIR=os.path.abspath("triton-cache"), TRITON_HOME=os.path.abspath("."),
                      TMPDIR=os.path.abspath("tmp"))


def no_network() -> str:
    """A seccomp filter on this process and what it starts (ptxas): no new socket of any family, no
    io_uring (whose operations open sockets past seccomp), no other process's memory. Triton needs
    none of them; a job's module could use them to reach the network."""
    import errno

    import pyseccomp

    refused = ("socket", "socketpair", "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace",
               "process_vm_readv", "process_vm_writev")
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    f.set_attr(pyseccomp.Attr.CTL_NNP, 1)
    f.set_attr(pyseccomp.Attr.CTL_TSYNC, 1)
    for name in refused:
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) >= 0:
            f.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    f.load()
    return "seccomp: " + ", ".join(refused) + " refused (EPERM)"


def _warm_up(triton, ast_source, target) -> None:
    import triton.language as tl

    def gemmwatch_triton_warm_up(x, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(x + i, tl.load(x + i, mask=i < n) * 2.0, mask=i < n)

    kernel = triton.jit(gemmwatch_triton_warm_up)
    triton.compile(ast_source(kernel, {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 32}), target=target)


def write_files(request: dict) -> None:
    """The job's files under src/ of this folder (paths checked by the worker: plain components)."""
    for path, text in request["files"].items():
        target = os.path.join("src", path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def _compile(request: dict, triton, ast_source, target, built) -> dict:
    """Read the job's file (its definitions, worker/compile/triton_module.py), find its kernel, and either
    describe it (a "describe" request: its parameters and the configurations its @triton.autotune
    lists) or compile it with the request's types and constants (and one of those configurations);
    a reply whose "log" says what went wrong, in the job's own terms."""
    import traceback

    source = os.path.join("src", request["source"])
    triton_module.use_target(triton, target)
    triton_module.refuse_frameworks()
    try:
        # Every file holds Triton as `triton` and `tl` before its first statement: one that reaches Triton
        # through its own package (vLLM's `from vllm.triton_utils import tl, triton`, a re-export) has the
        # names it means where that import fails here, and a file's own import of them replaces them.
        # A wrapper's file gets its stand-in for torch as well (worker/compile/triton_wrapper.py).
        import triton.language as tl

        preset = {"triton": triton, "tl": tl}
        if request.get("wrapper"):
            preset["torch"] = triton_wrapper.Torch([])
        if request.get("wrapper"):  # Helion's generated code imports its launcher
            sys.modules.update(triton_wrapper.helion_modules())
        # The job's own modules beside it (`from .matmul_perf_model import ...`), read as it is.
        module, skipped = triton_module.load(source, preset=preset, root="src")
    except SyntaxError:
        return {"ok": False, "log": f"{request['source']} is not valid Python:\n{traceback.format_exc(limit=0)}"}
    except BaseException:  # the job's definitions: whatever escaped, as its traceback
        return {"ok": False, "log": f"reading {request['source']} failed:\n{job_traceback(traceback.format_exc())}"}
    if request.get("wrapper"):  # the wrapper called once on stand-ins: its launch, as a description reads it
        try:
            call = triton_wrapper.capture(module, request["wrapper_plan"], triton, triton_module.kernel_and_configs,
                                          request["layout"], request["input_type"], request.get("dims"))
        except triton_wrapper.Unsupported as exc:
            return {"ok": False, "log": f"{request['wrapper']} in {request['source']}: {exc}"}
        except BaseException:  # a name its file failed to define is the usual cause: those statements are said
            return {"ok": False, "log": f"calling {request['wrapper_plan']['shown']} in {request['source']} failed:\n"
                                        f"{job_traceback(traceback.format_exc())}"
                                        + raised_said(skipped, "\nstatements of the file that raised as it was read:")}
        return {"ok": True, "call": call, "skipped": skipped}
    kernel, configs = triton_module.kernel_and_configs(triton, getattr(module, request["entry"], None))
    if kernel is None:
        return {"ok": False, "log": f"{request['entry']} in {request['source']} is not a @triton.jit function"
                                    + raised_said(skipped, "; statements of the file that raised:")}
    constant = [p.name for p in kernel.params if p.is_constexpr]
    plain = [p.name for p in kernel.params if not p.is_constexpr]
    heuristics = triton_module.heuristics_of(triton, getattr(module, request["entry"], None))
    if request.get("describe"):
        return {"ok": True, "params": plain, "constexprs": constant, "skipped": skipped,
                "configs": [triton_module.describe_config(c, plain) for c in configs],
                "heuristics": [name for name, _ in heuristics],
                "pruning": triton_module.pruning_of(triton, getattr(module, request["entry"], None))}
    config = request.get("config") or {}
    try:
        given = {name: triton_module.constexpr_value(triton.language, name, value)
                 for name, value in {**request["constants"], **config.get("kwargs", {})}.items()}
    except ValueError as exc:
        return {"ok": False, "log": f"{request['entry']}: {exc}"}
    types = request["types"]
    if len(plain) != len(types):
        return {"ok": False, "log": f"{request['entry']} takes {len(plain)} parameters that are not tl.constexpr "
                                    f"({', '.join(plain)}) but the description's args name {len(types)}: list each in order"}
    found: dict = {}  # recorded with the cubin (env.launch.heuristics), not repeated in its log
    if heuristics:
        try:
            found = _heuristic_values(kernel, heuristics, request.get("arg_values") or [], given)
        except Exception:
            return {"ok": False, "log": f"the @triton.heuristics of {request['entry']} failed for this case:\n"
                                        f"{job_traceback(traceback.format_exc())}"}
        given.update(found)
    missing = [name for name in constant if name not in given and not _has_default(kernel, name)]
    if missing:
        return {"ok": False, "log": f"{request['entry']}'s tl.constexpr parameters {', '.join(missing)} have no value: "
                                    "give each in defines (or tunables), "
                                    "or a word, a Triton type or null in triton.string_constexprs"}
    signature, constants, attrs, kept = _specialized(kernel, types, request.get("specialization") or [])
    signature.update({name: "constexpr" for name in constant})
    constants.update({name: given[name] if name in given else _default(kernel, name) for name in constant})
    options = {"num_warps": config.get("num_warps", request["num_warps"]),
               "num_stages": config.get("num_stages", request["num_stages"])}
    if config.get("num_ctas", 1) != 1:
        options["num_ctas"] = config["num_ctas"]
    if config.get("maxnreg"):
        options["maxnreg"] = config["maxnreg"]
    try:
        compiled = triton.compile(ast_source(kernel, signature, constants, attrs), target=target, options=options)
    except Exception:
        return {"ok": False, "log": f"Triton could not compile {request['entry']}:\n"
                                    f"{job_traceback(traceback.format_exc())}"}
    meta = compiled.metadata
    notes = "".join(f"\n  {line}" for line in skipped)
    log = f"{request['source']}: its definitions were read; statements that raised were passed over:{notes}" \
        if skipped else ""
    # The cubin's kernel is named for the @triton.jit function, which need not be the entry's name: a file's
    # `split_k = triton.autotune(configs=...)(split_k_body)` builds split_k_body.
    reply = built(compiled.asm["cubin"], log, {request["entry"]: meta.name})
    for described in reply.get("kernels", []):  # what a launch of it needs, beside its parameters
        if described["symbol"] == meta.name:
            described.update(shared=int(meta.shared), num_warps=int(meta.num_warps), declared=len(plain), kept=kept,
                             scratch=[int(getattr(meta, "global_scratch_size", 0) or 0),
                                      int(getattr(meta, "global_scratch_align", 1) or 1)],
                             ctas=int(getattr(meta, "num_ctas", 1) or 1), heuristics=found,
                             # Per host TensorDescriptor parameter, in order: the box and swizzle its loads
                             # and stores were compiled for, which the runner's map must match.
                             descriptors=[{"block_size": list(d["block_size"]), "swizzle": int(d["swizzle"])}
                                          for d in (getattr(meta, "tensordesc_meta", None) or [])])
    return reply


def _specialized(kernel, types: list[str], specialization: list[str]):
    """The signature, constants and attributes Triton's own launcher would compile the kernel with
    for a call whose args are specialized so (worker/compile/triton_build.specialization): a "1" compiled in
    as a constant, a "D" marked divisible by 16 (where the kernel does not say not to), and which of
    the plain parameters stay parameters of the cubin (their positions among them)."""
    signature, constants, attrs, kept = {}, {}, {}, []
    plain = [(i, p) for i, p in enumerate(kernel.params) if not p.is_constexpr]
    for j, ((index, param), kind) in enumerate(zip(plain, types)):
        spec = specialization[j] if j < len(specialization) else ""
        if spec == "1" and not param.do_not_specialize:
            signature[param.name], constants[param.name] = "constexpr", 1
            continue
        signature[param.name] = kind
        kept.append(j)
        if spec == "D" and not (param.do_not_specialize or param.do_not_specialize_on_alignment):
            attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, constants, attrs, kept


def _heuristic_values(kernel, heuristics: list, arg_values: list, given: dict) -> dict:
    """Each value the kernel's @triton.heuristics set for this case, as Triton's launcher sets them before a
    call: each function gets the call's arguments by name (the case's sizes, strides and constants; None for
    a pointer) with the configuration's and the description's constexprs, and the values set before it."""
    plain = [p.name for p in kernel.params if not p.is_constexpr]
    constexprs = {p.name for p in kernel.params if p.is_constexpr}
    seen = {name: _default(kernel, name) for name in constexprs if _has_default(kernel, name)}
    seen.update({**dict(zip(plain, arg_values)), **given})
    found = {}
    for name, function in heuristics:
        if name not in constexprs:
            raise ValueError(f"@triton.heuristics sets {name}, which is not a tl.constexpr parameter of the kernel")
        value = function(seen)
        # What a constexpr is compiled in as, and what a result can record: a number, a flag, a word or None.
        if not (value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= 64)):
            raise ValueError(f"@triton.heuristics gives {name} a {type(value).__name__}: gemmwatch compiles in "
                             "a number, True or False, a word of at most 64 characters, or None")
        seen[name] = found[name] = value
    return found


def _has_default(kernel, name: str) -> bool:
    import inspect

    return kernel.signature.parameters[name].default is not inspect.Parameter.empty


def _default(kernel, name: str):
    return kernel.signature.parameters[name].default


def raised_said(skipped: list[str], heading: str) -> str:
    """The statements of the job's files that raised as they were read, one a line under `heading`; "" for none."""
    return heading + "".join(f"\n  {line}" for line in skipped) if skipped else ""


def job_traceback(text: str) -> str:
    """A traceback's lines that point into the job's own files, and the error itself: the one being
    handled, whole (Triton's compile errors run over several lines: the kernel's line and a caret
    under the failing call, then why), else the traceback's last line."""
    import traceback

    lines = text.rstrip().splitlines()
    own = ('File "src/', 'File "' + os.path.abspath("src") + "/")
    # Each frame named by the job's own path (kernels/matmul.py), not where this process wrote it (src/...).
    keep = [line.replace(own[1], 'File "').replace(own[0], 'File "') for line in lines
            if own[0] in line or own[1] in line]
    handled = sys.exc_info()[1]
    error = "".join(traceback.format_exception_only(type(handled), handled)).rstrip() if handled else lines[-1]
    return "\n".join([*keep[-8:], error[-4000:]])
