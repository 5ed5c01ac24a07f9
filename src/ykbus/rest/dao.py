"""YuniKorn's REST objects (its `pkg/webservice/dao`) built from one partition's records, as
YuniKorn writes them (`../shared/reference/yunikorn-rest/`): the same field names in the
same order, `omitempty` where YuniKorn omits, int64 quantities as numbers, times in ns.

Readers only: nothing here changes a record. The times are the log's (when an entry was
appended), so a replay answers the same.
"""

from __future__ import annotations

from typing import Any

from ykbus.core.lifecycle import AppState, NodeState
from ykbus.core.model import INT32_MIN, Alloc, App, Ask, Node, Queue, Terminated, most_held
from ykbus.core.partition import Partition
from ykbus.core.projection import Estimates, fits_no_node_empty
from ykbus.core.queueprops import PreemptionPolicy
from ykbus.core.readmodel import NodeUsage
from ykbus.core.resources import Res
from ykbus.core.why import PendingCode
from ykbus.limits import saturated

GO_ZERO_TIME_MS = -62135596800000  # Go's zero time.Time in Unix ms: a startTime never set
HOSTNAME_ATTR, RACK_ATTR, NODE_PARTITION_ATTR = "si/hostname", "si/rackname", "si/node-partition"
ACTIVE_STATES = (AppState.NEW, AppState.ACCEPTED, AppState.RESUMING, AppState.RUNNING, AppState.COMPLETING,
                 AppState.FAILING)


