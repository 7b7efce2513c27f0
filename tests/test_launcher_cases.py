"""A repository's own host launcher (issue 35, way b): `"launcher": "run_sgemm_tiled"` in a description,
built by nvcc into a shared library, its signature read from the library, its arguments planned, and
each case run by the product's runner in a confined process of its own that calls the launcher.

Everything here is real but the GPU: nvcc from the wheel in the confined compile process, the
library's .dynsym, the confined process (worker/launch/launcher_call.py) and the runner in it. On the CPU the
launchers of tests/fixtures/host_launchers compute C on the host (tests/fake_launcher.py gives them
host pointers); the GPU's own path is tests/test_gpu_launchers.py.
"""

import ctypes
import dataclasses
import re
import shutil
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.description import kernel_includes
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.results.result_env import ResultEnv
from core.settings import Settings
from tests.conftest import make_client, wait_for_job
from tests.fake_gpu import H100_FIGURES, CpuRunner
from worker.compile import compiler, launcher_library, nvcc
from worker.arguments import kernel_args
from worker.measure import launcher_case
from worker.measure.cases import Case, CaseOutcome, KernelChoice, TimingPolicy
from worker.launch import launcher_call
from worker.launch.host_jail import landlock_abi

FIXTURES = Path(__file__).parent / "fixtures"
REPO = FIXTURES / "launcher_repo"
HOST = FIXTURES / "host_launchers"
HOSTILE = FIXTURES / "hostile_launchers"
POLICY = TimingPolicy(0, min_samples=10, max_noise=0.005, time_cap_s=1, max_rel_error=1e-4, mode="cold")
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


def test_a_launcher_takes_the_tensor_maps_its_caller_encodes_by_address_in_host_memory():
    """A Hopper repository's Python runner encodes the maps (cuTensorMapEncodeTiled) and hands their
    addresses to its launcher (`const CUtensorMap* dA`); the runner does the same."""
    params = [["CUtensorMap_st const*", None], ["void const*", None], ["float*", None], ["int", None]]
    plan = kernel_args.plan("launch", ("A_map", "B_map", "C", "M"), params, "float32", "float32", host=True)
    assert [how for _r, how in plan.passing] == ["&map", "&map", "ptr", "i32"]
    assert kernel_args.maps_by_value(plan) == {"A", "B"}  # no address says "no map": such a size is refused
    encoded = bytes(range(128))
    args = launcher_library.arguments(plan, {"A_map": encoded, "B_map": encoded[::-1], "C": "C", "M": 5},
                                      {"C": 0x2000}.__getitem__)
    assert args.values[0] % 64 == 0 and ctypes.string_at(args.values[0], 128) == encoded
    assert ctypes.string_at(args.values[1], 128) == encoded[::-1] and args.values[2] == 0x2000
    with pytest.raises(kernel_args.ArgumentMismatch, match="a launcher takes its tensor map by address"):
        kernel_args.plan("launch", ("A_map",), [["CUtensorMap_st", None]], "float32", "float32", host=True)


def test_a_launchers_name_is_a_cpp_name_with_template_arguments():
    assert described(REPO, "launcher_launch_gemm").launcher == "launch_gemm<float>"
    with pytest.raises(ValidationError, match="launcher"):
        described(REPO, "launcher_run_sgemm_tiled", launcher="run(); system(\"sh\")")
    # one of an overloaded name's functions, by its parameter types: one list, at the end, types alone
    assert described(REPO, "launcher_run_sgemm_tiled", launcher="ns::run<float>(const float*, int&)").launcher
    for wrong in ["run(int)(int)", "run(int) + 1", "run(void (*)(int))", "run(int); x", "run(int", "run(\"a\")"]:
        with pytest.raises(ValidationError, match="launcher"):
            described(REPO, "launcher_run_sgemm_tiled", launcher=wrong)


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
def test_a_launcher_of_an_sm90a_kernel_builds(shared_kernel_cache):
    """nvcc's -arch=sm_90a for anything but a cubin also makes compute_90 PTX, where wgmma is no
    instruction: every Hopper repository's launcher failed to build ("'wgmma.fence' not supported
    on .target 'sm_90'"). The library is built for sm_90a alone."""
    library = built(described(REPO, "launcher_sgemm_tiled_hopper"), shared_kernel_cache)
    assert library.path.read_bytes()[:4] == b"\x7fELF"
    assert [how for _role, how in library.plan.passing] == ["u64", "u64", "u64", "f32", "ptr", "ptr", "f32", "ptr", "ptr"]


