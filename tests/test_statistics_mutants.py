"""Tests that kill the statistics mutants of issue 38 (scripts/studies/mutants.py applies them).

Every expected figure here is derived by hand in the comments or computed independently in this file
(Student's t by numerical integration of its density, the bootstrap median's distribution from the
binomial law), never read back from the product. Each test is built so that the mutation it targets
moves the verdict across a margin far wider than any rounding or approximation in the product:
- the history verdict: a baseline of [98, 99, 100, 101, 102] (mean 100, sd sqrt(2.5)) makes the
  prediction interval, not the 2 % floor, decide;
- the paired verdict: ratios taking two values, so the bootstrap median's distribution is a binomial
  tail that can be computed exactly.
"""

import math
from math import comb

import numpy as np
import pytest
from sqlalchemy import select

from core.verdicts.regression import PairedThresholds, Point, Thresholds, judge, judge_paired

BASE5 = [98.0, 99.0, 100.0, 101.0, 102.0]  # mean 100, sample variance 10/4 = 2.5


# -- independent Student t -------------------------------------------------------------------------

def _t_cdf(t: float, dof: int, steps: int = 4000) -> float:
    """P(T <= t) for t >= 0: 1/2 plus Simpson's rule over the density from 0 to t."""
    c = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(dof * math.pi)
    f = lambda x: c * (1 + x * x / dof) ** (-(dof + 1) / 2)  # noqa: E731
    h = t / steps
    s = f(0) + f(t) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, steps))
    return 0.5 + s * h / 3


def t_exact(p: float, dof: int) -> float:
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, dof) < p else (lo, mid)
    return (lo + hi) / 2


def test_the_independent_t_agrees_with_printed_tables():
    # One-sided tables: t(0.999, 4) = 7.173, t(0.999, 5) = 5.893, t(0.975, 10) = 2.228.
    assert t_exact(0.999, 4) == pytest.approx(7.173, abs=1e-3)
    assert t_exact(0.999, 5) == pytest.approx(5.893, abs=1e-3)
    assert t_exact(0.975, 10) == pytest.approx(2.228, abs=1e-3)


# core/verdicts/regression.py's t_quantile is exact now (it was a Cornish-Fisher expansion, 0.84 % low at 4
# degrees of freedom); the bounds below are still compared within 0.1 % of the t term, room for the
# two integrations' rounding only.
T_TOL = 0.001


def expected_lower(history: list[float], own_se: float = 0.0, boundary: float = 0.999) -> float:
    """mean - t(boundary, n-1) * sqrt(sd^2 (1 + 1/n) + own_se^2), computed here from scratch."""
    n = len(history)
    mean = sum(history) / n
    var = sum((x - mean) ** 2 for x in history) / (n - 1)
    return mean - t_exact(boundary, n - 1) * math.sqrt(var * (1 + 1 / n) + own_se**2)


# -- the history verdict (core/verdicts/regression.py judge) ------------------------------------------------

def test_the_bound_uses_n_minus_1_degrees_of_freedom():
    """n = 5: t(0.999, 4) = 7.173, spread sqrt(2.5 * 1.2) = sqrt(3) = 1.732, so the bound is
    100 - 12.42 = 87.58. With 5 degrees of freedom (5.893) it would be 89.79: a head at 88.5 (11.5 %
    down, far past the floor) is inside the right interval and below the wrong one."""
    history = [Point(v) for v in BASE5]
    v = judge(history, Point(88.5))
    assert v.lower_bound == pytest.approx(expected_lower(BASE5), abs=T_TOL * 7.173 * math.sqrt(3))
    assert v.lower_bound == pytest.approx(87.58, abs=0.15)
    assert not v.regression, v.reason
    assert judge(history, Point(87.0)).regression  # below 87.58: caught


def test_the_prediction_interval_carries_the_new_points_own_variance():
    """sqrt(1 + 1/n), not sqrt(1/n): the new point is one more draw, not the mean. With sqrt(1/5)
    the spread would be sqrt(0.5) = 0.707 and the bound 100 - 7.173 * 0.707 = 94.93; the right bound
    is 87.58. A head at 93 (7 % down) is within the interval, not a regression."""
    history = [Point(v) for v in BASE5]
    v = judge(history, Point(93.0))
    assert not v.regression, v.reason
    assert v.lower_bound < 88.0
    assert v.delta == pytest.approx(-0.07)


