"""Issue 50: `gemmwatch ci` over a folder that mixes CUDA and Triton kernels. A Triton kernel whose
head commit cuts its pipeline from four stages to two is confirmed slower in one A/B job beside an
unchanged CUDA kernel; a base measured under another Triton release is named in the summary
(core/results/toolchain.py), not blamed on the kernel.

The CPU double times a kernel by its source, not by its pipeline: the head's file carries the
double's slowdown marker (a Python comment) beside its real change, num_stages 4 -> 2 (on the GPU,
scripts/studies/ci_triton_mixed.sh makes the same change alone)."""

import json
import shutil
from pathlib import Path

import pytest

from core.records.db import session_factory, upgrade_database
from core.records.models import Result
from core.records.tokens import create_token
from tests.conftest import make_settings
from tests.test_ci_hook import CI_DEADLINE, KERNEL, ci
from tests.test_triton_kernels import REPO as TRITON_REPO

pytestmark = CI_DEADLINE  # it waits on `gemmwatch ci` (tests/test_ci_hook.py)

triton = pytest.importorskip("triton")
SLOWER_MARK = "# #define FAKE_GPU_SLOWDOWN_PCT 1900\n"  # the CPU double's marker: a comment to Python


def mixed_folder(path: Path, stages: int, marker: str = "") -> Path:
    path.mkdir()
    (path / "my_gemm.cu").write_text(KERNEL)
    (path / "matmul.py").write_text(marker + (TRITON_REPO / "matmul.py").read_text())
    triton_kernel = json.loads((TRITON_REPO / "gemmwatch.json").read_text())["kernels"][0]
    triton_kernel["triton"] = {"num_warps": 4, "num_stages": stages}
    (path / "gemmwatch.json").write_text(json.dumps([
        {"name": "my_gemm", "source": "my_gemm.cu", "entry": "my_gemm", "block": [16, 16], "grid": {"tile": [16, 16]}},
        triton_kernel]))
    return path


@pytest.fixture
def stack(tmp_path, pg_url, redis_url, start_worker, live_server):
    """A server, a worker (the CPU double) and a token: (url, token, settings)."""
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    with session_factory(cfg)() as db:
        token = create_token(db, "ci")
    return live_server(cfg), token, cfg


def row(text: str, variant: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {variant} |") and "[" in line)


@pytest.mark.long
def test_a_triton_kernel_cut_to_two_stages_is_confirmed_slower_beside_cuda(stack, tmp_path):
    url, token, _ = stack
    base = mixed_folder(tmp_path / "base", 4)
    head = mixed_folder(tmp_path / "head", 2, SLOWER_MARK)
    first = ci(url, token, tmp_path, "--commit", "7a170001", "--branch", "main", "--parents", "", "--kernels-dir",
               str(base))
    assert first.returncode == 0, first.stdout + first.stderr
    slowed = ci(url, token, tmp_path, "--commit", "7a170002", "--branch", "main", "--parents", "7a170001",
                "--kernels-dir", str(head))
    assert slowed.returncode == 1, slowed.stdout + slowed.stderr
    assert "Confirmed in one job" in slowed.stdout
    assert "❌ regression" in row(slowed.stdout, "triton_matmul_fp16")
    assert "regression" not in row(slowed.stdout, "my_gemm")


@pytest.mark.long
def test_a_base_built_by_another_triton_release_is_named(stack, tmp_path):
    url, token, cfg = stack
    folder = mixed_folder(tmp_path / "same", 4)
    first = ci(url, token, tmp_path, "--commit", "7a180001", "--branch", "main", "--parents", "", "--kernels-dir",
               str(folder), "--no-confirm")
    assert first.returncode == 0, first.stdout + first.stderr
    # The base as a worker with an older Triton recorded it.
    with session_factory(cfg)() as db:
        for result in db.query(Result).filter(Result.variant == "triton_matmul_fp16"):
            env = json.loads(json.dumps(result.env))
            env["resources"]["compiler"] = "Triton 3.5.0"
            result.env = env
        db.commit()
    second = ci(url, token, tmp_path, "--commit", "7a180002", "--branch", "main", "--parents", "7a180001",
                "--kernels-dir", str(shutil.copytree(folder, tmp_path / "again")), "--no-confirm")
    assert second.returncode in (0, 1), second.stdout + second.stderr
    assert (f"- triton_matmul_fp16 128×128×128 rrr+ab: the environment changed between base and head (compiler Triton 3.5.0 -> "
            f"Triton {triton.__version__})") in second.stdout, second.stdout
    assert "- my_gemm 128" not in second.stdout.split("Environment:")[-1]
