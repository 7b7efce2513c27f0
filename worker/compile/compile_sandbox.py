"""The confined compile process (layer 2 of 3 against a hostile job source). Run as a script.

worker/compile/compiler.py starts this file with a fresh interpreter, an environment that holds none
of gemmwatch's settings and a time limit; its memory and CPU limits (argv) it sets itself first. It reads one JSON request on stdin,
loads NVRTC and compiles a throw-away kernel first (so every library NVRTC loads lazily is
already mapped), then confines itself with Landlock so that no file can be opened, listed or
written any more (except, read-only, the folders of CUDA's own headers that the request names,
where the kernel includes a device header), and only then compiles the job's source. The
kernel's own files and the stand-ins for host headers come in the request, as NVRTC's in-memory
headers. The cubin goes back on stdout. Files opened before confinement (stdin, stdout, the
libraries) stay usable; nothing else is.

Only the standard library, cuda-bindings (NVRTC) and, to confine, the launcher jail's Landlock layer
(worker/launch/host_jail.py: standard library and pyseccomp) are imported here: nothing of the worker's
configuration can be reached from this process.
"""

import sys

# This file's folder (worker/) is sys.path[0] for a script; none of it is wanted here.
sys.path.pop(0)

import resource  # noqa: E402

if __name__ == "__main__":
    # First act, before the request is read or NVRTC loaded, the limits worker/compile/compile_process.py passes
    # in argv: memory (RLIMIT_AS, bytes), CPU seconds (SIGXCPU, then SIGKILL a second later: the
    # compile ends even if nobody waits for it any more), and no core file that could hold the
    # source or the log.
    _memory, _cpu_s = int(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (_memory, _memory))
    resource.setrlimit(resource.RLIMIT_CPU, (_cpu_s, _cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

import base64  # noqa: E402
import ctypes  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402


def _load_sibling(name: str):
    """A module of worker/ by its path: this folder is not on sys.path here. cubin_info (standard
    library only, like this file) reads the kernels' parameters out of the cubin here, before
    anything the compiler made reaches the worker; triton_sandbox compiles a Triton kernel."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cubin_info = _load_sibling("cubin_info")
cubin_info.demangle("_Z1fv")  # loads the demangler now: finding libstdc++ needs files confinement closes

_WARM_UP = 'extern "C" __global__ void gemmwatch_warm_up(float *x) { x[threadIdx.x] *= 2.0f; }'


def _check(result, what: str):
    """cuda-bindings returns (status, value...); raise on a failed NVRTC call."""
    from cuda.bindings import nvrtc  # here, not at the top: loaded only after the chosen libnvrtc (main)

    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what}: {nvrtc.nvrtcGetErrorString(status)[1].decode()}")
    return values[0] if len(values) == 1 else values


def _compile(source: str, name: str, options: list[str], name_expressions: list[str],
             headers: dict[str, str] | None = None) -> dict:
    from cuda.bindings import nvrtc  # here, not at the top: loaded only after the chosen libnvrtc (main)

    names = list(headers or {})
    texts = [headers[n].encode() for n in names]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), len(names), texts,
                                           [n.encode() for n in names]), "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
        opts = [o.encode() for o in options]
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        log_text = log.rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return {"ok": False, "log": log_text}
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = {
            expr: _check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()), "nvrtcGetLoweredName").decode()
            for expr in name_expressions
        }
        return _built(cubin, log_text, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _built(cubin: bytes, log: str, lowered: dict[str, str]) -> dict:
    """A successful compile's reply: the cubin, the log, and every kernel's parameters as the binary
    records them (worker/compile/cubin_info.py)."""
    try:
        kernels = cubin_info.describe(cubin)
    except Exception as exc:  # a cubin we cannot read: the kernels' types stay unknown, said so
        return {"ok": False, "error": f"the compiled cubin could not be read: {exc}"}
    return {"ok": True, "log": log, "cubin": base64.b64encode(cubin).decode(), "lowered": lowered, "kernels": kernels}


# What a launcher's library may leave to its process: the CUDA driver, cuBLAS(Lt) and cuRAND, whose
# symbols the launcher's process makes global before loading it (worker/launch/launcher_child.py);
# no wheel holds stubs to link them against.
_GIVEN_BY_ITS_PROCESS = re.compile(r"cu[A-Z]\w*|cublas\w*|curand\w*")


def _built_library(library: bytes, log: str, request: dict) -> dict:
    """A launcher build's reply, shaped as a cubin's (worker/compile/compiler.build stores either): the
    library, the log, and the launcher: called through gemmwatch_launcher_address, its parameter types
    read from the signature function (worker/compile/cubin_info.py). A library that calls what none of
    its units defines (a function of a file the repository links in and the description does not name)
    fails here, as a compile error: the link allows it, and the case would otherwise fail only when its
    process loads the library."""
    try:
        returns, params = cubin_info.launcher_signature(library)
        missing = [s for s in cubin_info.unresolved_symbols(library) if not _GIVEN_BY_ITS_PROCESS.fullmatch(s)]
    except cubin_info.NotAFunction as exc:
        return {"ok": False, "error": f"the launcher cannot be called: {exc}"}
    except Exception as exc:
        return {"ok": False, "error": f"the built library could not be read: {exc}"}
    if missing:
        names = ", ".join(cubin_info.demangle(s) or s for s in missing[:8]) + (" ..." if len(missing) > 8 else "")
        built_from = ", ".join([request["source"], *(request.get("units") or [])])
        return {"ok": False, "log": f"the launcher's library calls what none of its files defines: {names}. It was "
                                    f"built from {built_from}: name each file that defines them (a .cu or .cpp of "
                                    "the repository) in `units`"}
    launcher_name = request["launcher"]
    launcher = {"symbol": LAUNCHER_ADDRESS, "name": launcher_name, "params": [[t, None] for t in params],
                "returns": returns}
    return {"ok": True, "log": log, "cubin": base64.b64encode(library).decode(), "lowered": {}, "kernels": [launcher]}


# The file nvcc compiles: the kernel's source, and the entry's address taken in host code, which
# makes nvcc emit that instantiation of a template kernel whether or not a launcher in the file does.
_ENTRY_UNIT = '#include "src/{source}"\nvoid *gemmwatch_entry_address = (void *)&{entry};\n'
ENTRY_UNIT_NAME = "gemmwatch_entry.cu"
# A launcher's library: the source; the launcher's address returned by a function the library
# exports, which makes nvcc emit that instantiation of a template launcher ("launch_gemm<float>");
# and a function whose one parameter has the type of that address, so its mangled name spells the
# launcher's parameter types whatever name reached it (worker/compile/cubin_info.launcher_signature). The
# launcher is called through the address, so a name the library does not export (a using-declaration,
# a static member, an inline or extern "C" function) is called all the same.
#
# Where the description names the launcher's kernel (`entry`), that kernel's dynamic shared memory is
# opened to the GPU's opt-in maximum before the address is handed out, as a runner that sets
# cudaFuncAttributeMaxDynamicSharedMemorySize outside its launcher does (ThunderKittens' run_benchmark
# before its inner_run): without it such a launch asks for more than 48 KB and fails. A launcher that
# sets its own keeps its own; a failure here is cleared, so the launcher's own error checks see none.
# A change of this unit's form changes compiler.LAUNCHER_UNIT_FORM, so no cached library of the old one is used.
LAUNCHER_ADDRESS = "gemmwatch_launcher_address"
_LAUNCHER_UNIT = ('#include "src/{source}"\n{adapter}{overload}{open_entry}'
                  'extern "C" void *' + LAUNCHER_ADDRESS + '(void) {{ {call_open}return (void *){address}; }}\n'
                  'void ' + cubin_info.SIGNATURE_FUNCTION + '(decltype({address})) {{}}\n')
_OPEN_ENTRY = ("static void gemmwatch_open_entry(void) {{\n"
               "  cudaFuncAttributes own; int device = 0, most = 0;\n"
               "  const void *kernel = (const void *)&{entry};\n"
               "  if (cudaFuncGetAttributes(&own, kernel) == cudaSuccess && cudaGetDevice(&device) == cudaSuccess\n"
               "      && cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess)\n"
               "    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,\n"
               "                         most - (int)own.sharedSizeBytes);\n"
               "  (void)cudaGetLastError();\n"
               "}}\n")
# A launcher named with its parameter types ("run_pingpong(void*, void*, void*, int, int, int)"): the
# one function of an overloaded name whose parameters those are, its return type deduced (C++11).
_OVERLOAD = ("template <typename... P> struct gemmwatch_overload {\n"
             "  template <typename R> static constexpr auto of(R (*f)(P...)) -> R (*)(P...) { return f; }\n};\n")


# gemmwatch::cute_tensors<launcher> (gemmwatch/cute_tensors.h): the repository's launcher takes CuTe tensors.
# Its call is written here, so that C++ deduces the launcher's own template arguments from the tensors as
# its main's call does; the element types and orders come from the worker as -D macros, which the
# header's cute_tensors_as_described reads (header_libraries.cute_tensor_types).
CUTE_TENSORS = "gemmwatch::cute_tensors<"
_CUTE_CALL = ("struct gemmwatch_cute_launch {{\n"
              "  template <class... T> static void call(T &...tensors) {{ {launcher}(tensors...); }}\n}};\n")


def launcher_address(launcher: str) -> tuple[str, str]:
    """The C++ expression for the launcher's address, and what the unit needs before it."""
    if launcher.replace(" ", "").startswith(CUTE_TENSORS):
        inner = launcher[launcher.index("<") + 1:launcher.rindex(">")].strip()
        return ("&gemmwatch::cute_tensors_as_described<gemmwatch_cute_launch>::run",
                _CUTE_CALL.format(launcher=inner))
    name, _, params = launcher.partition("(")
    if not params:
        return f"&{launcher}", ""
    return f"gemmwatch_overload<{params[:-1]}>::of(&{name})", _OVERLOAD


def _write_kernel_files(request: dict) -> None:
    """The kernel's files under src/ of this process's own folder (worker/compile/compiler.py made it and
    checked every path: plain components, no '..'), and the unit nvcc compiles."""
    for path, text in request["files"].items():
        target = os.path.join("src", path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    adapter = f'#include <{request["adapter"]}>\n' if request.get("adapter") else ""  # worker/compile/header_libraries.py
    if request.get("launcher"):
        address, overload = launcher_address(request["launcher"])
        entry = request.get("entry")
        unit = _LAUNCHER_UNIT.format(source=request["source"], address=address, overload=overload, adapter=adapter,
                                    open_entry=_OPEN_ENTRY.format(entry=entry) if entry else "",
                                    call_open="gemmwatch_open_entry(); " if entry else "")
    else:
        unit = _ENTRY_UNIT.format(source=request["source"], entry=request["entry"])
    with open(ENTRY_UNIT_NAME, "w", encoding="utf-8") as f:
        f.write(unit)
    os.makedirs("tmp", exist_ok=True)


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    release = [line for line in out.splitlines() if "release" in line]
    # "Cuda compilation tools, release 13.5, V13.5.37" -> "13.5.37"
    return release[-1].rsplit(", V", 1)[-1].strip() if release else "unknown"


def _run_nvcc(request: dict) -> dict:
    """nvcc over the entry unit, its temporaries in this folder; the log is nvcc's and the host
    compiler's output, paths relative to this folder (src/...). A launcher's build makes a shared
    library (the host compiler links it, cudart static: nvcc's default) instead of a cubin."""
    shared = bool(request.get("launcher"))
    output = "launcher.so" if shared else "kernel.cubin"
    kind = ["-shared", "-Xcompiler", "-fPIC"] if shared else ["-cubin"]
    # A launcher's library: the repository's other units beside it, each compiled and linked in
    # (paths checked by worker/compile/compiler.py like every file's: plain components, no '..').
    units = [os.path.join("src", unit) for unit in request.get("units") or []] if shared else []
    argv = [request["nvcc"], *kind, *request["options"], "-o", output, ENTRY_UNIT_NAME, *units]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": os.path.abspath("tmp"), "HOME": os.getcwd(),
           "LANG": "C"}
    if request.get("preload"):  # denied reads fail as missing files (worker/compile/absent_reads.py)
        env["LD_PRELOAD"] = request["preload"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=request["timeout_s"])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # nvcc's own children (cicc, ptxas, the host compiler) too
        proc.communicate()
        return {"ok": False, "error": f"nvcc exceeded the {request['timeout_s']:g} s compile time limit; killed"}
    if proc.returncode != 0 or not os.path.exists(output):
        return {"ok": False, "log": log.strip() or f"nvcc failed (exit {proc.returncode})"}
    with open(output, "rb") as f:
        return _built_library(f.read(), log.strip(), request) if shared else _built(f.read(), log.strip(), {})


def _confine(readable: list[str], executable: list[str] = (), writable: list[str] = ()) -> tuple[bool, str]:
    """Landlock: handle every filesystem access right and allow none, so no path can be opened;
    but for reading files and listing folders beneath `readable` (CUDA's header folders), also
    running programs beneath `executable` (nvcc's toolkit and the host compiler), and making and
    writing files beneath `writable` (an nvcc compile's own folder). The layer is the launcher
    jail's own (worker/launch/host_jail.py): TCP and signals outside this process's domain are
    closed too, and from ABI 8 every thread is confined."""
    try:
        # Here: imported only to confine (standard library and pyseccomp, nothing of the worker's settings).
        from worker.launch.host_jail import restrict_paths
        from worker.launch.jail_terms import Allowance

        runs = bool(executable)
        # What every dynamically linked program opens as it starts, and what compilers write to.
        allowance = Allowance(readable=(*readable, *(["/etc/ld.so.cache"] if runs else [])),
                              writable=tuple(writable), executable=tuple(executable),
                              devices=("/dev/null",) if runs else ())
        how = restrict_paths(allowance)
    except Exception as exc:  # no Landlock in this kernel (or a sandbox such as gVisor)
        return False, f"Landlock unavailable: {type(exc).__name__}: {exc}"
    try:
        os.open("/", os.O_RDONLY)
    except PermissionError:
        return True, how
    return False, "Landlock applied but / is still readable"


def nvcc_main(request: dict) -> None:
    """An nvcc compile: the kernel's files written here, then confinement (read and run the toolkit
    and the host compiler, write in this folder only), then nvcc."""
    try:
        version = _nvcc_version(request["nvcc"])
        if not request.get("probe"):
            _write_kernel_files(request)
    except Exception as exc:
        _reply({"ok": False, "error": f"nvcc unavailable: {exc}", "confined": False})
        return
    executable = [d for d in request.get("executable", []) if os.path.isdir(d)]
    preload = request.get("preload")
    readable = [d for d in [*request.get("readable", []), *([os.path.dirname(preload)] if preload else [])]
                if os.path.isdir(d)]
    confined, how = _confine(readable, executable, [os.getcwd()])
    if not request.get("probe"):
        how += ("; a read it denies fails as a missing file" if preload else
                "; NOT applied: a denied read still differs from a missing file (no C compiler built the shim)")
    _answer(request, {"confined": confined, "confinement": how, "nvcc": version}, lambda: _run_nvcc(request))


def _answer(request: dict, reply: dict, build) -> None:
    """Either compiler's reply: a probe's, a refusal where confinement was required and not had,
    or the build's (`build()`, run only then)."""
    if request.get("probe"):
        reply["ok"] = True
    elif not reply["confined"] and request.get("require_confinement"):
        reply.update(ok=False, error=f"refused: the compiler could not be confined ({reply['confinement']})")
    else:
        reply.update(build())
    _reply(_log_bounded(reply, request))


_reply_channel = None


def _keep_stdout_for_the_reply() -> None:
    """The reply's channel is fd 1 as the worker opened it, kept under another number; fd 1 and
    sys.stdout then lead to stderr. What a job's module prints as it is read (`noise = print(...)`),
    or a library as it compiles, can then never be taken for the reply (tried: it made the reply
    unreadable JSON)."""
    global _reply_channel
    _reply_channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _reply(reply: dict) -> None:
    json.dump(reply, _reply_channel)
    _reply_channel.flush()


def main() -> None:
    _keep_stdout_for_the_reply()
    request = json.load(sys.stdin)
    if request.get("tool") == "nvcc":
        nvcc_main(request)
        return
    if request.get("tool") == "triton":  # worker/compile/triton_sandbox.py, by path as cubin_info
        _load_sibling("triton_sandbox").main(request, _confine, _answer, _built)
        return
    if request.get("tool") == "helion":  # worker/compile/helion_sandbox.py: a Helion kernel's Triton code
        _load_sibling("helion_sandbox").main(request, _confine, _answer)
        return
    try:
        if request.get("nvrtc_library"):
            # Loaded first, so cuda-bindings takes this one (cuda-pathfinder uses an NVRTC already
            # loaded in the process before it searches wheels and the system).
            ctypes.CDLL(request["nvrtc_library"], mode=ctypes.RTLD_GLOBAL)
        from cuda.bindings import nvrtc  # now: after the pinned library, which it must take

        version = ".".join(map(str, _check(nvrtc.nvrtcVersion(), "nvrtcVersion")))
        warm = _compile(_WARM_UP, "warm_up.cu", [o for o in request["options"] if not o.startswith("-D")], [])
        if not warm["ok"]:
            raise RuntimeError(f"NVRTC cannot compile a trivial kernel: {warm['log']}")
    except Exception as exc:
        _reply({"ok": False, "error": f"NVRTC unavailable: {exc}", "confined": False})
        return
    # Only folders that exist and are folders: a request names them, and Landlock needs an open path.
    readable = [d for d in request.get("readable", []) if os.path.isdir(d)]
    confined, how = _confine(readable)
    _answer(request, {"confined": confined, "confinement": how, "nvrtc": version},
            lambda: _compile(request["source"], request["name"], request["options"], request["name_expressions"],
                             request.get("headers")))


def _log_bounded(reply: dict, request: dict) -> dict:
    """A log of any size (a few macros doubling around an undefined name make 165 MB: issue 37,
    row 3) goes back as its head and tail, with one line between them saying how much was left out
    (the line core/text_bounds.py writes; worker/compile/compile_log.py withholds what follows it up to the
    next diagnostic, whose location it cannot see)."""
    limit = int(request.get("log_max_bytes") or 0)
    log = reply.get("log")
    if not limit or not isinstance(log, str):
        return reply
    data = log.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return reply
    head = data[: limit // 2].decode("utf-8", errors="ignore")
    tail = data[len(data) - limit // 2:].decode("utf-8", errors="ignore")
    left_out = len(data) - len(head.encode()) - len(tail.encode())
    return {**reply, "log": f"{head}\n\u2026 {left_out} bytes left out \u2026\n{tail}"}


if __name__ == "__main__":
    main()
