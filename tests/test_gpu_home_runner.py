"""Issue 48 on the GPU: public repositories as they are, `gemmwatch.json` the only line beside them.

pranjalssh/fast.cu (MIT; docs/examples/pranjalssh-fast.cu.gemmwatch.json) is built as its Makefile
builds it: the runner `matmul.cu` is the unit (its main, <iostream>, its cuBLAS check and -lcublas
included), -DNDEBUG, -arch=sm_90a. Its launchers are reached through using-declarations, take a
debug buffer passed as null when timing, set their own grid, block, shared memory and clusters,
and kernels 10-12 keep the TMA map of C from their first call: each is verified only where every
call of a case gets the same C (worker/measure/verify.py). The repository comes from $FASTCU_REPO or
.devkit/repos/fast.cu (carried to the GPU machine; the tests skip without it). The figures beside
the repository's own runner: scripts/studies/home_runner_compare.py and docs/BENCHMARKS.md.

yencal/cuda-hgemm-mma (MIT; docs/examples/yencal-cuda-hgemm-mma.gemmwatch.json): FP16 mma.sync
kernels with FP16 sums, launchers that are static members of class templates and never read their
`__half beta`, the unit its `src/profile.cu` (cuBLAS and cuRAND called, `-lcurand -lcublas`),
`-arch=sm_80` ("sm_80+"). From $HGEMM_MMA_REPO or .devkit/repos/cuda-hgemm-mma.
"""

import os
import shutil
from pathlib import Path

import pytest

from core.description.kernel_folder import load_folder
from tests.conftest import wait_for_job

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "examples" / "pranjalssh-fast.cu.gemmwatch.json"


def _repository(tmp_path_factory, variable: str, name: str, marker: str, manifest: Path) -> Path:
    """The repository as it is, copied, with only its manifest written beside it."""
    given = os.environ.get(variable)
    for folder in ([Path(given)] if given else []) + [ROOT / ".devkit" / "repos" / name]:
        if (folder / marker).is_file():
            into = tmp_path_factory.mktemp(name) / "repo"
            shutil.copytree(folder, into)
            shutil.copyfile(manifest, into / "gemmwatch.json")
            return into
    pytest.skip(f"{name} is not here (${variable} or .devkit/repos/{name})")


@pytest.fixture(scope="module")
def fastcu(tmp_path_factory) -> Path:
    return _repository(tmp_path_factory, "FASTCU_REPO", "fast.cu", "matmul.cu", MANIFEST)


@pytest.fixture(scope="module")
def hgemm_mma(tmp_path_factory) -> Path:
    return _repository(tmp_path_factory, "HGEMM_MMA_REPO", "cuda-hgemm-mma", "src/profile.cu",
                       ROOT / "docs" / "examples" / "yencal-cuda-hgemm-mma.gemmwatch.json")


@pytest.fixture(scope="module")
def matmul_playground(tmp_path_factory) -> Path:
    return _repository(tmp_path_factory, "MATMUL_PLAYGROUND_REPO", "matmul-playground", "src/kernel6.cu",
                       ROOT / "docs" / "examples" / "alexarmbr-matmul-playground.gemmwatch.json")


def _measured(client, folder: Path, wanted: list[str], size: int) -> dict[str, dict]:
    """The folder's kernels of those names through the API and a GPU worker at size^3, every one
    there; their results by name."""
    sources = [d.model_dump(mode="json") for d in load_folder(folder, wanted)]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[size, size, size]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=900)
    got = {r["variant"]: r for r in job["results"]}
    assert set(got) == set(wanted), job["error"]
    return got


def _verified(client, folder: Path, wanted: list[str], size: int) -> dict[str, dict]:
    """As _measured, and every one verified."""
    got = _measured(client, folder, wanted, size)
    bad = {name: r["error"] for name, r in got.items() if not r["verified"]}
    assert not bad, bad
    return got

