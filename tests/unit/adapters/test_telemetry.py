"""The OpenTelemetry adapter with a real SDK, around the lookup use case."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lookup_knowledge.adapters.telemetry import OpenTelemetryTelemetry
from lookup_knowledge.domain.errors import SearchTimeout
from tests.fakes import FakeSearch, LookupFixture, chunk, make_lookup


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _use_case(search: FakeSearch, exporter: InMemorySpanExporter) -> LookupFixture:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return make_lookup(search, telemetry=OpenTelemetryTelemetry(tracer_provider=provider))


def test_execute_tool_span_with_a_child_retrieval_span(exporter: InMemorySpanExporter) -> None:
    fx = _use_case(FakeSearch([chunk("a", 0, 0.9), chunk("b", 0, 0.8)]), exporter)
    fx.lookup.execute("q", session_id="s1")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tool, retrieval = spans["execute_tool lookup_knowledge"], spans["retrieval knowledge"]
    assert retrieval.parent is not None
    assert retrieval.parent.span_id == tool.context.span_id
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "lookup_knowledge"
    assert retrieval.attributes["gen_ai.request.top_k"] == 20
    assert retrieval.attributes["lookup_knowledge.returned"] == 2
    record = fx.records[0]
    assert record.trace_id == format(tool.context.trace_id, "032x")
    assert record.span_id == format(tool.context.span_id, "016x")


def test_a_failed_lookup_marks_the_span_as_error(exporter: InMemorySpanExporter) -> None:
    _use_case(FakeSearch(error=SearchTimeout("slow")), exporter).lookup.execute(
        "q", session_id="s1"
    )
    tool = next(s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool"))
    assert tool.status.status_code.name == "ERROR"
    assert tool.attributes["error.type"] == "search_timeout"


def test_without_an_sdk_spans_are_no_ops_and_ids_are_absent() -> None:
    fx = make_lookup(FakeSearch([chunk("a", 0, 0.9)]), telemetry=OpenTelemetryTelemetry())
    fx.lookup.execute("q", session_id="s")
    assert fx.records[0].trace_id is None
