"""The core's safety invariants, shared by the property tests and the fuzz suite.

Each check raises AssertionError naming what broke. They read the core's live objects
(tests may; the service never does) and hold after every applied entry:

- `new_allocations_fit`: a node that received a new allocation is not over-committed in
  the resources that allocation uses (an RM that shrinks a node, or recovers allocations
  onto it, may over-commit it itself; the scheduler never does), and no queue or user/group
  limit on its path is over its max;
- `new_allocations_placed_on_schedulable_nodes`: every allocation issued by the entry is
  live, on a node of its partition that is still there and schedulable (not draining,
  not decommissioned);
- `accounting_is_consistent`: every allocation belongs to a live application and node,
  and every usage and pending counter equals the sum of what it counts;
- `uuids_live_once`: within one RM, an allocation UUID names one live allocation, in one
  partition;
- `no_placeable_ask_left_waiting`: work conservation (except in the recovery queue, which
  by design schedules nothing new);
- `pending_reasons_are_true`: every pending ask's reason (`Partition.why_pending`) holds in
  the state: its node, queue or limit really has no room, its application really may not
  start;
- `replay_is_identical` / `snapshot_plus_tail_is_full_replay`: the log is the state.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from ykbus.core import Core, partition
from ykbus.core.entries import Entry, Output
from ykbus.core.lifecycle import SCHEDULABLE_APP_STATES, NodeState
from ykbus.core.model import RECOVERY_QUEUE, GangWait, LeaderWait, Replacement, Victims, pending_leader
from ykbus.core.partition import Partition
from ykbus.core.resources import fits
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.jsonl import encode_output
from ykbus.yamlload import load_yaml


def first_diff(a, b, path="$"):
    """Where two dumps first differ, and how."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return first_diff(a.get(k), b.get(k), f"{path}.{k}")
    return f"{path}: {a!r} != {b!r}"


def partitions(core: Core) -> Iterator[tuple[str, Partition]]:
    for rm in core.rms.values():
        for p in rm.partitions.values():
            yield rm.id, p


def _issued(core: Core, outputs: Iterable[Output]):
    """(allocation message, its partition or None) for every allocation the outputs issue."""
    for out in outputs:
        if out.kind != "alloc":
            continue
        rm = core.rms.get(out.rm)
        for a in out.msg.new:
            part = None if rm is None else rm.partitions.get(a.partitionName)
            yield a, part


def new_allocations_fit(core: Core, outputs: Iterable[Output]) -> None:
    allocated: dict[int, dict[str, int]] = {}  # each node's sum, once (an entry may place 10,000 on one)
    for a, p in _issued(core, outputs):
        live = None if p is None else p.allocations.get(a.UUID)
        if live is None:
            continue
        n = live.node
        used = allocated.get(id(n))
        if used is None:
            used = allocated[id(n)] = n.allocated
        for r in live.resource:
            assert used.get(r, 0) + n.occupied.get(r, 0) <= n.capacity.get(r, 0), \
                f"new allocation {a.UUID} over-commits {r} on {n.id}"
        for q in live.app.path:
            for r, limit in q.max.items():
                assert q.allocated.get(r, 0) <= limit, f"{q.path} over max {r}"
        for t in live.app.trackers:
            for r, limit in t.limit.maxresources.items():
                assert t.allocated.get(r, 0) <= limit, f"{t.key} over its limit {r}"


def new_allocations_placed_on_schedulable_nodes(core: Core, outputs: Iterable[Output]) -> None:
    outputs = list(outputs)
    released = {r.UUID for out in outputs if out.kind == "alloc" for r in out.msg.released}
    for a, p in _issued(core, outputs):
        assert p is not None, f"new allocation {a.UUID} names partition {a.partitionName!r} that its RM does not have"
        live = p.allocations.get(a.UUID)
        if live is None and a.UUID in released:
            continue  # placed and cancelled in one entry (a gang whose real ask is larger than its placeholders)
        assert live is not None, f"new allocation {a.UUID} is not live after the entry that issued it"
        assert live.node.id == a.nodeID, f"new allocation {a.UUID} is live on {live.node.id}, issued on {a.nodeID}"
        assert p.nodes.get(a.nodeID) is live.node, f"new allocation {a.UUID} is on node {a.nodeID}, which is gone"
        assert live.node.state is NodeState.SCHEDULABLE, \
            f"new allocation {a.UUID} is on node {a.nodeID}, which is {live.node.state.value}"


def uuids_live_once(core: Core) -> None:
    for rm in core.rms.values():
        seen: dict[str, str] = {}
        for p in rm.partitions.values():
            on_nodes = [u for n in p.nodes.values() for u in n.allocations]
            of_apps = [u for a in p.apps.values() for u in a.allocations]
            assert len(on_nodes) == len(set(on_nodes)) == len(p.allocations), \
                f"{rm.id}/{p.name}: {len(on_nodes)} allocations on nodes, {len(p.allocations)} live"
            assert len(of_apps) == len(p.allocations), \
                f"{rm.id}/{p.name}: {len(of_apps)} allocations of applications, {len(p.allocations)} live"
            for uuid in p.allocations:
                assert uuid not in seen, f"{rm.id}: allocation {uuid} is live in partitions {seen[uuid]} and {p.name}"
                seen[uuid] = p.name


