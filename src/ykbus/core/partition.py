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
   pass capacity only shrinks, so a shape that failed once fails again: `_failed_shapes`);
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

import re
from typing import Any

from sortedcontainers import SortedList

from ykbus import limits
from ykbus.core import why
from ykbus.core.config import (
    PROP_PRIORITY_OFFSET,
    PROP_PRIORITY_POLICY,
    PROP_SORT_POLICY,
    PROP_SORT_PRIORITY,
    QUEUE_NAME,
    WILDCARD,
    AppSortPolicy,
    ChildTemplate,
    LimitConfig,
    PartitionConfig,
    PlacementRule,
    PriorityPolicy,
    QueueConfig,
    RuleFilter,
    SortPriority,
    parse_offset,
)
from ykbus.core.ledger import Ledger
from ykbus.core.lifecycle import (
    ALLOCATION,
    APP,
    ASK,
    NODE,
    SCHEDULABLE_APP_STATES,
    AllocationEvent,
    AllocationState,
    AppEvent,
    AppState,
    AskEvent,
    AskState,
    NodeEvent,
    NodeState,
)
from ykbus.core.outbox import Outbox
from ykbus.core.resources import Res, add_into, first_over, fits, scaled, share, sub_into
from ykbus.core.scorers import scorer_for
from ykbus.core.timers import AllocationTimeoutTimer, AppTimeoutTimer, CompletingTimer, ExpireTimer, Timers
from ykbus.si import messages as m

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

NODE_WAIT = "node"
NO_TAGS: dict[str, str] = {}  # shared by every ask without tags; never mutated
Shape = tuple[tuple[str, int], ...]
FIT_CACHE_AFTER = 16  # nodes a walk may skip before the pass indexes the nodes that fit a shape


def _clamp(value: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, value))


DOT = "_dot_"  # replaces "." in a queue name part generated from a user, group or tag
_RELEASE_EVENTS = {
    m.TerminationType.TIMEOUT: AllocationEvent.TIMEOUT,
    m.TerminationType.PREEMPTED_BY_SCHEDULER: AllocationEvent.PREEMPT,
}
RECOVERY_QUEUE = "root.@recovery@"  # YuniKorn's queue for recovered apps that cannot be placed
FORCE_TAG = "application.create.force"  # YuniKorn's tag on applications an RM recovers


def may_submit(queue: Queue, user: str, groups: list[str]) -> bool:
    """The seed's ACL check: the submit or admin ACL of the queue or of any queue above it
    lets the user in. An unmanaged queue has no ACL of its own, so its parent's count.
    With no ACL anywhere on the way, access is denied."""
    q: Queue | None = queue
    while q is not None:
        for acl in (q.submitacl, q.adminacl):
            if acl is not None and acl.allows(user, groups):
                return True
        q = q.parent
    return False


def _full_path(name: str) -> str:
    path = name.strip().lower()
    return path if path == "root" or path.startswith("root.") else f"root.{path}"


def _matches(names: list[str], candidates: list[str]) -> bool:
    if len(names) == 1:
        return any(re.fullmatch(names[0], c) for c in candidates)
    return any(c in names for c in candidates)


def _filter_allows(flt: RuleFilter, user: str, groups: list[str]) -> bool:
    """Whether a rule applies: with no users and no groups listed, to everyone."""
    if not flt.users and not flt.groups:
        return flt.type != "deny"
    hit = _matches(flt.users, [user]) or _matches(flt.groups, groups)
    return hit if flt.type == "allow" else not hit


def fmt_res(res: Res) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in res.items()) + "}"


class Node:
    __slots__ = ("id", "attributes", "capacity", "occupied", "allocated", "free", "state",
                 "allocations", "key")

    def __init__(self, node_id: str, attributes: dict[str, str], capacity: Res, occupied: Res) -> None:
        self.id = node_id
        self.attributes = attributes
        self.capacity = capacity
        self.occupied = occupied
        self.allocated: Res = {}
        self.free: Res = {}
        self.state = NodeState.SCHEDULABLE
        self.allocations: dict[str, Alloc] = {}
        self.key: tuple[float, str] | None = None
        self.recompute_free()

    def recompute_free(self) -> None:
        free = dict(self.capacity)
        sub_into(free, self.occupied)
        sub_into(free, self.allocated)
        self.free = free


