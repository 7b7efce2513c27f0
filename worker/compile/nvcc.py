"""What an nvcc build of a kernel needs: which nvcc, which host compiler folders it runs from, and
the command line, as the repository's own build would give it.

A repository keeps each kernel's launcher, host headers and explicit instantiations in the same
`.cu` and builds it with nvcc; its figures come from nvcc's code, which can differ from NVRTC's
by tens of percent for the same kernel (docs/BENCHMARKS.md, issue 19). So a description may say
`"compiler": "nvcc"` with the repository's `flags`; the build runs in the same confined compile
process as NVRTC's (worker/compile/compile_sandbox.py), which writes the kernel's files into a folder of
its own, may run nvcc and the host compiler, read their folders and write only its own.
"""

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from core.description import compile_flags
from core.description.kernel import Launch
from core.description.kernel_includes import nvcc_include_dirs, toolkit_homes, toolkit_includes

# A repository's host code includes cuBLAS's header as often as not (its launcher beside its runner's
# cuBLAS call, or a shared header); the nvidia-cuda-nvcc wheel's toolkit has no cuBLAS.
CUBLAS_HEADER = "cublas_v2.h"
# Every header of the nvidia-cublas wheel a repository includes (AD2605/gemm-zoo's runner: <cublasLt.h>).
CUBLAS_HEADERS = frozenset({CUBLAS_HEADER, "cublasLt.h", "cublas.h", "cublas_api.h", "cublasXt.h"})


def nvcc_path(cfg) -> str | None:
    """GEMMWATCH_NVCC, else the toolkit's nvcc (toolkit_program)."""
    if getattr(cfg, "nvcc", None):
        return str(cfg.nvcc)
    return toolkit_program("nvcc")


def toolkit_program(name: str) -> str | None:
    """A CUDA toolkit program (nvcc, cuobjdump): the nvidia-cuda-* wheel's (the same release as the
    NVRTC wheel), else CUDA_HOME's, else the first on PATH."""
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(location).glob(f"cu*/bin/{name}"), reverse=True):
            return str(candidate)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / name).is_file():
            return str(Path(home) / "bin" / name)
    return shutil.which(name)


def toolkit_root(nvcc: str) -> str:
    """The toolkit an nvcc belongs to (bin/.., with nvvm/, include/ and its libraries)."""
    return str(Path(nvcc).resolve().parent.parent)


@functools.cache
def host_compiler_dirs() -> tuple[str, ...]:
    """The folders the host compiler runs from and reads: its programs, its own libraries and
    headers, the shared libraries they load, and the system's headers (public files all; no
    /etc, no home, no data folder)."""
    compiler = shutil.which("g++") or shutil.which("gcc")
    if compiler is None:
        return ()
    found = {str(Path(compiler).parent), str(Path(compiler).resolve().parent), "/usr/include"}
    try:
        machine = subprocess.run([compiler, "-dumpmachine"], capture_output=True, text=True, timeout=30).stdout.strip()
        # Its own libraries (/usr/lib/gcc/<machine>/<version>/libgcc.a) and its compiler proper
        # (cc1plus: beside them on Debian, under /usr/libexec/gcc/<machine>/<version> on Ubuntu).
        own = [subprocess.run([compiler, option], capture_output=True, text=True, timeout=30).stdout.strip()
               for option in ("-print-libgcc-file-name", "-print-prog-name=cc1plus")]
    except (OSError, subprocess.SubprocessError):
        machine, own = "", []
    for path in own:
        if os.path.isabs(path):  # <prefix>/gcc/<machine>/<version>/<file> -> <prefix>/gcc
            found.add(str(Path(path).resolve().parents[2]))
    for lib in ("/usr/lib64", "/lib64", f"/usr/lib/{machine}" if machine else "", f"/usr/include/{machine}"):
        if lib and os.path.isdir(lib):
            found.add(str(Path(lib).resolve()))
    return tuple(sorted(d for d in found if os.path.isdir(d)))


def library_target(arch: str) -> str:
    """-arch=sm_90a as a shared library's build is given it: -gencode=arch=compute_90a,code=sm_90a,
    the GPU's code and nothing else. (With -arch=sm_90a, nvcc 13 also embeds compute_90's PTX in
    anything but a cubin, and sm_90a-only instructions, wgmma's, fail to assemble for it.)"""
    sm = arch.removeprefix("-arch=")
    return f"-gencode=arch={sm.replace('sm_', 'compute_', 1)},code={sm}"


