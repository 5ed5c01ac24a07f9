"""A dry run of a job against the live state (`ykbus explain --would-fit`, the read API's
`wouldfit`, `POST /api/wouldfit`; docs/time.md): where an application, as its RM would send
it, would go now, or why not and when it would start, and what a smaller request would get
now. Computed on the state as it is, writing nothing (no log entry, no cache of the core):
a function of the state and the request, so the same log gives the same answer.

The request: `{"application": <AddApplicationRequest>, "asks": [<AllocationAsk>, ...]}`
(the SI's messages, as JSON or YAML), with an optional `rm` (default: the only RM). Checked
before anything is read: sizes bounded (`MAX_ASKS`, `MAX_MEMBERS`), every field by the SI's
types, each error naming its field.

How it answers, in the partition's terms:
1. **The members**: each ask's `maxAllocations` (at least 1) allocations of its resource,
   by priority then the order given; a gang (the application's `placeholderAsk`, or
   placeholders among the asks) is placed whole or not at all, as any set of asks sent
   together is judged here.
2. **Room**: the queue (by name, as given: placement rules are not run) must exist and be a
   leaf; each queue on its path with a max must have room for the members' total. Nodes:
   the schedulable ones reserved for no ask and in no reserved topology domain, in the
   partition's node order; first fit, members in order (core/packing.py `first_fit` on the
   nodes' free room, read in one slice), or, with a topology tag on the application, the
   domain a gang of those members would get (`choose`, as core/topoplace.py chooses it, on
   a copy of the room read in slices); asks with topology tags of their own in groups, each
   in a domain of its own (`place_groups`, as the core places a gang's task groups). Without
   topology or a gang, what finds no free node takes reserved room the core would lend it
   (`_backfilled`, the planner's rule on copies of the room).
3. **When**: if it does not fit, the earliest log time the members fit the nodes if every
   allocation ends at its runtime limit (core/backfill.py `FreeNodes`, as core/timeline.py
   `earliest_start` says it; in one domain of the level a `required` tag names), or why
   there is no estimate.
4. **Smaller**: the most members that fit now (first fit stops at the first that does not;
   a domain: the most that one domain holds); for a single allocation, the largest part of
   its shape (every quantity scaled alike) that one node has free.
Over NATS and HTTP it runs in slices of bounded work (`answer_steps`: at most `SLICE_NODES`
nodes, `SLICE_ONE` nodes' own estimates or `SLICE_ENDS` end bounds read, or one placement),
the writer applying entries between them; `--log` and tests run it at once (`would_fit`).
Not judged (the answer says it is a dry run): user and group limits, `maxapplications`, where
a node policy would put it (its name is checked, as the core's checks on submission run
first), required nodes, and the asks already waiting ahead of it.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ykbus import limits
from ykbus.core import why
from ykbus.core.backfill import (
    NS_PER_MS,
    Backfill,
    FreeNodes,
    ask_limit_ms,
    groups_estimate_steps,
    lends,
    lent_by,
)
from ykbus.core.dryrequest import DryRunError, Request, parse
from ykbus.core.intake import ask_tags_problem, queue_problem, tags_problem
from ykbus.core.lifecycle import NodeState
from ykbus.core.packing import MISSED, first_fit
from ykbus.core.resources import Res, first_over, fmt_quantity, fmt_res, resources_of, sub_into
from ykbus.core.timeline import fmt_log_time
from ykbus.core.topology import (
    ANYWHERE,
    DomainIndex,
    Fit,
    NoDomain,
    TopologyMode,
    TopologyRequest,
    best_fit,
    choose,
    path_of,
    place_groups,
    request_of,
    total_of,
)

if TYPE_CHECKING:
    from ykbus.core.core import Core
    from ykbus.core.model import Node, Queue
    from ykbus.core.partition import Partition

SLICE_NODES = 2000  # nodes read in one slice of a dry run (about 2 ms; `answer_steps`)


def would_fit(core: Core, obj: Any) -> dict[str, Any]:
    """The dry run's answer to `obj` (a decoded request) on `core`'s state, as it is, at once
    (`--log`, tests; the live core answers through bus/readapi.py `would_fit_live`)."""
    steps = answer_steps(core, obj)
    while True:
        answer = step(steps)
        if answer is not None:
            return answer


def step(steps: Generator[None, None, dict[str, Any]]) -> dict[str, Any] | None:
    """One slice of a dry run (`answer_steps`): the answer once it is done, else None (the
    writer may apply entries before the next). Without the cyclic garbage collector
    meanwhile (as a snapshot is written): a dry run makes thousands of acyclic objects,
    whose count would start collections that walk the core's young objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        next(steps)
    except StopIteration as done:
        answer: dict[str, Any] = done.value
        return answer
    finally:
        if enabled:
            gc.enable()
    return None


