"""The child of worker/launch/launcher_call.py: the fresh process that calls a job's launcher once, confined.

Run as a script (`python -s -B launcher_child.py REPORT_FD PARENT_PID`, the request on stdin), it
takes the steps worker/launch/launcher_call.py's docstring lists: dies with its parent, drops its
privileges, puts the set-up layer in place while single-threaded, runs the hook's set-up, confines
itself for good (worker/launch/host_jail.py), then loads the job's library and lets the hook call the
launcher, saying each step on its report pipe (JSON lines). Only the standard library, pyseccomp,
worker.launch.host_jail and the hook's module are imported here.
"""

import ctypes
import importlib
import importlib.util
import json
import os
import struct
import sys
import sysconfig
from pathlib import Path

if __name__ == "__main__":
    # worker/ is sys.path[0] for a script; the project's root is wanted instead (worker.launch.host_jail,
    # hooks named by module).
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # the project root, above worker/launch/

from worker.launch.host_jail import Allowance, ConfinementUnavailable, confine, drop_capabilities, die_with_parent, \
    restrict_paths, set_limits, set_no_new_privs, thread_count  # noqa: E402


def needed_libraries(path: str) -> list[str]:
    """The DT_NEEDED names of an ELF64 shared library, read from the file (nothing of it runs)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # 64-bit, little-endian
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    entries = [struct.unpack_from("<qQ", data, off) for off in range(dynamic[0], dynamic[0] + dynamic[1], 16)]
    strtab = next((v for tag, v in entries if tag == 5), None)  # DT_STRTAB, a virtual address
    file_off = next((off + strtab - va for va, off, size in loads if strtab is not None and va <= strtab < va + size),
                    None)
    if file_off is None:
        return []
    names = []
    for tag, value in entries:
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            start = file_off + value
            names.append(data[start:data.index(b"\0", start)].decode(errors="replace"))
    return names


def preload_system_libraries(library: str) -> list[str]:
    """Load, before confinement, the libraries the job's library names that the system's search
    finds (libstdc++, libm, libdl, libcudart ...), so that its dlopen later needs no system folder
    to be readable. Only plain sonames, found as any program would (not through the library's own
    RUNPATH): what runs here is the system's libraries' constructors, not the job's."""
    loaded = []
    # The CUDA driver's symbols made global: a launcher that calls the driver API (Hopper kernels'
    # launchers make their tensor maps with cuTensorMapEncodeTiled) is built without -lcuda (no
    # wheel carries a stub to link against) and finds those symbols here at dlopen. The process
    # holds the driver already, through the runtime; this only lets the job's library see it.
    try:
        ctypes.CDLL("libcuda.so.1", mode=os.RTLD_GLOBAL)
        loaded.append("libcuda.so.1")
    except OSError:
        pass  # no driver (a machine without a GPU): a launcher that needs it says so when loaded
    # Likewise the CUDA math libraries: a repository's runner that calls them (its own cuBLAS check,
    # cuRAND for its inputs: "-lcublas -lcurand" in its Makefile) is built without linking them and
    # finds the worker's own here, the release every result records. Those the set-up did not load
    # (cuRAND) are loaded first, from beside the cuBLAS the set-up loaded.
    load_math_libraries_named_by(library)
    for path in loaded_cuda_libraries():
        try:
            ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
            loaded.append(os.path.basename(path))
        except OSError:
            continue
    for name in needed_libraries(library):
        if "/" in name:
            continue
        try:
            ctypes.CDLL(name)
        except OSError:
            continue  # one of the job's own, beside it: loaded from its folder at dlopen
        loaded.append(name)
    return loaded


CUDA_LIBRARIES = ("libcublas.so", "libcublasLt.so", "libcurand.so")
# Each math library by the prefix of its API's names, as they stand in a library that calls it.
_API_PREFIX = {"libcublasLt": b"cublasLt", "libcublas": b"cublas", "libcurand": b"curand"}


def load_math_libraries_named_by(library: str) -> list[str]:
    """Load, global, each CUDA math library whose API a job's library names and this process has
    not loaded: found beside those it has (the worker's CUDA), else by the system's search."""
    with open(library, "rb") as f:
        data = f.read()
    loaded = loaded_cuda_libraries()
    have = {os.path.basename(p).split(".so")[0] for p in loaded}
    folders = sorted({os.path.dirname(p) for p in loaded})
    added = []
    for stem, prefix in _API_PREFIX.items():
        if stem in have or prefix not in data:
            continue
        beside = [os.path.join(d, f) for d in folders for f in sorted(os.listdir(d))
                  if f.split(".so")[0] == stem and ".so" in f]
        for candidate in [*beside, f"{stem}.so"]:
            try:
                ctypes.CDLL(candidate, mode=os.RTLD_GLOBAL)
            except OSError:
                continue
            added.append(os.path.basename(candidate))
            break
    return added


