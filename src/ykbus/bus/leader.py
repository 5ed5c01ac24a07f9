"""What this core process does as the leader or as a standby (bus/leadership.py elects).

- The outputs of each applied entry: the leader publishes them; a standby keeps them
  (`Unpublished`) until it sees the leader's copy of each stored, reading `YK_OUT`'s headers.
- Taking over: scan `YK_OUT` as a restart does, publish what was kept and is not stored
  (same message ids), append a `tick` that fences older leaders out, then lead.
- Appends to the log (`_core` entries): the leader's only, fenced by the term in `Yk-Lease`
  and the stream's expectation on the last `_core` entry.
- Holding the lease; a lapsed one keeps outputs back until a renewal succeeds; a lost one
  ends the leader's duties, and the service starts again as a standby.
- A reader (`ykbus core --reader`) applies the log to answer reads and is never a candidate:
  it keeps no outputs, campaigns for nothing and appends nothing; it only watches who leads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
from nats.js import api
from nats.js.errors import APIError, NotFoundError

from ykbus.bus.leadership import Lease, lease_term
from ykbus.bus.live import LiveCore
from ykbus.bus.publisher import OutputPublisher, Part, Unpublished
from ykbus.bus.subjects import (
    HDR_IN_SEQ,
    HDR_LEASE,
    HDR_MSG_ID,
    HDR_SHARD,
    IN_STREAM,
    OUT_STREAM,
    Subjects,
    header_seq,
)

log = logging.getLogger("ykbus.core")

WRONG_LAST_SEQUENCE = 10071  # JetStream's error code when an expected last sequence does not hold
# The ordered consumers' heartbeat: two missed ones (the server that held the consumer died,
# in a NATS cluster) and nats-py makes it again where it stopped, on another server.
CONSUMER_HEARTBEAT_S = 1.0

Duties = Callable[[anyio.abc.TaskGroup], Awaitable[list[Any]]]


def server_version(nc: Any) -> tuple[int, ...]:
    """The connected nats-server's version, (major, minor, patch); (0,) when unknown."""
    version = nc.connected_server_version
    try:
        return (version.major, version.minor, version.patch)
    except ValueError:
        return (0,)


