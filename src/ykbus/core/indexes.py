"""The waits of a partition: what follows from its records, kept as they change. `Waits`
owns the node index (in the scorer's order), where each pending ask waits (`parked`: the
one registry of `Wait` places, core/waits.py `WaitPlaces`; `pool`: the gates of asks waiting
for room, `RoomWaits`; `reserve_waiters`: asks past their reservation delay with no node to
reserve; all three kept, with each ask's place, by its one move, `AskPlaces.move`, here)
and what wakes it, and keeps the sums and orders the records carry for the planner:
pending sums, active applications and their order, application and queue priorities.

It changes the records' objects only in what follows (an ask's place and reason, an
application's place among the active, pending and priority caches), never what an RM asks
for; the applier (core/changes.py, core/applier.py) calls it. It tells the planner's
caches that follow the node index and the gates (`Scheduler`) of each change through one
call, `Scheduler.state_changed`, and applies what a walk learned (`learned`: the gates it
judged, the queue keys it computed).
core/partition.py's docstring has the theory.
"""

from __future__ import annotations

from typing import Any, Final

from ykbus.core import why
from ykbus.core.decisions import Learned
from ykbus.core.events import ReasonChanged
from ykbus.core.gang import pending_placeholders
from ykbus.core.holds import holder_of
from ykbus.core.lifecycle import (
    ASK_PLACE,
    SCHEDULABLE_APP_STATES,
    AskPlace,
    AskPlaceEvent,
    NodeState,
)
from ykbus.core.model import (
    NODE_ROOM,
    App,
    Ask,
    GangWait,
    LeaderWait,
    LimitRoom,
    Node,
    NodeRoom,
    Queue,
    QueueRoom,
    RequiredNode,
    Tracker,
    Wait,
    count_app_priorities,
    is_leader,
)
from ykbus.core.queueprops import AppSortPolicy
from ykbus.core.resources import add_into, fits, scaled, sub_into
from ykbus.core.scheduling import NODE_MOVED, NODES_REINDEXED, NONE_TO_RESERVE, RESERVABLE, ROOM_FREED, Scheduler
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.state import FAIR, PartitionState
from ykbus.core.step import Step
from ykbus.core.topoplace import in_set, waits_whole
from ykbus.core.waits import RESERVE, Gate, RoomWaits, WaitPlaces
from ykbus.si import messages as m


