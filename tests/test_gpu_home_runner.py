"""Issue 48 on the GPU: a public Hopper repository as it is, `gemmwatch.json` the only line beside it.

pranjalssh/fast.cu (MIT; docs/examples/pranjalssh-fast.cu.gemmwatch.json) is built as its Makefile
builds it: the runner `matmul.cu` is the unit (its main, <iostream>, its cuBLAS check and -lcublas
included), -DNDEBUG, -arch=sm_90a. Its launchers are reached through using-declarations, take a
debug buffer passed as null when timing, set their own grid, block, shared memory and clusters,
and kernels 10-12 keep the TMA map of C from their first call: each is verified only where every
call of a case gets the same C (worker/verify.py). The repository comes from $FASTCU_REPO or
.devkit/repos/fast.cu (carried to the GPU machine; the tests skip without it). The figures beside
the repository's own runner: scripts/studies/home_runner_compare.py and docs/BENCHMARKS.md.
"""

import os
import shutil
from pathlib import Path

import pytest

from core.kernel_folder import load_folder
from tests.conftest import wait_for_job

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "examples" / "pranjalssh-fast.cu.gemmwatch.json"


@pytest.fixture(scope="module")
def fastcu(tmp_path_factory) -> Path:
    given = os.environ.get("FASTCU_REPO")
    for folder in ([Path(given)] if given else []) + [ROOT / ".devkit" / "repos" / "fast.cu"]:
        if (folder / "matmul.cu").is_file():
            into = tmp_path_factory.mktemp("fastcu") / "repo"
            shutil.copytree(folder, into)
            shutil.copyfile(MANIFEST, into / "gemmwatch.json")
            return into
    pytest.skip("pranjalssh/fast.cu is not here ($FASTCU_REPO or .devkit/repos/fast.cu)")


def test_the_repositorys_kernels_verify_as_it_builds_them(gpu_stack, fastcu):
    """Kernel 3 (the debug buffer), 8 (clusters) and 10-12 (C's map kept from the first call), at
    the runner's own size, through the API and a GPU worker, in the manifest's burst mode."""
    client = gpu_stack
    wanted = [f"fastcu_matmul_{n}" for n in (3, 8, 10, 11, 12)]
    sources = [d.model_dump(mode="json") for d in load_folder(fastcu, wanted)]
    posted = client.post("/api/jobs", json={"sources": sources, "sizes": [[8192, 8192, 8192]]})
    assert posted.status_code == 202, posted.text
    job = wait_for_job(client, posted.json()["id"], timeout=900)
    got = {r["variant"]: r for r in job["results"]}
    assert set(got) == set(wanted), job["error"]
    bad = {name: r["error"] for name, r in got.items() if not r["verified"]}
    assert not bad, bad
    for name, r in got.items():
        assert r["mode"] == "burst" and r["gflops"] > 100_000, (name, r["mode"], r["gflops"])
        launch = r["env"]["launch"]
        assert launch["block"] is None and launch["grid"] is None and launch["launcher"].startswith("runKernel")
        assert launch["params"][-1] == "null: int*" and launch["target"] == "sm_90a"
        assert r["form"] == "rcc+ab"
