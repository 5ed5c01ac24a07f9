"""The RM's changes to its partitions, item by item: applications, nodes (and the
allocations an RM recovers with them), asks, releases. Every check that can reject an item
runs before the first change it makes (a rejected item changes nothing, but for the record
of a rejected application its partition keeps for readers, YuniKorn's `rejected` list); the
partition applies what passes (core/changes.py).

`Intake` holds no state of its own: it finds the RM a request applies to in the registry it
is given (core/registry.py) and applies each item of the request to that RM's partitions.
Each list of a request is one loop: an item that did not decode, or of a request for no
registered RM, is refused; any other is applied, or refused with the reason its check gave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, cast

from ykbus import limits
from ykbus.core.config import DEFAULT_PARTITION
from ykbus.core.entries import Entry
from ykbus.core.events import Accepted, Noted, Refused
from ykbus.core.lifecycle import (
    NODE,
    AppState,
    NodeEvent,
)
from ykbus.core.model import App, Queue, is_placeholder
from ykbus.core.partition import Partition
from ykbus.core.queueprops import AppSortPolicy
from ykbus.core.registry import NODE_PARTITION_ATTR, ResourceManager, RMRegistry
from ykbus.core.resources import Res, first_over, fmt_quantity, resources_of
from ykbus.core.step import Step
from ykbus.core.tags import policy_problem, role_problem
from ykbus.core.topology import request_problem as topology_problem
from ykbus.si import codec
from ykbus.si import messages as m

# A failpoint for tests: called with each application's id once it is added to its partition
# (its acceptance not yet put), it raises as a bug there would (tests/core/test_hostile.py,
# tests/integration/test_guard.py: the guard answers, records and rolls back the entry).
# None but in those tests; a module setting, read at each use, as compiled code cannot be
# monkeypatched.
APP_ADDED_FAULT: Callable[[str], None] | None = None

# read once: compiled code looks up the attributes of modules it did not compile at every use
BAD_ITEM: Final = codec.BadItem
STOPPED_BY_RM: Final = m.TerminationType.STOPPED_BY_RM
PLACEHOLDER_REPLACED: Final = m.TerminationType.PLACEHOLDER_REPLACED
PREEMPTED_BY_SCHEDULER: Final = m.TerminationType.PREEMPTED_BY_SCHEDULER
PAUSE_EVERY: Final = 64  # items of a request between two calls of `Step.between` (a reader's pause point)


def _unread(item: object, why: str) -> str:
    """Why an item is refused before it is read: its decoding error, else `why` (the whole
    request's: no RM it may apply to)."""
    if type(item) is BAD_ITEM:  # (not subclassed; compiled, isinstance of a class it did not compile is a generic call)
        return cast(codec.BadItem, item).error
    return why


def _id(item: object, name: str) -> str:
    """An id an item names (applicationID, allocationKey, nodeID, UUID), "" if none; of an
    item that did not decode, what its decoding could read."""
    if type(item) is BAD_ITEM:  # (not subclassed; compiled, isinstance of a class it did not compile is a generic call)
        return cast(codec.BadItem, item).ids.get(name, "")
    return str(getattr(item, name, ""))


def _app_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Refused(to, m.RejectedApplication(_id(item, "applicationID"), reason)))


def _app_removal_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Noted(to, m.EventType.APP, _id(item, "applicationID"), f"remove not applied: {reason}"))


def _node_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Refused(to, m.RejectedNode(_id(item, "nodeID"), reason)))


def _release_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Noted(to, m.EventType.REQUEST, _id(item, "UUID") or _id(item, "applicationID"), f"release not applied: {reason}"))


def _ask_release_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Noted(to, m.EventType.REQUEST, _id(item, "allocationKey") or _id(item, "applicationID"),
              f"ask release not applied: {reason}"))


def _ask_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    ctx.emit(None, Refused(to, m.RejectedAllocationAsk(_id(item, "allocationKey"), _id(item, "applicationID"), reason)))


def _allocation_refused(ctx: Step, to: str, item: object, reason: str) -> None:
    """SI 1.6 requests, already asks (ykbus.si.compat), are answered the 1.6 way."""
    ctx.emit(None, Refused(to, m.RejectedAllocation(_id(item, "allocationKey"), _id(item, "applicationID"), reason)))