class Waits:
    """Where each pending ask waits and what follows from the records (the module's
    docstring). Built over the partition's records, with the room gates and the node index
    its planner reads (the partition builds those first, and the planner over them)."""

    def __init__(self, records: PartitionState, pool: RoomWaits, node_index: SortedSeq, planner: Scheduler,
                 reserved_nodes: dict[str, Node]) -> None:
        self.records = records
        self.planner = planner  # its caches follow the node index and the gates
        self.node_index = node_index  # the schedulable nodes by the scorer's key
        self.pool = pool  # asks (not of gangs) waiting for node room, by gate (core/waits.py)
        # where each pending ask is (core/waits.py): its one move, and the registries it keeps
        self.places = AskPlaces(pool, reserved_nodes)
        # where the other pending asks wait (core/waits.py): by place; gangs' asks that wait
        # for room are here by shape, and in reserve_waiters past the reservation delay
        self.parked: WaitPlaces = self.places.parked
        # asks past the reservation delay that found no node to reserve: judged again when a
        # node comes, comes back, grows, or is freed of its reservation (the places' own dict)
        self.reserve_waiters: dict[tuple[str, str], Ask] = self.places.reserve_waiters
        # the nodes a reservation could newly take since the reservation gates opened: once
        # all are reserved again, what reservations can take is as it was, and those gates
        # close (`reservation_taken`); forgotten as the entry's gates settle
        self.freed: dict[str, Node] = {}
        self.woken = 0  # asks and applications made active again: a pass goes on while a commit wakes some

    def index_node(self, node: Node) -> None:
        """`node`'s free room or state changed: it moves in the index, and the planner's
        caches that follow it (its fit caches, the node policies' orders) are told."""
        old = node.key
        index = self.node_index
        records = self.records
        if old is not None:
            index.remove(old)
            node.key = None
        if records.domain_holds or records.node_holds:  # (domains or nodes reserved by waiting gangs: rare)
            node.held = holder_of(records, node)
        elif node.held:
            node.held = ""
        if node.state is NodeState.SCHEDULABLE and not node.held:
            node.key = records.scorer.key(node)
            index.add(node.key)
        self.planner.state_changed(NODE_MOVED, node, old)

    def usage_moved(self, app: App) -> None:
        """The ledger moved `app`'s usage: under `fair` that moves it in its leaf."""
        if app.queue.sort_policy is FAIR:
            self.rekey_app(app)

    def reindex_nodes(self) -> None:
        self.node_index.clear()
        self.planner.state_changed(NODES_REINDEXED)
        for node in self.records.nodes.values():
            node.key = None
            self.index_node(node)

    def rekey_all(self, only_fair: bool) -> None:
        for q in self.records.queues.values():
            if q.leaf and (not only_fair or q.sort_policy is AppSortPolicy.FAIR):
                for entry in list(q.active_apps):
                    self.rekey_app(entry[-1])
                pooled = {e[-1].id: e[-1] for apps in q.pooled_apps.values() for e in apps if e[-1].entry is None}
                for app in pooled.values():  # (the active ones were, with their active entries)
                    self.pool.rekey(app)

    def recompute_priorities(self, q: Queue) -> None:
        """Rebuild the priority caches of `q`'s subtree from scratch (after a reload, and at a
        snapshot's load)."""
        if q.leaf:
            count_app_priorities(q)
            q.raw_priority = max(q.app_prios) if q.app_prios else None
        else:
            for child in q.children.values():
                self.recompute_priorities(child)
            q.raw_priority = q.children_priority()
        q.sort_key = None

    def sync_app(self, app: App) -> None:
        want = bool(app.active) and app.blocked_on is None and app.state in SCHEDULABLE_APP_STATES
        if want and app.entry is None:
            app.entry = self.records.app_key(app)
            app.queue.active_apps.add((*app.entry, app))
            for q in app.path:
                q.active += 1
        elif not want and app.entry is not None:
            self.deactivate(app)

    def deactivate(self, app: App) -> None:
        if app.entry is not None:
            app.queue.active_apps.remove((*app.entry, app))
            app.entry = None
            for q in app.path:
                q.active -= 1

    def rekey_app(self, app: App) -> None:
        if app.entry is not None:
            key = self.records.app_key(app)
            if key != app.entry:  # a fifo leaf's keys mostly stay: no sorted-list move then
                app.queue.active_apps.remove((*app.entry, app))
                app.entry = key
                app.queue.active_apps.add((*key, app))
        if app.pool_key is not None:
            self.pool.rekey(app)

    def ask_pending(self, ask: Ask) -> None:
        app = ask.app
        if is_leader(ask):
            app.leaders_waiting += 1
        counts = app.priorities
        counts[ask.priority] = counts.get(ask.priority, 0) + 1
        if app.max_priority is None or ask.priority > app.max_priority:
            old = app.max_priority
            app.max_priority = ask.priority
            self._app_priority_changed(app, old)

    def ask_not_pending(self, ask: Ask, ctx: Step) -> None:
        app = ask.app
        if is_leader(ask):  # placed (or gone): its workers go on, or wait for the next leader (their reason names it)
            app.leaders_waiting -= 1
            self._wake_leader_waiters(app, ctx)
        counts = app.priorities
        left = counts[ask.priority] - 1
        if left:
            counts[ask.priority] = left
            return  # another pending ask keeps this priority
        del counts[ask.priority]
        if ask.priority == app.max_priority:
            old = app.max_priority
            app.max_priority = max(counts) if counts else None
            self._app_priority_changed(app, old)

    def _app_priority_changed(self, app: App, old: int | None) -> None:
        """The leaf counts its applications per max priority (the priority scheduling design's O(1) add, O(distinct
        priorities) remove), so a change never scans the leaf's applications."""
        leaf = app.queue
        if leaf.sort_priority:
            self.rekey_app(app)
        new = app.max_priority
        counts = leaf.app_prios
        if old is not None:
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        if new is not None:
            counts[new] = counts.get(new, 0) + 1
        if new is not None and (leaf.raw_priority is None or new > leaf.raw_priority):
            leaf.raw_priority = new
        elif old is not None and old == leaf.raw_priority and old not in counts:
            leaf.raw_priority = max(counts) if counts else None
        else:
            return
        leaf.sort_key = None
        q = leaf.parent
        while q is not None:
            value = q.children_priority()
            if value == q.raw_priority:
                break
            q.raw_priority = value
            q.sort_key = None
            q = q.parent

    def pend(self, ask: Ask, ctx: Step) -> None:
        """Count `ask`'s pending allocations and make it active."""
        self.add_pending(ask)
        self.places.move(ask, AskPlaceEvent.PEND)
        ctx.pending_moved(self.records, ask)
        self.ask_pending(ask)

    def add_pending(self, ask: Ask) -> None:
        """`ask`'s pending allocations count in its application's and its queues' pending."""
        total = scaled(ask.resource, ask.pending)
        add_into(ask.app.pending, total)
        for q in ask.app.path:
            add_into(q.pending, total)
            q.sort_key = None

    def unpend(self, ask: Ask, ctx: Step) -> None:
        """Undo `pend` for what is still pending, wherever the ask waits."""
        if ask.reserved:
            self.unreserve(ask, ctx)
        ask.since = 0
        if not ask.pending:
            return
        if ask.placeholder and ask.app.gang:  # its gang, and the real asks waiting for it, are judged again
            self.rejudge_gang(ask.app, ctx)  # (this ask too: it is active then, and leaves its list below)
        total = scaled(ask.resource, ask.pending)
        sub_into(ask.app.pending, total)
        for q in ask.app.path:
            sub_into(q.pending, total)
            q.sort_key = None
        self.places.move(ask, AskPlaceEvent.DROP)
        ask.pending = 0
        ctx.pending_moved(self.records, ask)
        self.ask_not_pending(ask, ctx)

    def park(self, ask: Ask, where: Wait, state: m.SchedulingState, reason: why.Why, ctx: Step,
             reserving: bool = False) -> None:
        """Park `ask` at `where` with its reason (moving it there if it waits elsewhere); the
        RM hears the reason once per change. `reserving`: waiting for room, it is past its
        reservation delay with no node to reserve."""
        if where is not NODE_ROOM:
            self.places.move(ask, AskPlaceEvent.PARK, where)
        elif not waits_whole(ask.app, ask, self.records.topology_levels):  # behind its shape's gates (core/waits.py)
            self.places.move(ask, AskPlaceEvent.POOL_TO_RESERVE if reserving else AskPlaceEvent.POOL)
        else:
            self.places.move(ask, AskPlaceEvent.PARK_TO_RESERVE if reserving else AskPlaceEvent.PARK, where)
        ask.why = reason
        ctx.pending_moved(self.records, ask)
        if reason.message != ask.reported:
            ask.reported = reason.message
            ctx.emit(self.records, ReasonChanged(ask, state, reason.message))

    def wake(self, ask: Ask, ctx: Step) -> None:
        """A waiting ask is active again, out of the registry of its place (if its place has
        not let it go already, `WaitPlaces.take`)."""
        if ask.waiting is None:  # woken once already by another of the places that knew it
            return
        self.places.move(ask, AskPlaceEvent.WAKE)
        self.woken += 1
        ask.why = None
        ctx.pending_moved(self.records, ask)
        self.sync_app(ask.app)

    def settle(self, ctx: Step) -> None:
        """After the entry's pass (or instead of it): the asks behind gates still open are made
        active, as an eager wake-up would have left them (core/waits.py)."""
        if self.pool.open:
            for ask in self.pool.let_through():
                self.wake(ask, ctx)
        if self.freed:
            self.freed.clear()

    def learned(self, learned: Learned) -> None:
        """What a walk learned (core/decisions.py `Learned`), applied before its decisions:
        the gates it judged close (it showed their asks no more), the queue keys it
        computed are memoized."""
        for gate in learned.closed:
            self.pool.close(gate)
        for q, key in learned.keys:
            q.sort_key = key

    def reservation_taken(self) -> None:
        """A node was reserved: once every node a reservation could newly take is taken, the
        asks behind the reservation gates would find none, as they found none before those
        nodes came; the gates close and the planner is told their shapes find none."""
        freed = self.freed
        if freed and all(n.reserved is not None for n in freed.values()):
            for gate in self.pool.open:
                if gate.kind == RESERVE:
                    self.pool.close(gate)
                    self.planner.state_changed(NONE_TO_RESERVE, None, gate.shape)

    def activate(self, ask: Ask, ctx: Step) -> None:
        """A waiting ask about to be placed (or placed by the next pass): active again, in
        its application's list, at once (not a wake-up: the pass goes on as it was)."""
        self.places.move(ask, AskPlaceEvent.WAKE)
        ask.why = None
        ctx.pending_moved(self.records, ask)

    def wake_at(self, kind: type, key: Any, ctx: Step) -> None:
        """Every ask waiting at one place (a `Wait` kind and its key) is judged again."""
        for ask in self.parked.take(kind, key):
            self.wake(ask, ctx)

    def rejudge_gang(self, app: App, ctx: Step) -> None:
        """The gang changed (a placeholder came or went): every pending placeholder, wherever
        it waits, and every real ask waiting on the gang, are judged again (their reasons
        name the gang's total)."""
        self.wake_gang(app, ctx)
        for ask in pending_placeholders(app):
            self.wake(ask, ctx)

    def rejudge_set(self, ask: Ask, ctx: Step) -> None:
        """`ask` of a topology set (core/topoplace.py `in_set`) was released: the set's other
        pending asks are judged again (their reason, why the set waits, named its total)."""
        app = ask.app
        if self.records.topology_levels and not app.gang and in_set(app, ask):
            for other in app.asks.values():
                if other.pending and other.at == ask.at and other is not ask:
                    self.wake(other, ctx)

    def wake_gang(self, app: App, ctx: Step) -> None:
        self.wake_at(GangWait, app.id, ctx)

    def _wake_leader_waiters(self, app: App, ctx: Step) -> None:
        """A leader of `app` no longer waits to be placed: its workers are judged again."""
        self.wake_at(LeaderWait, app.id, ctx)

    def wake_node(self, node: Node, ctx: Step) -> None:
        """`node` changed (added, freed, resized, drained, back, going): wake the asks that
        must run on it, to be judged again, and the waiting shapes that now fit it; if it is
        reserved, its room serves the ask it is reserved for alone, and the gates of the
        shapes it fits open when the reservation goes (`unreserve` wakes the node again)."""
        self.wake_at(RequiredNode, node.id, ctx)
        if node.state is not NodeState.SCHEDULABLE:
            return
        held = node.reserved
        if held is not None and held.pooled and (fits(held.resource, node.free) or (
                held.why is not None and "estimate" in held.why.details)):
            # its own node has room for it now, or room that brings its estimated start
            # nearer (docs/time.md): judged again at once
            self.wake(held, ctx)
        room = self.parked.kinds.get(NodeRoom)  # gangs' asks waiting for room, by shape
        fitting = [s for s, waiters in room.items()
                   if fits(next(iter(waiters.values())).resource, node.free)] if room else []
        for shape in fitting:
            if held is None:
                self.wake_at(NodeRoom, shape, ctx)
                continue
            # reserved for `held`: it takes no other ask, so an ask reserved elsewhere
            # cannot gain by its room (its own node, or a node free of reservations, would
            # wake it when it changes); the others are judged again as ever
            for ask in list(self.parked.at(NodeRoom, shape).values()):
                if not ask.reserved or ask is held:
                    self.wake(ask, ctx)
        if self.pool.shapes:
            if held is None and not node.held:
                self._opened(self.pool.open_fitting(node))
            elif self.pool.limited_shapes:  # reserved: its room may be lent to asks with a runtime limit (core/backfill.py)
                self._opened(self.pool.open_fitting(node, limited=True))

    def wake_queue(self, q: Queue, ctx: Step) -> None:
        """Usage in `q` fell (or its max rose): the asks its max held are judged again."""
        self.wake_at(QueueRoom, q.path, ctx)

    def wake_limit(self, t: Tracker, ctx: Step) -> None:
        """Usage under a user or group limit fell: the asks it held are judged again."""
        self.wake_at(LimitRoom, t.key, ctx)

    def wake_app_waiters(self, q: Queue | Tracker) -> None:
        if q.app_waiters:
            waiters, q.app_waiters = q.app_waiters, {}
            self.woken += 1
            for app in waiters.values():
                app.blocked_on = None
                self.sync_app(app)

    def unreserve(self, ask: Ask, ctx: Step, wake: bool = False) -> None:
        """Drop `ask`'s reservation; its node takes other asks again. `wake`: the ask waits
        on, to be judged again (its reason would be stale)."""
        node = self.records.nodes.get(ask.reserved)
        freed = node if node is not None and node.reserved is ask else None
        self.places.move(ask, AskPlaceEvent.UNRESERVE, node=node)
        if freed is not None:
            self.planner.state_changed(ROOM_FREED)  # a shape that failed for want of this node may fit it now
            self.wake_reserve_waiters(freed, ctx)
            self.wake_node(freed, ctx)
        if wake:
            self.wake(ask, ctx)

    def reserved_restored(self, ask: Ask, node: Node) -> None:
        """A loaded ask's reserved node (core/applier.py `restore`)."""
        self.places.reservation_restored(ask, node)

    def reserving_restored(self, ask: Ask) -> None:
        """A loaded gang's ask past its reservation delay with no node reserved (core/applier.py `restore`)."""
        self.reserve_waiters[(ask.app.id, ask.key)] = ask

    def reserve(self, ask: Ask, node: Node) -> None:
        """`node` is reserved for `ask` (the applier: a reservation, or the node it preempts
        on), unless it already is."""
        if ask.reserved != node.id:
            self.places.move(ask, AskPlaceEvent.RESERVE, node=node)

    def wake_reserve_waiters(self, node: Node, ctx: Step) -> None:
        """What a reservation can take changed (`node` came, came back, grew, or lost its
        reservation): the asks past their reservation delay with no node reserved are judged
        again."""
        self.freed[node.id] = node
        self.planner.state_changed(RESERVABLE, node)
        if self.reserve_waiters:
            waiters = list(self.reserve_waiters.values())
            self.reserve_waiters.clear()  # (the places' own dict: it stays the same one)
            for ask in waiters:
                self.wake(ask, ctx)
        if self.pool.gates:
            self._opened(self.pool.open_reserving())

    def _opened(self, gates: list[Gate]) -> None:
        """Gates a wake-up opened: the walk judges their asks again (also if it had this pass:
        opening a gate shows it again, `RoomWaits.showing`)."""
        if gates:
            self.woken += 1