@needs_confinement
def test_a_launcher_that_calls_the_driver_builds_without_linking_it(shared_kernel_cache):
    """The driver's symbol stays undefined in the library (no -lcuda: no wheel holds a stub to link
    against); the launcher's process makes libcuda's symbols global before loading it (on the GPU:
    tests/test_gpu_nvcc.py verifies this launcher with the rest of the repository)."""
    import subprocess

    library = built(described(REPO, "launcher_sgemm_driver"), shared_kernel_cache)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(library.path)], capture_output=True, text=True)
    assert "cuDriverGetVersion" in undefined.stdout, undefined.stdout + undefined.stderr


@needs_confinement
def test_a_launcher_calling_a_function_of_another_unit_is_refused_at_its_build_until_units_names_that_file(
        shared_kernel_cache):
    """The link of a shared library allows what no unit defines; the case's process then failed to load
    it ("undefined symbol: _Z15check_cuda_lastPKci", a public repository's launcher whose helper is in
    its utils.cu). The build now says which function, and where to name its file; with `units` it links."""
    with pytest.raises(compiler.CompileError, match=r"calls what none of its files defines: "
                                                    r"row_dot_column\(float const\*, float const\*, unsigned long.*"
                                                    r"built from src/split_gemm.cu: .*`units`"):
        built(described(HOST, "host_gemm_split", units=[]), shared_kernel_cache)
    library = built(described(HOST, "host_gemm_split"), shared_kernel_cache)
    assert library.plan.describe()[0] == "M: unsigned long" and library.plan.describe()[-1] == "stream: CUstream_st*"


@needs_confinement
def test_an_overloaded_launcher_is_named_by_its_parameter_types_and_one_named_alone_is_told_how(
        runner, shared_kernel_cache):
    """yf225/simplegemm defines each launcher twice (typed pointers, and void* for its torch binding):
    nvcc could not take the address of the name alone. Named with its parameter types, that one
    function is built and called; the other one here writes nothing, so calling it would fail the check."""
    desc = described(HOST, "host_gemm_overloaded")
    out = runner.run_case(case(desc), POLICY)
    assert out.verified and out.error is None, out.error
    assert out.env["launch"]["params"] == ["A: float const*", "B: float const*", "C: float*", "M: int", "N: int",
                                           "K: int"]
    untyped = built(described(HOST, "host_gemm_overloaded", launcher="host_gemm_overloaded(void*, void*, void*, int, "
                                                                       "int, int)"), shared_kernel_cache)
    assert untyped.plan.describe()[0] == "A: void*"
    with pytest.raises(compiler.CompileError, match=r'defines more than one host_gemm_overloaded: name the one to call '
                                                    r'with its parameter types.*"launcher": "host_gemm_overloaded\(void\*'):
        built(described(HOST, "host_gemm_overloaded", launcher="host_gemm_overloaded"), shared_kernel_cache)


def test_a_unit_meets_the_source_guard_in_its_description_and_again_at_its_build(shared_kernel_cache):
    """A unit is compiled like the source, so layer 1 reads it like the source: at the description, and
    at the build for a row written past the API."""
    hostile = '#include "/etc/passwd"\n'
    with pytest.raises(ValidationError, match="source refused"):
        described(HOST, "host_gemm_split", files={**described(HOST, "host_gemm_split").files, "src/split_dot.cu": hostile})
    launch = resolve(described(HOST, "host_gemm_split"), {}, H100_FIGURES, "job")
    past_the_api = dataclasses.replace(launch, files={**launch.files, "src/split_dot.cu": hostile})
    with pytest.raises(compiler.CompileRefused, match="source refused"):
        launcher_library.build(past_the_api, "9.0", Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache)))


@pytest.mark.parametrize(("changes", "words"), [
    ({"launcher": None, "args": STANDARD_ARGS[:-1]}, "units: other translation units are linked into a launcher's"),
    ({"units": ["src/split_dot.h"]}, "'src/split_dot.h' is no file nvcc compiles"),
    ({"units": ["src/host_gemm.cu"]}, "'src/host_gemm.cu' is not among the files"),
    ({"units": ["src/split_gemm.cu"]}, "'src/split_gemm.cu' is the source already"),
    ({"units": ["src/split_dot.cu", "src/split_dot.cu"]}, "each file may be listed once"),
])
def test_units_are_other_compiled_files_of_a_launchers_description(changes, words):
    with pytest.raises(ValidationError, match=re.escape(words)):
        described(HOST, "host_gemm_split", **changes)


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
    with pytest.raises(compiler.CompileRefused, match=r"non-static member function: it needs an object"):
        built(described(HOST, "host_gemm", launcher="HostGemm::run"), shared_kernel_cache)


