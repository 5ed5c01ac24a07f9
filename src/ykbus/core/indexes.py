"""What follows from the records of a partition, kept as they change: the node index (and
the planner's caches over it), the active applications and their order, application and
queue priorities, pending sums, and where each pending ask waits and what wakes it
(core/partition.py's docstring has the theory; core/waits.py the gates of asks waiting for
room).
"""

from __future__ import annotations

from typing import Any

from ykbus.core import why
from ykbus.core.config import (
    AppSortPolicy,
)
from ykbus.core.effects import Event, ReasonChanged, derive
from ykbus.core.gang import pending_placeholders
from ykbus.core.lifecycle import (
    SCHEDULABLE_APP_STATES,
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
from ykbus.core.outbox import Outbox
from ykbus.core.resources import add_into, fits, scaled, sub_into
from ykbus.core.scheduling import Scheduler
from ykbus.core.state import PartitionState
from ykbus.core.waits import POOLED_RESERVING, Gate
from ykbus.si import messages as m


class IndexedPartition(PartitionState):
    scheduler: Scheduler  # the planner: its caches follow the node index

    def _index_node(self, node: Node) -> None:
        old = node.key
        index = self.node_index
        if old is not None:
            index.remove(old)
            node.key = None
        if node.state is NodeState.SCHEDULABLE:
            node.key = self.scorer.key(node)
            self.node_index.add(node.key)
        finder = self.scheduler.finder
        if finder.fit_cache or finder.reservable_cache:
            finder.node_moved(node, old)
        if self.policies.orderings:
            self.policies.node_moved(node)
        if self.usage.watched:
            self.usage.moved(node)

    def _reindex_nodes(self) -> None:
        self.node_index.clear()
        self.policies.clear()
        for node in self.nodes.values():
            node.key = None
            self._index_node(node)

    def _rekey_all(self, only_fair: bool) -> None:
        for q in self.queues.values():
            if q.leaf and (not only_fair or q.sort_policy is AppSortPolicy.FAIR):
                for entry in list(q.active_apps):
                    self._rekey_app(entry[-1])
                pooled = {e[-1].id: e[-1] for apps in q.pooled_apps.values() for e in apps if e[-1].entry is None}
                for app in pooled.values():  # (the active ones were, with their active entries)
                    self.pool.rekey(app)

    def _recompute_priorities(self, q: Queue) -> None:
        """Rebuild the priority caches of `q`'s subtree from scratch (after a reload)."""
        if q.leaf:
            count_app_priorities(q)
            prios = list(q.app_prios)
        else:
            for child in q.children.values():
                self._recompute_priorities(child)
            prios = [
                p for c in q.children.values() if c.active or c.pending
                for p in (c.exposed_priority(),) if p is not None
            ]
        q.raw_priority = max(prios) if prios else None
        q.sort_key = None

    def _sync_app(self, app: App) -> None:
        want = bool(app.active) and app.blocked_on is None and app.state in SCHEDULABLE_APP_STATES
        if want and app.entry is None:
            app.entry = self._app_key(app)
            app.queue.active_apps.add((*app.entry, app))
            for q in app.path:
                q.active += 1
        elif not want and app.entry is not None:
            self._deactivate(app)

    def _deactivate(self, app: App) -> None:
        if app.entry is not None:
            app.queue.active_apps.remove((*app.entry, app))
            app.entry = None
            for q in app.path:
                q.active -= 1

    def _rekey_app(self, app: App) -> None:
        if app.entry is not None:
            key = self._app_key(app)
            if key != app.entry:  # a fifo leaf's keys mostly stay: no sorted-list move then
                app.queue.active_apps.remove((*app.entry, app))
                app.entry = key
                app.queue.active_apps.add((*key, app))
        if app.pool_key is not None:
            self.pool.rekey(app)

    def _ask_pending(self, ask: Ask) -> None:
        app = ask.app
        if is_leader(ask):
            app.leaders_waiting += 1
        counts = app.priorities
        counts[ask.priority] = counts.get(ask.priority, 0) + 1
        if app.max_priority is None or ask.priority > app.max_priority:
            old = app.max_priority
            app.max_priority = ask.priority
            self._app_priority_changed(app, old)

    def _ask_not_pending(self, ask: Ask) -> None:
        app = ask.app
        if is_leader(ask):  # placed (or gone): its workers go on, or wait for the next leader (their reason names it)
            app.leaders_waiting -= 1
            self._wake_leader_waiters(app)
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
            self._rekey_app(app)
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
            exposed = [c.exposed_priority() for c in q.children.values() if c.active or c.pending]
            value = max((p for p in exposed if p is not None), default=None)
            if value == q.raw_priority:
                break
            q.raw_priority = value
            q.sort_key = None
            q = q.parent

    def _pend(self, ask: Ask) -> None:
        """Count `ask`'s pending allocations and make it active."""
        self._add_pending(ask)
        ask.app.active.add(ask.entry)
        self.pending_codes.tally(ask)
        self._ask_pending(ask)

    def _add_pending(self, ask: Ask) -> None:
        """`ask`'s pending allocations count in its application's and its queues' pending."""
        total = scaled(ask.resource, ask.pending)
        add_into(ask.app.pending, total)
        for q in ask.app.path:
            add_into(q.pending, total)
            q.sort_key = None

    def _unpend(self, ask: Ask) -> None:
        """Undo `_pend` for what is still pending, wherever the ask waits."""
        if ask.reserved:
            self._unreserve(ask)
        ask.since = 0
        if not ask.pending:
            return
        if ask.placeholder and ask.app.gang:  # its gang, and the real asks waiting for it, are judged again
            self._rejudge_gang(ask.app)  # (this ask too: it is active then, and leaves its list below)
        total = scaled(ask.resource, ask.pending)
        sub_into(ask.app.pending, total)
        for q in ask.app.path:
            sub_into(q.pending, total)
            q.sort_key = None
        self._unwait(ask)
        if ask.waiting is None:
            ask.app.active.remove(ask.entry)
        ask.waiting = None
        ask.pending = 0
        self.pending_codes.tally(ask)
        self._ask_not_pending(ask)

    def _unwait(self, ask: Ask) -> None:
        """`ask` leaves the registry of the place it waits (its `waiting` is left to the caller)."""
        w = ask.waiting
        if ask.pooled:
            self.pool.leave(ask)
        elif w is not None:
            self.waits.remove(ask, w)
            if w is NODE_ROOM and self.reserve_waiters:
                self.reserve_waiters.pop((ask.app.id, ask.key), None)

    def _wait(self, ask: Ask, where: Wait, state: m.SchedulingState, reason: why.Why, ctx: Outbox,
              reserving: bool = False) -> None:
        """Park `ask` at `where` with its reason (moving it there if it waits elsewhere); the
        RM hears the reason once per change. `reserving`: waiting for room, it is past its
        reservation delay with no node to reserve."""
        pooled = where is NODE_ROOM and not ask.app.gang
        if pooled and ask.pooled and (ask.pooled == POOLED_RESERVING) == reserving:
            pass  # judged behind an open gate and parked again where it was: nothing moves
        else:
            if ask.waiting is None:
                ask.app.active.remove(ask.entry)
            else:
                self._unwait(ask)
            if pooled:
                self.pool.enter(ask, reserving)
        ask.waiting = where
        ask.why = reason
        self.pending_codes.tally(ask)
        if not pooled:
            self.waits.add(ask, where)
            if reserving and where is NODE_ROOM:
                self.reserve_waiters[(ask.app.id, ask.key)] = ask
        if reason.message != ask.reported:
            ask.reported = reason.message
            self._emit(ReasonChanged(ask, state, reason.message), ctx)

    def _emit(self, event: Event, ctx: Outbox) -> None:
        """A change the RM hears of or that sets a deadline: core/effects.py derives both."""
        derive(self, event, ctx)

    def _wake(self, ask: Ask) -> None:
        """A waiting ask is active again (its waiting place already let it go)."""
        if ask.waiting is None:  # woken once already by another of the places that knew it
            return
        if self.reserve_waiters:  # it may also be listed as past its reservation delay
            self.reserve_waiters.pop((ask.app.id, ask.key), None)
        self.woken += 1
        ask.waiting = None
        ask.why = None
        self.pending_codes.tally(ask)
        ask.app.active.add(ask.entry)
        self._sync_app(ask.app)

    def settle(self) -> None:
        """After the entry's pass (or instead of it): the asks behind gates still open are made
        active, as an eager wake-up would have left them (core/waits.py)."""
        if self.pool.open:
            for ask in self.pool.let_through():
                self.pool.leave(ask)
                self._wake(ask)
        self.scheduler.gates_settled()

    def _activate(self, ask: Ask) -> None:
        """A waiting ask about to be placed (or placed by the next pass): active again, in
        its application's list, at once (not a wake-up: the pass goes on as it was)."""
        self._unwait(ask)
        ask.waiting = None
        ask.why = None
        self.pending_codes.tally(ask)
        ask.app.active.add(ask.entry)

    def _wake_at(self, kind: type, key: Any) -> None:
        """Every ask waiting at one place (a `Wait` kind and its key) is judged again."""
        for ask in self.waits.take(kind, key):
            self._wake(ask)

    def _rejudge_gang(self, app: App) -> None:
        """The gang changed (a placeholder came or went): every pending placeholder, wherever
        it waits, and every real ask waiting on the gang, are judged again (their reasons
        name the gang's total)."""
        self._wake_gang(app)
        for ask in pending_placeholders(app):
            if ask.waiting is not None:
                self._unwait(ask)
                self._wake(ask)

    def _wake_gang(self, app: App) -> None:
        self._wake_at(GangWait, app.id)

    def _wake_leader_waiters(self, app: App) -> None:
        """A leader of `app` no longer waits to be placed: its workers are judged again."""
        self._wake_at(LeaderWait, app.id)

    def _wake_node(self, node: Node) -> None:
        """`node` changed (added, freed, resized, drained, back, going): wake the asks that
        must run on it, to be judged again, and the waiting shapes that now fit it; if it is
        reserved, its room serves the ask it is reserved for alone, and the gates of the
        shapes it fits open when the reservation goes (`_unreserve` wakes the node again)."""
        self._wake_at(RequiredNode, node.id)
        if node.state is not NodeState.SCHEDULABLE:
            return
        held = node.reserved
        if held is not None and held.pooled and fits(held.resource, node.free):
            self.pool.leave(held)  # its own node has room for it now: judged again at once
            self._wake(held)
        room = self.waits.kinds.get(NodeRoom)  # gangs' asks waiting for room, by shape
        fitting = [s for s, waiters in room.items()
                   if fits(next(iter(waiters.values())).resource, node.free)] if room else []
        for shape in fitting:
            if held is None:
                self._wake_at(NodeRoom, shape)
                continue
            # reserved for `held`: it takes no other ask, so an ask reserved elsewhere
            # cannot gain by its room (its own node, or a node free of reservations, would
            # wake it when it changes); the others are judged again as ever
            for ask in list(self.waits.at(NodeRoom, shape).values()):
                if not ask.reserved or ask is held:
                    self.waits.remove(ask, NODE_ROOM)
                    self._wake(ask)
        if self.pool.shapes and held is None:
            self._opened(self.pool.open_fitting(node))

    def _wake_queue(self, q: Queue) -> None:
        """Usage in `q` fell (or its max rose): the asks its max held are judged again."""
        self._wake_at(QueueRoom, q.path)

    def _wake_limit(self, t: Tracker) -> None:
        """Usage under a user or group limit fell: the asks it held are judged again."""
        self._wake_at(LimitRoom, t.key)

    def _wake_app_waiters(self, q: Queue | Tracker) -> None:
        if q.app_waiters:
            waiters, q.app_waiters = q.app_waiters, {}
            self.woken += 1
            for app in waiters.values():
                app.blocked_on = None
                self._sync_app(app)

    def _unreserve(self, ask: Ask, wake: bool = False) -> None:
        """Drop `ask`'s reservation; its node takes other asks again. `wake`: the ask waits
        on, to be judged again (its reason would be stale)."""
        node = self.nodes.get(ask.reserved)
        ask.reserved = ""
        if node is not None and node.reserved is ask:
            node.reserved = None
            self.scheduler.failed_shapes.clear()  # a shape that failed for want of this node may fit it now
            self._wake_reserve_waiters(node)
            self._wake_node(node)
        if wake and ask.waiting is not None:
            self._unwait(ask)
            self._wake(ask)

    def _wake_reserve_waiters(self, node: Node) -> None:
        """What a reservation can take changed (`node` came, came back, grew, or lost its
        reservation): the asks past their reservation delay with no node reserved are judged
        again."""
        self.scheduler.reservable(node)
        if self.reserve_waiters:
            waiters, self.reserve_waiters = self.reserve_waiters, {}
            for ask in waiters.values():
                self._unwait(ask)
                self._wake(ask)
        if self.pool.gates:
            self._opened(self.pool.open_reserving())

    def _opened(self, gates: list[Gate]) -> None:
        """Gates a wake-up opened: the walk judges their asks again (also if it had this pass:
        opening a gate shows it again, `RoomWaits.showing`)."""
        if gates:
            self.woken += 1