def accounting_is_consistent(p: Partition) -> None:
    node_sum, app_sum, queue_sum, queue_pending = {}, {}, {}, {}
    for app_ in p.apps.values():  # the count behind LeaderPending, kept as asks come, go and are placed
        assert app_.leaders_waiting == sum(1 for k in app_.asks.values()
                                           if k.pending and k.tags.get("ykbus.io/role") == "leader"), app_.id
    for a in p.allocations.values():
        assert p.apps.get(a.app.id) is a.app, "allocation of a dead application"
        assert p.nodes.get(a.node.id) is a.node, "allocation on a dead node"
        for r, v in a.resource.items():
            node_sum.setdefault(a.node.id, {}).setdefault(r, 0)
            node_sum[a.node.id][r] += v
            app_sum.setdefault(a.app.id, {}).setdefault(r, 0)
            app_sum[a.app.id][r] += v
            for q in a.app.path:
                queue_sum.setdefault(q.path, {}).setdefault(r, 0)
                queue_sum[q.path][r] += v
    for n in p.nodes.values():
        assert n.allocated == node_sum.get(n.id, {}), f"node {n.id}: its allocations are not the partition's on it"
        free = dict(n.capacity)
        for r, v in [*n.occupied.items(), *node_sum.get(n.id, {}).items()]:
            free[r] = free.get(r, 0) - v
        assert {r: v for r, v in n.free.items() if v} == {r: v for r, v in free.items() if v}, \
            f"node {n.id}: free is not capacity - occupied - allocated"
        limited = [a for a in n.allocations.values() if a.limit_ms > 0]
        assert all(a.end == a.at + a.limit_ms * 1_000_000 for a in limited), f"node {n.id}: an end bound is not start + limit"
        assert n.ends == sorted(limited, key=lambda a: (a.end, a.uuid)), \
            f"node {n.id}: ends are not its allocations with a runtime limit by end bound"
    active = 0
    for app_ in p.apps.values():
        assert app_.allocated == app_sum.get(app_.id, {}), f"application {app_.id}: allocated is not the sum"
        if app_.node_pods is not None:  # an affinity policy's count of its allocations per node
            per_node: dict[str, int] = {}
            for a in app_.allocations.values():
                per_node[a.node.id] = per_node.get(a.node.id, 0) + 1
            assert app_.node_pods == per_node, f"application {app_.id}: node_pods is not its allocations per node"
        pending = {}
        for k in app_.asks.values():
            for r, v in k.resource.items():
                if k.pending:
                    pending[r] = pending.get(r, 0) + v * k.pending
                    for q in app_.path:
                        queue_pending.setdefault(q.path, {}).setdefault(r, 0)
                        queue_pending[q.path][r] += v * k.pending
        assert app_.pending == pending, f"application {app_.id}: pending is not the sum"
        active += app_.entry is not None
    for q in p.queues.values():
        assert q.allocated == queue_sum.get(q.path, {}), q.path
        assert q.pending == queue_pending.get(q.path, {}), q.path
    assert p.records.root.active == active
    for q in p.queues.values():  # the leaves' per-priority counts of their applications
        if q.leaf:
            counts = {}
            for a in q.apps.values():
                if a.max_priority is not None:
                    counts[a.max_priority] = counts.get(a.max_priority, 0) + 1
            assert q.app_prios == counts, q.path
            assert q.raw_priority == (max(counts) if counts else None), q.path
    for q in p.queues.values():  # a parent's: the most its children with something pending show it
        if not q.leaf:
            shown = [c.exposed_priority() for c in q.children.values() if c.raw_priority is not None]
            assert q.raw_priority == max((s for s in shown if s is not None), default=None), q.path
    tracked, running = {}, {}
    for app_ in p.apps.values():
        for t in app_.trackers:
            assert p.trackers[t.key] is t
            for r, v in app_.allocated.items():
                tracked.setdefault(t.key, {}).setdefault(r, 0)
                tracked[t.key][r] += v
            running[t.key] = running.get(t.key, 0) + (app_.state.value == "Running")
    for key, t in p.trackers.items():
        assert {r: v for r, v in t.allocated.items() if v} == tracked.get(key, {}), key
        assert t.running == running.get(key, 0), key


def no_placeable_ask_left_waiting(p: Partition) -> None:
    if p.records.paused:  # a Paused RM gets nothing placed
        return
    schedulable = [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE]
    for app_ in p.apps.values():
        if app_.state not in SCHEDULABLE_APP_STATES or app_.blocked_on is not None:
            continue
        if app_.queue.path == RECOVERY_QUEUE:  # by design it schedules nothing new
            continue
        if app_.gang and app_.gang_timer >= 0:
            gang_does_not_fit_or_is_incomplete(p, app_)
        for k in app_.asks.values():
            if not k.pending:
                continue
            if app_.gang and (k.placeholder or isinstance(k.waiting, (GangWait, Replacement))):
                continue  # placed with its gang, or waits for its gang or its placeholder
            if isinstance(k.waiting, Victims):  # it waits for the release of what it preempted, on their node
                assert p.nodes[k.waiting.key].preempting and p.nodes[k.waiting.key].reserved is k, \
                    f"ask {k.key} of {app_.id} waits for victims on {k.waiting.key}, which has none"
                continue
            if isinstance(k.waiting, LeaderWait):  # a worker waits only while its leader does
                assert pending_leader(app_) is not None, f"worker {k.key} of {app_.id} waits for a leader placed"
                continue
            if topology_set(p, app_, k):  # placed with the asks sent with it, whole: its reason is checked
                continue
            headroom = all(
                all(q.allocated.get(r, 0) + v <= q.max[r] for r, v in k.resource.items() if r in q.max)
                for q in app_.path) and all(
                all(t.allocated.get(r, 0) + v <= t.limit.maxresources[r]
                    for r, v in k.resource.items() if r in t.limit.maxresources)
                for t in app_.trackers)
            if headroom:
                where = [p.nodes[k.required]] if k.required in p.nodes else [] if k.required else schedulable
                kept = kept_domain(p, app_, k)
                if kept is not None:  # a placed topology gang's lost member: only its gang's domain
                    where = domain_nodes(p, *kept)
                assert not any(n.state is NodeState.SCHEDULABLE and fits(k.resource, n.free)
                               and (n.reserved is None or n.reserved is k) and n.held in ("", app_.id)
                               for n in where), \
                    f"ask {k.key} of {app_.id} could be placed but waits ({k.waiting})"


