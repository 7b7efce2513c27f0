"""The timing statistics are declared once (core/results/timing_stats.py, issue 38): every place that
carries them names exactly that set, so a statistic added to summarise() and forgotten in the row,
the posted schema or the API's answer (or the other way round) fails here, not in a reader."""

import dataclasses

import pytest
from pydantic import ValidationError

from api.posted_schemas import ResultIn
from api.schemas import ResultDetailOut, ResultOut
from core.records.models import Result
from core.results.result_env import Stats
from core.results.timing_stats import CUBLAS_TWINS, RESULT_STATISTICS, STATISTICS, TimingStats
from worker.measure import stats
from worker.measure.cases import CaseOutcome


def statistics_named(names) -> set[str]:
    """The names among `names` that are timing statistics, declared or not: a declared one, its
    cuBLAS twin, or any other time in milliseconds (p90_ms, cublas_mean_ms), raw samples aside."""
    return {name for name in names
            if name in STATISTICS or name.removeprefix("cublas_") in STATISTICS
            or (name.endswith("_ms") and not name.endswith("samples_ms"))}


def test_the_declaration_is_one_list_of_distinct_names_with_twins_of_its_own():
    assert len(set(STATISTICS)) == len(STATISTICS) and "median_ms" in STATISTICS
    assert STATISTICS == tuple(TimingStats.__annotations__)
    assert all(twin.startswith("cublas_") and twin.removeprefix("cublas_") in STATISTICS for twin in CUBLAS_TWINS)
    assert RESULT_STATISTICS == STATISTICS + CUBLAS_TWINS


@pytest.mark.parametrize("samples", [[1.0], [2.0, 1.0], [4.0, 1.0, 3.0, 2.0, 2.5]])
def test_summarise_returns_exactly_the_declared_statistics_in_order(samples):
    assert tuple(stats.summarise(samples)) == STATISTICS


PLACES = {
    "worker/measure/cases.py CaseOutcome": [f.name for f in dataclasses.fields(CaseOutcome)],
    "core/records/models.py Result (columns)": [c.name for c in Result.__table__.columns],
    "api/schemas.py ResultOut": list(ResultOut.model_fields),
    "api/schemas.py ResultDetailOut": list(ResultDetailOut.model_fields),
    "api/posted_schemas.py ResultIn": list(ResultIn.model_fields),
}


@pytest.mark.parametrize("place", PLACES)
def test_every_result_shape_holds_the_declared_statistics_and_no_other(place):
    named = statistics_named(PLACES[place])
    assert named == set(RESULT_STATISTICS), (
        f"{place}: missing {sorted(set(RESULT_STATISTICS) - named)}, not declared in core/results/timing_stats.py "
        f"{sorted(named - set(RESULT_STATISTICS))}")


def test_the_env_summary_of_cublas_and_of_a_base_holds_the_declared_statistics_exactly():
    assert tuple(Stats.model_fields) == STATISTICS


def test_a_summary_fills_every_statistic_of_a_case():
    out = CaseOutcome()
    out.add_timing([3.0, 1.0, 2.0], stats.summarise([3.0, 1.0, 2.0]))
    row = out.as_row()
    assert all(row[name] is not None for name in STATISTICS) and row["n_samples"] == 3
    Stats.model_validate({name: row[name] for name in STATISTICS})  # the env's record takes a summary as it is


# The records made from the declaration keep each statistic's bounds: a time in milliseconds, a
# fraction, and a posted median above 0 (every reader divides by it).
POSTED = {"variant": "naive", "m": 64, "n": 64, "k": 64, "verified": True}


@pytest.mark.parametrize("median", ["median_ms", "cublas_median_ms"])
def test_a_posted_median_of_zero_is_refused_but_another_statistic_may_be_zero(median):
    with pytest.raises(ValidationError, match=median):
        ResultIn.model_validate({**POSTED, median: 0.0})
    assert ResultIn.model_validate({**POSTED, median: 0.5, "min_ms": 0.0, "stddev_ms": 0.0}).min_ms == 0.0


@pytest.mark.parametrize("record", [ResultIn, Stats], ids=["ResultIn", "Stats"])
def test_times_and_fractions_keep_their_own_bounds(record):
    base = POSTED if record is ResultIn else {}
    # A time may be 5e6 ms (Millis: up to 1e7); a fraction may not (Ratio: up to 1e6), and the other way round.
    assert record.model_validate({**base, "max_ms": 5e6}).max_ms == 5e6
    with pytest.raises(ValidationError, match="noise"):
        record.model_validate({**base, "noise": 5e6})
    with pytest.raises(ValidationError, match="mean_ms"):
        record.model_validate({**base, "mean_ms": 2e7})
    with pytest.raises(ValidationError, match="q1_ms"):
        record.model_validate({**base, "q1_ms": -1.0})


def test_an_answer_says_every_statistic_even_when_unknown():
    """ResultOut names each one (null where the case has none): a reader never meets a missing key."""
    required = {name for name, f in ResultOut.model_fields.items() if f.is_required()}
    assert set(RESULT_STATISTICS) <= required
    assert all(ResultOut.model_fields[name].annotation == (float | None) for name in RESULT_STATISTICS)


def test_a_case_starts_with_no_statistic():
    assert all(getattr(CaseOutcome(), name) is None for name in RESULT_STATISTICS)