@needs_confinement
@pytest.mark.parametrize("launcher", ["internal_launcher", "c_launcher", "::c_launcher"])
def test_a_launcher_the_library_does_not_export_under_a_cpp_name_is_planned_all_the_same(launcher, shared_kernel_cache):
    """The launcher is reached through its address, and its types through the launcher unit's
    signature function: an internal or an extern "C" function spells its types there too."""
    library = built(described(HOST, "host_gemm", launcher=launcher), shared_kernel_cache)
    assert library.symbol == "gemmwatch_launcher_address"
    assert library.plan.describe()[0] == "M: unsigned long" and library.plan.describe()[-1] == "stream: CUstream_st*"


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


@needs_confinement
def test_a_launchers_grid_and_block_are_dim3s_worked_out_from_args(shared_kernel_cache):
    """ThunderKittens' inner_run(..., dim3 grid, dim3 block): each an integer expression of args, passed
    by value as dim3(x, 1, 1), as its run_benchmark passes them."""
    library = built(described(REPO, "launcher_runner_sized"), shared_kernel_cache)
    assert [how for _r, how in library.plan.passing] == ["ptr", "ptr", "ptr", "u64", "u64", "u64", "dim3", "dim3"]
    assert library.plan.describe()[-1] == "=1024: dim3"
    grid, block = "=cdiv(M, 32) * cdiv(N, 32)", "=1024"
    named = {"A": "A", "B": "B", "C": "C", "M": 70, "N": 33, "K": 65, grid: 6, block: 1024}
    args = launcher_library.arguments(library.plan, named, {"A": 0x1000, "B": 0x2000, "C": 0x3000}.__getitem__)
    assert args.argtypes[-2:] == (launcher_library.Dim3, launcher_library.Dim3)
    assert [(d.x, d.y, d.z) for d in args.values[-2:]] == [(6, 1, 1), (1024, 1, 1)]


@pytest.mark.parametrize(("role", "host", "words"), [
    ("=1.5", True, "not an integer, and a dim3 takes one"), ("ignored", True, "not an integer, and a dim3 takes one"),
    ("null", True, "null is for a pointer"), ("=132", False, "a dim3 is taken from args by a host launcher only")])
def test_a_dim3_takes_an_integer_and_only_as_a_launchers_parameter(role, host, words):
    with pytest.raises(kernel_args.ArgumentMismatch, match=words):
        kernel_args.plan("inner_run", ("A", role), [["float*", None], ["dim3", None]], "float32", "float32", host=host)


# --- a case through the confined process, on the CPU double -------------------------------------

def case(desc: KernelDescription, index: int = 0, size=(70, 33, 65)) -> Case:
    return Case(index, desc.name, *size, seed=3, kernel=KernelChoice(desc, {}, "job"))