def gang_placeholders(app_) -> int:
    """How many placeholder allocations a gang has pending."""
    return sum(a.pending for a in app_.asks.values() if a.placeholder)


def gang_total(app_) -> dict[str, int]:
    """What a gang's pending placeholders ask, together."""
    total: dict[str, int] = {}
    for a in app_.asks.values():
        if a.placeholder and a.pending:
            for r, v in a.resource.items():
                total[r] = total.get(r, 0) + v * a.pending
    return total


def gang_incomplete(app_) -> bool:
    """Whether the placeholders a gang holds and those pending fall short of placeholderAsk."""
    have = gang_total(app_)
    for a in app_.allocations.values():
        if a.placeholder:
            for r, v in a.resource.items():
                have[r] = have.get(r, 0) + v
    return any(have.get(r, 0) < v for r, v in app_.gang.items())


def gang_fits(p: Partition, app_, nodes: list | None = None) -> bool:
    """Whether first-fit decreasing over the schedulable nodes (in id order, an order of our
    own; `nodes`: only those) places every pending placeholder of a gang at once: a check of
    the reason, not the core's own code."""
    members = [(a.resource, a.pending) for a in app_.asks.values() if a.placeholder and a.pending]
    return decreasing_fit(p.nodes.values() if nodes is None else nodes, members, app_.id)


def decreasing_fit(nodes, members: list, app_id: str) -> bool:
    """First fit decreasing of `members` ((shape, count) pairs) over `nodes` in id order: the
    schedulable ones reserved for no ask and in no domain another gang reserved."""
    free = {n.id: dict(n.free) for n in sorted(nodes, key=lambda n: n.id)
            if n.state is NodeState.SCHEDULABLE and n.reserved is None and n.held in ("", app_id)}
    for res, count in sorted(members, key=lambda rp: -sum(rp[0].values())):
        for _ in range(count):
            room = next((f for f in free.values() if fits(res, f)), None)
            if room is None:
                return False
            for r, v in res.items():
                room[r] = room.get(r, 0) - v
    return True


def gang_does_not_fit_or_is_incomplete(p: Partition, app_) -> None:
    """A gang with pending placeholders waits for a reason: it is incomplete, larger than one
    entry places, over a queue max or limit, or without room. With placeholders of one size any first fit places the
    gang when one does, so our own first fit must fail too."""
    total = gang_total(app_)
    if not total:
        return
    incomplete = gang_incomplete(app_)
    over = any(q.max and any(q.allocated.get(r, 0) + v > q.max[r] for r, v in total.items() if r in q.max)
               for q in app_.path) or any(
        t.limit.maxresources and any(t.allocated.get(r, 0) + v > t.limit.maxresources[r]
                                     for r, v in total.items() if r in t.limit.maxresources)
        for t in app_.trackers)
    from ykbus import limits

    too_large = gang_placeholders(app_) > limits.MAX_ALLOCATIONS_PER_ENTRY
    sizes = {tuple(sorted(a.resource.items())) for a in app_.asks.values() if a.placeholder and a.pending}
    topology = p.records.config.topology.levels and (app_.domains or app_.holding or any(
        _asked_domain(app_, a) is not None for a in app_.asks.values() if a.placeholder and a.pending))
    if not incomplete and not over and not too_large and len(sizes) == 1 and not topology and not any(
            a.required for a in app_.asks.values() if a.placeholder and a.pending):
        assert not gang_fits(p, app_), f"gang {app_.id} fits whole but waits"  # (a topology gang's reason is checked)


def gangs_placed_whole(core: Core, outputs: list[Output]) -> None:
    """A gang that got placeholders in an entry has none left pending (all or nothing)."""
    for out in outputs:
        if out.kind != "alloc":
            continue
        for a in out.msg.new:
            if not a.placeholder:
                continue
            p = core.rms[out.rm].partitions.get(a.partitionName or "default")
            app_ = p.apps.get(a.applicationID) if p is not None else None
            if app_ is not None and app_.gang and app_.gang_timer >= 0:
                assert not gang_total(app_), f"gang {app_.id} placed in part: {gang_total(app_)} still pending"


