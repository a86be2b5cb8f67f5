"""``Backoff``: how long to leave a failing store alone.

After a failure the store is left alone for ``initial_s``, then twice as long after each
further failure, up to ``max_s``; a success resets it. Not thread-safe on its own: the
owner calls it under its lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        initial_s: float,
        max_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if initial_s < 0 or max_s < initial_s:
            raise ValueError("need 0 <= backoff_initial_s <= backoff_max_s")
        self._initial = initial_s
        self._max = max_s
        self._monotonic = monotonic
        self._down = False
        self._delay = 0.0
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        """Whether the last attempt failed."""
        return self._down

    @property
    def delay_s(self) -> float:
        return self._delay

    def waiting(self) -> bool:
        """Whether the store should still be left alone."""
        return self._retry_at > self._monotonic()

    def seconds_left(self) -> float:
        return max(self._retry_at - self._monotonic(), 0.0)

    def failed(self) -> None:
        self._delay = min(self._delay * 2, self._max) if self._down else self._initial
        self._down = True
        self._retry_at = self._monotonic() + self._delay

    def succeeded(self) -> None:
        self._down = False
        self._delay = 0.0
        self._retry_at = 0.0
