"""Runtime ports: the clock and telemetry (spans). The defaults a use case falls back
to when the host configures no tracing live here too."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime


class Clock(ABC):
    @abstractmethod
    def now(self) -> datetime:
        """Timezone-aware wall-clock time."""

    @abstractmethod
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations."""


class Span(ABC):
    @abstractmethod
    def set_attribute(self, key: str, value: str | int | float | bool) -> None: ...

    @abstractmethod
    def record_error(self, error: BaseException) -> None: ...

    @property
    @abstractmethod
    def trace_id(self) -> str | None: ...

    @property
    @abstractmethod
    def span_id(self) -> str | None: ...


class Telemetry(ABC):
    """Opens spans; the default does nothing so that tracing stays the host's choice."""

    @abstractmethod
    def span(
        self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
    ) -> AbstractContextManager[Span]: ...


class _NullSpan(Span):
    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        return None

    def record_error(self, error: BaseException) -> None:
        return None

    @property
    def trace_id(self) -> str | None:
        return None

    @property
    def span_id(self) -> str | None:
        return None


class NoTelemetry(Telemetry):
    def span(
        self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
    ) -> AbstractContextManager[Span]:
        @contextmanager
        def _null() -> Iterator[Span]:
            yield _NullSpan()

        return _null()
