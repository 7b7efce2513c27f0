"""A repository as it builds at home (issue 35): kernel files that hold their host launchers, host
headers and explicit instantiations, built by nvcc with the repository's flags, their parameters'
types (size_t, __half, 64-bit extern "C") read from the cubin and passed as such.

tests/fixtures/launcher_repo is such a repository. Everything here is real but the GPU: nvcc from
the nvidia-cuda-nvcc wheel in the confined compile process, the parameters from the cubin it
makes, the worker and its runner; the CPU double computes each product and checks that every size
reached the kernel intact (tests/fake_gpu.py). The same folder runs on the H100 in
tests/test_gpu_nvcc.py.
"""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.description import compile_flags
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.settings import Settings
from tests.conftest import make_client, wait_for_job
from tests.fake_gpu import H100_FIGURES
from worker.compile import compile_cache, compile_process, compiler
from worker.arguments import kernel_args

REPO = Path(__file__).parent / "fixtures" / "launcher_repo"


def described(name: str, **changes) -> KernelDescription:
    desc = next(d for d in load_folder(REPO) if d.name == name)
    return KernelDescription.model_validate({**desc.model_dump(mode="json"), **changes})


def build(desc: KernelDescription, tmp_path, origin: str = "job"):
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    launch = resolve(desc, {}, H100_FIGURES, origin)
    built = compiler.compile_launch(launch, "9.0", cfg)
    return built, launch


@pytest.mark.parametrize(("name", "passing"), [
    ("launcher_sgemm_tiled", ["u64", "u64", "u64", "f32", "ptr", "ptr", "f32", "ptr"]),
    ("launcher_hgemm_half_scalars", ["i32", "i32", "i32", "f16", "ptr", "ptr", "f16", "ptr"]),
    # extern "C": no mangled name, so only sizes: 8-byte sizes are 64-bit integers
    ("launcher_sgemm_ld64", ["i64", "i64", "i64", "f32", "ptr", "i64", "ptr", "i64", "f32", "ptr", "i64"]),
])
def test_nvcc_builds_the_file_and_the_binary_says_each_parameters_type(name, passing, tmp_path):
    built, launch = build(described(name), tmp_path)
    assert built.compiler.startswith("nvcc 13."), built.compiler
    loaded = kernel_args.load(built, launch, lambda symbol: symbol)
    assert [how for _role, how in loaded.plan.passing] == passing
    # The launcher, std::vector and the explicit instantiation of another tile size came along.
    names = {k["name"] or k["symbol"] for k in built.kernels}
    if name == "launcher_sgemm_tiled":
        assert names == {"sgemm_tiled<32>", "sgemm_tiled<16>"}
        assert loaded.plan.spelled[0] == "unsigned long"


def test_a_size_t_kernel_is_passed_64_bit_sizes_and_int_kernels_32_bit(tmp_path):
    """What reaches the kernel: a NumPy scalar of each parameter's own width."""
    built, launch = build(described("launcher_sgemm_tiled"), tmp_path)
    plan = kernel_args.load(built, launch, lambda s: s).plan
    named = kernel_args.named_values(launch, 5000000000, 7, 3, "A", "B", "C", 0.75, -0.5)
    args = kernel_args.values(plan, named, None)
    assert [a.dtype.itemsize for a in args[:3]] == [8, 8, 8] and int(args[0]) == 5000000000
    built16, launch16 = build(described("launcher_hgemm_half_scalars"), tmp_path)
    plan16 = kernel_args.load(built16, launch16, lambda s: s).plan
    args16 = kernel_args.values(plan16, kernel_args.named_values(launch16, 9, 7, 3, "A", "B", "C", 0.1, -0.5), None)
    assert args16[3].dtype.itemsize == 2 and kernel_args.received("f16", args16[3]) == pytest.approx(0.0999755859375)


