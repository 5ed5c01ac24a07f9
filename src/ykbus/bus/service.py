"""The core service: the shell around the sans-IO core.

Theory of operation
-------------------
1. The input stream (YK_IN, `yk.v1.in.>`) is the log. One task reads it in stream order
   with an ordered consumer, starting right after the core's last applied sequence (part of
   the core's state and of its snapshots: the only cursor there is), and applies each entry.
   An entry at or below that sequence is skipped; one above the next expected is a gap,
   which stops the service with an error instead of guessing past it.
2. Each entry's outputs are published to YK_OUT with `Nats-Msg-Id: <in-seq>-<index>` and
   `Yk-In-Seq: <in-seq>`, at once and in order; their acks are checked in a bounded window
   (`publish_window`), and all of them before a snapshot is written (bus/publisher.py). So
   when a snapshot records "applied up to N", the outputs of 1..N are on the stream.
3. A snapshot (msgspec, object store YK_SNAP) is written every `snapshot_every` entries, by a
   forked child while the writer goes on (bus/snapshots.py), and in place at a clean stop. On start the latest one is loaded and only the tail is replayed. Outputs
   the tail would emit again are skipped up to the last message already on YK_OUT, and
   deduplicated by message id beyond that: `kill -9` at any moment duplicates nothing.
   An entry that raises in the core is answered, recorded and skipped (core/guard.py).
4. Time enters the log, never the core: `tick` entries on a timer and `rmstate` entries
   when an RM's heartbeats stop or resume (bus/clock.py).
5. The read API answers `yk.v1.api.<verb>` (and, when configured, HTTP GET /api/<verb>)
   from a projection of the state (bus/readapi.py). The event loop is single-threaded and
   `Core.apply` is synchronous, so a reader never sees a half-applied entry and the
   consumer task stays the only writer.
6. The operator's queue files and the admin API (bus/operator.py) reach the core only as
   `config` entries appended to the log.
7. An RM's output consumer `rm_<rm>` is made here, on its request `yk.v1.attach.<rm>`, so
   that on a secured server (bus/permissions.py) an RM needs no JetStream API but pulling
   from and acking its own consumer.
8. Several core processes may run at once: one leads (bus/leadership.py elects it), the
   others apply the same log as warm standbys. Only the leader publishes outputs, appends
   to the log, stores snapshots, watches the queue files and answers attach and the admin
   API; a standby keeps its outputs until it sees the leader's stored, and publishes what
   is missing when it takes over (bus/leader.py). A process that loses the lease stops, and
   `serve` starts it again as a standby.
9. A reader (`--reader`) applies the same log to answer reads (NATS, HTTP, REST, metrics)
   and is never a candidate; a leader started with `--no-reads` leaves the NATS read API to
   readers, so no request waits for, or holds up, the writer's loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
from nats.js import api

from ykbus.bus import readapi
from ykbus.bus.clock import LogClock
from ykbus.bus.eventfeed import EventFeed
from ykbus.bus.leader import CONSUMER_HEARTBEAT_S, Leadership
from ykbus.bus.leadership import Lease, identity, lease_store
from ykbus.bus.live import LiveCore
from ykbus.bus.local import connect, subscribed
from ykbus.bus.operator import OperatorConfig
from ykbus.bus.publisher import OutputPublisher
from ykbus.bus.settings import ServiceSettings, api_exposure_error
from ykbus.bus.sharding import Arrivals, KindGuard, Sharding, StoppedWaiting, shards_bucket
from ykbus.bus.snapshots import Snapshotter, chunk_bytes, load_latest
from ykbus.bus.streams import (
    answer_attach,
    ensure_streams,
    failed_records,
    input_trimmer,
    made_by_a_core,
    snapshot_store,
    with_retries,
)
from ykbus.bus.subjects import (
    IN_STREAM,
    LEASE_BUCKET,
    Subjects,
    encoding_of,
    js_reply_delivery,
)
from ykbus.collector import CollectorPolicy
from ykbus.core import Core, Entry
from ykbus.core.guard import FAILED_KIND, GuardedCore
from ykbus.core.shards import DEFAULT_SHARD
from ykbus.rest.metrics import Metrics
from ykbus.rest.router import RestState
from ykbus.si import compat

log = logging.getLogger("ykbus.core")


HEALTH_CHECK_EVERY_S = 30  # as YuniKorn: /ws/v1/scheduler/healthcheck answers the last check


async def unless_stopped(stop: anyio.Event, start: Callable[[], Awaitable[None]]) -> bool:
    """`start()`, cancelled if `stop` is set first (False then): a core's start may wait long
    (for JetStream, a snapshot being replaced), and SIGTERM must not wait for it."""
    if stop.is_set():
        return False
    started = False
    async with anyio.create_task_group() as tg:
        async def stop_first() -> None:
            await stop.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(stop_first)
        await start()
        started = True
        tg.cancel_scope.cancel()
    return started


class LogGap(Exception):
    """The input log is missing entries the core has not applied: it will not guess past."""


class Connected:
    """The parts of the service that exist once it is connected to NATS, built in that
    order by `CoreService._prepare` (which is retried as a whole while a cluster elects)."""

    def __init__(self, store: Any, publisher: OutputPublisher, sharding: Sharding, snapshots: Snapshotter) -> None:
        self.store, self.publisher, self.sharding, self.snapshots = store, publisher, sharding, snapshots


class CoreService:
    def __init__(self, settings: ServiceSettings, notify: Callable[[str], None] | None = None) -> None:
        """`notify(text)`, if given, hears what the operator should see at once: the verdict
        on each queue-file reload (`ykbus up` prints it).

        Built in dependency order: here what needs no connection (each part gets the live
        core, the leadership or the REST state it reads, as an argument); once connected,
        `_prepare` builds the rest (`Connected`)."""
        self.settings = settings
        self.subjects = Subjects(settings.prefix, settings.shard)
        self.kinds = KindGuard(self.subjects)  # no core of the other kind (sharded or not) beside this one
        self.notify = notify or (lambda _text: None)
        self.started = anyio.Event()
        self._stop = anyio.Event()
        self.started_ns = time.time_ns()  # YuniKorn's startTime (/ws/v1/clusters)
        self.instance = str(uuid.uuid4())  # this process, as YuniKorn's InstanceUUID (/ws/v1/events)
        self.stats = {"entries": 0, "outputs": 0, "allocations": 0, "failedEntries": 0}
        self.arrivals = Arrivals(self.subjects.shard)
        # the core and the writer's lock, one owner (bus/live.py): a snapshot loaded replaces its guard
        self.live = LiveCore(GuardedCore(self.arrivals.restore(None), self.arrivals.restore), reads_first=settings.reader)
        self.leadership = Leadership(self.subjects, self.live, settings.reader)
        self.operator = OperatorConfig(settings, self.subjects, self.live, self.leadership.append, notify)
        self.clock = LogClock(settings, self.live, self.leadership.append, self.subjects.naming_shard)
        self.rest = RestState(self.live.current, self.started_ns, check_every=HEALTH_CHECK_EVERY_S,
                              at_rest=self.live.at_rest)
        self.metrics = Metrics(self.rest, self._figures)
        self.http = readapi.HttpReadApi(self.read, self.live, settings.api_host, settings.api_port,
                                        settings.api_token, self.rest, self.metrics)
        self.input_lag = 0  # entries on the input stream after the last one read (its delivery says)
        self.deposed = False  # the lease went to another core: `serve` starts this process again as a standby
        self.collector = CollectorPolicy()  # when what lives is frozen (ykbus/collector.py)
        self._input_sub: Any = None
        self._scope: anyio.CancelScope | None = None  # the running service's: an input that fails cancels it
        self._failure: Exception | None = None  # why the writer stopped (run raises it)
        self._log_end_at_start = 0  # the input log's last sequence when this process started
        self._connected: Connected | None = None  # once `_prepare` has built the parts that need NATS

    @property
    def core(self) -> Core:
        """The live core (the guard replaces it when an entry fails: never keep it)."""
        return self.live.core

    @property
    def connected(self) -> Connected:
        if self._connected is None:
            raise RuntimeError("the core service is not connected yet: run() connects it")
        return self._connected

    @property
    def store(self) -> Any:
        return self.connected.store

    @property
    def publisher(self) -> OutputPublisher:
        return self.connected.publisher

    @property
    def snapshots(self) -> Snapshotter:
        return self.connected.snapshots

    def stop(self) -> None:
        self._stop.set()

    @property
    def http_port(self) -> int:
        """The HTTP read API's port once it listens (0 before, or when it is off)."""
        return self.http.port

    @property
    def http_started(self) -> anyio.Event:
        return self.http.started

    # --- run -------------------------------------------------------------------------

    def _figures(self) -> dict[str, Any]:
        """The service's figures for the metrics, now."""
        core = self.core
        return {"entries": self.stats["entries"], "input_lag_entries": self.input_lag,
                "last_applied_sequence": core.last_seq, "allocations_decided": core.allocations_made,
                "snapshot_age_seconds": time.monotonic() - self.snapshots.at,
                "rms": {r.id: r.state.value for r in core.rms.values()},
                "role": self.leadership.role, "leader_present": self.leadership.leader_present(),
                "failed_entries": self.stats["failedEntries"], "nats_connected": self._connected is not None and self.nc.is_connected,
                "rejections": dict(self.publisher.rejections) if self._connected is not None else {}}

    async def run(self) -> None:
        s = self.settings
        exposed = api_exposure_error(s.api_host, s.api_port, s.api_token)
        if exposed:
            raise ValueError(exposed)
        t0 = time.perf_counter()
        phases: dict[str, float] = {}

        def mark(name: str) -> None:
            phases[name] = round(1000 * (time.perf_counter() - t0), 1)

        self.nc = await connect(
            s.nats_url, name="ykbus-core", max_reconnect_attempts=-1, reconnect_time_wait=0.5,
            error_cb=self._nats_error, disconnected_cb=self._nats_disconnected,
            reconnected_cb=self._nats_reconnected, **s.nats_options,
        )
        self.js = self.nc.jetstream(timeout=10)
        mark("connected_ms")
        try:
            if not await unless_stopped(self._stop, lambda: with_retries(lambda: self._prepare(mark), "start-up",
                                                                         s.start_wait_s)):
                log.info("core stopped while it started: nothing was applied")
                return
            mark("outputs_scanned_ms")
            self.publisher.max_payload = self.nc.max_payload
            start = self.core.last_seq + 1
            await self.nc.subscribe(self.subjects.heartbeats, cb=self.clock.on_heartbeat)
            if s.reads:  # one process of the queue group answers each request
                await self.nc.subscribe(self.subjects.apis, queue="ykbus-api", cb=self._on_api)
            await self.leadership.begin()
            self.clock.started()
            # it won the lease at start (even if, on a busy machine, its timing has lapsed since:
            # then it renews it, or loses it, and either ends the wait below), or nobody holds it
            # (its first try may have failed on a busy server; CI saw "no responders")
            lease = self.leadership.lease
            leads_at_start = (lease is not None and not self.leadership.reader
                              and (lease.term > 0 or lease.leader is None))
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                self._input_sub = await self.js.subscribe(  # the writer: nats-py calls _on_input for each entry
                    self.subjects.inputs, stream=IN_STREAM, ordered_consumer=True, cb=self._on_input,
                    idle_heartbeat=CONSUMER_HEARTBEAT_S, config=api.ConsumerConfig(
                        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start))
                tg.start_soon(self.snapshots.run)
                tg.start_soon(self.publisher.watch)  # answers that failed or never came, between entries
                tg.start_soon(self.rest.check_health)
                tg.start_soon(self._lead)
                if s.api_port:
                    await tg.start(self.http.serve)
                if leads_at_start:  # started means answering: the admin API and attaches too
                    with anyio.move_on_after(max(5.0, 3 * s.lease_ttl_s)):  # unless it lost the lease meanwhile
                        await self.leadership.on_duty.wait()
                await subscribed(self.nc)  # started means answering: the read API's too
                mark("ready_ms")
                log.info("core started", extra={"fields": {"resume_from": start, "prefix": s.prefix, "shard": s.shard,
                                                           "role": self.leadership.role, **phases}})
                self.started.set()
                await self._stop.wait()
                await self._stop_input()  # nothing is applied after the final snapshot
                await self.leadership.step_down(self.snapshots.take)
                tg.cancel_scope.cancel()
            if self._failure is not None:
                raise self._failure
            log.info("core stopped", extra={"fields": {"last_seq": self.core.last_seq, "deposed": self.deposed}})
        finally:
            await self._stop_input()
            if self._connected is not None:
                await self.publisher.close()  # acks nobody reads would hold drain() to its timeout
            if self.nc.is_connected:
                await self.nc.drain()

    # --- start-up --------------------------------------------------------------------

    async def _prepare(self, mark: Callable[[str], None]) -> None:
        """Streams and stores, the snapshot, the failure records, the lease and the output
        stream's ids. Each step may be done again (the whole is retried while a NATS cluster
        elects its leaders, or while another core makes the same streams)."""
        s = self.settings
        kv = None
        if s.reader:  # it makes and changes nothing (not even the streams' limits): a core did
            store, kv = await made_by_a_core(self.js)
        else:
            await ensure_streams(self.js, self.subjects, s.limits)
            store = await snapshot_store(self.js, s.limits.replicas)
        mark("streams_ms")
        await load_latest(store, self.subjects.snapshot_object, self._local_snapshot(), self.live, self.arrivals)
        mark("snapshot_ms")
        await self._check_log_start()
        for record in await failed_records(self.js, self.subjects.core_input(FAILED_KIND)):
            self.live.guard.apply_record(record)  # an entry that failed before is not applied again
        if self.live.guard.known_failed:
            log.warning("entries recorded as failed", extra={"fields": {"seqs": sorted(self.live.guard.known_failed)}})
        self.http.events = EventFeed(self.js, self.subjects, self.instance, self.live)
        publisher = OutputPublisher(self.js, self.subjects, s.publish_window, s.publish_retries,
                                    self.stats, self._output_format, self.nc, self.notify)
        lease = self.leadership.lease or Lease(kv or await lease_store(self.js, s.lease_ttl_s, s.limits.replicas),
                                               identity(self.instance, s.lease_ttl_s), s.lease_ttl_s,
                                               ready=self._caught_up, key=self.subjects.lease_key)
        self.leadership.connected(self.js, self.nc, publisher, lease)
        chunk = chunk_bytes(self.nc.max_payload)  # of the objects stored: snapshots, moving RMs' units
        sharding = Sharding(self.subjects, self.live, self.arrivals, store, self.leadership, self._stop, s.reader, chunk)
        snapshots = Snapshotter(s.snapshot_every, self.live, self.leadership.settle, store, self._local_snapshot(),
                                upload=self._stores_snapshots, name=self.subjects.snapshot_object, chunk=chunk,
                                stored=input_trimmer(self.js, s.limits.in_keep) if s.limits.in_keep >= 0 else None)
        self._connected = Connected(store, publisher, sharding, snapshots)
        if s.reader:
            await lease.observe()
            return  # it publishes nothing: no need to know what YK_OUT holds
        if not lease.term:
            await lease.campaign_once()  # a lone core caught up leads from its first entry (else once caught up)
        await self.publisher.scan()

    def _stores_snapshots(self) -> bool:
        """Whether this snapshot is stored: by the leader, once the units of RMs that left
        are stored (bus/sharding.py)."""
        return self.leadership.stores_snapshots() and not self.connected.sharding.pending

    def _local_snapshot(self) -> str | None:
        d = self.settings.snapshot_dir
        return os.path.join(d, f"{self.subjects.snapshot_object}.snap") if d else None

    async def _check_log_start(self) -> None:
        await self.kinds.at_start(self.js)  # no core of the other kind (sharded or not) leads beside this one
        info = await self.js.stream_info(IN_STREAM)
        first, messages = info.state.first_seq, info.state.messages
        self._log_end_at_start = info.state.last_seq
        if not messages and info.state.last_seq > self.core.last_seq:  # all of it purged or aged out
            raise LogGap(f"the input log is empty up to seq {info.state.last_seq} but the core has applied only "
                         f"up to {self.core.last_seq}: entries {self.core.last_seq + 1}..{info.state.last_seq} are gone")
        if messages and self.core.last_seq + 1 < first:
            raise LogGap(f"the input log starts at seq {first} but the core has applied only up to "
                         f"{self.core.last_seq}: entries {self.core.last_seq + 1}..{first - 1} are gone")

    def _caught_up(self) -> bool:
        """Whether this process has applied the log as far as it reached at the start: only
        then may it take the lease (a warm standby always has; a process still replaying the
        tail would stop scheduling until it is through)."""
        return self.core.last_seq >= self._log_end_at_start

    # --- the writer ------------------------------------------------------------------

    async def _on_input(self, msg: Any) -> None:
        """Apply one input in stream order (nats-py calls this for each, from one task, with no
        pause between those delivered: a burst's outputs leave in one flush) and publish its
        outputs. The writer applies it through the guard; a reader with turns for dry runs in
        it (`LiveCore.apply`). An error (a log gap, an append refused) stops the service."""
        if self._failure is not None or self._stop.is_set():
            return  # stopping: what is not applied now, the next start applies
        try:
            seq, ts, self.input_lag = js_reply_delivery(msg.reply)  # (lag: the entries after it on the stream)
            rm, kind = self.subjects.parse(msg.subject)
            entry = Entry(seq=seq, ts=ts, rm=rm, kind=kind, msg=msg.data, encoding=encoding_of(msg.headers))
            await self._turn_of(msg, entry)
            live = self.live
            async with live.lock:
                last = self.core.last_seq
                if seq <= last:
                    return
                if seq != last + 1:
                    raise LogGap(f"input seq {seq} follows {last}: entries are missing")
                if not rm and self.subjects.own_core_entry(msg.subject):
                    self.leadership.saw_core_entry(seq)
                t0 = time.perf_counter()
                outputs = await live.apply(entry) if live.reads_first else live.guard.apply(entry)
                t1 = time.perf_counter()
                moved = bool(self.core.moved_out)
                self.metrics.applied(t1 - t0 - live.paused_s)  # a reader's turns in it are not its time
                if live.guard.last_failure is not None:
                    await self._record_failure(*live.guard.last_failure)
                if self.core.backlog:  # the pass stopped at its per-entry budget: go on at once
                    await self.leadership.append("tick", self.subjects.naming_shard)
                self.clock.applied(entry)
                if self.leadership.reader:  # it publishes nothing: its outputs are counted, not encoded
                    self.publisher.count(outputs)
                else:
                    parts = self.publisher.encode(seq, outputs)
                    if self.leadership.publishing():  # after what it kept back while its lease had lapsed
                        kept = self.leadership.take_kept()
                        await self.publisher.send(kept + parts if kept else parts)
                        self.metrics.publish.observe(time.perf_counter() - t1)
                    else:  # a standby keeps them
                        self.leadership.keep(seq, parts)
                if moved or self.connected.sharding.pending:  # RMs that left: their state for their new shard,
                    await self.connected.sharding.after()  # after this entry's outputs (or those kept back)
                self.stats["entries"] += 1
                self.collector.applied(self.stats["allocations"], self.core.dropped_partitions)
                self.snapshots.applied()  # off the writer's path: bus/snapshots.py
        except StoppedWaiting:
            return  # its entry is not applied: the next start applies it (and nothing after it now)
        except Exception as exc:  # noqa: BLE001 - the service stops with it (run raises it)
            self._failure = exc
            if self._scope is not None:
                self._scope.cancel()

    async def _turn_of(self, msg: Any, entry: Entry) -> None:
        """What an entry waits for outside the writer's lock: a core of the other kind beside it
        to stop; an RM moving here, its state; a standby far ahead, room; the reads before it."""
        await self.kinds.at_entry(msg.subject, msg.headers)
        if self.connected.sharding.shard is not None:
            await self.connected.sharding.before(entry)
        kept = self.leadership.unpublished
        if kept.full:
            log.warning("standby waits: its leader is far behind", extra={"fields": {"kept": len(kept)}})
            await kept.room()
        await self.live.turn_for_reads()

    async def _stop_input(self) -> None:
        """No more entries: drop what the input subscription holds rather than let drain()
        wait (up to its 30 s timeout) for entries that arrived at the stop."""
        sub, self._input_sub = self._input_sub, None
        if sub is None:
            return
        try:
            async with self.live.lock:  # not in the middle of an entry
                await sub.unsubscribe()
        except Exception as exc:  # noqa: BLE001 - closing anyway
            log.debug("input unsubscribe failed", extra={"fields": {"error": repr(exc)}})

    async def _record_failure(self, entry: Entry, exc: BaseException) -> None:
        """An entry raised in the core (a bug): logged, counted, recorded in the log (core/guard.py)."""
        self.stats["failedEntries"] += 1
        log.error("entry failed in the core: a bug; it was not applied and the core goes on",
                  exc_info=exc, extra={"fields": {"seq": entry.seq, "rm": entry.rm, "kind": entry.kind}})
        error = self.live.guard.known_failed[entry.seq]
        await self.leadership.append(FAILED_KIND, {"seq": entry.seq, "error": error, **self.subjects.naming_shard})

    def _output_format(self, rm_id: str) -> tuple[str, str]:
        """How outputs to `rm_id` are encoded: its registered encoding and int64 mode."""
        rm = self.core.rms.get(rm_id)
        return ("json", "number") if rm is None else (rm.encoding, compat.int64_mode(rm.extra_config))

    # --- the leader's duties (only it appends to the log, fenced: bus/leader.py) ---------

    async def _lead(self) -> None:
        """Campaign; once elected, do the leader's duties until the lease is lost."""
        await self.leadership.lead(self._leader_duties)
        if not self._stop.is_set():
            self.deposed = True
            self.stop()

    async def _leader_duties(self, tg: anyio.abc.TaskGroup) -> list[Any]:
        """Ticks, RM liveness, the queue files, the admin API and RM attaches: the leader's;
        and a snapshot stored soon if this process has stored none for a while."""
        s = self.settings
        self.snapshots.leading()
        tg.start_soon(self.clock.ticker)
        tg.start_soon(self.clock.monitor_rms)
        if (s.queue_file or s.queues_dir) and s.shard in (None, DEFAULT_SHARD):  # one process appends them
            tg.start_soon(self.operator.watch)
        elif s.queue_file or s.queues_dir:
            log.warning("queue files are read by the default shard's leader only: --queues here changes nothing")
        if s.shard is not None:
            async with self.live.lock:  # units of RMs that left while this process was a standby
                await self.connected.sharding.store_pending()
            tg.start_soon(self.connected.sharding.follow, self.js, await shards_bucket(self.js, s.limits.replicas),
                          await self.js.key_value(LEASE_BUCKET))
        # one leader answers each request, when several shards lead
        subs = [await self.nc.subscribe(self.subjects.admins, queue="ykbus-leader", cb=self.operator.on_admin),
                await self.nc.subscribe(self.subjects.attaches, queue="ykbus-leader",
                                        cb=answer_attach(self.js, self.subjects))]
        await subscribed(self.nc)  # a request sent after this finds a responder
        return subs

    # --- read API ----------------------------------------------------------------------

    async def _on_api(self, msg: Any) -> None:
        verb = msg.subject.rsplit(".", 1)[-1]
        try:
            try:
                request = json.loads(msg.data) if msg.data.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"the request body is not JSON ({exc}): send a JSON object, "
                                 f"or nothing for no filter") from None
            if not isinstance(request, dict):
                raise ValueError("the request body must be a JSON object")
            if verb == readapi.WOULD_FIT:  # a dry run: also in a reader's turn in the middle of an entry
                body = await readapi.would_fit_live(self.live, request)
            else:
                await self.live.at_rest()  # any other read: between entries
                body = self.read(verb, request)
        except RecursionError:
            body = {"error": "the request is nested too deep to read"}
        except (ValueError, KeyError) as exc:
            body = {"error": str(exc)}
        if msg.reply:
            data = json.dumps(body, default=str).encode()
            room = self.nc.max_payload - 4096  # the reply's headers aside
            if len(data) > room:  # NATS would refuse it, and the asker would only time out
                data = json.dumps({"error": f"the answer is {len(data)} bytes, over what the NATS server takes in one "
                                            f"message ({room} of its max_payload {self.nc.max_payload}): ask for less "
                                            f"(`rm`, `partition`; of applications `queue`, `state`, `brief`, or one "
                                            f"`app`) or read it over HTTP (GET /api/{verb})"}).encode()
            await msg.respond(data)

    def read(self, verb: str, request: dict[str, Any]) -> dict[str, Any]:
        """The read API: a projection of the state (never live objects); see bus/readapi.py."""
        body = readapi.read(self.core, self.stats, verb, request)
        if verb == "health":
            body.update(self.leadership.view())  # (its `status` "no leader" when none leads)
            if self.settings.shard is not None:
                body["shard"] = self.settings.shard
        return body

    async def _nats_error(self, exc: Exception) -> None:
        log.warning("nats error", extra={"fields": {"error": repr(exc)}})

    async def _nats_disconnected(self) -> None:
        self.clock.away()  # (an outage is no RM's silence)
        if not self._stop.is_set():
            log.warning("disconnected from nats; reconnecting")

    async def _nats_reconnected(self) -> None:
        self.clock.back()
        log.info("reconnected to nats")


async def serve(settings: ServiceSettings) -> None:
    """Run the core service until SIGINT or SIGTERM, then stop cleanly (final snapshot)."""
    import signal

    stopping = False
    service = CoreService(settings)
    async with anyio.create_task_group() as tg:
        async def watch_signals() -> None:
            nonlocal stopping
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    stopping = True
                    service.stop()
                    return

        tg.start_soon(watch_signals)
        await service.run()
        while service.deposed and not stopping:  # another core leads: start again, as a standby
            log.warning("starting again as a standby")
            service = CoreService(settings)
            await service.run()
        tg.cancel_scope.cancel()


def asyncio_loop_policy() -> None:
    """uvloop when available (it is a dependency on Linux and macOS)."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
