"""Why an ask is pending: one typed reason per pending ask, kept as the pass parks it.

Every pending ask is active (tried at the next pass: no reason, it is `QUEUED`) or parked
somewhere (docs/scheduling.md): waiting for a node, for a queue's `max`, for a user or group
limit, in the recovery queue, or in an application that a queue's or limit's
`maxapplications`, or a `stateaware` queue, does not let start. The pass sets the reason
when it parks an ask (a `Park` or `Hold` decision of core/scheduling.py, applied by `Partition.commit`) and clears it when the ask wakes or is
allocated: O(1) per change, never recomputed on demand. The message is the text the RM gets
as its SI scheduling state (`UpdateContainerSchedulingStateRequest.reason`); the details are
plain values for tools (`ykbus explain`, the read API).
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from ykbus.core.resources import fmt_res
from ykbus.limits import INT64_MAX, MAX_REASON_CHARS, shorten

INT64_MIN = -INT64_MAX - 1


class PendingCode(enum.StrEnum):
    QUEUED = "Queued"  # active: the next pass tries it
    NO_NODE_ROOM = "NoNodeRoom"  # no schedulable node has room for it
    QUEUE_MAX = "QueueMax"  # a queue's max would be exceeded
    USER_LIMIT = "UserLimit"  # a user's maxresources on a queue would be exceeded
    GROUP_LIMIT = "GroupLimit"  # a group's maxresources on a queue would be exceeded
    QUEUE_MAX_APPLICATIONS = "QueueMaxApplications"  # its application may not start: queue maxapplications
    USER_MAX_APPLICATIONS = "UserMaxApplications"  # ... a user's maxapplications
    GROUP_MAX_APPLICATIONS = "GroupMaxApplications"  # ... a group's maxapplications
    NOT_ADMITTED = "NotAdmitted"  # stateaware: another Accepted application goes first
    RECOVERY_QUEUE = "RecoveryQueue"  # its application sits in root.@recovery@
    REQUIRED_NODE_GONE = "RequiredNodeGone"  # the node it must run on is not there
    REQUIRED_NODE_DRAINING = "RequiredNodeDraining"  # the node it must run on takes nothing new
    REQUIRED_NODE_FULL = "RequiredNodeFull"  # the node it must run on has no room for it
    RM_PAUSED = "RMPaused"  # its resource manager is Paused: nothing of it is placed until it is back
    GANG_INCOMPLETE = "GangIncomplete"  # a placeholder: the gang's pending placeholders do not cover placeholderAsk
    GANG_NO_ROOM = "GangNoRoom"  # a placeholder: the whole gang does not fit the nodes yet
    GANG_TOO_LARGE = "GangTooLarge"  # a placeholder: the gang has more placeholders than one entry may place
    TOPOLOGY_NO_DOMAIN = "TopologyNoDomain"  # a placeholder: no topology domain the gang asks for holds it whole
    GANG_PENDING = "GangPending"  # a real ask: its task group's placeholders are not placed yet
    REPLACING = "Replacing"  # a real ask: waiting for the RM to release the placeholder it replaces
    LEADER_PENDING = "LeaderPending"  # a worker: its application's leader is not placed yet
    RESERVED = "Reserved"  # waited long enough: a node is reserved for it until room frees there (or elsewhere)
    PREEMPTING = "Preempting"  # allocations on its reserved node are preempted for it: the RM is releasing them


class Why(msgspec.Struct, frozen=True):
    """The current reason of a pending ask: a code, a human message, the details."""

    code: PendingCode
    message: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        """A message past MAX_REASON_CHARS (an ask of a thousand long resource names) is
        shortened: the RM's state message, the read API and a snapshot stay bounded."""
        if len(self.message) > MAX_REASON_CHARS:
            msgspec.structs.force_setattr(self, "message", shorten(self.message))


QUEUED = Why(PendingCode.QUEUED, "waiting for the next scheduling pass")

_LIMIT = {"user": PendingCode.USER_LIMIT, "group": PendingCode.GROUP_LIMIT}
_MAX_APPS = {"user": PendingCode.USER_MAX_APPLICATIONS, "group": PendingCode.GROUP_MAX_APPLICATIONS}


