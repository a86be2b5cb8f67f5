"""``adapters.http_client``: the retry delay and the bearer headers the model-server
adapters share (their integration tests cover the retry loop against a stub server)."""

from __future__ import annotations

import httpx
import pytest

from lookup_knowledge.adapters.http_client import Retries, json_headers

RETRIES = Retries(max_retries=3, backoff_s=0.5, max_backoff_s=3.0, sleep=lambda _s: None)


def answer(retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(429, headers=headers)


def test_the_backoff_doubles_per_attempt_with_jitter_and_stops_at_its_ceiling() -> None:
    for attempt, base in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (10, 3.0)]:
        for _ in range(50):
            assert base * 0.5 <= RETRIES.delay(attempt, None) <= base


def test_retry_after_in_seconds_is_honoured_up_to_the_ceiling() -> None:
    assert RETRIES.delay(0, answer("2")) == 2.0
    assert RETRIES.delay(0, answer("0")) == 0.0
    assert RETRIES.delay(0, answer("120")) == 3.0


def test_retry_after_as_a_date_or_negative_falls_back_to_the_backoff() -> None:
    for value in ["Wed, 21 Oct 2015 07:28:00 GMT", "-1"]:
        assert 0.25 <= RETRIES.delay(0, answer(value)) <= 0.5


def test_the_key_comes_from_the_argument_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOME_API_KEY", "from-env")
    assert json_headers("given", "SOME_API_KEY")["Authorization"] == "Bearer given"
    assert json_headers(None, "SOME_API_KEY")["Authorization"] == "Bearer from-env"
    assert json_headers("", "SOME_API_KEY") == {"Content-Type": "application/json"}
    monkeypatch.setenv("SOME_API_KEY", "")
    assert json_headers(None, "SOME_API_KEY") == {"Content-Type": "application/json"}
    assert json_headers(None, None, {"X-Extra": "1"}) == {
        "Content-Type": "application/json",
        "X-Extra": "1",
    }