def test_the_repositorys_kernels_verify_as_it_builds_them(gpu_stack, fastcu):
    """Kernel 3 (the debug buffer), 8 (clusters) and 10-12 (C's map kept from the first call), at
    the runner's own size, through the API and a GPU worker, in the manifest's burst mode."""
    got = _verified(gpu_stack, fastcu, [f"fastcu_matmul_{n}" for n in (3, 8, 10, 11, 12)], 8192)
    for name, r in got.items():
        assert r["mode"] == "burst" and r["gflops"] > 100_000, (name, r["mode"], r["gflops"])
        launch = r["env"]["launch"]
        assert launch["block"] is None and launch["grid"] is None and launch["launcher"].startswith("runKernel")
        assert launch["params"][-1] == "null: int*" and launch["target"] == "sm_90a"
        assert r["form"] == "rcc+ab"
        # The case's confined process is on the stage clock (each case took 30-35 s in its job on the
        # H200 while its stages read about 1 s, before the launcher's setup was a stage of its own).
        stages = r["env"]["stages_s"]
        print(name, stages)  # on the H200: compile 13-16 s, launcher_setup 15-20 s, samples ~1 s
        assert stages["launcher_setup"] > 0 and sum(stages.values()) > 5.0, (name, stages)


def test_class_template_launchers_with_fp16_sums_and_curand_verify(gpu_stack, hgemm_mma):
    """Three of the nine (the first step, the cp.async ring, the last step) at 4096^3: each loads
    (cuRAND found for its unit's own input fill), is called by its template-instance name, and is
    verified in the form it computes, FP16 sums, beta never read, and timed over its runner's inputs."""
    wanted = ["mma_direct_128x128x64_64x64", "mma_multistage_256x128x64_64x64_s3",
              "mma_final_128x128x64_64x64_s3_swtrue_bs16"]
    for name, r in _verified(gpu_stack, hgemm_mma, wanted, 4096).items():
        launch = r["env"]["launch"]
        assert r["form"] == "rrr+alpha+acc16" and r["mode"] == "burst", (name, r["form"], r["mode"])
        assert r["env"]["inputs"] == "uniform(0,1)"  # its runner's curand fill, from the manifest
        assert launch["target"] == "sm_80+" and launch["launcher"].endswith(">::Run"), launch
        assert "ignored: __half" in launch["params"], launch["params"]


def test_bare_template_kernels_that_read_c_and_write_d_verify_where_the_repository_s_own_check_passes(
        gpu_stack, matmul_playground):
    """alexarmbr/matmul-playground's six kernels (its launchers hold their own timing loops, so each kernel
    is named by its template instance, with its block, grid and shared memory) at 4096^3: units that
    include <iostream>, its CMake file's options with --keep, D = alpha*A*B + beta*C with FP16 sums.
    Kernels 3 and 4 (the swizzled ones) fail the repository's own check on an H200 (main.cu's
    sgemm_verify turned on, 512^3: "Mismatch at index 0: -6.70312 != -1.40137"; docs/BENCHMARKS.md):
    gemmwatch refuses them as wrong too, with no speed, and verifies the other four."""
    wanted = [f"matmul_playground_{i}" for i in range(1, 7)]
    got = _measured(gpu_stack, matmul_playground, wanted, 4096)
    for name, r in got.items():
        launch = r["env"]["launch"]
        assert r["form"] == "rrr+acc16" and r["mode"] == "burst", (name, r["form"], r["mode"])
        assert [p.split(":")[0] for p in launch["params"][:4]] == ["A", "B", "C", "D"], launch["params"]
    wrong = {name for name, r in got.items() if not r["verified"]}
    assert wrong == {"matmul_playground_3", "matmul_playground_4"}, {n: got[n]["error"] for n in got}
    for name in wrong:
        assert got[name]["status"] == "incorrect" and got[name]["error"].startswith("wrong result"), got[name]
        assert got[name]["gflops"] is None, got[name]["gflops"]
    for name in set(got) - wrong:
        assert got[name]["status"] == "passed" and got[name]["gflops"] > 10_000, (name, got[name]["gflops"])