@pytest.fixture
def runner(shared_kernel_cache, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    monkeypatch.setenv("GEMMWATCH_COMPILE_TIMEOUT_S", "300")
    return CpuRunner()


@needs_confinement
@pytest.mark.parametrize("name", ["host_gemm", "host_gemm_by_pointer", "host_gemm_split"])
def test_a_launcher_case_is_verified_and_timed_by_the_runner_in_its_own_process(runner, name):
    out = runner.run_case(case(described(HOST, name)), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.n_samples >= 10 and out.pct_of_cublas > 0
    about = out.env["launcher"]
    assert about["what_happened"] == "the launcher returned normally"
    assert "the job's own word" in about["results"]
    assert "seccomp" in about["confinement"] and "NOT applied" not in about["confinement"]
    # what the confined process could not do, said in the result: no stream hold, the memset flush
    assert out.env["stream_hold"]["used"] is False and out.env["l2_flush"] == "memset"
    assert out.env["launch"]["launcher"] == described(HOST, name).launcher
    assert out.env["launch"]["params"][-1] == "stream: CUstream_st*"
    assert out.env["resources"]["compiler"].startswith("nvcc 13.")  # the entry's, read by the GPU child
    assert ResultEnv.model_validate(out.env).extra == {}  # every key of the record is one its schema declares


@needs_confinement
def test_a_launchers_ignored_beta_by_pointer_points_to_a_zero_and_the_form_is_alpha_times_ab(runner):
    """cute-gemm-101's V03 (tests/fixtures/host_launchers: host_gemm_scales_what_it_wrote) dereferences
    `const T* beta` and scales what it wrote by alpha + beta: right at beta = 0 alone. Named "ignored", its
    beta is the address of a zero (null crashed the launcher) and it is checked as C = alpha·A·B; named
    beta, gemmwatch's nonzero beta shows it wrong."""
    desc = described(HOST, "host_gemm_beta_ignored")
    assert desc.form.epilogue == "alpha_only"
    out = runner.run_case(case(desc), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.env["launcher"]["what_happened"] == "the launcher returned normally"
    assert "ignored: float const*" in out.env["launch"]["params"], out.env["launch"]["params"]
    args = ["beta" if role == "ignored" else role for role in desc.args]
    named_beta = runner.run_case(case(described(HOST, "host_gemm_beta_ignored", args=args), index=1), POLICY)
    assert not named_beta.verified and "wrong result" in named_beta.error, named_beta.error


@needs_confinement
def test_a_launcher_reaches_its_matrices_through_the_maps_the_runner_encodes_and_an_odd_line_is_refused(runner):
    """host_gemm_from_maps gets no pointer to A or B: it reads them through the records the CPU double
    puts where a GPU's maps go (the request the product would have the driver encode), and writes C
    only where each record has its matrix's address, extents, line and box."""
    desc = described(HOST, "host_gemm_from_maps")
    out = runner.run_case(case(desc, size=(70, 36, 64)), POLICY)
    assert out.verified and out.error is None and out.rel_error < 1e-6, out.error
    assert out.env["launch"]["params"][:2] == ["A_map: CUtensorMap_st const*", "B_map: CUtensorMap_st const*"]
    swapped = described(HOST, "host_gemm_from_maps", tensor_maps={"A": {"box": [4, 8]}, "B": {"box": [16, 8]}})
    assert not runner.run_case(case(swapped, index=1, size=(70, 36, 64)), POLICY).verified
    odd = runner.run_case(case(desc, index=2, size=(70, 33, 64)), POLICY)  # B's line: 33 floats, 132 bytes
    assert not odd.verified and "host_gemm_from_maps reaches B through its tensor map alone" in odd.error, odd.error
    assert "not a multiple of 16" in odd.error


@needs_confinement
def test_a_launcher_case_s_stages_show_its_build_and_its_own_process_and_fit_in_its_time(runner):
    # Issue 53's breakdown: fast.cu's cases read compile 0.0 and nothing else but their samples, while
    # each spent 30 s building its library and starting its process: that time now has its stages.
    began = time.perf_counter()
    out = runner.run_case(case(described(HOST, "host_gemm")), POLICY)
    wall = time.perf_counter() - began
    assert out.verified, out.error
    stages = ResultEnv.model_validate(out.env).stages_s.model_dump(exclude_none=True)
    # (on the CPU double a sample takes no time; the process's start always does)
    assert stages["launcher_setup"] > 0 and {"compile", "verify", "samples"} <= set(stages)
    assert sum(stages.values()) <= wall + 0.01  # each second counted once (rounding aside)


@needs_confinement
def test_a_launcher_case_s_set_up_kernels_are_made_once_by_a_set_up_alone_and_each_case_starts_with_them(
        shared_kernel_cache, monkeypatch, tmp_path):
    """Each case's process used to compile CuPy's set-up kernels anew (8.6 s of a case's 12-18 s on
    the H200). The CPU double's set-up says whether its kernel was in the cache it was given."""
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    monkeypatch.setenv("GEMMWATCH_COMPILE_TIMEOUT_S", "300")
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path / "data"))
    runner = CpuRunner()
    folder = tmp_path / "data" / "launcher-set-up"
    for index, name in enumerate(["host_gemm", "host_gemm_by_pointer"]):
        out = runner.run_case(case(described(HOST, name), index=index), POLICY)
        assert out.verified, out.error
        said = [note for note in out.env["notes"] if note.startswith("set-up kernel")]
        assert len(said) == 1 and said[0].endswith(" found"), said
    kernels = [p.name for p in folder.iterdir() if p.is_file()]
    assert len(kernels) == 1 and kernels[0] in said[0]
    assert len(list((folder / "made-for").iterdir())) == 1  # one set-up alone for the two cases of a kind
    # A set-up that fails makes nothing to keep or to remember: the next case of the kind tries again.
    (folder / "made-for").joinpath(next((folder / "made-for").iterdir()).name).unlink()
    (folder / kernels[0]).unlink()
    monkeypatch.setattr(launcher_case, "SETUP_LIMIT_S", 0.001)
    failed = runner.run_case(case(described(HOST, "host_gemm"), index=2), POLICY)
    assert not failed.verified and "the set-up ran past its" in failed.error, failed.error
    assert not list((folder / "made-for").iterdir()) and not any(p.is_file() for p in folder.iterdir())


def test_a_launcher_process_s_reported_stages_are_taken_as_numbers_only_and_never_double_counted():
    outside = {"compile": 1.0, "launcher_setup": 3.0}
    reported = {"samples": 1.5, "verify": "0.5", "reference": True, "evil": 7.0, "launcher_setup": 99.0,
                "after_check": -1.0, "compile": 0.25}
    assert launcher_case.with_process_stages(outside, reported) == \
        {"compile": 1.25, "launcher_setup": 1.25, "samples": 1.5}
    # a process that claims more than its call took leaves no negative set-up
    assert launcher_case.with_process_stages(outside, {"samples": 5.0})["launcher_setup"] == 0.0
    assert launcher_case.with_process_stages(outside, None) == outside


@needs_confinement
def test_a_launcher_case_is_timed_beside_cublas_s_best_chosen_before_its_code_runs_and_kept_to_itself(
        runner, monkeypatch, tmp_path):
    # cuBLASLt's candidates offered, as on a GPU, the second 20 % faster than the default call: the
    # confined process times the launcher beside that one, as a built-in is timed, so a launcher's %
    # of cuBLAS reads as a built-in's does. The choice is made in the rehearsal, before the job's
    # launcher is first called (the timed run finds it made), and nothing of it lands in the data
    # folder for other jobs' cases.
    monkeypatch.setenv("FAKE_GPU_CUBLAS_CANDIDATES", "1.0,0.8")
    # The double's GPU is configured by its environment: the confined process's double reads it too.
    monkeypatch.setattr(launcher_call, "PASSED_ENV", (*launcher_call.PASSED_ENV, "FAKE_GPU_CUBLAS_CANDIDATES"))
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path / "data"))
    assert POLICY.cublas_baseline == "best"
    out = runner.run_case(case(described(HOST, "host_gemm")), POLICY)
    assert out.verified and out.error is None, out.error
    chosen = out.env["cublas_best"]
    assert chosen["against"] == "best" and chosen["best"]["index"] == 1, chosen
    assert chosen["cached"] is True  # made in the rehearsal, before the launcher ran
    assert chosen["best"]["median_ms"] < chosen["default"]["median_ms"]
    assert out.cublas_median_ms == pytest.approx(0.8 * chosen["default"]["median_ms"], rel=0.05)
    assert not (tmp_path / "data" / "cublas-best").exists()
    # Without candidates (a form cuBLASLt is not asked in), the default call, and the result says why.
    monkeypatch.delenv("FAKE_GPU_CUBLAS_CANDIDATES")
    out = runner.run_case(case(described(HOST, "host_gemm")), POLICY)
    assert out.env["cublas_best"]["against"] == "default"
    assert out.env["cublas_best"]["why"].startswith("no cuBLASLt candidates for this GEMM")