# the place table's names, read once (compiled, an enum's member is looked up on its class at every use)
_PEND: Final = AskPlaceEvent.PEND
_PARK: Final = AskPlaceEvent.PARK
_PARK_TO_RESERVE: Final = AskPlaceEvent.PARK_TO_RESERVE
_POOL_TO_RESERVE: Final = AskPlaceEvent.POOL_TO_RESERVE
_WAKE: Final = AskPlaceEvent.WAKE
_RESERVE: Final = AskPlaceEvent.RESERVE
_UNRESERVE: Final = AskPlaceEvent.UNRESERVE
_PLACE_LAST: Final = AskPlaceEvent.PLACE_LAST
_DROP: Final = AskPlaceEvent.DROP
_POOLED_TO_RESERVE: Final = AskPlace.POOLED_TO_RESERVE
# the place table by place, then event: two lookups of one enum member each (a member hashes
# in C), where a lookup by the (place, event) pair builds, hashes and compares a tuple
def _by_place(table: dict[tuple[AskPlace, AskPlaceEvent], AskPlace]) -> dict[AskPlace, dict[AskPlaceEvent, AskPlace]]:
    moves: dict[AskPlace, dict[AskPlaceEvent, AskPlace]] = {}
    for (place, event), to in table.items():
        moves.setdefault(place, {})[event] = to
    return moves


