"""The scheduling pass: decisions as values.

`Scheduler.plan()` walks the partition's model, root to leaf, the way the pass always has
(queues by priority, then dominant share of guaranteed, then pending, then name;
applications in their leaf's order; asks by priority then submission) and returns the
decisions of one walk as a `Plan`: every ask it parks on the way (`Park`, with its typed
reason), every application a `maxapplications` holds (`Hold`) or a `stateaware` queue
defers (`Defer`), and at most one `Allocate`, last. It reads the model and changes
nothing in it: what it learns on the way that the waits and records keep (the gates it
judged, the queue keys it computed) is a value too, `Learned`, first in the plan; the only
state it keeps is its own caches (the shapes that found no node, the nodes that fit a
shape, the node policies' orders, reasons formatted once), told of what changes under them
through one call, `state_changed`. `Applier.commit` is the one applier: it applies a plan
in order, moving resources through the ledger.

A pass is `plan, commit, plan, commit, ...` until a plan places nothing. Committing a walk's
parks before the next walk gives the same decisions as deciding and applying each in turn:
parking an ask changes no sort key (queue and application keys depend on usage, pending
and priority, which parking leaves alone), so the next walk finds the same place to go on.

Because `plan()` applies nothing, a what-if is a plan that is not committed: "where would
the next ask go, and why would the others wait" is `plan()` read and dropped
(tests/core/test_scheduling.py checks that planning leaves the state byte for byte as it was;
with `partition.CHECK_PURE` on, as in the tests, every plan of every pass is checked to
leave the partition's whole object graph as it was, core/purity.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from ykbus.core import why
from ykbus.core.backfill import Backfill, reserved_why
from ykbus.core.decisions import (
    Allocate,
    Backfilled,
    CancelGroup,
    CancelReservation,
    Decision,
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
    ends_walk,
)
from ykbus.core.gang import lost_member, pending_placeholders, plan_gang, plan_sets, replacement_for, waits_for_gang
from ykbus.core.lifecycle import SCHEDULABLE_APP_STATES, AppState, NodeState
from ykbus.core.model import (
    NODE_ROOM,
    RECOVERY_QUEUE,
    App,
    Ask,
    Node,
    Queue,
    Shape,
    pending_leader,
    required_node,
    victims,
)
from ykbus.core.nodefinder import GangOverlay, NodeFinder
from ykbus.core.policies import NodePolicies
from ykbus.core.preemption import delay_ms, not_yet, not_yet_text, preemption_for, required_node_victims
from ykbus.core.queueprops import AppSortPolicy
from ykbus.core.resources import first_over, fits, fmt_quantity, fmt_res
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.tags import ROLE_TAG, WORKER_ROLE
from ykbus.core.topoplace import (
    NodeDomains,
    NodeSetHold,
    TopologyPlacer,
    asks_for_domains,
    gang_request,
    in_set,
    kept_domain,
    request_for,
)
from ykbus.core.waits import Gate, RoomWaits
from ykbus.si import messages as m

if TYPE_CHECKING:
    from ykbus.core.state import PartitionState

SMALL_SORT = 8  # siblings sorted by insertion (no call per comparison); more: by `sorted`
NO_ROOM_SHAPES = 4096  # NoNodeRoom reasons kept, one per shape (then the cache starts over)
# members of enums of modules that are not compiled, read once: compiled code reads an
# attribute of such a class by name, at every read
SKIPPED: Final = m.SchedulingState.SKIPPED
FAILED: Final = m.SchedulingState.FAILED
RESERVED: Final = m.SchedulingState.RESERVED
STATEAWARE: Final = AppSortPolicy.STATEAWARE
_ACCEPTED: Final = AppState.ACCEPTED
NEXT: Final = next  # (likewise a builtin mypyc does not specialise: found by name at every call)

# what changed under the planner's caches (`Scheduler.state_changed`), as the waits and the
# applier tell it
NODE_MOVED: Final = 0  # a node's room or state moved (`node`; `detail`: its old index key)
RESERVABLE: Final = 1  # a reservation may take `node` (it came, came back, grew, or lost its reservation)
ROOM_FREED: Final = 2  # room grew within the pass (a reservation dropped, placeholders cancelled)
NODES_REINDEXED: Final = 3  # every node is indexed again (a new node order)
NONE_TO_RESERVE: Final = 4  # the asks of shape `detail` find no node to reserve (the waits closed its gate)


class Scheduler:
    __slots__ = ("part", "pool", "node_index", "finder", "policies", "domains", "topology", "failed_shapes", "none_to_reserve", "no_room",
                 "later", "reserved_reasons", "over", "claimed", "now", "tried", "showing", "closed", "keys", "topo", "backfill")

    def __init__(self, partition: PartitionState, pool: RoomWaits, node_index: SortedSeq,
                 reserved_nodes: dict[str, Node]) -> None:
        self.part = partition  # the records (read)
        self.pool = pool  # the room gates the partition's waits keep (read)
        self.node_index = node_index  # the node index the waits keep (read)
        self.finder = NodeFinder(partition, pool, node_index)  # which node an ask takes or reserves, and its caches
        # the node policies' orders (core/policies.py): built on first use, kept as nodes move
        self.policies = NodePolicies()
        # scratch of one pass: within a pass free capacity only shrinks, so a shape that
        # found no node finds none again
        self.failed_shapes: set[Shape] = set()
        # the shapes that found no node to reserve, until what a reservation can take changes
        # (a node comes, comes back, grows, or loses its reservation: `RESERVABLE` forgets
        # them all); kept across passes
        self.none_to_reserve: dict[Shape, None] = {}
        # shape -> its NoNodeRoom reason, the same value for every ask of that shape (reasons
        # are frozen): formatted once, not once per ask parked (kept across passes)
        self.no_room: dict[Shape, why.Why] = {}
        # (why not yet, shape, leaf, delay) -> the NoNodeRoom reason of an ask that may preempt
        # but has not looked for victims, saying why (`_preempts_later`): likewise shared
        self.later: dict[tuple[int, Shape, str, int], why.Why] = {}
        # (node, shape) -> the Reserved reason of an ask of that shape reserving the node,
        # where no allocation has a runtime limit (core/backfill.py `reserved_why`): likewise
        self.reserved_reasons: dict[tuple[str, Shape], why.Why] = {}
        # scratch of one pass: (queue or tracker, resource, used, asked) -> the reason of an ask
        # a max or limit holds. A release in a queue at its max wakes every ask waiting for it;
        # all but the one placed park again for the same reason: formatted once, not once each
        self.over: dict[tuple[Any, str, int, int], why.Why] = {}
        self.claimed: set[str] = set()  # placeholders this walk's Replace decisions take
        self.domains: TopologyPlacer | None = None  # the topology domains as this walk sees them (core/topoplace.py)
        self.topology = NodeDomains(partition, node_index)  # the domains of the nodes, kept as they move
        # reservations' estimated starts, for asks with a runtime limit (core/backfill.py): one plan's
        self.backfill = Backfill(partition, reserved_nodes)
        self.now = 0  # the entry's log time: whether an ask has waited long enough to reserve
        self.topo = False  # its partition has topology levels (set at each walk)
        self.tried: list[str] | None = None  # a list: the key of every ask judged is appended (tests)
        # scratch of one walk: the gates whose asks it shows (`pool.showing` as the walk
        # starts, less those it judged), and what it learned for the applier (`Learned`: the
        # gates it judged, the queue keys it computed), handed over with the plan
        self.showing: dict[Gate, None] = {}
        self.closed: list[Gate] = []
        self.keys: list[tuple[Queue, tuple[Any, ...]]] = []

    def start(self, now: int) -> None:
        self.failed_shapes.clear()
        if self.over:
            self.over.clear()
        self.finder.start()
        self.now = now

    def finish(self) -> None:
        self.finder.clear()

    # --- one walk ----------------------------------------------------------------------

    def plan(self) -> Plan:
        """The decisions of one walk from root (empty when nothing is active)."""
        plan: Plan = []
        if self.has_work():
            self.backfill.forget()
            if self.claimed:
                self.claimed.clear()
            self.domains = None
            self.topo = bool(self.part.topology_levels)  # read once a walk (asked per application)
            showing = self.showing  # the walk's copy: it judges gates in it, not in the pool
            if showing:
                showing.clear()
            if self.pool.showing:
                showing.update(self.pool.showing)
            ended = False  # an allocation is planned (or a decision ends the walk otherwise: `ends_walk`)
            for app in self._walk(self.part.root, plan):  # the applications in order (Defers in `plan`)
                if app.state is _ACCEPTED:
                    held = maxapplications(app)
                    if held is not None:
                        plan.append(held)
                        continue
                if app.gang:
                    ended = self._gang(app, plan)
                elif self.topo and asks_for_domains(app):  # sets placed whole in a domain
                    ended = self._sets(app, plan)
                else:  # the common case: every ask on its own
                    leader_waits = app.leaders_waiting > 0  # then its workers wait (one int read for every other app)
                    for entry in self._asks_of(app) if app.pooled and self.pool.open else app.active:
                        ask: Ask = entry[-1]
                        decision = (_worker(app, ask) if leader_waits and ask.tags.get(ROLE_TAG) == WORKER_ROLE
                                    else self._ask(ask))
                        plan.append(decision)
                        if ends_walk(decision):
                            ended = True
                            break
                if ended:
                    break
            if self.closed or self.keys:  # applied first: learned from the state the decisions start from
                plan.insert(0, Learned(self.closed, self.keys))
                self.closed = []
                self.keys = []
        return plan

    def _domains(self) -> TopologyPlacer:
        domains = self.domains
        if domains is None:
            domains = self.domains = TopologyPlacer(self.part, self.node_index, self.topology.current(), self.backfill)
        return domains

    def has_work(self) -> bool:
        """Whether a walk has anything to try: active asks, or asks behind a gate shown."""
        root = self.part.root
        return root.active > 0 or bool(self.pool.open) and shows(root, self.pool.showing)

    def state_changed(self, change: int, node: Node | None = None, detail: Any = None) -> None:
        """What changed under the planner's own caches, as the waits and the applier tell it
        (the one way in: `change` is one of NODE_MOVED, RESERVABLE, ROOM_FREED,
        NODES_REINDEXED, NONE_TO_RESERVE)."""
        if change == NODE_MOVED:
            assert node is not None
            finder = self.finder
            if finder.fit_cache or finder.reservable_cache:
                finder.node_moved(node, detail)
            policies = self.policies
            if policies.orderings:
                policies.node_moved(node)
            topology = self.topology
            if topology.index is not None:  # (built at the first topology gang: else nothing to keep)
                topology.node_moved(node)
        elif change == RESERVABLE:
            assert node is not None
            self.none_to_reserve.clear()
            self.finder.candidate_moved(node)
        elif change == ROOM_FREED:  # within a pass: a shape that found no node may find one now
            self.failed_shapes.clear()
        elif change == NODES_REINDEXED:
            self.policies.clear()
            self.topology.reset()
        else:
            assert change == NONE_TO_RESERVE
            self.none_to_reserve[detail] = None

    def _close(self, gate: Gate) -> None:
        """The walk judged `gate`'s asks: it shows them no more, and the waits close it
        (`Learned.closed`)."""
        if gate in self.showing:
            del self.showing[gate]
            self.closed.append(gate)

    def _queue_key(self, parent: Queue, q: Queue) -> tuple[Any, ...]:
        """`q`'s place among its siblings (`PartitionState.queue_key`); one not memoized is
        learned, for the applier to memoize (`Learned.keys`)."""
        key = self.part.queue_key(parent, q)
        if q.sort_key is None:
            self.keys.append((q, key))
        return key

    def _walk(self, root: Queue, plan: Plan) -> Iterator[App]:
        """The applications under `root` with work, in the order they are tried: queues depth
        first, by their keys among their siblings (`queues`: those still to walk, the next
        last), applications by their leaf's order. Those a stateaware leaf holds back are not
        yielded (their `Defer`, in `plan`, unless told already)."""
        queues = [root]
        while queues:
            q = queues.pop()
            if not q.leaf:
                if self.pool.open:
                    showing = self.showing
                    children = [c for c in q.children.values() if c.active or shows(c, showing)]
                else:
                    children = [c for c in q.children.values() if c.active]
                n = len(children)
                if n == 2:
                    if self._queue_key(q, children[1]) < self._queue_key(q, children[0]):
                        children.reverse()
                elif n > 2:
                    _sort_by_key(children, [self._queue_key(q, c) for c in children])
                children.reverse()  # the first to walk on top
                queues.extend(children)
                continue
            gate = stateaware_gate(q) if q.sort_policy is STATEAWARE else None
            for entry in self._apps_of(q) if self.pool.open else q.active_apps:
                app: App = entry[-1]
                if gate is not None and app.state is AppState.ACCEPTED and app is not gate:
                    if app.why is None or app.why.details.get("first") != gate.id:
                        plan.append(Defer(app, why.not_admitted(q.path, gate.id)))
                    continue
                yield app

    def _gang(self, app: App, plan: Plan) -> bool:
        """The decisions for a gang: its placeholders decided once for the whole gang, then
        its real asks; True once one ends the walk."""
        gang_planned = False
        gang_waits: bool | None = None  # whether placeholders are pending: read once, for the first worker
        for entry in app.active:
            ask = entry[-1]
            if ask.placeholder:  # decided once for the whole gang
                if gang_planned:
                    continue
                gang_planned = True
                asked = gang_request(self.part, app, self.now)  # a topology domain (docs/topology.md), or anywhere
                nodes = (NodeSetHold(self.part, app, self.now, self.backfill)  # nodes it reserves (docs/gang.md)
                         if asked is None and NodeSetHold.wanted(self.part, app, self.now) else None)
                decisions = plan_gang(app, GangOverlay(self.part, self.node_index, self.finder.fit_cache,
                                                       nodes.held if nodes is not None else None),
                                      self._domains().for_gang(app, *asked, self.now) if asked is not None else None,
                                      nodes)
                plan.extend(decisions)
                if type(decisions[-1]) is GangAllocate or type(decisions[-1]) is HoldDomain:
                    return True
                continue
            if ask.task_group:
                decision = self._member(app, ask)
            elif ask.tags.get(ROLE_TAG) == WORKER_ROLE and (
                    gang_waits if gang_waits is not None else (gang_waits := bool(pending_placeholders(app)))):
                decision = Park(ask, app.gang_room, SKIPPED, why.workers_wait_for_gang(app.id))
            else:
                decision = self._ask(ask)
            plan.append(decision)
            if ends_walk(decision):
                return True
        return False

    def _sets(self, app: App, plan: Plan) -> bool:
        """An application without placeholders that asks for topology domains: the sets of
        asks it sent together, each whole in one domain (core/gang.py `plan_sets`); its asks
        that ask for none, on their own."""
        pending = [a for a in app.asks.values() if a.pending]
        decisions = plan_sets(app, pending, request_for(self.part, app.tags), self._domains().place)
        plan.extend(decisions)
        if decisions and type(decisions[-1]) is GangAllocate:
            return True
        for entry in list(self._asks_of(app)):  # (those behind open gates too, as in `_app`)
            if not in_set(app, entry[-1]):
                decision = self._ask(entry[-1])
                plan.append(decision)
                if ends_walk(decision):
                    return True
        return False

    def _shown(self, here: dict[Gate, Any]) -> list[tuple[Gate, Any]]:
        """The (gate, value) pairs of `here` whose gate is open and not judged yet (walking
        the smaller of `here` and the open gates)."""
        showing = self.showing
        if len(showing) <= len(here):
            return [(gate, here[gate]) for gate in showing if gate in here]
        return [(gate, value) for gate, value in here.items() if gate in showing]

    def _in_order(self, active: SortedSeq, sources: list[tuple[Gate, Any]]) -> Iterator[Any]:
        """`active`'s entries and those behind the shown gates `sources`, in one order."""
        showing = self.showing
        if len(sources) == 1:  # mostly: one gate open
            gate, entries = sources[0]
            if not active:
                return _behind(gate, entries, showing)
            return _merged_one(active, gate, entries, showing)
        return _merged(active, sources, showing)

    def _apps_of(self, leaf: Queue) -> Iterable[tuple[Any, ...]]:
        """The leaf's applications in its order: the active ones, and those with asks behind
        an open gate (core/waits.py) that may be scheduled, as if those asks were active."""
        if not self.pool.open or not leaf.pooled_apps:
            return leaf.active_apps
        sources = self._shown(leaf.pooled_apps)
        if not sources:
            return leaf.active_apps
        return self._shown_apps(self._in_order(leaf.active_apps, sources))

    def _shown_apps(self, entries: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        last: App | None = None
        for entry in entries:
            app: App = entry[-1]
            if app is last:  # behind two open gates: once
                continue
            last = app
            if app.entry is None and (app.blocked_on is not None or app.state not in SCHEDULABLE_APP_STATES):
                continue  # held or not schedulable: an eager wake-up would not have made it active either
            yield entry

    def _asks_of(self, app: App) -> Iterable[tuple[int, int, Ask]]:
        """`app`'s active asks in order, with its asks behind open gates among them."""
        if not app.pooled or not self.pool.open:
            return app.active
        sources = self._shown(app.pooled)
        if not sources:
            return app.active
        merged = self._in_order(app.active, sources)
        return merged if len(sources) == 1 else _distinct_asks(merged)  # an ask behind two gates: once

    def _member(self, app: App, ask: Ask) -> Decision:
        """A real ask of one of a gang's task groups."""
        if waits_for_gang(app, ask):
            return Park(ask, app.gang_room, SKIPPED, why.gang_pending(app.id, ask.task_group))
        found = replacement_for(app, ask, self.claimed)
        if found is None:  # its group has no placeholder left: an ordinary ask (in its gang's domain, if kept)
            return self._ask(ask, kept_domain(self.part, app, ask) if app.domains else None)
        if isinstance(found, list):
            sizes = ", ".join(sorted({fmt_res(ph.resource) for ph in found}))
            return CancelGroup(ask, found, f"real ask {ask.key} ({fmt_res(ask.resource)}) is larger than the "
                                           f"placeholders of task group {ask.task_group} ({sizes})")
        self.claimed.add(found.uuid)
        return Replace(ask, found)

    def _ask(self, ask: Ask, kept: tuple[str, tuple[str, ...]] | None = None) -> Decision:
        if self.tried is not None:
            self.tried.append(ask.key)
        res = ask.resource
        app = ask.app
        if app.queue.path == RECOVERY_QUEUE:
            reason = f"queue {RECOVERY_QUEUE} keeps recovered applications running and schedules nothing new"
            return Park(ask, app.queue.room, SKIPPED, why.recovery_queue(reason, RECOVERY_QUEUE))
        capped = held_by_max(ask, self.over)
        if capped is not None:
            return capped
        if ask.required:
            return required_node_decision(self.part, ask, self.now)
        if ask.reserved:  # its own node first: a shape that failed for others may fit there
            own = self.part.nodes[ask.reserved]
            if fits(res, own.free):
                return Allocate(ask, own)
            if own.preempting:
                return awaiting_victims(ask, own)
        if kept is not None:  # a placed topology gang's lost member, asked again: back into its domain
            return self._lost_member(ask, kept)
        if ask.shape not in self.failed_shapes:
            policy = app.policy
            node: Node | None = (self.finder.first_fit(ask) if policy is None
                                 else self.policies.choose(ask, policy, self.part.nodes))
            if node is not None:
                return Allocate(ask, node)
            self.failed_shapes.add(ask.shape)
        if ask.timeout_ms > 0 and self.backfill.any():  # room a reservation holds, given back before it starts
            lent = self.backfill.node_for(ask, self.now)
            if lent is not None:
                return Backfilled(ask, lent)
        if self.showing:  # every other ask of its shape waiting for room would fail the same
            gates = self.pool.gates_of.get(ask.shape)  # (none: no ask of its shape ever waited)
            if gates is not None:
                self._close(gates[0])
        if ask.preempt_other and self.now >= ask.preempt_after:  # (in a retry interval: not again yet)
            if ask.since and self.part.preempts():
                found = preemption_for(self.part, ask, self.now)
                if found is not None:
                    if isinstance(found, Preempt):
                        return found
                    then = self._no_room(ask)
                    assert isinstance(then, (Park, Reserve))
                    return Unpreempted(ask, then, found)
            kind = not_yet(self.part, ask, self.now)
            if kind:
                return self._preempts_later(ask, kind)
        return self._no_room(ask)

    def _lost_member(self, ask: Ask, kept: tuple[str, tuple[str, ...]]) -> Decision:
        """A placed topology gang's lost member, asked again: back into its domain `kept`. (Its
        own method: a function holding a closure builds the closure's frame at every call.)"""
        placer = self._domains()
        return lost_member(ask, placer.lost_member(ask, kept), placer.nodes_of(kept),
                           lambda nodes: preemption_for(self.part, ask, self.now, nodes)
                           if self.now >= ask.preempt_after and self.part.preempts() else None)

    def _preempts_later(self, ask: Ask, kind: int) -> Decision:
        """`_no_room`, for an ask that may preempt others but has not looked for victims: its
        reason says why (`kind`, core/preemption.py `not_yet`), as the RM hears it."""
        then = self._no_room(ask)
        if isinstance(then, Reserve):
            return Reserve(ask, then.node, not_yet_text(kind, self.part, ask, self.now, False))
        assert isinstance(then, Park)
        if then.why.code is not why.PendingCode.NO_NODE_ROOM:  # its reservation's reason
            return Park(ask, then.where, then.state,
                        why.preempts_later(then.why, not_yet_text(kind, self.part, ask, self.now, False)))
        key = (kind, ask.shape, ask.app.queue.path, delay_ms(ask))
        later = self.later.get(key)
        if later is None:
            if len(self.later) >= NO_ROOM_SHAPES:
                self.later.clear()
            later = self.later[key] = why.preempts_later(then.why, not_yet_text(kind, self.part, ask, self.now, False))
        return Park(ask, then.where, then.state, later)

    def _no_room(self, ask: Ask) -> Decision:
        """`ask` found no node with room: it keeps or takes a reservation, or waits for room."""
        res = ask.resource
        if ask.reserved:
            return Park(ask, NODE_ROOM, RESERVED, reserved_why(ask, self.part.nodes[ask.reserved], self.now,
                                                                 self.reserved_reasons))
        if (ask.since and ask.shape not in self.none_to_reserve
                and self.now - ask.since >= self.part.reservation_delay_ns):
            free_soonest = self.finder.reservable(ask)
            if free_soonest is not None:
                return Reserve(ask, free_soonest)
            self.none_to_reserve[ask.shape] = None
            if self.showing:  # and none of them finds a node to reserve
                gates = self.pool.gates_of.get(ask.shape)
                if gates is not None:
                    self._close(gates[1])
        no_room = self.no_room.get(ask.shape)
        if no_room is None:
            if len(self.no_room) >= NO_ROOM_SHAPES:
                self.no_room.clear()
            no_room = self.no_room[ask.shape] = why.no_node_room(res)
        return Park(ask, NODE_ROOM, FAILED, no_room)


def shows(q: Queue, showing: dict[Gate, None]) -> bool:
    """Whether a gate of `showing` (open and not judged yet) has asks in `q`'s subtree
    (`_shown`, but stopping at the first: it is asked of every child a walk passes)."""
    counts = q.pooled
    if counts:
        for gate in showing if len(showing) <= len(counts) else counts:
            if gate in counts and gate in showing:
                return True
    return False


def _sort_by_key(items: list[Any], keys: list[Any]) -> None:
    """Sort `items` in place by `keys` (one each, in the same order), stably: `list.sort`
    with a key, without calling a key function through the interpreter's protocol for each
    item (a few queues under a parent: an insertion sort; more: `sorted` on the indexes)."""
    n = len(items)
    if n > SMALL_SORT:
        order = sorted(range(n), key=keys.__getitem__)
        items[:] = [items[i] for i in order]
        return
    for i in range(1, n):
        key, item = keys[i], items[i]
        j = i - 1
        while j >= 0 and key < keys[j]:
            keys[j + 1] = keys[j]
            items[j + 1] = items[j]
            j -= 1
        keys[j + 1] = key
        items[j + 1] = item


def _merged(active: SortedSeq, sources: list[tuple[Gate, Any]], showing: dict[Gate, None]) -> Iterator[Any]:
    """The entries of `active` and of each source in one sorted order; a source is dropped
    once its gate closes (the walk closes gates as it goes). A source is read from its head
    on: a walk mostly ends a few entries in, so most sources are never iterated (no gate's
    list is empty: it goes with its last entry).

    The next entry is found by a scan of the sources' heads, not a heap: a walk takes one to
    three entries of ten sources or so (the demo's traffic: 2.5 entries of 10.4 sources), and
    a scan compares each head once per entry taken, where building a heap compares pairs of
    (entry, source) tuples, each comparison two tuples deep. Equal entries (an application
    behind two gates) come in the order of their sources, `active` first."""
    heads: list[Any] = []  # the next entry of each source still read, `active` first
    seqs: list[Any] = []
    gates: list[Gate | None] = []  # None: `active`
    iters: list[Iterator[Any] | None] = []  # None: its head not taken yet
    if active:
        heads.append(active.first())
        seqs.append(active)
        gates.append(None)
        iters.append(None)
    for gate, entries in sources:
        heads.append(entries[0])
        seqs.append(entries)
        gates.append(gate)
        iters.append(None)
    while heads:
        at = 0
        head = heads[0]
        for k in range(1, len(heads)):
            if heads[k] < head:
                at, head = k, heads[k]
        behind = gates[at]
        if behind is None or behind in showing:
            yield head
            it = iters[at]
            if it is None:  # its head taken: from here on, its iterator
                it = iters[at] = iter(seqs[at])
                NEXT(it)
            following = NEXT(it, None)
            if following is not None:
                heads[at] = following
                continue
        heads.pop(at)  # read to its end, or its gate closed (`pop`: compiled, `del` is a generic call)
        seqs.pop(at)
        gates.pop(at)
        iters.pop(at)


def _merged_one(active: Iterable[Any], gate: Gate, entries: Iterable[Any], showing: dict[Gate, None]) -> Iterator[Any]:
    """`_merged` of the active entries and one gate's (they share no entry)."""
    gated = iter(entries)
    nxt = NEXT(gated, None)
    for entry in active:
        while nxt is not None and nxt < entry:
            if gate not in showing:
                nxt = None
                break
            yield nxt
            nxt = NEXT(gated, None)
        yield entry
    while nxt is not None and gate in showing:
        yield nxt
        nxt = NEXT(gated, None)


def _behind(gate: Gate, entries: Iterable[Any], showing: dict[Gate, None]) -> Iterator[Any]:
    """The entries behind one gate, in order, until it closes."""
    for entry in entries:
        if gate not in showing:
            return
        yield entry


def _distinct_asks(entries: Iterator[tuple[int, int, Ask]]) -> Iterator[tuple[int, int, Ask]]:
    last: Ask | None = None
    for entry in entries:
        if entry[-1] is not last:  # behind two open gates: once
            last = entry[-1]
            yield entry


def stateaware_gate(leaf: Queue) -> App | None:
    """The one Accepted application that stateaware lets start: the first in fifo order."""
    best: App | None = None
    best_key: tuple[int, int] | None = None
    for app in leaf.apps.values():
        if app.state is AppState.ACCEPTED and app.pending:
            key = (-(app.max_priority or 0) if leaf.sort_priority else 0, app.seq)
            if best_key is None or key < best_key:
                best, best_key = app, key
    return best


def maxapplications(app: App) -> Hold | None:
    """A queue or limit that runs its `maxapplications`, which an Accepted `app` may not join."""
    for q in app.path:
        if q.maxapps and q.running >= q.maxapps:
            reason = f"queue {q.path} runs its maximum of {q.maxapps} applications"
            return Hold(app, q, why.queue_max_applications(reason, q.path, q.running, q.maxapps))
    for t in app.trackers:
        n = t.limit.maxapplications
        if n and t.running >= n:
            reason = f"{t.describe()}: {t.running} of {n} applications running"
            return Hold(app, t, why.limit_max_applications(reason, t.kind, t.name, t.queue.path, t.running, n))
    return None


def required_node_decision(part: PartitionState, ask: Ask, now: int) -> Decision:
    """An ask that must run on one node (tag `yunikorn.apache.org/requiredNode`). The node's
    reservation for an ask not pinned there gives way to it (YuniKorn's `tryRequiredNode`),
    unless victims are being released for that ask."""
    name = ask.required
    node = part.nodes.get(name)
    where = required_node(name)
    if node is None:
        return Park(ask, where, FAILED, why.required_node_gone(name))
    if node.state is not NodeState.SCHEDULABLE:
        return Park(ask, where, FAILED, why.required_node_draining(name, node.state.value))
    other = node.reserved if node.reserved is not ask else None
    if other is not None and (other.required or node.preempting):  # pinned there too, or preempting: until placed
        return Park(ask, where, FAILED, why.required_node_reserved(name, other.key))
    if node.held and node.held != ask.app.id:  # in a topology domain, or among nodes, a gang reserved
        return Park(ask, where, FAILED, why.required_node_held(name, node.held, name in part.node_holds))
    if fits(ask.resource, node.free):
        return _taking(other, Allocate(ask, node))
    if node.preempting and node.reserved is ask:
        return awaiting_victims(ask, node)
    cap, occ = node.capacity, node.occupied
    if all(cap.get(r, 0) - occ.get(r, 0) >= v for r, v in ask.resource.items()):
        found = required_node_victims(part, ask, node, now) if part.preempts() and not node.preempting else None
        if isinstance(found, Preempt):
            return _taking(other, found)  # preempts on its node at once
        if node.reserved is not ask:
            then = Reserve(ask, node)  # full for now: it reserves its node at once
            return _taking(other, Unpreempted(ask, then, found) if found else then)
        if found:  # its node is reserved for it: it waits there, judged again by the retry interval
            return Unpreempted(ask, Park(ask, where, RESERVED, why.reserved(name, ask.resource)), found)
    if node.reserved is not ask:  # smaller than the ask: nothing to wait for there but a resize
        return Park(ask, where, FAILED, why.required_node_full(name, ask.resource, node.free))
    return Park(ask, where, RESERVED, why.reserved(name, ask.resource))


def _taking(other: Ask | None, then: Allocate | Preempt | Reserve | Unpreempted) -> Decision:
    """`then`, after the node's reservation for `other` (if any) ends."""
    return then if other is None else CancelReservation(other, then)


def awaiting_victims(ask: Ask, node: Node) -> Park:
    """`ask` preempted on `node`, its reserved node: it waits for the RM to release its victims."""
    return Park(ask, victims(node.id), RESERVED,
                why.preempting(node.id, [a.uuid for a in node.allocations.values() if a.preempting]))


def held_by_max(ask: Ask, reasons: dict[tuple[Any, str, int, int], why.Why]) -> Park | None:
    """`ask` parked where a user or group limit's maxresources, or a queue's max on its path,
    holds it, or None; `reasons`: the pass's reasons, formatted once per (limit, resource, used,
    asked)."""
    res = ask.resource
    app = ask.app
    for t in app.trackers:
        limit = t.limit.maxresources
        if limit:
            over = first_over(t.allocated, res, limit)
            if over is not None:
                used = t.allocated.get(over, 0)
                held = reasons.get((t, over, used, res[over]))
                if held is None:
                    reason = (f"{t.describe()}: maxresources {over} {fmt_quantity(over, limit[over])} would be "
                              f"exceeded: {fmt_quantity(over, used)} used + {fmt_quantity(over, res[over])} asked")
                    held = reasons[(t, over, used, res[over])] = why.limit(
                        reason, t.kind, t.name, t.queue.path, over, used, limit[over], res[over])
                return Park(ask, t.room, SKIPPED, held)
    for q in app.path:
        if q.max:
            over = first_over(q.allocated, res, q.max)
            if over is not None:
                used = q.allocated.get(over, 0)
                held = reasons.get((q, over, used, res[over]))
                if held is None:
                    reason = (f"queue {q.path} max {over} {fmt_quantity(over, q.max[over])} would be exceeded: "
                              f"{fmt_quantity(over, used)} used + {fmt_quantity(over, res[over])} asked")
                    held = reasons[(q, over, used, res[over])] = why.queue_max(
                        reason, q.path, over, used, q.max[over], res[over])
                return Park(ask, q.room, SKIPPED, held)
    return None


def _worker(app: App, ask: Ask) -> Decision:
    """An ask tagged `ykbus.io/role: worker` waits while its application's leader waits to
    be placed: a job is placed in its order, so its workers never hold room its leader needs
    (and a later job cannot slip in between its leader and its workers)."""
    leader = pending_leader(app)
    assert leader is not None  # the caller saw app.leaders_waiting
    return Park(ask, app.leader_room, SKIPPED, why.leader_pending(app.id, leader.key))
