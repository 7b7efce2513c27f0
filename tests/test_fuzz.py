"""Property-based fuzzing of the API from its own OpenAPI schema (schemathesis): no input,
however odd, may produce a 5xx. Writes are sent with a valid token so they reach validation.

Each operation gets FUZZ_EXAMPLES generated requests (more with GEMMWATCH_FUZZ_EXAMPLES)."""

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from api.app import create_app
from core.records.tokens import create_token
from core.records.db import session_factory, upgrade_database
from tests.conftest import make_settings

FUZZ_EXAMPLES = int(os.environ.get("GEMMWATCH_FUZZ_EXAMPLES", "40"))


@pytest.mark.long
def test_no_input_gives_a_server_error(tmp_path, database_url):
    cfg = make_settings(tmp_path, database_url)
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "fuzz")
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(cfg))
    headers = {"Authorization": f"Bearer {token}"}
    tried = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def fuzz(case):
            response = case.call(headers=headers)
            case.validate_response(response, checks=[not_a_server_error])

        fuzz()  # raises with the failing request on the first 5xx
        tried.append(operation.label)
    assert {"POST /api/jobs", "GET /api/jobs/{job_id}", "POST /api/results", "GET /api/results"} <= set(tried)
