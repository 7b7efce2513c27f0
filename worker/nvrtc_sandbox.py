"""The confined compile process (layer 2 of 3 against a hostile job source). Run as a script.

worker/compiler.py starts this file with a fresh interpreter, an environment that holds none
of gemmwatch's settings and a time limit; its memory and CPU limits (argv) it sets itself first. It reads one JSON request on stdin,
loads NVRTC and compiles a throw-away kernel first (so every library NVRTC loads lazily is
already mapped), then confines itself with Landlock so that no file can be opened, listed or
written any more, and only then compiles the job's source. The cubin goes back on stdout.
Files opened before confinement (stdin, stdout, the libraries) stay usable; nothing else is.

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


def _compile(source: str, name: str, options: list[str], name_expressions: list[str]) -> dict:
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
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


def _confine() -> tuple[bool, str]:
    """Landlock: handle every filesystem access right and allow none, so no path can be opened."""
    try:
        import landlock

        abi = landlock.landlock_abi_version()
        landlock.Ruleset().apply()  # all rights handled, no path allowed
    except Exception as exc:  # no Landlock in this kernel (or a sandbox such as gVisor), or no binding
        return False, f"Landlock unavailable: {type(exc).__name__}: {exc}"
    try:
        os.open("/", os.O_RDONLY)
    except PermissionError:
        return True, f"Landlock ABI {abi}: no file can be opened"
    return False, "Landlock applied but / is still readable"


def main() -> None:
    request = json.load(sys.stdin)
    try:
        from cuda.bindings import nvrtc

        version = ".".join(map(str, _check(nvrtc.nvrtcVersion(), "nvrtcVersion")))
        warm = _compile(_WARM_UP, "warm_up.cu", [o for o in request["options"] if not o.startswith("-D")], [])
        if not warm["ok"]:
            raise RuntimeError(f"NVRTC cannot compile a trivial kernel: {warm['log']}")
    except Exception as exc:
        json.dump({"ok": False, "error": f"NVRTC unavailable: {exc}", "confined": False}, sys.stdout)
        return
    confined, how = _confine()
    reply = {"confined": confined, "confinement": how, "nvrtc": version}
    if request.get("probe"):
        reply["ok"] = True
    elif not confined and request.get("require_confinement"):
        reply.update(ok=False, error=f"refused: the compiler could not be confined ({how})")
    else:
        reply.update(_compile(request["source"], request["name"], request["options"], request["name_expressions"]))
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
