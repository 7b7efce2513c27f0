"""Issue 50: a Triton kernel in gemmwatch.json (`"language": "triton"`), its @triton.jit function
compiled ahead of time for the worker's GPU in the confined compile process (worker/triton_sandbox.py),
where alone the job's Python is imported; the cubin is loaded and launched by the runner like any
other kernel (its block and shared memory from Triton), so timing never runs the job's code.

Real Triton (it compiles for sm_90 without a GPU) and the real confined process; through the
stack a real worker, the CPU double standing in for the GPU only. On the GPU:
tests/test_gpu_triton.py.
"""

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.db import upgrade_database
from core.kernel import resolve
from core.kernel_description import KernelDescription
from core.kernel_folder import load_folder
from core.settings import Settings
from tests.conftest import make_client, make_settings, wait_for_job
from tests.fake_gpu import H100_FIGURES
from worker import compiler, kernel_args
from worker.compiled import CompileError

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
])
def test_a_triton_description_that_asks_for_what_cuda_takes_is_refused(changes, words):
    with pytest.raises(ValidationError, match=words):
        described(**changes)


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


@pytest.mark.parametrize(("prefix", "words"), [
    # The job's module-level code runs in the confined process: the file is there, reading it is not.
    ("open('/etc/hostname').read()\n", "importing matmul.py failed"),
    ("import socket\nsocket.create_connection(('127.0.0.1', 5432), timeout=2)\n", "importing matmul.py failed"),
    # Other ways out, each its own test since the first tries: a UNIX socket (Redis's, PostgreSQL's),
    # UDP, a shell, a file written outside its folder, the libc call behind Python's back.
    ("import socket\nsocket.socket(socket.AF_UNIX).connect('/var/run/postgresql/.s.PGSQL.5432')\n",
     "importing matmul.py failed"),
    ("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))\n",
     "importing matmul.py failed"),
    ("import subprocess\nsubprocess.run(['/bin/sh', '-c', 'id'], check=True)\n", "importing matmul.py failed"),
    ("open('/tmp/gemmwatch-triton-escape', 'w').write('x')\n", "importing matmul.py failed"),
    ("import ctypes\nassert ctypes.CDLL(None).socket(2, 1, 0) >= 0, 'no socket'\n", "importing matmul.py failed"),
])
def test_the_jobs_python_runs_confined(tmp_path, prefix, words):
    text = (REPO / "matmul.py").read_text()
    hostile = described(files={"matmul.py": prefix + text})
    with pytest.raises(CompileError, match=words) as caught:
        compiled(hostile, tmp_path)
    assert "Error" in str(caught.value)


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
