"""``/readyz`` answers within its checks' bound whatever a dependency does: a Milvus that
accepts connections and never answers is reported failing ("no answer within ..."), the
probe says 503, and a check still hanging is not started again by the next probe."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge import create_app
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.health import CheckHealth
from tests.fakes.audit import InMemoryAuditStore, InMemoryRecorder
from tests.fakes.search import FakeSearch
from tests.support.http import LOCAL
from tests.support.tcp_proxy import BlackHole


class HangingSearch(FakeSearch):
    """A search whose health check waits until released (a server that never answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.checks = 0

    def check(self) -> str:
        self.checks += 1
        self.release.wait(60)
        return "answered late"

    def holds_nothing(self) -> bool:
        return False  # a store with documents: this test is about the check's timing


@pytest.fixture
def hanging() -> Iterator[HangingSearch]:
    search = HangingSearch()
    yield search
    search.release.set()


def test_a_check_that_does_not_answer_is_reported_failing_within_the_bound(
    hanging: HangingSearch,
) -> None:
    health = CheckHealth(
        search=hanging, recorder=InMemoryRecorder(InMemoryAuditStore()), audit=None
    )
    report = health.execute(timeout_s=0.2)
    by_name = {c.name: c for c in report.components}
    assert not report.ok
    assert by_name["knowledge search"].detail == "no answer within 0.2 s"
    assert by_name["audit store"].ok
    assert by_name["audit journal"].ok
    assert report.spool_pending == 0


def test_a_check_still_running_is_waited_for_not_started_again(hanging: HangingSearch) -> None:
    health = CheckHealth(
        search=hanging, recorder=InMemoryRecorder(InMemoryAuditStore()), audit=None
    )
    health.execute(timeout_s=0.05)
    health.execute(timeout_s=0.05)
    assert hanging.checks == 1
    hanging.release.set()
    report = health.execute(timeout_s=30)
    assert report.ok
    assert {c.name: c.detail for c in report.components}["knowledge search"] == "answered late"


def test_readyz_answers_503_when_milvus_is_black_holed(tmp_path: Path) -> None:
    hole = BlackHole()
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "milvus.uri": f"http://127.0.0.1:{hole.port}",
            "milvus.timeout-s": 60,
            "server.readiness-timeout-s": 0.5,
        }
    )
    try:
        client = TestClient(create_http_app(app), base_url=LOCAL)
        response = client.get("/readyz")
        assert response.status_code == 503, response.text
        checks = response.json()["checks"]
        assert checks["knowledge search"] == {"ok": False, "detail": "no answer within 0.5 s"}
        assert checks["audit store"]["ok"] is True
        again = client.get("/readyz")  # the hanging check is not started twice
        assert again.status_code == 503
    finally:
        hole.close()
        app.close()
