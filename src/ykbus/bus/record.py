"""`ykbus record`: the input stream, from its first entry to its last, as a JSONL log."""

from __future__ import annotations

from typing import Any

import anyio
import nats.errors
from nats.js import api

from ykbus.bus.local import connect
from ykbus.bus.subjects import (
    IN_STREAM,
    Subjects,
    encoding_of,
    js_reply_meta,
)
from ykbus.core import Entry
from ykbus.log.jsonl import encode_entry
from ykbus.progress import Progress


async def record(url: str, out_path: str, prefix: str = "yk.v1", progress: Progress | None = None) -> int:
    """Write the input stream to `out_path`; `progress`, if given, hears each entry."""
    subjects = Subjects(prefix)
    nc = await connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(IN_STREAM)
        last, n = info.state.last_seq, 0
        with open(out_path, "wb") as f:
            if not info.state.messages:
                return 0
            sub = await _ordered_consumer(js, subjects.inputs)
            async for msg in sub.messages:
                seq, ts = js_reply_meta(msg.reply)
                rm, kind = subjects.parse(msg.subject)
                encoding = encoding_of(msg.headers)
                f.write(encode_entry(Entry(seq, ts, rm, kind, msg.data, encoding)) + b"\n")
                n += 1
                if progress is not None:
                    progress.update(n, info.state.messages)
                if seq >= last:
                    break
            await sub.unsubscribe()
        return n
    finally:
        await nc.close()


API_TRIES = 6  # JetStream API requests tried before `record` gives up (5 s each, 1 s apart)


async def _ordered_consumer(js: Any, subject: str) -> Any:
    """An ordered consumer of the input stream from its first entry. Its creation is a
    JetStream API request, which times out while a cluster that just lost or regained a
    server elects the stream's leader again: tried `API_TRIES` times before giving up."""
    for attempt in range(API_TRIES):
        try:
            return await js.subscribe(subject, stream=IN_STREAM, ordered_consumer=True,
                                      deliver_policy=api.DeliverPolicy.ALL)
        except nats.errors.TimeoutError:
            if attempt == API_TRIES - 1:
                raise
            await anyio.sleep(1)
    raise AssertionError("unreachable")
