"""One leader, warm standbys (issue 24): every core process is a candidate.

Election
--------
The lease is one key, `leader`, in the JetStream key-value bucket YK_LEASE. Its value names
the holder (`id`, `host`, `pid`, and the `ttl` it promises to renew within).
- A candidate that finds no key creates it (create fails if another did first).
- The leader renews it every `ttl / 4` with an update on the revision it last wrote
  (compare-and-set): a renewal fails once another process has written the key.
- A standby polls the key. When its revision has not changed for the holder's `ttl` (timed
  from when this standby first saw that revision), it writes the key on that revision
  (compare-and-set): exactly one standby wins, and a renewal that was late loses.
- The bucket's TTL removes a key nobody renews (every core gone), and a clean stop deletes
  the key on its revision, so the next candidate takes over within one poll.

Fencing
-------
- The leader counts its lease valid until `ttl - margin` after it *sent* its last successful
  renewal. A standby writes the key no sooner than `ttl` after it *saw* that renewal
  stored, which is later: the old leader has stopped before the new one starts (clocks run
  at the same rate; no wall-clock agreement is needed). A process paused past its lease
  finds it invalid when it wakes, before it does anything.
- Outputs need no other fence: they are a pure function of the log, published under the
  message id `<in-seq>-<index>`. Two processes publishing the outputs of one entry publish
  the same bytes under the same ids, and the output stream stores the first.
- Appends to the input log (ticks, RM states, failure records, queue-file configs) carry
  the leader's term (the lease revision it was elected at) in `Yk-Lease`, and the
  stream's expectation on the last sequence of `<prefix>.in._core.*`: an append from a
  process that has not seen the newest core entry fails. When one fails, the process reads
  that entry: a newer term means it was deposed and it stops; otherwise it catches up and
  appends again.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio
from nats.js import api
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError

from ykbus.bus.subjects import HDR_LEASE, LEASE_BUCKET, LEASE_KEY, header_seq

log = logging.getLogger("ykbus.core")

DEFAULT_LEASE_TTL_S = 1.0


def lease_clock() -> float:
    """Seconds that go on while the machine is suspended (CLOCK_BOOTTIME, on Linux): a
    leader that wakes from a suspend finds its lease over."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


MIN_TTL_S, MAX_TTL_S = 0.2, 60.0  # a lease's TTL, as `--lease-ttl` takes it


def lease_term(headers: dict[str, str] | None) -> int:
    """The term a `_core` entry carries in `Yk-Lease`, or 0 (none, or not a term: anyone
    may append to an open server)."""
    return header_seq(headers, HDR_LEASE)


def holder_ttl(holder: dict[str, Any], default: float) -> float:
    """The TTL a lease's holder promises to renew within, bounded as `--lease-ttl` is."""
    try:
        ttl = float(holder.get("ttl", default))
    except (TypeError, ValueError):
        return default
    return default if ttl != ttl else min(max(ttl, MIN_TTL_S), MAX_TTL_S)


def lease_margin(ttl: float) -> float:
    """How long before a standby could take over a leader stops counting its lease valid."""
    return max(0.05, ttl / 10)


BUCKET_TTL_S = 600.0  # clears a key nobody renews; no takeover waits for it (standbys compare-and-set)


async def lease_store(js: Any, ttl: float, replicas: int = 1) -> Any:
    """The lease bucket. Its TTL is far above any lease's (at most 60 s): a lease's own TTL
    is in its value, and a bucket made by an older core with a short one is lengthened."""
    try:
        kv = await js.key_value(LEASE_BUCKET)
    except NotFoundError:
        return await js.create_key_value(api.KeyValueConfig(
            bucket=LEASE_BUCKET, history=1, ttl=BUCKET_TTL_S, replicas=replicas, storage=api.StorageType.FILE))
    stream = f"KV_{LEASE_BUCKET}"
    config = (await js.stream_info(stream)).config
    if config.max_age and config.max_age < BUCKET_TTL_S:
        config.max_age = BUCKET_TTL_S
        await js.update_stream(config)
    return kv


