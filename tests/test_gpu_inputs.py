"""The timed runs' inputs on the GPU (issue 48, core/description/inputs.py): CuPy draws each distribution, the
swap keeps every buffer's address and puts the checked values back exactly, in every layout, a
batch and FP16/FP8; a case over [0, 1) verifies, times and says so, and a confirmation (A/B) too."""

import pytest

from core.description.builtins import builtin_kernels
from core.description.precision import Precision
from core.settings import Settings
from worker.measure.cases import Case, KernelChoice, TimingPolicy
from worker.measure.problem import Problem
from worker.measure.runner import CupyRunner

pytestmark = pytest.mark.gpu

POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=0.5, GEMMWATCH_MIN_TIME_S=0))


@pytest.fixture(scope="module")
def runner():
    return CupyRunner()


def case(name: str, inputs: str, size=(256, 192, 320), batch: int = 1, **changes) -> Case:
    builtin = builtin_kernels()[name]
    described = type(builtin).model_validate({**builtin.model_dump(), "inputs": inputs, **changes})
    return Case(0, name, *size, seed=11, kernel=KernelChoice(described, {}, "builtin"), batch=batch)


@pytest.mark.parametrize("inputs,low,high", [("uniform(0,1)", 0.0, 1.0), ("normal(0,1)", -10.0, 10.0)])
@pytest.mark.parametrize("layout,batch,precision", [("row", 1, "fp32"), ("column", 1, "fp16"),
                                                    ({"A": "col", "B": "row", "C": "row"}, 3, "fp32"),
                                                    ("row", 1, "fp8")])
def test_the_swap_keeps_addresses_and_puts_the_checked_values_back(runner, inputs, low, high, layout, batch,
                                                                   precision):
    import cupy as cp  # here: collected without a GPU (CI), where CuPy is not installed

    c = case("smem_tiled", inputs, batch=batch, layout=layout)
    p = Problem(runner.device, c, c.kernel.description.form, Precision(precision))
    buffers = [p.a_stored, p.b_stored, p.a_in, p.b_in]
    addresses = [x.data.ptr for x in buffers]
    checked = [x.copy() for x in buffers]
    with p.timed_inputs(inputs):
        assert [x.data.ptr for x in buffers] == addresses
        for x, before in zip(buffers, checked):
            assert not bool(cp.array_equal(x, before))
        if precision != "fp8":  # FP8 keeps its bytes in a storage type of its own: their change is enough
            a = p.a_stored.astype(cp.float32)
            assert low <= float(a.min()) and float(a.max()) <= high
            assert (float(a.min()) >= 0) == (inputs == "uniform(0,1)")
    for x, before in zip(buffers, checked):
        assert bool(cp.array_equal(x, before))


def test_a_case_over_unsigned_inputs_verifies_times_and_says_so(runner):
    out = runner.run_case(case("smem_tiled", "uniform(0,1)", size=(512, 512, 512)), POLICY)
    assert out.verified and out.error is None and out.gflops and out.env["inputs"] == "uniform(0,1)", out.error


def test_a_confirmation_times_both_sides_over_the_heads_inputs(runner):
    head = case("smem_tiled", "uniform(0,1)", size=(512, 512, 512))
    base = case("naive", "uniform(-1,1)", size=(512, 512, 512))
    ab = Case(0, "smem_tiled", 512, 512, 512, seed=11, kernel=head.kernel, base=base.kernel)
    out = runner.run_case(ab, POLICY)
    assert out.verified and out.error is None and out.env["inputs"] == "uniform(0,1)", out.error
    assert out.env["ab"]["base_gflops"] > 0
