"""Issue 48: a repository as it is, `gemmwatch.json` the only line written beside it.

tests/fixtures/home_runner_repo is shaped as the public Hopper repositories a new user brought are:
its runner (`runner.cu`, the unit) includes <iostream> and every kernel header, has a main and
refuses to compile without the Makefile's -DNDEBUG; its launchers are reached through
using-declarations and a class template's static member, take a debug buffer the runner passes as
null when it times, a beta one of them never reads, and one keeps the C of its first call (as
fast.cu's kernels 10-12 keep C's TMA map). No launcher is given a block or a grid. The manifest
sets the folder's timing mode in its object form.

Everything is real but the GPU: nvcc from the wheel builds the runner as the Makefile says, the
launcher is called through ctypes in its confined process, the product's runner verifies it there
(tests/fake_launcher.py: host pointers, host arithmetic). The GPU's own repositories:
tests/test_gpu_home_runner.py.
"""

import json
import os
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import FolderError, load_folder
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES, CpuRunner
from worker.arguments import kernel_args
from worker.compile import compiler
from worker.measure.cases import Case, KernelChoice, TimingPolicy
from worker.launch.host_jail import landlock_abi

REPO = Path(__file__).parent / "fixtures" / "home_runner_repo"
POLICY = TimingPolicy(0, min_samples=10, max_noise=0.005, time_cap_s=1, max_rel_error=1e-4, mode="cold")

needs_confinement = pytest.mark.skipif(landlock_abi() < 4 or shutil.which("g++") is None,
                                       reason="needs Landlock ABI 4 and g++ (nvcc's host compiler)")


def kernel(name: str) -> KernelDescription:
    return next(d for d in load_folder(REPO) if d.name == name)


