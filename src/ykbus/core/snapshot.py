"""Snapshots: the core's state at sequence N, msgspec-encoded, versioned.

`dump_snapshot(core) -> bytes` and `load_snapshot(bytes, load_yaml) -> Core`. The rule that
matters: a core loaded from a snapshot taken after entry N, fed entries N+1.., makes
exactly the outputs and reaches exactly the state of a core that applied 1.. from the
start (tests/property: snapshot + tail == full replay).

What is stored is the source state plus every order a later decision depends on
(allocations per node and per application, waiting asks, queue order, the timer heap).
Derived structures (node index, free resources, active lists, usage sums, counters) are
rebuilt on load. Timers whose target is gone are dropped: firing them would do nothing.
"""

from __future__ import annotations

import gc
from typing import Any

import msgspec

from ykbus.core import fold
from ykbus.core.acl import Acl
from ykbus.core.chunked import ChunkedDict
from ykbus.core.config import ChildTemplate, LimitConfig, PartitionConfig, SchedulerConfig
from ykbus.core.core import Core
from ykbus.core.deadlines import Sequence, Timers
from ykbus.core.indexes import restore_place
from ykbus.core.ledger import limit_booked
from ykbus.core.lifecycle import AppState, AskState, NodeState, RMState
from ykbus.core.model import (
    Alloc,
    App,
    AppHistory,
    Ask,
    AskSpec,
    Node,
    NodeRoom,
    Queue,
    QueueRoom,
    Terminated,
    parse_wait,
    user_groups,
)
from ykbus.core.partition import Partition
from ykbus.core.registry import ResourceManager, YamlLoader
from ykbus.core.shards import Arriving, MovedOut
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
from ykbus.core.topoplace import waits_whole
from ykbus.core.waits import ROOM
from ykbus.core.why import Why

FORMAT = 4  # 2: ACLs parsed, user/group limits, child templates; 3: why asks are pending; 4: gangs
READABLE = (2, 3, 4)  # a format-2 snapshot has no reasons: asks parked then show theirs once parked again


# What a snapshot does not store, per model class: each attribute is rebuilt on load from
# what is stored, is configuration, or does not outlive an entry. A model attribute that is
# neither stored (a field of the matching S-struct, by the same name or as RENAMED says) nor
# listed here fails tests/core/test_snapshot_fields.py: a field added to the model and
# forgotten here would otherwise be lost on restart, silently.
DERIVED: dict[str, frozenset[str]] = {
    "Node": frozenset({"free", "key", "reserved", "preempting",  # from capacity, occupied, allocations; index key; asks
                       "held",  # from the applications' `holding` and its attributes
                       "room_changes",  # a count the planner's kept estimates read (starts again at a load)
                       "ends"}),  # its allocations with a runtime limit: kept as their timers load
    "Queue": frozenset({"active", "active_apps", "allocated", "app_prios", "apps", "name", "parent", "pending",
                        "priority_fence", "priority_offset", "running", "sort_key", "sort_policy",
                        "pooled", "pooled_apps", "room", "preempt_policy", "preempt_delay_ms", "preempt_within",
                        "quota_delay_ms", "victims", "runtime_default_ms", "runtime_max_ms", "min_runtime_ms", "gang_reserve"}),  # tree, sums, config, cache, waiting asks by gate
    "Ask": frozenset({"app", "required", "shape", "pooled", "tallied", "tallied_n",  # its owner; from its tags; the interned form of its resource; where it waits
                      "place"}),  # from its pending count, `waiting`, `reserved` and `since` (indexes.restore_place)
    "Alloc": frozenset({"state", "limit_ms", "end"}),  # a live allocation is Allocated; its limit: its timeout timer's
    "App": frozenset({"active", "allocated", "entry", "max_priority", "path", "pending", "priorities", "leaders_waiting",
                      "trackers", "policy", "node_pods", "pooled", "pool_key", "gang_room", "leader_room",
                      "unparked", "recovered"}),  # sorted lists, sums, caches, the limits that apply; the
    # allocations recovered under a key it has no ask of (from its allocations, at load)
    "Partition": frozenset({"records",  # a component: its fields are checked as PartitionState's
                            "scheduler", "waits", "ledger", "holds", "changes", "applier",  # components
                            "rm", "timers", "trackers", "preempted", "total", "pending_codes",  # the records' own,
                            # held by reference (stored or derived as the records'); the planner's
                            "policies"}),  # node policies' orders, held by reference (caches, built on use)
    "PartitionState": frozenset({"_shapes",  # interned vectors
                                 "paused",  # RM's state
                                 "summary", "pending_codes", "preempted", "victims_indexed", "domain_holds", "node_holds",
                                 "alive", "node_sort", "rm", "root", "scorer", "timers", "total",
                                 "trackers", "uuid_taken", "weights", "reservation_delay_ns", "topology_levels"}),  # rebuilt, configuration, shared
    "Waits": frozenset({"records", "planner",  # the partition's other components
                        "node_index", "pool", "parked", "reserve_waiters", "places",  # from the asks' `waiting`, and nodes
                        "woken", "freed"}),  # a counter within a pass; nodes freed within an entry
    "Changes": frozenset({"records", "waits", "places", "ledger", "holds"}),  # the partition's other components, no state of its own
    "Applier": frozenset({"records", "waits", "scheduler", "ledger", "changes", "holds",  # likewise
                          "reserved_reasons"}),  # a cache of reasons (made again as asked)
    "ResourceManager": frozenset({"node_partition", "timers"}),  # from its partitions' nodes; its deadlines (Snapshot.timers)
    "Core": frozenset({"registry",  # its components: the registry's fields are checked as RMRegistry's
                       "intake",  # (no state of its own)
                       "backlog",  # the process's, not the state's
                       "moved_out", "arriving"}),  # between one entry and the next: the service's effects and inputs
    "RMRegistry": frozenset({"_load_yaml", "_override", "_override_group", "dropped_partitions"}),  # the process's
}
RENAMED: dict[str, dict[str, str]] = {"RMRegistry": {"timer_sequence": "timers_n"}}