def identity(instance: str, ttl: float) -> dict[str, Any]:
    """What the lease says of its holder."""
    return {"id": instance, "host": socket.gethostname(), "pid": os.getpid(), "ttl": ttl}


class Lease:
    """This process's view of the lease: `role` "leader" or "standby", `leader` the holder's
    identity, `term` the revision this process was elected at (0 while standby)."""

    def __init__(self, kv: Any, me: dict[str, Any], ttl: float, clock: Callable[[], float] | None = None,
                 ready: Callable[[], bool] | None = None, key: str = LEASE_KEY) -> None:
        """`ready()`: whether this process may take the lease now (the service: once it has
        applied the log as far as it reached when the process started, so a process still
        replaying never wins over a warm standby)."""
        self._kv = kv
        self._key = key  # the KV key of this lease (a shard's own: Subjects.lease_key)
        self._ready = ready or (lambda: True)
        self.me = me
        self.ttl = ttl
        self._clock = clock or lease_clock
        self._value = json.dumps(me).encode()
        self.term = 0
        self.leader: dict[str, Any] | None = None
        self._rev = 0  # the revision this leader last wrote
        self._valid_until = 0.0
        self._seen = (0, 0.0)  # a standby's (revision, when it first saw it)
        self._looked = 0.0  # when this process last read the lease (a standby's or a reader's look)
        self.lost = False

    @property
    def role(self) -> str:
        """"leader" while it may publish (`leading`): a leader whose lease lapsed (NATS away,
        or deposed) says "standby", as it acts, so no two processes say "leader" at once."""
        return "leader" if self.leading else "standby"

    @property
    def leading(self) -> bool:
        """This process may publish and append now: elected, and its lease not lapsed."""
        return self.term > 0 and not self.lost and self._clock() < self._valid_until

    def _written(self, sent: float) -> None:
        """A write of this process's, sent at `sent`, is stored: the lease holds until a
        margin before a standby that saw it could take over."""
        self._valid_until = sent + self.ttl - lease_margin(self.ttl)

    def _won(self, rev: int, sent: float) -> None:
        self.term = self._rev = rev
        self._written(sent)
        self.leader = self.me
        log.info("elected leader", extra={"fields": {"term": rev, "id": self.me["id"]}})

    async def try_acquire(self) -> bool:
        """One step of a standby: take the lease if it is free or its holder stopped renewing."""
        try:
            entry = await self._kv.get(self._key)
        except KeyNotFoundError:
            self.leader, self._looked = None, self._clock()
            if not self._ready():
                return False
            sent = self._clock()
            try:
                self._won(await self._kv.create(self._key, self._value), sent)
                return True
            except KeyWrongLastSequenceError:
                return False  # another candidate was first
        sent = self._looked = self._clock()  # after the answer: the holder wrote this revision before now
        holder = lease_holder(entry.value)
        lapsed = self._lapsed(entry.revision, holder, sent)
        self.leader = None if lapsed else holder
        if not lapsed or not self._ready():
            return False
        try:
            self._won(await self._kv.update(self._key, self._value, last=entry.revision), sent)
            log.warning("took over from a leader that stopped renewing", extra={"fields": {"from": holder}})
            return True
        except KeyWrongLastSequenceError:
            return False  # renewed at the last moment, or another standby won

    async def campaign(self, poll_s: float | None = None) -> None:
        """Until this process is elected (at once if it already is)."""
        poll = poll_s if poll_s is not None else min(0.1, self.ttl / 10)
        while not self.term and not await self.campaign_once():
            await anyio.sleep(poll)

    async def campaign_once(self) -> bool:
        try:
            return await self.try_acquire()
        except Exception as exc:  # noqa: BLE001 - NATS away: try again at the next poll
            log.warning("lease poll failed", extra={"fields": {"error": repr(exc)}})
            return False

    async def observe(self) -> None:
        """A reader's look at the lease, which it never takes: who leads (None: nobody now,
        or a holder that stopped renewing, judged as a standby judges it)."""
        try:
            entry = await self._kv.get(self._key)
        except KeyNotFoundError:
            self.leader, self._looked = None, self._clock()
            return
        except Exception as exc:  # noqa: BLE001 - NATS away: look again at the next poll
            log.info("lease read failed", extra={"fields": {"error": repr(exc)}})
            return
        holder = lease_holder(entry.value)
        self._looked = self._clock()
        self.leader = None if self._lapsed(entry.revision, holder, self._looked) else holder

    def sees_leader(self) -> bool:
        """Whether another process leads, as this one (not elected) last saw the lease, within
        twice its TTL (a process that cannot read the lease for longer sees no leader)."""
        return self.term == 0 and self.leader is not None and self._clock() - self._looked <= 2 * self.ttl

    def _lapsed(self, revision: int, holder: dict[str, Any], now: float) -> bool:
        """Whether the lease's holder stopped renewing: this process has seen `revision`
        unchanged for the holder's TTL (a new revision starts the count again)."""
        seen, seen_at = self._seen
        if revision != seen:
            self._seen = (revision, now)
            return False
        return now - seen_at >= holder_ttl(holder, self.ttl)

    async def renew(self) -> bool:
        """One renewal; False once another process holds the lease (then `lost`)."""
        sent = self._clock()
        try:
            self._rev = await self._kv.update(self._key, self._value, last=self._rev)
        except KeyWrongLastSequenceError:
            if await self._ours_after_all():
                return True
            self.lost = True
            log.warning("lease lost: another core is the leader", extra={"fields": {"term": self.term}})
            return False
        except Exception as exc:  # noqa: BLE001 - NATS away: the lease lapses, publishing stops
            log.warning("lease renewal failed", extra={"fields": {"error": repr(exc)}})
            return True
        self._written(sent)
        return True

    async def _ours(self) -> Any:
        """The key's entry if it holds this process's value (a write whose answer was lost
        may have landed since this process last knew its revision), else None."""
        try:
            entry = await self._kv.get(self._key)
        except Exception:  # noqa: BLE001 - then it is not known to be ours
            return None
        return entry if entry.value == self._value else None

    async def _ours_after_all(self) -> bool:
        """A renewal whose answer was lost still landed: take its revision (the lease's
        validity waits for the next renewal)."""
        entry = await self._ours()
        if entry is not None:
            self._rev = entry.revision
        return entry is not None

    async def hold(self, renewed: Callable[[], Any] | None = None) -> None:
        """Renew every ttl / 4 until the lease is lost. `renewed()` after each renewal."""
        while not self.lost and await self.renew():
            if renewed is not None:
                await renewed()
            await anyio.sleep(self.ttl / 4)

    def deposed(self, by_term: int) -> None:
        """An append found a newer leader's entry: stop acting at once."""
        self.lost = True
        log.warning("deposed: a newer leader appended to the log", extra={"fields": {
            "term": self.term, "newer": by_term}})

    async def release(self) -> None:
        """A clean stop: free the lease for a standby at once (only if still ours)."""
        if not self.term or self.lost:
            return
        self.lost = True  # from here this process publishes and appends nothing
        entry = await self._ours()
        try:
            if entry is not None:
                await self._kv.delete(self._key, last=entry.revision)
        except Exception as exc:  # noqa: BLE001 - it expires anyway
            log.info("lease not released", extra={"fields": {"error": repr(exc)}})

    def view(self) -> dict[str, Any]:
        """For `health` and the metrics: this process's role and the leader it knows."""
        return {"role": self.role, "leader": self.leader, "term": self.term}


def lease_holder(value: bytes | None) -> dict[str, Any]:
    """The holder a lease's value names (empty when it does not parse)."""
    try:
        holder = json.loads(value or b"{}")
    except ValueError:
        holder = {}
    return holder if isinstance(holder, dict) else {}