def options(launch: Launch, arch: str) -> list[str]:
    """nvcc's command line but the input and output: the target, the repository's flags as the
    worker builds with them (core/description/compile_flags.py: the target and libraries taken out), the
    kernel's defines, and its include folders (as paths under the build folder's src/)."""
    defines = [f"-D{k}={v}" for k, v in sorted(launch.defines.items())]
    # "." names the repository's root (src itself), as its own -I line does; each folder once, in its order.
    folders = ["src" if d == "." else f"src/{d}" for d in launch.include_dirs] + ["src"]
    includes = [f"-I{folder}" for folder in dict.fromkeys(folders)]
    return [arch, *compile_flags.parse(list(launch.flags)).nvcc, *defines, *includes]


def wheel_include_dirs() -> list[Path]:
    """The header folders of the nvidia-* wheels installed here (nvidia/cu13/include for CUDA 13's,
    nvidia/cublas/include for CUDA 12's cuBLAS), newest release first."""
    spec = importlib.util.find_spec("nvidia")
    return [folder for location in ((spec.submodule_search_locations or []) if spec else [])
            for folder in [*sorted(Path(location).glob("cu*/include"), reverse=True),
                           Path(location) / "cublas" / "include"]]


@functools.cache
def cublas_headers(nvcc: str) -> str | None:
    """The folder of cuBLAS's headers where nvcc's own toolkit lacks them: an nvidia-cublas wheel's,
    else CUDA_HOME's, CUDA_PATH's or /usr/local/cuda's include; None where the toolkit has them (nvcc
    finds them itself) or where none is on this machine (nvcc then says which header it missed)."""
    if any((Path(d) / CUBLAS_HEADER).is_file() for d in nvcc_include_dirs(nvcc)):
        return None
    homes = [Path(home) / "include" for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if home]
    for folder in [*wheel_include_dirs(), *homes, Path("/usr/local/cuda/include")]:
        if (folder / CUBLAS_HEADER).is_file() and "," not in str(folder):
            return str(folder.resolve())
    return None


_MISSED_HEADER = re.compile(r"fatal error: ([\w./+-]+): No such file or directory")


def missing_header_hint(log: str, nvcc: str) -> str:
    """Where nvcc's log says it missed a header: cuBLAS's (where cublas_headers looked, and how to
    get them), or one that a full CUDA toolkit on this machine holds but the nvcc in use lacks (the
    nvidia-cuda-nvcc wheel carries part of the toolkit: cuda-samples' <cuda_profiler_api.h>)."""
    missed = _MISSED_HEADER.search(log)
    if missed is None:
        return ""
    name = missed.group(1)
    if name in CUBLAS_HEADERS:
        return (f"\n(gemmwatch: cuBLAS's headers are neither in {toolkit_root(nvcc)}/include nor in an nvidia-cublas "
                "wheel, CUDA_HOME, CUDA_PATH or /usr/local/cuda on this worker: install gemmwatch[gpu], which brings "
                "the nvidia-cublas wheel, or set CUDA_HOME to a full CUDA toolkit)")
    if ".." in name.split("/") or name.startswith("/"):
        return ""
    own = Path(toolkit_root(nvcc)).resolve()
    for toolkit in full_toolkits():
        if toolkit != own and any((include / name).is_file() for include in toolkit_includes(toolkit)):
            return (f"\n(gemmwatch: {name} is a CUDA toolkit header that the nvcc in use ({nvcc}) lacks, and the "
                    f"toolkit at {toolkit} has it: set GEMMWATCH_NVCC={toolkit}/bin/nvcc on this worker)")
    return ""


def full_toolkits() -> list[Path]:
    """The CUDA toolkits installed on this machine with an nvcc of their own: CUDA_HOME's, CUDA_PATH's,
    then those side by side under /usr/local."""
    found: dict[Path, None] = {}
    for home in toolkit_homes():
        if (home / "bin" / "nvcc").is_file():
            found.setdefault(home.resolve(), None)
    return list(found)


def request(launch: Launch, nvcc: str, arch: str, timeout_s: float) -> dict:
    """The confined compile process's request for an nvcc build of this kernel. cuBLAS's headers from
    beside the toolkit (cublas_headers) are searched after every other folder (-idirafter), so that
    folder's other CUDA headers, perhaps of another release, never stand in for the toolkit's own."""
    cublas = cublas_headers(nvcc)
    return {"tool": "nvcc", "nvcc": nvcc, "files": dict(launch.files), "source": launch.source,
            "entry": launch.entry, "units": list(launch.units),
            "options": [*options(launch, arch), *([f"-Xcompiler=-idirafter,{cublas}"] if cublas else [])],
            "readable": [cublas] if cublas else [],
            "timeout_s": max(1.0, timeout_s - 2),
            "executable": [toolkit_root(nvcc), *host_compiler_dirs()]}