def pending_reasons_are_true(p: Partition) -> None:
    """The reason kept for each pending ask is true now: removing what it names would be
    needed for the ask to be placed."""
    from ykbus.core.lifecycle import AppState
    from ykbus.core.queueprops import AppSortPolicy
    from ykbus.core.why import PendingCode as C

    schedulable = [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE]
    for app_ in p.apps.values():
        for k in app_.asks.values():
            if not k.pending:
                continue
            why = p.records.why_pending(k)
            d = why.details
            where = f"ask {k.key} of {app_.id}: {why.code.value} ({why.message})"
            if why.code is C.NO_NODE_ROOM:  # a node reserved for another ask takes nothing else
                assert not any(fits(k.resource, n.free) and n.reserved in (None, k) and n.held in ("", app_.id)
                               for n in schedulable), where
                assert d["asked"] == dict(k.resource), where
                no_node_room_is_told_truly(p, k, schedulable, where)
            elif why.code is C.QUEUE_MAX:  # what was asked: the ask's, or its whole gang's
                q = p.queues[d["queue"]]
                r = d["resource"]
                assert d["asked"] == (gang_total(app_)[r] if k.placeholder and app_.gang else
                                      set_total(app_, k)[r] if topology_set(p, app_, k) else k.resource[r]), where
                assert q in app_.path and q.allocated.get(r, 0) + d["asked"] > q.max[r], where
            elif why.code in (C.USER_LIMIT, C.GROUP_LIMIT):
                t = next(t for t in app_.trackers if t.queue.path == d["queue"] and t.name == d.get(t.kind))
                r = d["resource"]
                assert d["asked"] == (gang_total(app_)[r] if k.placeholder and app_.gang else
                                      set_total(app_, k)[r] if topology_set(p, app_, k) else k.resource[r]), where
                assert t.allocated.get(r, 0) + d["asked"] > t.limit.maxresources[r], where
            elif why.code is C.GANG_INCOMPLETE:
                assert d["pending"] == gang_total(app_) and gang_incomplete(app_), where
            elif why.code is C.GANG_NO_ROOM:  # (placeholders of several sizes: first fit in node order
                # may miss where ours, decreasing, fits: docs/gang.md)
                sizes = {tuple(sorted(a.resource.items())) for a in app_.asks.values() if a.placeholder and a.pending}
                assert k.placeholder and (len(sizes) > 1 or not gang_fits(p, app_)), where
            elif why.code is C.TOPOLOGY_NO_DOMAIN:
                assert d["application"] == app_.id, where
                if "domain" in d:  # its gang's remembered domain has no room for it
                    assert kept_domain(p, app_, k) == (d["level"], tuple(d["domain"].split("/"))), where
                    assert k.placeholder or not any(
                        fits(k.resource, n.free) and n.reserved in (None, k) and n.held in ("", app_.id)
                        for n in domain_nodes(p, d["level"], tuple(d["domain"].split("/")))), where
                elif "taskGroup" in d:  # one of its groups, beside the groups placed before it: none holds it
                    assert any(a.placeholder and a.pending and a.task_group == d["taskGroup"]
                               for a in app_.asks.values()), where
                elif topology_set(p, app_, k):  # no domain at the level holds the asks sent with it
                    assert no_domain_holds_set(p, app_, k, d["level"]), where
                else:  # (placeholders of several sizes: first fit in node order may miss where ours fits)
                    sizes = {tuple(sorted(a.resource.items())) for a in app_.asks.values() if a.placeholder and a.pending}
                    assert k.placeholder, where
                    assert len(sizes) > 1 or no_topology_domain_holds(p, app_, d["level"]), where
            elif why.code is C.GANG_TOO_LARGE:
                if "allocations" in d:  # a topology set of an application without placeholders
                    assert topology_set(p, app_, k), where
                    assert d["allocations"] == sum(a.pending for a in set_members(app_, k)) > d["max"], where
                else:
                    assert k.placeholder and d["placeholders"] == gang_placeholders(app_) > d["max"], where
            elif why.code is C.GANG_PENDING:  # a member: its group's placeholders; a worker outside: any
                assert any(a.placeholder and a.pending and (a.task_group == k.task_group or not k.task_group)
                           for a in app_.asks.values()), where
            elif why.code is C.REPLACING:
                placeholder = app_.allocations[d["placeholder"]]
                assert placeholder.placeholder and placeholder.replacing == k.key, where
            elif why.code is C.QUEUE_MAX_APPLICATIONS:
                q = p.queues[d["queue"]]
                assert app_.state is AppState.ACCEPTED and q.running >= q.maxapps, where
            elif why.code in (C.USER_MAX_APPLICATIONS, C.GROUP_MAX_APPLICATIONS):
                t = next(t for t in app_.trackers if t.queue.path == d["queue"] and t.name == d.get(t.kind))
                assert app_.state is AppState.ACCEPTED and t.running >= t.limit.maxapplications, where
            elif why.code is C.NOT_ADMITTED:
                assert app_.state is AppState.ACCEPTED and app_.queue.sort_policy is AppSortPolicy.STATEAWARE, where
                assert d["first"] != app_.id and p.apps[d["first"]].state is AppState.ACCEPTED, where
            elif why.code is C.RECOVERY_QUEUE:
                assert app_.queue.path == RECOVERY_QUEUE, where
            elif why.code is C.RM_PAUSED:
                assert p.records.paused, where
            elif why.code is C.REQUIRED_NODE_GONE:
                assert k.required == d["node"] and d["node"] not in p.nodes, where
            elif why.code is C.REQUIRED_NODE_DRAINING:
                node_ = p.nodes[d["node"]]
                assert k.required == node_.id and node_.state is not NodeState.SCHEDULABLE, where
            elif why.code is C.REQUIRED_NODE_FULL:
                node_ = p.nodes[d["node"]]
                assert k.required == node_.id, where
                if "reservedFor" in d:  # reserved for another ask
                    assert node_.reserved is not None and node_.reserved is not k, where
                    assert node_.reserved.key == d["reservedFor"], where
                elif "heldFor" in d:  # in a topology domain another gang reserved
                    assert node_.held == d["heldFor"] != app_.id, where
                else:
                    assert not fits(k.resource, node_.free), where
            elif why.code is C.RESERVED:
                node_ = p.nodes[d["node"]]
                assert k.reserved == node_.id and node_.reserved is k and not fits(k.resource, node_.free), where
                if not k.required:
                    kept = kept_domain(p, app_, k)  # (a placed topology gang's lost member: only its domain)
                    could = domain_nodes(p, *kept) if kept is not None else schedulable
                    assert not any(fits(k.resource, n.free) and n.reserved is None and n.held in ("", app_.id)
                                   for n in could), where
            elif why.code is C.PREEMPTING:  # its reserved node's victims are being released for it
                node_ = p.nodes[d["node"]]
                assert k.reserved == node_.id and node_.reserved is k and node_.preempting, where
                assert isinstance(k.waiting, Victims) and k.waiting.key == node_.id, where
                named = [node_.allocations[u] for u in d["victims"] if u in node_.allocations]
                assert all(a.preempting for a in named), where  # the others the RM has released
            elif why.code is C.LEADER_PENDING:  # a worker: its leader still waits to be placed
                leader = app_.asks.get(d["leader"])
                assert k.tags.get("ykbus.io/role") == "worker" and isinstance(k.waiting, LeaderWait) and k.waiting.key == app_.id, where
                assert leader is not None and leader.pending and leader.tags.get("ykbus.io/role") == "leader", where
            else:
                assert why.code is C.QUEUED, where


