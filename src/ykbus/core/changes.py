"""The changes an RM asks of a partition: its queue configuration, user and group limits,
nodes, applications and their lifecycle, asks, allocations and releases. `Changes` is a
component the partition holds (`part.changes`) over its records, waits and ledger: each
change keeps the waits current (core/indexes.py, `Waits`) and books through the ledger.
The plan's commit (core/applier.py) books and releases through it too; the pass is
core/partition.py's.
"""

from __future__ import annotations

from typing import Final

from ykbus import limits
from ykbus.core.backfill import ask_limit_ms, lent_by
from ykbus.core.config import (
    PartitionConfig,
    QueueConfig,
)
from ykbus.core.events import (
    AllocationBooked,
    AllocationRecovered,
    AllocationReleased,
    AppAdded,
    AppExpired,
    AppRejected,
    AppTransitioned,
    PlaceholderTimerStarted,
    RoomWaitStarted,
)
from ykbus.core.gang import gang_covered
from ykbus.core.holds import DomainHolds, loses_room
from ykbus.core.indexes import Waits
from ykbus.core.ledger import Ledger, index_victim
from ykbus.core.lifecycle import (
    ALLOCATION,
    APP,
    ASK,
    NODE,
    AllocationEvent,
    AppEvent,
    AppState,
    AskEvent,
    AskPlace,
    AskPlaceEvent,
    AskState,
    NodeEvent,
    NodeState,
)
from ykbus.core.model import (
    NODE_ROOM,
    Alloc,
    App,
    AppHistory,
    Ask,
    AskSpec,
    LimitRoom,
    Node,
    Queue,
    Replacement,
    Shape,
    Terminated,
    Tracker,
    Victims,
    app_of,
    ask_spec,
    is_placeholder,
    tracker_key,
    ugi_groups,
)
from ykbus.core.placement import AppPlacement, apply_template
from ykbus.core.resources import Res, add_into, sub_into
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
from ykbus.core.usergroups import app_limits
from ykbus.si import messages as m

# read once: compiled code looks a module it did not compile up at every use (23 M instructions
# over the demo's log, when read through `m` on every release)
PLACEHOLDER_REPLACED: Final = m.TerminationType.PLACEHOLDER_REPLACED

PLACE_LAST: Final = AskPlaceEvent.PLACE_LAST  # (read once: compiled, a member is looked up on its class at every use)
_RELEASE_EVENTS: Final = {
    m.TerminationType.TIMEOUT: AllocationEvent.TIMEOUT,
    m.TerminationType.PREEMPTED_BY_SCHEDULER: AllocationEvent.PREEMPT,
}


