"""This process's part in a sharded deployment (`ykbus core --shard NAME`, docs/sharding.md).

The rules of who applies what are the core's (core/shards.py); this module does the IO:
- the core it restores is the shard, and shares the units of RMs that arrive (`restore`);
- before an assign entry that moves an RM here, it fetches the RM's unit, which the shard the
  RM leaves stores when it applies the same entry (object `moved-<rm>-<seq>` in YK_SNAP);
  the writer waits for it, as it must: the RM's next entries need that state;
- after an entry that moved RMs away, its leader stores their units, once every output it
  sent before is stored (an RM reads its last outputs from the old shard before its first
  from the new one); a standby keeps them, and stores them when it takes over;
- its leader turns the operator's assignments (KV bucket YK_SHARDS: key RM, value shard;
  `ykbus shards assign`) of RMs it owns into assign entries, fenced like every core entry,
  and only to a shard that has a leader (a typo must not take an RM where nobody runs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio
from nats.errors import Error as NatsError
from nats.js import api
from nats.js.errors import KeyNotFoundError, NotFoundError, ObjectNotFoundError

from ykbus.bus.leadership import DEFAULT_LEASE_TTL_S, holder_ttl, lease_clock, lease_holder, lease_term
from ykbus.bus.live import LiveCore
from ykbus.bus.snapshots import CHUNK_BYTES, store_object
from ykbus.bus.streams import NOT_ANSWERING, OtherDeployment
from ykbus.bus.subjects import CORE_TOKEN, LEASE_BUCKET, LEASE_KEY, SHARDS_BUCKET, Subjects, lease_key
from ykbus.core import Core
from ykbus.core.entries import Entry
from ykbus.core.shards import ASSIGN, DEFAULT_SHARD, RM_NAME, SHARD_NAME, Arriving, decode_assign, owner_of
from ykbus.core.snapshot import SnapshotError, dump_moved, load_moved
from ykbus.log.replay import restorer
from ykbus.yamlload import load_yaml

log = logging.getLogger("ykbus.core")

FOLLOW_EVERY_S = 0.5  # how often a shard's leader reads the assignments
FETCH_EVERY_S = 0.1  # how often a shard looks for the unit of an RM moving to it
FETCH_TIMEOUT_S = 10.0  # a first read of it (one racing a write of the same object can wait forever), doubled to 120 s
SAY_EVERY_S = 5.0


class StoppedWaiting(Exception):
    """The service stopped while its writer waited for the unit of an RM moving to it."""


async def shards_bucket(js: Any, replicas: int = 1) -> Any:
    try:
        return await js.key_value(SHARDS_BUCKET)
    except NotFoundError:
        return await js.create_key_value(api.KeyValueConfig(bucket=SHARDS_BUCKET, history=1, replicas=replicas))


async def kv_keys(js: Any, bucket: str) -> list[str]:
    """The keys of a key-value bucket, sorted (a deleted key's marker included: a get says),
    read from the subjects of its stream: no consumer. (nats-py's `kv.keys()` makes an ordered
    consumer the server keeps for 5 minutes after it is done: a leader reading every 0.5 s
    reached the stream's 1,000 consumers in about 4 minutes, and no assignment could be read
    after.)"""
    head = f"$KV.{bucket}."
    info = await js.stream_info(f"KV_{bucket}", subjects_filter=head + ">")
    return sorted(subject[len(head):] for subject in info.state.subjects or {})


async def assignments(js: Any, kv: Any) -> dict[str, str]:
    """The operator's assignments (rm -> shard), the well-formed ones: the keys (`kv_keys`),
    each value by a direct get."""
    found = {}
    for rm in await kv_keys(js, SHARDS_BUCKET):
        if not RM_NAME.match(rm):
            continue
        try:
            entry = await kv.get(rm)
        except KeyNotFoundError:  # deleted or purged
            continue
        shard = (entry.value or b"").decode(errors="replace")
        if SHARD_NAME.match(shard):
            found[rm] = shard
    return found


class Arrivals:
    """The units of RMs moving to this shard, by the entry that moves each (Core.arriving,
    shared with every core restored), and how a core of this shard is made: what the guard
    needs before the service connects."""

    def __init__(self, shard: str | None) -> None:
        self.shard = shard
        self.units: dict[int, Callable[[], Arriving]] = {}
        self.restore = restorer(None, shard, self.units)

    def adopt(self, core: Core) -> Core:
        """A core loaded from this process's snapshot, made this shard's."""
        if core.shard != self.shard:
            raise SnapshotError(f"the snapshot is of core shard {core.shard!r}, this process is {self.shard!r}")
        core.arriving = self.units
        return core


class Leader(Protocol):
    """What sharding needs of this process's leadership (bus/leader.py)."""

    def publishing(self) -> bool: ...

    async def settle(self) -> None: ...

    async def append(self, kind: str, body: dict[str, Any]) -> bool: ...


class Sharding:
    def __init__(self, subjects: Subjects, live: LiveCore, arrivals: Arrivals, store: Any, leader: Leader,
                 stopping: anyio.Event, reader: bool = False, chunk: int = CHUNK_BYTES) -> None:
        """`store`: the snapshot object store (objects in messages of `chunk` bytes);
        `leader.publishing()`: this process publishes now; `leader.settle()`: until every output
        it sent is stored; `stopping`: set when the service stops; `live.lock`: held by the
        service while it applies an entry."""
        self.shard = subjects.shard
        self._chunk = chunk
        self._subjects = subjects
        self._live, self._store, self._leader, self._reader = live, store, leader, reader
        self._stopping = stopping
        self._arrivals = arrivals
        self.pending: dict[str, bytes] = {}  # units of RMs that left, not stored yet (object name -> bytes)

    async def before(self, entry: Entry) -> None:
        """Before `entry` is applied: if it moves an RM here, fetch the RM's unit."""
        if self.shard is None or entry.kind != ASSIGN or entry.rm:
            return
        try:
            body = decode_assign(entry)
        except ValueError:
            return  # the core says why
        core = self._live.core
        if body.shard != self.shard or owner_of(core.owners, body.rm) == self.shard or body.rm not in core.registered:
            return
        data = await self._fetch(body.rm, entry.seq, owner_of(core.owners, body.rm))
        self._arrivals.units[entry.seq] = lambda: load_moved(data, load_yaml)

    async def _fetch(self, rm: str, seq: int, source: str) -> bytes:
        name, t0, said, limit = self._subjects.moved_object(rm, seq), time.monotonic(), 0.0, FETCH_TIMEOUT_S
        while True:
            if self._stopping.is_set():
                raise StoppedWaiting(f"stopped while waiting for the state of {rm!r} from shard {source!r}")
            with anyio.move_on_after(limit) as scope:
                try:
                    return (await self._store.get(name)).data
                except (NotFoundError, ObjectNotFoundError):
                    pass
                except (NatsError, ValueError) as exc:  # a timeout, a digest that does not match yet: again
                    log.debug("reading a moving RM's state failed", extra={"fields": {"error": repr(exc)}})
            if scope.cancelled_caught:  # a big unit takes long to read: give the next read longer
                limit = min(2 * limit, 120.0)
            waited = time.monotonic() - t0
            if waited - said >= SAY_EVERY_S:
                said = waited
                log.warning("waiting for the state of a moving RM from the shard it leaves", extra={"fields": {
                    "rm": rm, "entry": seq, "from": source, "waited_s": round(waited, 1)}})
            await anyio.sleep(FETCH_EVERY_S)

    async def after(self) -> None:
        """After an entry (in the writer): the units of RMs that left this shard, stored for
        their new one by the leader; a standby keeps them."""
        core = self._live.core
        if self._reader:
            return
        for moved in core.moved_out:
            self.pending[self._subjects.moved_object(moved.rm, moved.seq)] = dump_moved(moved)
            log.info("an RM left this shard", extra={"fields": {"rm": moved.rm, "to": moved.to, "entry": moved.seq}})
        await self.store_pending()

    async def store_pending(self) -> None:
        """The leader (in the writer): once every output it sent is stored, the units kept;
        not while outputs are kept back (a lease that lapsed in the middle of an entry's): the
        RM's new shard would start before they are out. Tried again after each entry."""
        if not self.pending or not self._leader.stores_snapshots():  # (publishing, nothing kept back)
            return
        await self._leader.settle()
        for name, data in list(self.pending.items()):
            try:
                await self._store.get_info(name)
            except (NotFoundError, ObjectNotFoundError):
                await store_object(self._store, name, data, self._chunk)
            del self.pending[name]

    async def follow(self, js: Any, kv: Any, leases: Any) -> None:
        """The leader's duty: each assignment of an RM this shard owns to another shard that
        has a leader becomes an assign entry (once; again if it is not applied as asked)."""
        asked: dict[str, str] = {}
        told: set[tuple[str, str]] = set()
        leaders = ShardLeaders(leases)
        while True:
            try:
                await self._follow_once(js, kv, leaders, asked, told)
            except (NatsError, *NOT_ANSWERING) as exc:  # NATS away, or electing: the next look tries again
                log.warning("could not read the shards' assignments", extra={"fields": {"error": repr(exc)}})
            await anyio.sleep(FOLLOW_EVERY_S)

    async def _follow_once(self, js: Any, kv: Any, leaders: ShardLeaders, asked: dict[str, str],
                           told: set[tuple[str, str]]) -> None:
        if self.pending:  # units kept while the lease had lapsed: stored once it holds again
            async with self._live.lock:
                await self.store_pending()
        owners = self._live.core.owners
        for rm, shard in (await assignments(js, kv)).items():
            if owner_of(owners, rm) != self.shard or shard == self.shard or asked.get(rm) == shard:
                continue
            if not await leaders.judge(shard):  # (a lease first seen: watched for a renewal, at most its TTL)
                if (rm, shard) not in told:
                    told.add((rm, shard))
                    log.warning("an RM is assigned to a shard with no leader: it moves once one runs",
                                extra={"fields": {"rm": rm, "shard": shard}})
                continue
            if await self._leader.append(ASSIGN, {"rm": rm, "shard": shard}):
                asked[rm] = shard
        for rm in [rm for rm, shard in asked.items() if owner_of(owners, rm) == shard]:
            del asked[rm]  # applied


class ShardLeaders:
    """Which shards have a leader now, judged as a standby judges a lease (bus/leadership.py):
    by its key `leader-<shard>` renewed. A key alone is no leader: a killed process leaves
    its key until the bucket's TTL (10 minutes). A shard leads once this watch has seen its
    key's revision change; it leads no more once the revision stays for its holder's TTL."""

    def __init__(self, leases: Any, clock: Callable[[], float] = lease_clock) -> None:
        self._leases = leases
        self._clock = clock
        self._seen: dict[str | None, tuple[int, float, bool]] = {}  # shard -> (revision, first seen, a renewal seen)

    async def leads(self, shard: str | None) -> bool | None:
        """True: it leads; False: no key, or a holder that stopped renewing; None: not known
        yet (a key seen for the first time: look again within its holder's TTL)."""
        try:
            entry = await self._leases.get(lease_key(shard))
        except KeyNotFoundError:
            self._seen.pop(shard, None)
            return False
        if not entry.value:
            return False
        now = self._clock()
        seen = self._seen.get(shard)
        if seen is None or seen[0] != entry.revision:
            self._seen[shard] = (entry.revision or 0, now, seen is not None)
            return True if seen is not None else None
        _rev, since, renewed = seen
        if now - since >= holder_ttl(lease_holder(entry.value), DEFAULT_LEASE_TTL_S):
            return False
        return True if renewed else None

    async def judge(self, shard: str | None) -> bool:
        """Whether `shard` leads, looked at until known (about its holder's TTL at most)."""
        while (known := await self.leads(shard)) is None:
            await anyio.sleep(0.05)
        return known


async def operate(url: str, rm: str | None = None, shard: str | None = None,
                  options: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str | None, bool]]:
    """`ykbus shards`: with `rm` and `shard`, assign the RM to the shard (the leader of the
    shard that owns it moves it through the log); the assignments, after, and whether each
    shard they name (`default` and `shard` too) has a leader now, judged side by side, and
    an unsharded core (None)."""
    from ykbus.bus.local import connect

    nc = await connect(url, allow_reconnect=False, **(options or {}))
    try:
        js = nc.jetstream(timeout=10)
        kv = await shards_bucket(js)
        if rm is not None and shard is not None:
            await kv.put(rm, shard.encode())
        found = await assignments(js, kv)
        names: list[str | None] = [None, *sorted({DEFAULT_SHARD, *found.values(), *([shard] if shard else [])})]
        leading = dict.fromkeys(names, False)
        try:
            leaders = ShardLeaders(await js.key_value(LEASE_BUCKET))
        except NotFoundError:
            return found, leading  # no core has run yet
        async with anyio.create_task_group() as tg:
            async def judge(name: str | None) -> None:
                leading[name] = await leaders.judge(name)
            for name in names:
                tg.start_soon(judge, name)
        return found, leading
    finally:
        await nc.close()