def _asked_domain(app_, k) -> tuple[str, str] | None:
    for tags in (k.tags, app_.tags):
        for mode in ("required", "preferred"):
            level = tags.get(f"ykbus.io/topology-{mode}")
            if level is not None:
                return mode, level
    return None


def topology_set(p: Partition, app_, k) -> bool:
    """Whether `k` is placed with the asks sent with it, whole in one domain (docs/topology.md):
    its application has no placeholders, its partition levels, it or its application a tag."""
    return bool(not app_.gang and p.records.config.topology.levels and _asked_domain(app_, k) is not None)


def set_members(app_, k) -> list:
    asked = _asked_domain(app_, k)
    return [a for a in app_.asks.values() if a.pending and a.at == k.at and _asked_domain(app_, a) == asked]


def set_total(app_, k) -> dict[str, int]:
    total: dict[str, int] = {}
    for a in set_members(app_, k):
        for r, v in a.resource.items():
            total[r] = total.get(r, 0) + v * a.pending
    return total


def no_domain_holds_set(p: Partition, app_, k, level: str) -> bool:
    """Our own check of a set's TopologyNoDomain: first fit decreasing of its members over
    each domain at `level` (for `preferred`, each broader one and anywhere too) places none
    whole; a reserved node, or one a gang holds, takes none of it."""
    mode, _ = _asked_domain(app_, k)
    levels = list(p.records.config.topology.levels)
    members = [(a.resource, a.pending) for a in set_members(app_, k)]

    def holds(nodes: list) -> bool:
        return decreasing_fit(nodes, members, app_.id)

    if level not in levels:
        return not (mode == "preferred" and holds(list(p.nodes.values())))
    asked = levels.index(level)
    for i in range(asked, -1 if mode == "preferred" else asked - 1, -1):
        domains: dict[tuple, list] = {}
        for n in p.nodes.values():
            values = tuple(n.attributes.get(name) for name in levels[:i + 1])
            if None not in values:
                domains.setdefault(values, []).append(n)
        if any(holds(nodes) for nodes in domains.values()):
            return False
    return not (mode == "preferred" and holds(list(p.nodes.values())))


def kept_domain(p: Partition, app_, k) -> tuple[str, tuple[str, ...]] | None:
    """The remembered domain a placed topology gang's real ask must go back into, as the
    docs say: its own task group's (when its tags ask for a domain), else its application's,
    at a level the partition still has."""
    if not app_.domains:
        return None
    own = "ykbus.io/topology-required" in k.tags or "ykbus.io/topology-preferred" in k.tags
    kept = app_.domains.get(k.task_group if own else "") or app_.domains.get("")
    return kept if kept is not None and kept[0] in p.records.config.topology.levels else None


def domain_nodes(p: Partition, level: str, values: tuple[str, ...]) -> list:
    """The schedulable nodes of one domain, from their attributes."""
    levels = list(p.records.config.topology.levels)
    names = levels[:levels.index(level) + 1]
    return [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE
            and tuple(n.attributes.get(name) for name in names) == values]


def no_topology_domain_holds(p: Partition, app_, level: str) -> bool:
    """Whether no domain at `level` holds the gang (each domain's nodes checked as `gang_fits`
    does) and, for a `preferred` gang, none at a broader level and not the whole partition
    either: a check of the TopologyNoDomain reason, not the core's own code."""
    levels = list(p.records.config.topology.levels)
    preferred = "ykbus.io/topology-preferred" in app_.tags
    if level not in levels:  # a reload dropped it: nothing at it holds the gang
        return not (preferred and gang_fits(p, app_))
    asked = levels.index(level)
    for i in range(asked, -1 if preferred else asked - 1, -1):
        domains: dict[tuple, list] = {}
        for n in p.nodes.values():
            values = tuple(n.attributes.get(name) for name in levels[:i + 1])
            if None not in values:
                domains.setdefault(values, []).append(n)
        if any(gang_fits(p, app_, nodes) for nodes in domains.values()):
            return False
    return not (preferred and gang_fits(p, app_))


