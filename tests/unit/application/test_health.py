"""``CheckHealth`` with fakes: what a readiness probe and ``lookup-knowledge health`` say."""

from __future__ import annotations

from lookup_knowledge.application.health import CheckHealth
from lookup_knowledge.domain.errors import SearchUnavailable
from tests.fakes.audit import InMemoryRecorder
from tests.fakes.search import FakeSearch, StoredChunk


def _search_component(search: FakeSearch) -> tuple[bool, str, str, bool]:
    health = CheckHealth(search=search, recorder=InMemoryRecorder(), audit=None).execute()
    component = health.components[0]
    assert component.name == "knowledge search"
    return component.ok, component.status, component.detail, health.ok


def test_a_knowledge_base_with_nothing_ingested_is_empty_and_not_ready() -> None:
    ok, status, detail, ready = _search_component(FakeSearch())
    assert (ok, status, ready) == (False, "empty", False)
    assert "nothing ingested yet" in detail


def test_a_knowledge_base_with_documents_is_ok() -> None:
    ok, status, _, ready = _search_component(FakeSearch([StoredChunk("d#chunk-0", "text", 0.9)]))
    assert (ok, status, ready) == (True, "ok", True)


class _Unreachable(FakeSearch):
    def check(self) -> str:
        raise SearchUnavailable("down")


def test_an_unreachable_knowledge_base_is_failing_with_its_error() -> None:
    down = _Unreachable()  # holds nothing either: unreachable is what it reports
    ok, status, detail, ready = _search_component(down)
    assert (ok, status, ready) == (False, "failing", False)
    assert detail == "search_unavailable: down"
    assert (
        CheckHealth(search=down, recorder=InMemoryRecorder(), audit=None)
        .execute()
        .as_dict()["components"][0]["status"]
        == "failing"
    )