@needs_confinement
def test_a_wrong_launcher_is_not_verified(runner):
    out = runner.run_case(case(described(HOST, "host_wrong")), POLICY)
    assert not out.verified and "wrong result" in out.error and out.median_ms is None


@needs_confinement
@pytest.mark.parametrize(("launcher", "words"), [
    ("nothing_on_host", "no element of C was written"),
    # right on its 1st, 3rd ... call: the 2nd check (over a random C) meets the other kernel
    ("alternate_on_host", "wrong result: relative error"),
])
def test_a_launcher_that_launches_nothing_or_another_kernel_each_call_gets_a_clear_verdict(runner, launcher, words):
    out = runner.run_case(case(described(HOST, "host_gemm", launcher=launcher)), POLICY)
    assert not out.verified and out.gflops is None and words in out.error, out.error


@needs_confinement
@pytest.mark.parametrize(("name", "words"), [("host_crash", "the launcher crashed (segmentation fault, SIGSEGV)"),
                                             ("host_exit", "the launcher called exit(3)")])
def test_a_launcher_that_dies_fails_its_case_only_and_the_next_case_is_right(runner, name, words):
    out = runner.run_case(case(described(HOST, name)), POLICY)
    assert not out.verified and out.error == f"launcher {described(HOST, name).launcher}: {words}"
    assert out.env["launcher"]["what_happened"] == words
    assert out.env["stages_s"]["launcher_setup"] > 0 and "compile" in out.env["stages_s"]  # its time still shown
    following = runner.run_case(case(described(HOST, "host_gemm"), index=1), POLICY)
    assert following.verified and following.error is None