class Queue:
    __slots__ = (
        "name", "path", "parent", "children", "leaf", "managed", "draining", "guaranteed", "max",
        "maxapps", "properties", "submitacl", "adminacl", "sort_policy", "sort_priority",
        "priority_fence", "priority_offset", "allocated", "pending", "apps", "running",
        "active", "active_apps", "waiters", "app_waiters", "raw_priority", "draining_since",
        "limits", "template", "app_prios",
    )

    def __init__(self, name: str, parent: Queue | None) -> None:
        self.name = name
        self.parent = parent
        self.path = name if parent is None else f"{parent.path}.{name}"
        self.children: dict[str, Queue] = {}
        self.leaf = True
        self.managed = True
        self.draining = False
        self.draining_since = 0
        self.allocated: Res = {}
        self.pending: Res = {}
        self.apps: dict[str, App] = {}
        self.running = 0
        self.active = 0
        self.active_apps: SortedList = SortedList()
        self.waiters: dict[tuple[str, str], Ask] = {}
        self.app_waiters: dict[str, App] = {}
        self.raw_priority: int | None = None
        self.app_prios: dict[int, int] = {}  # a leaf's applications per max priority (None not counted)
        self.limits: list[LimitConfig] = []
        self.template: ChildTemplate | None = None

    def configure(self, qc: QueueConfig, inherited_sort_priority: bool) -> None:
        self.leaf = not qc.parent
        self.guaranteed = dict(qc.guaranteed)
        self.max = dict(qc.max)
        self.maxapps = qc.maxapplications
        self.properties = dict(qc.properties)
        self.submitacl = qc.submitacl
        self.adminacl = qc.adminacl
        self.limits = list(qc.limits)
        self.template = qc.childtemplate
        explicit = qc.properties.get(PROP_SORT_PRIORITY)
        self.sort_priority = (
            SortPriority.from_str(explicit) is SortPriority.ENABLED if explicit else inherited_sort_priority
        )
        self.set_policies()

    def set_policies(self) -> None:
        """The policies that follow from `properties` (validated already by the config parser)."""
        props = self.properties
        self.sort_policy = AppSortPolicy.from_str(props.get(PROP_SORT_POLICY, "fifo"))
        self.priority_fence = (
            PriorityPolicy.from_str(props.get(PROP_PRIORITY_POLICY, "default")) is PriorityPolicy.FENCE
        )
        self.priority_offset = parse_offset(props.get(PROP_PRIORITY_OFFSET, "0"))

    def exposed_priority(self) -> int | None:
        """The priority this queue shows its parent (seed: offset, fence)."""
        if self.priority_fence:
            return self.priority_offset
        if self.raw_priority is None:
            return None
        return _clamp(self.raw_priority + self.priority_offset)

    def ancestry(self) -> list[Queue]:
        """This queue and its parents up to root."""
        out = []
        q: Queue | None = self
        while q is not None:
            out.append(q)
            q = q.parent
        return out


class Ask:
    __slots__ = ("key", "app", "resource", "shape", "max_allocations", "pending", "allocated",
                 "priority", "seq", "tags", "task_group", "placeholder", "originator",
                 "timeout_ms", "state", "waiting", "reported", "why")

    def __init__(self, msg: m.AllocationAsk, app: App, resource: Res, shape: Shape, seq: int) -> None:
        self.key = msg.allocationKey
        self.app = app
        self.seq = seq
        self.allocated = 0
        self.state = AskState.PENDING
        self.waiting: str | None = None  # NODE_WAIT, or the path of the queue it waits for
        self.reported = ""  # last scheduling-state reason sent, so it is sent once
        self.why: why.Why | None = None  # why it waits, while it waits (`waiting` is set)
        self.update(msg, resource, shape)

    def update(self, msg: m.AllocationAsk, resource: Res, shape: Shape) -> None:
        self.resource, self.shape = resource, shape
        self.max_allocations = msg.maxAllocations or 1
        self.pending = max(0, self.max_allocations - self.allocated)
        self.priority = msg.priority
        self.tags = msg.tags or NO_TAGS
        self.task_group = msg.taskGroupName
        self.placeholder = msg.placeholder
        self.originator = msg.Originator
        self.timeout_ms = msg.executionTimeoutMilliSeconds

    @property
    def entry(self) -> tuple[int, int, Ask]:
        """Its place in the application's active list; built when needed, never stored,
        so that an ask is not part of a reference cycle and is freed when dropped."""
        return (-self.priority, self.seq, self)