class SnapshotError(Exception):
    """A snapshot that cannot be loaded (wrong format version, or not a snapshot)."""


class _S(msgspec.Struct, array_like=True, frozen=True):
    pass


class SAsk(_S):
    key: str
    resource: dict[str, int]
    max_allocations: int
    pending: int
    allocated: int
    priority: int
    seq: int
    tags: dict[str, str]
    task_group: str
    placeholder: bool
    originator: bool
    timeout_ms: int
    state: str
    waiting: str | None
    reported: str
    why: Why | None = None  # format 3
    since: int = 0  # format 4
    reserved: str = ""
    preempt_self: bool = True  # preemption
    preempt_other: bool = False
    preempt_after: int = 0
    at: int = 0  # when it was asked (readers)


class SAlloc(_S):
    uuid: str
    key: str
    app: str
    node: str
    resource: dict[str, int]
    priority: int
    tags: dict[str, str]
    task_group: str
    placeholder: bool
    born: int
    replacing: str = ""  # format 4
    preempt_self: bool = True  # preemption
    preempting: bool = False
    at: int = 0  # when it was placed, and its ask asked (readers)
    asked: int = 0
    lent: str = ""  # backfilled: whose reserved room it took
    originator: bool = False  # its application's originator


class SHistory(_S):
    submitted: int
    user: str
    groups: list[str]
    states: list[tuple[int, str]]
    max_used: dict[str, int]
    placeholders: dict[str, tuple[int, dict[str, int], int, int]] = {}  # (added after 40: older snapshots load)
    tracked: dict[str, dict[str, dict[str, int]]] = {}


class SEnded(_S):
    state: str
    ts: int
    message: str
    queue: str
    history: SHistory


class SApp(_S):
    id: str
    queue: str
    user: str
    groups: list[str]
    tags: dict[str, str]
    state: str
    seq: int
    asks: list[SAsk]
    allocations: list[str]
    blocked_on: str | None
    timeout_ms: int
    timer: int
    why: Why | None = None  # format 3
    gang: dict[str, int] = {}  # format 4
    gang_hard: bool = False
    gang_timer: int = 0
    history: SHistory | None = None  # readers: submission time, state log, max used
    domains: dict[str, list[str]] = {}  # a placed topology gang's remembered domains: group -> [level, *values]
    holding: list[str] = []  # what its waiting gang reserved: [level, *values] of a domain, ["", *node ids] ([]: none)