def no_node_room_is_told_truly(p: Partition, k, schedulable: list, where: str) -> None:
    """What the reader is told of a NoNodeRoom reason (the read API's details, explain's
    line) is true now: the most free is that of nodes the ask could take, the reserved nodes
    with room for it are named, and with no node schedulable the reason says so."""
    from ykbus.core.projection import NAMED_NODES, _why
    from ykbus.explain import _details

    shown = _why(p, k, 0)["details"]
    line = _details("NoNodeRoom", shown)
    could_take = [n for n in schedulable if n.reserved in (None, k) and n.held in ("", k.app.id)]
    for r in k.resource:  # no claim of more free room than a node it could take has
        assert shown["largestFree"][r] == max((n.free.get(r, 0) for n in could_take), default=0), where
    taken = [n for n in schedulable if n.reserved not in (None, k) and fits(k.resource, n.free)]
    named = shown.get("reservedWithRoom", {})
    assert len(named) + shown.get("reservedWithRoomMore", 0) == len(taken), where
    for n in taken[:NAMED_NODES]:
        assert named[n.id] == f"{n.reserved.app.id}/{n.reserved.key}" and n.id in line, where
    assert shown["schedulableNodes"] == len(schedulable), where
    if not p.nodes:
        assert line.split("; preemption: ")[0] == "the partition has no node", where
    elif not schedulable:
        assert "schedulable" in line and all(f"{n.id} {n.state.value.lower()}" in line
                                             for n in list(p.nodes.values())[:NAMED_NODES]), where


def domain_holds_are_consistent(p: Partition) -> None:
    """Topology domains reserved by waiting gangs (docs/topology.md): each holder's
    `holding` is its entry, no two overlap, a holder is a required gang with placeholders
    pending; a node is held by the gang whose domain it is in, by its attributes, and a held
    node is out of the node index."""
    holds = p.records.domain_holds
    levels = list(p.records.config.topology.levels)
    for values, app_ in holds.items():
        assert app_.holding is not None and app_.holding[1] == values, f"hold {values} of {app_.id}"
        assert p.apps.get(app_.id) is app_ and any(a.placeholder and a.pending for a in app_.asks.values()), \
            f"{app_.id} holds {values} but no placeholder of it waits"
        assert app_.holding[0] in {app_.tags.get("ykbus.io/topology-required")} | {
            a.tags.get("ykbus.io/topology-required") for a in app_.asks.values() if a.placeholder and a.pending}, \
            f"{app_.id} holds but asks for no required domain at {app_.holding[0]}"
        for other in holds:
            if other != values:
                n = min(len(other), len(values))
                assert other[:n] != values[:n], f"holds {values} and {other} overlap"
    node_holds = p.records.node_holds  # nodes reserved by gangs that ask for no domain (docs/gang.md)
    for node_id, app_ in node_holds.items():
        assert app_.holding is not None and app_.holding[0] == "" and node_id in app_.holding[1], \
            f"node {node_id} held by {app_.id}, whose holding is {app_.holding}"
        assert p.apps.get(app_.id) is app_ and any(a.placeholder and a.pending for a in app_.asks.values()), \
            f"{app_.id} holds node {node_id} but no placeholder of it waits"
        assert app_.queue.gang_reserves(), f"{app_.id} holds nodes in a queue that does not reserve"
    assert all(a.holding is None or (holds.get(a.holding[1]) is a if a.holding[0] else
                                     all(node_holds.get(i) is a for i in a.holding[1])) for a in p.apps.values())
    indexed = {key[1] for key in p.waits.node_index}
    for n in p.nodes.values():
        path = []
        holder = ""
        for level in levels:
            if level not in n.attributes:
                break
            path.append(n.attributes[level])
            if tuple(path) in holds:
                holder = holds[tuple(path)].id
        if n.id in node_holds:
            assert not holder, f"node {n.id} held as a node and in domain held by {holder}"
            holder = node_holds[n.id].id
        assert n.held == holder, f"node {n.id} held by {n.held!r}, its domain by {holder!r}"
        assert (n.id in indexed) == (n.state is NodeState.SCHEDULABLE and not holder), f"node {n.id} in the index"


def reservations_are_consistent(p: Partition) -> None:
    """A node is reserved for at most one ask and an ask has at most one node, both ways; a
    reserved ask is pending, waits, and its node is schedulable."""
    for n in p.nodes.values():
        k = n.reserved
        if k is not None:
            assert k.reserved == n.id and k.pending, f"node {n.id} reserved for {k.key}"
            assert p.apps.get(k.app.id) is k.app and k.app.asks.get(k.key) is k, f"node {n.id}: its ask is gone"
            assert n.state is NodeState.SCHEDULABLE, f"node {n.id} is {n.state.value} and reserved"
    for app_ in p.apps.values():
        for k in app_.asks.values():
            if k.reserved:
                assert p.nodes[k.reserved].reserved is k, f"ask {k.key} holds {k.reserved}, which does not hold it"
    for n in p.nodes.values():  # what each node has preempted and not released yet, counted right
        preempting = sum(1 for a in n.allocations.values() if a.preempting)
        assert n.preempting == preempting and (n.id in p.preempted) == bool(preempting), f"node {n.id} preempting"


def waits_are_consistent(p: Partition) -> None:
    """Each pending ask is in exactly one place: active in its application's list, or in the
    registry at the place its `waiting` names (behind a gate of the pool, or in `waits`), and
    every registered ask is pending and waits there."""
    from ykbus.core.waits import WaitPlaces

    registered: dict[tuple[str, str], object] = {}
    for place, waiters in p.waits.parked.places.items():
        for key, ask in waiters.items():
            assert key not in registered, f"ask {key} in two places"
            registered[key] = place
            assert ask.pending and ask.waiting is not None and not ask.pooled, f"ask {key} at {place}"
            assert WaitPlaces.place_of(ask, ask.waiting) == place, f"ask {key} waits at {ask.waiting.name}, kept at {place}"
    for app_ in p.apps.values():
        active = {entry[-1].key for entry in app_.active}
        for k in app_.asks.values():
            key = (app_.id, k.key)
            if not k.pending:
                assert key not in registered and k.key not in active, f"ask {key} is not pending but listed"
                continue
            if k.waiting is None:
                assert k.key in active and key not in registered, f"active ask {key} is not (only) in its list"
            elif k.pooled:
                assert key not in registered and k.key not in active, f"pooled ask {key} listed elsewhere"
                assert key in p.waits.pool.gates[p.waits.pool.gates_for(k)[0]], f"pooled ask {key} not behind its gate"
            else:
                assert registered.get(key) is not None and k.key not in active, f"waiting ask {key} not registered"
    pool = p.waits.pool  # the shapes waiting: those with a gate holding asks; the limited ones among them, in order
    waiting = {g.shape for g in pool.gates}
    assert set(pool.shapes) == waiting, f"waiting shapes {sorted(pool.shapes)}, gates of {sorted(waiting)}"
    assert all(pool.shapes[s] is pool.gates_of[s][0] for s in pool.shapes), "a shape's room gate is not its own"
    assert list(pool.limited_shapes) == [s for s, gate in pool.shapes.items() if gate.limited], \
        f"limited shapes {list(pool.limited_shapes)}, of {[(s, g.limited) for s, g in pool.shapes.items()]}"
    places_are_the_table(p)


