"""Issue 51: rules that a mutation once changed without any test noticing (the mutation table in
docs/BENCHMARKS.md, `scripts/studies/mutants.py --tests tests/test_rule_mutants.py`). Each test
pins one rule at the value that tells the rule from its mutant."""

import pytest
from pydantic import ValidationError

from core.verdicts.baselines import IQR_PER_SIGMA, robust_noise
from core.description.kernel_description import KernelDescription
from core.description.precision import FP8_ACCUMULATE_BITS, Precision, unit_roundoff
from core.results.result_status import status_of
from worker.measure import cublas_best

KERNEL = {"name": "k", "source": "k.cu", "files": {"k.cu": 'extern "C" __global__ void k() {}'}, "entry": "k",
          "block": [16, 16], "grid": {"tile": [16, 16]}}


def test_fp8s_bound_counts_a_partial_32_deep_step_as_a_step():
    """K = 33 is two tensor-core steps of 32, not one: the bound must not round K/32 down."""
    step = 2 * 2.0**-FP8_ACCUMULATE_BITS
    out = 2 * unit_roundoff("bfloat16")
    assert Precision("fp8").default_tolerance(33) == pytest.approx(out + 2 * step)
    assert Precision("fp8").default_tolerance(32) == pytest.approx(out + step)


@pytest.mark.parametrize(("fields", "status"), [
    ((True, None, 1e-6), "passed"),
    ((True, "no usable timing samples", 1e-6), "failed"),  # verified, then no figure: not a pass
    ((False, "relative error 0.3", 0.3), "incorrect"),
    ((False, "wrong result: C holds NaN or Inf", None), "failed"),  # nothing measured of it: the runner says incorrect itself
    ((False, "compile failed", None), "failed"),
])
def test_a_results_status_follows_from_its_fields(fields, status):
    assert status_of(*fields) == status
    assert status_of(*fields, not_applicable=True) == "not applicable"


def test_fp16_sums_only_in_an_fp16_kernel_writing_fp16_or_fp32():
    for mode in ("bf16", "fp8", "fp32"):
        with pytest.raises(ValidationError, match='accumulate "fp16" is for fp16 kernels'):
            KernelDescription.model_validate({**KERNEL, "compute_mode": mode, "accumulate": "fp16"})
    for output in ("input", "fp32"):
        desc = KernelDescription.model_validate({**KERNEL, "compute_mode": "fp16", "accumulate": "fp16", "output": output})
        assert desc.form.accumulate == "fp16" and desc.precision.fp16_accumulate


def test_batch_strides_need_the_batch_count():
    with pytest.raises(ValidationError, match='args take batch strides but not the batch count'):
        KernelDescription.model_validate({**KERNEL, "args": ["M", "N", "K", "A", "B", "C", "stride_a", "stride_b",
                                                             "stride_c"]})


def test_a_results_noise_is_its_quartiles_over_1_349_of_its_median():
    assert IQR_PER_SIGMA == 1.349
    assert robust_noise(0.5, 0.99, 1.01, 1.0) == pytest.approx(0.02 / 1.349)


class _Gemm:
    """cuBLASLt's candidates as cublas_best sees them, each with its time."""

    def __init__(self, times):
        self.times, self.index = times, 0
        self.candidates = list(range(len(times)))

    def use(self, index):
        self.index = index

    @property
    def plan(self):
        return {"algo": f"algo{self.index}"}

    def __call__(self):
        return None


def test_cublas_best_is_the_default_when_the_default_is_fastest_and_a_candidate_when_one_is():
    default = object()
    gemm = _Gemm([3.0, 2.0])
    times = {default: 1.0}
    plan = cublas_best.choose(default, gemm, lambda call: times.get(call, None) or gemm.times[gemm.index], None, {})
    assert plan["against"] == "default" and plan["best"]["index"] == -1
    for fastest in (0, 1):  # cuBLASLt's first candidate is a candidate like the others, not the default
        gemm = _Gemm([0.5, 3.0] if fastest == 0 else [3.0, 0.5])
        plan = cublas_best.choose(default, gemm, lambda call: times.get(call, None) or gemm.times[gemm.index], None,
                                  {})
        assert plan["against"] == "best" and plan["best"]["index"] == fastest and gemm.index == fastest


