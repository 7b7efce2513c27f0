"""Layer 3 on its own: what a compile log shows of a job's build.

The logs in tests/fixtures/compile_logs are real: nvcc 13.5 (the nvidia-cuda-nvcc wheel, g++ 12
as its host compiler) building a kernel's files in /tmp/gemmwatch-build-k3x9, with the wheel's
folder written as /opt/gemmwatch/.venv; the NVRTC ones are made here by the compile step.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from core.description import kernel_includes
from core.settings import Settings
from worker.compile import compiler
from worker.compile.compile_log import WITHHELD, filter_log, own_file_names, rename_files
from worker.compile.nvcc import nvcc_path

LOGS = Path(__file__).parent / "fixtures" / "compile_logs"
BUILD = "/tmp/gemmwatch-build-k3x9"
TOOLKIT = "/opt/gemmwatch/.venv/lib/python3.11/site-packages/nvidia/cu13/include"
OWN = {"src/k.cu", "src/kernels/common.cuh"}


def shown(name: str, toolkit_dirs=(TOOLKIT,), build_dir=BUILD) -> str:
    """A fixture's log as a job reads it: filtered, then its build folder's paths made relative."""
    return rename_files(filter_log((LOGS / f"{name}.txt").read_text(), OWN, toolkit_dirs, build_dir), build_dir=build_dir)


def test_own_errors_are_shown_by_their_path_and_a_host_headers_notes_are_withheld():
    text = shown("nvcc_own_errors_host_notes")
    assert text.splitlines()[0] == 'src/kernels/common.cuh(3): error: identifier "undefined_in_header" is undefined'
    assert 'src/k.cu(4): error: identifier "nope" is undefined' in text
    assert 'src/k.cu(2): warning #177-D: function "host_side" was declared but never referenced' in text
    # The two notes quote lines of /usr/include/c++/12/bits/stl_vector.h: one line says so for both.
    assert "stl_vector.h" not in text and "value_type&& __x" not in text and text.count(WITHHELD) == 1
    assert "Remark: The warnings can be suppressed" in text
    assert text.endswith('3 errors detected in the compilation of "src/k.cu".')
    assert BUILD not in text


def test_gccs_own_diagnostic_and_its_include_chain_are_shown_by_their_paths():
    assert shown("gcc_missing_header").splitlines() == [
        "In file included from src/k.cu:1:",
        "src/kernels/common.cuh:2:10: fatal error: gemm_tiles.h: No such file or directory",
        "    2 | #include <gemm_tiles.h>",
        "      |          ^~~~~~~~~~~~~~",
        "compilation terminated.",
    ]
    text = shown("gcc_in_function")
    assert text.startswith("src/kernels/common.cuh: In function ‘int h(int)’:\nsrc/kernels/common.cuh:3:79: error:")


def test_a_note_in_a_host_header_goes_with_its_include_chain():
    """gcc's note quotes /usr/include/features.h; the chain that leads there (through the toolkit's
    headers and nvcc's command line) is withheld with it, the job's own warning kept."""
    text = shown("gcc_host_header_note")
    assert text.splitlines() == [
        "In file included from src/k.cu:1:",
        'src/kernels/common.cuh:2: warning: "__GLIBC_USE" redefined',
        "    2 | #define __GLIBC_USE(F) 1 +",
        "      | ",
        WITHHELD,
    ]


def test_a_file_past_layers_1_and_2_is_withheld_however_its_path_climbs():
    """/tmp/gemmwatch-build-k3x9/src/kernels/../../../../etc/passwd starts with the build folder
    and is /etc/passwd: normalized first, it is no file of the job's."""
    for text in (shown("nvcc_passwd_past_layers"), shown("nvcc_relative_paths", build_dir=None)):
        assert "root:" not in text and "passwd" not in text and WITHHELD in text
    assert shown("nvcc_relative_paths", build_dir=None).startswith('src/kernels/common.cuh(2): error: identifier "oops"')


def test_a_diagnostic_in_a_toolkit_header_is_shown_and_only_there():
    """The same lines of cuda_fp16.h, named through nvcc's <toolkit>/bin/../include: shown where
    that folder is the toolkit's, withheld where it is not."""
    text = shown("nvcc_toolkit_header_errors")
    assert f"{TOOLKIT.removesuffix('/include')}/bin/../include/cuda_fp16.h(449): error: invalid combination" in text
    assert "__half2short_rz" in text and WITHHELD not in text
    assert shown("nvcc_toolkit_header_errors", toolkit_dirs=()) == WITHHELD


