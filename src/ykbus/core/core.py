"""The core: folds log entries into decisions.

`Core.apply(entry) -> list[Output]` is the whole interface. It is deterministic: no clock
(now is `entry.ts`), no randomness, ids from sequence numbers, and every iteration over
insertion-ordered dicts or sorted lists, never sets.

`Core` holds two components and owns the entry loop: the registry of RMs and their
configurations (`RMRegistry`, core/registry.py) and the intake of an RM's items
(`Intake`, core/intake.py, which finds its RMs in the registry). An entry's body is decoded
into one of the request types (`codec.Decoded`) and `apply` hands it, by a `match` on
its type, to the one method that applies it; a due timer is handled by a `match` on its
kind (`_fire`). The log's clock, the sharding of RMs (core/shards.py) and the history are
the core's own.

Rules:
1. An entry is decoded here (msgspec, strict, see `ykbus.si.codec`). A body that does not
   decode becomes an `EventRecord` naming the path and the reason; a bad item becomes the
   matching rejection; the rest of the message still applies.
2. A rejected input changes nothing. Every check that can reject runs before the first
   change an item makes.
3. Timers (completing, terminated, execution timeouts) fire at the start of the first entry
   whose `ts` reaches their deadline, in deadline order.
4. A scheduling pass runs after every entry, on the partitions that have active work.
5. Partitions belong to one RM; re-registering an RM wipes everything it owned.
6. A broken invariant raises (a bug). Nothing here catches it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from ykbus import limits
from ykbus.core import effects, fold, shards
from ykbus.core.config import (
    SchedulerConfig,
)
from ykbus.core.deadlines import due
from ykbus.core.entries import ENTRY_KINDS, Entry, Output
from ykbus.core.events import Noted, Registered
from ykbus.core.intake import Intake
from ykbus.core.lifecycle import (
    AppEvent,
    AppState,
)
from ykbus.core.partition import Partition
from ykbus.core.projection import EVERYTHING, SECTIONS, Where, project
from ykbus.core.registry import ResourceManager, RMRegistry, YamlLoader
from ykbus.core.shards import Arriving, MovedOut
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
from ykbus.core.timers import (
    AllocationTimeoutTimer,
    AppTimeoutTimer,
    CompletingTimer,
    ExpireTimer,
    PlaceholderTimer,
    PreemptionTimer,
    QuotaTimer,
    ReservationTimer,
    Timer,
)
from ykbus.si import codec
from ykbus.si import messages as m
from ykbus.si.codec import DecodedAllocationRequest, DecodedApplicationRequest, DecodedNodeRequest
from ykbus.si.messages import (
    RegisterResourceManagerRequest,
    RMStateChange,
    UnregisterRequest,
    UpdateConfigurationRequest,
)

SERVICE_KINDS: Final = ("tick", "rmstate", "failed", shards.ASSIGN)  # kinds only the core service appends (rm "")
TIMEOUT: Final = m.TerminationType.TIMEOUT  # read once: compiled code looks up modules it did not compile at every use


class OutOfOrder(Exception):
    """An entry whose seq is not above the last applied one: the caller's bug, not input."""