class Changes:
    """What an RM changes (the module's docstring), over the partition's records, through
    its waits for what follows and its ledger for what is booked."""

    def __init__(self, records: PartitionState, waits: Waits, ledger: Ledger, holds: DomainHolds) -> None:
        # where pending asks wait and what follows; the place of each, by its one move (core/indexes.py)
        self.records, self.waits, self.places = records, waits, waits.places
        self.ledger = ledger  # the one place resources move
        self.holds = holds  # topology domains reserved by waiting gangs (core/holds.py)

    def apply_config(self, config: PartitionConfig, ctx: Step) -> list[str]:
        """Install (or hot-swap) the queue tree; returns the paths that went draining."""
        records, levels, delay = self.records, self.records.topology_levels, self.records.reservation_delay_ns
        records.configured(config)
        seen: dict[str, Queue] = {}
        configure_tree(records.root, config.root, True, seen)
        draining = []
        for path, queue in list(records.queues.items()):
            if path not in seen and queue.managed and not queue.draining:
                queue.draining = True
                queue.draining_since = ctx.ts
                draining.append(path)
        records.queues.update(seen)
        for path in draining:
            records.remove_if_empty(records.queues[path])
        for queue in sorted(records.queues.values(), key=_depth):  # parents first: a child inherits from them
            if not queue.managed:
                apply_template(queue)
        self.holds.levels_changed(levels, ctx)
        self.waits.reindex_nodes()
        self.waits.recompute_priorities(records.root)
        self.waits.rekey_all(only_fair=False)
        self.retrack(ctx)
        for queue in list(records.queues.values()):
            self.waits.wake_queue(queue, ctx)
            self.waits.wake_app_waiters(queue)
        for tracker in list(records.trackers.values()):
            self.waits.wake_limit(tracker, ctx)
            self.waits.wake_app_waiters(tracker)  # type: ignore[arg-type]
        self.index_victims()
        for node in records.nodes.values():  # a new max or limit may hold a reserved ask now: judged again
            held = node.reserved
            if held is not None and held.waiting is not None:
                self.waits.wake(held, ctx)
        if records.reservation_delay_ns != delay and records.apps:
            delay_changed(self.records, self.waits, ctx)
        return draining

    def index_victims(self) -> None:
        """Keep the leaves' allocations that may be preempted by class (core/ledger.py) while a
        rule could take them: the partition preempts and a queue has a guarantee or preempts
        by priority inside it. Rebuilt whole: a reload can move that either way."""
        records, ledger = self.records, self.ledger
        records.victims_indexed = records.preempts() and any(q.guaranteed or q.preempt_within for q in records.queues.values())
        ledger.index_victims(records.victims_indexed)
        for q in records.queues.values():
            q.victims = {}
        if ledger.indexed:
            for alloc in records.allocations.values():
                index_victim(alloc)

    def place(self, msg: m.AddApplicationRequest) -> tuple[Queue | None, str]:
        """The leaf queue for a new application, or None and why; nothing changed (yet)."""
        return AppPlacement(self.records).place(msg)

    def _attach(self, leaf: Queue) -> None:
        """The queues placement chose to create on `leaf`'s path join the tree, root first."""
        records = self.records
        for q in reversed(leaf.ancestry()):
            if q.path not in records.queues:
                assert q.parent is not None and q.parent.path in records.queues, q.path
                q.parent.children[q.name] = q
                records.queues[q.path] = q

    def _track(self, app: App) -> None:
        """Find (or make) the trackers of the limits that apply to `app`, leaf to root."""
        app.trackers = []
        for q, kind, name, lim in app_limits(app.path, app.user, app.groups):
            key = tracker_key(q, kind, name)
            t = self.records.trackers.get(key)
            if t is None:
                t = self.records.trackers[key] = Tracker(q, kind, name, lim)
            t.apps += 1
            app.trackers.append(t)

    def retrack(self, ctx: Step) -> None:
        """Rebuild every tracker from the live state (after a reload or a snapshot load):
        counts from the applications, waiters from the asks that wait for a limit."""
        records = self.records
        trackers = records.trackers  # filled in place: the partition reads the same dict
        old = dict(trackers)
        trackers.clear()
        for app in records.apps.values():
            self._track(app)
            for t in app.trackers:
                add_into(t.allocated, app.allocated)
                if app.state is AppState.RUNNING:
                    t.running += 1
        for key in self.waits.parked.keys(LimitRoom):  # asks held by a limit that is gone: judged again
            if key not in records.trackers:
                self.waits.wake_at(LimitRoom, key, ctx)
        for t in old.values():
            new = records.trackers.get(t.key)
            for app in t.app_waiters.values():
                if new is not None:
                    new.app_waiters[app.id] = app
                    app.blocked_on = new
                else:
                    app.blocked_on = None
                    self.waits.sync_app(app)

    def add_node(self, info: m.NodeInfo, capacity: Res, occupied: Res, ctx: Step) -> Node:
        records = self.records
        node = Node(info.nodeID, dict(info.attributes), capacity, occupied)
        records.nodes[node.id] = node
        add_into(records.total, capacity)
        records.rekey = True
        self.waits.index_node(node)
        self.waits.wake_reserve_waiters(node, ctx)
        self.waits.wake_node(node, ctx)
        return node

    def update_node(self, node: Node, attributes: dict[str, str] | None, capacity: Res | None,
                    occupied: Res, ctx: Step) -> None:
        records = self.records
        holder = node.held if node.held and loses_room(node, attributes, capacity, occupied,
                                                       records.config.topology.levels) else ""
        if attributes:
            node.attributes = dict(attributes)
        if capacity is not None:
            sub_into(records.total, node.capacity)
            node.capacity = capacity
            add_into(records.total, capacity)
            records.rekey = True
        node.occupied = occupied
        node.recompute_free()
        self.waits.index_node(node)
        held = node.reserved
        if held is not None and any(node.capacity.get(r, 0) - occupied.get(r, 0) < v for r, v in held.resource.items()):
            self.waits.unreserve(held, ctx, wake=True)  # it shrank below the ask: the reservation cannot be honoured
        if capacity is not None or node.reserved is None:
            self.waits.wake_reserve_waiters(node, ctx)
        self.waits.wake_node(node, ctx)
        if holder:
            self.holds.host_changed(holder, ctx)

    def node_event(self, node: Node, event: NodeEvent, ctx: Step) -> None:
        was = node.state
        node.state = NODE.advance(was, event)
        if node.held and was is NodeState.SCHEDULABLE and node.state is not NodeState.SCHEDULABLE:  # drained, going
            self.holds.host_changed(node.held, ctx)
        self.waits.index_node(node)
        if node.reserved is not None and node.state is not NodeState.SCHEDULABLE:  # drained or going
            self.waits.unreserve(node.reserved, ctx, wake=True)
        if node.state is NodeState.SCHEDULABLE:
            self.waits.wake_reserve_waiters(node, ctx)
        self.waits.wake_node(node, ctx)

    def decommission(self, node: Node, ctx: Step) -> None:
        records = self.records
        for alloc in list(node.allocations.values()):
            self.release(alloc, m.TerminationType.STOPPED_BY_RM, f"node {node.id} decommissioned", ctx)
        self.holds.node_left(node.id, ctx)  # (one of the nodes a gang reserved: no longer)
        self.node_event(node, NodeEvent.DECOMMISSION, ctx)
        sub_into(records.total, node.capacity)
        records.rekey = True
        del records.nodes[node.id]

    def add_app(self, msg: m.AddApplicationRequest, queue: Queue, ctx: Step) -> App:
        records = self.records
        self._attach(queue)
        records.seq += 1
        app = app_of(msg, queue, records.seq, ctx.ts)
        records.apps[app.id] = app
        ended = records.terminated.pop(app.id, None)  # an ended application of the same id is forgotten
        queue.apps[app.id] = app
        self._track(app)
        ctx.emit(self.records, AppAdded(app, ended.state if ended is not None else None, app.state))
        return app

    def app_event(self, app: App, event: AppEvent, ctx: Step, message: str = "") -> None:
        old = app.state
        new = APP.advance(old, event)
        if new is old:
            return
        app.state = new
        app.timer += 1  # a timer set before this transition is stale
        app.history.entered(ctx.ts, str(new))  # a StrEnum's str() is its value (no property lookup)
        ctx.emit(self.records, AppTransitioned(app, old, new, message, app.timer))
        if new is AppState.RUNNING:
            for q in app.path:
                q.running += 1
            for t in app.trackers:
                t.running += 1
            if app.blocked_on is not None:  # a recovered allocation started it: maxapplications holds it no more
                app.blocked_on.app_waiters.pop(app.id, None)
                app.blocked_on = None
                app.why = None
        if old is AppState.RUNNING:
            for q in app.path:
                q.running -= 1
            for q in app.path:
                self.waits.wake_app_waiters(q)
            for t in app.trackers:
                t.running -= 1
                self.waits.wake_app_waiters(t)  # type: ignore[arg-type]
        if new in (AppState.COMPLETED, AppState.FAILED):
            self._forget_app(app)
            self.records.terminated[app.id] = Terminated(new, ctx.ts, message, app.queue.path, app.history)
            for _ in range(min(2, len(self.records.terminated) - limits.TERMINATED_KEPT)):  # the oldest go before
                self.expire(*next(iter(self.records.terminated.items())), ctx, early=True)  # their 3 days (2: to shrink)
        self.waits.sync_app(app)

    def reject_app(self, msg: m.AddApplicationRequest, queue: str, reason: str, ctx: Step) -> None:
        """Remember that application `msg` was rejected (for readers; the newest
        limits.REJECTED_KEPT are kept, one per id)."""
        history = AppHistory(ctx.ts, msg.ugi.user, ugi_groups(msg.ugi), [(ctx.ts, AppState.REJECTED.value)])
        rejected = self.records.rejected
        dropped = 1 if rejected.pop(msg.applicationID, None) is not None else 0
        rejected[msg.applicationID] = Terminated(AppState.REJECTED, ctx.ts, reason, queue, history)
        if len(rejected) > limits.REJECTED_KEPT:
            del rejected[next(iter(rejected))]
            dropped += 1
        ctx.emit(self.records, AppRejected(msg.applicationID, queue, dropped))

    def expire(self, app_id: str, ended: Terminated, ctx: Step, early: bool = False) -> None:
        """Ended `app_id`'s record goes (`early`: the partition keeps limits.TERMINATED_KEPT)."""
        del self.records.terminated[app_id]
        ctx.emit(self.records, AppExpired(app_id, ended.state, ended.ts + limits.TERMINATED_TIMEOUT_NS if early else 0))

    def _forget_app(self, app: App) -> None:
        records = self.records
        if app.blocked_on is not None:
            app.blocked_on.app_waiters.pop(app.id, None)
            app.blocked_on = None
        self.waits.deactivate(app)
        for t in app.trackers:
            t.apps -= 1
            if not t.apps:
                del records.trackers[t.key]
        app.trackers = []
        del records.apps[app.id]
        del app.queue.apps[app.id]
        records.remove_if_empty(app.queue)
        app.asks.clear()  # no application <-> ask cycle left behind: refcounting frees both
        app.active.clear()

    def remove_app(self, app: App, ctx: Step, termination: m.TerminationType, message: str) -> None:
        """Release everything the application holds, then end it (Completed, or Failed)."""
        for alloc in list(app.allocations.values()):
            self.release(alloc, termination, message, ctx, check_done=False)
        for ask in list(app.asks.values()):
            self.drop_ask(ask, ctx)
        self.app_event(app, AppEvent.REMOVE, ctx, message)

    def fail_app(self, app: App, ctx: Step, message: str) -> None:
        self.app_event(app, AppEvent.FAIL, ctx, message)
        for alloc in list(app.allocations.values()):  # the RM was told to stop a preempted one already
            self.release(alloc, m.TerminationType.TIMEOUT, message, ctx, check_done=False, report=not alloc.preempting)
        for ask in list(app.asks.values()):
            self.drop_ask(ask, ctx)
        self.app_event(app, AppEvent.FAILED, ctx, message)

    def check_done(self, app: App, ctx: Step) -> None:
        if not app.asks and not app.allocations and app.state in (AppState.ACCEPTED, AppState.RESUMING, AppState.RUNNING):
            self.app_event(app, AppEvent.COMPLETE, ctx, "no asks and no allocations left")

    def add_ask(self, msg: m.AllocationAsk, app: App, resource: Res, ctx: Step) -> None:
        records = self.records
        ask = app.asks.get(msg.allocationKey)
        spec, resource, shape = limited_spec(msg, app, resource, records)
        if ask is not None:
            self.waits.unpend(ask, ctx)
            ask.update(spec, resource, shape)
            ask.reported = ""
            if ask.pending and ask.state is not AskState.PENDING:
                ask.state = ASK.advance(ask.state, AskEvent.REPLACE)
        else:
            records.seq += 1
            ask = Ask(msg.allocationKey, app, spec, resource, shape, records.seq, ctx.ts)
            if app.recovered:
                _count_recovered(ask, app.recovered.pop(ask.key, 0))
            app.asks[ask.key] = ask
            if ask.placeholder:
                app.history.placeholder_asked(ask.task_group, ask.resource, ask.pending)
        if ask.pending:
            self.waits.pend(ask, ctx)
            if ask.placeholder and app.gang:  # the gang may be whole now
                self.waits.rejudge_gang(app, ctx)
        if app.state in (AppState.NEW, AppState.COMPLETING):
            self.app_event(app, AppEvent.RUN, ctx, "ask added")
        self.waits.sync_app(app)

    def release_ask(self, ask: Ask, ctx: Step) -> None:
        self.drop_ask(ask, ctx)
        self.waits.rejudge_set(ask, ctx)  # the asks sent with it: their set's total changed
        self.waits.sync_app(ask.app)
        self.check_done(ask.app, ctx)

    def drop_ask(self, ask: Ask, ctx: Step) -> None:
        self.waits.unpend(ask, ctx)
        ask.state = ASK.advance(ask.state, AskEvent.RELEASE)
        if ask.allocated == 0:
            ask.app.asks.pop(ask.key, None)
        self.holds.ask_left(ask.app, ask, ctx)

    def recover(self, alloc_msg: m.Allocation, app: App, node: Node, resource: Res, ctx: Step) -> None:
        """Count an allocation the RM runs (recovery), not issued again; its queue's limit, from now."""
        alloc = Alloc(alloc_msg.UUID, alloc_msg.allocationKey, app, node, self.records.intern(resource)[0],
                      alloc_msg.priority, alloc_msg.allocationTags, alloc_msg.taskGroupName,
                      is_placeholder(alloc_msg), ctx.seq, ctx.ts)
        policy = alloc_msg.preemptionPolicy
        alloc.preempt_self, alloc.originator = policy is None or policy.allowPreemptSelf, alloc_msg.originator
        alloc.limit_ms = 0 if alloc.placeholder else ask_limit_ms(0, False, app.path)  # its queue's (docs/time.md)
        self.ledger.book(alloc, False)
        self.waits.index_node(node)  # the node index and the application's order follow
        self.waits.usage_moved(app)
        _recovered_of(app, alloc.key, self.waits, ctx)
        ctx.emit(self.records, AllocationRecovered(alloc))
        if alloc.placeholder and app.gang:  # recovered placeholders count: the timer runs from now
            self.start_placeholder_timer(app, ctx)
            self.waits.rejudge_gang(app, ctx)  # its waiting placeholders' reasons name the gang's total
            if not gang_covered(app):  # a gang runs once its placeholders cover placeholderAsk; till then
                if app.state is AppState.NEW:  # Accepted, as an ask makes it (its timeout judges it so)
                    self.app_event(app, AppEvent.RUN, ctx, "placeholder recovered")
                return
        if app.state in (AppState.NEW, AppState.ACCEPTED, AppState.RESUMING, AppState.COMPLETING):
            self.app_event(app, AppEvent.ALLOCATE, ctx, "allocation recovered")

    def start_placeholder_timer(self, app: App, ctx: Step) -> None:
        if app.gang and app.gang_timer == 0:
            app.gang_timer = 1
            ctx.emit(self.records, PlaceholderTimerStarted(app, app.gang_timer))

    def allocate(self, ask: Ask, node: Node, ctx: Step, backfill: bool = False, replaces: bool = False) -> None:
        """`backfill`: it takes room reserved for another ask (core/backfill.py); `replaces`:
        the room of the placeholder it replaces, whoever reserved the node since."""
        if node.reserved is not None and node.reserved is not ask and not (backfill or replaces):
            raise AssertionError(f"node {node.id} is reserved for {node.reserved.key}: it cannot take {ask.key}")
        app, records = ask.app, self.records
        alloc = Alloc(ctx.next_uuid(records.uuid_taken), ask.key, app, node, ask.resource, ask.priority, ask.tags,
                      ask.task_group, ask.placeholder, ctx.seq, ctx.ts, ask.at)
        alloc.preempt_self, alloc.originator = ask.preempt_self, ask.originator
        alloc.limit_ms = 0 if ask.placeholder else ask.timeout_ms  # its runtime limit (core/backfill.py)
        alloc.lent = lent_by(node) if backfill else ""  # whose reserved room it took (the read API, explain)
        self.ledger.book(alloc, True)
        self.waits.index_node(node)  # the node index and the application's order follow
        self.waits.usage_moved(app)
        ask.pending -= 1
        ctx.pending_moved(records, ask)
        ask.allocated += 1
        ask.reported = ""
        if ask.pending == 0:
            app.active.remove(ask.entry)
            ask.state = ASK.advance(ask.state, AskEvent.ALLOCATE_LAST)
            self.waits.ask_not_pending(ask, ctx)
        if app.state is not AppState.RUNNING and (not alloc.placeholder or not app.gang or gang_covered(app)):
            self.app_event(app, AppEvent.ALLOCATE, ctx, "first allocation")
        if ask.reserved:  # placed, on its node or another: the reservation has done its job
            self.waits.unreserve(ask, ctx)
        ask.since = 0  # placed: it waits for room no more
        if not ask.pending:  # placed in full: no place (it left its application's list above)
            self.places.move(ask, PLACE_LAST)
        ctx.emit(records, AllocationBooked(alloc, ask.timeout_ms))
        self.waits.sync_app(app)

    def release(self, alloc: Alloc, termination: m.TerminationType, message: str, ctx: Step,
                check_done: bool = True, report: bool = True) -> None:
        """Release an allocation and report it to the RM with `termination` (not when the
        RM itself confirmed a release the core asked for: `report` False)."""
        event = _RELEASE_EVENTS.get(termination, AllocationEvent.STOP)
        alloc.state = ALLOCATION.advance(alloc.state, event)
        node, app = alloc.node, alloc.app
        replaced = termination is PLACEHOLDER_REPLACED
        app.history.released(alloc, replaced, not replaced, ctx.ts)
        self.ledger.unbook(alloc)
        self.waits.index_node(node)  # (as in `allocate`)
        self.waits.usage_moved(app)
        ask = app.asks.get(alloc.key)
        if ask is not None:
            ask.allocated -= 1
            if ask.allocated == 0 and ask.pending == 0:
                del app.asks[ask.key]
        elif app.recovered:  # a recovered one no ask counts
            _forget_recovered(app.recovered, alloc.key)
        ctx.emit(self.records, AllocationReleased(alloc, termination, message, report))
        if alloc.replacing:  # released otherwise than replaced: the real ask is an ordinary one again
            self.waits.wake_at(Replacement, alloc.uuid, ctx)
        if alloc.preempting:  # a victim gone: the ask it was preempted for is judged again (placed once it fits)
            node.preempting -= 1
            if not node.preempting:
                self.records.preempted.pop(node.id, None)
            self.waits.wake_at(Victims, node.id, ctx)
        for q in app.path:
            self.waits.wake_queue(q, ctx)
        for t in app.trackers:
            self.waits.wake_limit(t, ctx)
        self.waits.wake_node(node, ctx)
        if check_done:
            self.check_done(app, ctx)


