"""The applier of a partition's plans: `Applier.commit` applies the decisions of a plan
(core/decisions.py) in order, the one place a plan changes the state: allocations (booked
through the RM's changes, core/changes.py `Changes.allocate`), asks parked where their
decision says (through the waits, core/indexes.py), applications held by a max, gangs'
placements, placeholders' replacements, reservations and preemptions. The timers'
handlers that judge an ask again or take what a timeout ends (`*_due`,
`placeholder_timeout`), the second step of a replacement, and the derivation of what a
snapshot does not store (`restore`) are its too. core/partition.py's docstring has the
theory.
"""

from __future__ import annotations

from typing import Final

from ykbus.core import fold, why
from ykbus.core.backfill import reserved_why
from ykbus.core.changes import Changes
from ykbus.core.config import quota_preemption_enabled
from ykbus.core.decisions import (
    Allocate,
    Backfilled,
    CancelReservation,
    Defer,
    GangAllocate,
    Hold,
    HoldDomain,
    Learned,
    Park,
    Plan,
    Preempt,
    Replace,
    Reserve,
    Unpreempted,
)
from ykbus.core.events import (
    AllocationPreempted,
    AskDropped,
    PreemptionRetry,
    PreemptionStarted,
    QuotaOverrun,
    ReasonChanged,
    ReplacementAsked,
    RoomWaitStarted,
)
from ykbus.core.gang import pending_placeholders
from ykbus.core.indexes import Waits
from ykbus.core.ledger import Ledger
from ykbus.core.lifecycle import (
    AppEvent,
    AppState,
    NodeState,
)
from ykbus.core.model import (
    NODE_ROOM,
    Alloc,
    App,
    Ask,
    Node,
    Queue,
    QueueRoom,
    Replacement,
    RequiredNode,
    Shape,
    Tracker,
    Victims,
    is_leader,
    queue_room,
    replacement,
    required_node,
    victims,
)
from ykbus.core.preemption import QUOTA_RULE, RETRY_NS, delay_ms, may_search, quota_victims
from ykbus.core.resources import add_into, fits
from ykbus.core.scheduling import RESERVED, ROOM_FREED, SKIPPED, Scheduler
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
from ykbus.core.timers import (
    PreemptionTimer,
    QuotaTimer,
    ReservationTimer,
)
from ykbus.core.topoplace import in_set, waits_whole
from ykbus.si import messages as m

TOPOLOGY_NO_DOMAIN: Final = why.PendingCode.TOPOLOGY_NO_DOMAIN
GANG_NO_ROOM: Final = why.PendingCode.GANG_NO_ROOM