class Leadership:
    """This process's part: `lease` says whether it leads; this class does what follows."""

    def __init__(self, subjects: Subjects, live: LiveCore, reader: bool = False) -> None:
        """`live`: the core the service applies entries to, and the writer's lock (held
        while an entry is applied and its outputs handed over); `reader`: this process
        never leads. The NATS handles come once connected (`connected`)."""
        self.reader = reader
        self._subjects = subjects
        self._writer = live.lock
        self._applied = live.applied
        self.lease: Lease | None = None
        self.unpublished = Unpublished()  # a standby's outputs the leader has not been seen storing
        self._appending = asyncio.Lock()  # appends one at a time: each expects the last one's sequence
        self._core_seq = 0  # the input log's last core entry (`<prefix>.in._core.*`) this process knows
        self._was_standby = False
        self._taken_over = False
        self._fence = True  # the server checks an expected last sequence of a wildcard (nats-server 2.11+)
        self._tail: Any = None
        self._js: Any = None
        self._publisher: OutputPublisher | None = None
        self.on_duty = anyio.Event()  # set once this process, elected, has started the leader's duties (or stopped leading)

    def connected(self, js: Any, nc: Any, publisher: OutputPublisher, lease: Lease) -> None:
        self._js, self._publisher, self.lease = js, publisher, lease
        publisher.may_send = self.publishing
        self._fence = server_version(nc) >= (2, 11)
        if not self._fence:
            log.warning("nats-server before 2.11: appends to the log are fenced by the lease's timing only "
                        "(docs/reliability.md)", extra={"fields": {"server": str(nc.connected_server_version)}})

    async def settle(self) -> None:
        """Until every output this process sent is stored."""
        assert self._publisher is not None
        await self._publisher.settle(0)

    @property
    def role(self) -> str:
        if self.reader:
            return "reader"
        return self.lease.role if self.lease is not None else "standby"

    def view(self) -> dict[str, Any]:
        """For `health`: this process's role, the leader it knows and its term; `status` "no
        leader" when none leads (decisions are made from the log, and published by no one)."""
        view = {"role": self.role, "leader": None, "term": 0} if self.lease is None else \
            {**self.lease.view(), "role": self.role}
        return view if self.leader_present() else {**view, "status": "no leader"}

    def leader_present(self) -> bool:
        """Whether some core process leads now, as this one knows: itself, or a holder whose
        lease it sees renewed (a reader's or a standby's view)."""
        return self.role == "leader" or (self.lease is not None and self.lease.sees_leader())

    def publishing(self) -> bool:
        """This process publishes now: it has taken over, and its lease holds."""
        return self._taken_over and self.lease is not None and self.lease.leading

    def stores_snapshots(self) -> bool:
        """Only the leader stores snapshots, and only while every output up to its cursor is
        sent (a lapsed lease keeps outputs back)."""
        return self.publishing() and not self._kept_back()

    def saw_core_entry(self, seq: int) -> None:
        self._core_seq = max(self._core_seq, seq)

    async def begin(self) -> None:
        """At start: a process elected before it applied anything has nothing to take over;
        a standby starts reading which outputs the leader stores."""
        assert self.lease is not None and self._publisher is not None
        if self.reader:
            return
        if self.lease.leading:
            self._taken_over = True
            return
        self._was_standby = True
        self._tail = await self._js.subscribe(
            self._subjects.outputs, stream=OUT_STREAM, ordered_consumer=True, headers_only=True,
            idle_heartbeat=CONSUMER_HEARTBEAT_S, cb=self._on_output,
            config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                                      opt_start_seq=self._publisher.scanned_to + 1))

    async def _on_output(self, msg: Any) -> None:
        headers = msg.headers or {}
        if headers.get(HDR_SHARD, "") != (self._subjects.shard or ""):
            return  # another shard's
        self.unpublished.stored(headers.get(HDR_MSG_ID, ""), header_seq(headers, HDR_IN_SEQ), self._applied())

    def keep(self, seq: int, parts: list[Part]) -> None:
        """A standby's outputs `parts` of entry `seq`: kept until its leader is seen storing
        them (or it takes over and sends them)."""
        assert self._publisher is not None and not self.reader  # a reader encodes and keeps nothing
        self.unpublished.add([p for p in parts if not self._publisher.stored(p)], seq)

    def take_kept(self) -> list[Part]:
        """What the leader kept back while its lease had lapsed, to go out first (none mostly)."""
        return self._take_kept() if self._kept_back() else []

    def _kept_back(self) -> bool:
        return bool(len(self.unpublished) or self._publisher.held)  # type: ignore[union-attr]

    def _take_kept(self) -> list[Part]:
        """What this process kept back, oldest first: outputs that failed while it could not
        send (held by the publisher), then those it never sent."""
        return self._publisher.take_held() + self.unpublished.take()  # type: ignore[union-attr]

    async def lead(self, duties: Duties) -> None:
        """Campaign; once elected, take over and do the leader's `duties` (started in a task
        group; they return subscriptions to end) until the lease is lost."""
        assert self.lease is not None
        lease = self.lease
        if self.reader:
            while True:  # never a candidate: it only says who leads (health), as often as a standby looks
                await lease.observe()
                await anyio.sleep(min(0.1, lease.ttl / 10))
        await lease.campaign()
        subs: list[Any] = []
        try:
            async with anyio.create_task_group() as tg:
                async def hold() -> None:  # renewed from the first moment: a takeover may take a while
                    await lease.hold(renewed=self._flush)
                    tg.cancel_scope.cancel()

                tg.start_soon(hold)
                async with self._writer:
                    await self._take_over(self._applied())
                subs = await duties(tg)
                self.on_duty.set()
                if self._was_standby:  # the fence: from this entry on, an older leader's appends fail
                    await self.append("tick", self._subjects.naming_shard)
        finally:
            self.on_duty.set()  # leading ended (or never began its duties): nobody waits for them any more
            for sub in subs:
                await sub.unsubscribe()

    async def _take_over(self, last_seq: int) -> None:
        assert self._publisher is not None
        if not self._was_standby:
            self._taken_over = True
            return
        t0 = time.perf_counter()
        if self._tail is not None:
            await self._tail.unsubscribe()
            self._tail = None
        await self._publisher.scan()
        parts = self.unpublished.take()
        published = sum(1 for p in parts if not self._publisher.stored(p))
        self._taken_over = True  # (under the writer's lock: no entry's outputs go out before these)
        await self._publisher.send(parts)  # each while the lease holds (`publishing`)
        try:
            newest = await self._js.get_last_msg(IN_STREAM, self._subjects.core_inputs)
            self.saw_core_entry(newest.seq)
        except NotFoundError:
            pass
        log.warning("took over as leader", extra={"fields": {
            "last_seq": last_seq, "outputs_kept": len(parts), "published": published,
            "ms": round(1000 * (time.perf_counter() - t0), 1)}})

    async def _flush(self) -> None:
        """After a renewal: what was kept back while the lease had lapsed goes out now, unless
        the writer is busy (its next entry sends them first): renewals never wait for it."""
        if self._kept_back() and not self._writer.locked():
            async with self._writer:
                if self.publishing():
                    await self._publisher.send(self._take_kept())  # type: ignore[union-attr]

    async def step_down(self, final_snapshot: Callable[[], Awaitable[None]]) -> None:
        """A clean stop of the leader: the final snapshot (no entry applied meanwhile), then
        the lease freed, so a standby takes over at once. A lease that lapsed (a stall: a
        long GC, a VM paused, a burst of outputs) and is still this process's is renewed
        first, and what was kept back meanwhile sent: the stop stays clean."""
        lease = self.lease
        if not self._taken_over or lease is None or not lease.term or lease.lost:
            return  # a standby, or deposed: nothing of the leader's to hand over
        if not lease.leading and not await lease.renew():
            return  # another process leads now
        # (a renewal that did not make it leading again, NATS slow or away, sends and stores
        # nothing below: each step checks; the lease is still freed if it can be)
        if self._kept_back():
            async with self._writer:
                if self.publishing():
                    await self._publisher.send(self._take_kept())  # type: ignore[union-attr]
        try:
            await final_snapshot()  # taken between entries (the snapshotter holds the writer)
        finally:
            await lease.release()

    async def append(self, kind: str, body: dict[str, Any]) -> bool:
        """Append a core entry, as the leader only, fenced (bus/leadership.py): it expects the
        last core entry to be the one this process knows of, and carries its term. True once
        stored; False if not (a standby, a lapsed lease, NATS away: the caller may try again)."""
        lease = self.lease
        if lease is None:
            return False
        subject, data = self._subjects.core_input(kind), json.dumps(body).encode()
        last_core = self._subjects.core_inputs
        async with self._appending:
            for _ in range(3):
                if not self.publishing():
                    return False  # a standby appends nothing; the leader does, and this process applies it
                headers = {HDR_LEASE: str(lease.term)}
                if self._fence:
                    headers["Nats-Expected-Last-Subject-Sequence"] = str(self._core_seq)
                    headers["Nats-Expected-Last-Subject-Sequence-Subject"] = last_core
                try:
                    ack = await self._js.publish(subject, data, headers=headers)
                    self.saw_core_entry(ack.seq)
                    return True
                except APIError as exc:
                    if exc.err_code != WRONG_LAST_SEQUENCE:
                        log.warning("could not append to the log", extra={"fields": {"kind": kind, "error": repr(exc)}})
                        return False  # the next tick or check tries again
                    newest = await self._js.get_last_msg(IN_STREAM, last_core)  # who appended after what we knew
                except Exception as exc:  # noqa: BLE001 - the next tick or check tries again
                    log.warning("could not append to the log", extra={"fields": {"kind": kind, "error": repr(exc)}})
                    return False
                term = lease_term(newest.headers)
                if term > lease.term:
                    lease.deposed(term)
                    return False
                self.saw_core_entry(newest.seq)  # an older leader's, or ours not yet applied
        return False
