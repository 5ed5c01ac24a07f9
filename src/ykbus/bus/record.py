"""`ykbus record`: the input stream, from its first entry to its last, as a JSONL log."""

from __future__ import annotations

from typing import Any

import anyio
import nats.errors
import nats.js.errors
from nats.js import api

from ykbus.bus.local import connect
from ykbus.bus.subjects import (
    IN_STREAM,
    Subjects,
    encoding_of,
    js_reply_meta,
)
from ykbus.core import Entry
from ykbus.log.jsonl import LogError, encode_entry
from ykbus.progress import Progress


async def record(url: str, out_path: str, prefix: str = "yk.v1", progress: Progress | None = None,
                 options: dict[str, Any] | None = None) -> tuple[int, int]:
    """Write the input stream to `out_path`; `progress`, if given, hears each entry. The
    entries written, and the stream's first seq (past 1: trimmed, `said`). LogError, one
    line, where the server holds no input stream."""
    subjects = Subjects(prefix)
    nc = await connect(url, **(options or {}))
    try:
        js = nc.jetstream()
        try:
            info = await js.stream_info(IN_STREAM)
        except nats.js.errors.NotFoundError:
            raise LogError(f"no input stream {IN_STREAM} on {url}: no core has run against this NATS server "
                           "(is it the one the core uses? --nats, --data)") from None
        except nats.js.errors.ServiceUnavailableError:
            raise LogError(f"{url} has no JetStream: it is not the NATS server of a core (--nats, --data)") from None
        held = list(info.config.subjects or [])
        if subjects.inputs not in held:  # an ordered consumer of subjects the stream never holds waits for ever
            raise LogError(f"the input stream {IN_STREAM} on {url} holds {', '.join(held) or 'no subjects'}, not "
                           f"{subjects.inputs}: its cores use another subject prefix (--prefix)")
        last, n, first = info.state.last_seq, 0, info.state.first_seq
        with open(out_path, "wb") as f:
            if not info.state.messages:
                return 0, first
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
        return n, first
    finally:
        await nc.close()


def said(n: int, first: int, out_path: str) -> str:
    """What `ykbus record` says it wrote, and that a stream trimmed does not replay to the
    core's decisions (its replay starts from an empty state)."""
    line = f"{n} entries written to {out_path}"
    if first > 1:
        line += (f" (from entry {first}: the stream no longer holds the {first - 1} entries before it, "
                 "trimmed below a snapshot: a replay of this file starts from an empty state, not the core's)")
    return line


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
