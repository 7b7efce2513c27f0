"""Issue 50: a Triton kernel in gemmwatch.json (`"language": "triton"`), its @triton.jit function
compiled ahead of time for the worker's GPU in the confined compile process (worker/compile/triton_sandbox.py),
where alone the job's Python is imported; the cubin is loaded and launched by the runner like any
other kernel (its block and shared memory from Triton), so timing never runs the job's code.

Real Triton (it compiles for sm_90 without a GPU) and the real confined process; through the
stack a real worker, the CPU double standing in for the GPU only. On the GPU:
tests/test_gpu_triton.py.
"""

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.records.db import upgrade_database
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import H100_FIGURES
from worker.compile import compiler
from worker.arguments import kernel_args
from worker.compile.compiled import CompileError, CompileRefused

triton = pytest.importorskip("triton")
REPO = Path(__file__).parent / "fixtures" / "triton_repo"


def described(**changes) -> KernelDescription:
    desc = load_folder(REPO)[0]
    return KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True), **changes})


def compiled(desc: KernelDescription, tmp_path):
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")
    launch = resolve(desc, {}, H100_FIGURES, "job")
    built = compiler.compile_launch(launch, "9.0", cfg)
    return built, kernel_args.load(built, launch, lambda symbol: symbol)


@pytest.mark.parametrize(("changes", "words"), [
    ({"block": [128]}, "block: not for a Triton kernel"),
    ({"source": "matmul.cu", "files": {"matmul.cu": "x"}}, "a Triton kernel's source is a Python file"),
    ({"grid": None}, "grid: a Triton kernel's launch needs its grid"),
    ({"language": "cuda"}, 'triton: options for a Triton kernel; set "language": "triton"'),
    ({"compiler": "nvcc"}, "compiler: not for a Triton kernel"),
    ({"build": "torch.utils.cpp_extension"}, "build: not for a Triton kernel"),
])
def test_a_triton_description_that_asks_for_what_cuda_takes_is_refused(changes, words):
    with pytest.raises(ValidationError, match=words):
        described(**changes)


TUNE = {"values": [1, 2], "default": 1}
TRITON = {"num_warps": 4, "num_stages": 3}


@pytest.mark.parametrize(("constants", "words"), [
    ({"defines": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "M": 64}}, "M: reserved for the problem and the GPU"),
    ({"tunables": {"SM_COUNT": TUNE}}, "SM_COUNT: reserved for the problem and the GPU"),
    ({"triton": {**TRITON, "string_constexprs": {"K": "relu"}}}, "K: reserved for the problem and the GPU"),
    ({"tunables": {"BLOCK_M": TUNE}}, "BLOCK_M: in both defines and tunables"),
    ({"triton": {**TRITON, "string_constexprs": {"BLOCK_N": "64"}}}, "BLOCK_N: in both defines and triton.string"),
    ({"tunables": {"EVEN": TUNE}, "triton": {**TRITON, "string_constexprs": {"EVEN": "yes"}}},
     "EVEN: in both tunables and triton.string_constexprs"),
])
def test_a_kernel_s_constants_are_one_set_of_names_whatever_their_kind(constants, words):
    """Defines, tunables and word constexprs: none named like what the problem or the GPU gives an
    expression, none given two values, whichever two kinds it is given in."""
    with pytest.raises(ValidationError, match=words):
        described(**constants)
    described(triton={**TRITON, "string_constexprs": {"ACTIVATION": ""}})  # a word of its own name is taken


def test_the_kernel_compiles_confined_and_its_launch_comes_from_triton(tmp_path):
    built, loaded = compiled(described(), tmp_path)
    assert built.compiler == f"Triton {triton.__version__}"
    (kernel,) = built.kernels
    assert kernel["symbol"] == "matmul_kernel" and kernel["declared"] == 12 and kernel["num_warps"] == 4
    assert kernel["shared"] > 0  # its ring of A and B tiles, in dynamic shared memory
    assert loaded.shared_bytes == kernel["shared"]
    # The twelve declared parameters as args names them; Triton's own after them (its scratch
    # pointers: two in Triton 3.6) passed null.
    assert [how for _, how in loaded.plan.passing[:3]] == ["ptr", "ptr", "ptr"]
    extra = loaded.plan.passing[12:]
    assert extra and all(p == ("null", "null") for p in extra), extra


