"""A repository's own host launcher (issue 35, way b): `"launcher": "run_sgemm_tiled"` in a description,
built by nvcc into a shared library, its signature read from the library, its arguments planned.

Everything here is real but the GPU: nvcc from the wheel in the confined compile process, the
library's .dynsym.
"""

import ctypes
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.kernel import KernelDescription, resolve
from core.kernel_folder import load_folder
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES
from worker import compiler, kernel_args, launcher_library
from worker.host_jail import landlock_abi

FIXTURES = Path(__file__).parent / "fixtures"
REPO = FIXTURES / "launcher_repo"
HOST = FIXTURES / "host_launchers"
STANDARD_ARGS = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "stream"]

needs_confinement = pytest.mark.skipif(landlock_abi() < 4 or shutil.which("g++") is None,
                                       reason="needs Landlock ABI 4 and g++ (nvcc's host compiler)")


def described(folder: Path, name: str, **changes) -> KernelDescription:
    desc = next(d for d in load_folder(folder) if d.name == name)
    return KernelDescription.model_validate({**desc.model_dump(mode="json"), **changes})


def built(desc: KernelDescription, cache: Path) -> launcher_library.LauncherLibrary:
    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(cache), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    return launcher_library.build(resolve(desc, {}, H100_FIGURES, "job"), "9.0", cfg)


# --- the description ----------------------------------------------------------------------------

def test_a_launcher_is_built_by_nvcc_only():
    with pytest.raises(ValidationError, match='launcher: host code is built by nvcc only'):
        described(REPO, "launcher_run_sgemm_tiled", compiler="nvrtc", flags=[])


def test_a_stream_is_a_launchers_parameter_only():
    with pytest.raises(ValidationError, match='"stream" is a launcher\'s parameter'):
        described(REPO, "launcher_sgemm_tiled", args=STANDARD_ARGS)


def test_a_launcher_takes_no_tensor_map_of_the_runners():
    with pytest.raises(ValidationError, match="launcher: tensor_maps are the runner's"):
        described(REPO, "launcher_run_sgemm_tiled", args=[*STANDARD_ARGS, "A_map"], tensor_maps={"A": {"box": [8, 8]}})


def test_a_launchers_name_is_a_cpp_name_with_template_arguments():
    assert described(REPO, "launcher_launch_gemm").launcher == "launch_gemm<float>"
    with pytest.raises(ValidationError, match="launcher"):
        described(REPO, "launcher_run_sgemm_tiled", launcher="run(); system(\"sh\")")


# --- the build, the signature, the plan -------------------------------------------------------

@needs_confinement
@pytest.mark.parametrize(("name", "passing", "first"), [
    ("launcher_run_sgemm_tiled", ["u64", "u64", "u64", "f32", "ptr", "ptr", "f32", "ptr", "ptr"], "M: unsigned long"),
    # a template nothing in the file instantiates; alpha and beta `float const*`: host pointers
    ("launcher_launch_gemm", ["u64", "u64", "u64", "&f32", "ptr", "u64", "ptr", "u64", "&f32", "ptr", "u64", "ptr"],
     "M: unsigned long"),
])
def test_nvcc_builds_the_library_and_its_symbols_say_the_launchers_types(name, passing, first, shared_kernel_cache):
    library = built(described(REPO, name), shared_kernel_cache)
    assert library.compiler.startswith("nvcc 13."), library.compiler
    assert library.path.suffix == ".so" and library.path.read_bytes()[:4] == b"\x7fELF"
    assert [how for _role, how in library.plan.passing] == passing
    assert library.plan.describe()[0] == first and library.plan.describe()[-1] == "stream: CUstream_st*"


@needs_confinement
def test_a_description_that_does_not_fit_the_launcher_is_refused_by_name(shared_kernel_cache):
    no_stream = described(REPO, "launcher_run_sgemm_tiled", args=["M", "N", "K", "alpha", "A", "B", "beta", "C"])
    with pytest.raises(kernel_args.ArgumentMismatch, match=r"run_sgemm_tiled takes 9 parameter\(s\).*name 8"):
        built(no_stream, shared_kernel_cache)
    swapped = described(REPO, "launcher_run_sgemm_tiled",
                        args=["M", "N", "K", "alpha", "A", "B", "beta", "stream", "C"])
    with pytest.raises(kernel_args.ArgumentMismatch, match=r"parameter 8 \(float\*\) is named stream.*cudaStream_t"):
        built(swapped, shared_kernel_cache)
    with pytest.raises(compiler.CompileError,
                       match=r"\(the unit that names the launcher\).*\"run_sgemm\" is undefined"):
        built(described(REPO, "launcher_run_sgemm_tiled", launcher="run_sgemm"), shared_kernel_cache)
    with pytest.raises(compiler.CompileRefused, match=r"launcher 'internal_launcher' is not among the functions the "
                                                      r"build made \(.*host_gemm,"):
        built(described(HOST, "host_gemm", launcher="internal_launcher"), shared_kernel_cache)
    with pytest.raises(kernel_args.ArgumentMismatch, match=r'c_launcher is extern "C"'):
        built(described(HOST, "host_gemm", launcher="c_launcher"), shared_kernel_cache)


def test_arguments_are_marshalled_in_the_launchers_own_types():
    plan = kernel_args.plan("launch", ("M", "N", "K", "alpha", "A", "lda", "beta", "C", "stream"),
                            [["int", None], ["unsigned long", None], ["long long", None], ["__half const*", None],
                             ["float const*", None], ["int", None], ["__half", None], ["float*", None],
                             ["CUstream_st*", None]], "float32", "float32", host=True)
    assert [how for _r, how in plan.passing] == ["i32", "u64", "i64", "&f16", "ptr", "i32", "f16", "ptr", "ptr"]
    named = {"M": 7, "N": 5000000000, "K": 3, "alpha": 0.1, "A": "A", "lda": 3, "beta": -0.5, "C": "C", "stream": "S"}
    args = launcher_library.arguments(plan, named, {"A": 0x1000, "C": 0x2000, "S": 0x30}.__getitem__)
    assert args.argtypes[:3] == (ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64)
    assert args.values[1].value == 5000000000 and args.values[4] == 0x1000 and args.values[8] == 0x30
    # alpha: a host pointer to a __half (0.1 -> 0x2e66); beta: a __half by value (-0.5 -> 0xb800)
    assert ctypes.c_uint16.from_address(args.values[3]).value == 0x2E66 and args.values[6].value == 0xB800