class SNode(_S):
    id: str
    attributes: dict[str, str]
    capacity: dict[str, int]
    occupied: dict[str, int]
    state: str
    allocations: list[str]


class SQueue(_S):
    path: str
    children: list[str]
    leaf: bool
    managed: bool
    draining: bool
    draining_since: int
    guaranteed: dict[str, int]
    max: dict[str, int]
    maxapps: int
    properties: dict[str, str]
    submitacl: Acl | None
    adminacl: Acl | None
    sort_priority: bool
    raw_priority: int | None
    waiters: list[tuple[str, str]]
    app_waiters: list[str]
    limits: list[LimitConfig]
    template: ChildTemplate | None


class SPartition(_S):
    name: str
    incarnation: int
    config: PartitionConfig
    seq: int
    rekey: bool
    queues: list[SQueue]
    nodes: list[SNode]
    apps: list[SApp]
    allocations: list[SAlloc]
    terminated: dict[str, str]
    node_waiters: list[tuple[str, str]]
    ended: dict[str, tuple[int, str, str]] = {}  # terminated: (when, how, queue); older snapshots lack it
    histories: dict[str, SHistory] = {}  # terminated: their history (readers)
    rejected: list[tuple[str, SEnded]] = []  # the last rejected applications, oldest first
    counts: list[tuple[str, str, str, int]] = []  # decisions counted (readmodel.PartitionSummary.counts)


class SRM(_S):
    id: str
    state: str
    version: str
    policy_group: str
    build_info: dict[str, str]
    extra_config: dict[str, str]
    encoding: str
    config_text: str
    own_config_text: str
    partitions: list[SPartition]
    # what its partitions that are gone counted: (partition, what, queue, outcome, n) (absent before 2026-12-01)
    retired_counts: list[tuple[str, str, str, str, int]] = []


class STimer(_S):
    deadline: int
    n: int
    kind: str
    rm: str
    partition: str
    incarnation: int
    ref: str
    stamp: int
    gen: int
    key: str = ""  # format 4: a reservation timer's ask


class Snapshot(msgspec.Struct, frozen=True):
    format: int
    last_seq: int
    now: int
    policy_groups: dict[str, str]
    rms: list[SRM]
    timers: list[STimer]
    timers_n: int
    operator_configs: dict[str, str]
    allocations_made: int = 0  # absent from snapshots written before it was counted
    history: list[tuple[int, int, int]] = []  # Core.history
    shard: str | None = None  # Core.shard: the core shard it is (None: not sharded)
    owners: dict[str, str] = {}  # Core.owners: the log's assignments of RMs to shards
    registered: list[str] = []  # Core.registered (a shard's)


class SMovedRM(msgspec.Struct, frozen=True):
    """One RM's unit as it leaves a core shard (core/shards.py): its partitions, its timers and
    the configuration its policy group had there."""

    format: int
    seq: int  # the assign entry
    now: int  # the log's time at it
    rm: SRM | None  # None: the RM had no state in the shard it left
    timers: list[STimer]
    policy_group_text: str


_APP_STATES = {st.value: st for st in AppState}
_ASK_STATES = {st.value: st for st in AskState}
_NODE_STATES = {st.value: st for st in NodeState}

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Snapshot)
_moved_decoder = msgspec.msgpack.Decoder(SMovedRM)


# --- dump --------------------------------------------------------------------------------


def _queue(p: Partition, q: Queue) -> SQueue:
    return SQueue(
        q.path, list(q.children), q.leaf, q.managed, q.draining, q.draining_since, q.guaranteed, q.max,
        q.maxapps, q.properties, q.submitacl, q.adminacl, q.sort_priority, q.raw_priority,
        list(p.waits.parked.at(QueueRoom, q.path)), list(q.app_waiters), q.limits, q.template,
    )


def _ask(a: Ask) -> SAsk:
    return SAsk(a.key, a.resource, a.max_allocations, a.pending, a.allocated, a.priority, a.seq, a.tags,
                a.task_group, a.placeholder, a.originator, a.timeout_ms, a.state.value,
                a.waiting.name if a.waiting is not None else None, a.reported,
                a.why, a.since, a.reserved, a.preempt_self, a.preempt_other, a.preempt_after, a.at)