def answer_steps(core: Core, obj: Any) -> Generator[None, None, dict[str, Any]]:
    """The dry run in slices of bounded work (a first fit on the live nodes, at most
    `SLICE_NODES` nodes or `SLICE_ENDS` end bounds read, or one placement on the copy of a
    topology request's room): the state may change between two (the writer applies entries
    then), so nothing read live is kept across a slice but the nodes themselves, and what the
    answer says is of the state at the slice that read it."""
    request = parse(obj)
    part, rm_id = _partition(core, request)
    application = request.application
    queue = part.records.resolve_queue(application.queueName or "root.default")
    if queue is None:
        raise DryRunError(f"application.queueName: queue {application.queueName!r} does not exist in partition "
                          f"{part.name} of rm {rm_id} (a dry run does not run placement rules)")
    if not queue.leaf:
        raise DryRunError(f"application.queueName: queue {queue.path} is a parent queue: applications go to leaves")
    refused = tags_problem(application.tags, part.records.topology_levels)  # the core's own checks (core/intake.py)
    if refused:
        raise DryRunError(f"application.tags: the core would reject the application: {refused}")
    refused = queue_problem(queue, application)
    if refused:
        raise DryRunError(f"application.placeholderAsk: the core would reject the application: {refused}")
    if application.applicationID in part.apps:
        raise DryRunError(f"application.applicationID: the core would reject the application: application "
                          f"{application.applicationID} already exists (a dry run is of a job not yet submitted)")
    levels = part.records.topology_levels
    keys_at: dict[str, int] = {}
    for i, ask in enumerate(request.asks):
        refused = ask_tags_problem(ask.tags, levels) if ask.tags else ""
        if refused:
            raise DryRunError(f"asks[{i}].tags: the core would reject the ask: {refused}")
        first = keys_at.setdefault(ask.allocationKey, i)
        if first != i:
            raise DryRunError(f"asks[{i}].allocationKey: {limits.quoted(ask.allocationKey)} is the key of asks[{first}] "
                              "too: the core would take it as a new request for that ask, not another one (give each "
                              "ask its own key)")
    app_topology = request_of(application.tags) if part.records.config.topology.levels else None
    members, keys, groups, limits_ms = _members(request, bool(part.records.config.topology.levels), app_topology,
                                                queue.ancestry())
    out: dict[str, Any] = {"rm": rm_id, "partition": part.name, "application": application.applicationID,
                           "queue": queue.path, "now": core.now, "lastSeq": core.last_seq, "members": len(members),
                           "asked": total_of(members), "judged": "a dry run: user and group limits, maxapplications, "
                           "where a node policy would put it, required nodes and the asks waiting ahead of it are "
                           "not judged"}
    over = _queue_over(queue, total_of(members))
    if len(groups) > 1 or (groups and groups[0].request is not None):  # asks with topology tags of their own
        result = yield from _in_groups(part, members, keys, groups, app_topology, over, core.now, out)
        return result
    topology = app_topology
    fit: Fit | NoDomain | None = None  # a topology request's placement, or why none
    if topology is None:  # first fit on the live nodes, in one slice: no copy of their room
        nodes = _free_nodes(part)
        rooms = [n.free for n in nodes]
        placed = first_fit(rooms.__getitem__, len(rooms), members, stop_at_miss=True)
        where = [nodes[i].id for i in placed] if len(placed) == len(members) else None
        if where is None and over is None and any(limits_ms):  # room a reservation would lend them
            found = _backfilled(part, nodes, members, limits_ms, core.now)
            if found is not None:
                where, lent = found
                out["backfilled"] = [{"allocationKey": keys[i], **lent_to} for i, lent_to in lent]
    else:  # a domain, as core/topoplace.py chooses it, on a copy of the room, read in slices
        index, order = yield from _room(part)
        fit = _place(index, order, members, topology)
        where = fit.nodes if isinstance(fit, Fit) else None
    if over is None and where is not None:
        out["fits"] = True
        out["placement"] = [{"allocationKey": k, "nodeID": n} for k, n in zip(keys, where, strict=True)]
        if isinstance(fit, Fit) and fit.level != ANYWHERE:
            out["domain"] = {"level": fit.level, "domain": fit.domain.name}
        return out
    out["fits"] = False
    out["reason"] = over if over is not None else _why_not(fit, members)
    out["estimate"] = yield from _estimate(part, [(members, topology)], core.now)
    if len(members) == 1:
        out["smaller"] = yield from _largest_shape(nodes if topology is None else _in_a_domain(part, topology),
                                                   members[0])
    elif topology is not None:
        out["smaller"] = yield from _smaller(index, order, members, topology)
    else:  # first fit placed the members in order up to the first that fits nowhere: the most that fit
        out["smaller"] = {"members": len(placed),
                          "text": f"{len(placed)} of the {len(members)} allocations would fit now"}
    return out


