"""The event feed: the durable output stream (YK_OUT) read as YuniKorn's events, for
`/ws/v1/events/batch`, `/ws/v1/events/stream` and the timeline's history (`GET
/api/timeline`), served by bus/readapi.py.

The IO is here: an ordered consumer of the stream from a sequence on, each message decoded
into its output type. What an output message becomes (YuniKorn's EventRecords, their ids)
and the histogram the timeline reads are rest/events.py's, plain functions and values; this
module hands them the messages. rest/ never imports back (tests/core/test_layers.py).

Rules: every read (`last`, `follow`) shares one `Placed`, so a release's events carry the
node and resource of an allocation an earlier read saw; a node added gets its capacity from
the live core as it is when its message is read (`LiveCore.core`, never kept). `count` is
the histogram's one writer: one task, from the stream's first message on, forever, with
checkpoints every COUNT_YIELD messages so the backlog at start does not hold the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import nats.errors
from nats.js.api import ConsumerConfig, DeliverPolicy

from ykbus.bus.live import LiveCore
from ykbus.bus.subjects import (
    OUT_STREAM,
    Subjects,
    encoding_of,
    js_reply_meta,
)
from ykbus.rest.events import ID_SHIFT, Histogram, Placed, events_of
from ykbus.si import codec
from ykbus.si import messages as m

RM_WINDOW = 20_000  # the most output messages read back for one RM's last events
COUNT_YIELD = 256  # messages the counter reads between two checkpoints (the backlog at start must not hold the loop)


class EventFeed:
    """The output stream read as YuniKorn's events."""

    def __init__(self, js: Any, subjects: Subjects, instance: str, live: LiveCore | None = None) -> None:
        self.js, self.subjects, self.instance = js, subjects, instance
        self.live = live  # the core whose nodes' capacities the NODE ADD events carry (None: none)
        self.placed = Placed()  # shared by every read: a release's allocation was read by this or an earlier one
        self.histogram = Histogram()  # the timeline's history: `count` writes it, /api/timeline reads it

    async def _bounds(self) -> tuple[int, int]:
        info = await self.js.stream_info(OUT_STREAM)
        return info.state.first_seq, info.state.last_seq

    async def _read(self, start_seq: int, until: int | None,
                    rm: str | None = None) -> AsyncIterator[tuple[int, list[dict[str, Any]]]]:
        """(stream sequence, its events) from `start_seq`, up to `until` (None: forever); of
        RM `rm`'s outputs only, when given (others: no events)."""
        async for seq, ts, of_rm, kind, body in self._messages(start_seq, until):
            if self.live is not None:
                await self.live.at_rest()  # not in a reader's turn in the middle of an entry
            core = self.live.core if self.live is not None else None  # as it is now: the guard may replace it
            events = events_of(kind, body, ts, self.placed, core, of_rm)  # (each read: `placed` follows them all)
            yield seq, events if rm is None or of_rm == rm else []

    async def count(self) -> None:
        """Count every event of the stream in `histogram`, from its first message on, as the
        core publishes them: the histogram's one writer, forever (until the connection
        closes). Its events are made without the shared `placed` (what it counts needs no
        node or resource), so other reads see what they saw before."""
        first, _ = await self._bounds()
        read = 0
        async for seq, ts, _, kind, body in self._messages(first, None):
            if seq > self.histogram.seq:
                self.histogram.note(seq, ts, events_of(kind, body, ts))
            read += 1
            if read % COUNT_YIELD == 0:
                await anyio.sleep(0)  # the backlog arrives faster than it is counted: let answers through

    async def _messages(self, start_seq: int, until: int | None) -> AsyncIterator[tuple[int, int, str, str, Any]]:
        """(stream sequence, time in ns, RM, kind, decoded body or None) of each output message
        from `start_seq`, up to `until` (None: forever)."""
        sub = await self.js.subscribe(self.subjects.outputs, ordered_consumer=True, stream=OUT_STREAM,
                                      config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                            opt_start_seq=max(1, start_seq)))
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=None if until is None else 5)
                except (TimeoutError, nats.errors.ConnectionClosedError):
                    return  # read to its end, or the service is stopping
                seq, ts = js_reply_meta(msg.reply)
                rm, kind = self.subjects.parse(msg.subject, "out")
                encoding = encoding_of(msg.headers)
                try:
                    body = codec.decode(m.OUTPUT_TYPES[kind], msg.data, encoding) if kind in m.OUTPUT_TYPES else None
                except Exception:  # an output this version cannot read: no events from it
                    body = None
                yield seq, ts, rm, kind, body
                if until is not None and seq >= until:
                    return
        finally:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def last(self, count: int, start: int | None = None,
                   rm: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The last `count` events (from id `start` on, when given), oldest first, with their
        ids; of RM `rm` only, when given (looked for up to RM_WINDOW messages back)."""
        first, last = await self._bounds()
        if last == 0 or last < first:
            return []
        window = count
        while True:
            begin = max(first, (start >> ID_SHIFT) if start is not None else last - window + 1)
            out: list[tuple[int, dict[str, Any]]] = []
            async for seq, events in self._read(begin, last, rm):
                out += [((seq << ID_SHIFT) | i, e) for i, e in enumerate(events)
                        if start is None or (seq << ID_SHIFT) | i >= start]
            # one RM's last events may be further back than the last `count` messages (a quiet
            # RM beside busy ones): looked for further back, up to RM_WINDOW messages
            if rm is None or start is not None or len(out) >= count or begin == first or window >= RM_WINDOW:
                return out[-count:] if start is None else out[:count]
            window = min(RM_WINDOW, window * 8)

    async def batch(self, count: int, start: int | None = None) -> dict[str, Any]:
        found = await self.last(count, start)
        return {"InstanceUUID": self.instance, "LowestID": found[0][0] if found else 0,
                "HighestID": found[-1][0] if found else 0, "EventRecords": [e for _, e in found]}

    async def follow(self, count: int, rm: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """The last `count` events, then each new one as the core publishes it; of RM `rm`
        only, when given (the web UI's feed of one RM's partition: ykbus's own parameter)."""
        _, last = await self._bounds()
        for _, event in await self.last(count, None, rm) if count else []:
            yield event
        async for _, events in self._read(last + 1, None, rm):
            for event in events:
                yield event