def test_a_description_that_does_not_fit_the_binary_is_refused_by_name(tmp_path):
    # One parameter short: the kernel takes 11.
    short = described("launcher_sgemm_ld64", args=["M", "N", "K", "alpha", "A", "B", "beta", "C"])
    built, launch = build(short, tmp_path)
    with pytest.raises(kernel_args.ArgumentMismatch, match=r"sgemm_ld64 takes 11 parameter\(s\).*name 8"):
        kernel_args.load(built, launch, lambda s: s)
    # Roles swapped: alpha where the kernel takes `const float*`.
    swapped = described("launcher_sgemm_tiled", args=["M", "N", "K", "A", "alpha", "B", "beta", "C"])
    built, launch = build(swapped, tmp_path)
    with pytest.raises(kernel_args.ArgumentMismatch, match=r"parameter 4 \(float\) is named A.*must be a pointer"):
        kernel_args.load(built, launch, lambda s: s)
    # An FP32 kernel described as FP16: A points to float, and the description says __half.
    wrong_type = described("launcher_sgemm_tiled", compute_mode="fp16")
    built, launch = build(wrong_type, tmp_path)
    with pytest.raises(kernel_args.ArgumentMismatch, match=r"A points to float .* holds float16"):
        kernel_args.load(built, launch, lambda s: s)


def test_an_entry_the_build_did_not_make_is_named_with_those_it_did(tmp_path):
    built, launch = build(described("launcher_sgemm_tiled"), tmp_path)
    with pytest.raises(compiler.CompileRefused, match=r"'sgemm_tile' is not among .*sgemm_tiled<32>"):
        built.entry("sgemm_tile", {})
    assert built.entry("sgemm_tiled<TILE_SIZE>", {"TILE_SIZE": 16})["name"] == "sgemm_tiled<16>"


@pytest.mark.parametrize("flag", ["-I/etc", "-Xcompiler -fplugin=/tmp/x.so", "--run", "-o /tmp/x", "-ccbin=/tmp/cc",
                                  "-O3 -I/etc", "--include-path=/", "-maxrregcount=64 --keep", "--keep-dir=/tmp", "--keep-dir /tmp",
                                  # other separators a Makefile line or a hand could carry an extra word with
                                  "-O3\t-I/etc", "-O3\n-I/etc", "-O3  -I/etc", "-maxrregcount=64\u00a0-I/etc",
                                  "-Xptxas=-v,-I/etc", "-Xptxas=-v -Xcompiler=-fplugin=x", " -O3", "-O3 ",
                                  # the Makefile spellings that are taken, each with something past them
                                  "-lcudnn", "-l/etc/passwd", "-lcublas -I/etc", "-L/tmp", "-DX=$(shell id)",
                                  # a macro valued as a file-probing operator would reach the job's #if lines
                                  "-DX=__has_include", "-DX=_Pragma", "-D X=__has_embed",
                                  "-DX=1e+__has_include", "-DX=a+__has_include", "-DX=a.__has_include",
                                  "-DX=0-_Pragma", "--define-macro=X=__has_include",
                                  "-DX=a b", "-D X=1 -I/etc", "-Xcompiler=-fPIE,-fplugin=x", "-Xcompiler -Wl,-rpath,/x",
                                  "-Xcompiler=-Wl", "-Xcompiler=-Wp", "-arch=sm_90a -I/etc", "-arch=native -I/etc",
                                  "-arch=compute_70 -I/etc", "-arch=compute_70,-I/etc", "-arch=natives", "-arch=all -o x",
                                  "-code=compute_70 -I/etc",
                                  "-gencode arch=compute_90a,code=sm_90a,-I/etc", "--std=c++17 -I/etc",
                                  # a torch-built repository's -U and its front-end options, with more past them
                                  "-UX -I/etc", "-U X -I/etc", "-U/etc", "--undefine-macro=X=1",
                                  "-diag-suppress=174 -I/etc", "-diag-suppress=x", "--threads=8 -I/etc", "--threads=-1",
                                  # ThunderKittens' flags that are dropped, each with something past it
                                  "-lrt -I/etc", "-lpthreads", "-ldl,-I/etc", "-lcudadevrt -L/tmp", "-Xnvlink=--verbose,-o x",
                                  "-Xnvlink -rpath=/x", "-forward-unknown-to-host-compiler -I/etc",
                                  "-ftemplate-backtrace-limit=0 -fplugin=x", "-ftemplate-backtrace-limit=x",
                                  # the same, spelled with the separators and words a hand could add
                                  "-lrt\t-I/etc", "-Xnvlink=--verbose\n-I/etc", "-ldl -lfoo", "-lm\u00a0-I/etc",
                                  "-forward-unknown-to-host-compiler=1", "-Xnvlink --verbose -o x",
                                  "-ftemplate-backtrace-limit=00000", "-keep-dir /x", "-l cudadevrt,-L/x",
                                  # CMake's separable compilation, with something past it or spelled loosely
                                  "-rdc=true -I/etc", "-rdc=yes", "-rdc=true,-I/etc", "--relocatable-device-code=1",
                                  "-dc", "-rdc"])
