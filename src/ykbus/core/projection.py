"""The read projection: the state as plain, deterministic values (read API, `ykbus explain`,
tests). Never live objects: what leaves here can be encoded and compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ykbus.core import why
from ykbus.core.backfill import FreeNodes, groups_estimate_steps, limits_in_use, no_candidate, run_through
from ykbus.core.lifecycle import NodeState
from ykbus.core.model import App
from ykbus.core.partition import Partition
from ykbus.core.preemption import why_not_yet
from ykbus.core.registry import ResourceManager
from ykbus.core.resources import Res, fits
from ykbus.core.timeline import Estimate, NoEstimate, fmt_in
from ykbus.core.topology import TopologyRequest, path_of, request_of
from ykbus.core.topoplace import group_of
from ykbus.core.why import PendingCode
from ykbus.limits import saturated

SECTIONS = ("queues", "nodes", "applications", "terminated", "allocations")  # built unless told
TOPOLOGY = "topology"  # a section built only when asked for (the read API's `topology`)


class Where(msgspec.Struct, frozen=True):
    """What a read asks for (the read API's request), applied before anything is built: the
    RM and partition; of applications (live and ended), one id, a queue (that queue and those
    under it) and a state (any case); `brief`, each live application as a row of a list
    (`_brief`: counts and reason codes, no asks, no node figures: what a table of every
    application can afford)."""

    rm: str | None = None
    partition: str | None = None
    queue: str | None = None
    state: str | None = None
    brief: bool = False

    def takes(self, queue: str, state: str) -> bool:
        q = self.queue
        return ((q is None or queue == q or queue.startswith(q + "."))
                and (self.state is None or state.lower() == self.state.lower()))


EVERYTHING = Where()


def project(last_seq: int, now: int, queue_files: Mapping[str, str], rms: Mapping[str, ResourceManager],
            sections: tuple[str, ...] = SECTIONS, app: str | None = None, where: Where = EVERYTHING) -> dict[str, Any]:
    """A plain, deterministic projection of the state (read API, tests). `sections`
    limits what is built per partition (counts of everything are always there); `app`, the
    applications and terminated ones to that one application; `where`, what else is wanted."""
    out: dict[str, Any] = {"last_seq": last_seq, "now": now, "rms": {}, "queue_files": dict(queue_files)}
    for rm in rms.values():
        if where.rm is not None and rm.id != where.rm:
            continue
        parts = {}
        for p in rm.partitions.values():
            if where.partition is not None and p.name != where.partition:
                continue
            full = {
                "queues": lambda p=p: _queues_dump(p),
                "nodes": lambda p=p: {n.id: _node(n) for n in p.nodes.values()},
                "applications": lambda p=p: _briefs(p, app, where) if where.brief else _applications(p, now, app, where),
                "terminated": lambda p=p: _ended(p, app, where),
                "allocations": lambda p=p: {
                    u: {"applicationID": a.app.id, "allocationKey": a.key, "nodeID": a.node.id,
                        "resource": dict(a.resource),
                        **({"domains": _node_domains(p, a.node.attributes)} if p.records.config.topology.levels
                           else {})}
                    for u, a in p.allocations.items()
                },
                "topology": lambda p=p: topology_tree(p),
            }
            parts[p.name] = {
                "nodeSortPolicy": p.records.node_sort.value,
                "total": saturated(p.total),
                "counts": {"queues": len(p.queues), "nodes": len(p.nodes), "applications": len(p.apps),
                           "allocations": len(p.allocations)},
                "summary": p.records.summary.dao(),  # the read model (core/readmodel.py), not a walk of the state
                **{name: full[name]() for name in sections},
            }
        out["rms"][rm.id] = {"state": rm.state.value, "policyGroup": rm.policy_group,
                             "encoding": rm.encoding, "partitions": parts}
    return out


def _ended(p: Partition, app: str | None, where: Where = EVERYTHING) -> dict[str, Any]:
    """The applications that ended (until their terminated timer) and those rejected (the
    newest `REJECTED_KEPT`), by id: how and when; of an id in both, the later."""
    out: dict[str, Any] = {}
    for records in (p.rejected, p.terminated):
        items = records.items() if app is None else ([(app, records[app])] if app in records else [])
        for k, v in items:
            known = out.get(k)
            if known is None or v.ts >= known["endedAt"]:
                out[k] = {"state": v.state.value, "queue": v.queue, "endedAt": v.ts, "message": v.message}
    if where.queue is None and where.state is None:
        return out
    return {k: v for k, v in out.items() if where.takes(v["queue"], v["state"])}


def _briefs(p: Partition, app: str | None, where: Where) -> dict[str, Any]:
    """Each live application `where` takes, as a row of a list: its queue, state, user,
    allocated and pending resources, highest pending priority, how many allocations, its
    pending asks counted by the code of their reason (O(1) per ask: `why_pending`), and its
    reason's code (that of the ask the pass would try first, as `_app_why`)."""
    out: dict[str, Any] = {}
    for a in _apps_of(p, app, where):
        pending = [k for k in a.asks.values() if k.pending]
        codes = {k.key: p.records.why_pending(k).code.value for k in pending}
        waiting: dict[str, int] = {}
        for k in pending:
            waiting[codes[k.key]] = waiting.get(codes[k.key], 0) + k.pending
        first = _first_pending(pending)
        out[a.id] = {"queue": a.queue.path, "state": a.state.value, "user": a.user,
                     "allocated": saturated(a.allocated), "pending": saturated(a.pending), "maxPriority": a.max_priority,
                     "allocations": len(a.allocations), "waiting": waiting,
                     "why": None if first is None else {"allocationKey": first.key, "code": codes[first.key]}}
    return out


def _apps_of(p: Partition, app: str | None, where: Where) -> list[App]:
    """The live applications a read asks for: `app` alone (the rest not read), those `where` takes."""
    apps = list(p.apps.values()) if app is None else [a for a in (p.apps.get(app),) if a is not None]
    if where.queue is None and where.state is None:
        return apps
    return [a for a in apps if where.takes(a.queue.path, a.state.value)]


def _first_pending(pending: list[Any]) -> Any:
    """The pending ask the pass would try first (the highest priority, then the oldest), whose
    reason is its application's; None of none."""
    return min(pending, key=lambda k: (-k.priority, k.seq)) if pending else None


def _applications(p: Partition, now: int, app: str | None = None, where: Where = EVERYTHING) -> dict[str, Any]:
    """Each application (`app`: that one alone, the rest not built: an answer fits one message)."""
    apps = _apps_of(p, app, where)
    estimates = Estimates(p, now)  # one per read: the candidate nodes read once, one estimate per shape
    return {
        a.id: {"queue": a.queue.path, "state": a.state.value, "user": a.user,
               "allocated": saturated(a.allocated), "pending": saturated(a.pending),
               "maxPriority": a.max_priority,
               "asks": {k.key: {"pending": k.pending, "allocated": k.allocated,
                                "priority": k.priority, "resource": dict(k.resource),
                                "waiting": k.waiting.name if k.waiting is not None else None, "reason": k.reported,
                                "why": _why(p, k, now, estimates)}
                        for k in a.asks.values()},
               "why": _app_why(p, a, now, estimates),
               "allocations": list(a.allocations),
               **_backfilled(a),
               **({"topology": _app_topology(p, a)} if p.records.config.topology.levels else {})}
        for a in apps
    }


def _backfilled(a: App) -> dict[str, Any]:
    """`backfilled`: the application's allocations placed on room a reservation holds (docs/
    time.md, backfill), each with whose reservation lent it and the end bound its runtime limit
    sets, by which the core ends it; nothing when none is."""
    lent = [{"allocationKey": x.key, "UUID": x.uuid, "nodeID": x.node.id, "lentBy": x.lent, "endsBy": x.end}
            for x in a.allocations.values() if x.lent]
    return {"backfilled": lent} if lent else {}


NAMED_NODES = 10  # nodes named in a NoNodeRoom reason's details (then a count of the others)


class Estimates:
    """When the asks waiting for room would start (core/backfill.py), for one projection:
    the candidate nodes read once, one estimate per shape; and the figures of the nodes for
    an ask waiting for room, once per shape (`_room_figures`)."""

    def __init__(self, p: Partition, now: int) -> None:
        self.p, self.now = p, now
        self.free: FreeNodes | None = None
        self.by_shape: dict[str, Estimate | NoEstimate | None] = {}
        self.by_set: dict[tuple[str, int], dict[str, Any]] = {}
        self.figures: dict[str, dict[str, Any]] = {}
        self.holding: set[str] | None = None

    def holders(self) -> set[str]:
        """The applications that reserve a topology domain or nodes (read once)."""
        if self.holding is None:
            records = self.p.records
            self.holding = {a.id for a in records.domain_holds.values()} | {a.id for a in records.node_holders()}
        return self.holding

    def of(self, ask: Any) -> Estimate | NoEstimate | None:
        """None: no allocation on the free nodes has a runtime limit."""
        if ask.shape in self.by_shape:
            return self.by_shape[ask.shape]
        free = self._free()
        found: Estimate | NoEstimate | None
        if not free.candidates and limits_in_use(self.p.records):
            found = no_candidate(self.p.records, [ask.resource])
        else:
            found = free.estimate([ask.resource], self.now) if free.limited else None
        self.by_shape[ask.shape] = found
        return found

    def _free(self) -> FreeNodes:
        """The candidate nodes, read once per projection."""
        if self.free is None:
            self.free = FreeNodes(self.p.records)
        return self.free

    def of_set(self, ask: Any) -> dict[str, Any]:
        """What the reason of an ask of a topology set or gang that no domain holds gains:
        `estimate` and `estimatedStart` as its dry run gives them (core/dryrun.py: over the
        free nodes, by domain for `required`, as if first in line), once per set; nothing
        without limits in use."""
        app = ask.app
        key = (app.id, -1 if app.gang else ask.at)  # a gang's placeholders; a set: the asks sent together
        found = self.by_set.get(key)
        if found is None:
            found = {}
            if limits_in_use(self.p.records):
                request = request_of(ask.tags) or request_of(app.tags)
                if app.gang:  # its placeholders by group; none waiting (a lost member asked again): the ask
                    groups = _gang_groups(app) or [([ask.resource] * ask.pending, request)]
                else:  # the asks sent with it
                    groups = [([a.resource for a in app.asks.values() if a.pending and a.at == ask.at
                                for _ in range(a.pending)], request)]
                answer = run_through(groups_estimate_steps(self.p.records, self._free(), groups, self.now))
                found = {"estimate": answer["text"], **({"estimatedStart": answer["start"]} if "start" in answer else {})}
            self.by_set[key] = found
        return found

    def details(self, ask: Any) -> dict[str, Any]:
        """What a waiting ask's reason gains: `estimate` (its text, how far off as of the read)
        and `estimatedStart`, or `estimate` alone saying why there is none; nothing without
        limits in use."""
        found = self.of(ask)
        if isinstance(found, Estimate):
            return {"estimate": found.text(self.now), "estimatedStart": found.at}
        return {"estimate": found.text()} if found is not None else {}


def _gang_groups(app: Any) -> list[tuple[list[Res], TopologyRequest | None]]:
    """The waiting placeholders of `app`'s gang by topology group (core/topoplace.py
    `group_of`: a task group whose asks ask for a domain of their own, else the
    application's request), each with its request, by group."""
    by_group: dict[str, tuple[list[Res], TopologyRequest | None]] = {}
    for a in app.asks.values():
        if a.placeholder and a.pending:
            key = group_of(a)
            found = by_group.get(key)
            if found is None:
                found = by_group[key] = ([], request_of(a.tags) if key else request_of(app.tags))
            found[0].extend([a.resource] * a.pending)
    return [by_group[key] for key in sorted(by_group)]


def fits_no_node_empty(p: Partition, asked: dict[str, int]) -> dict[str, Any]:
    """`fitsNoNodeEmpty` (true) and `largestEmpty` (per resource asked, the most a node has
    when empty) when no schedulable node would hold `asked` even empty, its capacity less
    what the RM occupies: an ask that waits for a larger node to join, not for room; {} else
    (or with no schedulable node: `notSchedulable` says that)."""
    schedulable = [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE]
    if not schedulable or any(fits(asked, n.empty_room()) for n in schedulable):  # (stops at the first that would)
        return {}
    rooms = [n.empty_room() for n in schedulable]
    return {"fitsNoNodeEmpty": True, "largestEmpty": {r: max(e.get(r, 0) for e in rooms) for r in asked}}


def _why(p: Partition, ask: Any, now: int, estimates: Estimates | None = None) -> dict[str, Any] | None:
    """Why a pending ask waits (None once nothing of it is pending). For `NoNodeRoom` the
    details gain figures of the moment, computed for the reader: `largestFree`, per
    resource asked the most any schedulable node not reserved for another ask has free;
    `reservedWithRoom`, the schedulable nodes that have room for it but are reserved for
    another ask (node -> application/ask); `fitsNoNodeEmpty` (true) when no schedulable node
    would hold it even empty (its capacity less what the RM occupies), with `largestEmpty`,
    per resource asked the most any has when empty; `heldWithRoom`, those with room for it in a
    topology domain another gang reserved (node -> the gang); `schedulableNodes`, how many there are; and when
    none is, `notSchedulable`, the nodes and their states (a drain, say)."""
    if not ask.pending:
        return None
    reason = p.records.why_pending(ask)
    out = {"code": reason.code.value, "message": reason.message, "details": dict(reason.details)}
    if (ask.preempt_other and reason.code in (PendingCode.NO_NODE_ROOM, PendingCode.RESERVED)
            and "preemption" not in reason.details):
        not_yet = why_not_yet(p.records, ask, now)  # why it has not looked for victims (docs/preemption.md)
        if not_yet:
            out["details"]["preemption"] = not_yet
    if reason.code is PendingCode.RESERVED:  # what its node still misses, now
        node = p.nodes.get(reason.details["node"])
        free = node.free if node is not None else {}
        out["details"]["missing"] = {r: v - free.get(r, 0) for r, v in ask.resource.items() if free.get(r, 0) < v}
        start = reason.details.get("estimatedStart")
        free_to_go = (not ask.required and not ask.app.domains  # it may take another node: not one it must run
                      and request_of(ask.tags) is None and request_of(ask.app.tags) is None)  # on, nor a domain
        elsewhere = estimates.of(ask) if estimates is not None and free_to_go else None
        if node is not None and isinstance(elsewhere, Estimate) and (start is None or elsewhere.at < start):
            # it takes room that frees first on a node reserved for no ask too: the earlier start,
            # said in place of its node's (what the message says after it, kept)
            base, old = why.reserved(node.id, ask.resource).message, reason.details.get("estimate", "")
            rest = reason.message[len(base):] if reason.message.startswith(base) else ""
            rest = rest[len(old) + 2:] if old and rest.startswith(f"; {old}") else rest
            start, text = elsewhere.at, elsewhere.text(None)
            out["message"] = f"{base}; {text}{rest}"
            out["details"].update(estimate=text, estimatedStart=start)
        if start is not None:  # how far off, as of the moment it is read
            out["details"]["startsIn"] = fmt_in(start - now)
    if (reason.code is PendingCode.TOPOLOGY_NO_DOMAIN or reason.code is PendingCode.GANG_NO_ROOM) \
            and estimates is not None and "estimate" not in reason.details:
        out["details"].update(estimates.of_set(ask))  # (a gang waiting on its reserved domain has its own)
    if reason.code is PendingCode.NO_NODE_ROOM:
        details = out["details"]
        details.update(_room_figures(p, ask, estimates))
        if estimates is not None:  # when room for it will be free, as the allocations' limits say
            details.update(estimates.details(ask))
    return out


def _node(n: Any) -> dict[str, Any]:
    """A node as the read API gives it; `reservedFor` (`app/ask`) when reserved for an ask,
    `heldFor` (the gang) when a waiting gang reserved it (its domain or its nodes)."""
    out: dict[str, Any] = {"state": n.state.value, "capacity": dict(n.capacity), "occupied": dict(n.occupied),
                           "allocated": saturated(n.allocated), "attributes": dict(n.attributes),
                           "allocations": list(n.allocations)}
    if n.reserved is not None:
        out["reservedFor"] = f"{n.reserved.app.id}/{n.reserved.key}"
    if n.held:
        out["heldFor"] = n.held
    return out


def _room_figures(p: Partition, ask: Any, estimates: Estimates | None) -> dict[str, Any]:
    """`_why`'s figures of the nodes for an ask waiting for room (a walk of every node): read
    once per shape in a projection (`Estimates.figures`) for the asks they are the same for,
    those that reserve no node, of applications that reserve no topology domain."""
    mine = ask.app.id
    key: str | None = None
    if estimates is not None and not ask.reserved and mine not in estimates.holders():
        key = ask.shape
        known = estimates.figures.get(key)
        if known is not None:
            return known
    details: dict[str, Any] = {}
    schedulable = [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE]
    free = [n.free for n in schedulable if (n.reserved is None or n.reserved is ask) and n.held in ("", mine)]
    details["largestFree"] = {r: max((f.get(r, 0) for f in free), default=0) for r in ask.resource}
    if schedulable and not free:  # then no figure of free room: there is no node to read one on
        details["allReserved"] = True
    details.update(fits_no_node_empty(p, ask.resource))
    held = {n.id: n.held for n in schedulable if n.held not in ("", mine) and fits(ask.resource, n.free)}
    if held:  # in a topology domain a waiting gang reserved (docs/topology.md)
        details["heldWithRoom"] = dict(list(held.items())[:NAMED_NODES])
    taken = {n.id: f"{n.reserved.app.id}/{n.reserved.key}" for n in schedulable
             if n.reserved is not None and n.reserved is not ask and fits(ask.resource, n.free)}
    if taken:
        details["reservedWithRoom"] = dict(list(taken.items())[:NAMED_NODES])
        if len(taken) > NAMED_NODES:
            details["reservedWithRoomMore"] = len(taken) - NAMED_NODES
    details["schedulableNodes"] = len(schedulable)
    if not schedulable:
        details["notSchedulable"] = {n.id: n.state.value for n in list(p.nodes.values())[:NAMED_NODES]}
    if key is not None and estimates is not None:
        estimates.figures[key] = details
    return details


def _app_why(p: Partition, app: Any, now: int, estimates: Estimates | None = None) -> dict[str, Any] | None:
    """An application's reason: that of the pending ask the pass would try first."""
    first = _first_pending([k for k in app.asks.values() if k.pending])
    if first is None:
        return None
    return {"allocationKey": first.key, **(_why(p, first, now, estimates) or {})}


def _queues_dump(p: Partition) -> dict[str, Any]:
    usage: dict[str, list[dict[str, Any]]] = {}
    for _, t in sorted(p.trackers.items()):
        usage.setdefault(t.queue.path, []).append({
            t.kind: t.name, "limit": t.limit.limit, "allocated": saturated(t.allocated),
            "runningApplications": t.running, "maxResources": t.limit.maxresources,
            "maxApplications": t.limit.maxapplications,
        })
    return {
        q.path: {
            "leaf": q.leaf, "managed": q.managed, "draining": q.draining, "drainingSince": q.draining_since,
            "guaranteed": q.guaranteed, "max": q.max, "maxApplications": q.maxapps,
            "properties": q.properties,
            "submitACL": q.submitacl.text if q.submitacl is not None else None,
            "adminACL": q.adminacl.text if q.adminacl is not None else None,
            "allocated": saturated(q.allocated), "pending": saturated(q.pending),
            "runningApplications": q.running, "priority": q.exposed_priority(),
            "applications": list(q.apps), "limitUsage": usage.get(q.path, []),
        } for q in p.queues.values()
    }


# --- topology (docs/topology.md) -----------------------------------------------------------


def _node_domains(p: Partition, attributes: Mapping[str, str]) -> dict[str, str]:
    """A node's domain at each level it has, by level: `{ykbus.io/block: b1, ykbus.io/rack:
    b1/r3}` (a domain's name is its values joined by `/`)."""
    levels = p.records.config.topology.levels
    path = path_of(levels, attributes)
    return {levels[i]: "/".join(path[: i + 1]) for i in range(len(path))}


def _app_topology(p: Partition, app: Any) -> dict[str, Any]:
    """What an application asks of the topology (its tags' request, its task groups' own)
    and where it is: the domains kept for its groups placed `required`, and the narrowest
    domain that holds all its allocations."""
    from ykbus.core.topology import request_of

    asked = request_of(app.tags)
    groups = {}
    for k in app.asks.values():
        own = request_of(k.tags)
        if own is not None and k.task_group:
            groups[k.task_group] = {"mode": own.mode.value, "level": own.level}
    return {
        "request": {"mode": asked.mode.value, "level": asked.level} if asked is not None else None,
        "taskGroups": groups,
        "domains": {group or "*": {"level": level, "domain": "/".join(values)}
                    for group, (level, values) in app.domains.items()},
        "placedIn": _narrowest(p, [a.node.attributes for a in app.allocations.values()]),
        "allocationsIn": _per_domain(p, app),
        "reserved": ({"level": domain[0], "domain": "/".join(domain[1])}
                     if (domain := app.reserved_domain()) is not None else None),
    }


def _per_domain(p: Partition, app: Any) -> dict[str, int]:
    """How many of an application's allocations sit in each domain of the narrowest level
    (`level domain`, by name; `-` for a node without that level's attribute)."""
    levels = p.records.config.topology.levels
    out: dict[str, int] = {}
    for a in app.allocations.values():
        where = _node_domains(p, a.node.attributes)
        key = f"{levels[-1]} {where[levels[-1]]}" if levels[-1] in where else "-"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _narrowest(p: Partition, attrs: list[Mapping[str, str]]) -> dict[str, str] | None:
    """The narrowest domain every one of `attrs` (nodes' attributes) is in: `{level, domain}`,
    None when there are none or they share no domain."""
    if not attrs:
        return None
    levels = p.records.config.topology.levels
    shared = path_of(levels, attrs[0])
    for a in attrs[1:]:
        path = path_of(levels, a)
        n = 0
        while n < len(shared) and n < len(path) and shared[n] == path[n]:
            n += 1
        shared = shared[:n]
    return {"level": levels[len(shared) - 1], "domain": "/".join(shared)} if shared else None


def topology_tree(p: Partition) -> dict[str, Any]:
    """The partition's topology as a tree: its levels and each domain (schedulable nodes
    sharing the values of a level and every broader one), broadest first, each followed by
    its children, in key order: its nodes, capacity, used (allocated) and free room, and the
    gangs (applications asking for a domain) whose allocations all sit in it and in no
    narrower one."""
    levels = p.records.config.topology.levels
    domains: dict[tuple[str, ...], dict[str, Any]] = {}
    for n in p.nodes.values():
        if n.state is not NodeState.SCHEDULABLE:
            continue
        path = path_of(levels, n.attributes)
        for i in range(len(path)):
            key = path[: i + 1]
            d = domains.get(key)
            if d is None:
                d = domains[key] = {"level": levels[i], "depth": i, "name": "/".join(key), "nodes": 0,
                                    "capacity": {}, "allocated": {}, "free": {}, "allocations": 0, "gangs": []}
            d["nodes"] += 1
            d["allocations"] += len(n.allocations)
            for into, res in ((d["capacity"], n.capacity), (d["allocated"], n.allocated)):
                for r, v in res.items():
                    if v > 0:
                        into[r] = into.get(r, 0) + v
            free = d["free"]
            for r, v in n.capacity.items():  # every resource it has, none free too (`gpu: 0`: full)
                if v > 0:
                    free[r] = free.get(r, 0) + max(0, n.free.get(r, 0))
    from ykbus.core.topology import request_of

    for app in p.apps.values():
        if not app.domains and request_of(app.tags) is None and not any(
                request_of(k.tags) is not None for k in app.asks.values()):
            continue
        where = _narrowest(p, [a.node.attributes for a in app.allocations.values()])
        if where is not None:
            key = tuple(where["domain"].split("/"))
            if key in domains:
                domains[key]["gangs"].append(app.id)
    return {"levels": list(levels), "domains": [domains[key] for key in sorted(domains)]}