def test_the_heads_own_noise_widens_the_interval():
    """A head at 86 with a relative spread of 5 % over 16 samples: its median's standard error is
    1.2533 * 0.05 * 86 / 4 = 1.347, so the spread is sqrt(3 + 1.815) = 2.194 and the bound
    100 - 7.173 * 2.194 = 84.26: not a regression. Ignoring that noise, 86 < 87.58 would be one."""
    history = [Point(v) for v in BASE5]
    own_se = 1.2533 * 0.05 * 86.0 / math.sqrt(16)
    v = judge(history, Point(86.0, noise=0.05, n_samples=16))
    assert v.lower_bound == pytest.approx(expected_lower(BASE5, own_se), abs=T_TOL * 7.173 * 2.194)
    assert not v.regression, v.reason
    # The same value measured quietly is below the bound: the noise is what excused it.
    assert judge(history, Point(86.0, noise=0.0005, n_samples=16)).regression


@pytest.mark.parametrize("window, head", [(5, 95.0), (64, 97.0)])
def test_the_window_keeps_the_newest_results(window, head):
    """History oldest first: `window` results around 200, then `window` results around 100. The
    window keeps the newest, so the mean is 100 and the head (95 for window 5, inside the 87.58
    bound; 97 for 64, where t(0.999, 63) = 3.225 and sd 1.42 put the bound at 95.4) is no
    regression; the oldest would put the mean at 200 and call it a 50 % drop."""
    old = [BASE5[i % 5] + 100.0 for i in range(window)]
    new = [BASE5[i % 5] for i in range(window)]
    v = judge([Point(x) for x in old + new], Point(head), Thresholds(window=window))
    assert v.baseline_mean == pytest.approx(sum(new) / window)
    assert abs(v.baseline_mean - 100.0) < 0.05
    assert not v.regression, v.reason


def test_against_one_base_result_the_heads_own_noise_counts_too():
    """One earlier result (noise 1 %), a head 12 % slower with 5 % noise of its own: the combined
    noise is sqrt(0.05^2 + 0.01^2) = 0.051, three times that 15.3 %, so 12 % is within it. Without
    the head's own noise the threshold would be 3 %, and 12 % a regression."""
    v = judge([Point(100.0, noise=0.01, n_samples=20)], Point(88.0, noise=0.05, n_samples=20))
    assert v.lower_bound == pytest.approx(100.0 * (1 - 3 * math.sqrt(0.05**2 + 0.01**2)))
    assert not v.regression, v.reason


# -- the paired A/B verdict (core/verdicts/regression.py judge_paired) --------------------------------------

def _pairs(ratios: list[float], seed: int = 3) -> tuple[list[float], list[float]]:
    """Base times drifting between 1 and 2 ms (a clock that steps), heads at base x ratio."""
    rng = np.random.default_rng(seed)
    base = list(1.0 + rng.random(len(ratios)))
    return base, [b * r for b, r in zip(base, ratios)]