# What each place of the place table (core/lifecycle.py ASK_PLACE) says of an ask, written out
# here rather than read from the core: whether it waits (`waiting` set), its `pooled` (0: not
# behind a gate; 1: behind its shape's room gate; 2: and its reservation gate), whether a node
# is reserved for it, and the registry that holds it ("active": its application's active
# list; "parked": WaitPlaces, at the place its `waiting` names; "reserving": and the waits'
# reserve_waiters, a gang's ask waiting for room; "pool": the gates of its `pooled`).
PLACE_SLOTS: dict[str, tuple[bool, int, bool, str | None]] = {
    "NotPending": (False, 0, False, None),
    "Active": (False, 0, False, "active"),
    "Parked": (True, 0, False, "parked"),
    "ParkedToReserve": (True, 0, False, "reserving"),
    "Pooled": (True, 1, False, "pool"),
    "PooledToReserve": (True, 2, False, "pool"),
    "ReservedActive": (False, 0, True, "active"),
    "ReservedParked": (True, 0, True, "parked"),
    "ReservedPooled": (True, 1, True, "pool"),
}


def places_are_the_table(p: Partition) -> None:
    """Each ask's `place` is what its slots and the registries say (`PLACE_SLOTS`): an ask
    with nothing pending is nowhere, a pending one is in exactly the registry its place names,
    with the `waiting`, `pooled` and `reserved` it names; a node reserved for an ask, and every
    ask listed to reserve, is one whose place says so."""
    from ykbus.core.lifecycle import AskPlace
    from ykbus.core.model import NODE_ROOM
    from ykbus.core.waits import WaitPlaces

    assert {pl.value for pl in AskPlace} == set(PLACE_SLOTS), "a place of the table is not described here"
    waits = p.waits
    for app_ in p.apps.values():
        active = {id(entry[-1]) for entry in app_.active}
        for k in app_.asks.values():
            key = (app_.id, k.key)
            where = f"ask {key} in place {k.place.value}"
            waiting, pooled, holds, registry = PLACE_SLOTS[k.place.value]
            assert bool(k.pending) == (registry is not None), f"{where} with {k.pending} pending"
            assert (k.waiting is not None) == waiting, f"{where} waits at {k.waiting}"
            assert k.pooled == pooled, f"{where} is pooled {k.pooled}"
            assert bool(k.reserved) == holds, f"{where} holds node {k.reserved!r}"
            if holds:
                assert p.nodes[k.reserved].reserved is k, f"{where}: node {k.reserved} is not reserved for it"
            assert (id(k) in active) == (registry == "active"), f"{where}: in its application's list {id(k) in active}"
            assert (key in waits.reserve_waiters) == (registry == "reserving"), f"{where}: listed to reserve"
            if registry in ("parked", "reserving"):
                kind, at = WaitPlaces.place_of(k, k.waiting)
                assert waits.parked.at(kind, at).get(key) is k, f"{where} is not at {k.waiting.name}"
            if registry == "reserving":
                assert k.waiting is NODE_ROOM and app_.gang, f"{where}: a gang's ask waiting for room"
            if registry == "pool":
                room, reserve = waits.pool.gates_for(k)
                assert k.waiting is NODE_ROOM and not app_.gang, f"{where}: an ordinary ask waiting for room"
                assert waits.pool.gates.get(room, {}).get(key) is k, f"{where} is not behind its room gate"
                assert (waits.pool.gates.get(reserve, {}).get(key) is k) == (pooled == 2), \
                    f"{where}: behind its reservation gate {pooled == 2}"
    for key, k in waits.reserve_waiters.items():
        assert p.apps[key[0]].asks.get(key[1]) is k, f"ask {key} listed to reserve is gone"
    for n in p.nodes.values():
        if n.reserved is not None:
            assert n.reserved.place.value.startswith("Reserved"), \
                f"node {n.id} is reserved for {n.reserved.key}, in place {n.reserved.place.value}"


def read_model_is_the_state(p: Partition) -> None:
    """The read model folded from the applier's events says what the records say (the
    nodes' usage is not folded: readers build it from the nodes, core/readmodel.py)."""
    from ykbus.core.readmodel import PartitionSummary, PendingCodes

    assert p.records.summary.dao() == PartitionSummary.of(p.apps, p.terminated, p.rejected, len(p.allocations)).dao(), p.name
    parked, unparked = PendingCodes.of(p.apps.values())
    assert p.pending_codes.parked == parked, p.name
    assert {a.id: a.unparked for a in p.apps.values() if a.unparked} == unparked, p.name
    by_walk: dict = {}  # what a reader walking every pending ask would count
    for app in p.apps.values():
        for k in app.asks.values():
            if k.pending:
                code = p.records.why_pending(k).code
                by_walk[code] = by_walk.get(code, 0) + k.pending
    assert p.pending_codes.counts(p.apps.values(), p.records.paused) == by_walk, p.name