# The job's Python that runs in the confined process: what defines its kernel (here a decorator that
# first tries a way out). The file is there; each way out is refused, and the refusal is the error the
# job is told. Each its own test since the first tries: a file outside, TCP, a UNIX socket (Redis's,
# PostgreSQL's), UDP, a shell, a file written outside its folder, the libc call behind Python's back.
HOSTILE = [
    "open('/etc/hostname').read()",
    "import socket\nsocket.create_connection(('127.0.0.1', 5432), timeout=2)",
    "import socket\nsocket.socket(socket.AF_UNIX).connect('/var/run/postgresql/.s.PGSQL.5432')",
    "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))",
    "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'id'], check=True)",
    "open('/tmp/gemmwatch-triton-escape', 'w').write('x')",
    "import ctypes\nassert ctypes.CDLL(None).socket(2, 1, 0) >= 0, 'no socket'",
]


def with_decorator_trying(attempt: str) -> KernelDescription:
    """The fixture's kernel under a decorator that first makes `attempt`."""
    body = "".join(f"    {line}\n" for line in attempt.splitlines())
    text = (REPO / "matmul.py").read_text().replace("@triton.jit\n", "@trying\n@triton.jit\n")
    return described(files={"matmul.py": f"def trying(fn):\n{body}    return fn\n\n\n{text}"})


@pytest.mark.parametrize("attempt", HOSTILE)
def test_the_jobs_python_runs_confined(tmp_path, attempt):
    with pytest.raises(CompileError, match="matmul_kernel in matmul.py is not a @triton.jit function; statements "
                                           "of the file that raised") as caught:
        compiled(with_decorator_trying(attempt), tmp_path)
    assert "Error" in str(caught.value)
    assert not Path("/tmp/gemmwatch-triton-escape").exists()


def test_what_the_jobs_python_prints_is_not_taken_for_the_reply(tmp_path):
    """The reply goes back on the compile process's stdout: a module that prints as it is defined (to
    stdout, and straight to fd 1) still compiles, its noise on stderr."""
    loud = with_decorator_trying("print('{\"ok\": true, \"cubin\": \"\"}')\nimport os\nos.write(1, b'noise')")
    built, loaded = compiled(loud, tmp_path)
    assert built.cubin_path.exists() and loaded.plan is not None


def test_the_jobs_python_sees_none_of_the_workers_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_DATABASE_URL", "postgresql://gemmwatch:hunter2@db/gemmwatch")
    monkeypatch.setenv("GEMMWATCH_ADMIN_TOKEN", "admin-secret-token")
    with pytest.raises(CompileError) as caught:
        compiled(with_decorator_trying("import os\nraise RuntimeError('seen: ' + repr(dict(os.environ)))"), tmp_path)
    assert "seen: {" in str(caught.value)  # what it saw came back: none of the worker's settings in it
    assert "hunter2" not in str(caught.value) and "admin-secret" not in str(caught.value)
    assert "GEMMWATCH_" not in str(caught.value)


@pytest.mark.parametrize("attempt", [
    # The timer, CuPy or torch of the process that times: not this process, and not importable here.
    "import cupy\ncupy.cuda.Event.elapsed_time = lambda *a: 0.001",
    "import torch\ntorch.cuda.Event.elapsed_time = lambda *a: 0.001",
])
def test_the_timer_cannot_be_reached_from_the_jobs_python(tmp_path, attempt):
    with pytest.raises(CompileError, match="ModuleNotFoundError|ImportError|PermissionError"):
        compiled(with_decorator_trying(attempt), tmp_path)