def _partition(p: Partition) -> SPartition:
    return SPartition(
        name=p.name, incarnation=p.incarnation, config=p.records.config, seq=p.records.seq, rekey=p.records.rekey,
        queues=[_queue(p, q) for q in p.queues.values()],
        nodes=[SNode(n.id, n.attributes, n.capacity, n.occupied, n.state.value, list(n.allocations))
               for n in p.nodes.values()],
        apps=[SApp(a.id, a.queue.path, a.user, a.groups, a.tags, a.state.value, a.seq,
                   [_ask(k) for k in a.asks.values()], list(a.allocations),
                   a.blocked_on.path if a.blocked_on is not None else None, a.timeout_ms, a.timer, a.why,
                   a.gang, a.gang_hard, a.gang_timer, _history(a.history),
                   {group: [level, *values] for group, (level, values) in a.domains.items()},
                   [a.holding[0], *a.holding[1]] if a.holding is not None else [])
              for a in p.apps.values()],
        allocations=[SAlloc(x.uuid, x.key, x.app.id, x.node.id, x.resource, x.priority, x.tags, x.task_group,
                            x.placeholder, x.born, x.replacing, x.preempt_self, x.preempting, x.at, x.asked, x.lent,
                            x.originator)
                     for x in p.allocations.values()],
        terminated={k: v.state.value for k, v in p.terminated.items()},
        node_waiters=[key for shape in p.waits.parked.keys(NodeRoom) for key in p.waits.parked.at(NodeRoom, shape)]
        + [key for gate, group in p.waits.pool.gates.items() if gate.kind == ROOM for key in group],
        ended={k: (v.ts, v.message, v.queue) for k, v in p.terminated.items()},
        histories={k: _history(v.history) for k, v in p.terminated.items()},
        rejected=[(k, SEnded(v.state.value, v.ts, v.message, v.queue, _history(v.history)))
                  for k, v in p.rejected.items()],
        counts=[(*k, n) for k, n in p.records.summary.counts.items()],
    )


def _history(h: AppHistory) -> SHistory:
    return SHistory(h.submitted, h.user, list(h.groups), list(h.states), dict(h.max_used),
                    {g: (n, dict(r), rep, out) for g, (n, r, rep, out) in h.placeholders.items()},
                    {k: {t: dict(r) for t, r in by.items()} for k, by in h.tracked.items()})


def _restore_history(s: SHistory | None) -> AppHistory:
    if s is None:
        return AppHistory(0, "", [])
    return AppHistory(s.submitted, s.user, list(s.groups), [(t, st) for t, st in s.states], dict(s.max_used),
                      {g: [n, dict(r), rep, out] for g, (n, r, rep, out) in s.placeholders.items()},
                      {k: {t: dict(r) for t, r in by.items()} for k, by in s.tracked.items()})


def _timer(deadline: int, n: int, timer: Timer) -> STimer | None:
    if not timer.live():
        return None  # firing it would do nothing
    part = timer.partition
    base = (deadline, n, timer.kind, part.rm, part.name, part.incarnation)
    if isinstance(timer, CompletingTimer | AppTimeoutTimer | PlaceholderTimer):
        return STimer(*base, timer.app.id, timer.app.seq, timer.generation)
    if isinstance(timer, ReservationTimer | PreemptionTimer):
        return STimer(*base, timer.app.id, timer.app.seq, timer.since, timer.key)  # gen: when its wait began
    if isinstance(timer, AllocationTimeoutTimer):
        return STimer(*base, timer.alloc.uuid, timer.alloc.born, timer.timeout_ms)  # gen: the timeout (ms)
    if isinstance(timer, QuotaTimer):
        return STimer(*base, timer.queue, 0, 0)
    return STimer(*base, timer.app_id, 0, 0)