class OtherKindLeads(OtherDeployment):
    """A core of the other kind leads on the same streams: core shards beside an unsharded
    core (docs/sharding.md). Both would apply every RM's entries and publish their decisions
    (each allocation twice, under two ids)."""


class KindGuard:
    """Keeps a core from running beside one of the other kind (an unsharded core beside core
    shards, or a shard beside an unsharded core), judged by their leases as a standby judges
    one: a lease seen renewed, not an old entry (a shard started once by mistake, long
    stopped, stops nothing). At the start (`at_start`), and at a tick of the other kind's
    leader in the log (`at_entry`: a tick carries its leader's term in `Yk-Lease`)."""

    def __init__(self, subjects: Subjects) -> None:
        self._subjects = subjects
        self._js: Any = None
        self._leaders: ShardLeaders | None = None
        # (lease key, term) of the other kind's leaders judged not leading at one of their ticks:
        # each term's ticks of the past, replayed, are judged once; a new term, again
        self._cleared: set[tuple[str, int]] = set()

    async def _watch(self) -> ShardLeaders | None:
        if self._leaders is None:
            try:
                self._leaders = ShardLeaders(await self._js.key_value(LEASE_BUCKET))
            except NotFoundError:
                return None  # no core has run on this server yet
        return self._leaders

    async def at_start(self, js: Any) -> None:
        self._js = js
        if (leaders := await self._watch()) is None:
            return
        for key in await kv_keys(js, LEASE_BUCKET):
            shard = key[len(LEASE_KEY) + 1:] if key.startswith(LEASE_KEY + "-") else None
            if (shard is None) == (self._subjects.shard is not None) and await leaders.judge(shard):
                raise self._error(shard)

    async def at_entry(self, subject: str, headers: dict[str, str] | None) -> None:
        shard = self._other_kinds_tick(subject)
        term = lease_term(headers)
        if shard is False or not term or self._js is None or (lease_key(shard), term) in self._cleared:
            return
        leaders = await self._watch()
        if leaders is not None and await leaders.judge(shard):
            raise self._error(shard)
        self._cleared.add((lease_key(shard), term))

    def _other_kinds_tick(self, subject: str) -> str | None | bool:
        """The shard whose leader appended this tick (None: an unsharded core's), if that is
        the other kind's; False if not."""
        head = f"{self._subjects.prefix}.in.{CORE_TOKEN}.tick"
        if self._subjects.shard is None:
            rest = subject[len(head) + 1:] if subject.startswith(head + ".") else ""
            return rest if rest and "." not in rest else False
        return None if subject == head else False

    def _error(self, shard: str | None) -> OtherKindLeads:
        if shard is not None:
            return OtherKindLeads(f"core shard {shard!r} leads on these streams (its lease {lease_key(shard)} is renewed): "
                                  "they are served by sharded cores; run `ykbus core --shard NAME` (docs/sharding.md), "
                                  "not an unsharded core beside them")
        return OtherKindLeads(f"an unsharded core leads on these streams (its lease {LEASE_KEY} is renewed): core "
                              "shards beside it would publish every decision twice; stop it, or run the shards on "
                              "another NATS server (docs/sharding.md)")