def test_who_acts_for_a_jobs_submitter_is_one_rule(cfg):
    """Cancel and confirm ask core/records/tokens.acts_for; a base kernel is taken from the submitter's or an
    admin's jobs, and "admin" is a whole scope word (a LIKE '%admin%' once matched any scope that
    held the letters)."""
    from sqlalchemy import select

    from core.records.db import session_factory
    from core.records.models import ApiToken
    from core.records.tokens import acts_for, admin_token_ids, create_token, find_token

    with session_factory(cfg)() as db:
        mine, other, admin = (find_token(db, create_token(db, name, scopes=scopes))
                              for name, scopes in (("mine", ("jobs",)), ("other", ("jobs",)), ("boss", ("admin",))))
        assert acts_for(mine, mine.id) and acts_for(admin, mine.id) and acts_for(None, mine.id)
        assert not acts_for(other, mine.id)
        assert set(db.scalars(admin_token_ids())) == {admin.id}
        mine.scopes = "jobs results"
        other.scopes = "admin jobs"  # a stored scope list with admin first
        db.commit()
        assert set(db.scalars(admin_token_ids())) == {admin.id, other.id}
        assert set(db.scalars(select(ApiToken.id))) == {mine.id, other.id, admin.id}


# --- the profile summary (core/profile/profile_changes.py, core/profile/profile_diff.py) --------------------------

def test_every_magnitude_is_capped_at_one():
    """A register count that quadruples is not four times the cause a spill that appears is: each
    kind of magnitude stops at 1, so weights, not sheer ratios, rank the rows."""
    from core.profile.profile_changes import magnitude

    assert magnitude("relative", 32, 128) == 1.0 and magnitude("relative", 100, 150) == 0.5
    assert magnitude("points", 10.0, 250.0) == 1.0
    assert magnitude("stall", 0.5, 9.5, total=2.0) == 1.0 and magnitude("share", 1, 3, total=10) == 0.2


def test_the_summary_names_each_group_once_by_its_best_row():
    from core.profile.profile_changes import Change
    from core.profile.profile_diff import ProfileDiff

    def row(key, group, score):
        return Change(key, group, key, "ncu", 1.0, 2.0, magnitude=0.5, score=score)

    rows = [row("ncu.achieved_occupancy", "occupancy", 0.9), row("ncu.theoretical_occupancy", "occupancy", 0.8),
            row("stall.barrier", "stall 'barrier'", 0.7), row("ncu.registers", "registers", 0.6)]
    top = ProfileDiff("k", None, rows).top_causes()
    assert [c.key for c in top] == ["ncu.achieved_occupancy", "stall.barrier", "ncu.registers"]


def test_a_main_loop_class_is_weighed_against_the_loop_not_the_whole_function():
    """Four more loads in a 40-instruction main loop are a tenth of the loop, whatever the length of
    the function around it (here 4,000 instructions, where they would be a thousandth)."""
    from types import SimpleNamespace

    from core.profile.profile_diff import _sass_rows
    from core.profile.sass_stats import CLASS_ORDER

    def counts(**given):
        return {cls: given.get(cls, 0) for cls in CLASS_ORDER}

    base = SimpleNamespace(counts=counts(OTHER=4000, LDS=8), main_loop_counts=counts(LDS=8, HMMA=32))
    head = SimpleNamespace(counts=counts(OTHER=4000, LDS=12), main_loop_counts=counts(LDS=12, HMMA=28))
    loop = SimpleNamespace(base_length=40, head_length=40, base_barriers=[], head_barriers=[])
    by_key = {c.key: c for c in _sass_rows(base, head, loop)}
    assert by_key["loop.LDS"].magnitude == pytest.approx(4 / 40)
    assert by_key["sass.LDS"].magnitude == pytest.approx(4 / 4008)