def int64s(value: Any) -> Any:
    """`value` (a number, or dicts and lists of them) with each int saturated at int64, as the
    SI's quantities (and YuniKorn's sums of them) are: the figures of a reason's details that
    are sums (a queue's usage, a gang's total, a node's free room) may pass it where recovered
    allocations add up past it, and a snapshot stores them. The message keeps the exact text."""
    if type(value) is int:
        return INT64_MAX if value > INT64_MAX else INT64_MIN if value < INT64_MIN else value
    if type(value) is dict:
        return {k: int64s(v) for k, v in value.items()}
    if type(value) is list:
        return [int64s(v) for v in value]
    return value


def no_node_room(asked: dict[str, int]) -> Why:
    """No node can take the ask now: each schedulable node lacks room for it, or is reserved
    for another ask (it takes nothing else). What the nodes have free, which reserved nodes
    would have room and whether any node is schedulable at all change from entry to entry:
    the read API adds them when read (core/projection.py), the message stays true."""
    return Why(PendingCode.NO_NODE_ROOM,
               f"no schedulable node has {fmt_res(asked)} free, other than nodes reserved for other asks",
               {"asked": dict(asked)})


def queue_max(message: str, queue: str, resource: str, used: int, maximum: int, asked: int) -> Why:
    return Why(PendingCode.QUEUE_MAX, message,
               {"queue": queue, "resource": resource, "used": int64s(used), "max": maximum, "asked": int64s(asked)})


def limit(message: str, kind: str, name: str, queue: str, resource: str, used: int, maximum: int,
          asked: int) -> Why:
    return Why(_LIMIT[kind], message, {kind: name, "queue": queue, "resource": resource, "used": int64s(used),
                                       "max": maximum, "asked": int64s(asked)})


def queue_max_applications(message: str, queue: str, running: int, maximum: int) -> Why:
    return Why(PendingCode.QUEUE_MAX_APPLICATIONS, message, {"queue": queue, "running": running, "max": maximum})


def limit_max_applications(message: str, kind: str, name: str, queue: str, running: int, maximum: int) -> Why:
    return Why(_MAX_APPS[kind], message, {kind: name, "queue": queue, "running": running, "max": maximum})


def not_admitted(queue: str, first: str) -> Why:
    return Why(PendingCode.NOT_ADMITTED,
               f"queue {queue} is stateaware: it starts one Accepted application at a time, {first} goes first",
               {"queue": queue, "first": first})


def recovery_queue(message: str, queue: str) -> Why:
    return Why(PendingCode.RECOVERY_QUEUE, message, {"queue": queue})


def required_node_gone(node: str) -> Why:
    return Why(PendingCode.REQUIRED_NODE_GONE, f"it must run on node {node}, which is not registered", {"node": node})


def required_node_draining(node: str, state: str) -> Why:
    return Why(PendingCode.REQUIRED_NODE_DRAINING,
               f"it must run on node {node}, which is {state}: it takes no new allocations",
               {"node": node, "state": state})


def required_node_full(node: str, asked: dict[str, int], free: dict[str, int]) -> Why:
    # what is free of what it asks, in the ask's order: a node's own dict keeps the order of
    # its history (and a restored node's that of its capacity), a reason must not
    free = {r: free.get(r, 0) for r in asked}
    return Why(PendingCode.REQUIRED_NODE_FULL, f"it must run on node {node}, which has {fmt_res(free)} free of "
               f"the {fmt_res(asked)} it asks", {"node": node, "asked": dict(asked), "free": int64s(free)})


def rm_paused(rm: str) -> Why:
    return Why(PendingCode.RM_PAUSED, f"resource manager {rm} is Paused (its heartbeats stopped): nothing of it "
               "is placed until it is back", {"rm": rm})


def gang_incomplete(app: str, wanted: dict[str, int], pending: dict[str, int], missing: dict[str, int]) -> Why:
    return Why(PendingCode.GANG_INCOMPLETE,
               f"gang {app} waits for its placeholders: they ask {fmt_res(pending)} of the {fmt_res(wanted)} "
               f"its placeholderAsk needs; {fmt_res(missing)} missing",
               {"application": app, "placeholderAsk": dict(wanted), "pending": int64s(pending), "missing": int64s(missing)})


def gang_no_room(message: str, app: str, total: dict[str, int], short: dict[str, int],
                 reserved: dict[str, object] | None = None) -> Why:
    """`reserved`: the nodes it reserved (docs/gang.md) and its estimated start, if any."""
    details: dict[str, object] = {"application": app, "asked": int64s(total), "missing": int64s(short)}
    if reserved:
        details.update(int64s(reserved))
    return Why(PendingCode.GANG_NO_ROOM, message, details)


