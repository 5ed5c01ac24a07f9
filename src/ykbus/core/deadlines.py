"""Deadlines on the log's clock: values fired in (deadline, insertion) order. Knows nothing
of what it holds (core/timers.py has the kinds of timers the core sets)."""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

from ykbus import limits

T = TypeVar("T")


class Timers(Generic[T]):
    """Deadlines on the log's clock, fired in (deadline, insertion) order: deterministic.
    Deadlines are clamped to int64 (a snapshot stores them as such)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, T]] = []
        self._n = 0

    def schedule(self, deadline: int, timer: T) -> None:
        self._n += 1
        heapq.heappush(self._heap, (min(deadline, limits.INT64_MAX), self._n, timer))

    def due(self, now: int) -> list[T]:
        out = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out