def _backfilled(part: Partition, nodes: list[Node], members: list[Res], limits_ms: list[int],
                now: int) -> tuple[list[str], list[tuple[int, dict[str, Any]]]] | None:
    """Rule 2, backfill: each member in turn, as the planner places asks, on the first free
    node with room (`nodes`, in the partition's node order) or else, with a runtime limit, on
    the first reserved node the core would lend it (core/backfill.py `lends`, the planner's
    rule: its limit at most half the time to the reservation's estimated start, a sixth in a
    gang's domain), on copies of their free room. The nodes, and for each member lent reserved
    room (its position) whose reservation and until when; None if one finds no room."""
    free = first_fit([n.free for n in nodes].__getitem__, len(nodes), members, stop_at_miss=False)
    lendable = Backfill(part.records, part.waits.places.reserved_nodes).lendable(now)
    lent_rooms = [dict(node.free) for node, _ in lendable]
    where: list[str] = []
    lent: list[tuple[int, dict[str, Any]]] = []
    for i, (member, at) in enumerate(zip(members, free, strict=True)):
        if at != MISSED:  # (free nodes and reserved ones are apart: the free are placed first alike)
            where.append(nodes[at].id)
            continue
        for j, (node, start) in enumerate(lendable):
            if lends(node, start, now, limits_ms[i], member, lent_rooms[j]):
                sub_into(lent_rooms[j], member)
                where.append(node.id)
                lent.append((i, {"nodeID": node.id, "lentBy": lent_by(node), "endsBy": now + limits_ms[i] * NS_PER_MS,
                                 "startsBy": start}))
                break
        else:
            return None
    return where, lent