@needs_confinement
def test_a_forged_result_that_is_not_a_cases_fails_its_case_not_the_job(runner):
    out = runner.run_case(case(described(HOST, "host_forged_report")), POLICY)
    assert out.env["launcher"]["what_happened"] == "the launcher returned normally"  # its words, believed as such
    assert not out.verified and out.gflops is None
    assert out.error.startswith("the launcher's process reported a result that is not a case's (fields gflops, "
                                "verified)"), out.error


def test_a_reported_result_is_taken_only_in_the_types_of_a_result_row():
    good = {"verified": True, "rel_error": 1e-7, "median_ms": 2, "n_samples": 2, "samples_ms": [1.5, 2],
            "error": None, "env": {"anything": ["the job's word"]}}
    assert launcher_case.checked_outcome(good, "cold") == CaseOutcome(**good)
    for forged in ({"n_samples": 2.5}, {"verified": 1}, {"median_ms": True}, {"samples_ms": [1.0, "2"]},
                   {"env": []}, {"error": 3}, {"row_id": 1}):
        out = launcher_case.checked_outcome({**good, **forged}, "cold")
        assert not out.verified and f"(fields {next(iter(forged))})" in out.error, (forged, out.error)


def test_launcher_cases_through_a_worker_fail_alone_and_the_next_job_runs(cfg, start_worker):
    """Through the API, a real worker and its GPU child on the CPU double: the crashing launcher's
    case fails with what happened, the job's other cases are right, and the next job succeeds."""
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    client = make_client(cfg)
    sources = [described(HOST, n).model_dump(mode="json") for n in ("host_gemm", "host_crash", "host_gemm_by_pointer")]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[40, 24, 33]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=300)
    got = {r["variant"]: r for r in job["results"]}
    assert got["host_crash"]["error"] == "launcher crash_on_host: the launcher crashed (segmentation fault, SIGSEGV)"
    assert got["host_gemm"]["verified"] and got["host_gemm_by_pointer"]["verified"], job
    assert "the job's own word" in got["host_gemm"]["env"]["launcher"]["results"]
    following = client.post("/api/jobs", json={"sources": sources[:1], "sizes": [[17, 9, 5]]})
    assert wait_for_job(client, following.json()["id"], timeout=300)["status"] == "succeeded"


def hostile(launcher_file: Path) -> KernelDescription:
    """A launcher of tests/fixtures/hostile_launchers (extern "C" `launch`, as gcc builds them there)
    behind a C++ launcher a description can name, built by nvcc through the product's path."""
    wrapper = (f'#include "{launcher_file.name}"\n#include <cuda_runtime.h>\n'
               "__global__ void never_launched(float* C) { C[threadIdx.x] = 0.0f; }\n"
               "void hostile(size_t M, size_t N, size_t K, float alpha, const float* A, const float* B, float beta, "
               "float* C, cudaStream_t stream) { launch(M, N, K, alpha, A, B, beta, C, (void*)stream); }\n")
    headers = {h.name: h.read_text() for h in launcher_file.parent.glob("*.cuh")}  # gpu/gemm_naive.cuh
    # well_behaved.c: the right launcher that stops_after_checks.c and every_other_call.c call
    files = {"hostile.h": (HOSTILE / "hostile.h").read_text(), "well_behaved.c": (HOSTILE / "well_behaved.c").read_text(),
             **headers, launcher_file.name: launcher_file.read_text(), "wrap.cu": wrapper}
    return KernelDescription.model_validate({
        "name": f"hostile_{launcher_file.stem}", "files": files, "source": "wrap.cu", "entry": "never_launched",
        "launcher": "hostile", "compiler": "nvcc", "args": STANDARD_ARGS, "block": [32], "grid": {"tile": [32, 32]}})