def _recovered_of(app: App, key: str, waits: Waits, ctx: Step) -> None:
    """An allocation of `key` recovered: if its ask came first, one of its allocations is
    this one; else an ask of that key sent later counts it (an RM sends its pending pods
    again after a restart: they are not placed twice)."""
    ask = app.asks.get(key)
    if ask is None:
        app.recovered[key] = app.recovered.get(key, 0) + 1
        return
    if ask.state is AskState.RELEASED:  # the RM released it: one more allocation of it, nothing pending
        ask.allocated += 1
        return
    waits.unpend(ask, ctx)
    if _count_recovered(ask, ask.allocated + 1):
        waits.pend(ask, ctx)


def _count_recovered(ask: Ask, allocated: int) -> bool:
    """`ask` has `allocated` allocations (some recovered, not placed by it): its pending
    allocations are what its maxAllocations leaves; whether any are."""
    ask.allocated = allocated
    ask.pending = max(0, ask.max_allocations - allocated)
    if not ask.pending and ask.state is AskState.PENDING:
        ask.state = ASK.advance(ask.state, AskEvent.ALLOCATE_LAST)
    return ask.pending > 0


def _forget_recovered(recovered: dict[str, int], key: str) -> None:
    left = recovered.get(key, 0) - 1
    if left > 0:
        recovered[key] = left
    else:
        recovered.pop(key, None)


