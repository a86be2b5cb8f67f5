"""A clock that only moves when it is read: a fake of the runtime ``Clock`` port."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lookup_knowledge.application.ports import Clock


class FakeClock(Clock):
    """Advances 1 ms on every monotonic read so durations are positive and exact."""

    def __init__(self) -> None:
        self._now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now

    def monotonic(self) -> float:
        self._mono += 0.001
        return self._mono
