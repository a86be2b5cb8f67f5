"""Property-based requests from the OpenAPI document (schemathesis): whatever the
generated input, the API answers without a server error. Bounded examples per
operation so that it stays quick."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http import create_http_app
from tests.support.http import sample_app


@pytest.fixture(scope="module")
def lookup_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    app = sample_app(tmp_path_factory.mktemp("fuzz") / "data")
    app.lookup("PG-53300 too many connections", session_id="fuzz", step_id="1")
    yield app
    app.close()


@pytest.mark.slow
def test_no_input_makes_a_server_error(lookup_app: LookupApp) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_http_app(lookup_app))
    tried: list[str] = []
    for found in schema.get_all_operations():
        operation = found.ok()
        tried.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answers_without_a_server_error(case: Any) -> None:
            response = case.call(timeout=30)
            case.validate_response(response, checks=[not_a_server_error])
            if response.status_code >= 400:
                assert response.headers["content-type"][0] == "application/problem+json"

        answers_without_a_server_error()
    assert "POST /v1/lookup" in tried
    assert "GET /v1/sessions" in tried