@pytest.fixture
def runner(shared_kernel_cache, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    monkeypatch.setenv("GEMMWATCH_COMPILE_TIMEOUT_S", "300")
    monkeypatch.setenv("FAKE_GPU_COMPUTE_CAPABILITY", "9.0")  # the repository's targets: sm_90a, sm_80+
    return CpuRunner()


def run(runner, name: str, size=(48, 40, 24)):
    desc = kernel(name)
    return runner.run_case(Case(0, name, *size, seed=5, kernel=KernelChoice(desc, {}, "job")), POLICY)


# --- the manifest, as written ---------------------------------------------------------------------

def test_the_folder_is_described_with_no_block_grid_or_entry_and_the_makefiles_flags():
    kernels = {d.name: d for d in load_folder(REPO)}
    assert set(kernels) == {"home_kernel_1", "home_kernel_2", "home_kernel_3"}
    for desc in kernels.values():
        assert desc.block is None and desc.grid is None and desc.entry is None
        assert desc.timing == "burst"  # the folder's own field, given to each kernel
    one = kernels["home_kernel_1"]
    assert one.effective_target == "sm_90a" and one.build_flags.libraries == ("cublas", "cuda")
    assert kernels["home_kernel_2"].effective_target == "sm_80+"
    # beta is "ignored": the form is the one the kernel computes, alpha·A·B
    assert kernels["home_kernel_2"].form.epilogue == "alpha_only"
    assert one.form.key() == "rcc+ab"


def test_a_kernel_without_a_launcher_still_needs_its_entry_block_and_grid():
    bare = {"name": "bare", "files": {"k.cu": "__global__ void k(float* C) {}"}, "source": "k.cu",
            "args": ["M", "N", "K", "A", "B", "C"]}
    with pytest.raises(ValidationError, match="entry, block, grid: a kernel's launch needs them"):
        KernelDescription.model_validate(bare)


@pytest.mark.parametrize(("args", "why"), [
    (["M", "N", "K", "A", "B", "C", "null", "null"], None),  # fillers may repeat
    (["M", "N", "K", "A", "B", "C", "=2", "=0.5", "ignored"], None),
    (["M", "N", "K", "A", "B", "C", "C"], "each name once"),
    (["M", "N", "K", "A", "B", "C", "=2; system(1)"], "args.6"),
    (["M", "N", "K", "A", "B", "C", "=1e9999"], "args.6"),
    (["M", "N", "K", "A", "B", "C", "nul"], "args.6"),
])
def test_fillers_in_args(args, why):
    entry = {"name": "f", "files": {"r.cu": "void f() {}"}, "source": "r.cu", "launcher": "f", "compiler": "nvcc",
             "args": args}
    if why is None:
        assert KernelDescription.model_validate(entry).roles == ["M", "N", "K", "A", "B", "C"]
    else:
        with pytest.raises(ValidationError, match=why):
            KernelDescription.model_validate(entry)


@pytest.mark.parametrize(("arg", "words"), [
    ("nul", '\'nul\' is none of M N K alpha'), ("=K*4;", "after '=' comes a number"), (3, "3 is not a string")])
def test_an_arg_no_form_takes_is_refused_once_saying_what_it_may_be(arg, words):
    """One error, in one sentence, where the schema's union of forms said it three times over."""
    entry = {"name": "f", "files": {"r.cu": "void f() {}"}, "source": "r.cu", "launcher": "f", "compiler": "nvcc",
             "args": ["M", "N", "K", "A", "B", "C", arg]}
    with pytest.raises(ValidationError) as caught:
        KernelDescription.model_validate(entry)
    [error] = caught.value.errors()
    assert error["msg"].startswith("Value error, args.6: ") and words in error["msg"], error["msg"]


def test_a_kernel_reaching_too_many_files_is_told_the_count_and_what_to_do():
    files = {f"include/h{i}.h": "" for i in range(260)} | {"k.cu": "x"}
    with pytest.raises(ValidationError) as caught:
        KernelDescription.model_validate({"name": "e", "files": files, "source": "k.cu", "entry": "f", "block": [32],
                                          "grid": {"tile": [32, 32]}})
    [error] = caught.value.errors()
    assert "reaches 261 files" in error["msg"] and "more than the 256" in error["msg"] and "`libraries`" in error["msg"]


@pytest.mark.parametrize(("entry", "ok"), [
    ("gemm<cfg::Tile<cute::half_t, 128>>", True), ("ns::gemm<128, 8>", True), ("gemm<BM * 2, 8>", True),
    ("gemm<cfg::Tile<int, 1>", False), ("gemm<1>>", False), ("f); system(\"sh\"", False), ("f;g", False),
    ("f /* x */", False)])
def test_an_entry_is_any_name_cpp_reaches_a_kernel_by_and_nothing_that_ends_its_expression(entry, ok):
    """Pasted into the entry's address unit and NVRTC's name expression: a template on a namespaced or
    templated type is a name; unbalanced brackets, quotes, parentheses or a semicolon are not."""
    desc = {"name": "e", "files": {"k.cu": "x"}, "source": "k.cu", "entry": entry, "block": [32],
            "grid": {"tile": [32, 32]}}
    if ok:
        assert KernelDescription.model_validate(desc).entry == entry
    else:
        with pytest.raises(ValidationError, match="entry"):
            KernelDescription.model_validate(desc)


@pytest.mark.parametrize("launcher", ["f); system(\"sh\"", "f<1>>", "a<b", "f /* x */", "f;g", "f\ng"])
def test_a_launcher_name_cannot_close_the_expression_it_is_pasted_into(launcher):
    entry = {"name": "f", "files": {"r.cu": "void f() {}"}, "source": "r.cu", "launcher": launcher,
             "compiler": "nvcc", "args": ["M", "N", "K", "A", "B", "C"]}
    with pytest.raises(ValidationError, match="launcher"):
        KernelDescription.model_validate(entry)


def test_fillers_are_planned_in_each_parameters_own_type():
    plan = kernel_args.plan("runKernel", ("M", "A", "null", "ignored", "ignored", "=3", "=0.5"),
                            [["int", None], ["float*", None], ["int*", None], ["__half", None], ["float const*", None],
                             ["unsigned long", None], ["double", None]], "float32", "float32", host=True)
    # an ignored `float const*` is the address of a zero in host memory: a launcher dereferences its
    # `const T* beta` even where its kernel ignores the value (null made cute-gemm-101's V03 crash)
    assert [how for _r, how in plan.passing] == ["i32", "ptr", "null", "f16", "&f32", "u64", "f64"]
    assert kernel_args.filler_value("ignored") == 0
    # a kernel's is the address of a zero in device memory; a pointer to no float (a debug buffer) is null
    plan = kernel_args.plan("k", ("M", "ignored", "ignored", "ignored"),
                            [["int", None], ["__half const*", None], ["int*", None], ["void*", None]], "float16", "float16")
    assert [how for _r, how in plan.passing] == ["i32", "*f16", "null", "null"]
    # Known by their sizes alone (an extern "C" kernel, a Triton cubin): a constant written with a point or
    # an exponent is a float, as Triton types a wrapper's 1.0; one written as an integer stays an integer.
    plan = kernel_args.plan("k", ("M", "=1.0", "=1", "=0.5", "=2.5e-1", "=-3"),
                            [[None, 4], [None, 4], [None, 4], [None, 8], [None, 4], [None, 8]], "float32", "float32")
    assert [how for _r, how in plan.passing] == ["i32", "f32", "i32", "f64", "f32", "i64"]
    assert kernel_args.filler_value("=1.0") == 1 and kernel_args.filler_value("=2.5e-1") == 0.25
    for args, params, why in [
        (("M", "null"), [["int", None], ["int", None]], "null is for a pointer parameter"),
        (("M", "=0.5"), [["int", None], ["int", None]], "the constant 0.5 is not an integer"),
        (("M", "=1"), [["int", None], ["float*", None]], "=1 is for a number"),
    ]:
        with pytest.raises(kernel_args.ArgumentMismatch, match=why):
            kernel_args.plan("runKernel", args, params, "float32", "float32", host=True)


def test_a_kernel_that_reads_c_and_writes_d_is_given_c_s_buffer_for_both():
    # D = alpha*A*B + beta*C, as alexarmbr/matmul-playground's kernels (and CUTLASS and cuBLASLt) take it.
    kernel = {"name": "cd", "files": {"k.cu": "x"}, "source": "k.cu", "entry": "kernel_6", "compiler": "nvcc",
              "block": [128, 2], "grid": {"tile": [256, 256]}, "compute_mode": "fp16",
              "args": ["A", "B", "C", "D", "alpha", "beta", "M", "N", "K"]}
    desc = KernelDescription.model_validate(kernel)
    without_d = KernelDescription.model_validate({**kernel, "args": ["A", "B", "C", "alpha", "beta", "M", "N", "K"]})
    assert desc.form == without_d.form and desc.form.epilogue != "ab_only"  # C is read: its beta is the form's
    with pytest.raises(ValidationError, match='"D" is where a kernel that reads C writes'):
        KernelDescription.model_validate({**kernel, "args": ["A", "B", "D", "alpha", "beta", "M", "N", "K"]})
    with pytest.raises(ValidationError, match="each name once"):
        KernelDescription.model_validate({**kernel, "args": ["A", "B", "C", "D", "D", "alpha", "beta", "M", "N", "K"]})
    half = ["__half*", None]
    plan = kernel_args.plan("kernel_6", ("A", "B", "C", "D", "alpha", "beta", "M"),
                            [half, half, half, half, ["float", None], ["float", None], ["unsigned int", None]],
                            "float16", "float16")
    assert [how for _r, how in plan.passing] == ["ptr"] * 4 + ["f32", "f32", "u32"]
    with pytest.raises(kernel_args.ArgumentMismatch, match="D"):  # D is C's buffer: of the output's type
        kernel_args.plan("kernel_6", ("A", "B", "C", "D"), [half, half, half, ["float*", None]], "float16", "float16")
    named = kernel_args.named_values(resolve(desc, {}, H100_FIGURES, "job"), 512, 256, 64, "a", "b", "c", 1.0, 0.5)
    assert named["D"] == named["C"] == "c"


def test_the_manifests_object_form_is_checked(tmp_path):
    (tmp_path / "gemmwatch.json").write_text(json.dumps({"timing": "burst", "kernel": []}))
    with pytest.raises(FolderError, match="not 'kernel'"):
        load_folder(tmp_path)
    (tmp_path / "gemmwatch.json").write_text(json.dumps({"timing": "warm", "kernels": [
        json.loads((REPO / "gemmwatch.json").read_text())["kernels"][0]]}))
    (tmp_path / "runner.cu").write_text((REPO / "runner.cu").read_text())
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    with pytest.raises(FolderError, match="timing"):
        load_folder(tmp_path)


# --- each kernel through the product's path -------------------------------------------------------

@needs_confinement
@pytest.mark.parametrize("name", ["home_kernel_1", "home_kernel_2", "home_kernel_3"])
def test_each_kernel_of_the_repository_as_it_is_is_verified(runner, name):
    """home_kernel_3 writes into the C of its first call: it is verified only because every call of a
    case (the checks and the samples) now gets the same C, refilled in place (issue 48); with a fresh
    C per check, as before, it read "relative error 1"."""
    out = run(runner, name)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.n_samples >= 10
    assert out.env["launcher"]["what_happened"] == "the launcher returned normally"
    launch = out.env["launch"]
    assert launch["block"] is None and launch["grid"] is None
    assert "why_none" in out.env["resources"] and out.env["resources"]["compiler"].startswith("nvcc ")


@needs_confinement
def test_the_debug_buffer_is_null_and_the_ignored_beta_is_zero(runner):
    params = run(runner, "home_kernel_1").env["launch"]["params"]
    assert params[-1] == "null: int*"
    params = run(runner, "home_kernel_2").env["launch"]["params"]
    assert params[-2:] == ["alpha: float", "ignored: float"]


@needs_confinement
def test_a_launcher_that_keeps_its_first_c_is_wrong_when_c_moves(shared_kernel_cache):
    """The guard the same-C rule relies on, tried from the other side: called directly on two C's,
    the caching launcher writes the first one, so only the same C is a fair check of it."""
    import ctypes

    import numpy as np

    from core.description.kernel import resolve
    from core.settings import Settings
    from tests.fake_gpu import H100_FIGURES
    from worker.compile import launcher_library

    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    library = launcher_library.build(resolve(kernel("home_kernel_3"), {}, H100_FIGURES, "job"), "9.0", cfg)
    lib = ctypes.CDLL(str(library.path))
    lib.gemmwatch_launcher_address.restype = ctypes.c_void_p
    launch = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_void_p)(lib.gemmwatch_launcher_address())
    a, b = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
    first, second = np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32)
    for c in (first, second):
        launch(4, 4, 4, a.ctypes.data, b.ctypes.data, c.ctypes.data, None)
    assert (first == 4).all() and (second == 0).all()