class Applier:
    """The plan's commit and the timers' handlers (the module's docstring), over the
    partition's records, through its waits, the RM's changes for what both do (booking,
    releasing, an application's lifecycle), and the planner, which it tells of room a
    commit frees within a pass (`Scheduler.state_changed`)."""

    def __init__(self, records: PartitionState, waits: Waits, scheduler: Scheduler, ledger: Ledger,
                 changes: Changes) -> None:
        self.records = records
        self.waits = waits
        self.scheduler = scheduler
        self.ledger = ledger
        self.changes = changes
        self.holds = changes.holds  # topology domains reserved by waiting gangs (core/holds.py)
        # (node, shape) -> the Reserved reason where no allocation has a runtime limit, made
        # once (core/backfill.py `reserved_why`; the planner keeps its own)
        self.reserved_reasons: dict[tuple[str, Shape], why.Why] = {}

    def commit(self, plan: Plan, ctx: Step) -> None:
        """Apply a plan's decisions in order."""
        for decision in plan:
            if isinstance(decision, (Allocate, Backfilled)):  # (Backfilled: on room a reservation holds)
                ask = decision.ask
                ask.app.why = None
                if ask.waiting is not None:  # judged behind an open gate (core/waits.py): active again first
                    self.waits.activate(ask, ctx)
                self.changes.allocate(ask, decision.node, ctx, backfill=isinstance(decision, Backfilled))
            elif isinstance(decision, Park):
                self._park(decision, ctx)
            elif isinstance(decision, Unpreempted):  # its search found no victims: not again for a while
                ask, then = decision.ask, decision.then
                ask.preempt_after = ctx.ts + RETRY_NS
                ctx.emit(self.records, PreemptionRetry(ask, ask.preempt_after, ask.since))
                if isinstance(then, Park):
                    self._park(Park(ask, then.where, then.state, why.cannot_preempt(then.why, decision.reason)), ctx)
                else:
                    self._reserve(ask, then.node, ctx, decision.reason)
            elif isinstance(decision, Preempt):
                self._preempt(decision, ctx)
            elif isinstance(decision, Reserve):
                self._reserve(decision.ask, decision.node, ctx, "", decision.note)
            elif isinstance(decision, Hold):
                self._hold(decision.app, decision.on, decision.why, ctx)
            elif isinstance(decision, Defer):
                decision.app.why = decision.why
            elif isinstance(decision, GangAllocate):
                self._place_gang(decision.app, decision.places, ctx)
                for group, level, values in decision.domains:  # its lost members go back there
                    decision.app.domains[group] = (level, values)
            elif isinstance(decision, Replace):
                self._replace(decision.ask, decision.placeholder, ctx)
            elif isinstance(decision, Learned):  # first: what the walk learned, from the state it read
                self.waits.learned(decision)
            elif isinstance(decision, HoldDomain):  # a waiting gang reserves a topology domain, or nodes
                self.holds.hold(decision.app, decision.level, decision.values, ctx)
            elif isinstance(decision, CancelReservation):  # for an ask that must run on the node
                self.waits.unreserve(decision.other, ctx, wake=True)
                self.commit([decision.then], ctx)
            else:  # CancelGroup: capacity of a TIMEOUT release is free at once
                for ph in decision.placeholders:
                    self.changes.release(ph, m.TerminationType.TIMEOUT, decision.message, ctx)
                if decision.placeholders:  # room grew within the pass: a shape that found none may now
                    self.scheduler.state_changed(ROOM_FREED)

    def _park(self, decision: Park, ctx: Step) -> None:
        ask = decision.ask
        app = ask.app
        app.why = None
        where = decision.where
        gang_member = ask.placeholder and bool(app.gang)
        topology_set = not app.gang and bool(self.records.topology_levels) and in_set(app, ask)
        if ask.waiting is not None and (gang_member or topology_set):
            # a gang (or a topology set) is judged whole when one of its asks woke (room for its
            # shape): the others, still parked, are parked again with it (back in its list first)
            self.waits.activate(ask, ctx)
        if where is NODE_ROOM and gang_member and (decision.why.code is TOPOLOGY_NO_DOMAIN or (
                decision.why.code is GANG_NO_ROOM and app.queue.gang_reserves())):
            if not ask.since:  # a gang starts waiting: past the reservation delay it may reserve a domain, or nodes
                ask.since = ctx.ts
                ctx.emit(self.records, RoomWaitStarted(ask, ctx.ts, ctx.ts + self.records.reservation_delay_ns, 0))
        elif where is NODE_ROOM and not gang_member and not topology_set:
            delay = self.records.reservation_delay_ns
            if not ask.since:  # it starts waiting for room: it may reserve a node later, and preempt
                ask.since = ctx.ts
                may_preempt = ask.preempt_other and self.records.preempts() and may_search(ask)
                ctx.emit(self.records, RoomWaitStarted(
                    ask, ctx.ts, ctx.ts + delay, ctx.ts + delay_ms(ask) * 1_000_000 if may_preempt else 0))
            elif not ask.reserved and ctx.ts - ask.since >= delay:  # past it: no node to reserve
                self.waits.park(ask, where, decision.state, decision.why, ctx, reserving=True)
                if not app.active:
                    self.waits.sync_app(app)
                return
        elif not isinstance(where, (RequiredNode, Victims)):  # held by a max, a limit, its gang: not by room
            if ask.reserved:
                self.waits.unreserve(ask, ctx)
            if gang_member and app.reserved_nodes() is not None:
                self.holds.release(app, ctx)  # its nodes are no use to it now (docs/gang.md): others' again
            ask.since = 0
        self.waits.park(ask, where, decision.state, decision.why, ctx)
        if not app.active:
            self.waits.sync_app(app)

    def _hold(self, app: App, on: Queue | Tracker, reason: why.Why, ctx: Step) -> None:
        """`app` waits in `on`'s app_waiters until it runs fewer applications."""
        app.why = reason
        app.blocked_on = on
        on.app_waiters[app.id] = app
        if app.reserved_nodes() is not None:
            self.holds.release(app, ctx)  # a gang that may not run now: its nodes are others' again,
            for ask in app.asks.values():  # and its wait for the delay starts again once it may
                if ask.placeholder:
                    ask.since = 0
        self.waits.sync_app(app)
        for _, _, ask in list(app.active):
            if ask.reported != reason.message:
                ask.reported = reason.message
                ctx.emit(self.records, ReasonChanged(ask, SKIPPED, reason.message))

    def _place_gang(self, app: App, places: list[tuple[Ask, Node]], ctx: Step) -> None:
        """Every pending placeholder of the gang at once; its placeholder timer starts; the
        domain it reserved, if any, is free for others again."""
        self.holds.release(app, ctx)
        for ask, node in places:
            if ask.waiting is not None:  # parked with the gang until now: back in its list first
                self.waits.activate(ask, ctx)
            app.why = None
            self.changes.allocate(ask, node, ctx)
        self.changes.start_placeholder_timer(app, ctx)
        self.waits.wake_gang(app, ctx)  # its real asks: they may take their places now

    def _replace(self, ask: Ask, ph: Alloc, ctx: Step) -> None:
        """Ask the RM to release placeholder `ph` for real `ask`; `ask` waits for that."""
        ph.replacing = ask.key
        app = ask.app
        app.why = None
        self.waits.park(ask, replacement(ph.uuid), SKIPPED, why.replacing(ph.uuid, ph.node.id), ctx)
        if not app.active:
            self.waits.sync_app(app)
        ctx.emit(self.records, ReplacementAsked(ph, ask))

    def confirm_replacement(self, ph: Alloc, ctx: Step) -> None:
        """The RM released placeholder `ph` (`PLACEHOLDER_REPLACED`): the real ask it was
        released for is allocated on its node, counted with its own resources from now."""
        app, node = ph.app, ph.node
        taken = self.waits.parked.take(Replacement, ph.uuid)
        ask = taken[0] if taken else None
        ph.replacing = ""  # replaced, not abandoned: `release` must not wake the ask as an ordinary one
        victim = ph.preempting  # (its room was for the ask that preempted it)
        self.changes.release(ph, m.TerminationType.PLACEHOLDER_REPLACED, "", ctx, check_done=False, report=False)
        if ask is not None and ask.pending:
            self.waits.activate(ask, ctx)
            # the placeholder's room is the member's, even on a node reserved meanwhile for
            # another ask (that ask waits on: the RM has already stopped the placeholder);
            # not room a preemption freed for the ask that reserved the node
            replaces = not victim and not node.preempting
            if node.state is NodeState.SCHEDULABLE and (fits(ask.resource, node.free) if replaces else node.takes(ask)):
                self.changes.allocate(ask, node, ctx, replaces=replaces)
            else:  # the node drained or shrank meanwhile: an ordinary ask, placed by the next pass
                self.waits.sync_app(app)
        self.changes.check_done(app, ctx)

    def placeholder_timeout(self, app: App, ctx: Step) -> None:
        """The gang's placeholder timeout: unused placeholders go (TIMEOUT, free at once),
        pending ones are removed; an application not yet Running resumes as an ordinary
        one (Soft) or fails (Hard); a Running one only loses what it did not use."""
        app.gang_timer = -1
        message = f"placeholder timeout of {app.placeholder_timeout_ms} ms reached"
        for alloc in list(app.allocations.values()):  # (one preempted is on its way out: the RM confirms it)
            if alloc.placeholder and not alloc.replacing and not alloc.preempting:
                self.changes.release(alloc, m.TerminationType.TIMEOUT, message, ctx, check_done=False)
        for ask in pending_placeholders(app):
            self.changes.drop_ask(ask, ctx)
            ctx.emit(self.records, AskDropped(app, ask.key, m.TerminationType.TIMEOUT, message))
        self.waits.wake_gang(app, ctx)  # real asks waiting for placeholders: ordinary asks now
        if app.state is AppState.ACCEPTED:
            if app.gang_hard:
                self.changes.fail_app(app, ctx, message)
                return
            self.changes.app_event(app, AppEvent.RESUME, ctx, message)
        self.waits.sync_app(app)
        self.changes.check_done(app, ctx)

    def _reserve(self, ask: Ask, node: Node, ctx: Step, unpreempted: str = "", note: str = "") -> None:
        """`unpreempted`: why its search for victims found none; `note`: why it has not searched."""
        self.waits.reserve(ask, node)  # (its place and node.reserved with it)
        node.reserved = ask
        ask.app.why = None
        where = required_node(node.id) if ask.required else NODE_ROOM
        reason = reserved_why(ask, node, ctx.ts, self.reserved_reasons)
        if unpreempted:
            reason = why.cannot_preempt(reason, unpreempted)
        elif note:
            reason = why.preempts_later(reason, note)
        self.waits.park(ask, where, RESERVED, reason, ctx)
        if not ask.app.active:
            self.waits.sync_app(ask.app)
        self.waits.reservation_taken()

    def _preempt(self, decision: Preempt, ctx: Step) -> None:
        """The RM is asked to release the victims; the node is the ask's until they are gone."""
        ask, node = decision.ask, decision.node
        if ask.reserved and ask.reserved != node.id:
            self.waits.unreserve(ask, ctx)
        other = node.reserved
        if other is not None and other is not ask:  # a reservation that gives way to it (core/preemption.py `_yields`)
            self.waits.unreserve(other, ctx, wake=True)
        for alloc in decision.victims:
            self._preempt_one(alloc, ask, decision.rule, ctx)
        ctx.emit(self.records, PreemptionStarted(ask, node, decision.victims, decision.rule))
        self.waits.reserve(ask, node)  # (its place and node.reserved with it)
        node.reserved = ask
        ask.app.why = None
        self.waits.park(ask, victims(node.id), RESERVED,
                   why.preempting(node.id, [a.uuid for a in decision.victims]), ctx)
        if not ask.app.active:
            self.waits.sync_app(ask.app)
        self.waits.reservation_taken()

    def quota_reloaded(self, ctx: Step) -> None:
        """A reload: every queue now over its max that preempts for quota starts its delay."""
        if quota_preemption_enabled(self.records.config):
            for q in self.records.queues.values():
                if q.quota_delay_ms > 0 and any(q.allocated.get(t, 0) > v for t, v in q.max.items()):
                    ctx.emit(self.records, QuotaOverrun(q, ctx.ts + q.quota_delay_ms * 1_000_000))

    def quota_due(self, timer: QuotaTimer, ctx: Step) -> None:
        """A queue's quota delay has passed: what it still holds over its max is preempted, at once."""
        q = self.records.queues[timer.queue]
        if not quota_preemption_enabled(self.records.config) or q.quota_delay_ms <= 0:
            return
        for alloc in quota_victims(self.records, q):
            self._preempt_one(alloc, None, f"{QUOTA_RULE}: queue {q.path} is over its max", ctx)

    def _preempt_one(self, alloc: Alloc, ask: Ask | None, rule: str, ctx: Step) -> None:
        """`alloc` is preempted (for `ask`, or its queue's quota): the RM is asked to release it,
        and its node counts it until the RM has (changes.py `release` undoes this)."""
        alloc.preempting = True
        node = alloc.node
        node.preempting += 1
        self.records.preempted[node.id] = node
        ctx.emit(self.records, AllocationPreempted(alloc, ask, rule))

    def preemption_due(self, timer: PreemptionTimer, ctx: Step) -> None:
        """An ask that may preempt has waited its delay (or the retry interval): judged again.
        So is one that must run on one node and found no victims there (its node woke it only
        when it changed: allocations growing older than their minimum runtime change nothing)."""
        ask = timer.app.asks.get(timer.key)
        if ask is not None and ask.since == timer.since and ask.pending and (
                ask.waiting is NODE_ROOM or isinstance(ask.waiting, RequiredNode)):
            self.waits.wake(ask, ctx)

    def reservation_due(self, timer: ReservationTimer, ctx: Step) -> None:
        """An ask has waited for room the reservation delay: the next pass may reserve for it."""
        ask = timer.app.asks.get(timer.key)
        if ask is not None and ask.since == timer.since and ask.waiting is NODE_ROOM and not ask.reserved:
            self.waits.wake(ask, ctx)

    # --- a snapshot's load (core/snapshot.py) ----------------------------------------------

    def restore(self, queue_waiters: dict[str, list[tuple[str, str]]], room_waiters: list[tuple[str, str]],
                tracker_blocked: dict[str, str], now: int) -> None:
        """Derive what a snapshot does not store from what it does, already in place (the
        queue tree, the nodes, the applications with their asks, the allocations held by
        nodes and applications in their orders): sums, active lists, priority caches, the
        ledger's counts, the node index, where each waiting ask is registered, trackers, the
        read model. The stored orders of waiting asks come with it: `queue_waiters` (by queue,
        for its max), `room_waiters` (for room); `tracker_blocked`: application -> the key
        of the tracker whose maxapplications holds it (trackers are derived here)."""
        records = self.records
        for node in records.nodes.values():
            add_into(records.total, node.capacity)
        for alloc in records.allocations.values():
            if alloc.preempting:  # what each node has preempted and not released yet
                alloc.node.preempting += 1
                records.preempted[alloc.node.id] = alloc.node
        asks: dict[tuple[str, str], Ask] = {}
        for app in records.apps.values():
            app.queue.apps[app.id] = app
            if app.state is AppState.RUNNING:
                for q in app.path:
                    q.running += 1
            for ask in app.asks.values():
                asks[(app.id, ask.key)] = ask
                if ask.pending:
                    self.waits.add_pending(ask)
                    app.priorities[ask.priority] = app.priorities.get(ask.priority, 0) + 1
                    app.leaders_waiting += is_leader(ask)
                    if ask.waiting is None:
                        app.active.add(ask.entry)
            app.max_priority = max(app.priorities) if app.priorities else None
        self.waits.recompute_priorities(records.root)  # (derived, not read from the snapshot: one
        # written while a parent kept a priority it should not have is loaded right)
        self.ledger.recount(records.apps.values(), records.nodes.values())
        for node in records.nodes.values():
            self.waits.index_node(node)
        self._register_waiting(asks, queue_waiters, room_waiters, tracker_blocked, now)
        for app in records.apps.values():
            self.waits.sync_app(app)
        fold.rebuild(records)
        self.changes.index_victims()

    def _register_waiting(self, asks: dict[tuple[str, str], Ask], queue_waiters: dict[str, list[tuple[str, str]]],
                          room_waiters: list[tuple[str, str]], tracker_blocked: dict[str, str], now: int) -> None:
        """Each waiting ask in the one registry of where it waits (`waits`, or the room
        gates of `pool`), in the stored orders; the nodes reserved for asks; the trackers,
        and the applications their maxapplications holds."""
        records = self.records
        for path, keys in queue_waiters.items():  # a queue's max, in the order they came
            for key in keys:
                self.waits.parked.add(asks[key], queue_room(path))
        for ask in asks.values():  # the rest as each ask's `waiting` names it (room: below)
            w = ask.waiting
            if w is not None and w is not NODE_ROOM and not isinstance(w, QueueRoom):
                self.waits.parked.add(ask, w)
            if ask.reserved:
                self.waits.reserved_restored(ask, records.nodes[ask.reserved])
        delay = records.reservation_delay_ns
        pooled: list[tuple[Ask, bool]] = []
        for key in room_waiters:  # by gate if ordinary (core/waits.py), else one by one
            ask = asks[key]
            reserving = bool(not ask.reserved and ask.since and now - ask.since >= delay
                             and not (ask.placeholder and ask.app.gang))
            if not waits_whole(ask.app, ask, records.topology_levels):
                pooled.append((ask, reserving))
                continue
            self.waits.parked.add(ask, NODE_ROOM)
            if reserving:
                self.waits.reserving_restored(ask)
        # trackers and their counts are derived (a load tells nobody: its step's events are
        # dropped, the read models rebuilt below)
        self.changes.retrack(Step(0, now))
        for app_id, tracker_key in tracker_blocked.items():
            app = records.apps[app_id]
            tracker = records.trackers.get(tracker_key)
            if tracker is None:  # a snapshot of older rules, which named it otherwise: judged again
                self.waits.sync_app(app)
                continue
            app.blocked_on = tracker
            tracker.hold(app)
        for ask, reserving in pooled:  # once the applications' sort keys can be read
            self.waits.pool.enter(ask, reserving)