def _in_groups(part: Partition, members: list[Res], keys: list[str], groups: list[DryGroup],
               app_topology: TopologyRequest | None, over: str | None, now: int,
               out: dict[str, Any]) -> Generator[None, None, dict[str, Any]]:
    """Rule 2 for asks with topology tags of their own: each group (a gang's task group with
    its own tag; else the asks of one request) in a domain of its own, the others by the
    application's tag or anywhere (core/topology.py `place_groups`, as the core places
    them); rules 3 and 4 by the group that found none."""
    index, order = yield from _room(part)
    requests = [g.request if g.request is not None else app_topology for g in groups]
    found = place_groups(index, [(r, [members[i] for i in g.members], None) for r, g in zip(requests, groups, strict=True)],
                         order)
    if over is None and not isinstance(found, tuple):
        where = [""] * len(members)
        domains = []
        for g, fit in zip(groups, found, strict=True):
            for i, node_id in zip(g.members, fit.nodes, strict=True):
                where[i] = node_id
            if fit.level != ANYWHERE:
                named = {"taskGroup": g.task_group} if g.task_group else {"allocationKeys": sorted({keys[i] for i in g.members})}
                domains.append({**named, "level": fit.level, "domain": fit.domain.name})
        out["fits"] = True
        out["placement"] = [{"allocationKey": k, "nodeID": n} for k, n in zip(keys, where, strict=True)]
        out["domains"] = domains
        return out
    at = found[0] if isinstance(found, tuple) else 0
    group, request = groups[at], requests[at]
    shapes = [members[i] for i in group.members]
    out["fits"] = False
    if over is not None:
        out["reason"] = over
    else:
        assert isinstance(found, tuple)
        reason = _why_not(found[1], shapes)
        out["reason"] = f"task group {group.task_group}: {reason}" if group.task_group else reason
    out["estimate"] = yield from _estimate(part, [([members[i] for i in g.members], r)  # each group in its domain
                                                  for g, r in zip(groups, requests, strict=True)], now)
    if len(shapes) == 1:
        out["smaller"] = yield from _largest_shape(_in_a_domain(part, request) if request is not None
                                                   else _free_nodes(part), shapes[0])
    else:
        out["smaller"] = yield from _smaller(index, order, shapes, request)
    if group.task_group:
        out["smaller"]["text"] = f"task group {group.task_group}: {out['smaller']['text']}"
    return out


def _free_nodes(part: Partition) -> list[Node]:
    """Rule 2: the nodes it may take, in the partition's node order (schedulable, reserved
    for no ask, in no reserved domain)."""
    nodes = part.records.nodes
    out = []
    for _, node_id in part.waits.node_index:
        node = nodes[node_id]
        if node.reserved is None:
            out.append(node)
    return out


def _in_a_domain(part: Partition, topology: TopologyRequest) -> list[Node]:
    """`_free_nodes`, of those in a domain of the level a `required` tag names (a node
    without it cannot take the ask)."""
    nodes = _free_nodes(part)
    levels = part.records.config.topology.levels
    if topology.mode is not TopologyMode.REQUIRED or topology.level not in levels:
        return nodes
    depth = levels.index(topology.level) + 1
    return [n for n in nodes if len(path_of(levels, n.attributes)) >= depth]


def _still(part: Partition) -> None:
    """After a slice: DryRunError if the partition went meanwhile (its RM unregistered)."""
    if not part.records.alive:
        raise DryRunError(f"partition {part.name} was removed during the dry run (its RM unregistered)")


def _partition(core: Core, request: Request) -> tuple[Partition, str]:
    rms = core.rms
    if request.rm:
        rm = rms.get(request.rm)
        if rm is None:
            raise DryRunError(f"rm: {request.rm!r} is not registered (registered: {', '.join(sorted(rms)) or 'none'})")
    elif len(rms) == 1:
        rm = next(iter(rms.values()))
    else:
        raise DryRunError(f"rm: {len(rms)} RMs are registered ({', '.join(sorted(rms))}): say which one (the request's 'rm': `ykbus explain --rm`, `?rm=` over HTTP)"
                          if rms else "rm: no RM is registered")
    name = request.application.partitionName or "default"
    part = rm.partitions.get(name)
    if part is None:
        raise DryRunError(f"application.partitionName: partition {name!r} does not exist for rm {rm.id}")
    return part, rm.id


class DryGroup:
    """Members placed in a domain of their own (positions in the members): a gang's task
    group whose asks carry their own topology tag, the asks of an application without
    placeholders sharing their own tag's request, or (`request` None) all the others."""

    __slots__ = ("task_group", "request", "members")

    def __init__(self, task_group: str, request: TopologyRequest | None) -> None:
        self.task_group, self.request = task_group, request
        self.members: list[int] = []


