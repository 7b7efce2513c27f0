"""A @triton.autotune configuration's pre_hook, read once in the confined compile process
(worker/compile/triton_module.pre_hook_of) and honoured by the runner where all it does is zero C or a
workspace: the configuration runs with that zeroing before each call, in its time, as Triton's launcher runs the
hook before each launch at home. A hook that does anything else is passed over, saying what it did.
tests/fixtures/triton_pre_hook_repo holds split-K kernels shaped as triton-lang/kernels' (init_to_zero("C"))."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.description.description_fields import hook_zeroes
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES, CpuRunner
from worker.compile import triton_build, triton_module
from worker.measure import triton_autotune
from worker.measure.cases import Case, KernelChoice, TimingPolicy

REPO = Path(__file__).parent / "fixtures" / "triton_pre_hook_repo"
PLAIN = ["A", "B", "C", "locks", "M", "N", "K"]
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.3, GEMMWATCH_MIN_TIME_S=0))


def config(hook, **kwargs):
    """A triton.Config as the reader meets it: its values, and its hook."""
    return SimpleNamespace(kwargs={"BLOCK_M": 64, "SPLIT_K": 4, **kwargs}, num_warps=4, num_stages=3, pre_hook=hook)


def init_to_zero(name):
    return lambda nargs: nargs[name].zero_()


def leave():
    raise SystemExit(3)


@pytest.mark.parametrize(("hook", "read"), [
    (init_to_zero("C"), {"zeroes": [2]}),
    (lambda nargs: [nargs["locks"].zero_(), nargs["C"].fill_(0.0)], {"zeroes": [2, 3]}),
    # its own values, as Triton hands it the configuration's
    (lambda nargs: nargs["C"].zero_() if nargs["SPLIT_K"] > 1 else None, {"zeroes": [2]}),
    (lambda nargs: nargs["C"].fill_(1), {"unread": "it fills C with 1"}),
    (lambda nargs: nargs["C"].fill_(True), {"unread": "it fills C with True"}),
    (lambda nargs: nargs["C"].data_ptr(), {"unread": "it reads C.data_ptr"}),
    (lambda nargs: nargs["C"].zero_() if nargs["M"] > 1024 else None, {"unread": "it raised TypeError: '>' not "
                                                                                 "supported between instances of "
                                                                                 "'_HookArgument' and 'int'"}),
    (lambda nargs: nargs["EVEN_K"], {"unread": "it raised KeyError: 'EVEN_K'"}),
    (lambda nargs: None, {"unread": "it zeroes none of the kernel's arguments"}),
    (lambda nargs: leave(), {"unread": "it raised SystemExit: 3"}),
])
def test_a_pre_hook_is_read_as_the_arguments_it_zeroes_or_as_what_else_it_did(hook, read):
    assert triton_module.pre_hook_of(config(hook), PLAIN) == read
    assert triton_module.describe_config(config(hook), PLAIN)["pre_hook"] == read


def test_a_configuration_with_no_hook_says_none():
    assert "pre_hook" not in triton_module.describe_config(config(None), PLAIN)


def test_a_read_hook_names_the_args_it_zeroes_and_an_unread_one_none():
    args = ["A", "B", "C", "zeros(int32, M)"]
    assert hook_zeroes({"pre_hook": {"zeroes": [2, 3]}}, args) == ["C", "zeros(int32, M)"]
    assert hook_zeroes({"pre_hook": {"zeroes": [5]}}, args) == ["parameter 5"]
    assert hook_zeroes({"pre_hook": {"unread": "it reads C.data_ptr"}}, args) is None
    assert hook_zeroes({"pre_hook": True}, args) is None  # as earlier workers kept a hooked configuration
    assert hook_zeroes({}, args) == []


def described(entry: str, **changes) -> KernelDescription:
    return KernelDescription.model_validate({
        "name": entry, "language": "triton", "source": "split_k.py", "entry": entry,
        "files": {"split_k.py": (REPO / "split_k.py").read_text()}, "compute_mode": "fp16",
        "args": ["A", "B", "C", "M", "N", "K", "lda", "=1", "ldb", "=1", "ldc", "=1"],
        "grid": {"x": "cdiv(M, BLOCK_M)", "y": "cdiv(N, BLOCK_N)", "z": "SPLIT_K"}, **changes})


HOOKED = {"kwargs": {"BLOCK_M": 64}, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}


def test_a_configuration_whose_hook_zeroes_c_runs_with_c_zeroed_and_one_that_zeroes_a_does_not():
    desc = described("split_k_zeroed")
    zeroes_c = {**HOOKED, "pre_hook": {"zeroes": [2]}}
    assert triton_build.unsupported(zeroes_c, desc) is None
    assert triton_autotune.with_config(desc, zeroes_c).c_starts_zero is True
    plain = {**HOOKED}
    assert triton_autotune.with_config(desc, plain).c_starts_zero is False
    assert triton_build.unsupported({**HOOKED, "pre_hook": {"zeroes": [0, 2]}}, desc) == (
        "a pre_hook that zeroes A (the runner zeroes only C and workspaces before a call)")
    unread = {**HOOKED, "pre_hook": {"unread": "it reads C.data_ptr"}}
    assert triton_build.unsupported(unread, desc).startswith(
        "a pre_hook (the job's Python before each launch, not read as zeroing the kernel's arguments: it reads "
        "C.data_ptr;")
    # where the description zeroes C itself, as before hooks were read
    assert triton_build.unsupported(unread, described("split_k_zeroed", c_starts_zero=True)) is None


def test_a_hook_that_zeroes_a_workspace_runs_as_the_runner_zeroes_it_anyway():
    desc = described("split_k_zeroed", args=["A", "B", "C", "zeros(int32, cdiv(M, 64))", "M", "N", "K", "lda", "=1",
                                              "ldb", "=1", "ldc", "=1"])
    zeroes_locks = {**HOOKED, "pre_hook": {"zeroes": [3]}}
    assert triton_build.unsupported(zeroes_locks, desc) is None
    assert triton_autotune.with_config(desc, zeroes_locks).c_starts_zero is False


pytest.importorskip("triton")


@pytest.fixture
def runner(tmp_path, monkeypatch, shared_kernel_cache):
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(shared_kernel_cache))
    return CpuRunner()


def test_the_compile_process_reads_each_kernel_s_hooks(runner):
    read = {entry: [c.get("pre_hook") for c in runner.device.triton_kernel(
        resolve(described(entry), {}, H100_FIGURES, "job"))["configs"]]
        for entry in ("split_k_zeroed", "split_k_filled", "split_k_reads_c", "split_k_zeroes_a")}
    assert read == {"split_k_zeroed": [{"zeroes": [2]}] * 2, "split_k_filled": [{"zeroes": [2]}] * 2,
                    "split_k_reads_c": [{"unread": "it reads C.data_ptr"}] * 2,
                    "split_k_zeroes_a": [{"zeroes": [0]}] * 2}


@pytest.mark.parametrize("entry", ["split_k_zeroed", "split_k_filled"])
def test_a_split_k_kernel_whose_hooks_zero_c_is_verified_with_c_zeroed_before_each_call(runner, entry):
    """Both configurations are timed and the case verified: the double's kernel adds into C, so it is right only
    where C starts at zero, as the hook leaves it at home."""
    desc = described(entry)
    for m, n, k in [(96, 80, 64), (100, 130, 70)]:
        out = runner.run_case(Case(0, desc.name, m, n, k, 3, KernelChoice(desc, {}, "job")), POLICY)
        assert out.verified and out.gflops, out.error
        assert out.env["launch"]["c_starts_zero"] is True
        assert [t["index"] for t in out.env["triton"]["timed"]] == [0, 1] and "not_run" not in out.env["triton"]


def test_the_same_kernel_without_its_hook_is_judged_wrong(runner):
    """The body alone, one split, C not zeroed: what the hook's zeroing is for (the check above could not pass
    without it)."""
    desc = described("split_k_body", defines={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 2})
    out = runner.run_case(Case(0, desc.name, 96, 80, 64, 3, KernelChoice(desc, {}, "job")), POLICY)
    assert not out.verified


@pytest.mark.parametrize(("entry", "said"), [
    ("split_k_reads_c", "2 not run: a pre_hook (the job's Python before each launch, not read as zeroing the "
                        "kernel's arguments: it reads C.data_ptr;"),
    ("split_k_zeroes_a", "2 not run: a pre_hook that zeroes A (the runner zeroes only C and workspaces"),
])
def test_a_kernel_whose_every_hook_does_more_than_zero_c_fails_saying_what_the_hook_did(runner, entry, said):
    desc = described(entry)
    with pytest.raises(ValueError, match=f"none of the 2 configurations of {entry}'s @triton.autotune ran here: "
                                         + re.escape(said)):
        runner.run_case(Case(0, desc.name, 96, 80, 64, 3, KernelChoice(desc, {}, "job")), POLICY)