def loaded_cuda_libraries() -> list[str]:
    """The paths of the CUDA math libraries this process has loaded (/proc/self/maps)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(CUDA_LIBRARIES))


def python_installation() -> tuple[str, ...]:
    """The folders Python reads its own modules from, for the set-up layer."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths |= {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted({os.path.realpath(p) for p in paths if p} | {p for p in paths if p}))


def system_libraries() -> tuple[str, ...]:
    """Where the dynamic loader looks: for the set-up layer (CUDA's libraries, the preloads)."""
    dirs = ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache"]
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return tuple(dirs)


def load_hook(spec: str):
    """'module:Class' or '/path/file.py:Class'."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(f"gemmwatch_hook_{Path(where).stem}", where)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


class _Reporter:
    def __init__(self, fd: int):
        self.fd = fd

    def say(self, event: str, **fields) -> None:
        data = (json.dumps({"event": event, **fields}) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]


def child_main(report_fd: int, parent_pid: int) -> None:
    report = _Reporter(report_fd)
    # 1. Before anything else: die with the parent, no core, a file-size and CPU limit, no
    # capability and no new privileges, for this thread and every thread made later.
    die_with_parent(parent_pid)
    request = json.loads(sys.stdin.buffer.read())
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    set_limits(cpu_seconds=request["cpu_seconds"], file_bytes=request["file_bytes"])
    set_no_new_privs()
    drop_capabilities()
    require = request["require"]
    missing, first_layer = [], None
    try:
        hook = load_hook(request["hook"])(request["hook_args"])
        # 2. The set-up layer, while single-threaded.
        threads = thread_count()
        if threads != 1:
            missing.append(f"{threads} threads before the set-up layer: the others are not under it")
        # Both allowances are asked for now, while /dev and the rest can still be listed.
        setup = Allowance(readable=python_installation() + system_libraries() + ("/proc/self/task",)
                          + tuple(request["setup_readable"]), devices=("/dev/null",)).plus(hook.setup_allowance())
        allowance = Allowance.from_dict(request["allowance"]).plus(hook.call_allowance())
        try:
            first_layer = "at set-up, " + restrict_paths(
                setup, said="reading the Python installation, the system's libraries and the set-up's own paths")
        except ConfinementUnavailable as exc:
            if require:
                report.say("refused", message=f"refused: the launcher's process cannot be confined ({exc})")
                return
            missing.append(str(exc))
        # 3. Our set-up, then the job library's system dependencies, then confinement for good.
        hook.set_up()
        if request.get("setup_only"):  # the set-up alone (worker/launch/setup_kernels.py): nothing of the job's
            report.say("set_up")
            return
        preload_system_libraries(request["library"])
    except Exception as exc:
        report.say("setup_failed", message=f"the set-up failed: {type(exc).__name__}: {exc}")
        return
    try:
        confinement = confine(allowance, cpu_seconds=request["cpu_seconds"], file_bytes=request["file_bytes"],
                              require=require)
    except ConfinementUnavailable as exc:
        report.say("refused", message=f"refused: the launcher's process cannot be confined ({exc})")
        return
    described = "; ".join([*filter(None, [first_layer]), confinement.describe(), *(f"NOT applied: {m}" for m in missing)])
    report.say("confined", confinement=described)
    # 4. The job's code, from here on: its constructors at dlopen, then the launcher.
    report.say("loading")
    try:
        function = getattr(ctypes.CDLL(request["library"], mode=os.RTLD_NOW | os.RTLD_LOCAL), request["symbol"])
        if request.get("through_address"):  # the symbol returns the launcher's address (worker/compile/launcher_library.py)
            function.restype = ctypes.c_void_p
            function = ctypes.CFUNCTYPE(None)(function())
    except OSError as exc:
        report.say("load_failed", message=f"the library could not be loaded: {exc}")
        return
    except AttributeError:
        report.say("load_failed", message=f"the library has no function {request['symbol']}")
        return
    report.say("calling")
    hook.call(function)
    report.say("returned")
    try:
        result = hook.after_call()
    except Exception as exc:
        report.say("after_call_failed", message=f"{type(exc).__name__}: {exc}")
        report.say("finished", result=None)
        return
    report.say("finished", result=result)


if __name__ == "__main__":
    import traceback  # now: after confinement no module can be read

    _status = 0
    try:
        child_main(int(sys.argv[1]), int(sys.argv[2]))
    except BaseException:
        traceback.print_exc()
        _status = 1
    finally:
        # No interpreter shutdown: nothing of the job's (atexit handlers, threads, destructors) runs after.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_status)