def dump_snapshot(core: Core) -> bytes:
    """The whole state of `core`, after its last applied entry."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _dump(core)
    finally:
        if enabled:
            gc.enable()


def _rm(rm: ResourceManager) -> SRM:
    return SRM(rm.id, rm.state.value, rm.version, rm.policy_group, rm.build_info, rm.extra_config, rm.encoding,
               rm.config_text, rm.own_config_text, [_partition(p) for p in rm.partitions.values()],
               [(name, *key, n) for name, counts in rm.retired_counts.items() for key, n in counts.items()])


def _timers(rms: list[ResourceManager]) -> list[STimer]:
    held = sorted((e for rm in rms for e in rm.timers.entries()), key=lambda e: (e[0], e[1]))
    return [t for t in (_timer(d, n, w) for d, n, w in held) if t is not None]


def _dump(core: Core) -> bytes:
    registry = core.registry
    rms = list(registry.rms.values())
    return _encoder.encode(Snapshot(FORMAT, core.last_seq, core.now, registry.policy_groups, [_rm(rm) for rm in rms],
                                    _timers(rms), registry.timer_sequence.n, registry.operator_configs,
                                    core.allocations_made, list(core.history), core.shard, core.owners,
                                    list(core.registered)))


def dump_moved(moved: MovedOut) -> bytes:
    """The unit of an RM that left this core shard at entry `moved.seq` (core/shards.py)."""
    unit = moved.unit
    return _encoder.encode(SMovedRM(FORMAT, moved.seq, moved.now, _rm(unit) if unit is not None else None,
                                    _timers([unit]) if unit is not None else [], moved.policy_group_text))


def load_moved(data: bytes, load_yaml: YamlLoader | None = None) -> Arriving:
    """An RM's unit as `dump_moved` wrote it, to be given to the shard it moves to; the
    derived structures rebuilt as a snapshot's are. SnapshotError if it is not one."""
    moved = _decode(_moved_decoder, data, "moved RM")
    if moved.rm is None:
        return Arriving(None, moved.policy_group_text)
    # on a sequence of its own: the shard it arrives at puts its deadlines on its own (RMRegistry.take_in)
    return Arriving(_restore_rms(Sequence(), moved.now, [moved.rm], moved.timers)[0], moved.policy_group_text)


# --- load --------------------------------------------------------------------------------