# An ask without tags and with at most this many resources cannot pass MAX_ITEM_BYTES (each
# identifier within MAX_ID_CHARS, JSON's at most 6 bytes a character): it is not counted
SAFE_RESOURCES: Final = ((limits.MAX_ITEM_BYTES - 4096) // 6 - 4 * limits.MAX_ID_CHARS) // (limits.MAX_ID_CHARS + 32)


def tags_problem(tags: dict[str, str], levels: tuple[str, ...]) -> str:
    """Why an application's tags refuse it in a partition of topology `levels` ("" when they
    do not): a node policy it does not know, topology tags it cannot honour."""
    return policy_problem(tags) or topology_problem(tags, levels)


def ask_tags_problem(tags: dict[str, str], levels: tuple[str, ...]) -> str:
    """Why an ask's tags refuse it in a partition of topology `levels` ("" when they do not):
    a role it does not know, topology tags it cannot honour."""
    return role_problem(tags) or topology_problem(tags, levels)


def queue_problem(queue: Queue, msg: m.AddApplicationRequest) -> str:
    """Why application `msg` may not run in `queue` whatever the queue holds ("" when it
    may): a gang needs its order kept, and must fit every max on the queue's path."""
    gang = resources_of(msg.placeholderAsk)
    if gang and queue.sort_policy is AppSortPolicy.FAIR:  # as YuniKorn: a gang needs its order kept
        return (f"queue {queue.path} cannot run application {msg.applicationID} with task group "
                "request: unsupported sort type")
    for q in queue.ancestry():
        over = first_over({}, gang, q.max) if q.max else None
        if over is not None:
            return (f"placeholderAsk {over} {fmt_quantity(over, gang[over])} exceeds queue {q.path} max "
                    f"{fmt_quantity(over, q.max[over])}: the gang could never run")
    return ""


def ask_size_problem(ask: m.AllocationAsk) -> str:
    """Why `ask` is too large to be answered: its allocation echoes its key, tags and
    resources in one item, which the publisher cannot split; bounded by MAX_ITEM_BYTES as
    JSON. A bound on its characters (JSON writes one in at most 6 bytes) spares encoding the
    usual ask."""
    chars = len(ask.allocationKey) + len(ask.applicationID) + len(ask.partitionName) + len(ask.taskGroupName)
    for name in ask.resourceAsk.resources if ask.resourceAsk is not None else ():
        chars += len(name) + 32
    for key, value in ask.tags.items():
        chars += len(key) + len(value) + 8
    if chars * 6 + 4096 <= limits.MAX_ITEM_BYTES:
        return ""
    size = len(codec.encode(ask, "json"))
    if size <= limits.MAX_ITEM_BYTES:
        return ""
    return (f"the ask is {size} bytes as JSON, over the limit of {limits.MAX_ITEM_BYTES} for one item "
            f"(YKBUS_LIMIT_ITEM_BYTES): its allocation, which repeats its key, tags and resources, must fit in one message")


# the releases the core makes, which the RM confirms with the same message (the SI)
CORE_RELEASES = frozenset({m.TerminationType.TIMEOUT, m.TerminationType.PREEMPTED_BY_SCHEDULER,
                           m.TerminationType.PLACEHOLDER_REPLACED})


class Intake:
    def __init__(self, registry: RMRegistry) -> None:
        self.registry = registry  # the RMs a request may apply to: read only

    def applications(self, entry: Entry, msg: codec.DecodedApplicationRequest, ctx: Step) -> None:
        """An `app` request: applications added, then applications removed."""
        rm, why = self.registry.rm_for(entry, msg.rmID)
        for new in msg.new:
            if rm is None or type(new) is BAD_ITEM:
                reason = _unread(new, why)
            else:
                reason = self._add_app(rm, cast(m.AddApplicationRequest, new), ctx)
            if reason:
                _app_refused(ctx, entry.rm, new, reason)
        for removal in msg.remove:
            if rm is None or type(removal) is BAD_ITEM:
                reason = _unread(removal, why)
            else:
                reason = self._remove_app(rm, cast(m.RemoveApplicationRequest, removal), ctx)
            if reason:
                _app_removal_refused(ctx, entry.rm, removal, reason)

    def nodes(self, entry: Entry, msg: codec.DecodedNodeRequest, ctx: Step) -> None:
        """A `node` request: each node created, updated, drained, undrained or decommissioned."""
        rm, why = self.registry.rm_for(entry, msg.rmID)
        for info in msg.nodes:
            if rm is None or type(info) is BAD_ITEM:
                reason = _unread(info, why)
            else:
                reason = self._node(rm, cast(m.NodeInfo, info), ctx)
            if reason:
                _node_refused(ctx, entry.rm, info, reason)

    def allocations(self, entry: Entry, msg: codec.DecodedAllocationRequest, ctx: Step) -> None:
        """An `alloc` request: releases of allocations, then of asks, then new asks (and SI
        1.6's allocations, asks already: ykbus.si.compat)."""
        rm, why = self.registry.rm_for(entry, msg.rmID)
        between = ctx.between
        done = 0  # items applied: every PAUSE_EVERY, `between` (Step.between)
        for release in msg.releases:
            done += 1
            if between is not None and done % PAUSE_EVERY == 0:
                between()
            if rm is None or type(release) is BAD_ITEM:
                reason = _unread(release, why)
            else:
                reason = self._release(rm, cast(m.AllocationRelease, release), ctx)
            if reason:
                _release_refused(ctx, entry.rm, release, reason)
        for ask_release in msg.askReleases:
            if rm is None or type(ask_release) is BAD_ITEM:
                reason = _unread(ask_release, why)
            else:
                reason = self._release_ask(rm, cast(m.AllocationAskRelease, ask_release), ctx)
            if reason:
                _ask_release_refused(ctx, entry.rm, ask_release, reason)
        for ask in msg.asks:
            done += 1
            if between is not None and done % PAUSE_EVERY == 0:
                between()
            if rm is None or type(ask) is BAD_ITEM:
                reason = _unread(ask, why)
            else:
                add = cast(m.AllocationAsk, ask)
                part, app, res, reason = self._ask_checked(rm, add)
                if not reason:  # every check passed: the change
                    assert part is not None and app is not None and res is not None
                    part.changes.add_ask(add, app, res, ctx)
            if reason:
                _ask_refused(ctx, entry.rm, ask, reason)
        for allocation in msg.allocations:
            if rm is None or type(allocation) is BAD_ITEM:
                reason = _unread(allocation, why)
            else:
                add = cast(m.AllocationAsk, allocation)
                part, app, res, reason = self._ask_checked(rm, add)
                if not reason:
                    assert part is not None and app is not None and res is not None
                    part.changes.add_ask(add, app, res, ctx)
            if reason:
                _allocation_refused(ctx, entry.rm, allocation, reason)

    @staticmethod
    def _partition_name(name: str) -> str:
        return (name or DEFAULT_PARTITION).lower()

    def _add_app(self, rm: ResourceManager, msg: m.AddApplicationRequest, ctx: Step) -> str:
        part = rm.partitions.get(self._partition_name(msg.partitionName))
        if part is None:
            return f"partition {msg.partitionName!r} does not exist"
        if msg.applicationID in part.apps:
            return f"application {msg.applicationID} already exists"
        queue, reason = self._admit(part, msg)
        if queue is None or reason:  # the partition keeps a record of it (the REST API's rejected)
            part.changes.reject_app(msg, queue.path if queue is not None else "", reason, ctx)
            return reason
        part.changes.add_app(msg, queue, ctx)
        if APP_ADDED_FAULT is not None:
            APP_ADDED_FAULT(msg.applicationID)
        ctx.emit(None, Accepted(rm.id, m.AcceptedApplication(msg.applicationID)))
        return ""

    @staticmethod
    def _admit(part: Partition, msg: m.AddApplicationRequest) -> tuple[Queue | None, str]:
        """The queue application `msg` goes to, and why it may not ("" when it may); the queue
        is None when none was found. Placement creates nothing: a refusal takes nothing back."""
        problem = tags_problem(msg.tags, part.records.topology_levels)
        if problem:
            return None, problem
        queue, reason = part.changes.place(msg)
        if queue is None:
            return None, reason
        return queue, queue_problem(queue, msg)

    def _remove_app(self, rm: ResourceManager, msg: m.RemoveApplicationRequest, ctx: Step) -> str:
        part = rm.partitions.get(self._partition_name(msg.partitionName))
        if part is None:
            return f"partition {msg.partitionName!r} does not exist"
        app = part.apps.get(msg.applicationID)
        if app is None:
            if msg.applicationID in part.terminated:
                return ""  # already ended: removing it again is a no-op
            return f"application {msg.applicationID} does not exist"
        part.changes.remove_app(app, ctx, m.TerminationType.STOPPED_BY_RM, "application removed by the RM")
        return ""

    def _node(self, rm: ResourceManager, info: m.NodeInfo, ctx: Step) -> str:
        action = info.action
        A = m.ActionFromRM
        if action is A.CREATE or action is A.CREATE_DRAIN:
            return self._create_node(rm, info, ctx)
        part = rm.node_partition.get(info.nodeID)
        if action is A.UNKNOWN_ACTION_FROM_RM:
            return "action is not set: expected CREATE, UPDATE, DRAIN_NODE, DECOMISSION or DRAIN_TO_SCHEDULABLE"
        if part is None:
            return f"node {info.nodeID} does not exist"
        node = part.nodes[info.nodeID]
        if action is A.UPDATE:
            if info.existingAllocations:
                return "existingAllocations are only accepted with CREATE"
            named = info.attributes.get(NODE_PARTITION_ATTR)
            if named is not None and self._partition_name(named) != part.name:
                return (f"attribute {NODE_PARTITION_ATTR} {limits.quoted(named)}: node {node.id} is in partition "
                        f"{part.name}; an update does not move it (decommission it, then create it there)")
            capacity = None if info.schedulableResource is None else resources_of(info.schedulableResource)
            occupied = node.occupied if info.occupiedResource is None else resources_of(info.occupiedResource)
            part.changes.update_node(node, info.attributes, capacity, occupied, ctx)
            return ""
        event = {A.DRAIN_NODE: NodeEvent.DRAIN, A.DRAIN_TO_SCHEDULABLE: NodeEvent.UNDRAIN,
                 A.DECOMISSION: NodeEvent.DECOMMISSION}[action]
        if not NODE.allows(node.state, event):
            return f"node {node.id} is {node.state.value}: {action.value} does not apply"
        if event is NodeEvent.DECOMMISSION:
            part.changes.decommission(node, ctx)
            rm.forget_node(node.id)
        else:
            part.changes.node_event(node, event, ctx)
        return ""

    def _create_node(self, rm: ResourceManager, info: m.NodeInfo, ctx: Step) -> str:
        if info.nodeID in rm.node_partition:
            return f"node {info.nodeID} already exists"
        pname = self._partition_name(info.attributes.get(NODE_PARTITION_ATTR, ""))
        part = rm.partitions.get(pname)
        if part is None:
            return f"partition {pname!r} (attribute {NODE_PARTITION_ATTR}) does not exist"
        recovered: list[tuple[m.Allocation, App, Res]] = []
        uuids: set[str] = set()
        for i, alloc in enumerate(info.existingAllocations):
            reason = self._check_recovered(rm, part, info, alloc, uuids)
            if reason:
                ctx.emit(None, Refused(rm.id, m.RejectedAllocationAsk(
                    alloc.allocationKey, alloc.applicationID,
                    f"existingAllocations[{i}] of node {info.nodeID}: {reason}")))
                continue
            uuids.add(alloc.UUID)
            recovered.append((alloc, part.apps[alloc.applicationID], resources_of(alloc.resourcePerAlloc)))
        node = part.changes.add_node(info, resources_of(info.schedulableResource), resources_of(info.occupiedResource), ctx)
        rm.place_node(node.id, part)
        if info.action is m.ActionFromRM.CREATE_DRAIN:  # SI 1.6: created draining, in the same item
            part.changes.node_event(node, NodeEvent.DRAIN, ctx)
        for alloc, app, res in recovered:
            part.changes.recover(alloc, app, node, res, ctx)
        ctx.emit(None, Accepted(rm.id, m.AcceptedNode(info.nodeID)))
        return ""

    def _check_recovered(self, rm: ResourceManager, part: Partition, info: m.NodeInfo, alloc: m.Allocation,
                         seen: set[str]) -> str:
        if not alloc.UUID:
            return "UUID is empty"
        if rm.uuid_live(alloc.UUID) or alloc.UUID in seen:
            return f"UUID {alloc.UUID} is already in use"
        if alloc.nodeID and alloc.nodeID != info.nodeID:
            return f"nodeID {alloc.nodeID!r} is not the node being created"
        if self._partition_name(alloc.partitionName) != part.name:
            return f"partitionName {alloc.partitionName!r} is not the node's partition {part.name!r}"
        app = part.apps.get(alloc.applicationID)
        if app is None:
            return f"application {alloc.applicationID!r} is not known: recover applications before nodes"
        if app.state not in (AppState.NEW, AppState.ACCEPTED, AppState.RESUMING, AppState.RUNNING,
                             AppState.COMPLETING):
            return f"application {app.id} is {app.state.value}"
        if not resources_of(alloc.resourcePerAlloc):
            return "resourcePerAlloc is empty"
        return ""

    def _app(self, rm: ResourceManager, partition: str, app_id: str) -> tuple[Partition | None, App | None, str]:
        part = rm.partitions.get(self._partition_name(partition))
        if part is None:
            return None, None, f"partition {partition!r} does not exist"
        app = part.apps.get(app_id)
        if app is None:
            if not app_id:
                return part, None, "applicationID is empty"
            ended = part.terminated.get(app_id)
            if ended is not None:
                return part, None, f"application {app_id} is {ended.state.value}"
            return part, None, f"application {app_id!r} does not exist"
        return part, app, ""

    def _ask_checked(self, rm: ResourceManager,
                     ask: m.AllocationAsk) -> tuple[Partition | None, App | None, Res | None, str]:
        """Every check of an ask (new, or sent again) before its change: its partition, its
        application and its resources, or why it is refused."""
        part, app, reason = self._app(rm, ask.partitionName, ask.applicationID)
        if reason:
            return _refused(reason)
        assert part is not None and app is not None
        res = resources_of(ask.resourceAsk)
        if not res:
            return _refused("resourceAsk is empty: an ask needs at least one quantity above zero")
        tags = ask.tags
        if tags or len(res) > SAFE_RESOURCES:
            too_big = ask_size_problem(ask)
            if too_big:
                return _refused(too_big)
        if tags:
            problem = ask_tags_problem(tags, part.records.topology_levels)
            if problem:
                return _refused(problem)
        if app.state is AppState.FAILING:
            return _refused(f"application {ask.applicationID} is Failing")
        before = app.asks.get(ask.allocationKey)
        placeholder = is_placeholder(ask)
        if before is not None and (before.placeholder != placeholder or before.task_group != ask.taskGroupName):
            return _refused(f"ask {limits.quoted(ask.allocationKey)} of application {ask.applicationID} was sent with "
                            f"placeholder {str(before.placeholder).lower()} and taskGroupName {limits.quoted(before.task_group)}: "
                            "sending it again replaces its request, not what it is (ask again under another "
                            "allocationKey)")
        if placeholder and app.gang and app.gang_timer < 0:
            return _refused(f"the placeholder timeout of gang {ask.applicationID} has passed: it takes no more "
                            "placeholders")
        return part, app, res, ""

    def _release(self, rm: ResourceManager, rel: m.AllocationRelease, ctx: Step) -> str:
        part, app, reason = self._app(rm, rel.partitionName, rel.applicationID)
        if reason:
            return reason
        assert part is not None and app is not None
        if rel.UUID:
            alloc = app.allocations.get(rel.UUID)
            if alloc is None:
                if rel.terminationType in CORE_RELEASES:
                    return ""  # the RM confirms a release the core made (the SI's same message): it is gone
                return f"allocation {rel.UUID} of application {app.id} does not exist"
            targets = [alloc]
        elif rel.allocationKey:
            targets = [a for a in app.allocations.values() if a.key == rel.allocationKey]
            ask = app.asks.get(rel.allocationKey)
            if not targets and ask is not None and ask.pending:
                part.changes.release_ask(ask, ctx)  # SI 1.6: a request not placed yet is released by its key
                return ""
            if not targets:
                return f"application {app.id} has no allocation with allocationKey {rel.allocationKey!r}"
        else:
            targets = list(app.allocations.values())
        for alloc in targets:
            if alloc.replacing and rel.terminationType is PLACEHOLDER_REPLACED:
                part.applier.confirm_replacement(alloc, ctx)  # the second step of a replacement
            elif alloc.preempting and rel.terminationType is PREEMPTED_BY_SCHEDULER:
                part.changes.release(alloc, PREEMPTED_BY_SCHEDULER, rel.message or "preempted", ctx,
                             report=False)  # the RM confirms a preemption: not echoed back
            else:
                part.changes.release(alloc, STOPPED_BY_RM, rel.message or "released by the RM", ctx)
        return ""

    def _release_ask(self, rm: ResourceManager, rel: m.AllocationAskRelease, ctx: Step) -> str:
        if rel.terminationType is m.TerminationType.TIMEOUT:
            return ""  # the RM confirms an ask the core dropped at a timeout: ignored, as YuniKorn does
        if not rel.applicationID:
            return "applicationID is empty"
        part, app, reason = self._app(rm, rel.partitionName, rel.applicationID)
        if reason:
            return reason
        assert part is not None and app is not None
        if rel.allocationKey:
            ask = app.asks.get(rel.allocationKey)
            if ask is None or not ask.pending:
                return f"application {app.id} has no pending ask {rel.allocationKey!r}"
            targets = [ask]
        else:
            targets = [a for a in app.asks.values() if a.pending]
        for ask in targets:
            part.changes.release_ask(ask, ctx)
        return ""


def _refused(reason: str) -> tuple[None, None, None, str]:
    """An ask refused (`Intake._ask_checked`), and why."""
    return None, None, None, reason
