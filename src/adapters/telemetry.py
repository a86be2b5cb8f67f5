"""OpenTelemetry spans through ``opentelemetry-api`` only: a no-op unless the host has
configured an SDK. Span and attribute names follow the GenAI semantic conventions
(``execute_tool {tool}`` with ``gen_ai.*`` attributes)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from lookup_knowledge.application.ports import Span, Telemetry


class _OtelSpan(Span):
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        self._span.set_attribute(key, value)

    def record_error(self, error: BaseException) -> None:
        self._span.record_exception(error)
        self._span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        self._span.set_attribute("error.type", getattr(error, "code", type(error).__name__))

    @property
    def trace_id(self) -> str | None:
        ctx = self._span.get_span_context()
        return trace.format_trace_id(ctx.trace_id) if ctx.is_valid else None

    @property
    def span_id(self) -> str | None:
        ctx = self._span.get_span_context()
        return trace.format_span_id(ctx.span_id) if ctx.is_valid else None


class OpenTelemetryTelemetry(Telemetry):
    def __init__(
        self,
        tracer_name: str = "lookup_knowledge",
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        # None means the global provider: a no-op unless the host installed an SDK.
        self._tracer = trace.get_tracer(tracer_name, tracer_provider=tracer_provider)

    def span(
        self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
    ) -> AbstractContextManager[Span]:
        @contextmanager
        def _span() -> Iterator[Span]:
            with self._tracer.start_as_current_span(
                name, kind=trace.SpanKind.INTERNAL, attributes=dict(attributes or {})
            ) as span:
                yield _OtelSpan(span)

        return _span()