def test_flags_outside_the_allow_list_are_refused(flag):
    with pytest.raises(ValidationError, match="nvcc flag .* is not allowed"):
        described("launcher_sgemm_tiled", flags=["-O3", flag])


def test_a_makefiles_flags_are_taken_as_written_and_each_mapped():
    """fast.cu's Makefile line as it is (issue 48): -DNDEBUG passed on, the target from -arch, the
    host flags passed on but -fPIE (a library is built -fPIC), -lcublas -lcuda the worker's own."""
    flags = ["-std=c++17", "-O3", "-DNDEBUG", "-w", "--expt-relaxed-constexpr", "--expt-extended-lambda",
             "--use_fast_math", "-Xcompiler=-fPIE", "-Xcompiler=-Wno-psabi", "-Xcompiler=-fno-strict-aliasing",
             "-arch=sm_90a", "-lcublas", "-lcuda", "-lineinfo"]
    desc = described("launcher_sgemm_tiled", flags=flags)
    built = desc.build_flags
    assert built.nvcc == ("-std=c++17", "-O3", "-DNDEBUG", "-w", "--expt-relaxed-constexpr", "--expt-extended-lambda",
                          "--use_fast_math", "-Xcompiler=-Wno-psabi", "-Xcompiler=-fno-strict-aliasing", "-lineinfo")
    assert (built.target, built.libraries, built.dropped) == ("sm_90a", ("cublas", "cuda"), ("-fPIE",))
    assert desc.effective_target == "sm_90a" and desc.target is None
    # The same build spelled as other Makefiles and CMake files spell it.
    other = compile_flags.parse(["--std=c++17", "-D", "NDEBUG", "-gencode", "arch=compute_90a,code=sm_90a",
                                 "-Xcompiler", "-Wall,-fPIC", "-l", "cublasLt", "-Xptxas", "--verbose"])
    assert other.nvcc == ("-std=c++17", "-DNDEBUG", "-Xcompiler=-Wall", "-Xptxas", "--verbose")
    assert (other.target, other.libraries) == ("sm_90a", ("cublasLt",))
    # A plain -arch is the oldest GPU the build runs on; two architecture-specific ones cannot be one kernel.
    assert compile_flags.parse(["-arch=sm_80", "-gencode=arch=compute_90,code=sm_90"]).target == "sm_80+"
    # A virtual architecture too (wangzyon/NVIDIA_SGEMM_PRACTICE's CMake: PTX the driver compiles for the GPU);
    # the GPU at hand is no target at all: the worker's own.
    ptx = compile_flags.parse(["-arch=compute_70", "-code=compute_70"])
    assert (ptx.target, ptx.nvcc) == ("sm_70+", ())
    assert compile_flags.parse(["--gpu-architecture", "compute_90a"]).target == "sm_90a"
    for at_hand in ("-arch=native", "-arch all", "--gpu-architecture=all-major"):
        assert compile_flags.parse([at_hand, "-O3"]) == compile_flags.parse(["-O3"])
    # alexarmbr/matmul-playground's CMake target_compile_options as they are: --keep changes no code.
    cmake = compile_flags.parse(["-Xptxas=-v", "-Xptxas -dlcm=cg", "--generate-line-info", "--expt-relaxed-constexpr",
                                 "--keep"])
    assert cmake.nvcc == ("-Xptxas=-v", "-Xptxas", "-dlcm=cg", "--generate-line-info", "--expt-relaxed-constexpr")
    assert cmake.dropped == ("--keep",)
    with pytest.raises(ValueError, match="2 architecture-specific targets"):
        compile_flags.parse(["-gencode arch=compute_90a,code=sm_90a", "-arch=sm_100a"])
    with pytest.raises(ValidationError, match="target sm_80 and the flags' sm_90a differ"):
        described("launcher_sgemm_tiled", flags=["-arch=sm_90a"], target="sm_80")


