"""The confined compile process (layer 2 of 3 against a hostile job source). Run as a script.

worker/compiler.py starts this file with a fresh interpreter, an environment that holds none
of gemmwatch's settings and a time limit; its memory and CPU limits (argv) it sets itself first. It reads one JSON request on stdin,
loads NVRTC and compiles a throw-away kernel first (so every library NVRTC loads lazily is
already mapped), then confines itself with Landlock so that no file can be opened, listed or
written any more (except, read-only, the folders of CUDA's own headers that the request names,
where the kernel includes a device header), and only then compiles the job's source. The
kernel's own files and the stand-ins for host headers come in the request, as NVRTC's in-memory
headers. The cubin goes back on stdout. Files opened before confinement (stdin, stdout, the
libraries) stay usable; nothing else is.

Only the standard library, cuda-bindings (NVRTC) and landlock are imported here: no gemmwatch
module, so nothing of the worker's configuration can be reached from this process.
"""

import sys

# This file's folder (worker/) is sys.path[0] for a script; none of it is wanted here.
sys.path.pop(0)

import resource  # noqa: E402

if __name__ == "__main__":
    # First act, before the request is read or NVRTC loaded, the limits worker/compiler.py passes
    # in argv: memory (RLIMIT_AS, bytes), CPU seconds (SIGXCPU, then SIGKILL a second later: the
    # compile ends even if nobody waits for it any more), and no core file that could hold the
    # source or the log.
    _memory, _cpu_s = int(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (_memory, _memory))
    resource.setrlimit(resource.RLIMIT_CPU, (_cpu_s, _cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

_WARM_UP = 'extern "C" __global__ void gemmwatch_warm_up(float *x) { x[threadIdx.x] *= 2.0f; }'


def _check(result, what: str):
    """cuda-bindings returns (status, value...); raise on a failed NVRTC call."""
    from cuda.bindings import nvrtc

    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what}: {nvrtc.nvrtcGetErrorString(status)[1].decode()}")
    return values[0] if len(values) == 1 else values


def _compile(source: str, name: str, options: list[str], name_expressions: list[str],
             headers: dict[str, str] | None = None) -> dict:
    from cuda.bindings import nvrtc

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
        return {"ok": True, "log": log_text, "cubin": base64.b64encode(cubin).decode(), "lowered": lowered}
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _confine(readable: list[str]) -> tuple[bool, str]:
    """Landlock: handle every filesystem access right and allow none, so no path can be opened;
    but for reading files and listing folders beneath `readable` (CUDA's header folders)."""
    try:
        import landlock

        abi = landlock.landlock_abi_version()
        rules = landlock.Ruleset()  # all rights handled
        if readable:
            rules.allow(*readable, rules=landlock.FSAccess.READ_FILE | landlock.FSAccess.READ_DIR)
        rules.apply()
    except Exception as exc:  # no Landlock in this kernel (or a sandbox such as gVisor), or no binding
        return False, f"Landlock unavailable: {type(exc).__name__}: {exc}"
    try:
        os.open("/", os.O_RDONLY)
    except PermissionError:
        allowed = f", except reading {', '.join(readable)}" if readable else ""
        return True, f"Landlock ABI {abi}: no file can be opened{allowed}"
    return False, "Landlock applied but / is still readable"


def main() -> None:
    request = json.load(sys.stdin)
    try:
        if request.get("nvrtc_library"):
            # Loaded first, so cuda-bindings takes this one (cuda-pathfinder uses an NVRTC already
            # loaded in the process before it searches wheels and the system).
            import ctypes

            ctypes.CDLL(request["nvrtc_library"], mode=ctypes.RTLD_GLOBAL)
        from cuda.bindings import nvrtc

        version = ".".join(map(str, _check(nvrtc.nvrtcVersion(), "nvrtcVersion")))
        warm = _compile(_WARM_UP, "warm_up.cu", [o for o in request["options"] if not o.startswith("-D")], [])
        if not warm["ok"]:
            raise RuntimeError(f"NVRTC cannot compile a trivial kernel: {warm['log']}")
    except Exception as exc:
        json.dump({"ok": False, "error": f"NVRTC unavailable: {exc}", "confined": False}, sys.stdout)
        return
    # Only folders that exist and are folders: a request names them, and Landlock needs an open path.
    readable = [d for d in request.get("readable", []) if os.path.isdir(d)]
    confined, how = _confine(readable)
    reply = {"confined": confined, "confinement": how, "nvrtc": version}
    if request.get("probe"):
        reply["ok"] = True
    elif not confined and request.get("require_confinement"):
        reply.update(ok=False, error=f"refused: the compiler could not be confined ({how})")
    else:
        reply.update(_compile(request["source"], request["name"], request["options"], request["name_expressions"],
                              request.get("headers")))
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
