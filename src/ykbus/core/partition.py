"""One partition of one RM: its queue tree, nodes, applications, asks and allocations,
and the scheduling pass over them.

Theory of operation
-------------------
Every pending ask is in exactly one of three places:

* **active**: in its application's `active` list, to be tried by the next pass;
* **waiting for a node**: in `node_waiters[shape]`, after every schedulable node was too
  small for it;
* **waiting for a queue**: in `queue.waiters`, after that queue's `max` would be exceeded;
* **waiting for a limit**: in `tracker.waiters`, after a user or group limit's
  `maxresources` would be exceeded (a `Tracker` counts one user's or group's usage in one
  queue that has a limit for them).

An application is *active* (in its leaf's `active_apps`, counted in `active` of every queue
up to root) when it has active asks, may be scheduled in its state, and is not held back by
a queue's `maxapplications` or a user or group limit's `maxapplications` (then it sits in
that queue's or tracker's `app_waiters`).

A pass (`schedule()`) runs after every entry and loops "walk root -> leaf, try the best
application's asks in order" until nothing more is placed. A failed ask moves to a waiting
place, so each ask is tried once per wake-up and an entry that changes nothing a waiting
ask waits for costs nothing for it. Wake-ups are precise:

1. capacity freed or added on node N wakes only the waiting shapes that now fit N (within a
   pass capacity mostly only shrinks, so a shape that failed once fails again: the
   scheduler's `failed_shapes`, cleared where a pass frees room: a reservation dropped, a
   gang's task group cancelled);
2. usage falling in queue Q (or of a tracked user or group), or a new configuration, wakes
   Q's (the tracker's) waiters;
3. an application leaving Running wakes the `app_waiters` of the queues above it and of its
   trackers.

Ordering (seed: priority-scheduling): asks by priority then submission; applications by
`fifo` (priority, submission), `fair` (priority, dominant share of the partition, submission)
or `stateaware` (fifo, and only the first Accepted application may start); queues by
priority (max of children plus `priority.offset`; a `fence` exposes only its offset) when
the parent sorts by priority, then dominant share of guaranteed, then pending, then name.
Nodes: `fair` least used first, `binpacking` most used first, weighted, ties by node id.

Application, queue and node sort keys are cached and moved in sorted lists when what they
depend on changes; priorities follow the seed's O(1) add / O(n) remove rule.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedList

from ykbus import limits
from ykbus.core import why
from ykbus.core.config import (
    AppSortPolicy,
    PartitionConfig,
    QueueConfig,
)
from ykbus.core.gang import GangAllocate, Replace, gang_covered, pending_placeholders
from ykbus.core.ledger import Ledger
from ykbus.core.lifecycle import (
    ALLOCATION,
    APP,
    ASK,
    NODE,
    SCHEDULABLE_APP_STATES,
    AllocationEvent,
    AppEvent,
    AppState,
    AskEvent,
    AskState,
    NodeEvent,
    NodeState,
)
from ykbus.core.model import (
    GANG_WAIT,
    LEADER_WAIT,
    NODE_WAIT,
    REPLACE_WAIT,
    REQUIRED_WAIT,
    Alloc,
    App,
    Ask,
    Node,
    Queue,
    Terminated,
    Tracker,
    applicable_limits,
    count_app_priorities,
    full_path,
    is_leader,
    tracker_key,
)
from ykbus.core.outbox import Outbox
from ykbus.core.placement import AppPlacement, apply_template
from ykbus.core.policies import NodePolicies
from ykbus.core.resources import Res, add_into, fits, scaled, share, sub_into
from ykbus.core.scheduling import ENDS_WALK, Allocate, Defer, Hold, Park, Plan, Reserve, Scheduler
from ykbus.core.scorers import scorer_for
from ykbus.core.waits import POOLED_RESERVING, RoomWaits
from ykbus.core.timers import (
    AllocationTimeoutTimer,
    AppTimeoutTimer,
    CompletingTimer,
    ExpireTimer,
    PlaceholderTimer,
    ReservationTimer,
    Timers,
)
from ykbus.si import messages as m

_RELEASE_EVENTS = {
    m.TerminationType.TIMEOUT: AllocationEvent.TIMEOUT,
    m.TerminationType.PREEMPTED_BY_SCHEDULER: AllocationEvent.PREEMPT,
}


def _leave(table: dict[Any, dict[tuple[str, str], Ask]], place: Any, ask: Ask) -> None:
    """`ask` leaves the waiters of `place` in `table` (a place left empty goes)."""
    waiters = table.get(place)
    if waiters is not None:
        waiters.pop((ask.app.id, ask.key), None)
        if not waiters:
            del table[place]


class Partition:
    def __init__(self, rm: str, config: PartitionConfig, timers: Timers, incarnation: int = 0) -> None:
        self.rm = rm
        self.incarnation = incarnation  # the input seq that created it
        self.timers = timers
        self.alive = True
        self.name = config.name
        self.nodes: dict[str, Node] = {}
        self.node_index: SortedList = SortedList()
        self.apps: dict[str, App] = {}
        self.terminated: dict[str, Terminated] = {}
        self.allocations: dict[str, Alloc] = {}
        self.uuid_taken = self.allocations.__contains__  # the RM widens it to all its partitions
        self.ledger = Ledger(self.allocations, self._index_node, self._usage_moved)
        self.total: Res = {}
        self.node_waiters: dict[tuple[tuple[str, int], ...], dict[tuple[str, str], Ask]] = {}
        self.required_waiters: dict[str, dict[tuple[str, str], Ask]] = {}  # node id -> asks that must run there
        self.gang_waiters: dict[str, dict[tuple[str, str], Ask]] = {}  # app id -> asks waiting on its gang
        self.leader_waiters: dict[str, dict[tuple[str, str], Ask]] = {}  # app id -> workers waiting on its leader
        self.replace_waiters: dict[str, Ask] = {}  # placeholder uuid -> the real ask taking its place
        # asks past the reservation delay that found no node to reserve: judged again when a
        # node comes, comes back, grows, or is freed of its reservation
        self.reserve_waiters: dict[tuple[str, str], Ask] = {}
        self.woken = 0  # asks and applications made active again: a pass goes on while a commit wakes some
        self.paused = False  # its RM is Paused: nothing is placed (the core sets it from the RM's state)
        self.queues: dict[str, Queue] = {}
        self.root = Queue("root", None)
        self.seq = 0  # submission order of applications and asks
        self.scheduler = Scheduler(self)
        self.policies = NodePolicies()  # the node policies' indexes (core/policies.py)
        self._rekey = False
        self._shapes: dict[tuple[tuple[str, int], ...], tuple[Res, tuple[tuple[str, int], ...]]] = {}
        self.trackers: dict[str, Tracker] = {}
        # ordinary asks waiting for node room, woken by gate (core/waits.py); node_waiters and
        # reserve_waiters keep the others (reserved asks, gangs) and wake them one by one
        self.pool = RoomWaits(self._app_key)
        self.apply_config(config, 0)

    def intern(self, resource: Res) -> tuple[Res, tuple[tuple[str, int], ...]]:
        """One shared (resource dict, shape) per distinct resource vector: asks and
        allocations of the same size share it (never mutated: every change copies)."""
        key = tuple(resource.items())
        found = self._shapes.get(key)
        if found is None:
            found = self._shapes[key] = (resource, tuple(sorted(key)))
        return found

    def _rekey_all(self, only_fair: bool) -> None:
        for q in self.queues.values():
            if q.leaf and (not only_fair or q.sort_policy is AppSortPolicy.FAIR):
                for entry in list(q.active_apps):
                    self._rekey_app(entry[-1])
                pooled = {e[-1].id: e[-1] for apps in q.pooled_apps.values() for e in apps}
                for app in pooled.values():
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

    # --- configuration ---------------------------------------------------------------

    def apply_config(self, config: PartitionConfig, ts: int) -> list[str]:
        """Install (or hot-swap) the queue tree; returns the paths that went draining."""
        self.config = config
        self.node_sort = config.nodesortpolicy.type
        self.weights = config.nodesortpolicy.resourceweights
        self.scorer = scorer_for(self.node_sort, self.weights)
        seen: dict[str, Queue] = {}
        self._configure(self.root, config.root, True, seen)
        draining = []
        for path, queue in list(self.queues.items()):
            if path not in seen and queue.managed and not queue.draining:
                queue.draining = True
                queue.draining_since = ts
                draining.append(path)
        self.queues.update(seen)
        for path in draining:
            self.remove_if_empty(self.queues[path])
        for queue in self.queues.values():
            if not queue.managed:
                apply_template(queue)
        self._reindex_nodes()
        self._recompute_priorities(self.root)
        self._rekey_all(only_fair=False)
        self._retrack()
        for queue in list(self.queues.values()):
            self._wake_queue(queue)
            self._wake_app_waiters(queue)
        for tracker in list(self.trackers.values()):
            self._wake_queue(tracker)  # type: ignore[arg-type]
            self._wake_app_waiters(tracker)  # type: ignore[arg-type]
        for node in self.nodes.values():  # a new max or limit may hold a reserved ask now: judged again
            held = node.reserved
            if held is not None and held.waiting is not None:
                self._unwait(held)
                self._wake(held)
        return draining

    def _configure(self, q: Queue, qc: QueueConfig, inherited: bool, seen: dict[str, Queue]) -> None:
        q.configure(qc, inherited)
        q.managed = True  # configured now, even if a placement rule had created it
        if q.draining:
            q.draining = False
            q.draining_since = 0
        seen[q.path] = q
        for child_cfg in qc.queues:
            child = q.children.get(child_cfg.name)
            if child is None:
                child = Queue(child_cfg.name, q)
                q.children[child.name] = child
            self._configure(child, child_cfg, q.sort_priority, seen)
        # keep the configured order of children; draining ones stay after them
        order = [c.name for c in qc.queues]
        q.children = {n: q.children[n] for n in order} | {
            n: c for n, c in q.children.items() if n not in order
        }

    def check_reload(self, config: PartitionConfig) -> list[str]:
        """Why a new configuration cannot be installed over the live state, if it cannot."""
        errors = []

        def walk(qc: QueueConfig, path: str) -> None:
            live = self.queues.get(path)
            if live is not None and live.leaf and qc.parent and live.apps:
                errors.append(f"queue {path}: cannot become a parent while it has applications")
            if live is not None and not live.leaf and not qc.parent and live.children:
                kids = [c for c in live.children.values() if c.apps or c.children]
                if kids:
                    errors.append(f"queue {path}: cannot become a leaf while it has child queues in use")
            for child in qc.queues:
                walk(child, f"{path}.{child.name}")

        walk(config.root, "root")
        return errors

    def remove_if_empty(self, q: Queue) -> None:
        """Remove a draining or unmanaged queue once empty, then its parent likewise."""
        while q.parent is not None and (q.draining or not q.managed) and not q.apps and not q.children:
            del q.parent.children[q.name]
            del self.queues[q.path]
            q = q.parent

    # --- lookups ---------------------------------------------------------------------

    def resolve_queue(self, name: str) -> Queue | None:
        return self.queues.get(full_path(name))

    # --- placement (core/placement.py) ------------------------------------------------

    def place(self, msg: m.AddApplicationRequest) -> tuple[Queue | None, str]:
        """The leaf queue for a new application, or None and why."""
        return AppPlacement(self).place(msg)

    # --- user and group limits ----------------------------------------------------------

    def _track(self, app: App) -> None:
        """Find (or make) the trackers of the limits that apply to `app`, leaf to root."""
        app.trackers = []
        for q in app.path:
            for kind, name, lim in applicable_limits(q, app.user, app.groups):
                key = tracker_key(q, kind, name)
                t = self.trackers.get(key)
                if t is None:
                    t = self.trackers[key] = Tracker(q, kind, name, lim)
                t.apps += 1
                app.trackers.append(t)

    def _retrack(self) -> None:
        """Rebuild every tracker from the live state (after a reload or a snapshot load):
        counts from the applications, waiters from the asks that wait for a limit."""
        old = self.trackers
        self.trackers = {}
        for app in self.apps.values():
            self._track(app)
            for t in app.trackers:
                add_into(t.allocated, app.allocated)
                if app.state is AppState.RUNNING:
                    t.running += 1
        for t in old.values():
            new = self.trackers.get(t.key)
            for (app_id, key), ask in t.waiters.items():
                if new is not None:
                    new.waiters[(app_id, key)] = ask
                else:
                    self._wake(ask)
            for app in t.app_waiters.values():
                if new is not None:
                    new.app_waiters[app.id] = app
                    app.blocked_on = new
                else:
                    app.blocked_on = None
                    self._sync_app(app)

    # --- nodes -----------------------------------------------------------------------

    def _index_node(self, node: Node) -> None:
        old = node.key
        index = self.node_index
        if old is not None:
            if index[0] == old:  # mostly the node just allocated on is the first: no search
                del index[0]
            else:
                index.remove(old)
            node.key = None
        if node.state is NodeState.SCHEDULABLE:
            node.key = self.scorer.key(node)
            self.node_index.add(node.key)
        if self.scheduler.fit_cache:
            self.scheduler.node_moved(node, old)
        if self.scheduler.reservable_cache:
            self.scheduler.node_reindexed()
        if self.policies.orderings:
            self.policies.node_moved(node)

    def _reindex_nodes(self) -> None:
        self.node_index.clear()
        self.policies.clear()
        for node in self.nodes.values():
            node.key = None
            self._index_node(node)

    def add_node(self, info: m.NodeInfo, capacity: Res, occupied: Res) -> Node:
        node = Node(info.nodeID, dict(info.attributes), capacity, occupied)
        self.nodes[node.id] = node
        add_into(self.total, capacity)
        self._rekey = True
        self._index_node(node)
        self._wake_reserve_waiters()
        self._wake_node(node)
        return node

    def update_node(self, node: Node, attributes: dict[str, str] | None, capacity: Res | None,
                    occupied: Res) -> None:
        if attributes:
            node.attributes = dict(attributes)
        if capacity is not None:
            sub_into(self.total, node.capacity)
            node.capacity = capacity
            add_into(self.total, capacity)
            self._rekey = True
        node.occupied = occupied
        node.recompute_free()
        self._index_node(node)
        held = node.reserved
        if held is not None and any(node.capacity.get(r, 0) - occupied.get(r, 0) < v for r, v in held.resource.items()):
            self._unreserve(held, wake=True)  # it shrank below the ask: the reservation cannot be honoured
        if capacity is not None or node.reserved is None:
            self._wake_reserve_waiters()
        self._wake_node(node)

    def node_event(self, node: Node, event: NodeEvent) -> None:
        node.state = NODE.advance(node.state, event)
        self._index_node(node)
        if node.reserved is not None and node.state is not NodeState.SCHEDULABLE:  # drained or going
            self._unreserve(node.reserved, wake=True)
        if node.state is NodeState.SCHEDULABLE:
            self._wake_reserve_waiters()
        self._wake_node(node)

    def decommission(self, node: Node, ctx: Outbox) -> None:
        for alloc in list(node.allocations.values()):
            self.release(alloc, m.TerminationType.STOPPED_BY_RM, f"node {node.id} decommissioned", ctx)
        self.node_event(node, NodeEvent.DECOMMISSION)
        sub_into(self.total, node.capacity)
        self._rekey = True
        del self.nodes[node.id]

    # --- applications ----------------------------------------------------------------

    def add_app(self, msg: m.AddApplicationRequest, queue: Queue) -> App:
        self.seq += 1
        app = App(msg, queue, self.seq)
        self.apps[app.id] = app
        self.terminated.pop(app.id, None)
        queue.apps[app.id] = app
        self._track(app)
        return app

    def app_event(self, app: App, event: AppEvent, ctx: Outbox, message: str = "") -> None:
        old = app.state
        new = APP.advance(old, event)
        if new is old:
            return
        app.state = new
        ctx.put(self.rm, m.UpdatedApplication(
            applicationID=app.id, state=new.value, stateTransitionTimestamp=ctx.ts, message=message,
        ))
        if new is AppState.RUNNING:
            for q in app.path:
                q.running += 1
            for t in app.trackers:
                t.running += 1
            if app.blocked_on is not None:  # a recovered allocation started it: maxapplications holds it no more
                app.blocked_on.app_waiters.pop(app.id, None)
                app.blocked_on = None
                app.why = None
            if app.timeout_ms > 0 and not app.gang and old is not AppState.COMPLETING:  # a gang's is its placeholders
                app.timer += 1
                self.timers.schedule(ctx.ts + app.timeout_ms * 1_000_000, AppTimeoutTimer(self, app, app.timer))
        if old is AppState.RUNNING:
            for q in app.path:
                q.running -= 1
            for q in app.path:
                self._wake_app_waiters(q)
            for t in app.trackers:
                t.running -= 1
                self._wake_app_waiters(t)  # type: ignore[arg-type]
        if new is AppState.COMPLETING:
            app.timer += 1
            self.timers.schedule(ctx.ts + limits.COMPLETING_TIMEOUT_NS, CompletingTimer(self, app, app.timer))
        if new in (AppState.COMPLETED, AppState.FAILED):
            self._forget_app(app)
            self.terminated[app.id] = Terminated(new, ctx.ts, message, app.queue.path)
            self.timers.schedule(ctx.ts + limits.TERMINATED_TIMEOUT_NS, ExpireTimer(self, app.id, new))
        self._sync_app(app)

    def _forget_app(self, app: App) -> None:
        if app.blocked_on is not None:
            app.blocked_on.app_waiters.pop(app.id, None)
            app.blocked_on = None
        self._deactivate(app)
        for t in app.trackers:
            t.apps -= 1
            if not t.apps:
                del self.trackers[t.key]
        app.trackers = []
        del self.apps[app.id]
        del app.queue.apps[app.id]
        self.remove_if_empty(app.queue)
        app.asks.clear()  # no application <-> ask cycle left behind: refcounting frees both
        app.active.clear()

    def remove_app(self, app: App, ctx: Outbox, termination: m.TerminationType, message: str) -> None:
        """Release everything the application holds, then end it (Completed, or Failed)."""
        for alloc in list(app.allocations.values()):
            self.release(alloc, termination, message, ctx, check_done=False)
        for ask in list(app.asks.values()):
            self._drop_ask(ask)
        self.app_event(app, AppEvent.REMOVE, ctx, message)

    def fail_app(self, app: App, ctx: Outbox, message: str) -> None:
        self.app_event(app, AppEvent.FAIL, ctx, message)
        for alloc in list(app.allocations.values()):
            self.release(alloc, m.TerminationType.TIMEOUT, message, ctx, check_done=False)
        for ask in list(app.asks.values()):
            self._drop_ask(ask)
        self.app_event(app, AppEvent.FAILED, ctx, message)

    def _check_done(self, app: App, ctx: Outbox) -> None:
        if not app.asks and not app.allocations and app.state in (AppState.ACCEPTED, AppState.RESUMING,
                                                                    AppState.RUNNING):
            self.app_event(app, AppEvent.COMPLETE, ctx, "no asks and no allocations left")

    # --- application priority (seed: O(1) add, O(n) remove) --------------------------

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
        """The leaf counts its applications per max priority (the seed's O(1) add, O(distinct
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

    # --- asks ------------------------------------------------------------------------

    def add_ask(self, msg: m.AllocationAsk, app: App, resource: Res, ctx: Outbox) -> None:
        ask = app.asks.get(msg.allocationKey)
        if ask is not None:
            self._unpend(ask)
            ask.update(msg, *self.intern(resource))
            ask.reported = ""
            if ask.pending and ask.state is not AskState.PENDING:
                ask.state = ASK.advance(ask.state, AskEvent.REPLACE)
        else:
            self.seq += 1
            ask = Ask(msg, app, *self.intern(resource), self.seq)
            app.asks[ask.key] = ask
        if ask.pending:
            self._pend(ask)
            if ask.placeholder and app.gang:  # the gang may be whole now
                self._rejudge_gang(app)
        if app.state in (AppState.NEW, AppState.COMPLETING):
            self.app_event(app, AppEvent.RUN, ctx, "ask added")
        self._sync_app(app)

    def _pend(self, ask: Ask) -> None:
        """Count `ask`'s pending allocations and make it active."""
        total = scaled(ask.resource, ask.pending)
        add_into(ask.app.pending, total)
        for q in ask.app.path:
            add_into(q.pending, total)
            q.sort_key = None
        ask.app.active.add(ask.entry)
        self._ask_pending(ask)

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
        self._ask_not_pending(ask)

    def release_ask(self, ask: Ask, ctx: Outbox) -> None:
        self._drop_ask(ask)
        app = ask.app
        self._sync_app(app)
        self._check_done(app, ctx)

    def _drop_ask(self, ask: Ask) -> None:
        self._unpend(ask)
        ask.state = ASK.advance(ask.state, AskEvent.RELEASE)
        if ask.allocated == 0:
            ask.app.asks.pop(ask.key, None)

    def _unwait(self, ask: Ask) -> None:
        if ask.pooled:
            self.pool.leave(ask)
        elif ask.waiting == NODE_WAIT:
            _leave(self.node_waiters, ask.shape, ask)
            if self.reserve_waiters:
                self.reserve_waiters.pop((ask.app.id, ask.key), None)
        elif ask.waiting is not None and ask.waiting.startswith(REQUIRED_WAIT):
            _leave(self.required_waiters, ask.waiting[len(REQUIRED_WAIT):], ask)
        elif ask.waiting is not None and ask.waiting.startswith(GANG_WAIT):
            _leave(self.gang_waiters, ask.waiting[len(GANG_WAIT):], ask)
        elif ask.waiting is not None and ask.waiting.startswith(REPLACE_WAIT):
            self.replace_waiters.pop(ask.waiting[len(REPLACE_WAIT):], None)
        elif ask.waiting is not None and ask.waiting.startswith(LEADER_WAIT):
            _leave(self.leader_waiters, ask.waiting[len(LEADER_WAIT):], ask)
        elif ask.waiting is not None:
            q = self._waiting_place(ask.waiting)
            if q is not None:
                q.waiters.pop((ask.app.id, ask.key), None)

    def _waiting_place(self, where: str) -> Queue | Tracker | None:
        return self.trackers.get(where) if "|" in where else self.queues.get(where)

    def _wait(self, ask: Ask, where: str, state: m.SchedulingState, reason: why.Why, ctx: Outbox,
              reserving: bool = False) -> None:
        """Park `ask` at `where` with its reason (moving it there if it waits elsewhere); the
        RM hears the reason once per change. `reserving`: waiting for room, it is past its
        reservation delay with no node to reserve."""
        pooled = where == NODE_WAIT and not ask.reserved and not ask.app.gang
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
        if pooled:
            pass
        elif where == NODE_WAIT:
            if reserving:
                self.reserve_waiters[(ask.app.id, ask.key)] = ask
            self.node_waiters.setdefault(ask.shape, {})[(ask.app.id, ask.key)] = ask
        elif where.startswith(REQUIRED_WAIT):
            self.required_waiters.setdefault(where[len(REQUIRED_WAIT):], {})[(ask.app.id, ask.key)] = ask
        elif where.startswith(GANG_WAIT):
            self.gang_waiters.setdefault(where[len(GANG_WAIT):], {})[(ask.app.id, ask.key)] = ask
        elif where.startswith(REPLACE_WAIT):
            self.replace_waiters[where[len(REPLACE_WAIT):]] = ask
        elif where.startswith(LEADER_WAIT):
            self.leader_waiters.setdefault(where[len(LEADER_WAIT):], {})[(ask.app.id, ask.key)] = ask
        else:
            self._waiting_place(where).waiters[(ask.app.id, ask.key)] = ask  # type: ignore[union-attr]
        if reason.message != ask.reported:
            ask.reported = reason.message
            ctx.put(self.rm, m.UpdateContainerSchedulingStateRequest(
                applicartionID=ask.app.id, allocationKey=ask.key, state=state, reason=reason.message,
            ))

    def why_pending(self, ask: Ask) -> why.Why:
        """The current reason of a pending ask (O(1): kept as it is parked and woken)."""
        if self.paused:
            return why.rm_paused(self.rm)
        if ask.waiting is not None and ask.why is not None:
            return ask.why
        app = ask.app
        if app.why is not None and (app.blocked_on is not None or app.why.code is why.PendingCode.NOT_ADMITTED):
            return app.why
        return why.QUEUED

    def _wake(self, ask: Ask) -> None:
        """A waiting ask is active again (its waiting place already let it go)."""
        if ask.waiting is None:  # woken once already by another of the places that knew it
            return
        if self.reserve_waiters:  # it may also be listed as past its reservation delay
            self.reserve_waiters.pop((ask.app.id, ask.key), None)
        self.woken += 1
        ask.waiting = None
        ask.why = None
        ask.app.active.add(ask.entry)
        self._sync_app(ask.app)

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
        waiters = self.gang_waiters.pop(app.id, None)
        if waiters:
            for ask in waiters.values():
                self._wake(ask)

    def _wake_leader_waiters(self, app: App) -> None:
        """A leader of `app` no longer waits to be placed: its workers are judged again."""
        if self.leader_waiters:
            for worker in self.leader_waiters.pop(app.id, {}).values():
                self._wake(worker)

    def _wake_node(self, node: Node) -> None:
        """`node` changed (added, freed, resized, drained, back, going): wake the asks that
        must run on it, to be judged again, and the waiting shapes that now fit it."""
        if self.required_waiters:
            for ask in self.required_waiters.pop(node.id, {}).values():
                self._wake(ask)
        if node.state is not NodeState.SCHEDULABLE:
            return
        if self.node_waiters:
            for shape in [s for s in self.node_waiters if fits(dict(s), node.free)]:
                for ask in self.node_waiters.pop(shape).values():
                    self._wake(ask)
        if self.pool.shapes and self.pool.open_fitting(node.free):
            self.woken += 1

    def _wake_queue(self, q: Queue | Tracker) -> None:
        if q.waiters:
            waiters, q.waiters = q.waiters, {}
            for ask in waiters.values():
                self._wake(ask)

    def _wake_app_waiters(self, q: Queue | Tracker) -> None:
        if q.app_waiters:
            waiters, q.app_waiters = q.app_waiters, {}
            self.woken += 1
            for app in waiters.values():
                app.blocked_on = None
                self._sync_app(app)

    # --- active applications ---------------------------------------------------------

    def _app_key(self, app: App) -> tuple[Any, ...]:
        """The sort key of `app` in its leaf (the list holds `(*key, app)`)."""
        leaf = app.queue
        prio = -(app.max_priority or 0) if leaf.sort_priority else 0
        if leaf.sort_policy is AppSortPolicy.FAIR:
            return (prio, share(app.allocated, self.total, {}), app.seq)
        return (prio, 0.0, app.seq)

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

    # --- allocations -----------------------------------------------------------------

    def recover(self, alloc_msg: m.Allocation, app: App, node: Node, resource: Res, ctx: Outbox) -> None:
        """Count an allocation the RM already runs (recovery), without issuing it again."""
        alloc = Alloc(alloc_msg.UUID, alloc_msg.allocationKey, app, node, self.intern(resource)[0],
                      alloc_msg.priority, alloc_msg.allocationTags, alloc_msg.taskGroupName,
                      alloc_msg.placeholder, ctx.seq)
        self.ledger.book(alloc)
        if alloc.placeholder and app.gang:  # recovered placeholders count: the timer runs from now
            self._start_placeholder_timer(app, ctx)
            if not gang_covered(app):
                return  # a gang runs once its placeholders cover placeholderAsk
        if app.state in (AppState.NEW, AppState.ACCEPTED, AppState.RESUMING, AppState.COMPLETING):
            self.app_event(app, AppEvent.ALLOCATE, ctx, "allocation recovered")

    def _usage_moved(self, app: App) -> None:
        """The ledger moved `app`'s usage: under `fair` that moves it in its leaf."""
        if app.queue.sort_policy is AppSortPolicy.FAIR:
            self._rekey_app(app)

    def _allocate(self, ask: Ask, node: Node, ctx: Outbox) -> None:
        if node.reserved is not None and node.reserved is not ask:
            raise AssertionError(f"node {node.id} is reserved for {node.reserved.key}: it cannot take {ask.key}")
        app = ask.app
        alloc = Alloc(ctx.next_uuid(self.uuid_taken), ask.key, app, node, ask.resource, ask.priority, ask.tags,
                      ask.task_group, ask.placeholder, ctx.seq)
        self.ledger.book(alloc, placed=True)
        ask.pending -= 1
        ask.allocated += 1
        ask.reported = ""
        if ask.pending == 0:
            active = app.active
            if active[0][-1] is ask:  # mostly it is the first: no search
                del active[0]
            else:
                active.remove(ask.entry)
            ask.state = ASK.advance(ask.state, AskEvent.ALLOCATE_LAST)
            self._ask_not_pending(ask)
        if app.state is not AppState.RUNNING and (not alloc.placeholder or not app.gang or gang_covered(app)):
            self.app_event(app, AppEvent.ALLOCATE, ctx, "first allocation")
        if ask.reserved:  # placed, on its node or another: the reservation has done its job
            self._unreserve(ask)
        ask.since = 0
        if ask.timeout_ms > 0:
            self.timers.schedule(ctx.ts + ask.timeout_ms * 1_000_000, AllocationTimeoutTimer(self, alloc, ask.timeout_ms))
        ctx.put(self.rm, alloc.message(self.name))
        self._sync_app(app)

    def release(self, alloc: Alloc, termination: m.TerminationType, message: str, ctx: Outbox,
                check_done: bool = True, report: bool = True) -> None:
        """Release an allocation and report it to the RM with `termination` (not when the
        RM itself confirmed a release the core asked for: `report` False)."""
        event = _RELEASE_EVENTS.get(termination, AllocationEvent.STOP)
        alloc.state = ALLOCATION.advance(alloc.state, event)
        node, app = alloc.node, alloc.app
        self.ledger.unbook(alloc)
        ask = app.asks.get(alloc.key)
        if ask is not None:
            ask.allocated -= 1
            if ask.allocated == 0 and ask.pending == 0:
                del app.asks[ask.key]
        if report:
            ctx.put(self.rm, m.AllocationRelease(
                partitionName=self.name, applicationID=app.id, UUID=alloc.uuid,
                terminationType=termination, message=message, allocationKey=alloc.key,
            ))
        if alloc.replacing:  # released otherwise than replaced: the real ask is an ordinary one again
            waiter = self.replace_waiters.pop(alloc.uuid, None)
            if waiter is not None:
                self._wake(waiter)
        for q in app.path:
            self._wake_queue(q)
        for t in app.trackers:
            self._wake_queue(t)
        self._wake_node(node)
        if check_done:
            self._check_done(app, ctx)

    # --- the pass: plans (core/scheduling.py), committed here ------------------------

    def schedule(self, ctx: Outbox) -> None:
        """Plan and commit until a walk places nothing (or the entry's budget is spent)."""
        if self._rekey:  # the total or the configuration changed: every queue key may have
            for q in self.queues.values():
                q.sort_key = None
            self._rekey = False
            self._rekey_all(only_fair=True)
        scheduler = self.scheduler
        scheduler.start(ctx.ts)
        pool = self.pool
        try:
            while (self.root.active or pool.open and pool.shows(self.root)) and ctx.budget_left:
                plan = scheduler.plan()
                woken = self.woken
                self.commit(plan, ctx)
                if not plan:
                    break
                last = plan[-1].__class__
                if last is not Allocate and last not in ENDS_WALK and self.woken == woken:
                    break  # the walk saw everything active, and committing it woke nothing
        finally:
            scheduler.finish()
            self.settle()

    def settle(self) -> None:
        """After the entry's pass (or instead of it): the asks behind gates still open are made
        active, as an eager wake-up would have left them (core/waits.py)."""
        if self.pool.open:
            for ask in self.pool.let_through():
                self.pool.leave(ask)
                self._wake(ask)

    def commit(self, plan: Plan, ctx: Outbox) -> None:
        """The one applier: apply a plan's decisions in order."""
        for decision in plan:
            if isinstance(decision, Allocate):
                ask = decision.ask
                ask.app.why = None
                if ask.waiting is not None:  # judged behind an open gate (core/waits.py): active again first
                    self._unwait(ask)
                    ask.waiting = None
                    ask.why = None
                    ask.app.active.add(ask.entry)
                self._allocate(ask, decision.node, ctx)
            elif isinstance(decision, Park):
                self._park(decision, ctx)
            elif isinstance(decision, Reserve):
                self._reserve(decision.ask, decision.node, ctx)
            elif isinstance(decision, Hold):
                self._hold(decision.app, decision.on, decision.why, ctx)
            elif isinstance(decision, Defer):
                decision.app.why = decision.why
            elif isinstance(decision, GangAllocate):
                self._place_gang(decision.app, decision.places, ctx)
            elif isinstance(decision, Replace):
                self._replace(decision.ask, decision.placeholder, ctx)
            else:  # CancelGroup: capacity of a TIMEOUT release is free at once
                for ph in decision.placeholders:
                    self.release(ph, m.TerminationType.TIMEOUT, decision.message, ctx)
                if decision.placeholders:  # room grew within the pass: a shape that found none may now
                    self.scheduler.failed_shapes.clear()

    def _park(self, decision: Park, ctx: Outbox) -> None:
        ask = decision.ask
        app = ask.app
        app.why = None
        where = decision.where
        if where == NODE_WAIT and not (ask.placeholder and app.gang):
            delay = self.config.reservationdelay_ms * 1_000_000
            if not ask.since:  # it starts waiting for room: it may reserve a node later
                ask.since = ctx.ts
                self.timers.schedule(ctx.ts + delay, ReservationTimer(self, app, ask.key, ctx.ts))
            elif not ask.reserved and ctx.ts - ask.since >= delay:  # past it: no node to reserve
                self._wait(ask, where, decision.state, decision.why, ctx, reserving=True)
                if not app.active:
                    self._sync_app(app)
                return
        elif not where.startswith(REQUIRED_WAIT):  # held by a max, a limit, its gang: not by room
            if ask.reserved:
                self._unreserve(ask)
            ask.since = 0
        self._wait(ask, where, decision.state, decision.why, ctx)
        if not app.active:
            self._sync_app(app)

    def _hold(self, app: App, on: Queue | Tracker, reason: why.Why, ctx: Outbox) -> None:
        """`app` waits in `on`'s app_waiters until it runs fewer applications."""
        app.why = reason
        app.blocked_on = on
        on.app_waiters[app.id] = app
        self._sync_app(app)
        for _, _, ask in list(app.active):
            if ask.reported != reason.message:
                ask.reported = reason.message
                ctx.put(self.rm, m.UpdateContainerSchedulingStateRequest(
                    applicartionID=app.id, allocationKey=ask.key,
                    state=m.SchedulingState.SKIPPED, reason=reason.message,
                ))

    # --- gangs (core/gang.py, docs/gang.md) -------------------------------------------

    def _place_gang(self, app: App, places: list[tuple[Ask, Node]], ctx: Outbox) -> None:
        """Every pending placeholder of the gang at once; its placeholder timer starts."""
        for ask, node in places:
            if ask.waiting is not None:  # parked with the gang until now: back in its list first
                self._unwait(ask)
                ask.waiting = None
                ask.why = None
                app.active.add(ask.entry)
            app.why = None
            self._allocate(ask, node, ctx)
        self._start_placeholder_timer(app, ctx)
        self._wake_gang(app)  # its real asks: they may take their places now

    def _start_placeholder_timer(self, app: App, ctx: Outbox) -> None:
        if app.gang and app.gang_timer == 0:
            app.gang_timer = 1
            self.timers.schedule(ctx.ts + app.placeholder_timeout_ms * 1_000_000, PlaceholderTimer(self, app, 1))

    def _replace(self, ask: Ask, ph: Alloc, ctx: Outbox) -> None:
        """Ask the RM to release placeholder `ph` for real `ask`; `ask` waits for that."""
        ph.replacing = ask.key
        app = ask.app
        app.why = None
        self._wait(ask, REPLACE_WAIT + ph.uuid, m.SchedulingState.SKIPPED, why.replacing(ph.uuid, ph.node.id), ctx)
        if not app.active:
            self._sync_app(app)
        ctx.put(self.rm, m.AllocationRelease(
            partitionName=self.name, applicationID=app.id, UUID=ph.uuid,
            terminationType=m.TerminationType.PLACEHOLDER_REPLACED, allocationKey=ph.key,
            message=f"placeholder {ph.uuid} is replaced by {ask.key}"))

    def confirm_replacement(self, ph: Alloc, ctx: Outbox) -> None:
        """The RM released placeholder `ph` (`PLACEHOLDER_REPLACED`): the real ask it was
        released for is allocated on its node, counted with its own resources from now."""
        app, node = ph.app, ph.node
        ask = self.replace_waiters.pop(ph.uuid, None)
        ph.replacing = ""  # replaced, not abandoned: `release` must not wake the ask as an ordinary one
        self.release(ph, m.TerminationType.PLACEHOLDER_REPLACED, "", ctx, check_done=False, report=False)
        if ask is not None and ask.pending:
            ask.waiting = None
            ask.why = None
            app.active.add(ask.entry)
            if node.state is NodeState.SCHEDULABLE and fits(ask.resource, node.free) and (
                    node.reserved is None or node.reserved is ask):
                self._allocate(ask, node, ctx)
            else:  # the node drained or shrank meanwhile: an ordinary ask, placed by the next pass
                self._sync_app(app)
        self._check_done(app, ctx)

    def placeholder_timeout(self, app: App, ctx: Outbox) -> None:
        """The gang's placeholder timeout: unused placeholders go (TIMEOUT, free at once),
        pending ones are removed; an application not yet Running resumes as an ordinary
        one (Soft) or fails (Hard); a Running one only loses what it did not use."""
        app.gang_timer = -1
        message = f"placeholder timeout of {app.placeholder_timeout_ms} ms reached"
        for alloc in list(app.allocations.values()):
            if alloc.placeholder and not alloc.replacing:
                self.release(alloc, m.TerminationType.TIMEOUT, message, ctx, check_done=False)
        for ask in pending_placeholders(app):
            self._drop_ask(ask)
            ctx.put(self.rm, m.AllocationAskRelease(
                partitionName=self.name, applicationID=app.id, allocationKey=ask.key,
                terminationType=m.TerminationType.TIMEOUT, message=message))
        self._wake_gang(app)  # real asks waiting for placeholders: ordinary asks now
        if app.state is AppState.ACCEPTED:
            if app.gang_hard:
                self.fail_app(app, ctx, message)
                return
            self.app_event(app, AppEvent.RESUME, ctx, message)
        self._sync_app(app)
        self._check_done(app, ctx)

    # --- reservations (docs/scheduling.md) -------------------------------------------------

    def _reserve(self, ask: Ask, node: Node, ctx: Outbox) -> None:
        ask.reserved = node.id
        node.reserved = ask
        ask.app.why = None
        where = REQUIRED_WAIT + node.id if ask.required else NODE_WAIT
        self._wait(ask, where, m.SchedulingState.RESERVED, why.reserved(node.id, ask.resource), ctx)
        if not ask.app.active:
            self._sync_app(ask.app)

    def _unreserve(self, ask: Ask, wake: bool = False) -> None:
        """Drop `ask`'s reservation; its node takes other asks again. `wake`: the ask waits
        on, to be judged again (its reason would be stale)."""
        node = self.nodes.get(ask.reserved)
        ask.reserved = ""
        if node is not None and node.reserved is ask:
            node.reserved = None
            self.scheduler.failed_shapes.clear()  # a shape that failed for want of this node may fit it now
            self._wake_reserve_waiters()
            self._wake_node(node)
        if wake and ask.waiting is not None:
            self._unwait(ask)
            self._wake(ask)

    def _wake_reserve_waiters(self) -> None:
        """What a reservation can take changed: the asks past their reservation delay with no
        node reserved are judged again."""
        self.scheduler.none_to_reserve.clear()
        if self.reserve_waiters:
            waiters, self.reserve_waiters = self.reserve_waiters, {}
            for ask in waiters.values():
                self._unwait(ask)
                self._wake(ask)
        if self.pool.gates and self.pool.open_reserving():
            self.woken += 1

    def reservation_due(self, timer: ReservationTimer) -> None:
        """An ask has waited for room the reservation delay: the next pass may reserve for it."""
        ask = timer.app.asks.get(timer.key)
        if ask is not None and ask.since == timer.since and ask.waiting == NODE_WAIT and not ask.reserved:
            self._unwait(ask)
            self._wake(ask)
