"""Outputs to YK_OUT: split to fit, published with dedup ids, acks settled in a window.

Each output of entry N is published with `Nats-Msg-Id: <N>-<index>` and `Yk-In-Seq: <N>`,
at once and in order; acks are checked in a bounded window (`window` publishes in flight
across entries), and all of them before the service writes a snapshot. On start, `scan`
reads what the stream already holds, so that outputs a replayed tail would emit again are
skipped up to the last stored message and deduplicated by id beyond it: `kill -9` at any
moment duplicates nothing.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio
import msgspec
from nats.js import api

from ykbus.bus.subjects import (
    HDR_CONTENT_TYPE,
    HDR_IN_SEQ,
    HDR_MSG_ID,
    HDR_SHARD,
    MSGPACK,
    OUT_STREAM,
    Subjects,
    header_seq,
)
from ykbus.core import Output
from ykbus.si import codec, compat
from ykbus.si import messages as m

log = logging.getLogger("ykbus.core")


def split_output(msg: Any, encoding: str, max_bytes: int, int64: str = "number") -> list[bytes]:
    """`msg` encoded, as one message or, when it is larger than `max_bytes`, as several:
    each list field is cut in halves until every part fits. Deterministic, so the message
    ids `<in-seq>-<index>` of a replayed entry are the same. `int64` "string": int64 fields
    as decimal strings (the RM's `extraConfig.int64`, see ykbus.si.compat)."""
    data = codec.encode(msg if int64 == "number" else compat.int64_as_strings(msg), encoding)
    limit = max_bytes - 4096  # room for the headers
    if len(data) <= limit:
        return [data]
    fields = {f: getattr(msg, f) for f in msg.__struct_fields__ if isinstance(getattr(msg, f), list)}
    longest = max(fields, key=lambda f: len(fields[f]), default=None)
    if longest is None or len(fields[longest]) < 2:
        raise ValueError(f"an output of {len(data)} bytes cannot be split below {limit}")
    items = fields[longest]
    half = len(items) // 2
    first = msgspec.structs.replace(msg, **{longest: items[:half]})
    second = msgspec.structs.replace(msg, **{f: [] for f in fields if f != longest}, **{longest: items[half:]})
    return split_output(first, encoding, max_bytes, int64) + split_output(second, encoding, max_bytes, int64)


class Part(NamedTuple):
    """One message of an entry's outputs, ready to publish."""

    seq: int
    msg_id: str
    subject: str
    data: bytes
    headers: dict[str, str]
    notice: list[str]  # what the operator hears when it is first published


KEPT_MAX = 200_000  # outputs a standby keeps ahead of its leader, at most (a few hundred bytes each)


class Unpublished:
    """A standby's outputs of the entries it applied, kept until it sees the leader's copy
    of each on the output stream (by message id), so that a takeover publishes exactly what
    the leader did not."""

    def __init__(self, limit: int = KEPT_MAX) -> None:
        self._parts: dict[str, Part] = {}  # by message id, in the order applied
        self._ahead: dict[str, int] = {}  # ids seen stored before this process applied their entry
        self._prune_at = 100_000
        self.limit = limit  # kept at most: then the standby applies nothing more until the leader catches up
        self._room = asyncio.Event()
        self._room.set()

    def __len__(self) -> int:
        return len(self._parts)

    @property
    def full(self) -> bool:
        return not self._room.is_set()

    async def room(self) -> None:
        """Until fewer than `limit` are kept (the leader stored them, or this process took
        them over): a standby far ahead of its leader waits rather than keep ever more."""
        await self._room.wait()

    def add(self, parts: list[Part], applied: int) -> None:
        for part in parts:
            if self._ahead.pop(part.msg_id, None) is None:
                self._parts[part.msg_id] = part
        if len(self._ahead) > self._prune_at:  # ids this process will not make (entries it applied)
            self._ahead = {i: s for i, s in self._ahead.items() if s > applied}
            self._prune_at = max(100_000, 2 * len(self._ahead))
        if len(self._parts) >= self.limit:
            self._room.clear()

    def stored(self, msg_id: str, in_seq: int, applied: int) -> None:
        """The leader's copy of `msg_id` (of entry `in_seq`) is on the stream; `applied`: the
        last entry this process applied (an id of an entry at or below it that is not kept
        here was never kept: a tail that reads the stream again from its start)."""
        if self._parts.pop(msg_id, None) is None and in_seq > applied:
            self._ahead[msg_id] = in_seq
        if not self._room.is_set() and len(self._parts) <= self.limit // 2:
            self._room.set()

    def take(self) -> list[Part]:
        parts = list(self._parts.values())
        self._parts.clear()
        self._ahead.clear()
        self._room.set()
        return parts


ACK_TIMEOUT_S = 3.0  # an output whose ack has not come in this long is published again (same id):
# in a NATS cluster that lost the server leading YK_OUT, the answer never comes
WATCH_EVERY_S = 0.5  # how often a publisher looks for answers that failed, or are due, between entries


class _Pending:
    """One output published and not yet known stored."""

    __slots__ = ("number", "part", "ack", "due")

    def __init__(self, number: int, part: Part, due: float) -> None:
        self.number, self.part = number, part
        self.ack: bytes | None = None  # the server's answer, once it came
        self.due = due  # (loop time) the watch publishes it again if still unanswered then


class OutputPublisher:
    """Acks come back on one inbox subscription, `<inbox>.<n>` for the n-th publish, and are
    matched to the window by that number: no future, timer or JSON decoding per output
    (nats-py's `publish_async` makes all three)."""

    def __init__(self, js: Any, subjects: Subjects, window: int, retries: int, stats: dict[str, int],
                 output_format: Callable[[str], tuple[str, str]], nc: Any = None,
                 notify: Callable[[str], None] = lambda _text: None) -> None:
        """`output_format(rm)` is (encoding, int64 mode) of the outputs to that RM; `stats`
        counts `outputs` and `allocations`. `nc`: the connection of `js` (acks come to it).
        `notify` hears the core's verdicts for the operator (queue-file reloads) as they are
        first published; `rejections` counts, per RM, the asks, allocations, applications
        and nodes the core rejected since this process started."""
        self._notify = notify
        self.rejections: collections.Counter[str] = collections.Counter()
        self._js = js
        self._nc = nc if nc is not None else js._nc
        self._subjects = subjects
        self.window = window
        self._retries = retries
        self._stats = stats
        self._format = output_format
        self.max_payload = 1 << 20  # the server's, once connected
        # Outputs already on YK_OUT when we started: entries below `_floor` are all there;
        # from it on, `_ids` holds the message ids that are (see `scan`).
        self._floor = 0
        self._ids: set[str] = set()
        self.scanned_to = 0  # the output stream's last sequence at the last scan
        self._inflight: collections.deque[_Pending] = collections.deque()  # oldest first
        self._by_number: dict[int, _Pending] = {}  # in flight, by the number in its reply subject
        self._number = 0
        self._acks: Any = None  # the inbox subscription: nats-py's task hands each ack to `_on_ack`
        self._answered = asyncio.Event()  # set at each ack: a settle waiting for one looks again
        self._inbox = ""
        self._settling = asyncio.Lock()
        self.may_send: Callable[[], bool] = lambda: True  # the leader's lease holds (bus/leader.py)
        self.held: list[Part] = []  # failed while `may_send` said no

    async def scan(self) -> None:
        """What a restart must not publish again. At most `publish_window` outputs are ever
        unacknowledged, and a failed one is published again before more are sent past the
        window, so every output older than the last 2 x window messages is stored: read the
        ids of those last messages, and the in-seq below which nothing can be missing."""
        info = await self._js.stream_info(OUT_STREAM)
        self.scanned_to = info.state.last_seq
        if not info.state.messages:
            return
        end, span = info.state.last_seq, 2 * self.window
        ids: set[str] = set()
        lows: list[int] = []
        while True:  # a shard's own last 2 x window messages: others' come between them; read each once
            first = max(info.state.first_seq, end - span + 1)
            more, low = await self._scan_from(first, end)
            ids |= more
            if low is not None:
                lows.append(low)
            if len(ids) >= 2 * self.window or first == info.state.first_seq:
                break
            end, span = first - 1, span * 4
        self._floor, self._ids = min(lows, default=0), ids

    async def _scan_from(self, first: int, last: int) -> tuple[set[str], int | None]:
        """The ids of this process's outputs (its shard's, or all when not sharded) stored
        from stream sequence `first` to `last`, and the lowest input sequence among them but
        for late copies: a message stored more than the window after one of a later entry (a
        retried publish is stored within it) is a leader's that woke from a stall and sent
        what the next leader had sent (its id is kept; it says nothing of what is missing)."""
        ids: set[str] = set()
        floor: int | None = None
        earlier: collections.deque[int] = collections.deque()  # the in-seqs of the last `window` messages
        high = 0  # the highest in-seq of those before them
        shard = self._subjects.shard or ""
        sub = await self._js.subscribe(
            self._subjects.outputs, stream=OUT_STREAM, ordered_consumer=True, headers_only=True,
            config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=first))
        try:
            async for msg in sub.messages:
                headers = msg.headers or {}
                if headers.get(HDR_SHARD, "") == shard:
                    ids.add(headers.get(HDR_MSG_ID, ""))
                    in_seq = header_seq(headers, HDR_IN_SEQ)
                    if in_seq >= high:  # (else a late copy)
                        floor = in_seq if floor is None else min(floor, in_seq)
                    earlier.append(in_seq)
                    if len(earlier) > self.window:
                        high = max(high, earlier.popleft())
                if msg.metadata.sequence.stream >= last:
                    break
        finally:
            await sub.unsubscribe()
        return ids, floor

    def count(self, outputs: list[Output]) -> None:
        """Counts an entry's outputs in `stats` and `rejections` (a reader, which publishes
        nothing, only counts them)."""
        for out in outputs:
            if out.kind == "alloc":
                self._stats["allocations"] += len(out.msg.new)
                self.rejections[out.rm] += len(out.msg.rejected) + len(out.msg.rejectedAllocations)
            elif out.kind in ("app", "node"):
                self.rejections[out.rm] += len(out.msg.rejected)

    def encode(self, seq: int, outputs: list[Output]) -> list[Part]:
        """The messages that carry the outputs of entry `seq` (split so each fits NATS's max
        payload), under their ids `<seq>-<index>`; counts them (`count`)."""
        self.count(outputs)
        parts: list[Part] = []
        shard = self._subjects.shard
        for out in outputs:
            notice: list[str] = []
            if out.kind == "event" and not out.rm:  # the core's verdicts on queue files: for the operator
                for event in out.msg.events:
                    log.info("core event", extra={"fields": {"seq": seq, "object": event.objectID,
                                                             "message": event.message}})
                    notice.append(event.message)
            encoding, int64 = self._format(out.rm)
            subject = self._subjects.output(out.rm, out.kind)
            try:
                datas = split_output(out.msg, encoding, self.max_payload, int64)
            except ValueError as exc:  # one item larger than a message: the core's bounds should prevent it
                log.error("an output does not fit in a message: a bug", extra={"fields": {
                    "seq": seq, "rm": out.rm, "kind": out.kind, "error": str(exc)}})
                subject = self._subjects.output(out.rm, "event")
                datas = [codec.encode(m.EventBatch(events=[m.EventRecord(
                    type=m.EventType.REQUEST, objectID=out.rm, timestampNano=0,
                    message=f"entry {seq}: its {out.kind} answer could not be sent: {exc}")]), encoding)]
            for data in datas:
                msg_id = f"{seq}-{len(parts)}" if shard is None else f"{seq}-{shard}-{len(parts)}"
                headers = {HDR_MSG_ID: msg_id, HDR_IN_SEQ: str(seq)}
                if shard is not None:
                    headers[HDR_SHARD] = shard
                if encoding == "msgpack":
                    headers[HDR_CONTENT_TYPE] = MSGPACK
                parts.append(Part(seq, msg_id, subject, data, headers, notice))
                notice = []  # heard with the first part
        return parts

    def stored(self, part: Part) -> bool:
        """`part` was on the output stream when this process last scanned it."""
        return part.seq < self._floor or part.msg_id in self._ids

    async def send(self, parts: list[Part]) -> None:
        """Send `parts` in order, skipping those stored before this process scanned the
        stream (a restart, or a standby taking over). Each only while the lease holds: a
        leader stalled in the middle (SIGSTOP, a VM paused) past its lease would send the
        rest after the next leader's, stored twice once past the duplicate window; they are
        held (`take_held`: sent first if it leads again, skipped where stored)."""
        for i, part in enumerate(parts):
            if self.stored(part):
                continue
            if not self.may_send():
                self.held += [p for p in parts[i:] if not self.stored(p)]
                break
            for text in part.notice:
                self._notify(text)
            await self._send(part)
            self._stats["outputs"] += 1
            if len(self._inflight) > self.window:  # a long batch (a takeover's) keeps the window too
                await self.settle(self.window)
        await self.settle(self.window)

    def take_held(self) -> list[Part]:
        """Outputs whose publish failed while this process could not publish (its lease had
        lapsed): they go out, first, once it can again."""
        held, self.held = self.held, []
        return held

    async def _send(self, part: Part) -> None:
        if self._acks is None:
            self._inbox = self._nc.new_inbox()
            self._acks = await self._nc.subscribe(self._inbox + ".*", cb=self._on_ack)
        self._number += 1
        pending = _Pending(self._number, part, asyncio.get_running_loop().time() + ACK_TIMEOUT_S)
        self._by_number[pending.number] = pending
        self._inflight.append(pending)
        await self._nc.publish(part.subject, part.data, reply=f"{self._inbox}.{pending.number}", headers=part.headers)

    async def close(self) -> None:
        """Stop hearing acks (what is in flight is the next leader's, or the next start's)."""
        if self._acks is not None:
            await self._acks.unsubscribe()
            self._acks = None

    async def _on_ack(self, msg: Any) -> None:
        """One ack to its output, as it arrives (an empty body is a status: no stream answered).
        nats-py's one task of the subscription calls it for each, in order: no task per ack."""
        pending = self._by_number.pop(int(msg.subject[len(self._inbox) + 1:]), None)
        if pending is not None:  # None: the late answer to a publish already sent again
            status = (msg.headers or {}).get("Status", "?")
            pending.ack = msg.data or f'{{"error": "status {status}"}}'.encode()
            self._answered.set()

    async def watch(self) -> None:
        """Between entries: an output whose answer was an error, or that is due unanswered,
        is published again now. Otherwise only the next entry's outputs (or a snapshot) would
        settle it: after a NATS server died with the last answers of a burst, they stayed
        unsent while the RM waited for them, and sent nothing more (CI saw 60 s). It waits
        for nothing: it takes only the oldest outputs already answered or due, under the same
        lock as every settle (a snapshot's settle waits for a republish it began)."""
        while True:
            await anyio.sleep(WATCH_EVERY_S)
            if self._acks is None or not self._inflight or self._settling.locked():
                continue
            async with self._settling:
                inflight, now = self._inflight, asyncio.get_running_loop().time()
                while inflight and (inflight[0].ack is not None or inflight[0].due <= now):
                    await self._done(inflight.popleft())

    async def settle(self, window: int) -> None:
        """Check publish acks, oldest first, until at most `window` are in flight (0: all).
        A failed publish, or one unanswered for ACK_TIMEOUT_S, is sent again with the same
        message id until it is stored; one that fails while this process may not publish
        (`may_send`) is held for when it may."""
        async with self._settling:  # one at a time (the watch too): each pops the oldest it waited for
            if self._inflight:  # (checked under the lock: a republish by the watch may have emptied it)
                await self._settle(window)

    async def _settle(self, window: int) -> None:
        inflight = self._inflight
        while inflight and (len(inflight) > window or inflight[0].ack is not None):
            pending = inflight[0]
            if pending.ack is None:  # wait for the oldest one's answer (no timer when it is in)
                with anyio.move_on_after(ACK_TIMEOUT_S):
                    while pending.ack is None:
                        self._answered.clear()
                        await self._answered.wait()
            await self._done(inflight.popleft())

    async def _done(self, pending: _Pending) -> None:
        """`pending`, taken from the window: stored, or published again (unanswered, or not
        stored: same message id)."""
        ack = pending.ack
        if ack is None or b'"error":' in ack:
            self._by_number.pop(pending.number, None)
            await self._republish(pending.part,
                                  RuntimeError(f"publish answered {ack!r}" if ack else "publish unanswered"))

    async def _republish(self, part: Part, first: Exception) -> None:
        error: Exception = first
        for attempt in range(self._retries):
            if not self.may_send():  # deposed, or the lease lapsed: not ours to send now
                self.held.append(part)
                return
            log.warning("output publish failed, retrying", extra={"fields": {
                "subject": part.subject, "msg_id": part.msg_id, "attempt": attempt + 1, "error": repr(error)}})
            await anyio.sleep(min(0.1 * 2**attempt, 2.0))
            try:
                await self._js.publish(part.subject, part.data, headers=part.headers)
                return
            except Exception as exc:  # noqa: BLE001
                error = exc
        raise RuntimeError(f"could not publish {part.msg_id} to {part.subject}: {error!r}")
