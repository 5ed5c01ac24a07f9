"""Reads in steps: a read that must walk many records (the health check: every node and
allocation) is a generator that yields after each STEP units of work, and returns its
answer. Run at once (`run`), or between the writer's entries (`run_sliced`): then the
writer applies what arrived after each step, and is never held for the whole walk (most of
a second at 400,000 allocations). Records read in one step are read whole; a read that
spans steps sees the records as each step finds them (as YuniKorn's own reads, which lock
one object at a time). What a dashboard polls reads the read model instead
(core/readmodel.py): no walk at all."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

T = TypeVar("T")
Steps = Generator[None, None, T]

STEP = 512  # units of work (a node, an allocation) between two yields: well under a millisecond


def run(steps: Steps[T]) -> T:
    """All the steps at once: the answer."""
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]


async def run_sliced(steps: Steps[T], pause: Callable[[], Awaitable[None]] | None = None) -> T:
    """The steps with the event loop running between them: the answer. `pause`, when given,
    is awaited before each step as well (a reader's: the end of an entry it paused)."""
    while True:
        if pause is not None:
            await pause()
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]
        await asyncio.sleep(0)