def topology_no_domain(message: str, app: str, details: dict[str, object]) -> Why:
    """No domain at the level a topology gang asks for holds it (core/topology.py `NoDomain`)."""
    return Why(PendingCode.TOPOLOGY_NO_DOMAIN, message, {"application": app, **int64s(details)})


def set_too_large(app: str, allocations: int, limit: int) -> Why:
    return Why(PendingCode.GANG_TOO_LARGE,
               f"the asks of {app} sent together ask for {allocations} allocations in one topology domain: they are "
               f"placed whole, in one entry, and an entry places at most {limit} (YKBUS_LIMIT_ALLOCATIONS_PER_ENTRY)",
               {"application": app, "allocations": allocations, "max": limit})


def gang_too_large(app: str, placeholders: int, limit: int) -> Why:
    return Why(PendingCode.GANG_TOO_LARGE,
               f"gang {app} has {placeholders} placeholders pending: a gang is placed whole, in one entry, "
               f"and an entry places at most {limit} (YKBUS_LIMIT_ALLOCATIONS_PER_ENTRY)",
               {"application": app, "placeholders": placeholders, "max": limit})


def gang_pending(app: str, group: str) -> Why:
    return Why(PendingCode.GANG_PENDING, f"task group {group} of gang {app} waits for its placeholders to be placed",
               {"application": app, "taskGroup": group})


def leader_pending(app: str, leader: str) -> Why:
    return Why(PendingCode.LEADER_PENDING, f"a worker of {app}: it waits for its leader {leader} to be placed "
               "(a job is placed in its order, so its workers never hold the room its leader needs)",
               {"application": app, "leader": leader})


def workers_wait_for_gang(app: str) -> Why:
    return Why(PendingCode.GANG_PENDING, f"a worker of gang {app} outside its task groups: it waits for the gang's "
               "placeholders to be placed", {"application": app, "taskGroup": ""})


def replacing(uuid: str, node: str) -> Why:
    return Why(PendingCode.REPLACING, f"waiting for the RM to release placeholder {uuid} on node {node}, "
               "whose place it takes", {"placeholder": uuid, "node": node})


def reserved(node: str, asked: dict[str, int], estimate: str = "", start: int = 0) -> Why:
    """(The read API adds what is `missing` on the node now.) `estimate`: when it will start,
    or why that cannot be said (core/backfill.py); `start`: that log time (ns), 0 for none."""
    message = (f"node {node} is reserved for it: the node takes nothing else until it has room for it "
               "(or another node has room first)")
    if not estimate:
        return Why(PendingCode.RESERVED, message, {"node": node, "asked": dict(asked)})
    details: dict[str, Any] = {"node": node, "asked": dict(asked), "estimate": estimate}
    if start:
        details["estimatedStart"] = start
    return Why(PendingCode.RESERVED, f"{message}; {estimate}", details)


def cannot_preempt(w: Why, reason: str) -> Why:
    """`w` (the reason it waits for room) and why a search for victims found none (core/preemption.py)."""
    return Why(w.code, f"{w.message}; it cannot preempt: {reason}", {**w.details, "preemption": reason})


def preempts_later(w: Why, note: str) -> Why:
    """`w` (the reason it waits for room) and why it has not looked for victims yet although it
    may preempt others (core/preemption.py `not_yet_text`): its partition does not preempt, no
    guarantee on its path, or its queue's `preemption.delay` has not passed. The RM hears it
    in the reason (issue 40); the read API's `details.preemption` says it as of when read."""
    return Why(w.code, f"{w.message}; preemption: {note}", w.details)


def preempting(node: str, victims: list[str]) -> Why:
    return Why(PendingCode.PREEMPTING, f"node {node} is reserved for it while the RM releases the "
               f"{len(victims)} allocation(s) preempted for it there: {', '.join(victims)}",
               {"node": node, "victims": list(victims)})


def required_node_held(node: str, gang: str, one_of_nodes: bool = False) -> Why:
    """`one_of_nodes`: the gang reserved nodes (docs/gang.md), not a topology domain."""
    where = "one of the nodes gang" if one_of_nodes else "in the topology domain gang"
    return Why(PendingCode.REQUIRED_NODE_FULL, f"it must run on node {node}, which is {where} {gang} reserved",
               {"node": node, "heldFor": gang})


def required_node_reserved(node: str, other: str) -> Why:
    return Why(PendingCode.REQUIRED_NODE_FULL, f"it must run on node {node}, which is reserved for ask {other}",
               {"node": node, "reservedFor": other})