def _restore_partition(rm: str, s: SPartition, timers: Timers[Timer], now: int) -> Partition:
    # through its constructor (an empty partition of its configuration), then what is
    # stored: the queue tree as it was (with unmanaged and draining queues), nodes,
    # applications and their asks, allocations; the partition derives the rest (`restore`)
    p = Partition(rm, s.config, timers, s.incarnation)
    records = p.records  # its containers are filled in place: the partition holds the same ones
    records.seq, records.rekey = s.seq, s.rekey
    records.queues.clear()
    records.trackers.clear()
    records.terminated.update((k, Terminated(AppState(v), *s.ended.get(k, (0, "", "")),
                                             _restore_history(s.histories.get(k)))) for k, v in s.terminated.items())
    records.rejected.update((k, Terminated(AppState(e.state), e.ts, e.message, e.queue, _restore_history(e.history)))
                            for k, e in s.rejected)

    # queues: partition order, then each parent's children in their stored order
    for sq in s.queues:
        parent_path, _, name = sq.path.rpartition(".")
        q = Queue(name, p.queues[parent_path] if parent_path else None)
        q.leaf, q.managed, q.draining, q.draining_since = sq.leaf, sq.managed, sq.draining, sq.draining_since
        q.guaranteed, q.max, q.maxapps, q.properties = sq.guaranteed, sq.max, sq.maxapps, sq.properties
        q.submitacl, q.adminacl = sq.submitacl, sq.adminacl
        q.limits, q.template = sq.limits, sq.template
        q.sort_priority, q.raw_priority = sq.sort_priority, sq.raw_priority
        q.set_policies()
        p.queues[q.path] = q
    records.root = p.queues["root"]
    for sq in s.queues:
        q = p.queues[sq.path]
        q.children = {name: p.queues[f"{sq.path}.{name}"] for name in sq.children}

    for sn in s.nodes:
        node = Node(sn.id, sn.attributes, sn.capacity, sn.occupied)
        node.state = _NODE_STATES[sn.state]
        p.nodes[node.id] = node

    for sa in s.apps:  # each through its constructor, from the values it was made of
        app = App(sa.id, p.queues[sa.queue], sa.seq, sa.user, user_groups(sa.user, sa.groups), sa.tags, timeout_ms=sa.timeout_ms,
                  gang=dict(sa.gang), gang_hard=sa.gang_hard)
        app.gang_timer = sa.gang_timer
        app.domains = {group: (kept[0], tuple(kept[1:])) for group, kept in sa.domains.items()}
        if sa.holding:  # the node index (built by the restore) leaves its domain's nodes out
            app.holding = (sa.holding[0], tuple(sa.holding[1:]))
            if app.holding[0]:
                records.domain_holds[app.holding[1]] = app
            else:  # a node set (docs/gang.md)
                records.node_holds.update(dict.fromkeys(app.holding[1], app))
        app.history = _restore_history(sa.history)
        app.state, app.timer, app.why = _APP_STATES[sa.state], sa.timer, sa.why
        if sa.blocked_on is not None and "|" not in sa.blocked_on:  # a queue's maxapplications (a limit's: below)
            app.blocked_on = p.queues[sa.blocked_on]
        p.apps[app.id] = app
        for sk in sa.asks:
            spec = AskSpec(max_allocations=sk.max_allocations, priority=sk.priority, tags=sk.tags,
                           task_group=sk.task_group, placeholder=sk.placeholder, originator=sk.originator,
                           timeout_ms=sk.timeout_ms, preempt_self=sk.preempt_self, preempt_other=sk.preempt_other)
            ask = Ask(sk.key, app, spec, *records.intern(sk.resource, sk.timeout_ms if not sk.placeholder else 0),
                      sk.seq, sk.at)
            ask.preempt_after = sk.preempt_after
            ask.pending, ask.allocated = sk.pending, sk.allocated
            ask.since, ask.reserved = sk.since, sk.reserved
            ask.state, ask.reported, ask.why = _ASK_STATES[sk.state], sk.reported, sk.why
            ask.waiting = parse_wait(sk.waiting) if sk.waiting is not None else None
            restore_place(ask, now, records.reservation_delay_ns,  # not stored: derived from the above
                          waits_whole(app, ask, records.topology_levels))
            app.asks[ask.key] = ask

    apps, nodes, allocs = p.apps, p.nodes, p.allocations
    for sx in s.allocations:
        alloc = Alloc(sx.uuid, sx.key, apps[sx.app], nodes[sx.node], records.intern(sx.resource)[0], sx.priority,
                      sx.tags, sx.task_group, sx.placeholder, sx.born, sx.at, sx.asked)
        alloc.replacing = sx.replacing
        alloc.preempt_self, alloc.preempting = sx.preempt_self, sx.preempting
        ask = apps[sx.app].asks.get(sx.key)  # (a snapshot written before originators were kept: its ask says)
        alloc.lent, alloc.originator = sx.lent, sx.originator or (ask is not None and ask.originator)
        allocs[alloc.uuid] = alloc
    for sn in s.nodes:  # who holds which allocation, in their stored orders
        nodes[sn.id].allocations = {u: allocs[u] for u in sn.allocations}
    for sa in s.apps:
        app = apps[sa.id]
        app.allocations = ChunkedDict((u, allocs[u]) for u in sa.allocations)
        for alloc in app.allocations.values():  # recovered under a key it has no ask of (none else is)
            if alloc.key not in app.asks:
                app.recovered[alloc.key] = app.recovered.get(alloc.key, 0) + 1
    for sq in s.queues:
        p.queues[sq.path].app_waiters = {a: apps[a] for a in sq.app_waiters}

    p.applier.restore({sq.path: sq.waiters for sq in s.queues if sq.waiters}, s.node_waiters,
              {sa.id: sa.blocked_on for sa in s.apps if sa.blocked_on is not None and "|" in sa.blocked_on}, now)
    fold.restore_counts(records, s.counts)
    return p


def load_snapshot(data: bytes, load_yaml: YamlLoader | None = None, queues_override: SchedulerConfig | None = None,
                  override_group: str | None = None) -> Core:
    """A core in the state the snapshot recorded; SnapshotError if it is not one we read.
    `queues_override`, `override_group`: replay's what-if, as `Core` takes them."""
    enabled = gc.isenabled()
    gc.disable()  # hundreds of thousands of acyclic objects: the cyclic GC only slows this down
    try:
        return _load(data, load_yaml, queues_override, override_group)
    finally:
        if enabled:
            gc.enable()