def _members(request: Request, levels: bool, app_topology: TopologyRequest | None,
             path: list[Queue]) -> tuple[list[Res], list[str], list[DryGroup], list[int]]:
    """Rule 1: one resource per allocation asked, by priority then as given, its ask key,
    the groups they are placed in, and its runtime limit in ms (its ask's in force in the
    queue of `path`, leaf first: core/backfill.py `ask_limit_ms`; 0 for none, and for a
    gang's, which never backfill) as the core would fix it; the groups as the core groups them: a gang's by task group
    when its ask has a topology tag of its own, the request its first such ask's
    (core/topoplace.py `group_of`), the others together; an application's asks by the
    request in force, their own tag's else the application's (core/gang.py `plan_sets`).
    One group when no ask asks otherwise than its application."""
    asks = sorted(enumerate(request.asks), key=lambda e: (-e[1].priority, e[0]))
    gang = bool(resources_of(request.application.placeholderAsk)) or any(a.placeholder for a in request.asks)
    members: list[Res] = []
    keys: list[str] = []
    limits_ms: list[int] = []
    groups: dict[tuple[str, TopologyRequest | None], DryGroup] = {}
    for _, ask in asks:
        res = resources_of(ask.resourceAsk)
        own = request_of(ask.tags) if levels and ask.tags else None
        if own is not None and not gang and own == app_topology:
            own = None  # the application's request: one set with its asks of no tag of their own
        key: tuple[str, TopologyRequest | None] = (
            ("", None) if own is None else (ask.taskGroupName, None) if gang else ("", own))
        group = groups.get(key)
        if group is None:  # (the group of no task group follows its application's request, as the core's)
            group = groups[key] = DryGroup(key[0], None if key == ("", None) else own)
        limit = 0 if gang else ask_limit_ms(ask.executionTimeoutMilliSeconds, False, path)
        for _ in range(max(1, ask.maxAllocations)):
            group.members.append(len(members))
            members.append(res)
            keys.append(ask.allocationKey)
            limits_ms.append(limit)
    if not members:  # a gang that sent only its placeholderAsk: one member of it
        members.append(resources_of(request.application.placeholderAsk))
        keys.append("placeholder")
        limits_ms.append(0)
        groups[("", None)] = DryGroup("", None)
        groups[("", None)].members.append(0)
    return members, keys, list(groups.values()), limits_ms


def _queue_over(queue: Queue, total: Res) -> str | None:
    """Rule 2: why a max on the queue's path holds the members, or None (the scheduler's check,
    core/scheduling.py `held_by_max`, on their total)."""
    for q in queue.ancestry():
        over = first_over(q.allocated, total, q.max) if q.max else None
        if over is not None:
            used = q.allocated.get(over, 0)
            return (f"queue {q.path} max {over} {fmt_quantity(over, q.max[over])} would be exceeded: "
                    f"{fmt_quantity(over, used)} used + {fmt_quantity(over, total[over])} asked")
    return None


def _room(part: Partition) -> Generator[None, None, tuple[DomainIndex, list[str]]]:
    """Rule 2: the nodes it may take, in the partition's node order, in a domain index of
    their free room (a copy: the planner's is not touched), `SLICE_NODES` at a time."""
    records = part.records
    index = DomainIndex(records.config.topology.levels)
    order: list[str] = []
    wanted = [node_id for _, node_id in part.waits.node_index]  # the schedulable nodes out of reserved domains
    for start in range(0, len(wanted), SLICE_NODES):
        if start:
            yield
            _still(part)
        nodes = records.nodes
        for node_id in wanted[start:start + SLICE_NODES]:
            node = nodes.get(node_id)
            if node is not None and node.reserved is None and node.state is NodeState.SCHEDULABLE and not node.held:
                index.set_node(node_id, node.attributes, True, node.free)  # (copied: positive(free))
                order.append(node_id)
    return index, order


def _place(index: DomainIndex, order: list[str], members: list[Res], topology: TopologyRequest | None) -> Fit | NoDomain:
    if topology is None:
        return best_fit(index, members, ANYWHERE, order)
    return choose(index, members, topology, order)


