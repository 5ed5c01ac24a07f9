"""What a nats-py subscription has delivered, taken without a wake-up per message: the one
place that reads nats-py's delivery queue.

nats-py hands a subscription's messages over through a callback (its task of the
subscription wakes and calls it for each message) or an iterator (a task and a wait per
message). The core's publish acks and an RM's outputs arrive one per message: at 10,000
one-ask messages a second, the callback cost 4-7% of the end-to-end rate (BENCHMARKS.md,
"Per-message cost on the NATS path"). A subscription made without a callback queues what it
receives; `Delivered` takes from that queue as nats-py's own task does (and keeps its byte
count, which decides when nats-py drops messages of a slow consumer), all that has arrived
at once and when its reader is ready. tests/test_delivered.py checks it against the
installed nats-py on a real server: an upgrade that changes the queue fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Delivered:
    """The messages a subscription (made without `cb`) has received and nobody took yet."""

    __slots__ = ("_sub", "_queue")

    def __init__(self, sub: Any) -> None:
        self._sub = sub
        self._queue = sub._pending_queue

    def __len__(self) -> int:
        return self._queue.qsize()

    def take_nowait(self) -> Any:
        """The oldest one (asyncio.QueueEmpty if none)."""
        msg = self._queue.get_nowait()
        self._taken(msg)
        return msg

    async def take(self) -> Any:
        """The oldest one, once there is one."""
        msg = await self._queue.get()
        self._taken(msg)
        return msg

    def drain(self) -> Iterator[Any]:
        """Every one that has arrived, oldest first."""
        while self._queue.qsize():
            yield self.take_nowait()

    def _taken(self, msg: Any) -> None:
        self._sub._pending_size -= len(msg.data)
        self._queue.task_done()
