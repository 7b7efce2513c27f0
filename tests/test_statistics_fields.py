"""The timing statistics are declared once (core/timing_stats.py, issue 38): every place that
carries them names exactly that set, so a statistic added to summarise() and forgotten in the row,
the posted schema or the API's answer (or the other way round) fails here, not in a reader."""

import dataclasses

import pytest

from api.posted_schemas import ResultIn
from api.schemas import ResultDetailOut, ResultOut
from core.models import Result
from core.result_env import Stats
from core.timing_stats import CUBLAS_TWINS, RESULT_STATISTICS, STATISTICS, TimingStats
from worker import stats
from worker.cases import CaseOutcome


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
    "worker/cases.py CaseOutcome": [f.name for f in dataclasses.fields(CaseOutcome)],
    "core/models.py Result (columns)": [c.name for c in Result.__table__.columns],
    "api/schemas.py ResultOut": list(ResultOut.model_fields),
    "api/schemas.py ResultDetailOut": list(ResultDetailOut.model_fields),
    "api/posted_schemas.py ResultIn": list(ResultIn.model_fields),
}


@pytest.mark.parametrize("place", PLACES)
def test_every_result_shape_holds_the_declared_statistics_and_no_other(place):
    named = statistics_named(PLACES[place])
    assert named == set(RESULT_STATISTICS), (
        f"{place}: missing {sorted(set(RESULT_STATISTICS) - named)}, not declared in core/timing_stats.py "
        f"{sorted(named - set(RESULT_STATISTICS))}")


def test_the_env_summary_of_cublas_and_of_a_base_holds_the_declared_statistics_exactly():
    assert tuple(Stats.model_fields) == STATISTICS


def test_a_summary_fills_every_statistic_of_a_case():
    out = CaseOutcome()
    out.add_timing([3.0, 1.0, 2.0], stats.summarise([3.0, 1.0, 2.0]))
    row = out.as_row()
    assert all(row[name] is not None for name in STATISTICS) and row["n_samples"] == 3
    Stats.model_validate({name: row[name] for name in STATISTICS})  # the env's record takes a summary as it is