def state_is_consistent(core: Core) -> None:
    """Every invariant that reads only the state, over every partition of every RM."""
    uuids_live_once(core)
    for _, p in partitions(core):
        accounting_is_consistent(p)
        read_model_is_the_state(p)
        waits_are_consistent(p)
        reservations_are_consistent(p)
        domain_holds_are_consistent(p)
        victim_index_is_the_allocations(p)
        if not core.backlog:  # a pass stopped at the per-entry allocation budget goes on next entry
            no_placeable_ask_left_waiting(p)
            pending_reasons_are_true(p)


def after_entry(core: Core, outputs: list[Output]) -> None:
    """Every invariant that must hold after an entry, given the outputs it made."""
    new_allocations_fit(core, outputs)
    new_allocations_placed_on_schedulable_nodes(core, outputs)
    gangs_placed_whole(core, outputs)
    state_is_consistent(core)


@contextmanager
def plans_made_again() -> Iterator[None]:
    """The replays below make again the plans of a core the caller ran (and checked to be
    pure as they were made, where tests/conftest.py switches the check on), and compare their
    decisions byte for byte: the purity check is off while they run. Checking every plan of
    every replay again (a replay from the start per cut) was most of the property tests' time:
    the preemption machine 187 s of CI's run, 20 s without."""
    checked = partition.CHECK_PURE
    partition.CHECK_PURE = False
    try:
        yield
    finally:
        partition.CHECK_PURE = checked


def replay_is_identical(entries: Sequence[Entry], per_entry: Sequence[list[bytes]]) -> None:
    """A fresh core fed the same log makes byte-identical output lines."""
    with plans_made_again():
        again = Core(load_yaml=load_yaml)
        for i, e in enumerate(entries):
            got = [encode_output(o) for o in again.apply(e)]
            assert got == per_entry[i], f"replay: entry {i} (seq {e.seq}) decided differently"


def places(core: Core) -> dict[tuple[str, str, str, str], str]:
    """Where each ask of `core` is (its place, core/lifecycle.py ASK_PLACE), by RM, partition,
    application and key: a snapshot does not store it, a load derives it."""
    return {(rm, p.name, a.id, k.key): k.place.value for rm, p in partitions(core)
            for a in p.apps.values() for k in a.asks.values()}


def snapshot_plus_tail_is_full_replay(entries: Sequence[Entry], per_entry: Sequence[list[bytes]],
                                      cuts: Iterable[int], final: dict) -> None:
    """A core restored from a snapshot taken after `cut` entries, fed the rest, makes the
    outputs and reaches the state of the core that applied everything."""
    with plans_made_again():
        for cut in cuts:
            head = Core(load_yaml=load_yaml)
            for e in entries[:cut]:
                head.apply(e)
            resumed = load_snapshot(dump_snapshot(head), load_yaml)
            assert resumed.dump() == head.dump(), \
                f"snapshot after entry {cut} restores another state: {first_diff(head.dump(), resumed.dump())}"
            assert places(resumed) == places(head), f"snapshot after entry {cut} restores asks in other places"
            for _, p in partitions(resumed):
                waits_are_consistent(p)
                accounting_is_consistent(p)  # (what the ledger counts is recounted at the load)
            for i, e in enumerate(entries[cut:], cut):
                got = [encode_output(o) for o in resumed.apply(e)]
                assert got == per_entry[i], f"snapshot at {cut}: entry {i} decided differently"
            assert resumed.dump() == final, f"snapshot at {cut}: {first_diff(final, resumed.dump())}"


def _sum_by_queue(items) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for path, res in items:
        for q in path:
            total = out.setdefault(q.path, {})
            for t, v in res.items():
                total[t] = total.get(t, 0) + v
    return out


def preempting_by_queue(p: Partition, but: Iterable[str] = ()) -> dict[str, dict[str, int]]:
    """Per queue path, what its allocations being preempted (not released yet) hold; `but`:
    the uuids of allocations not to count (preempted later in the entry being checked)."""
    left_out = set(but)
    return _sum_by_queue((a.app.path, a.resource) for a in p.allocations.values()
                         if a.preempting and a.uuid not in left_out)


def coming_by_queue(p: Partition) -> dict[str, dict[str, int]]:
    """Per queue path, what the asks holding a node their victims free will take there."""
    return _sum_by_queue((n.reserved.app.path, n.reserved.resource) for n in p.nodes.values()
                         if n.preempting and n.reserved is not None)


def apps_below(q):
    """The applications of `q`'s subtree."""
    if q.leaf:
        return list(q.apps.values())
    return [a for c in q.children.values() for a in apps_below(c)]


def victim_index_is_the_allocations(p: Partition) -> None:
    """While the ledger indexes victims (core/ledger.py), each leaf's classes are exactly its
    allocations that allow preemption, in booking order; else every index is empty."""
    expected: dict[str, dict[tuple[int, int], list[str]]] = {}
    if p.ledger.indexed:
        for a in p.allocations.values():
            if a.preempt_self:
                expected.setdefault(a.app.queue.path, {}).setdefault((a.priority, id(a.resource)), []).append(a.uuid)
    for q in p.queues.values():
        got = {k: list(v) for k, v in q.victims.items()}
        assert got == expected.get(q.path, {}), f"queue {q.path}: victims index {got} != {expected.get(q.path)}"