def test_a_file_that_spins_forever_meets_the_compile_time_limit(tmp_path):
    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="45")
    launch = resolve(with_decorator_trying("while True:\n    pass"), {}, H100_FIGURES, "job")
    with pytest.raises(CompileRefused, match="compile exceeded the 45 s compile time limit"):
        compiler.compile_launch(launch, "9.0", cfg)


def test_a_file_that_allocates_without_bound_meets_the_memory_limit(tmp_path):
    with pytest.raises(CompileError, match="MemoryError"):
        compiled(with_decorator_trying("hoard = []\nwhile True:\n    hoard.append(bytearray(1 << 26))"), tmp_path)


def test_the_files_script_is_not_run_and_what_raised_is_in_the_log(tmp_path):
    """Module-level script (a bare call, a loop) is not run at all; an assignment that raised is in
    the compile's log."""
    text = (REPO / "matmul.py").read_text()
    script = "open('/tmp/gemmwatch-triton-escape', 'w').write('x')\nwhile True:\n    pass\nhostname = open('/etc/hostname').read()\n"
    built, _ = compiled(described(files={"matmul.py": text + script}), tmp_path)
    assert not Path("/tmp/gemmwatch-triton-escape").exists()
    assert "passed over" in built.log and "hostname" not in built.log.split("passed over")[0]
    assert "Error" in built.log.split("passed over")[1], built.log


@pytest.mark.parametrize(("changes", "words"), [
    ({"defines": {"BLOCK_M": 64, "BLOCK_N": 64}}, "tl.constexpr parameters BLOCK_K have no value"),
    ({"args": ["A", "B", "C", "M", "N", "K"]}, "takes 12 parameters that are not tl.constexpr"),
    ({"entry": "tl"}, "tl in matmul.py is not a @triton.jit function"),
])
def test_a_kernel_that_does_not_fit_its_description_is_told_why(tmp_path, changes, words):
    with pytest.raises(CompileError, match=words):
        compiled(described(**changes), tmp_path)