def _p_median_is_low(n: int, j: int) -> float:
    """Bootstrap of n ratios, j of them at the lower value a, the rest at b > a, n odd: the
    resampled median is a exactly when at least (n + 1) / 2 of the n draws are a."""
    p = j / n
    return sum(comb(n, k) * p**k * (1 - p) ** (n - k) for k in range((n + 1) // 2, n + 1))


def test_the_paired_verdict_is_decided_by_the_interval_not_the_point_ratio():
    """Ten pairs, five at ratio 1.00 and five at 1.04: the median ratio is 1.02, past the 1 % band,
    but a resample with 6 or more of the 1.00 pairs (probability P(Bin(10, 1/2) >= 6) = 0.377) has
    median 1.00, so the interval is [1.00, 1.04] and straddles the band edge: undecided."""
    assert sum(comb(10, k) for k in range(6, 11)) / 2**10 == pytest.approx(0.377, abs=1e-3)
    for a, b, ratio in ((1.00, 1.04, 1.02), (0.96, 1.00, 0.98)):
        base, head = _pairs([a, b] * 5)
        v = judge_paired(base, head)
        assert v.ratio == pytest.approx(ratio)
        assert (v.low, v.high) == (pytest.approx(a), pytest.approx(b))
        assert v.status == "undecided", v.reason


def test_pairing_cancels_a_drifting_clock():
    """Forty pairs whose base times wander between 1 and 2 ms, each head 0.3 % slower than the base
    beside it: every per-pair ratio is 1.003, so the interval is [1.003, 1.003], inside the band: no
    change. Paired with another pair's base, the ratios would spread from 0.5 to 2."""
    base, head = _pairs([1.003] * 40, seed=11)
    v = judge_paired(base, head)
    assert (v.ratio, v.low, v.high) == (pytest.approx(1.003), pytest.approx(1.003), pytest.approx(1.003))
    assert v.status == "no change", v.reason
    base, head = _pairs([1.05] * 40, seed=11)
    assert judge_paired(base, head).status == "regression"


def test_a_99_percent_interval_cuts_half_a_percent_from_each_tail():
    """Eleven pairs, two at 1.00 and nine at 1.05: a resampled median is 1.00 with probability
    P(Bin(11, 2/11) >= 6) = 0.0072, between 0.005 and 0.01. So the 99 % two-sided interval (0.5 % in
    each tail) starts at 1.00 and the verdict is undecided; a 1 % tail would start it at 1.05 and
    call a regression. 200 000 resamples put the count of 1.00 medians at 1441 +- 38, far from both
    the 0.5 % (1000) and the 1 % (2000) positions."""
    p = _p_median_is_low(11, 2)
    assert 0.006 < p < 0.009
    base, head = _pairs([1.00, 1.00] + [1.05] * 9, seed=5)
    v = judge_paired(base, head, PairedThresholds(confidence=0.99, resamples=200_000))
    assert v.low == pytest.approx(1.00)
    assert v.high == pytest.approx(1.05)
    assert v.status == "undecided", v.reason
    # At 98 % (1 % in each tail) the interval does leave 1.00 behind: the test can tell the two.
    assert judge_paired(base, head, PairedThresholds(confidence=0.98, resamples=200_000)).status == "regression"


# -- the median's interval (core/results/sample_stats.py) --------------------------------------------------

@pytest.mark.parametrize("n", [10, 20, 50, 100, 200, 1000])
def test_the_medians_interval_covers_95_percent(n):
    """The median's order-statistic interval [x_(l), x_(u)] (1-based) covers the true median with
    probability P(l <= B < u), B ~ Bin(n, 1/2), whatever the distribution. Samples 0..n-1, shuffled,
    make the returned values their own ranks. At z = 1.96 that coverage is 0.950 or more for these n;
    a one-sided z (1.645, a doubled tail) gives 0.91 to 0.93."""
    from core.results.sample_stats import median_ci

    samples = [float(i) for i in np.random.default_rng(n).permutation(n)]
    lo, hi = median_ci(samples)
    first, past = int(lo) + 1, int(hi) + 1
    coverage = sum(comb(n, k) for k in range(first, past)) / 2**n
    assert 0.945 <= coverage < 0.99


# -- verification: NaN and Inf never pass (worker/measure/verify.py) ---------------------------------------

def test_nan_and_inf_are_an_infinite_error():
    from worker.measure.verify import rel_error

    ref = np.ones((4, 4), dtype=np.float32)
    for bad in (float("nan"), float("inf"), -float("inf")):
        c = ref.copy()
        c[1, 2] = bad
        assert rel_error(np, c, ref) == float("inf")
    assert rel_error(np, ref.copy(), ref) == 0.0


def test_a_kernel_that_writes_nan_fails_verification():
    from worker.measure.verify import Check, check

    ref = np.full((4, 4), 2.0, dtype=np.float32)

    def refill(c, fill=None, seed=None):
        c[...] = fill if fill is not None else np.random.default_rng(seed).uniform(-1, 1, (4, 4))

    def run(c, alpha, beta):  # right everywhere but one element, which comes out NaN
        c[...] = alpha * ref + beta * c
        c[3, 3] = np.nan

    got = check(np, run, ref, np.zeros((4, 4), dtype=np.float32), refill, seed=1, synchronize=lambda: None)
    ok, why = got.verdict(1e-4)
    assert not ok and "NaN or Inf" in why
    for bad in (float("nan"), float("inf")):
        ok, why = Check(bad, 0, 16, False).verdict(1e-4)
        assert not ok, why
    assert Check(0.5e-4, 0, 16, False).verdict(1e-4) == (True, None)


# -- which commit a sha prefix names, and which results a baseline keeps (database) ----------------

SIZE = (1024, 1024, 1024)


@pytest.fixture
def sqlite_cfg(tmp_path):
    from core.records.db import upgrade_database
    from core.settings import Settings

    cfg = Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data"), DATABASE_URL=f"sqlite:///{tmp_path / 'g.db'}")
    upgrade_database(cfg)
    return cfg


def _commits(cfg, **fields_by_sha):
    from core.records.db import session_factory
    from core.records.models import Commit

    with session_factory(cfg)() as db:
        for sha, fields in fields_by_sha.items():
            c = db.scalar(select(Commit).where(Commit.sha == sha))
            for k, v in fields.items():
                setattr(c, k, v)
        db.commit()


def _verdict(cfg, job_id, base=None, window=64):
    from core.verdicts.baselines import verdicts
    from core.records.db import session_factory
    from core.records.models import Job

    with session_factory(cfg)() as db:
        (v,) = verdicts(db, db.get(Job, job_id), base, None, Thresholds(window=window))
        return v


def test_a_sha_prefix_names_the_newest_matching_commit_of_the_heads_repository(sqlite_cfg):
    from core.verdicts.confirm import base_commit
    from core.records.db import session_factory
    from core.records.models import Commit

    with session_factory(sqlite_cfg)() as db:
        for sha, repo in (("abcd0001", "r"), ("abcd0002", "r"), ("abcd0003", "fork"), ("ffff0001", "r")):
            db.add(Commit(sha=sha, repo=repo))
        db.commit()
        head = db.scalar(select(Commit).where(Commit.sha == "ffff0001"))
        assert base_commit(db, head, "abcd").sha == "abcd0002"
        assert base_commit(db, head, "abcd0001").sha == "abcd0001"


def test_the_baseline_of_a_sha_prefix_is_the_newest_match(sqlite_cfg):
    """Two commits match "abcd": abcd0001 (recorded first, 1000 GFLOPS) and abcd0002 (2000). The
    newer is the base: the head at 1000 is half its speed, a regression against a mean of 2000."""
    from tests.fake_results import add_result

    add_result(sqlite_cfg, "k", SIZE, "abcd0001", gflops=1000.0, commit_index=0)
    add_result(sqlite_cfg, "k", SIZE, "abcd0002", gflops=2000.0, commit_index=1)
    head = add_result(sqlite_cfg, "k", SIZE, "ffff0001", gflops=1000.0, commit_index=2)
    v = _verdict(sqlite_cfg, head, base="abcd")
    assert (v.baseline_mean, v.baseline_points, v.status) == (pytest.approx(2000.0), 1, "regression")


def _old_then_new(cfg):
    """Commit aaaa0001 with five results around 200 GFLOPS, then aaaa0002 with five around 100."""
    from tests.fake_results import add_result

    for sha, index, offset in (("aaaa0001", 0, 100.0), ("aaaa0002", 1, 0.0)):
        for g in BASE5:
            add_result(cfg, "k", SIZE, sha, gflops=g + offset, commit_index=index)
    return add_result(cfg, "k", SIZE, "aaaa0003", gflops=95.0, commit_index=2)


def test_the_ancestry_baseline_keeps_the_newest_results_of_its_window(sqlite_cfg):
    """Window 5, ten results on the head's two first-parent ancestors: the five of the parent
    (mean 100) are the baseline, and 95 is within their 87.58 bound; the grandparent's (mean 200)
    would make it a regression."""
    head = _old_then_new(sqlite_cfg)
    _commits(sqlite_cfg, aaaa0001={"parents": []}, aaaa0002={"parents": ["aaaa0001"]},
             aaaa0003={"parents": ["aaaa0002"]})
    v = _verdict(sqlite_cfg, head, window=5)
    assert (v.baseline_mean, v.baseline_points, v.status) == (pytest.approx(100.0), 5, "ok"), v


def test_the_time_ordered_baseline_keeps_the_newest_results_of_its_window(sqlite_cfg):
    """The same results without parents: commit time orders them, with the same verdict."""
    head = _old_then_new(sqlite_cfg)
    v = _verdict(sqlite_cfg, head, window=5)
    assert (v.baseline_mean, v.baseline_points, v.status) == (pytest.approx(100.0), 5, "ok"), v