def test_refused_flags_name_the_field_to_use():
    with pytest.raises(ValidationError, match=r"'-I/usr/include/x' is not allowed.*`include_dirs`"):
        described("launcher_sgemm_tiled", flags=["-I/usr/include/x"])
    with pytest.raises(ValidationError, match=r"'-L/opt/lib' is not allowed.*name them with -l"):
        described("launcher_sgemm_tiled", flags=["-L/opt/lib"])


def test_every_refused_flag_is_named_at_once_under_flags():
    """A Makefile's line often holds several flags gemmwatch does not take: all of them, in one
    message, under the field's name (not "(the kernel)")."""
    from core.description.kernel_description import explain

    with pytest.raises(ValidationError) as refused:
        described("launcher_sgemm_tiled", flags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "--ptxas-options=-v,-O2",
                                                 "-diag-suppress 177", "-Xcompiler -fopenmp", "--resource-usage"])
    said = explain(refused.value, "mine")
    assert said.startswith("mine: flags: nvcc flags '--ptxas-options=-v,-O2', '-Xcompiler -fopenmp', "
                           "'--resource-usage' are not allowed; allowed: -O0..-O3"), said
    assert "`include_dirs`" in said and "'-O3'" not in said


def test_flags_need_nvcc():
    with pytest.raises(ValidationError, match="flags are nvcc's"):
        described("launcher_sgemm_tiled", compiler="nvrtc")


def test_an_nvcc_build_cannot_read_outside_its_folder(tmp_path):
    """Layer 2 without layer 1: a request that reached the compile process with an include of a
    secret (past the guard, as a row written around the API could) finds nothing to read."""
    secret = tmp_path / "token"
    secret.write_text("SECRET-7f3a\n")
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data"), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    launch = resolve(described("launcher_sgemm_tiled"), {}, H100_FIGURES, "job")
    files = {"k.cu": f'#include "{secret}"\n#include "/etc/passwd"\n__global__ void k(float* x) {{}}\n'}
    from dataclasses import replace

    hostile = replace(launch, files=files, source="k.cu", entry="k")
    path = compiler.nvcc.nvcc_path(cfg)
    confinement = compile_process.probe_nvcc(path, cfg.compile_timeout_s, cfg.compile_memory_mb)
    assert confinement.available, confinement.detail
    request = compiler.nvcc.request(hostile, path, "-arch=sm_90", cfg.compile_timeout_s)
    with pytest.raises(compiler.CompileError) as failed:
        compile_cache.build(request, ["hostile", str(tmp_path)], confinement, "nvcc", True, lambda log: log, cfg)
    assert "SECRET" not in str(failed.value) and "root:" not in str(failed.value)
    assert "cannot open source file" in str(failed.value) or "No such file" in str(failed.value) \
        or "Permission denied" in str(failed.value), str(failed.value)


def test_a_compile_error_names_the_kernel_file_as_the_repository_has_it(tmp_path):
    broken = described("launcher_sgemm_tiled")
    files = dict(broken.files)
    files["src/sgemm_tiled.cu"] = files["src/sgemm_tiled.cu"].replace("acc += As", "acc += Undeclared")
    with pytest.raises(compiler.CompileError) as failed:
        build(KernelDescription.model_validate({**broken.model_dump(mode="json"), "files": files}), tmp_path)
    log = str(failed.value)
    assert "src/sgemm_tiled.cu(" in log and "Undeclared" in log and "src/src/" not in log, log
    assert str(tmp_path) not in log