@needs_confinement
def test_a_launcher_that_is_right_while_checked_and_does_nothing_after_loses_its_timing(runner):
    """Issue 48, must-show 3: the four checked calls right, every later one returns at once. The
    timed calls would read as fast as nothing; the call made after them finds C unwritten."""
    out = runner.run_case(case(hostile(HOSTILE / "stops_after_checks.c"), size=(16, 16, 16)), POLICY)
    assert not out.verified and out.status == "incorrect", out
    assert out.error.startswith("wrong result after timing: the call after the timed ones"), out.error
    assert "left 256 of 256 elements of C unwritten" in out.error and "does not do the same work" in out.error
    assert out.gflops is None and out.median_ms is None and out.pct_of_cublas is None


@needs_confinement
def test_a_launcher_that_does_other_work_on_every_other_call_is_told_so(runner):
    out = runner.run_case(case(hostile(HOSTILE / "every_other_call.c"), size=(16, 16, 16)), POLICY)
    assert not out.verified and out.gflops is None, out
    assert "wrong result: relative error" in out.error, out.error
    assert "yet run 1, the same call as run 2 (alpha 1, beta 0), was right: the kernel does not do the same work" \
        in out.error, out.error


@needs_confinement
def test_a_launcher_that_declines_a_shape_has_its_reason_in_the_cases_error(runner):
    """A launcher that launches nothing for a shape it cannot run (CUTLASS's can_implement) and says
    why on stderr: the case is incorrect (C unwritten), and its error carries the launcher's reason."""
    out = runner.run_case(case(hostile(HOSTILE / "declines_with_a_reason.c"), size=(16, 16, 15)), POLICY)
    assert not out.verified and out.status == "incorrect", out
    assert out.error.startswith("wrong result: no element of C was written"), out.error
    assert out.error.endswith("(the launcher's last line of output: cannot run 16x16x15: K must be a multiple of 4)"), \
        out.error
    assert "setting up" in out.env["launcher"]["output"]  # the whole output stays in the result


@needs_confinement
@pytest.mark.parametrize(("name", "words"), [("segfault", "the launcher crashed (segmentation fault, SIGSEGV)"),
                                             ("abort", "the launcher crashed (abort, SIGABRT)"),
                                             ("exit_zero", "the launcher called exit(0)"),
                                             ("spin", "the launcher ran past its")])
def test_a_hostile_launcher_built_by_nvcc_fails_its_case_only(runner, monkeypatch, name, words):
    monkeypatch.setattr(launcher_case, "CALL_SLACK_S", 3.0)  # the spin is killed in seconds, not minutes
    out = runner.run_case(case(hostile(HOSTILE / f"{name}.c"), size=(16, 16, 16)),
                          dataclasses.replace(POLICY, time_cap_s=0.5))
    assert not out.verified and words in out.error, out.error
    assert runner.run_case(case(described(HOST, "host_gemm"), index=1), POLICY).verified


# --- cuBLAS's headers: a repository's host code includes them, the nvcc wheel's toolkit has none ------

CUBLAS_LAUNCHER = """#include <cublas_v2.h>
#if !GW_CUBLAS_BESIDE_THE_TOOLKIT
#error not the cublas_v2.h from CUDA_HOME
#endif
"""


def cublas_headers_only_in(monkeypatch, home: Path | None) -> str:
    """nvcc's path, with cuBLAS's headers findable in `home`/include alone (or nowhere); skips where
    nvcc's own toolkit or /usr/local/cuda has them (they would be found, rightly, first or after)."""
    path = nvcc.nvcc_path(Settings())
    if path is None or any((Path(d) / nvcc.CUBLAS_HEADER).is_file() for d in kernel_includes.nvcc_include_dirs(path)):
        pytest.skip("nvcc's own toolkit has cuBLAS's headers here")
    if Path("/usr/local/cuda/include", nvcc.CUBLAS_HEADER).is_file():
        pytest.skip("/usr/local/cuda has cuBLAS's headers here")
    monkeypatch.setattr(nvcc, "wheel_include_dirs", lambda: [])
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if home is None:
        monkeypatch.delenv("CUDA_HOME", raising=False)
    else:
        monkeypatch.setenv("CUDA_HOME", str(home))
    nvcc.cublas_headers.cache_clear()
    return path