class Alloc:
    __slots__ = ("uuid", "key", "app", "node", "resource", "priority", "tags", "task_group",
                 "placeholder", "state", "born")

    def __init__(self, uuid: str, key: str, app: App, node: Node, resource: Res, priority: int,
                 tags: dict[str, str], task_group: str, placeholder: bool, born: int) -> None:
        self.uuid = uuid
        self.born = born  # the input seq that created or recovered it
        self.key = key
        self.app = app
        self.node = node
        self.resource = resource
        self.priority = priority
        self.tags = tags
        self.task_group = task_group
        self.placeholder = placeholder
        self.state = AllocationState.ALLOCATED

    def message(self, partition: str) -> m.Allocation:
        return m.Allocation(
            allocationKey=self.key, allocationTags=self.tags, UUID=self.uuid,
            resourcePerAlloc=resource_msg(self.resource), priority=self.priority,
            nodeID=self.node.id, applicationID=self.app.id, partitionName=partition,
            taskGroupName=self.task_group, placeholder=self.placeholder,
        )


class App:
    __slots__ = ("id", "queue", "path", "user", "groups", "tags", "state", "seq", "asks",
                 "active", "allocations", "allocated", "pending", "max_priority", "priorities", "blocked_on",
                 "entry", "timeout_ms", "timer", "trackers", "why")

    def __init__(self, msg: m.AddApplicationRequest, queue: Queue, seq: int) -> None:
        self.id = msg.applicationID
        self.queue = queue
        self.path = queue.ancestry()
        self.user = msg.ugi.user
        self.groups = list(msg.ugi.groups)
        self.tags = msg.tags
        self.state = AppState.NEW
        self.seq = seq
        self.asks: dict[str, Ask] = {}
        self.active: SortedList = SortedList()
        self.allocations: dict[str, Alloc] = {}
        self.allocated: Res = {}
        self.pending: Res = {}
        self.max_priority: int | None = None
        self.priorities: dict[int, int] = {}  # pending asks per priority: O(1) add, O(distinct) remove
        self.blocked_on: Queue | Tracker | None = None
        self.entry: tuple[Any, ...] | None = None  # its sort key while in the leaf's active_apps
        self.timeout_ms = msg.executionTimeoutMilliSeconds
        self.timer = 0  # generation of the app's pending timer; a stale timer is ignored
        self.trackers: list[Tracker] = []  # the user and group limits that apply to it
        # why its active asks wait although they are not parked: a maxapplications that
        # blocks it (while `blocked_on` is set), or a stateaware queue that starts another first
        self.why: why.Why | None = None


class Tracker:
    """What one user (or group) uses in one queue that has a limit for them.

    `key` is `<queue path>|user|<name>` or `<queue path>|group|<name>`: it is what an ask
    waiting for this limit has in `waiting`, and what a blocked application is blocked on."""

    __slots__ = ("key", "queue", "kind", "name", "limit", "allocated", "running", "waiters", "app_waiters",
                 "apps")

    def __init__(self, queue: Queue, kind: str, name: str, limit: LimitConfig) -> None:
        self.key = tracker_key(queue, kind, name)
        self.queue = queue
        self.kind = kind
        self.name = name
        self.limit = limit
        self.allocated: Res = {}
        self.running = 0
        self.waiters: dict[tuple[str, str], Ask] = {}
        self.app_waiters: dict[str, App] = {}
        self.apps = 0  # applications it applies to: it goes with the last of them

    @property
    def path(self) -> str:
        return self.key

    def describe(self) -> str:
        label = f" ({self.limit.limit})" if self.limit.limit else ""
        return f"{self.kind} {self.name} limit{label} in queue {self.queue.path}"


def count_app_priorities(leaf: Queue) -> None:
    """Rebuild a leaf's count of its applications per max priority."""
    leaf.app_prios = {}
    for a in leaf.apps.values():
        if a.max_priority is not None:
            leaf.app_prios[a.max_priority] = leaf.app_prios.get(a.max_priority, 0) + 1


def tracker_key(queue: Queue, kind: str, name: str) -> str:
    return f"{queue.path}|{kind}|{name}"


def applicable_limits(queue: Queue, user: str, groups: list[str]) -> list[tuple[str, str, LimitConfig]]:
    """The limits of `queue` that apply to a user, as (kind, tracked name, limit): the
    user's own or else the `*` user limit; for groups, the first of the user's groups that
    has a limit here, or else the `*` group limit counted against the user's first group."""
    out: list[tuple[str, str, LimitConfig]] = []
    if not queue.limits:
        return out
    own = next((lim for lim in queue.limits if user in lim.users), None)
    wild = next((lim for lim in queue.limits if WILDCARD in lim.users), None)
    if own is not None or wild is not None:
        out.append(("user", user, own or wild))  # type: ignore[arg-type]
    for g in groups:
        lim = next((lim for lim in queue.limits if g in lim.groups), None)
        if lim is not None:
            out.append(("group", g, lim))
            break
    else:
        wild = next((lim for lim in queue.limits if WILDCARD in lim.groups), None)
        if wild is not None and groups:
            out.append(("group", groups[0], wild))
    return out