def omit(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`d` without the `keys` whose value is empty, zero, false or None (Go's omitempty)."""
    for k in keys:
        v = d.get(k)
        if v is None or v is False or v == 0 or v == "" or v == {} or v == []:
            d.pop(k, None)
    return d


def res(r: Res) -> dict[str, int]:
    """A resource as YuniKorn writes it: its quantities by name, sorted (Go sorts map keys),
    zero quantities left out, each at most int64's largest (YuniKorn's sums saturate there:
    a partition of three nodes of 2^63-1 has that capacity, not a number a Go client cannot
    read)."""
    return saturated({k: v for k, v in sorted(r.items()) if v})


def percent(used: Res, of: Res) -> dict[str, int]:
    """`used` as whole percents of `of`, for the resources `of` has."""
    return {k: v * 100 // of[k] for k, v in sorted(used.items()) if of.get(k)}


def go_duration(ms: int) -> str:
    """A duration as Go's time.Duration.String() writes it (30s, 1m30s, 500ms, 0s)."""
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s = f"{rest / 1000:g}s"
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + s


# --- partitions and queues ---------------------------------------------------------------------


def headroom(p: Partition, q: Queue) -> dict[str, int]:
    """What `q` may still take: per resource, the least of max minus allocated over it and its
    parents (root's max is the partition's total)."""
    room: dict[str, int] = {}
    node: Queue | None = q
    while node is not None:
        cap = node.max if node.parent is not None else p.total
        for k, v in cap.items():
            left = v - node.allocated.get(k, 0)
            room[k] = min(room[k], left) if k in room else left
        node = node.parent
    return saturated({k: max(0, v) for k, v in sorted(room.items())})


def queue(p: Partition, q: Queue, children: bool = True, top: str = "",
          preempting: dict[str, Res] | None = None) -> dict[str, Any]:
    """PartitionQueueDAOInfo: `children` with the whole subtree; `top`: the partition's name
    in the answer of /queues, which alone names it."""
    if preempting is None:
        preempting = _preempting(p)
    max_res = q.max if q.parent is not None else p.total
    priority = q.exposed_priority()
    delay = next((x.preempt_delay_ms for x in q.ancestry() if x.preempt_delay_ms >= 0), 30_000)
    out: dict[str, Any] = {
        "queuename": q.path,
        "status": "Draining" if q.draining else "Active",
        "partition": top,
        "pendingResource": res(q.pending),
        "maxResource": res(max_res),
        "guaranteedResource": res(q.guaranteed),
        "allocatedResource": res(q.allocated),
        "preemptingResource": res(preempting.get(q.path, {})),
        "headroom": headroom(p, q),
        "isLeaf": q.leaf,
        "isManaged": q.managed,
        "properties": dict(sorted(q.properties.items())),
        "parent": q.parent.path if q.parent is not None else "",
        "template": _template(q),
        "children": [queue(p, c, preempting=preempting) for c in q.children.values()] if children else [],
        "childNames": [c.path for c in q.children.values()],
        "absUsedCapacity": percent(q.allocated, max_res),
        "maxRunningApps": q.maxapps,
        "runningApps": q.running,
        "currentPriority": priority if priority is not None else INT32_MIN,
        "allocatingAcceptedApps": sorted(a.id for a in q.apps.values() if a.state is AppState.ACCEPTED
                                         and a.allocations),
        "sortingPolicy": q.sort_policy.value if q.leaf else "fair",
        "prioritySorting": q.sort_priority,
        "preemptionEnabled": q.preempt_policy is not PreemptionPolicy.DISABLED,
        "isPreemptionFence": q.preempt_policy is PreemptionPolicy.FENCE,
        "preemptionDelay": go_duration(delay),
        "quotaPreemptionDelay": go_duration(q.quota_delay_ms),
        "isPriorityFence": q.priority_fence,
        "priorityOffset": q.priority_offset,
    }
    return omit(out, "pendingResource", "maxResource", "guaranteedResource", "allocatedResource",
                "preemptingResource", "headroom", "properties", "parent", "template", "children", "childNames",
                "absUsedCapacity", "maxRunningApps", "runningApps", "allocatingAcceptedApps", "priorityOffset")


def _preempting(p: Partition) -> dict[str, Res]:
    """Per queue path, what its allocations preempted and not released yet hold (from the
    nodes that have such allocations: none walked while nothing is preempted)."""
    out: dict[str, Res] = {}
    for n in p.preempted.values():
        for a in n.allocations.values():
            if a.preempting:
                for q in a.app.path:
                    into = out.setdefault(q.path, {})
                    for k, v in a.resource.items():
                        into[k] = into.get(k, 0) + v
    return out


def _template(q: Queue) -> dict[str, Any] | None:
    t = q.template
    if t is None:
        return None
    return omit({"maxResource": res(t.max), "guaranteedResource": res(t.guaranteed),
                 "properties": dict(sorted(t.properties.items()))}, "maxResource", "guaranteedResource",
                "properties") or None


# --- nodes ---------------------------------------------------------------------------------------


def node(rm: str, p: Partition, n: Node, with_allocations: bool = True) -> dict[str, Any]:
    """NodeDAOInfo (`with_allocations`: its allocations listed)."""
    allocated = {t: held for t in n.capacity if (held := allocated_of(n, t))}
    attributes = {**n.attributes, NODE_PARTITION_ATTR: f"[{rm}]{p.name}"}
    out = {
        "nodeID": n.id,
        "hostName": n.attributes.get(HOSTNAME_ATTR, ""),
        "rackName": n.attributes.get(RACK_ATTR, ""),
        "attributes": dict(sorted(attributes.items())),
        "capacity": res(n.capacity),
        "allocated": res(allocated),
        "occupied": res(n.occupied),
        "available": saturated(dict(sorted(n.free.items()))),
        "utilized": percent(allocated, n.capacity),
        "allocations": [allocation(a) for a in n.allocations.values()] if with_allocations else [],
        "schedulable": n.state is NodeState.SCHEDULABLE,
        "isReserved": n.reserved is not None,
        "reservations": [f"{n.reserved.app.id}|{n.reserved.key}"] if n.reserved is not None else [],
    }
    if n.held:  # a waiting gang reserved it, its topology domain or its nodes (ykbus's: YuniKorn has no such)
        out["heldFor"] = n.held
    return omit(out, "hostName", "rackName", "attributes", "capacity", "allocated", "occupied", "available",
                "utilized", "allocations", "reservations")


# --- applications ----------------------------------------------------------------------------------


def allocation(a: Alloc) -> dict[str, Any]:
    """AllocationDAOInfo."""
    replaced = bool(a.task_group) and not a.placeholder and bool(a.app.gang)
    out = {
        "allocationKey": a.key,
        "allocationTags": dict(sorted(a.tags.items())),
        "requestTime": a.asked,
        "allocationTime": a.at,
        "allocationDelay": a.at - a.asked,
        "resource": res(a.resource),
        "priority": str(a.priority),
        "nodeId": a.node.id,
        "applicationId": a.app.id,
        "placeholder": a.placeholder,
        "placeholderUsed": replaced,
        "taskGroupName": a.task_group,
        "preempted": a.preempting,
        "originator": a.originator,
    }
    return omit(out, "allocationTags", "requestTime", "allocationTime", "allocationDelay", "resource",
                "nodeId", "applicationId", "placeholder", "placeholderUsed", "taskGroupName", "preempted", "originator")


def request(p: Partition, k: Ask, now: int, estimates: Estimates | None = None) -> dict[str, Any]:
    """AllocationAskDAOInfo of a pending ask; `allocationLog` holds why it waits (one entry: the
    reason as it stands), and `whyPending` the typed reason (ykbus's own field); with
    `estimates` (one application's page), an ask waiting for room gains when it would start
    (`details.estimate`, `details.estimatedStart`: docs/time.md), or that no node would hold
    it even empty (`details.fitsNoNodeEmpty`, `largestEmpty`)."""
    why = p.records.why_pending(k)
    out = {
        "allocationKey": k.key,
        "allocationTags": dict(sorted(k.tags.items())),
        "requestTime": k.at,
        "resource": res(k.resource),
        "pendingCount": k.pending,
        "priority": str(k.priority),
        "requiredNodeId": k.required,
        "applicationId": k.app.id,
        "allocationLog": [{"message": why.message, "lastOccurrence": now, "count": 1}],
        "originator": k.originator,
        "placeholder": k.placeholder,
        "taskGroupName": k.task_group,
        "schedulingAttempted": k.waiting is not None or bool(k.reported),
        "whyPending": {"code": why.code.value, "message": why.message, "details": dict(why.details)},
    }
    if estimates is not None and why.code is PendingCode.NO_NODE_ROOM:  # (one application's page: a walk
        # of the nodes per ask is affordable there, not in a list of every application)
        out["whyPending"]["details"].update(fits_no_node_empty(p, k.resource))  # a wait for a larger node?
        out["whyPending"]["details"].update(estimates.details(k))
    return omit(out, "allocationTags", "requestTime", "resource", "pendingCount", "requiredNodeId",
                "applicationId", "originator", "placeholder", "taskGroupName")


def _states(history: Any) -> list[dict[str, Any]]:
    return [{"time": t, "applicationState": s} for t, s in history.states]


def _start_ms(history: Any) -> int:
    """When it started running (Unix ms), Go's zero time if it never did."""
    return next((t // 1_000_000 for t, s in history.states if s == AppState.RUNNING.value), GO_ZERO_TIME_MS)


def application(p: Partition, app: App, now: int, estimates: Estimates | None = None) -> dict[str, Any]:
    """ApplicationDAOInfo of an application the partition holds (not ended); `estimates`: its
    asks waiting for room say when they would start (`request`)."""
    h = app.history
    pending = [k for k in app.asks.values() if k.pending]
    out = {
        "applicationID": app.id,
        "usedResource": res(_used(app)),
        "maxUsedResource": res(most_held(h, app.allocated)),
        "pendingResource": res(app.pending),
        "partition": p.name,
        "queueName": app.queue.path,
        "submissionTime": h.submitted,
        "requests": [request(p, k, now, estimates) for k in sorted(pending, key=lambda k: (-k.priority, k.seq))],
        "allocations": [allocation(a) for a in app.allocations.values()],
        "applicationState": app.state.value,
        "user": h.user,
        "groups": list(h.groups),
        "stateLog": _states(h),
        "placeholderData": _placeholders(app),
        "hasReserved": any(k.reserved for k in pending),
        "reservations": [f"{k.reserved}|{k.key}" for k in pending if k.reserved],
        "maxRequestPriority": app.max_priority if app.max_priority is not None else INT32_MIN,
        "startTime": _start_ms(h),
        "resourceHistory": _resource_history(h),
    }
    if app.why is not None:
        out["whyPending"] = {"code": app.why.code.value, "message": app.why.message}
    return omit(out, "usedResource", "maxUsedResource", "pendingResource", "requests", "allocations", "groups",
                "placeholderData", "hasReserved", "reservations", "maxRequestPriority")


def _used(app: App) -> Res:
    """What an application holds, placeholders left out (YuniKorn counts them apart)."""
    out: Res = {}
    for a in app.allocations.values():
        if not a.placeholder:
            for k, v in a.resource.items():
                out[k] = out.get(k, 0) + v
    return out


def ended(p: Partition, app_id: str, t: Terminated) -> dict[str, Any]:
    """ApplicationDAOInfo of an application that ended or was rejected."""
    h = t.history
    out = {
        "applicationID": app_id,
        "maxUsedResource": res(h.max_used),
        "partition": p.name,
        "queueName": t.queue,
        "submissionTime": h.submitted,
        "finishedTime": t.ts,
        "applicationState": t.state.value,
        "user": h.user,
        "groups": list(h.groups),
        "rejectedMessage": t.message if t.state is AppState.REJECTED else "",
        "stateLog": _states(h),
        "maxRequestPriority": INT32_MIN,
        "startTime": _start_ms(h),
        "resourceHistory": {},
    }
    return omit(out, "maxUsedResource", "rejectedMessage", "groups")


def _placeholders(app: App) -> list[dict[str, Any]]:
    """PlaceholderDAOInfo per task group: the placeholders asked since the application began
    (`count`, not those left), each one's resource, how many were replaced and timed out
    (released otherwise than replaced), from its history (model.AppHistory)."""
    return [omit({"taskGroupName": group, "count": n, "minResource": res(r), "replaced": replaced,
                  "timedout": timed_out}, "replaced", "timedout")
            for group, (n, r, replaced, timed_out) in app.history.placeholders.items()]


def _resource_history(h: Any) -> dict[str, Any]:
    """YuniKorn's resourceHistory: per kind of use (`resourceUsage`, `placeholderResource`,
    `preemptedResource`), per instance type, what the released allocations used (resource
    times whole seconds held), zeros kept as YuniKorn keeps them."""
    return {kind: {itype: dict(sorted(used.items())) for itype, used in sorted(by.items())}
            for kind, by in h.tracked.items()}


def allocated_of(n: Node, t: str) -> int:
    """What `n`'s allocations hold of resource `t` (from what it has free: no walk of them)."""
    return n.capacity.get(t, 0) - n.occupied.get(t, 0) - n.free.get(t, 0)


def node_utilizations(rm: str, p: Partition, name: str) -> dict[str, Any]:
    """NodesUtilDAOInfo: per resource type, the nodes in each tenth of utilisation
    (core/readmodel.py `NodeUsage`), built on read from the nodes: a reader changes nothing
    of the core's. A tenth lists its nodes in the partition's order of nodes (YuniKorn's, a
    Go map's, has none): a set."""
    usage = NodeUsage.of(p.nodes.values())
    out = [{"type": t, "utilization": [
        omit({"bucketName": f"{i * 10}-{(i + 1) * 10}%", "numOfNodes": len(names), "nodeNames": names},
             "numOfNodes", "nodeNames") for i, names in enumerate(usage.nodes_in(t))]} for t in usage.types()]
    return omit({"clusterId": rm, "partition": name, "utilizations": out}, "utilizations")
