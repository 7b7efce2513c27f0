"""Issue 50: CUTLASS C++ with pinned headers. `"libraries": ["cutlass"]` on an nvcc kernel puts the
worker's CUTLASS (the nvidia-cutlass wheel's headers, worker/compile/header_libraries.py) on the include
path of the confined compile, and its version into every result's compiler.

Real nvcc, the real confined compile process and, through the stack, a real worker; the CPU
double stands in for the GPU only (tests/fake_gpu.py). The launcher over CUTLASS's device GEMM is
run on the GPU in tests/test_gpu_launchers.py.
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
from tests.test_launcher_cases import needs_confinement
from worker.compile import header_libraries, launcher_library, nvcc

REPO = Path(__file__).parent / "fixtures" / "cutlass_repo"
CUTLASS = header_libraries.cutlass(None)  # the wheel's, installed by `make install`
needs_nvcc = pytest.mark.skipif(nvcc.nvcc_path(Settings()) is None, reason="needs nvcc (gemmwatch[compile])")


def described(name: str, **changes) -> KernelDescription:
    desc = next(d for d in load_folder(REPO) if d.name == name)
    return KernelDescription.model_validate({**desc.model_dump(mode="json"), **changes})


def as_job(desc: KernelDescription) -> dict:
    return desc.model_dump(mode="json", exclude_none=True)


def test_the_workers_cutlass_is_found_with_its_version():
    assert CUTLASS.version.split(".")[0].isdigit() and int(CUTLASS.version.split(".")[0]) >= 3
    assert any(Path(d, "cutlass", "gemm", "device", "gemm.h").is_file() for d in CUTLASS.include_dirs)
    assert CUTLASS.label == f"CUTLASS {CUTLASS.version}"


def test_a_library_is_for_nvcc_kernels_only():
    with pytest.raises(ValidationError, match=r'a library\'s headers are for a kernel nvcc builds \("compiler": "nvcc"\)'):
        described("cutlass_naive", compiler="nvrtc", flags=[])
    with pytest.raises(ValidationError, match="libraries"):
        described("cutlass_naive", libraries=["cub"])


def test_a_worker_without_cutlass_says_how_to_get_it(tmp_path):
    from worker.compile.compiled import CompileRefused

    with pytest.raises(CompileRefused, match=r"pip install --no-deps 'nvidia-cutlass>=4.2'.*GEMMWATCH_CUTLASS_DIR"):
        header_libraries.cutlass(tmp_path)


@needs_nvcc
def test_a_cutlass_kernel_runs_through_the_stack_and_its_result_names_cutlasss_version(tmp_path, pg_url, redis_url,
                                                                                      start_worker):
    """And the same kernel without `libraries` fails to compile, saying which header it missed."""
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    client = make_client(cfg)
    without = {**as_job(described("cutlass_naive")), "name": "no_libraries", "libraries": []}
    resp = client.post("/api/jobs", json={"sources": [as_job(described("cutlass_naive")), without],
                                          "sizes": [[33, 17, 9]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=600)
    got = {r["variant"]: r for r in job["results"]}
    assert got["cutlass_naive"]["verified"], got["cutlass_naive"]["error"]
    assert got["cutlass_naive"]["env"]["resources"]["compiler"].endswith(f" + CUTLASS {CUTLASS.version}")
    assert not got["no_libraries"]["verified"]
    assert "cutlass/cutlass.h" in got["no_libraries"]["error"], got["no_libraries"]["error"]


@needs_confinement
def test_a_launcher_over_cutlass_device_gemm_builds_and_its_signature_is_planned(tmp_path):
    cfg = Settings(GEMMWATCH_KERNEL_CACHE_DIR=str(tmp_path / "cache"), GEMMWATCH_COMPILE_TIMEOUT_S="600")
    library = launcher_library.build(resolve(described("cutlass_simt_sgemm"), {}, H100_FIGURES, "job"), "9.0", cfg)
    assert [how for _role, how in library.plan.passing] == ["i32", "i32", "i32", "f32", "ptr", "ptr", "f32", "ptr",
                                                            "ptr"]
    assert library.compiler.endswith(f" + CUTLASS {CUTLASS.version}")
