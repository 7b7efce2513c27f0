"""Issue 50 on the GPU: CUTLASS's example 48 (Hopper, warp-specialised, TF32) as the nvidia-cutlass
wheel ships it, run through `gemmwatch::cutlass3_gemm<Gemm>` in its case's confined process, verified
against cuBLAS and timed; a shape its can_implement refuses fails with CUTLASS's reason, and the
same kernel described in the wrong layout is caught. The CPU's half is tests/test_cutlass_adapter.py.
"""

import pytest

from core.settings import Settings
from tests.test_cutlass_adapter import example, examples  # noqa: F401 (a fixture)
from tests.test_launcher_cases import case, needs_confinement
from worker.measure.cases import TimingPolicy

pytestmark = [pytest.mark.gpu, needs_confinement]


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    from worker.measure.runner import CupyRunner

    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path_factory.mktemp("cutlass-adapter")), GEMMWATCH_COMPILE_TIMEOUT_S="600",
                   GEMMWATCH_CASE_TIME_CAP_S="1")
    return CupyRunner(cfg), TimingPolicy.from_settings(cfg)


@pytest.mark.parametrize("size", [(1000, 1003, 996), (64, 4096, 256), (4096, 4096, 4096)])
def test_gpu_cutlass_example_48_verifies_and_is_timed_over_its_own_kind_of_inputs(gpu, examples, size):  # noqa: F811
    runner, policy = gpu
    out = runner.run_case(case(example(examples), size=size), policy)
    assert out.verified and out.error is None, out.error
    assert out.gflops and out.gflops > 0 and out.pct_of_cublas, out
    assert out.env["inputs"] == "integers(-8,8)"
    assert out.env["launcher"]["what_happened"] == "the launcher returned normally", out.env["launcher"]
    assert out.env["resources"]["compiler"].startswith("nvcc 13.") and "+ CUTLASS " in out.env["resources"]["compiler"]


def test_gpu_a_shape_cutlass_cannot_run_fails_with_cutlasss_reason(gpu, examples):  # noqa: F811
    runner, policy = gpu
    out = runner.run_case(case(example(examples), size=(1000, 1003, 997)), policy)  # K not a multiple of 4
    assert not out.verified and out.gflops is None, out
    assert "gemmwatch::cutlass3_gemm: the GEMM cannot run 1000x1003x997: CUTLASS's can_implement refused it" \
        in out.error, out.error


def test_gpu_the_example_described_in_the_wrong_layout_is_caught(gpu, examples):  # noqa: F811
    runner, policy = gpu
    wrong = example(examples, name="cutlass_48_b_said_row", layout={"A": "row", "B": "row", "C": "col"})
    out = runner.run_case(case(wrong, size=(256, 256, 256)), policy)
    assert not out.verified and out.status == "incorrect" and "wrong result" in out.error, out.error
