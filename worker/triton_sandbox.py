"""A Triton kernel's compile, in the confined compile process (worker/compile_sandbox.py loads this
file by path and calls `main` for a request whose tool is "triton").

A job's Triton kernel is Python: importing its file runs the job's code. So the file is imported
here, after confinement, never in the worker: Triton and its compiler are loaded and a throw-away
kernel compiled first (every library and file Triton opens lazily is then open), then Landlock
leaves this process reading Python's own library and Triton's package, running Triton's ptxas and
writing in its own folder, nothing else; only then are the job's files imported and its kernel
compiled ahead of time for the GPU the worker has (triton.compile with an explicit target: no GPU
is needed here). The cubin goes back with what launching it needs: the kernel's shared memory and
warps. Only the standard library, Triton and pyseccomp (no socket: the network is closed too)
are imported.
"""

import os
import sys
import sysconfig


def main(request: dict, confine, answer, built) -> None:
    """confine, answer, built: worker/compile_sandbox.py's (Landlock, the reply, a cubin's reply)."""
    # This folder, the only one it may write once confined: Triton's cache, its home, and the
    # temporary files it hands ptxas.
    os.makedirs("tmp", exist_ok=True)
    os.environ.update(TRITON_CACHE_DIR=os.path.abspath("triton-cache"), TRITON_HOME=os.path.abspath("."),
                      TMPDIR=os.path.abspath("tmp"))
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
        _write_files(request)
    package = os.path.dirname(triton.__file__)
    readable = [d for d in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"], package,
                            os.path.join(sysconfig.get_paths()["stdlib"], "lib-dynload")} if os.path.isdir(d)]
    try:  # before Landlock: pyseccomp finds libseccomp as it is imported
        network = _no_network()
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


def _no_network() -> str:
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


def _write_files(request: dict) -> None:
    """The job's files under src/ of this folder (paths checked by the worker: plain components)."""
    for path, text in request["files"].items():
        target = os.path.join("src", path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def _compile(request: dict, triton, ast_source, target, built) -> dict:
    """Import the job's file, find its @triton.jit kernel, and compile it with the request's types
    and constants; a reply whose "log" says what went wrong, in the job's own terms."""
    import importlib.util
    import traceback

    source = os.path.join("src", request["source"])
    sys.path.insert(0, os.path.abspath(os.path.dirname(source)))  # the job's own modules beside it
    try:
        spec = importlib.util.spec_from_file_location("gemmwatch_job_kernel", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException:  # the job's module-level code: whatever it raised, as its traceback
        return {"ok": False, "log": f"importing {request['source']} failed:\n{_job_traceback(traceback.format_exc())}"}
    kernel = getattr(module, request["entry"], None)
    if not isinstance(kernel, triton.runtime.jit.JITFunction):
        return {"ok": False, "log": f"{request['entry']} in {request['source']} is not a @triton.jit function"}
    constant = [p.name for p in kernel.params if p.is_constexpr]
    plain = [p.name for p in kernel.params if not p.is_constexpr]
    types = request["types"]
    if len(plain) != len(types):
        return {"ok": False, "log": f"{request['entry']} takes {len(plain)} parameters that are not tl.constexpr "
                                    f"({', '.join(plain)}) but the description's args name {len(types)}: list each in order"}
    missing = [name for name in constant if name not in request["constants"]]
    if missing:
        return {"ok": False, "log": f"{request['entry']}'s tl.constexpr parameters {', '.join(missing)} have no value: "
                                    "give each in defines (or tunables)"}
    signature = {**dict(zip(plain, types)), **{name: "constexpr" for name in constant}}
    constants = {name: request["constants"][name] for name in constant}
    try:
        compiled = triton.compile(ast_source(kernel, signature, constants), target=target,
                                  options={"num_warps": request["num_warps"], "num_stages": request["num_stages"]})
    except Exception:
        return {"ok": False, "log": f"Triton could not compile {request['entry']}:\n"
                                    f"{_job_traceback(traceback.format_exc())}"}
    meta = compiled.metadata
    reply = built(compiled.asm["cubin"], "", {})
    for described in reply.get("kernels", []):  # what a launch of it needs, beside its parameters
        if described["symbol"] == meta.name:
            described.update(shared=int(meta.shared), num_warps=int(meta.num_warps), declared=len(plain))
    return reply


def _job_traceback(text: str) -> str:
    """A traceback's lines that point into the job's own files, and its last line (the error)."""
    lines = text.rstrip().splitlines()
    keep = [line for line in lines if 'File "src/' in line or "File \"" + os.path.abspath("src") in line]
    return "\n".join([*keep[-8:], lines[-1]])
