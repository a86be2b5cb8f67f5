"""Property-based requests from the OpenAPI document (schemathesis): whatever the
generated input, the API answers without a server error; also when the generated text
carries what no store can hold (NUL, lone UTF-16 surrogates). Bounded examples per
operation so that it stays quick.

The app is built to answer schemathesis' in-process Host (``testserver``): every other
name but the loopback ones gets 421 (``server.allowed-hosts``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
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
    schema = schemathesis.openapi.from_asgi("/openapi.json", _http_app(lookup_app))
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


def _http_app(lookup_app: LookupApp) -> Any:
    settings = load_settings(overrides={"server.allowed-hosts": "testserver"}).settings
    return create_http_app(lookup_app, settings)


#: In JSON bodies: both (a client escapes a surrogate as ``\\ud800``); in a URL only NUL
#: (a surrogate has no UTF-8 form to percent-encode).
BAD_IN_BODY = ["\x00", "\ud800", "\udfff", "ok\x00ok", "ok\ud800ok", "\ud800\x00"]
BAD_IN_URL = ["\x00", "ok\x00", "\x00\x00"]


def _poisoned(value: Any, data: st.DataObject, bad: list[str], *, keys: bool = True) -> Any:
    """``value`` with some of its strings (keys too, unless ``keys`` is False) replaced
    by text no store holds."""
    if isinstance(value, str):
        if data.draw(st.booleans()):
            return data.draw(st.sampled_from(bad))
        return value
    if isinstance(value, dict):
        return {
            (_poisoned(k, data, bad) if keys else k): _poisoned(v, data, bad)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_poisoned(v, data, bad) for v in value]
    return value


@pytest.mark.slow
def test_no_nul_or_lone_surrogate_makes_a_server_error(lookup_app: LookupApp) -> None:
    app = _http_app(lookup_app)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    client = TestClient(app)
    tried: list[str] = []
    for found in schema.get_all_operations():
        operation = found.ok()
        tried.append(operation.label)

        @given(case=operation.as_strategy(), data=st.data())
        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answers_bad_text_without_a_server_error(case: Any, data: st.DataObject) -> None:
            if isinstance(case.body, dict | list):
                case.body = _poisoned(case.body, data, BAD_IN_BODY)
            query = _poisoned(dict(case.query or {}), data, BAD_IN_URL, keys=False)
            path = case.path
            for name, value in (case.path_parameters or {}).items():
                value = _poisoned(str(value), data, BAD_IN_URL)
                path = path.replace("{" + name + "}", quote(value, safe=""))
            # Sent as a client sends it (schemathesis' own call validates the body first
            # and cannot encode a lone surrogate): JSON with "\\ud800" escaped.
            content = None if case.body is NOT_SET else json.dumps(case.body)
            response = client.request(
                case.method,
                path,
                params=query,
                content=content,
                headers={"content-type": "application/json"} if content is not None else {},
            )
            assert response.status_code < 500, (case.method, case.path, response.text[:300])
            if response.status_code >= 400:
                assert response.headers["content-type"] == "application/problem+json"

        answers_bad_text_without_a_server_error()
    assert "POST /v1/verify" in tried
    assert "POST /v1/check-answer" in tried
    assert "GET /v1/invocations" in tried