def _why_not(found: Fit | NoDomain | None, members: list[Res]) -> str:
    if isinstance(found, NoDomain) and found.level != ANYWHERE:  # a topology domain's reason
        return found.message
    if len(members) == 1:
        return why.no_node_room(members[0]).message  # as the scheduler says it
    return (f"the {len(members)} allocations ({fmt_res(total_of(members))} in all) do not fit the free room of the nodes "
            "together, placed first fit in the partition's node order")


def _estimate(part: Partition, groups: list[tuple[list[Res], TopologyRequest | None]],
              now: int) -> Generator[None, None, dict[str, Any]]:
    """Rule 3 (core/backfill.py `groups_estimate_steps`: each group of members by its
    request, the latest start), the partition checked after each slice: the state may change
    between two."""
    steps = groups_estimate_steps(part.records, FreeNodes(part.records), groups, now)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            answer: dict[str, Any] = done.value
            return answer
        yield
        _still(part)


def _smaller(index: DomainIndex, order: list[str], members: list[Res],
             topology: TopologyRequest | None) -> Generator[None, None, dict[str, Any]]:
    """Rule 4 for a topology request (None: anywhere), on the copy of the room `_room` read
    (one placement a slice): the most members one domain holds (of two or more)."""
    lo, hi = 0, len(members)  # the most members that fit now: fitting is monotone in the count
    while lo < hi:
        yield
        mid = (lo + hi + 1) // 2
        if isinstance(_place(index, order, members[:mid], topology), Fit):
            lo = mid
        else:
            hi = mid - 1
    return {"members": lo, "text": f"{lo} of the {len(members)} allocations would fit now"}


def _largest_shape(nodes: list[Node], shape: Res) -> Generator[None, None, dict[str, Any]]:
    """Rule 4 for one allocation: the largest part of its shape one node has free, reading
    the live nodes, `SLICE_NODES` a slice."""
    best = 0.0
    best_node = ""
    for start in range(0, len(nodes), SLICE_NODES):
        if start:
            yield
        for node in nodes[start:start + SLICE_NODES]:
            node_id, free = node.id, node.free
            scale = min((free.get(name, 0) / value for name, value in shape.items() if value > 0), default=0.0)
            if scale > best:
                best, best_node = min(scale, 1.0), node_id
    if not best_node:
        return {"resource": {}, "text": "no node has any of it free"}
    largest = {name: int(value * best) for name, value in shape.items()}
    return {"resource": largest, "nodeID": best_node,
            "text": f"{fmt_res(largest)} would fit now, on node {best_node}"}


def lines(answer: dict[str, Any]) -> list[str]:
    """The answer in words (`ykbus explain --would-fit`)."""
    head = (f"application {answer['application']} (rm {answer['rm']}, partition {answer['partition']}, "
            f"queue {answer['queue']}): {answer['members']} allocation(s), {fmt_res(answer['asked'])} in all")
    out = [head]
    if answer["fits"]:
        where = answer.get("domain")
        nodes: dict[str, int] = {}
        for p in answer["placement"]:
            nodes[p["nodeID"]] = nodes.get(p["nodeID"], 0) + 1
        on = ", ".join(f"{n} ({c})" if c > 1 else n for n, c in nodes.items())
        if where:
            at = f", in {where['level']} {where['domain']}"
        else:  # a domain per group of asks with topology tags of their own
            at = "".join(f", {d.get('taskGroup') and 'task group ' + d['taskGroup'] or ' '.join(d['allocationKeys'])} "
                         f"in {d['level']} {d['domain']}" for d in answer.get("domains", []))
        out.append(f"  would fit now{at}: on {on}")
        for b in answer.get("backfilled", []):
            out.append(f"  backfilled: {b['allocationKey']} on node {b['nodeID']}, on room held for {b['lentBy']}: its "
                       f"runtime limit would end it by {fmt_log_time(b['endsBy'], answer['now'])}, before that one's "
                       f"estimated start ({fmt_log_time(b['startsBy'], answer['now'])})")
    else:
        out.append(f"  would not fit now: {answer['reason']}")
        out.append(f"  {answer['estimate']['text']}")
        out.append(f"  smaller: {answer['smaller']['text']}")
    out.append(f"  ({answer['judged']})")
    return out