_RESOURCE_MSGS: dict[int, tuple[Res, m.Resource]] = {}


def resource_msg(res: Res) -> m.Resource:
    """The wire form of a resource vector. Vectors are interned per partition and never
    mutated, so their (immutable) wire form is built once and shared, keyed by identity."""
    found = _RESOURCE_MSGS.get(id(res))
    if found is not None and found[0] is res:
        return found[1]
    msg = m.Resource(resources={k: m.Quantity(v) for k, v in res.items()})
    if len(_RESOURCE_MSGS) >= 4096:
        _RESOURCE_MSGS.clear()
    _RESOURCE_MSGS[id(res)] = (res, msg)
    return msg


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
        self.terminated: dict[str, AppState] = {}
        self.allocations: dict[str, Alloc] = {}
        self.uuid_taken = self.allocations.__contains__  # the RM widens it to all its partitions
        self.ledger = Ledger(self.allocations, self._index_node, self._usage_moved)
        self.total: Res = {}
        self.node_waiters: dict[tuple[tuple[str, int], ...], dict[tuple[str, str], Ask]] = {}
        self.queues: dict[str, Queue] = {}
        self.root = Queue("root", None)
        self.seq = 0  # submission order of applications and asks
        self._failed_shapes: set[tuple[tuple[str, int], ...]] = set()
        # Within a pass: shape -> (resource, the node_index keys of nodes it fits), built for
        # a shape once a walk skipped FIT_CACHE_AFTER nodes; kept current by _index_node.
        self._fit_cache: dict[tuple[tuple[str, int], ...], tuple[Res, SortedList]] = {}
        self._rekey = False
        self._shapes: dict[tuple[tuple[str, int], ...], tuple[Res, tuple[tuple[str, int], ...]]] = {}
        self.trackers: dict[str, Tracker] = {}
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
            self._remove_if_empty(self.queues[path])
        for queue in self.queues.values():
            if not queue.managed:
                self._apply_template(queue)
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

    def _remove_if_empty(self, q: Queue) -> None:
        """Remove a draining or unmanaged queue once empty, then its parent likewise."""
        while q.parent is not None and (q.draining or not q.managed) and not q.apps and not q.children:
            del q.parent.children[q.name]
            del self.queues[q.path]
            q = q.parent

    # --- lookups ---------------------------------------------------------------------

    def resolve_queue(self, name: str) -> Queue | None:
        return self.queues.get(_full_path(name))

    # --- placement (seed: scheduler-configuration, placement rules) -------------------

    def place(self, msg: m.AddApplicationRequest) -> tuple[Queue | None, str]:
        """The leaf queue for a new application, or None and why. Without rules the
        application goes to the queue it names; with rules, the first rule that yields a
        usable leaf the user may submit to wins (creating an unmanaged queue where the rule
        says `create`). An application the RM recovers (tag `application.create.force`)
        that nothing places goes to `root.@recovery@`, without an ACL check."""
        user, groups = msg.ugi.user, list(msg.ugi.groups)
        rules = self.config.placementrules
        self._created: list[Queue] = []
        self._denied: list[str] = []
        chosen: Queue | None = None
        reason = ""
        if not rules:
            queue = self.resolve_queue(msg.queueName) if msg.queueName else None
            if not msg.queueName:
                reason = "queueName is empty and no placement rule applies"
            elif _full_path(msg.queueName) == RECOVERY_QUEUE:
                reason = f"queue {RECOVERY_QUEUE} is reserved for recovered applications"
            elif queue is None:
                reason = f"queue {msg.queueName!r} does not exist"
            elif not queue.leaf:
                reason = f"queue {queue.path} is a parent queue: applications go to leaf queues"
            elif queue.draining:
                reason = f"queue {queue.path} is draining: it accepts no new applications"
            elif not may_submit(queue, user, groups):
                reason = self._denial(queue.path, user)
            else:
                chosen = queue
        else:
            for rule in rules:
                chosen = self._place_by(rule, msg, leaf=True)
                if chosen is not None:
                    break
            if chosen is None:
                names = ", ".join(r.name for r in rules)
                reason = f"no placement rule placed the application (rules: {names})"
                if self._denied:
                    reason += "; denied by ACL: " + "; ".join(self._denied)
        if chosen is None and msg.tags.get(FORCE_TAG, "").lower() == "true":
            chosen = self.queues.get(RECOVERY_QUEUE) or self._create_unmanaged(RECOVERY_QUEUE, True, recovery=True)
        keep = chosen.ancestry() if chosen is not None else []
        for queue in reversed(self._created):  # what failed attempts made goes again
            if queue not in keep:
                self._remove_if_empty(queue)
        return chosen, reason if chosen is None else ""

    @staticmethod
    def _denial(path: str, user: str) -> str:
        return f"user {user!r} may not submit to queue {path}: no submitacl or adminacl up to root lets them in"

    def _place_by(self, rule: PlacementRule, msg: m.AddApplicationRequest, leaf: bool) -> Queue | None:
        """The queue `rule` names (a leaf, or a parent for a parent rule), made if allowed.
        A leaf the user may not submit to does not count: the next name or rule is tried."""
        if not _filter_allows(rule.filter, msg.ugi.user, list(msg.ugi.groups)):
            return None
        for name in self._rule_names(rule, msg):
            if rule.parent is not None:
                parent = self._place_by(rule.parent, msg, leaf=False)
                if parent is None:
                    return None
                path = f"{parent.path}.{name.replace('.', DOT).lower()}"
            else:
                path = _full_path(name)
            if path == RECOVERY_QUEUE:  # reserved: only recovered applications go there
                continue
            queue = self.queues.get(path)
            if queue is None and rule.create:
                queue = self._create_unmanaged(path, leaf)
            if queue is not None and queue.leaf == leaf and not queue.draining:
                if leaf and not may_submit(queue, msg.ugi.user, list(msg.ugi.groups)):
                    self._denied.append(self._denial(queue.path, msg.ugi.user))
                    continue
                return queue
        return None

    def _rule_names(self, rule: PlacementRule, msg: m.AddApplicationRequest) -> list[str]:
        """The queue names a rule proposes, in order (generated parts get `.` -> `_dot_`)."""
        groups = list(msg.ugi.groups)
        if rule.name == "provided":
            return [msg.queueName] if msg.queueName else []
        if rule.name == "fixed":
            return [rule.value]
        if rule.name == "user":
            return [msg.ugi.user.replace(".", DOT)] if msg.ugi.user else []
        if rule.name == "tag":
            tag = msg.tags.get(rule.value, "")
            return [tag.replace(".", DOT)] if tag else []
        if rule.name == "primarygroup":
            return [groups[0].replace(".", DOT)] if groups else []
        return [g.replace(".", DOT) for g in groups[1:]]  # secondarygroup: the first that places

    def _create_unmanaged(self, path: str, leaf: bool, recovery: bool = False) -> Queue | None:
        parent_path, _, name = path.rpartition(".")
        parent = self.queues.get(parent_path)
        if parent is None or parent.leaf or parent.draining or not QUEUE_NAME.match(name):
            return None
        queue = Queue(name, parent)
        queue.configure(QueueConfig(name, not leaf, {}, {}, 0, {}, None, None, []), parent.sort_priority)
        queue.managed = False
        if not recovery:
            self._apply_template(queue)
        parent.children[name] = queue
        self.queues[queue.path] = queue
        self._created.append(queue)
        return queue

    @staticmethod
    def _apply_template(queue: Queue) -> None:
        """An unmanaged leaf takes the child template of the nearest parent that has one."""
        if not queue.leaf or queue.managed or queue.parent is None or queue.path == RECOVERY_QUEUE:
            return
        t = next((q.template for q in queue.parent.ancestry() if q.template is not None), None) or ChildTemplate()
        queue.configure(QueueConfig(queue.name, False, t.guaranteed, t.max, t.maxapplications, t.properties,
                                    None, None, []), queue.parent.sort_priority)

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
        if old is not None:
            self.node_index.remove(old)
            node.key = None
        if node.state is NodeState.SCHEDULABLE:
            node.key = self.scorer.key(node)
            self.node_index.add(node.key)
        for res, fitting in self._fit_cache.values():
            if old is not None:
                fitting.discard(old)
            if node.key is not None and fits(res, node.free):
                fitting.add(node.key)

    def _reindex_nodes(self) -> None:
        self.node_index.clear()
        for node in self.nodes.values():
            node.key = None
            self._index_node(node)

    def add_node(self, info: m.NodeInfo, capacity: Res, occupied: Res) -> Node:
        node = Node(info.nodeID, dict(info.attributes), capacity, occupied)
        self.nodes[node.id] = node
        add_into(self.total, capacity)
        self._rekey = True
        self._index_node(node)
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
        self._wake_node(node)

    def node_event(self, node: Node, event: NodeEvent) -> None:
        node.state = NODE.advance(node.state, event)
        self._index_node(node)
        if node.state is NodeState.SCHEDULABLE:
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
            if app.timeout_ms > 0 and old is not AppState.COMPLETING:
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
            self.terminated[app.id] = new
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
        self._remove_if_empty(app.queue)
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
        if not app.asks and not app.allocations and app.state in (AppState.ACCEPTED, AppState.RUNNING):
            self.app_event(app, AppEvent.COMPLETE, ctx, "no asks and no allocations left")

    # --- application priority (seed: O(1) add, O(n) remove) --------------------------

    def _ask_pending(self, ask: Ask) -> None:
        app = ask.app
        counts = app.priorities
        counts[ask.priority] = counts.get(ask.priority, 0) + 1
        if app.max_priority is None or ask.priority > app.max_priority:
            old = app.max_priority
            app.max_priority = ask.priority
            self._app_priority_changed(app, old)

    def _ask_not_pending(self, ask: Ask) -> None:
        app = ask.app
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
        q = leaf.parent
        while q is not None:
            exposed = [c.exposed_priority() for c in q.children.values() if c.active or c.pending]
            value = max((p for p in exposed if p is not None), default=None)
            if value == q.raw_priority:
                break
            q.raw_priority = value
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
        if app.state in (AppState.NEW, AppState.COMPLETING):
            self.app_event(app, AppEvent.RUN, ctx, "ask added")
        self._sync_app(app)

    def _pend(self, ask: Ask) -> None:
        """Count `ask`'s pending allocations and make it active."""
        total = scaled(ask.resource, ask.pending)
        add_into(ask.app.pending, total)
        for q in ask.app.path:
            add_into(q.pending, total)
        ask.app.active.add(ask.entry)
        self._ask_pending(ask)

    def _unpend(self, ask: Ask) -> None:
        """Undo `_pend` for what is still pending, wherever the ask waits."""
        if not ask.pending:
            return
        total = scaled(ask.resource, ask.pending)
        sub_into(ask.app.pending, total)
        for q in ask.app.path:
            sub_into(q.pending, total)
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
        if ask.waiting == NODE_WAIT:
            group = self.node_waiters.get(ask.shape)
            if group is not None:
                group.pop((ask.app.id, ask.key), None)
                if not group:
                    del self.node_waiters[ask.shape]
        elif ask.waiting is not None:
            q = self._waiting_place(ask.waiting)
            if q is not None:
                q.waiters.pop((ask.app.id, ask.key), None)

    def _waiting_place(self, where: str) -> Queue | Tracker | None:
        return self.trackers.get(where) if "|" in where else self.queues.get(where)

    def _wait(self, ask: Ask, where: str, state: m.SchedulingState, reason: why.Why, ctx: Outbox) -> None:
        """Park `ask` at `where` with its reason; the RM hears the reason once per change."""
        ask.app.active.remove(ask.entry)
        ask.waiting = where
        ask.why = reason
        if where == NODE_WAIT:
            self.node_waiters.setdefault(ask.shape, {})[(ask.app.id, ask.key)] = ask
        else:
            self._waiting_place(where).waiters[(ask.app.id, ask.key)] = ask  # type: ignore[union-attr]
        if reason.message != ask.reported:
            ask.reported = reason.message
            ctx.put(self.rm, m.UpdateContainerSchedulingStateRequest(
                applicartionID=ask.app.id, allocationKey=ask.key, state=state, reason=reason.message,
            ))

    def why_pending(self, ask: Ask) -> why.Why:
        """The current reason of a pending ask (O(1): kept as it is parked and woken)."""
        if ask.waiting is not None and ask.why is not None:
            return ask.why
        app = ask.app
        if app.why is not None and (app.blocked_on is not None or app.why.code is why.PendingCode.NOT_ADMITTED):
            return app.why
        return why.QUEUED

    def _wake(self, ask: Ask) -> None:
        ask.waiting = None
        ask.why = None
        ask.app.active.add(ask.entry)
        self._sync_app(ask.app)

    def _wake_node(self, node: Node) -> None:
        if node.state is not NodeState.SCHEDULABLE or not self.node_waiters:
            return
        for shape in [s for s in self.node_waiters if fits(dict(s), node.free)]:
            for ask in self.node_waiters.pop(shape).values():
                self._wake(ask)

    def _wake_queue(self, q: Queue | Tracker) -> None:
        if q.waiters:
            waiters, q.waiters = q.waiters, {}
            for ask in waiters.values():
                self._wake(ask)

    def _wake_app_waiters(self, q: Queue | Tracker) -> None:
        if q.app_waiters:
            waiters, q.app_waiters = q.app_waiters, {}
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

    # --- allocations -----------------------------------------------------------------

    def recover(self, alloc_msg: m.Allocation, app: App, node: Node, resource: Res, ctx: Outbox) -> None:
        """Count an allocation the RM already runs (recovery), without issuing it again."""
        alloc = Alloc(alloc_msg.UUID, alloc_msg.allocationKey, app, node, self.intern(resource)[0],
                      alloc_msg.priority, alloc_msg.allocationTags, alloc_msg.taskGroupName,
                      alloc_msg.placeholder, ctx.seq)
        self.ledger.book(alloc)
        if app.state in (AppState.NEW, AppState.ACCEPTED, AppState.COMPLETING):
            self.app_event(app, AppEvent.ALLOCATE, ctx, "allocation recovered")

    def _usage_moved(self, app: App) -> None:
        """The ledger moved `app`'s usage: under `fair` that moves it in its leaf."""
        if app.queue.sort_policy is AppSortPolicy.FAIR:
            self._rekey_app(app)

    def _allocate(self, ask: Ask, node: Node, ctx: Outbox) -> None:
        app = ask.app
        alloc = Alloc(ctx.next_uuid(self.uuid_taken), ask.key, app, node, ask.resource, ask.priority, ask.tags,
                      ask.task_group, ask.placeholder, ctx.seq)
        for q in app.path:
            sub_into(q.pending, ask.resource)
        sub_into(app.pending, ask.resource)
        ask.pending -= 1
        ask.allocated += 1
        ask.reported = ""
        if ask.pending == 0:
            app.active.remove(ask.entry)
            ask.state = ASK.advance(ask.state, AskEvent.ALLOCATE_LAST)
            self._ask_not_pending(ask)
        self.ledger.book(alloc)
        if app.state is not AppState.RUNNING:
            self.app_event(app, AppEvent.ALLOCATE, ctx, "first allocation")
        if ask.timeout_ms > 0:
            self.timers.schedule(ctx.ts + ask.timeout_ms * 1_000_000, AllocationTimeoutTimer(self, alloc, ask.timeout_ms))
        ctx.put(self.rm, alloc.message(self.name))
        self._sync_app(app)

    def release(self, alloc: Alloc, termination: m.TerminationType, message: str, ctx: Outbox,
                check_done: bool = True) -> None:
        """Release an allocation and report it to the RM with `termination`."""
        event = _RELEASE_EVENTS.get(termination, AllocationEvent.STOP)
        alloc.state = ALLOCATION.advance(alloc.state, event)
        node, app = alloc.node, alloc.app
        self.ledger.unbook(alloc)
        ask = app.asks.get(alloc.key)
        if ask is not None:
            ask.allocated -= 1
            if ask.allocated == 0 and ask.pending == 0:
                del app.asks[ask.key]
        ctx.put(self.rm, m.AllocationRelease(
            partitionName=self.name, applicationID=app.id, UUID=alloc.uuid,
            terminationType=termination, message=message, allocationKey=alloc.key,
        ))
        for q in app.path:
            self._wake_queue(q)
        for t in app.trackers:
            self._wake_queue(t)
        self._wake_node(node)
        if check_done:
            self._check_done(app, ctx)

    # --- the scheduling pass ---------------------------------------------------------

    def schedule(self, ctx: Outbox) -> None:
        if self._rekey:
            self._rekey = False
            self._rekey_all(only_fair=True)
        self._failed_shapes.clear()
        try:
            while self.root.active and ctx.budget_left and self._try_queue(self.root, ctx):
                pass
        finally:
            self._fit_cache.clear()

    def _queue_key(self, parent: Queue, q: Queue) -> tuple[Any, ...]:
        prio = 0
        if parent.sort_priority:
            exposed = q.exposed_priority()
            prio = -(exposed if exposed is not None else 0)
        return (
            prio,
            share(q.allocated, q.guaranteed, self.total),
            -share(q.pending, q.guaranteed, self.total),
            q.name,
        )

    def _try_queue(self, q: Queue, ctx: Outbox) -> bool:
        if not q.leaf:
            children = [c for c in q.children.values() if c.active]
            if len(children) > 1:
                children.sort(key=lambda c: self._queue_key(q, c))
            for child in children:
                if self._try_queue(child, ctx):
                    return True
            return False
        gate = self._stateaware_gate(q) if q.sort_policy is AppSortPolicy.STATEAWARE else None
        apps = q.active_apps
        i = 0
        while i < len(apps):
            app: App = apps[i][-1]
            if gate is not None and app.state is AppState.ACCEPTED and app is not gate:
                if app.why is None or app.why.details.get("first") != gate.id:
                    app.why = why.not_admitted(q.path, gate.id)
                i += 1
                continue
            if self._try_app(app, ctx):
                return True
            if app.entry is not None:
                i += 1
        return False

    @staticmethod
    def _stateaware_gate(leaf: Queue) -> App | None:
        """The one Accepted application that stateaware lets start: the first in fifo order."""
        best: App | None = None
        best_key: tuple[int, int] | None = None
        for app in leaf.apps.values():
            if app.state is AppState.ACCEPTED and app.pending:
                key = (-(app.max_priority or 0) if leaf.sort_priority else 0, app.seq)
                if best_key is None or key < best_key:
                    best, best_key = app, key
        return best

    def _try_app(self, app: App, ctx: Outbox) -> bool:
        app.why = None
        if app.state is AppState.ACCEPTED:
            full: Queue | Tracker | None = None
            for q in app.path:
                if q.maxapps and q.running >= q.maxapps:
                    full, reason = q, f"queue {q.path} runs its maximum of {q.maxapps} applications"
                    app.why = why.queue_max_applications(reason, q.path, q.running, q.maxapps)
                    break
            else:
                for t in app.trackers:
                    n = t.limit.maxapplications
                    if n and t.running >= n:
                        full, reason = t, f"{t.describe()}: {t.running} of {n} applications running"
                        app.why = why.limit_max_applications(reason, t.kind, t.name, t.queue.path, t.running, n)
                        break
            if full is not None:
                app.blocked_on = full
                full.app_waiters[app.id] = app
                self._sync_app(app)
                for _, _, ask in list(app.active):
                    if ask.reported != reason:
                        ask.reported = reason
                        ctx.put(self.rm, m.UpdateContainerSchedulingStateRequest(
                            applicartionID=app.id, allocationKey=ask.key,
                            state=m.SchedulingState.SKIPPED, reason=reason,
                        ))
                return False
        while app.active:
            ask: Ask = app.active[0][-1]
            if self._try_ask(ask, ctx):
                return True
        self._sync_app(app)
        return False

    def _try_ask(self, ask: Ask, ctx: Outbox) -> bool:
        res = ask.resource
        app = ask.app
        if app.queue.path == RECOVERY_QUEUE:
            reason = f"queue {RECOVERY_QUEUE} keeps recovered applications running and schedules nothing new"
            self._wait(ask, RECOVERY_QUEUE, m.SchedulingState.SKIPPED, why.recovery_queue(reason, RECOVERY_QUEUE), ctx)
            return False
        for t in app.trackers:
            limit = t.limit.maxresources
            if limit:
                over = first_over(t.allocated, res, limit)
                if over is not None:
                    used = t.allocated.get(over, 0)
                    reason = (f"{t.describe()}: maxresources {over} {limit[over]} would be exceeded: "
                              f"{used} used + {res[over]} asked")
                    self._wait(ask, t.key, m.SchedulingState.SKIPPED, why.limit(
                        reason, t.kind, t.name, t.queue.path, over, used, limit[over], res[over]), ctx)
                    return False
        for q in app.path:
            if q.max:
                over = first_over(q.allocated, res, q.max)
                if over is not None:
                    used = q.allocated.get(over, 0)
                    reason = f"queue {q.path} max {over} {q.max[over]} would be exceeded: {used} used + {res[over]} asked"
                    self._wait(ask, q.path, m.SchedulingState.SKIPPED,
                               why.queue_max(reason, q.path, over, used, q.max[over], res[over]), ctx)
                    return False
        if ask.shape not in self._failed_shapes:
            node = self._first_fit(ask)
            if node is not None:
                self._allocate(ask, node, ctx)
                return True
            self._failed_shapes.add(ask.shape)
        reason = f"no schedulable node has {fmt_res(res)} free"
        self._wait(ask, NODE_WAIT, m.SchedulingState.FAILED, why.no_node_room(reason, res), ctx)
        return False


    def _first_fit(self, ask: Ask) -> Node | None:
        """The first node in index order with room for `ask`, or None."""
        res, nodes = ask.resource, self.nodes
        cached = self._fit_cache.get(ask.shape)
        if cached is None:
            for skipped, key in enumerate(self.node_index):
                if skipped == FIT_CACHE_AFTER:
                    fitting = SortedList(k for k in self.node_index if fits(res, nodes[k[1]].free))
                    cached = self._fit_cache[ask.shape] = (res, fitting)
                    break
                node = nodes[key[1]]
                if fits(res, node.free):
                    return node
            else:
                return None
        fitting = cached[1]
        return nodes[fitting[0][1]] if fitting else None