def configure_tree(q: Queue, qc: QueueConfig, inherited: bool, seen: dict[str, Queue]) -> None:
    """Configure `q` and its subtree from `qc`, creating the queues it names (`seen`: the
    paths configured)."""
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
        configure_tree(child, child_cfg, q.sort_priority, seen)
    # keep the configured order of children; draining ones stay after them
    order = [c.name for c in qc.queues]
    q.children = {n: q.children[n] for n in order} | {
        n: c for n, c in q.children.items() if n not in order
    }


def check_reload(records: PartitionState, config: PartitionConfig) -> list[str]:
    """Why a new configuration cannot be installed over `records`, if it cannot (read only)."""
    errors = []

    def walk(qc: QueueConfig, path: str) -> None:
        live = records.queues.get(path)
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


def limited_spec(msg: m.AllocationAsk, app: App, resource: Res,
                 records: PartitionState) -> tuple[AskSpec, Res, Shape]:
    """What `msg` asks for, its timeout the runtime limit in force in `app`'s queue
    (core/backfill.py `ask_limit_ms`: its own, else the queue's default, capped by the
    queue's maximum), and its interned resource and shape (which name the limit)."""
    spec = ask_spec(msg)
    spec.timeout_ms = ask_limit_ms(spec.timeout_ms, spec.placeholder, app.path)
    interned, shape = records.intern(resource, 0 if spec.placeholder else spec.timeout_ms)
    return spec, interned, shape


