"""@triton.heuristics, computed per case as Triton's launcher computes them before a call
(tests/fixtures/triton_heuristics_repo: EVEN_K from the call's K and the configuration's BLOCK_K, and
MASK_K from EVEN_K). Real Triton and the real confined compile process; the kernel's run and its check
are the GPU's (tests/test_gpu_triton.py -k heuristics)."""

from dataclasses import replace
from pathlib import Path

import pytest

from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES
from worker.arguments import kernel_args
from worker.compile import compiler, triton_build
from worker.compile.compiled import CompileError, CompileRefused
from worker.measure import triton_autotune

pytest.importorskip("triton")
REPO = Path(__file__).parent / "fixtures" / "triton_heuristics_repo"


def settings(tmp_path) -> Settings:
    return Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")


def described(source: str | None = None) -> KernelDescription:
    desc = load_folder(REPO)[0]
    if source is None:
        return desc
    return KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True),
                                             "files": {"matmul.py": source}})


def case_launch(desc: KernelDescription, described_kernel: dict, m: int, n: int, k: int, config: int = 0):
    launch = resolve(triton_autotune.with_config(desc, described_kernel["configs"][config]), {}, H100_FIGURES, "job")
    return triton_build.for_case(launch, described_kernel,
                                 kernel_args.named_values(launch, m, n, k, None, None, None, 1.0, 0.0))


@pytest.fixture(scope="module")
def kernel_read(tmp_path_factory):
    cfg = settings(tmp_path_factory.mktemp("read"))
    return triton_build.describe(resolve(described(), {}, H100_FIGURES, "job"), "9.0", cfg)


def test_the_heuristics_are_read_with_the_configurations(kernel_read):
    assert kernel_read["heuristics"] == ["EVEN_K", "MASK_K"]
    assert [c["kwargs"]["BLOCK_K"] for c in kernel_read["configs"]] == [32, 64, 64]
    assert [c.get("pre_hook") for c in kernel_read["configs"]] == [None, None, {"zeroes": [2]}]  # C, zeroed
    assert "EVEN_K" in kernel_read["constexprs"]  # given by no description, config or default


def test_each_case_compiles_with_the_values_its_heuristics_give(kernel_read, tmp_path):
    """K = 4096 is a multiple of BLOCK_K, 997 is not: two cubins, each recording what the heuristics
    gave; the second heuristic saw the first's value (the kernel asserts they differ)."""
    cfg = settings(tmp_path)
    even = case_launch(described(), kernel_read, 1024, 1024, 4096)
    odd = case_launch(described(), kernel_read, 1000, 1003, 997)
    assert even.arg_values == (None, None, None, 1024, 1024, 4096, 4096, 1024, 1024)
    assert odd.arg_values[3:6] == (1000, 1003, 997)
    built_even, built_odd = compiler.compile_launch(even, "9.0", cfg), compiler.compile_launch(odd, "9.0", cfg)
    assert heuristics_of(built_even) == {"EVEN_K": True, "MASK_K": False}
    assert heuristics_of(built_odd) == {"EVEN_K": False, "MASK_K": True}
    assert built_even.cubin_path.read_bytes() != built_odd.cubin_path.read_bytes()
    # What a result records of them (env.launch.heuristics, worker/measure/runner.py).
    loaded = kernel_args.load(built_odd, odd, lambda symbol: symbol)
    assert loaded.heuristics == {"EVEN_K": False, "MASK_K": True}
    # The configuration's BLOCK_K is what the heuristic read: 4000 is a multiple of 32 and not of 64.
    for config, even_k in ((0, True), (1, False)):
        built = compiler.compile_launch(case_launch(described(), kernel_read, 64, 64, 4000, config), "9.0", cfg)
        assert heuristics_of(built)["EVEN_K"] is even_k
    # A device keeps the two apart.
    assert kernel_args.loaded_key(even) != kernel_args.loaded_key(replace(even, arg_values=odd.arg_values))


def heuristics_of(built) -> dict:
    """What the compile process recorded beside the cubin: the values the kernel was compiled with."""
    return next(k["heuristics"] for k in built.kernels)


def test_a_kernel_without_heuristics_shares_its_cubin_across_sizes(kernel_read):
    """Only a kernel with heuristics carries its case's values (and compiles per set of them)."""
    plain = {**kernel_read, "heuristics": []}
    assert case_launch(described(), plain, 1024, 1024, 4096).arg_values == ()


def test_a_heuristic_that_raises_fails_the_compile_with_its_own_line(kernel_read, tmp_path):
    broken = (REPO / "matmul.py").read_text().replace('args["K"] % args["BLOCK_K"]', 'args["K"] % args["BLOCK_Q"]')
    desc = described(broken)
    launch = case_launch(desc, kernel_read, 1024, 1024, 4096)
    with pytest.raises((CompileError, CompileRefused)) as failed:
        compiler.compile_launch(launch, "9.0", settings(tmp_path))
    said = str(failed.value)
    assert "@triton.heuristics of matmul_kernel failed for this case" in said and "KeyError: 'BLOCK_Q'" in said, said


def test_a_heuristic_that_sets_a_plain_parameter_is_refused(kernel_read, tmp_path):
    broken = (REPO / "matmul.py").read_text().replace('"MASK_K": lambda', '"stride_am": lambda')
    launch = case_launch(described(broken), kernel_read, 1024, 1024, 4096)
    with pytest.raises((CompileError, CompileRefused)) as failed:
        compiler.compile_launch(launch, "9.0", settings(tmp_path))
    assert "sets stride_am, which is not a tl.constexpr parameter" in str(failed.value)


@pytest.mark.parametrize("gives", ["object()", "[1, 2]", "'x' * 65"])
def test_a_heuristic_value_that_cannot_be_compiled_in_is_refused(kernel_read, tmp_path, gives):
    broken = (REPO / "matmul.py").read_text().replace('"MASK_K": lambda args: not args["EVEN_K"]',
                                                      f'"MASK_K": lambda args: {gives}')
    launch = case_launch(described(broken), kernel_read, 1024, 1024, 4096)
    with pytest.raises((CompileError, CompileRefused)) as failed:
        compiler.compile_launch(launch, "9.0", settings(tmp_path))
    assert "@triton.heuristics gives MASK_K a " in str(failed.value), str(failed.value)