class Core:
    def __init__(self, load_yaml: YamlLoader | None = None,
                 queues_override: SchedulerConfig | None = None, shard: str | None = None,
                 override_group: str | None = None) -> None:
        """`load_yaml(text)` turns configuration text into plain objects (ValueError if it
        cannot); the core itself imports no YAML library. `queues_override` replaces the
        configuration of every registration and update (replay's what-if), or only those of
        the RMs of policy group `override_group` if given (`ykbus whatif`). `shard`: the core
        shard this core is, which applies only the entries of the RMs it owns (core/shards.py);
        None: not sharded, it applies every entry."""
        self.registry = RMRegistry(load_yaml, queues_override, override_group)  # the RMs and their configurations
        self.intake = Intake(self.registry)  # an RM's applications, nodes, asks and releases
        self.shard = shard
        self.owners: dict[str, str] = {}  # rm -> its shard, from the log's assign entries (in snapshots)
        self.registered: dict[str, None] = {}  # every RM that ever sent a register entry, whoever owns it (in snapshots)
        self.moved_out: list[MovedOut] = []  # RMs that left this shard at the last entry: its service stores them
        # RMs that come to this shard, by assign entry: each reads the unit its old shard stored
        # (a function: a rebuild by the guard applies the entry again). Its service fills it,
        # and gives the same dict to a core restored in this one's place.
        self.arriving: dict[int, Callable[[], Arriving]] = {}
        self.last_seq = 0
        self.now = 0
        self.allocations_made = 0  # allocations decided since the log began (in snapshots: survives restarts)
        # YuniKorn's /ws/v1/history, from the log: (log time, running applications, allocations
        # held) after the first entry of each minute of log time, the last HISTORY_KEPT (in snapshots)
        self.history: list[tuple[int, int, int]] = []
        self.backlog = False  # the last pass stopped at the allocation budget (not in snapshots: the next entry recomputes it)

    @property
    def rms(self) -> dict[str, ResourceManager]:
        """The registry's RMs, for readers (the read API, REST, the service's liveness): read only."""
        return self.registry.rms

    @property
    def dropped_partitions(self) -> int:
        """Partitions dropped so far (the registry's count): the service collects once when it changes."""
        return self.registry.dropped_partitions

    @property
    def operator_configs(self) -> dict[str, str]:
        """The operator's queue files in force (the registry's), for the service's watcher: read only."""
        return self.registry.operator_configs

    def load_config(self, text: str) -> SchedulerConfig:
        """A queue configuration checked as this core checks it (`RMRegistry.load_config`):
        the service's queue files are checked before they are appended."""
        return self.registry.load_config(text)

    def apply(self, entry: Entry, decoded: codec.Decoded | None = None,
              between: Callable[[], None] | None = None) -> list[Output]:
        """Apply one log entry: its due timers; its request, decoded and applied by the
        component that owns what it changes (a `match` on its type, the most frequent first:
        compiled, a case that does not match costs an isinstance through msgspec's metaclass,
        about 70 ns, one that does an exact type comparison); the pass over the partitions
        with work (`_turns`); then the outputs and timers derived from what it did, and the
        read models folded. `decoded`, when given, is the entry's body already decoded (the
        in-process API); `entry.msg` is then not read. `between`, when given, is called where
        the records are whole in the middle of the entry (`Step.between`): a reader's service
        lets a dry run in there (bus/live.py)."""
        if entry.seq <= self.last_seq:
            raise OutOfOrder(f"entry seq {entry.seq} is not after {self.last_seq}")
        self.last_seq = entry.seq
        if self.moved_out or self.shard is not None:  # (one core, no move: nothing to do)
            self._seen(entry)
        if self.shard is not None and not shards.applies(self.shard, self.owners, entry):
            return []  # another shard's: it changes nothing here
        self.now = max(self.now, entry.ts)
        ctx = Step(entry.seq, self.now, between)
        self._fire_timers(ctx)
        msg = None
        if self._has_request(entry, ctx):
            try:
                msg = decoded if decoded is not None else codec.decode_input(entry.kind, entry.msg, entry.encoding)
            except codec.DecodeError as exc:
                _undecodable(entry, exc, ctx)
        match msg:
            case None:
                pass
            case DecodedAllocationRequest():
                self.intake.allocations(entry, msg, ctx)
            case DecodedNodeRequest():
                self.intake.nodes(entry, msg, ctx)
            case DecodedApplicationRequest():
                self.intake.applications(entry, msg, ctx)
            case RegisterResourceManagerRequest():
                self.registry.register(entry, msg, ctx)
            case UpdateConfigurationRequest():
                self.registry.configure(entry, msg, ctx)
            case RMStateChange():
                self.registry.rmstate(entry, msg, ctx)
            case UnregisterRequest():
                self.registry.unregister(entry, msg, ctx)
            case _:  # a request type added and not told here fails, not dropped
                raise AssertionError(f"a request of no known type: {msg!r}")
        for part in self._turns(ctx):
            part.schedule(ctx)
        self.allocations_made += ctx.allocations
        outputs = effects.derive(ctx)  # the messages and timers that follow from what the entry did
        fold.fold(ctx)  # and the read models
        history = self.history
        if not history or history[-1][0] // MINUTE_NS != self.now // MINUTE_NS:
            self._sample()
        return outputs

    def _has_request(self, entry: Entry, ctx: Step) -> bool:
        """Whether `entry` carries a request to decode and apply; what one that does not
        carries is applied or told here: an RM on a subject of the core service's, an assign
        entry (core/shards.py), a tick (no body: only its timers and the pass), the service's
        record of a failed entry (core/guard.py), an unknown kind."""
        kind = entry.kind
        if entry.rm and kind in SERVICE_KINDS:
            ctx.emit(None, Noted(entry.rm, m.EventType.REQUEST, entry.rm,
                      f"entry {entry.seq}: {kind} entries are the core service's only; not applied"))
            return False
        if kind == shards.ASSIGN:
            self._on_assign(entry, ctx)
            return False
        if kind == "tick" or kind == "failed":
            return False
        if kind not in ENTRY_KINDS:
            ctx.emit(None, Noted(entry.rm, m.EventType.REQUEST, entry.rm,
                      f"entry {entry.seq}: unknown kind {limits.quoted(kind)}: expected one of "
                      f"{', '.join(ENTRY_KINDS)}"))
            return False
        return True

    def _turns(self, ctx: Step) -> Iterator[Partition]:
        """The partitions with work, each in its turn to be scheduled (the caller schedules
        it), in the order the RMs registered. With several, each may first make its share of
        the entry's allocation budget, then those that used it all go on with what is left:
        one RM's backlog does not hold up the others' work entry after entry. (No partition
        using its whole share: the pass as one in order.) A paused partition only settles its
        waits. Sets `backlog` at the end: the pass stopped at the per-entry allocation budget,
        and the next entry goes on (the service appends a tick at once, so that it comes soon)."""
        working = [p for rm in self.registry.rms.values() for p in rm.partitions.values()
                   if p.records.paused or p.records.root.active or p.waits.pool.open]
        share = ctx.limit // max(1, sum(1 for p in working if not p.records.paused))
        spent: list[Partition] = []
        for p in working:
            if p.records.paused:
                p.waits.settle(ctx)
                continue
            ctx.share(share)
            yield p
            if not ctx.budget_left:
                spent.append(p)
        ctx.unshare()
        for p in spent:
            if ctx.budget_left:
                yield p
        self.backlog = any(p.records.root.active > 0 for p in working if not p.records.paused)

    def _sample(self) -> None:
        running = containers = 0
        for rm in self.registry.rms.values():
            for p in rm.partitions.values():
                running += p.records.summary.applications.get(AppState.RUNNING, 0)
                containers += p.records.summary.containers
        self.history.append((self.now, running, containers))
        del self.history[:-HISTORY_KEPT]

    def _fire_timers(self, ctx: Step) -> None:
        for timer in due([rm.timers for rm in self.registry.rms.values()], ctx.ts):
            if timer.live():
                self._fire(timer, ctx)

    def _fire(self, timer: Timer, ctx: Step) -> None:
        """A live timer's effect on its partition, by its kind (the most set first); the
        target must not have moved on since it was set (a newer timer of an application wins)."""
        records = timer.partition  # what it reads: the records of a live partition of its RM
        assert isinstance(records, PartitionState)
        part = self.registry.rms[records.rm].partitions[records.name]
        assert part.records is records
        match timer:
            case ReservationTimer():
                part.applier.reservation_due(timer, ctx)
            case CompletingTimer():
                app = timer.app
                if app.timer == timer.generation and app.state is AppState.COMPLETING:
                    part.changes.app_event(app, AppEvent.COMPLETING_TIMEOUT, ctx, "completing timeout")
            case AppTimeoutTimer():
                app = timer.app
                if app.timer == timer.generation and app.state in (AppState.RUNNING, AppState.COMPLETING):
                    part.changes.fail_app(app, ctx, f"execution timeout of {app.timeout_ms} ms reached")
            case PreemptionTimer():
                part.applier.preemption_due(timer, ctx)
            case QuotaTimer():
                part.applier.quota_due(timer, ctx)
            case PlaceholderTimer():
                if timer.app.gang_timer == timer.generation:
                    part.applier.placeholder_timeout(timer.app, ctx)
            case AllocationTimeoutTimer():
                if not timer.alloc.preempting:  # preempted: the RM stops it already, and confirms it
                    part.changes.release(timer.alloc, TIMEOUT, f"execution timeout of {timer.timeout_ms} ms reached", ctx)
            case ExpireTimer():
                part.changes.expire(timer.app_id, records.terminated[timer.app_id], ctx)
            case _:  # a kind added and not told here fails, not dropped
                raise AssertionError(f"a timer of no known kind: {timer!r}")

    def _seen(self, entry: Entry) -> None:
        """What every entry does first, applied or not: what left at an earlier entry is not
        this one's, and a core shard notes an RM that registers, whoever owns it (an RM never
        registered has no unit to move)."""
        if self.moved_out:
            self.moved_out = []
        if self.shard is not None and entry.kind == "register" and entry.rm:
            self.registered[entry.rm] = None

    def note(self, entry: Entry) -> None:
        """Entry `entry` used up without being applied (one that failed, core/guard.py): only
        the cursor and the clock move, and what a core shard notes of every entry (every
        shard keeps the same RMs registered and the same owners)."""
        self.last_seq = max(self.last_seq, entry.seq)
        self.now = max(self.now, entry.ts)
        self._seen(entry)
        if self.shard is not None and entry.kind == shards.ASSIGN and not entry.rm:
            try:
                body = shards.decode_assign(entry)
            except ValueError:
                return
            self.owners[body.rm] = body.shard

    def _on_assign(self, entry: Entry, ctx: Step) -> None:
        """RM `rm` belongs to shard `shard` from this entry on; if it moves between two
        shards, its unit leaves the old one and arrives at the new one here (core/shards.py)."""
        try:
            body = shards.decode_assign(entry)
        except ValueError as exc:
            ctx.emit(None, Noted("", m.EventType.REQUEST, "assign", f"entry {entry.seq}: {exc}; nothing applied"))
            return
        before = shards.owner_of(self.owners, body.rm)
        self.owners[body.rm] = body.shard
        if self.shard is None or before == body.shard or body.rm not in self.registered:
            return  # not sharded (one core holds every RM), it stays where it is, or it has no state to move
        if before == self.shard:
            unit, text = self.registry.take_out(body.rm)
            self.moved_out.append(MovedOut(body.rm, body.shard, entry.seq, self.now, unit, text))
        elif body.shard == self.shard:
            fetch = self.arriving.get(entry.seq)
            if fetch is None:
                raise LookupError(f"entry {entry.seq} moves {body.rm!r} here, and its unit was not fetched (a bug)")
            arriving = fetch()
            if arriving.unit is None:
                return
            self.registry.take_in(body.rm, arriving.unit, arriving.policy_group_text)
            ctx.emit(None, Noted(body.rm, m.EventType.REQUEST, body.rm,
                      f"resource manager {body.rm!r} moved from core shard {before!r} to {body.shard!r} "
                      f"at entry {entry.seq}"))

    def dump(self, sections: tuple[str, ...] = SECTIONS, app: str | None = None, where: Where = EVERYTHING) -> dict[str, Any]:
        """A plain, deterministic projection of the state (read API, tests). `sections`
        limits what is built per partition (counts of everything are always there); `app`,
        the applications to one; `where`, to an RM, a partition, a queue, a state (`Where`)."""
        return project(self.last_seq, self.now, self.registry.operator_configs, self.registry.rms, sections, app, where)


def _undecodable(entry: Entry, exc: codec.DecodeError, ctx: Step) -> None:
    """A body that does not decode: told to the RM, nothing applied."""
    if entry.kind == "register":
        ctx.emit(None, Registered(entry.rm, f"invalid RegisterResourceManagerRequest: {exc}"))
    else:
        ctx.emit(None, Noted(entry.rm, m.EventType.REQUEST, entry.rm,
                  f"entry {entry.seq}: invalid {entry.kind} message: {exc}; nothing applied"))


MINUTE_NS: Final = 60_000_000_000
HISTORY_KEPT = 1440  # a day of samples, one a minute