def _decode(decoder: msgspec.msgpack.Decoder[Any], data: bytes, what: str) -> Any:
    """`data` decoded, in a format this ykbus reads; SnapshotError naming `what` if not."""
    try:
        found = decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise SnapshotError(f"not a ykbus {what}: {exc}") from None
    if found.format not in READABLE:
        raise SnapshotError(f"{what} format {found.format}, this ykbus reads {', '.join(map(str, READABLE))}")
    return found


def _load(data: bytes, load_yaml: YamlLoader | None, queues_override: SchedulerConfig | None,
          override_group: str | None) -> Core:
    snap = _decode(_decoder, data, "snapshot")
    core = Core(load_yaml=load_yaml, queues_override=queues_override, override_group=override_group)
    core.last_seq, core.now, core.allocations_made = snap.last_seq, snap.now, snap.allocations_made
    core.history = [(t, r, c) for t, r, c in snap.history]
    core.shard, core.owners, core.registered = snap.shard, dict(snap.owners), dict.fromkeys(snap.registered)
    registry = core.registry
    rms = _restore_rms(registry.timer_sequence, core.now, snap.rms, snap.timers)
    registry.restore(snap.policy_groups, snap.operator_configs, rms, snap.timers_n)
    return core


def _restore_rms(sequence: Sequence, now: int, srms: list[SRM], timers: list[STimer]) -> list[ResourceManager]:
    """The RMs, each with its partitions and its timers (set in the order of `sequence`)."""
    parts: dict[tuple[str, str, int], Partition] = {}
    rms: dict[str, ResourceManager] = {}
    for srm in srms:
        rm = ResourceManager(srm.id, srm.version, srm.policy_group, srm.build_info, srm.extra_config,  # partitions next
                             SchedulerConfig(partitions=[]), srm.config_text, srm.own_config_text, sequence, 0)
        rm.state, rm.encoding = RMState(srm.state), srm.encoding
        for name, what, queue, outcome, n in srm.retired_counts:
            rm.retired_counts.setdefault(name, {})[(what, queue, outcome)] = n
        for sp in srm.partitions:
            p = _restore_partition(rm.id, sp, rm.timers, now)
            p.records.paused = rm.state is RMState.PAUSED
            rm.partitions[p.name] = p
            parts[(rm.id, p.name, p.incarnation)] = p
            for node_id in p.nodes:
                rm.node_partition[node_id] = p
        rm.link_partitions()
        rms[rm.id] = rm
    held: dict[str, list[tuple[int, int, Timer]]] = {srm.id: [] for srm in srms}
    for t in timers:
        target = parts[(t.rm, t.partition, t.incarnation)].records  # a timer's target: the records it reads
        timer: Timer
        if t.kind == CompletingTimer.kind:
            timer = CompletingTimer(target, target.apps[t.ref], t.gen)
        elif t.kind == AppTimeoutTimer.kind:
            timer = AppTimeoutTimer(target, target.apps[t.ref], t.gen)
        elif t.kind == ReservationTimer.kind:
            timer = ReservationTimer(target, target.apps[t.ref], t.key, t.gen)
        elif t.kind == PreemptionTimer.kind:
            timer = PreemptionTimer(target, target.apps[t.ref], t.key, t.gen)
        elif t.kind == QuotaTimer.kind:
            timer = QuotaTimer(target, t.ref)
        elif t.kind == PlaceholderTimer.kind:
            timer = PlaceholderTimer(target, target.apps[t.ref], t.gen)
        elif t.kind == AllocationTimeoutTimer.kind:
            timed = target.allocations[t.ref]
            timer = AllocationTimeoutTimer(target, timed, t.gen)
            if not timed.placeholder:
                timed.limit_ms = t.gen  # its runtime limit, as its ask gave it (core/backfill.py)
                if timed.limit_ms > 0:  # kept as the ledger's `book` keeps it (the partition, loaded first, had none)
                    limit_booked(timed)
        else:
            timer = ExpireTimer(target, t.ref, target.terminated[t.ref].state)
        held[t.rm].append((t.deadline, t.n, timer))
    for rm_id, entries in held.items():  # each RM's deadlines with it, in their order
        rms[rm_id].timers.load(entries)
    return list(rms.values())