def test_an_entry_behind_a_launcher_and_the_same_entry_as_a_kernel_are_loaded_apart():
    """The crash of issue 48: a job that timed an entry through its launcher, then the same entry as a
    kernel with gemmwatch's own arguments, got the launcher's loaded kernel back (no plan of its own)."""
    from core.description.kernel import resolve
    from tests.fake_gpu import H100_FIGURES
    from tests.test_launcher_cases import REPO as LAUNCHER_REPO, described

    behind = resolve(described(LAUNCHER_REPO, "launcher_run_sgemm_tiled"), {}, H100_FIGURES, "job")
    bare = resolve(described(LAUNCHER_REPO, "launcher_run_sgemm_tiled", launcher=None,
                             args=["M", "N", "K", "alpha", "A", "B", "beta", "C"]), {}, H100_FIGURES, "job")
    assert behind.entry == bare.entry and behind.files == bare.files
    assert kernel_args.loaded_key(behind) != kernel_args.loaded_key(bare)
    reordered = resolve(described(LAUNCHER_REPO, "launcher_run_sgemm_tiled", launcher=None,
                                  args=["M", "N", "K", "alpha", "B", "A", "beta", "C"]), {}, H100_FIGURES, "job")
    assert kernel_args.loaded_key(reordered) != kernel_args.loaded_key(bare)