@pytest.mark.parametrize("located, kept", [
    ("crt/mma.h(12): error: x", True),  # a CUDA header NVRTC names by its bare name
    ("cuda_fp16.hpp(3): warning: x", True),
    ("passwd(1): error: x", False),  # a bare name, but no CUDA header's
    ("../crt/mma.h(1): error: x", False),
    ("/usr/include/stdio.h(1): error: x", False),
    ("<command-line>:1: warning: x", True),  # gcc's name for nvcc's -include: no file
])
def test_which_names_are_shown(located, kept):
    text = filter_log(f"{located}\n  quoted line\n", {"job.cu"}, (TOOLKIT,))
    assert (text == f"{located}\n  quoted line") == kept and (text == WITHHELD) != kept


def test_a_withheld_files_lines_never_start_a_diagnostic_of_their_own():
    """Every line a compiler quotes is indented: one that reads like a location of the job's own
    (or an include chain's line) is still part of what it quotes."""
    log = ("/etc/shadow(1): error: x\n  src/k.cu(1): error: root:$6$secret\n"
           "                 from src/k.cu:1,\n  compilation terminated.\n1 error detected in the compilation of \"src/k.cu\".")
    assert filter_log(log, OWN) == f'{WITHHELD}\n1 error detected in the compilation of "src/k.cu".'


def test_a_spelled_header_is_named_by_its_path_in_the_kernels_folder():
    log = 'kernels/common.cuh(3): error: expected a ";"\n  int x\n       ^\n'
    assert rename_files(log, {"kernels/common.cuh": "src/kernels/common.cuh"}).startswith("src/kernels/common.cuh(3)")
    assert own_file_names('#line 1 "common.cuh"\nint x;\n', "mine.cu") == {"mine.cu", "common.cuh"}


def test_nvrtc_naming_an_incomplete_toolkits_mma_h_is_shown(tmp_path):
    """The issue's log, made by NVRTC here: CUDA 13's mma.h in a folder without crt/mma.h. Once
    withheld, the user read only "1 catastrophic error"; the diagnostic points into a CUDA header
    and leaks nothing, so it is shown."""
    real = kernel_includes.toolkit_include_dirs()
    if not real:
        pytest.skip("no CUDA headers in this environment")
    incomplete = tmp_path / "include"
    incomplete.mkdir()
    shutil.copy(Path(real[0]) / "mma.h", incomplete / "mma.h")
    source = '#include <mma.h>\nextern "C" __global__ void k(float *c) { c[0] = 1.0f; }\n'
    with pytest.raises(compiler.CompileError) as failed:  # untrusted=False: the raw log
        compiler.compile_kernel(source, name="k.cu", options=["-arch=sm_90", f"-I{incomplete}"], untrusted=False,
                                cfg=Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data")), include_dirs=(str(incomplete),))
    raw = str(failed.value)
    text = filter_log(raw, {"k.cu"}, (str(incomplete),))
    assert f'{incomplete}/mma.h(' in text and 'catastrophic error: cannot open source file "crt/mma.h"' in text
    assert filter_log(raw, {"k.cu"}).splitlines()[:2] == [
        WITHHELD, '1 catastrophic error detected in the compilation of "k.cu".']


def test_a_real_nvcc_build_shows_the_jobs_lines_and_withholds_the_hosts(tmp_path):
    """The worker's nvcc (the environment's wheel), g++ as its host compiler, the kernel's files in
    a build folder: the job's own errors by their paths, the notes quoting libstdc++ withheld."""
    nvcc = nvcc_path(Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data")))
    if nvcc is None or shutil.which("g++") is None:
        pytest.skip("no nvcc or no g++ here")
    build = tmp_path / "build"
    (build / "src" / "kernels").mkdir(parents=True)
    (build / "src" / "kernels" / "common.cuh").write_text("#pragma once\n#include <vector>\n"
                                                          "__device__ int helper(int x) { return x + oops; }\n")
    (build / "src" / "k.cu").write_text('#include "kernels/common.cuh"\n'
                                        'static void host_side() { std::vector<int> v; v.push_back("no"); }\n')
    run = subprocess.run([str(nvcc), "-arch=sm_90", "-cubin", "-o", str(build / "k.cubin"), str(build / "src" / "k.cu")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "/usr/include/c++" in run.stderr, run.stderr  # the host's lines are there ...
    text = rename_files(filter_log(run.stderr, OWN, kernel_includes.nvcc_include_dirs(str(nvcc)), str(build)),
                        build_dir=str(build))
    assert 'src/kernels/common.cuh(3): error: identifier "oops" is undefined' in text
    assert "src/k.cu(2): error: no instance of overloaded function" in text
    assert "/usr/include" not in text and WITHHELD in text and str(build) not in text  # ... and not here
