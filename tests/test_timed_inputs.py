"""Issue 48: what the timed runs multiply (core/description/inputs.py). A card at its power limit clocks by the
data it multiplies (an H200's cuBLAS FP16 GEMM at 8192^3: 6-8 % faster over [0, 1) than over
[-1, 1)), so a repository whose runner fills its matrices with curand's [0, 1) is matched only over
the same kind of data. The check always multiplies signed inputs; the timed runs the chosen ones,
in the same buffers; a verdict between results timed over different inputs says so first."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.description.builtins import builtin_kernels
from core.description.inputs import SIGNED, drawn
from core.description.kernel_folder import FolderError, load_folder
from core.settings import Settings
from core.results.toolchain import said_first, toolchain_changes
from tests.fake_gpu import CpuRunner
from tests.test_launcher_cases import HOST, described, needs_confinement
from tests.test_launcher_cases import POLICY as LAUNCHER_POLICY
from worker.measure import runner as runner_module
from worker.measure.cases import Case, KernelChoice, TimingPolicy
from worker.measure.problem import Problem

HOME = Path(__file__).parent / "fixtures" / "home_runner_repo"
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def test_each_distribution_draws_what_its_name_says():
    rng = np.random.default_rng
    signed, unsigned, normal = (drawn(rng(3), 200, 100, name, np.float32)
                                for name in ("uniform(-1,1)", "uniform(0,1)", "normal(0,1)"))
    assert signed.min() < -0.9 and signed.max() > 0.9 and signed.min() >= -1 and signed.max() < 1
    assert unsigned.min() >= 0 and unsigned.max() < 1 and unsigned.mean() == pytest.approx(0.5, abs=0.02)
    assert np.abs(normal).max() > 2.5 and normal.std() == pytest.approx(1.0, abs=0.03)
    assert all(x.dtype == np.float32 and x.shape == (200, 100) for x in (signed, unsigned, normal))
    with pytest.raises(ValueError, match="uniform\\(0,1\\)"):
        drawn(rng(3), 2, 2, "uniform(0,2)", np.float32)


def case(inputs: str, layout="row", batch: int = 1, name: str = "smem_tiled") -> Case:
    update = {"inputs": inputs} if layout == "row" else {"inputs": inputs, "layout": layout}
    builtin = builtin_kernels()[name]
    described = type(builtin).model_validate({**builtin.model_dump(), **update})
    return Case(0, name, 48, 40, 32, 7, KernelChoice(described, {}, "builtin"), batch=batch)


@pytest.mark.parametrize("layout,batch", [("row", 1), ("column", 1), ({"A": "col", "B": "row", "C": "row"}, 3)])
def test_the_timed_block_multiplies_the_chosen_inputs_in_the_same_buffers_and_the_checked_ones_after(layout, batch):
    runner = CpuRunner()
    c = case("uniform(0,1)", layout, batch)
    form = c.kernel.description.form
    p = Problem(runner.device, c, form)
    buffers = [p.a_stored, p.b_stored, p.a_in, p.b_in]
    checked = [x.copy() for x in buffers]
    reference = (p.a.copy(), p.b.copy())
    assert min(float(x.min()) for x in checked) < -0.5  # the check's inputs: signed
    with p.timed_inputs(c.inputs):
        assert [x is y for x, y in zip(buffers, [p.a_stored, p.b_stored, p.a_in, p.b_in])] == [True] * 4
        for x, before in zip(buffers, checked):
            assert float(x.min()) >= 0 and float(x.max()) < 1 and not np.array_equal(x, before)
        # the kernel's layout of A is A: the same values, laid as its form says
        np.testing.assert_array_equal(np.asarray(p.a_in), np.asarray(p.a_stored))
    for x, before in zip(buffers, checked):
        np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(p.a, reference[0])  # what the reference multiplies never changed
    np.testing.assert_array_equal(p.b, reference[1])


def test_the_signed_default_changes_nothing():
    runner = CpuRunner()
    p = Problem(runner.device, case(SIGNED), case(SIGNED).kernel.description.form)
    before = p.a_in.copy()
    with p.timed_inputs(SIGNED):
        np.testing.assert_array_equal(p.a_in, before)
    with p.timed_inputs(None):
        np.testing.assert_array_equal(p.a_in, before)


def test_a_case_is_checked_over_signed_inputs_and_timed_over_its_own(monkeypatch):
    """Through Runner.run_case: the kernel's check sees signed A and B, the timing loop the
    chosen ones, and the result says which."""
    made, seen = [], []

    class Recorded(Problem):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    real_time_pair = runner_module.timing.time_pair

    def time_pair(*args, **kwargs):
        seen.append((float(made[-1].a_in.min()), float(made[-1].b_in.min())))
        return real_time_pair(*args, **kwargs)

    monkeypatch.setattr(runner_module, "Problem", Recorded)
    monkeypatch.setattr(runner_module.timing, "time_pair", time_pair)
    runner = CpuRunner()
    checked_with = []
    real_verify = runner.verify

    def verify(function, launch, problem, ref, seed):
        checked_with.append(float(problem.a_in.min()))
        return real_verify(function, launch, problem, ref, seed)

    runner.verify = verify
    out = runner.run_case(case("uniform(0,1)"), POLICY)
    assert out.verified and out.gflops and out.env["inputs"] == "uniform(0,1)"
    assert checked_with and checked_with[0] < 0
    assert seen and min(seen[0]) >= 0
    assert float(made[-1].a_in.min()) < 0  # the signed inputs again, for the check after the timing
    seen.clear()
    assert runner.run_case(case(SIGNED), POLICY).env["inputs"] == SIGNED and min(seen[0]) < 0


def test_a_wrong_kernel_over_unsigned_inputs_is_still_caught(monkeypatch):
    """The check stays signed: a kernel that drops a k-slab is off by sqrt(32/K) there, against a
    fraction of a percent over [0, 1) where every element of C is near K/4."""
    monkeypatch.setenv("FAKE_GPU_WRONG_VARIANT", "smem_tiled")
    out = CpuRunner().run_case(case("uniform(0,1)"), POLICY)
    assert not out.verified and out.status == "incorrect" and out.gflops is None


def test_a_folder_says_it_once_for_every_kernel_and_a_wrong_name_is_refused(tmp_path):
    shutil.copytree(HOME, tmp_path / "repo")
    manifest = tmp_path / "repo" / "gemmwatch.json"
    folder = json.loads(manifest.read_text())
    folder["kernels"][1]["inputs"] = "normal(0,1)"
    manifest.write_text(json.dumps({**folder, "inputs": "uniform(0,1)"}))
    described = {d.name: d.inputs for d in load_folder(tmp_path / "repo")}
    assert described["home_kernel_1"] == "uniform(0,1)" and described["home_kernel_2"] == "normal(0,1)"
    assert set(described.values()) == {"uniform(0,1)", "normal(0,1)"}
    manifest.write_text(json.dumps({**folder, "inputs": "uniform(0,2)"}))
    with pytest.raises(FolderError) as refused:
        load_folder(tmp_path / "repo")
    assert "inputs" in str(refused.value) and "'uniform(0,1)'" in str(refused.value)


def test_a_verdict_between_results_timed_over_other_inputs_says_so_first():
    base, head = {"inputs": "uniform(-1,1)", "gpu": {"driver": "580.65"}}, {"inputs": "uniform(0,1)",
                                                                           "gpu": {"driver": "580.65"}}
    changes = toolchain_changes(base, head)
    assert changes == ["inputs uniform(-1,1) -> uniform(0,1)"]
    assert said_first(changes, "7.0 % above the baseline").startswith(
        "the environment changed between base and head (inputs uniform(-1,1) -> uniform(0,1))")
    assert toolchain_changes(head, head) == [] and toolchain_changes({}, head) == []


def test_a_verdict_between_results_flushed_another_way_says_so_first():
    """A worker moved to GEMMWATCH_L2_FLUSH=memset (to compare with do_bench) reads a GEMM at the power
    cap a few per cent slower: the verdict names the flush before it blames the kernel. A hot result
    (no flush, None) against a cold one is a change of mode, not of flush."""
    base, head = {"l2_flush": "readwrite", "inputs": "uniform(-1,1)"}, {"l2_flush": "memset", "inputs": "uniform(-1,1)"}
    assert toolchain_changes(base, head) == ["L2 flush readwrite -> memset"]
    assert said_first(toolchain_changes(base, head), "4.2 % below the baseline").startswith(
        "the environment changed between base and head (L2 flush readwrite -> memset)")
    assert toolchain_changes(base, {**head, "l2_flush": None}) == []
    assert toolchain_changes(head, head) == []



@needs_confinement
def test_a_launcher_case_is_timed_over_its_inputs_in_its_confined_process(shared_kernel_cache, monkeypatch):
    """A launcher's case runs in a process that can open nothing new once confined: the draw and the
    swap of the timed inputs are rehearsed before, so the case still verifies and times."""
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    monkeypatch.setenv("GEMMWATCH_COMPILE_TIMEOUT_S", "300")
    desc = described(HOST, "host_gemm", inputs="uniform(0,1)")
    out = CpuRunner().run_case(Case(0, desc.name, 70, 33, 65, seed=3, kernel=KernelChoice(desc, {}, "job")),
                               LAUNCHER_POLICY)
    assert out.verified and out.error is None and out.n_samples >= 10, out.error
    assert out.env["inputs"] == "uniform(0,1)"


def test_inputs_survive_every_way_a_kernel_is_carried():
    """A description's `inputs` through the plan a job stores, its thawed copy (a confirmation's
    kernels) and the cases the worker makes of it; and it is part of the kernel's identity."""
    from core.records.kernel_store import description_from_stored, kernel_hash
    from worker.measure.cases import cases_from_plan, plan

    builtin = builtin_kernels()["smem_tiled"]
    mine = type(builtin).model_validate({**builtin.model_dump(), "inputs": "uniform(0,1)"})
    thawed = description_from_stored(mine.model_dump(mode="json"))
    assert thawed.inputs == "uniform(0,1)" and thawed == mine
    assert kernel_hash(mine) != kernel_hash(builtin)
    kernels = {"smem_tiled": mine}
    cases = cases_from_plan(plan("bench", ["smem_tiled"], [[8, 8, 8]], {}, {}, kernels), 1, kernels, {"smem_tiled"})
    assert [c.inputs for c in cases] == ["uniform(0,1)"]
    ab = Case(0, "smem_tiled", 8, 8, 8, 1, KernelChoice(thawed, {}, "job"), base=KernelChoice(builtin, {}, "builtin"))
    assert ab.inputs == "uniform(0,1)"  # a confirmation times both sides over the head's inputs


@pytest.mark.parametrize(("base_output", "buffers"), [("input", 1), ("fp32", 2)])
def test_a_confirmation_times_both_sides_on_one_set_of_matrices_where_their_types_agree(monkeypatch, base_output,
                                                                                        buffers):
    """Base and head over the same A, B and C, so the ratio is the kernels' alone (on buffers of
    their own an unchanged binary read 1.8 % slower on one side); a base with another C type keeps its own."""
    from tests.descriptions import builtin_variant
    from worker.measure import ab

    made = []

    class Recorded(Problem):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(ab, "Problem", Recorded)
    def unsigned(choice: KernelChoice) -> KernelChoice:  # a confirmation times over the head's inputs
        desc = choice.description
        return KernelChoice(type(desc).model_validate({**desc.model_dump(), "inputs": "uniform(0,1)"}),
                            choice.tunables, choice.origin)

    name = "bf16_mma_sync"  # a half kernel the CPU double runs (no sm_90a target)
    both = Case(0, name, 64, 64, 64, 3, unsigned(builtin_variant(name)), base=builtin_variant(name, base_output))
    out = CpuRunner().run_case(both, POLICY)
    assert out.verified and out.env["ab"]["base_ms"], out.error
    assert len(made) == buffers