def test_the_repository_through_a_worker(cfg, start_worker):
    """Every kernel of the folder verified at an odd size through the API, a real worker and the CPU
    double, each result saying nvcc built it, with which flags, and how each parameter was passed."""
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    client = make_client(cfg)
    # Its launcher descriptions launch CUDA kernels from host code: the GPU's (tests/test_gpu_nvcc.py);
    # on the CPU a launcher case is tried with host launchers (tests/test_launcher_cases.py).
    sources = [d.model_dump(mode="json") for d in load_folder(REPO) if d.launcher is None]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[70, 33, 65]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=300)
    assert job["status"] == "succeeded", job["error"]
    got = {r["variant"]: r for r in job["results"]}
    assert set(got) == {d["name"] for d in json.loads((REPO / "gemmwatch.json").read_text()) if "launcher" not in d}
    assert all(r["verified"] for r in got.values()), {n: r["error"] for n, r in got.items()}
    tiled = got["launcher_sgemm_tiled"]["env"]
    assert tiled["launch"]["compiler"] == "nvcc" and tiled["launch"]["flags"] == ["-O3", "-std=c++17"]
    assert tiled["launch"]["params"][0] == "M: unsigned long"
    assert tiled["resources"]["compiler"].startswith("nvcc 13.")
    assert got["launcher_hgemm_half_scalars"]["env"]["launch"]["params"][3] == "alpha: __half"


@pytest.mark.parametrize("target", ["sm_90a,code=compute_90", "sm_90a -I/etc", "compute_90a", "sm_90a\n"])
def test_a_target_cannot_carry_more_into_the_librarys_gencode(target):
    """A launcher's library is built with -gencode made from the target: only a target's own
    spelling gets there."""
    with pytest.raises(ValidationError, match="target"):
        described("launcher_sgemm_tiled", target=target)
    from worker.compile.nvcc import library_target

    assert library_target("-arch=sm_90a") == "-gencode=arch=compute_90a,code=sm_90a"


@pytest.mark.parametrize(("include_dirs", "expected"), [
    ([], ["-Isrc"]),
    (["utils"], ["-Isrc/utils", "-Isrc"]),
    # "." is the repository's root, as LeetCUDA's `-I kernels/hgemm` says it: one -Isrc, where "." stands
    ([".", "utils", "mma/basic"], ["-Isrc", "-Isrc/utils", "-Isrc/mma/basic"]),
])
def test_nvccs_include_folders_follow_the_description_each_once(include_dirs, expected):
    from worker.compile.nvcc import options

    launch = resolve(described("launcher_sgemm_tiled", include_dirs=include_dirs), {}, H100_FIGURES, "job")
    given = [o for o in options(launch, "-arch=sm_90") if o.startswith("-I")]
    assert given == expected


def test_separable_compilation_links_a_launchers_library_and_a_kernel_is_refused_it():
    """CMake's CUDA_SEPARABLE_COMPILATION (andylolu2/simpleGEMM's): -rdc=true reaches nvcc for a launcher's
    library, which nvcc then links with the device runtime; a kernel's cubin is built whole."""
    for spelled in (["-rdc=true"], ["--relocatable-device-code", "true"], ["-rdc", "true"]):
        flags = compile_flags.parse(["-O3", *spelled])
        assert flags.relocatable and flags.nvcc == ("-O3", "-rdc=true"), spelled
    assert compile_flags.parse(["-rdc=true", "-rdc=false"]) == compile_flags.parse([])  # the last one counts
    assert described("launcher_run_sgemm_tiled", flags=["-O3", "-rdc=true"]).build_flags.relocatable
    with pytest.raises(ValidationError, match="-rdc=true links a launcher's library; a kernel's cubin is built whole"):
        described("launcher_sgemm_tiled", flags=["-O3", "-rdc=true"])
