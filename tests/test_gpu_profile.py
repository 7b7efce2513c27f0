"""GPU tests for issue 39 (run on the lent H100): the profile step over real Nsight Compute and
real cubins. Skipped where no CUDA device exists (CI), never faked."""

import shutil

import pytest

from core.description.builtins import builtin_kernels
from core.settings import Settings
from worker.profile import profile_step

pytestmark = pytest.mark.gpu

SIZE = 4096


def _entry(base_desc, head_desc, size: int = SIZE) -> dict:
    frozen = [{"description": d.model_dump(mode="json"), "tunables": {}, "origin": "builtin"}
              for d in (base_desc, head_desc)]
    return {"variant": head_desc.name, "m": size, "n": size, "k": size, "tunables": {}, "base": frozen[0],
            "head": frozen[1]}


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    # The profile process reads its settings from the environment, as a worker's GPU process does.
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path / "data"))
    return Settings()


def test_a_reverted_optimisation_is_profiled_base_and_head_with_its_cause_named(cfg):
    if shutil.which("ncu") is None:
        pytest.skip("no Nsight Compute on this machine")
    overlap = builtin_kernels()["tail_split_k_overlap"]
    reverted = overlap.model_copy(update={"defines": {**overlap.defines, "LAST_K_AFTER_BARRIER": 0}})
    [made] = profile_step.measure(cfg, 1, [0], [_entry(overlap, reverted)])
    assert made["status"] == "profiled", made["reason"]
    [kernel] = made["data"]["kernels"]
    rows = {r["key"]: r for r in kernel["rows"]}
    duration = rows["ncu.duration"]
    assert duration["base"] > 0 and duration["head"] > 0
    # The head's math sits before the barrier: the SASS says so whatever the clocks did.
    assert rows["loop.barrier_placement"]["head"] < rows["loop.barrier_placement"]["base"], rows["loop.barrier_placement"]
    assert made["summary"].startswith("sgemm_tail_split_k: duration "), made["summary"]
    # Both sides in one profiler run; the whole of it (process start, compile from the cache, both
    # kernels profiled) is what a confirmed pair costs.
    assert 0 < made["data"]["ncu_wall_s"] < cfg.profile_timeout_s


def test_without_nsight_compute_the_sass_diff_still_comes(cfg, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_NCU", "")
    cfg = Settings()
    overlap = builtin_kernels()["tail_split_k_overlap"]
    reverted = overlap.model_copy(update={"defines": {**overlap.defines, "LAST_K_AFTER_BARRIER": 0}})
    [made] = profile_step.measure(cfg, 1, [0], [_entry(overlap, reverted)])
    assert made["status"] == "sass only" and made["reason"] == "GEMMWATCH_NCU is empty: Nsight Compute is off on this worker"
    assert "barrier" in made["summary"] or "main loop" in made["summary"], made["summary"]