def with_cublas_include(desc: KernelDescription) -> KernelDescription:
    files = {**desc.files, desc.source: CUBLAS_LAUNCHER + desc.files[desc.source]}
    return KernelDescription.model_validate({**desc.model_dump(mode="json"), "files": files})


@needs_confinement
def test_a_launcher_that_includes_cublas_builds_with_its_headers_from_beside_the_toolkit(
        shared_kernel_cache, tmp_path, monkeypatch):
    """HamzaElshafie/h100_gemm's launchers include <cublas_v2.h>; the nvidia-cuda-nvcc wheel's toolkit
    has no cuBLAS, and the build failed with "cublas_v2.h: No such file or directory". The header is
    found where CUDA is installed beside it (here CUDA_HOME, holding a stand-in that says it was read),
    searched after the toolkit's own folders."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / nvcc.CUBLAS_HEADER).write_text("#pragma once\n#define GW_CUBLAS_BESIDE_THE_TOOLKIT 1\n")
    path = cublas_headers_only_in(monkeypatch, tmp_path)
    try:
        assert nvcc.cublas_headers(path) == str((tmp_path / "include").resolve())
        library = built(with_cublas_include(described(REPO, "launcher_run_sgemm_tiled")), shared_kernel_cache)
        assert library.path.read_bytes()[:4] == b"\x7fELF"
    finally:
        nvcc.cublas_headers.cache_clear()


@needs_confinement
def test_a_launcher_that_includes_cublas_where_no_cublas_is_installed_is_told_how_to_get_it(
        shared_kernel_cache, tmp_path, monkeypatch):
    cublas_headers_only_in(monkeypatch, None)
    try:
        with pytest.raises(compiler.CompileError, match=r"(?s)cublas_v2.h: No such file.*install gemmwatch\[gpu\], "
                                                        r"which brings the nvidia-cublas wheel, or set CUDA_HOME"):
            built(with_cublas_include(described(REPO, "launcher_run_sgemm_tiled")), shared_kernel_cache)
    finally:
        nvcc.cublas_headers.cache_clear()


@needs_confinement
def test_an_args_expression_passes_each_case_its_own_value(runner):
    """A launcher taking its rows' lengths in bytes (K * 4, N * 4), as YHs_Sample's kernels do: the
    expressions are worked out for each case's M, N and K, in each parameter's own type (an int, a
    long), and C is right; the same launcher given K * 2 reads A wrong and is refused."""
    desc = described(HOST, "host_gemm_byte_strides")
    for size in [(70, 33, 65), (40, 96, 24)]:
        out = runner.run_case(case(desc, size=size), POLICY)
        assert out.verified and out.error is None, out.error
        assert out.env["launch"]["params"][-2:] == ["=K * 4: int", "=N * 4: long"], out.env["launch"]["params"]
    wrong = described(HOST, "host_gemm_byte_strides", args=["A", "B", "C", "M", "N", "K", "=K * 2", "=N * 4"])
    out = runner.run_case(case(wrong), POLICY)
    assert not out.verified and "wrong result" in (out.error or ""), out.error


def test_an_args_expression_is_checked_as_the_descriptions_other_expressions_are():
    entry = {"name": "f", "files": {"r.cu": "void f() {}"}, "source": "r.cu", "launcher": "f", "compiler": "nvcc"}
    ok = KernelDescription.model_validate({**entry, "args": ["A", "B", "C", "M", "N", "K", "=cdiv(K, 8) * 32"]})
    assert ok.roles == ["A", "B", "C", "M", "N", "K"]  # an expression is no role of the GEMM's
    for args, words in [(["A", "B", "C", "M", "N", "K", "=Q * 4"], "unknown name"),
                        (["A", "B", "C", "M", "N", "K", "=K / 2"], "Div is not allowed"),
                        (["A", "B", "C", "M", "N", "K", "=__import__('os')"], "args.6")]:
        with pytest.raises(ValidationError, match=words):
            KernelDescription.model_validate({**entry, "args": args})
    with pytest.raises(kernel_args.ArgumentMismatch, match="an integer expression"):
        kernel_args.plan("f", ("M", "=K * 4"), [["int", None], ["float", None]], "float32", "float32", host=True)
