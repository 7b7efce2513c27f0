"""Stateful fuzzing of the real server with schemathesis: sequences of calls that follow the API's
links (a job posted, then read, cancelled, confirmed; results posted, then their job read), sent
with a write token so that POST /api/jobs and POST /api/results reach validation and storage.

The one check is the issue's: no answer is a 5xx. (Schemathesis's other checks judge the schema's
completeness, not a reader's safety: a 409 or 403 the schema does not list is no bug here.)
"""

from collections import Counter

import hypothesis
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.stateful import Bundle
from schemathesis.checks import not_a_server_error
from schemathesis.generation.stateful.state_machine import StepInput
from schemathesis.specs.openapi.stateful import transition

STEPS_PER_SCENARIO = 8


def _runnable(case):
    body = case.body if isinstance(case.body, dict) else {}
    case.body = {**{k: v for k, v in body.items() if k == "commit"}, "variants": ["naive"], "sizes": [[8, 16, 24]]}
    return case


def run_stateful(base_url: str, token: str, calls_wanted: int) -> Counter:
    """Runs rounds of scenarios until at least `calls_wanted` API calls were made; returns
    (operation, status) counts. Raises on the first 5xx, with the scenario that led to it."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=60)
    made: Counter = Counter()

    posted_results = schema["/api/results"]["POST"].as_strategy()
    # A generated job names random variants, so it is refused (422) but for a rare empty list with
    # sources: the 202 path, and what links follow a stored job, would be reached by chance only.
    # This root keeps the fuzzed commit (and anything else) but names a built-in at a small size.
    runnable_jobs = schema["/api/jobs"]["POST"].as_strategy().map(_runnable)

    def root(name: str, cases=posted_results):
        # Built by schemathesis's own rule factory, as its roots are: the case is recorded, so the
        # links from its answer (GET /api/jobs/{job_id}, verdicts, confirm) can follow it.
        return transition(name=name, target=Bundle("catch_all"), input=cases.map(StepInput.initial),
                          precondition=lambda machine: True)

    class Scenarios(schema.as_state_machine()):
        # POST /api/results starts no scenario by itself: schemathesis takes its gpu.uuid for a
        # reference to a resource nothing produces, and starts scenarios only from operations it
        # deems likely to succeed. So it is made a root here. Hypothesis picks among the rules
        # evenly; more names raise the share of posted results among ~50 link rules (posted
        # results are what a hostile writer stores).
        post_measured_results = root("post_measured_results")
        post_measured_results_again = root("post_measured_results_again")
        post_measured_results_third = root("post_measured_results_third")
        post_runnable_job = root("post_runnable_job", runnable_jobs)

        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Bearer {token}"}, "timeout": 120}

        def after_call(self, response, case):
            super().after_call(response, case)
            made[(case.operation.label, response.status_code)] += 1

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=[not_a_server_error], transport_kwargs=kwargs)

    while sum(made.values()) < calls_wanted:
        # A scenario makes 1 to STEPS_PER_SCENARIO calls, about 3 on average here.
        scenarios = max(10, (calls_wanted - sum(made.values())) // 3)
        try:
            # Derandomized: the same scenarios on every run, so the test passes or fails by the code
            # it tests, never by the draw (the server's state starts empty each time).
            Scenarios.run(settings=hypothesis.settings(
                max_examples=scenarios, stateful_step_count=STEPS_PER_SCENARIO, deadline=None, database=None,
                derandomize=True,
                phases=[Phase.generate], suppress_health_check=list(HealthCheck)))
        except FlakyStrategyDefinition:
            # Hypothesis met a choice it had made before under other server state (a bundle of ids
            # that was empty is not now): a generation artefact, not an answer of the server. A 5xx
            # is never this: it raises from validate_response (or, unreproduced, as FlakyFailure).
            continue
    return made
