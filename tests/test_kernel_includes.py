"""Where an #include may lead, per compiler: NVRTC's in-memory stand-ins and allow-listed CUDA
headers; nvcc's system headers, found by nvcc's own search. And every problem of a kernel's
files named at once."""

import pytest

from core.description import kernel_includes
from core.description.kernel_includes import IncludeRefused, KernelRefused
from core.settings import Settings
from core.description.source_guard import SourceRefused
from worker.compile import compiler

SYSTEM = ["vector", "string.h", "unistd.h", "cuda_runtime.h", "mma.h", "cublas_v2.h"]
KERNEL = 'extern "C" __global__ void k(float *c) { c[0] = 1.0f; }\n'


def includes(*names: str) -> str:
    return "".join(f"#include {name}\n" for name in names)


def test_nvcc_takes_a_plainly_spelled_header_it_does_not_carry_as_a_system_header():
    """nvcc builds a folder of the kernel's files with a host compiler: what the kernel does not
    carry, nvcc's own search finds among the toolkit's and the host's headers."""
    files = {"src/k.cu": includes(*(f"<{n}>" for n in SYSTEM), '"tiles.cuh"', '"log.h"') + KERNEL,
             "src/tiles.cuh": includes("<cstdio>", '"../common/defs.h"'), "common/defs.h": "#define TILE 8\n"}
    headers = kernel_includes.resolve(files, "src/k.cu", compiler="nvcc")
    # A quoted name the kernel does not carry falls back to the system search, as in nvcc.
    assert headers.system == frozenset(SYSTEM + ["log.h", "cstdio"])
    assert headers.needs_toolkit  # nvcc puts cuda_runtime.h in front of every file


@pytest.mark.parametrize("include", ['"../../etc/passwd"', '"x/../../../etc/passwd"', '"../secrets.h"'])
def test_nvcc_refuses_a_system_header_that_climbs(include):
    with pytest.raises(KernelRefused, match="may not climb"):
        kernel_includes.resolve({"src/k.cu": includes(include) + KERNEL}, "src/k.cu", compiler="nvcc")


def test_nvrtc_keeps_its_allow_list():
    """For NVRTC nothing changed but two stand-ins: a host header with no stand-in is refused."""
    source = includes(*(f"<{n}>" for n in SYSTEM)) + KERNEL
    with pytest.raises(KernelRefused) as refused:
        kernel_includes.resolve({"k.cu": source}, "k.cu")
    assert [(p.line, p.reason.split(" is ")[0]) for p in refused.value.problems] == [
        (1, "#include <vector>"), (3, "#include <unistd.h>")]
    assert kernel_includes.resolve({"k.cu": source}, "k.cu", compiler="nvcc").system == frozenset(SYSTEM)
    # What to do about it comes first: a host header is what an nvcc build takes.
    assert all(' set "compiler": "nvcc" to build the file as the repository does' in p.reason
               for p in refused.value.problems), refused.value.problems


def test_a_kernel_refusal_is_caught_as_either_old_name():
    """Callers that caught SourceRefused or IncludeRefused catch the refusal that names everything."""
    for caught in (SourceRefused, IncludeRefused):
        with pytest.raises(caught):
            kernel_includes.resolve({"k.cu": "#import <x>\n#include <sys/socket.h>\n"}, "k.cu")


def test_a_file_with_problems_still_leads_to_the_files_it_includes(tmp_path):
    """A folder's refused file is read for its includes all the same: the headers it reaches are
    carried and checked in the same pass, not reported missing."""
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n#pragma GCC poison x\n')
    (tmp_path / "a.cuh").write_text("#pragma once\n#import <y>\n")
    files = kernel_includes.reached_files(tmp_path, "k.cu")
    assert set(files) == {"k.cu", "a.cuh"}
    with pytest.raises(KernelRefused) as refused:
        kernel_includes.resolve(files, "k.cu")
    assert [(p.file, p.line) for p in refused.value.problems] == [("a.cuh", 2), ("k.cu", 2)]


def test_a_logging_header_that_takes_string_h_compiles_with_nvrtc(tmp_path):
    """NVRTC has memcpy and memset in device code; the stand-ins for <string.h> and <cstring> add
    strlen, and std:: names for the three."""
    log_h = ("#pragma once\n#include <string.h>\n"
             "__device__ inline void name_to(char *dst, const char *src) { memcpy(dst, src, strlen(src) + 1); }\n")
    source = ('#include "log.cuh"\n#include <cstring>\n'
              'extern "C" __global__ void k(char *s) { name_to(s, "tile"); std::memset(s + 8, 0, 4); '
              "s[12] = (char)std::strlen(s); }\n")
    headers = kernel_includes.resolve({"k.cu": source, "log.cuh": log_h}, "k.cu")
    assert {"string.h", "cstring"} <= set(headers.by_name) and not headers.needs_toolkit
    built = compiler.compile_kernel(source, name="k.cu", options=["-arch=sm_90"], untrusted=True,
                                    cfg=Settings(GEMMWATCH_DATA_DIR=str(tmp_path)), headers=headers.by_name)
    assert built.cubin_path.is_file()