_MOVES: Final = _by_place(ASK_PLACE.table)


class AskPlaces:
    """Where each pending ask is: `Ask.place`, by the place table (core/lifecycle.py
    `ASK_PLACE`), and the registries that follow it: its application's active list, the
    places of `WaitPlaces` (`parked`), the gates of `RoomWaits` (`pool`), the gangs' asks
    past their reservation delay with no node to reserve (`reserve_waiters`), and the node
    reserved for it. `move` is the one change of an ask's place (the waits call it, and the
    changes for an ask's last placement, as they take it off its application's list): tests/invariants.py checks after every step that each ask's place agrees with
    its `waiting`, `pooled` and `reserved` and with these registries."""

    __slots__ = ("pool", "parked", "reserve_waiters", "reserved_nodes")

    def __init__(self, pool: RoomWaits, reserved_nodes: dict[str, Node]) -> None:
        self.pool = pool
        self.parked = WaitPlaces()
        # the nodes reserved for asks, by id (in no decision's order: readers sort them), read
        # by the planner's backfill (core/backfill.py)
        self.reserved_nodes = reserved_nodes
        # asks (of gangs) past the reservation delay that found no node to reserve: judged
        # again when a node comes, comes back, grows, or is freed of its reservation
        self.reserve_waiters: dict[tuple[str, str], Ask] = {}

    def reservation_restored(self, ask: Ask, node: Node) -> None:
        """A loaded ask's reserved node (its place is derived: `restore_place`)."""
        node.reserved = ask
        self.reserved_nodes[node.id] = node

    def move(self, ask: Ask, event: AskPlaceEvent, where: Wait | None = None, node: Node | None = None) -> None:
        """`event` moves `ask` (IllegalTransition if the table does not allow it where it is):
        it leaves the registry of its place for the one of its new place. `where`: the place
        it parks at (PARK); `node`: the node reserved for it (RESERVE), or that was (UNRESERVE,
        None if gone)."""
        old = ask.place
        moves = _MOVES.get(old)
        new = moves.get(event) if moves is not None else None
        if new is None:
            new = ASK_PLACE.advance(old, event)  # a move it does not list: IllegalTransition, naming it
        ask.place = new
        if event is _RESERVE:
            assert node is not None
            ask.reserved = node.id
            node.reserved = ask
            self.reserved_nodes[node.id] = node
            if old is _POOLED_TO_RESERVE:  # it waits to reserve a node no more: behind its room gate alone
                self.pool.leave(ask)
                self.pool.enter(ask, False)
            return
        if event is _UNRESERVE:
            found = self.reserved_nodes.get(ask.reserved)
            if found is not None and (found is node or node is None):
                del self.reserved_nodes[ask.reserved]
            ask.reserved = ""
            if node is not None and node.reserved is ask:
                node.reserved = None
            return
        if event is _PLACE_LAST:  # Changes.allocate took it off its application's list as it booked it
            return
        if new is old and ask.pooled:  # judged behind an open gate and pooled again as it was: nothing moves
            return
        if event is not _PEND:
            w = ask.waiting
            if ask.pooled:
                self.pool.leave(ask)
            elif w is None:
                ask.app.active.remove(ask.entry)
            else:  # (already gone if its place let it go: `WaitPlaces.take`)
                self.parked.remove(ask, w)
                if w is NODE_ROOM and self.reserve_waiters:
                    who = (ask.app.id, ask.key)
                    if who in self.reserve_waiters:
                        del self.reserve_waiters[who]
        if event is _WAKE or event is _PEND:
            ask.waiting = None
            ask.app.active.add(ask.entry)
        elif event is _PARK:
            assert where is not None
            ask.waiting = where
            self.parked.add(ask, where)
        elif event is _DROP:
            ask.waiting = None
        else:  # waiting for room
            ask.waiting = NODE_ROOM
            if event is _PARK_TO_RESERVE:
                self.parked.add(ask, NODE_ROOM)
                self.reserve_waiters[(ask.app.id, ask.key)] = ask
            else:
                self.pool.enter(ask, event is _POOL_TO_RESERVE)


def restore_place(ask: Ask, now: int, delay: int, whole: bool) -> None:
    """A loaded ask's place (core/snapshot.py), from what the snapshot holds: its pending
    count, where it waits, the node reserved for it and, waiting for room, whether it is past
    its reservation delay `delay` at `now` (as the restore registers it, core/applier.py).
    `whole`: it waits with a gang or a topology set (core/topoplace.py `waits_whole`)."""
    w = ask.waiting
    app = ask.app
    to_reserve = bool(w is NODE_ROOM and not ask.reserved and ask.since and now - ask.since >= delay
                      and not (ask.placeholder and app.gang))
    if not ask.pending:
        place = AskPlace.NOT_PENDING
    elif w is None:
        place = AskPlace.RESERVED_ACTIVE if ask.reserved else AskPlace.ACTIVE
    elif w is NODE_ROOM and not whole:
        place = (AskPlace.RESERVED_POOLED if ask.reserved else
                 AskPlace.POOLED_TO_RESERVE if to_reserve else AskPlace.POOLED)
    else:
        place = (AskPlace.RESERVED_PARKED if ask.reserved else
                 AskPlace.PARKED_TO_RESERVE if to_reserve else AskPlace.PARKED)
    ask.place = place