def test_a_triton_kernel_runs_through_the_stack(tmp_path, pg_url, redis_url, start_worker):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    client = make_client(cfg)
    source = described().model_dump(mode="json", exclude_none=True)
    resp = client.post("/api/jobs", json={"sources": [source], "sizes": [[96, 80, 64]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=300)
    (result,) = job["results"]
    assert result["verified"], result["error"]
    assert result["env"]["resources"]["compiler"] == f"Triton {triton.__version__}"
    assert result["env"]["launch"]["block"] == [128, 1, 1]


def test_after_a_hostile_triton_job_the_next_job_runs(tmp_path, pg_url, redis_url, start_worker):
    """A job whose Python spins, one whose Python reaches for a socket: each ends with its reason,
    and the worker goes on to verify the next job's kernel."""
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="45")
    client = make_client(cfg)
    jobs = []
    for desc in (with_decorator_trying("while True:\n    pass"), with_decorator_trying(HOSTILE[1]), described()):
        source = desc.model_dump(mode="json", exclude_none=True)
        resp = client.post("/api/jobs", json={"sources": [source], "sizes": [[96, 80, 64]]})
        assert resp.status_code == 202, resp.text
        jobs.append(resp.json()["id"])
    spun, reached, good = (wait_for_job(client, job, timeout=600) for job in jobs)
    assert "compile exceeded the 45 s compile time limit" in spun["results"][0]["error"]
    assert "statements of the file that raised" in reached["results"][0]["error"]
    assert good["results"][0]["verified"], good["results"][0]["error"]


DEVICE_DESCRIPTORS = '''
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        acc += tl.dot(a_desc.load([pid_m * BLOCK_M, k0]), b_desc.load([k0, pid_n * BLOCK_N]))
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


def test_a_kernel_that_builds_tensor_descriptors_on_the_device_is_given_its_global_scratch(tmp_path):
    """tl.make_tensor_descriptor writes each program's descriptors into Triton's global scratch memory,
    a parameter Triton adds after the kernel's own: gemmwatch plans a buffer there (a null one would
    fault), sized by what Triton compiled (128 bytes a descriptor here), and the profile scratch after it
    null."""
    loaded = compiled(described(files={"matmul.py": DEVICE_DESCRIPTORS}), tmp_path)[1]
    roles = [role for role, _how in loaded.plan.passing]
    scratch_at = roles.index(kernel_args.SCRATCH_ROLE)
    assert dict(loaded.plan.passing)[kernel_args.SCRATCH_ROLE] == "ptr"
    assert all(role == "null" for role in roles[scratch_at + 1:]), roles
    assert loaded.scratch is not None and loaded.scratch.per_program >= 2 * 128, loaded.scratch
    assert loaded.scratch.per_program % 128 == 0 and loaded.scratch.align >= 64 and loaded.scratch.ctas == 1
    # A kernel that makes no descriptor gets no scratch: its added parameters stay null.
    plain = compiled(described(), tmp_path)[1]
    assert plain.scratch is None and kernel_args.SCRATCH_ROLE not in dict(plain.plan.passing)


@pytest.mark.parametrize(("grid", "ctas", "align"), [((5, 3, 1), 1, 128), ((132, 1, 1), 2, 1024), ((7, 2, 3), 1, 64)])
def test_one_launch_s_scratch_is_every_program_s_slice_on_an_aligned_address(grid, ctas, align):
    import numpy

    class OddAddresses:  # an allocator whose memory starts one byte past an aligned address
        uint8 = numpy.uint8

        @staticmethod
        def empty(size, dtype):
            whole = numpy.empty(size + 2 * 4096, dtype=dtype)
            return whole[-whole.ctypes.data % 4096 + 1:][:size]

    scratch = kernel_args.Scratch(per_program=384, align=align, ctas=ctas)
    for xp in (numpy, OddAddresses):
        buffer = scratch.buffer(grid, xp)
        assert buffer.nbytes == grid[0] * grid[1] * grid[2] * ctas * 384
        assert buffer.ctypes.data % align == 0, (xp, buffer.ctypes.data)


def test_a_device_descriptor_kernel_runs_through_a_job_with_its_scratch(tmp_path, monkeypatch):
    """Through the runner on the CPU double: the job verifies, and each call was given a scratch of
    every program's slice (the double checks size and alignment as a GPU would fault on them)."""
    from tests.fake_gpu import CpuRunner
    from worker.measure.cases import Case, KernelChoice, TimingPolicy

    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    runner = CpuRunner()
    desc = described(name="device_descriptors", files={"matmul.py": DEVICE_DESCRIPTORS})
    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))
    out = runner.run_case(Case(0, desc.name, 96, 80, 64, 3, KernelChoice(desc, {}, "job")), policy)
    assert out.verified and out.gflops, out.error
    calls = [given for kernel in runner.device.compiled for given in kernel.scratch_given]
    per_program = runner.device.compiled[0].scratch.per_program
    programs = 2 * 2  # 96 x 80 in 64 x 64 tiles (the fixture's defines)
    assert calls and set(calls) == {programs * per_program}, calls

# -- host TensorDescriptors: a kernel that takes each matrix as a descriptor made on the host ----------
HOST_DESCRIPTORS = '''
import triton
import triton.language as tl


@triton.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k0]), b_desc.load([k0, pid_n * BLOCK_N]), acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
'''


def host_descriptors(**changes) -> KernelDescription:
    """The descriptors' blocks as TensorDescriptor.from_tensor would be given them: A [BLOCK_M, BLOCK_K],
    B [BLOCK_K, BLOCK_N], C [BLOCK_M, BLOCK_N], written as boxes (the contiguous side first)."""
    return described(**{"name": "host_descriptors", "files": {"matmul.py": HOST_DESCRIPTORS}, "entry": "matmul_tma",
                        "args": ["A_map", "B_map", "C_map", "M", "N", "K"],
                        "defines": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64},
                        "tensor_maps": {"A": {"box": ["BLOCK_K", "BLOCK_M"]}, "B": {"box": ["BLOCK_N", "BLOCK_K"]},
                                        "C": {"box": ["BLOCK_N", "BLOCK_M"]}},
                        **changes})


def test_a_host_descriptor_is_a_map_by_value_then_the_matrix_s_shape_and_strides(tmp_path):
    """What Triton's launcher passes for a TensorDescriptor: the 128-byte map, shape (i32) and strides
    (i64) of the matrix as it lies; and each map's box and swizzle as Triton compiled its copies for
    (its 128-byte rows: B's [64, 128] block of FP16 is two boxes of 64 x 64)."""
    built, loaded = compiled(host_descriptors(), tmp_path)
    (kernel,) = built.kernels
    assert [t for t, _s in kernel["params"]][:1] == [None]  # Triton's cubin: sizes only
    passing = loaded.plan.passing
    for i, x in enumerate("ABC"):
        assert passing[5 * i:5 * i + 5] == ((f"{x}_map", "map"), (f"{x}_map.shape0", "i32"), (f"{x}_map.shape1", "i32"),
                                             (f"{x}_map.stride0", "i64"), (f"{x}_map.stride1", "i64")), passing
    assert passing[15:18] == (("M", "i32"), ("N", "i32"), ("K", "i32"))
    assert loaded.descriptors == {"A": (64, 128, 128), "B": (64, 64, 128), "C": (64, 128, 128)}, loaded.descriptors
    assert kernel_args.maps_by_value(loaded.plan) == {"A", "B", "C"}


def test_a_descriptor_s_shape_and_strides_follow_the_matrix_s_layout():
    from worker.arguments import tensor_maps

    launch = resolve(host_descriptors(layout={"A": "row", "B": "col", "C": "row"}), {}, H100_FIGURES, "job")
    got = tensor_maps.descriptor_values(launch, 96, 80, 64)
    assert got == {"A_map.shape0": 96, "A_map.shape1": 64, "A_map.stride0": 64, "A_map.stride1": 1,
                   "B_map.shape0": 80, "B_map.shape1": 64, "B_map.stride0": 64, "B_map.stride1": 1,  # N lines of K
                   "C_map.shape0": 96, "C_map.shape1": 80, "C_map.stride0": 80, "C_map.stride1": 1}
    with pytest.raises(ValueError, match="cannot run a batch"):
        tensor_maps.descriptor_values(launch, 96, 80, 64, batch=2)


def test_a_triton_descriptor_takes_triton_s_swizzle_not_one_of_its_own():
    with pytest.raises(ValidationError, match="tensor_maps.A.swizzle: a Triton kernel's descriptor takes the swizzle"):
        host_descriptors(tensor_maps={"A": {"box": ["BLOCK_K", "BLOCK_M"], "swizzle": 128},
                                      "B": {"box": ["BLOCK_N", "BLOCK_K"]}, "C": {"box": ["BLOCK_N", "BLOCK_M"]}})


def test_a_host_descriptor_kernel_runs_on_the_cpu_double_and_a_size_the_tma_cannot_take_is_refused(tmp_path,
                                                                                                   monkeypatch):
    """Through the runner on the CPU double: verified, each descriptor given the matrix's shape and strides
    (the double checks them against the sizes); at K = 997 (a line of A of 1994 bytes) there is no map,
    and the case is refused saying so before any launch."""
    from tests.fake_gpu import CpuRunner
    from worker.measure.cases import Case, KernelChoice, TimingPolicy

    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    runner = CpuRunner()
    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))
    out = runner.run_case(Case(0, "host_descriptors", 96, 80, 64, 3, KernelChoice(host_descriptors(), {}, "job")),
                          policy)
    assert out.verified and out.gflops, out.error
    with pytest.raises(ValueError, match="reaches A through its tensor map alone .* 1994 bytes, not a multiple of 16"):
        runner.run_case(Case(0, "host_descriptors", 96, 80, 997, 3, KernelChoice(host_descriptors(), {}, "job")),
                        policy)