# alexarmbr/matmul-playground as it is (not vendored: $MATMUL_PLAYGROUND_REPO or .devkit/repos/matmul-playground,
# commit e831e96), with docs/examples/alexarmbr-matmul-playground.gemmwatch.json beside it.
PLAYGROUND = Path(os.environ.get("MATMUL_PLAYGROUND_REPO",
                                 Path(__file__).resolve().parent.parent / ".devkit" / "repos" / "matmul-playground"))


@pytest.mark.skipif(not (PLAYGROUND / "src" / "kernel6.cu").is_file() or landlock_abi() < 4,
                    reason=f"alexarmbr/matmul-playground is not here ({PLAYGROUND}; it is not vendored into the tests), "
                           "or no Landlock ABI 4 for the confined nvcc")
@pytest.mark.parametrize("name", ["matmul_playground_1", "matmul_playground_6"])
def test_a_repository_s_bare_template_kernels_build_as_its_cmake_file_builds_them(tmp_path, name):
    """Its units include <iostream>, <chrono> and <thread>; its CMake options carry --keep; each kernel is
    named by its template instance and takes A, B, C, D, alpha, beta, M, N, K (unsigned sizes)."""
    folder = tmp_path / "repo"
    shutil.copytree(PLAYGROUND, folder)
    shutil.copyfile(Path(__file__).resolve().parent.parent / "docs" / "examples" /
                    "alexarmbr-matmul-playground.gemmwatch.json", folder / "gemmwatch.json")
    desc = next(d for d in load_folder(folder) if d.name == name)
    launch = resolve(desc, {}, H100_FIGURES, "job")
    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(tmp_path / "cache"), GEMMWATCH_COMPILE_TIMEOUT_S="600")
    built = compiler.compile_launch(launch, "9.0", cfg)
    loaded = kernel_args.load(built, launch, lambda symbol: symbol)
    assert [how for _r, how in loaded.plan.passing] == ["ptr"] * 4 + ["f32", "f32", "u32", "u32", "u32"]
    assert built.compiler.startswith("nvcc ")