def delay_changed(records: PartitionState, waits: Waits, ctx: Step) -> None:
    """The reservation delay changed (a reload). An ask waiting for room whose mark (past
    its delay: it may reserve a node) the new delay turns is woken, and the pass parks it
    again as the new delay says, as a snapshot's load derives it; one not past the new delay
    gets its reservation timer there."""
    delay, now = records.reservation_delay_ns, ctx.ts
    for app in records.apps.values():
        gang = bool(app.gang)
        for ask in app.asks.values():
            if ask.waiting is not NODE_ROOM or ask.reserved or not ask.since:
                continue
            due = now - ask.since >= delay
            if ask.placeholder and gang:  # a gang waiting to reserve a domain or nodes: judged then
                if app.holding is None:
                    if due:
                        waits.wake(ask, ctx)
                    else:
                        ctx.emit(records, RoomWaitStarted(ask, ask.since, ask.since + delay, 0))
                continue
            if (ask.place is AskPlace.POOLED_TO_RESERVE or ask.place is AskPlace.PARKED_TO_RESERVE) != due:
                waits.wake(ask, ctx)
            if not due:
                ctx.emit(records, RoomWaitStarted(ask, ask.since, ask.since + delay, 0))


def _depth(queue: Queue) -> int:
    return queue.path.count(".")
