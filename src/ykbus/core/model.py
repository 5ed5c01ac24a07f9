"""The model of one partition: its nodes, queues, applications, asks, allocations and the
user and group trackers. State with small methods: no scheduling here (core/scheduling.py
decides, core/partition.py applies, core/ledger.py moves resources).

Resource vectors (`Res`) shared between asks and allocations of one shape are interned by
the partition and never mutated; every vector that changes (usage, free, pending) is owned
by one object.
"""

from __future__ import annotations

from typing import Any, Final

from ykbus.core import why
from ykbus.core.chunked import ChunkedDict
from ykbus.core.config import ChildTemplate, LimitConfig, QueueConfig, duration_ms, parse_offset
from ykbus.core.lifecycle import AllocationState, AppState, AskPlace, AskState, NodeState
from ykbus.core.queueprops import (
    PROP_GANG_RESERVE,
    PROP_PREEMPTION_DELAY,
    PROP_PREEMPTION_POLICY,
    PROP_PRIORITY_OFFSET,
    PROP_PRIORITY_POLICY,
    PROP_QUOTA_DELAY,
    PROP_SORT_POLICY,
    PROP_SORT_PRIORITY,
    PROP_WITHIN_QUEUE,
    AppSortPolicy,
    PreemptionPolicy,
    PriorityPolicy,
    SortPriority,
    WithinQueue,
)
from ykbus.core.resources import Res, add_into, fits, max_into, sub_into
from ykbus.core.runtimeprops import RUNTIME_PROPERTIES
from ykbus.core.sortedseq import SortedSeq
from ykbus.core.tags import AFFINITIES, LEADER_ROLE, POLICY_TAG, ROLE_TAG, NodePolicy
from ykbus.limits import INT64_MAX
from ykbus.si import messages as m

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

REQUIRED_NODE_TAG: Final = "yunikorn.apache.org/requiredNode"  # the SI's DomainYuniKorn + KeyRequiredNode
PLACEHOLDER_TIMEOUT_MS = 15 * 60 * 1000  # a gang's default placeholder timeout (YuniKorn's)
NO_TAGS: dict[str, str] = {}  # shared by every ask without tags; never mutated
ALLOCATION_MESSAGE: Final = m.Allocation  # read once (an attribute of a module not compiled)
# A resource vector's identity as a key (`PartitionState.intern`): a string, whose hash Python
# keeps, so the many lookups by shape (gates, caches, reasons) do not hash a nested tuple each time
Shape = str


def clamp(value: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, value))


DOT = "_dot_"  # replaces "." in a queue name part generated from a user, group or tag
RECOVERY_QUEUE = "root.@recovery@"  # YuniKorn's queue for recovered apps that cannot be placed
FORCE_TAG = "application.create.force"  # YuniKorn's tag on applications an RM recovers


def full_path(name: str) -> str:
    """A queue name as a full lower-case path from root."""
    path = name.strip().lower()
    return path if path == "root" or path.startswith("root.") else f"root.{path}"



class Wait:
    """Where a pending ask waits, one kind per thing it waits for (`Ask.waiting`; None while
    it is active): the partition keeps one registry per kind (core/indexes.py), and an ask
    is in exactly one place. `key` names the place within its kind; `name` is its written
    form (snapshots, the read API: `node`, `node:<id>`, `gang:<app>`, `replace:<uuid>`,
    `leader:<app>`, a queue path, a tracker key), read back by `parse_wait`."""

    __slots__ = ("key", "name")

    def __init__(self, key: str, name: str) -> None:
        self.key, self.name = key, name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class NodeRoom(Wait):
    """Room on any schedulable node (core/waits.py keeps these by gate): one value, NODE_ROOM."""

    __slots__ = ()


class RequiredNode(Wait):
    """Room, or a state or reservation change, on the one node the ask must run on (`key`)."""

    __slots__ = ()


class GangWait(Wait):
    """Its gang (application `key`): a placeholder waits for the rest of the gang, a real ask
    for its group's placeholders to be placed."""

    __slots__ = ()


class Replacement(Wait):
    """The RM's release of placeholder `key`, whose place the real ask takes."""

    __slots__ = ()


class LeaderWait(Wait):
    """A worker waits for its application's (`key`) leader to be placed."""

    __slots__ = ()


class Victims(Wait):
    """The RM's release of the allocations preempted on node `key` for the ask (core/preemption.py),
    which holds the node's reservation meanwhile."""

    __slots__ = ()


class QueueRoom(Wait):
    """Usage of queue `key` (its path) falling under its max, or a new configuration."""

    __slots__ = ()


class LimitRoom(Wait):
    """Usage under a user or group limit (the tracker `key`) falling, or a new configuration."""

    __slots__ = ()


NODE_ROOM: Final = NodeRoom("", "node")


def required_node(node_id: str) -> RequiredNode:
    return RequiredNode(node_id, "node:" + node_id)


def gang_wait(app_id: str) -> GangWait:
    return GangWait(app_id, "gang:" + app_id)


def replacement(uuid: str) -> Replacement:
    return Replacement(uuid, "replace:" + uuid)


def leader_wait(app_id: str) -> LeaderWait:
    return LeaderWait(app_id, "leader:" + app_id)


def victims(node_id: str) -> Victims:
    return Victims(node_id, "victims:" + node_id)


def queue_room(path: str) -> QueueRoom:
    return QueueRoom(path, path)


def limit_room(tracker: str) -> LimitRoom:
    return LimitRoom(tracker, tracker)


def parse_wait(name: str) -> Wait:
    """The `Wait` written as `name` (the inverse of `Wait.name`)."""
    if name == "node":
        return NODE_ROOM
    for prefix, make in (("node:", required_node), ("gang:", gang_wait), ("replace:", replacement),
                         ("leader:", leader_wait), ("victims:", victims)):
        if name.startswith(prefix):
            return make(name[len(prefix):])
    return limit_room(name) if "|" in name else queue_room(name)


class Node:
    """`free` is capacity - occupied - allocated, kept as allocations come and go (the
    ledger); what is allocated is the sum of `allocations`, read when asked, not kept."""

    __slots__ = ("id", "attributes", "capacity", "occupied", "free", "state", "allocations", "key", "reserved",
                 "preempting", "held", "room_changes", "ends")

    def __init__(self, node_id: str, attributes: dict[str, str], capacity: Res, occupied: Res) -> None:
        self.id = node_id
        self.attributes = attributes
        self.capacity = capacity
        self.occupied = occupied
        self.free: Res = {}
        self.state = NodeState.SCHEDULABLE
        self.allocations: dict[str, Alloc] = {}
        self.key: tuple[float, str] | None = None
        self.reserved: Ask | None = None  # the one ask it is reserved for: it takes no other
        self.preempting = 0  # its allocations preempted whose release the RM has not confirmed yet
        # the topology gang whose reserved domain it is in ("" none): it takes none of the
        # others' asks, and is not in the node index (core/indexes.py `index_node`)
        self.held = ""
        # times its room changed (an allocation booked or unbooked, by the ledger; its room
        # recomputed, as when its capacity or occupied resources are updated), not stored: an
        # estimate the planner keeps for the node is of its room and allocations while this stays
        self.room_changes = 0
        # its allocations with a runtime limit, by end bound then uuid (the ledger's, not
        # stored): an estimate reads when room comes back here without a walk of every
        # allocation, and a reserved ask's reason tells an estimated start only where there
        # is one (core/backfill.py)
        self.ends: list[Alloc] = []
        self.recompute_free()

    @property
    def allocated(self) -> Res:
        total: Res = {}
        for alloc in self.allocations.values():
            add_into(total, alloc.resource)
        return total

    def takes(self, ask: Ask) -> bool:
        """Whether `ask` fits the node's free room, and the node is reserved for no other ask."""
        # (the reservation first: one read, where a fit reads the free room per resource; with
        # a backlog most nodes are reserved)
        return (self.reserved is None or self.reserved is ask) and fits(ask.resource, self.free)

    def empty_room(self) -> Res:
        """Its room with none of the scheduler's allocations: capacity less what others occupy."""
        room = dict(self.capacity)
        sub_into(room, self.occupied)
        return room

    def recompute_free(self) -> None:
        free = self.empty_room()
        for alloc in self.allocations.values():
            sub_into(free, alloc.resource)
        self.free = free
        self.room_changes += 1


class Queue:
    __slots__ = (
        "name", "path", "parent", "children", "leaf", "managed", "draining", "guaranteed", "max",
        "maxapps", "properties", "submitacl", "adminacl", "sort_policy", "sort_priority",
        "priority_fence", "priority_offset", "allocated", "pending", "apps", "running",
        "active", "active_apps", "app_waiters", "raw_priority", "draining_since",
        "limits", "template", "app_prios", "sort_key", "pooled", "pooled_apps", "room",
        "preempt_policy", "preempt_delay_ms", "preempt_within", "quota_delay_ms", "victims",
        "runtime_default_ms", "runtime_max_ms", "min_runtime_ms", "gang_reserve",
    )

    def __init__(self, name: str, parent: Queue | None, managed: bool = True) -> None:
        self.name = name
        self.parent = parent
        self.path: str = name if parent is None else f"{parent.path}.{name}"
        self.children: dict[str, Queue] = {}
        self.leaf = True
        self.managed = managed  # False: created by a placement rule, not configured
        self.draining = False
        self.draining_since = 0
        self.allocated: Res = {}
        self.pending: Res = {}
        self.apps: dict[str, App] = {}
        self.running = 0
        self.active = 0
        self.active_apps: SortedSeq = SortedSeq()
        self.app_waiters: dict[str, App] = {}
        self.raw_priority: int | None = None
        self.app_prios: dict[int, int] = {}  # a leaf's applications per max priority (None not counted)
        self.limits: list[LimitConfig] = []
        self.template: ChildTemplate | None = None
        # its key among its siblings (core/scheduling.py), None when what it depends on changed
        self.sort_key: tuple[Any, ...] | None = None
        # asks waiting for room in its subtree, per gate; a leaf's applications with such
        # asks, per gate, in their sort order (core/waits.py)
        self.pooled: dict[Any, int] = {}
        self.pooled_apps: dict[Any, SortedSeq] = {}
        self.room = queue_room(self.path)  # where its max holds asks (one value, shared)
        # a leaf's allocations that allow preemption, by (priority, resource vector), in
        # booking order, while the partition indexes them (core/ledger.py)
        self.victims: dict[tuple[int, int], dict[str, Alloc]] = {}

    def configure(self, qc: QueueConfig, inherited_sort_priority: bool) -> None:
        self.sort_key = None
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
        self.preempt_policy = PreemptionPolicy.from_str(props.get(PROP_PREEMPTION_POLICY, "default"))
        delay = props.get(PROP_PREEMPTION_DELAY)
        self.preempt_delay_ms = duration_ms(delay) if delay is not None else -1  # -1: its parent's
        quota = props.get(PROP_QUOTA_DELAY)
        self.quota_delay_ms = duration_ms(quota) if quota is not None else 0  # 0: never
        self.preempt_within = (WithinQueue.from_str(props.get(PROP_WITHIN_QUEUE, "disabled"))
                               is WithinQueue.LOWER_PRIORITY)
        # its runtime properties (docs/time.md; core/backfill.py reads them up the path), -1: its parent's
        runtime = [duration_ms(v) if v is not None else -1 for v in (props.get(k) for k in RUNTIME_PROPERTIES)]
        self.runtime_default_ms, self.runtime_max_ms, self.min_runtime_ms = runtime[0], runtime[1], runtime[2]
        reserve = props.get(PROP_GANG_RESERVE)  # its waiting gangs reserve nodes (docs/gang.md); -1: its parent's
        self.gang_reserve = -1 if not reserve else 1 if reserve == "true" else 0

    def gang_reserves(self) -> bool:
        """`ykbus.io/gang.reserve` in force here: the nearest queue up the path that sets it."""
        q: Queue | None = self
        while q is not None:
            if q.gang_reserve >= 0:
                return q.gang_reserve == 1
            q = q.parent
        return False

    def children_priority(self) -> int | None:
        """A parent's own priority (before its offset or fence): the most its children with
        something pending show it (a fenced child's offset is not None even with nothing
        pending: it shows nothing then)."""
        shown = [c.exposed_priority() for c in self.children.values() if c.raw_priority is not None]
        return max((p for p in shown if p is not None), default=None)

    def exposed_priority(self) -> int | None:
        """The priority this queue shows its parent (YuniKorn's priority scheduling design: offset, fence)."""
        if self.priority_fence:
            return self.priority_offset
        raw = self.raw_priority
        if raw is None or not self.priority_offset:  # raw is an int32 already: nothing to clamp
            return raw
        return clamp(raw + self.priority_offset)

    def ancestry(self) -> list[Queue]:
        """This queue and its parents up to root."""
        out = []
        q: Queue | None = self
        while q is not None:
            out.append(q)
            q = q.parent
        return out


class AskSpec:
    """What an ask is asked to be, its resource aside: the values its constructor takes,
    from an RM's `AllocationAsk` (`ask_spec`) or from a snapshot alike."""

    __slots__ = ("max_allocations", "priority", "tags", "task_group", "placeholder", "originator", "timeout_ms",
                 "preempt_self", "preempt_other")

    def __init__(self, max_allocations: int = 1, priority: int = 0, tags: dict[str, str] | None = None,
                 task_group: str = "", placeholder: bool = False, originator: bool = False, timeout_ms: int = 0,
                 preempt_self: bool = True, preempt_other: bool = False) -> None:
        self.max_allocations = max_allocations
        self.priority = priority
        self.tags = tags or NO_TAGS
        self.task_group = task_group
        self.placeholder = placeholder
        self.originator = originator
        self.timeout_ms = timeout_ms
        self.preempt_self = preempt_self
        self.preempt_other = preempt_other


def is_placeholder(msg: m.AllocationAsk | m.Allocation) -> bool:
    """The SI's `placeholder`, "ignored if the taskGroupName is not set"."""
    return msg.placeholder and bool(msg.taskGroupName)


def ask_spec(msg: m.AllocationAsk) -> AskSpec:
    """What `msg` asks for. No preemption policy: it may be preempted and may not preempt
    (YuniKorn's default)."""
    policy = msg.preemptionPolicy
    return AskSpec(msg.maxAllocations or 1, msg.priority, msg.tags, msg.taskGroupName, is_placeholder(msg),
                   msg.Originator, msg.executionTimeoutMilliSeconds,
                   policy is None or policy.allowPreemptSelf, policy is not None and policy.allowPreemptOther)


class Ask:
    __slots__ = ("key", "app", "resource", "shape", "max_allocations", "pending", "allocated",
                 "priority", "seq", "tags", "task_group", "placeholder", "originator",
                 "timeout_ms", "state", "waiting", "reported", "why", "required", "since", "reserved", "pooled",
                 "preempt_self", "preempt_other", "preempt_after", "at", "tallied", "tallied_n", "place")

    def __init__(self, key: str, app: App, spec: AskSpec, resource: Res, shape: Shape, seq: int,
                 at: int = 0) -> None:
        self.key = key
        self.app = app
        self.seq = seq
        self.at = at  # log time it was first asked (ns): the REST API's requestTime
        self.allocated = 0
        self.state = AskState.PENDING
        # where it is, by the place table (core/lifecycle.py ASK_PLACE): moved only by core/indexes.py
        # `AskPlaces.move`, which keeps `waiting`, `pooled`, `reserved` and the registries with it
        self.place = AskPlace.NOT_PENDING
        self.waiting: Wait | None = None  # where it waits (None: active)
        self.reported = ""  # last scheduling-state reason sent, so it is sent once
        self.why: why.Why | None = None  # why it waits, while it waits (`waiting` is set)
        self.since = 0  # log time it started waiting for node room (0: it does not): reservations
        self.reserved = ""  # the node reserved for it
        self.pooled = 0  # waiting for room in the partition's RoomWaits (core/waits.py): 1, and to reserve: 2
        self.preempt_after = 0  # log time before which it does not look for victims again (core/preemption.py)
        # what the read model's PendingCodes counts of it: the code it is parked with (None:
        # active, counted with its application), and its pending allocations then
        self.tallied: why.PendingCode | None = None
        self.tallied_n = 0
        self.update(spec, resource, shape)

    def update(self, spec: AskSpec, resource: Res, shape: Shape) -> None:
        """What the ask is asked to be (again: an RM may update an ask it sent)."""
        self.resource, self.shape = resource, shape
        self.max_allocations = spec.max_allocations
        self.pending = max(0, self.max_allocations - self.allocated)
        self.priority = spec.priority
        self.tags = spec.tags
        self.required = self.tags.get(REQUIRED_NODE_TAG, "")  # the node it must run on, if any
        self.task_group = spec.task_group
        self.placeholder = spec.placeholder
        self.originator = spec.originator
        self.timeout_ms = spec.timeout_ms
        self.preempt_self = spec.preempt_self
        self.preempt_other = spec.preempt_other

    @property
    def entry(self) -> tuple[int, int, Ask]:
        """Its place in the application's active list; built when needed, never stored,
        so that an ask is not part of a reference cycle and is freed when dropped."""
        return (-self.priority, self.seq, self)


class Alloc:
    __slots__ = ("uuid", "key", "app", "node", "resource", "priority", "tags", "task_group",
                 "placeholder", "state", "born", "replacing", "preempt_self", "preempting", "at", "asked",
                 "limit_ms", "end", "lent", "originator")

    def __init__(self, uuid: str, key: str, app: App, node: Node, resource: Res, priority: int,
                 tags: dict[str, str], task_group: str, placeholder: bool, born: int, at: int = 0,
                 asked: int = 0) -> None:
        self.uuid = uuid
        self.born = born  # the input seq that created or recovered it
        self.at = at  # log time it was placed or recovered (ns)
        self.asked = asked or at  # log time its ask was first asked (ns)
        self.key = key
        self.app = app
        self.node = node
        self.resource = resource
        self.priority = priority
        self.tags = tags
        self.task_group = task_group
        self.placeholder = placeholder
        self.state = AllocationState.ALLOCATED
        self.replacing = ""  # a placeholder: the key of the real ask taking its place, once released
        self.preempt_self = True  # it may be preempted (its ask's allowPreemptSelf)
        self.preempting = False  # preempted: the RM is to release it (core/preemption.py)
        self.limit_ms = 0  # its runtime limit (its ask's, docs/time.md): the core ends it then; 0: none
        self.end = 0  # with a limit, its end bound: its start plus its limit (the ledger's, `limit_booked`)
        self.lent = ""  # backfilled: whose reserved room it took (`ask <app>/<key>`, `gang <app>`), else ""
        self.originator = False  # its application's originator (a driver, an AM): the last victim chosen

    def message(self, partition: str) -> m.Allocation:
        return ALLOCATION_MESSAGE(
            allocationKey=self.key, allocationTags=self.tags, UUID=self.uuid,
            resourcePerAlloc=resource_msg(self.resource), priority=self.priority,
            nodeID=self.node.id, applicationID=self.app.id, partitionName=partition,
            taskGroupName=self.task_group, placeholder=self.placeholder,
        )


class App:
    __slots__ = ("id", "queue", "path", "user", "groups", "tags", "state", "seq", "asks",
                 "active", "allocations", "allocated", "pending", "max_priority", "priorities", "leaders_waiting",
                 "blocked_on",
                 "entry", "timeout_ms", "timer", "trackers", "why", "gang", "gang_hard", "gang_timer", "policy",
                 "node_pods", "pooled", "pool_key", "gang_room", "leader_room", "history", "unparked", "domains",
                 "holding", "recovered")

    def __init__(self, app_id: str, queue: Queue, seq: int, user: str, groups: list[str], tags: dict[str, str],
                 timeout_ms: int = 0, gang: Res | None = None, gang_hard: bool = False, submitted: int = 0) -> None:
        self.id = app_id
        self.queue = queue
        self.path = queue.ancestry()
        self.user = user
        self.groups = groups
        self.history = AppHistory(submitted, self.user, self.groups)  # outlives it, when it ends
        self.tags = tags
        self.state = AppState.NEW
        self.seq = seq
        self.asks: ChunkedDict[Ask] = ChunkedDict()  # in the order they came (a large application's grows in pieces)
        self.active: SortedSeq = SortedSeq()
        self.unparked = 0  # pending allocations of its asks that are not parked (the read model's PendingCodes)
        self.allocations: ChunkedDict[Alloc] = ChunkedDict()
        self.allocated: Res = {}
        self.pending: Res = {}
        self.max_priority: int | None = None
        self.priorities: dict[int, int] = {}  # pending asks per priority: O(1) add, O(distinct) remove
        self.leaders_waiting = 0  # pending asks tagged ykbus.io/role: leader (its workers wait while any is)
        self.blocked_on: Queue | Tracker | None = None
        self.entry: tuple[Any, ...] | None = None  # its sort key while in the leaf's active_apps
        # its asks waiting for room, per gate, as sorted active-list entries, and its sort
        # key while it has any (core/waits.py)
        self.pooled: dict[Any, list[tuple[int, int, Ask]]] = {}
        self.pool_key: tuple[Any, ...] | None = None
        self.gang_room = gang_wait(self.id)  # where its gang holds asks (shared)
        self.leader_room = leader_wait(self.id)  # where its leader holds workers (shared)
        self.timeout_ms = timeout_ms
        self.timer = 0  # generation of the app's pending timer; a stale timer is ignored
        self.trackers: list[Tracker] = []  # the user and group limits that apply to it
        # why its active asks wait although they are not parked: a maxapplications that
        # blocks it (while `blocked_on` is set), or a stateaware queue that starts another first
        self.why: why.Why | None = None
        # a gang (non-empty placeholderAsk): what its placeholders must cover; its
        # executionTimeoutMilliSeconds is then the placeholder timeout, not a run limit
        self.gang: Res = gang if gang is not None else {}
        self.gang_hard = gang_hard
        self.gang_timer = 0  # generation of its placeholder timer (0: none set yet)
        # the topology domain of each of its gang's groups placed `required` (core/topoplace.py
        # `group_of` -> level, the domain's values): where its lost members go back
        self.domains: dict[str, tuple[str, tuple[str, ...]]] = {}
        # what its waiting gang reserved (core/holds.py): a topology domain (level, the domain's
        # values), or nodes ("", their ids: docs/gang.md); no other ask takes room there until
        # the gang is placed. Read through `reserved_domain` and `reserved_nodes`
        self.holding: tuple[str, tuple[str, ...]] | None = None
        # its allocations recovered under a key it has no ask of, by key: an ask of that key
        # sent later counts them as allocated (core/changes.py `recover`, `add_ask`)
        self.recovered: dict[str, int] = {}
        # its node policy (tag ykbus.io/node-policy, validated before it is added), None: the
        # partition's node order; allocations per node id, kept by the ledger for the affinities
        name = tags.get(POLICY_TAG)
        self.policy = NodePolicy(name) if name is not None else None
        self.node_pods: dict[str, int] | None = {} if self.policy in AFFINITIES else None

    def count_on(self, node_id: str, delta: int) -> None:
        """One allocation more (+1) or fewer (-1) on `node_id`, for an affinity policy."""
        pods = self.node_pods
        if pods is not None:
            left = pods.get(node_id, 0) + delta
            if left:
                pods[node_id] = left
            else:
                del pods[node_id]

    @property
    def placeholder_timeout_ms(self) -> int:
        return self.timeout_ms or PLACEHOLDER_TIMEOUT_MS

    def reserved_domain(self) -> tuple[str, tuple[str, ...]] | None:
        """The topology domain its gang reserved (level, values), None if none (or nodes)."""
        holding = self.holding
        return holding if holding is not None and holding[0] else None

    def reserved_nodes(self) -> tuple[str, ...] | None:
        """The ids of the nodes its gang reserved (docs/gang.md), None if none (or a domain)."""
        holding = self.holding
        return holding[1] if holding is not None and not holding[0] else None


def app_of(msg: m.AddApplicationRequest, queue: Queue, seq: int, submitted: int) -> App:
    """The application an RM's `AddApplicationRequest` adds, in `queue`."""
    placeholders = msg.placeholderAsk
    gang = {k: q.value for k, q in placeholders.resources.items() if q.value} if placeholders is not None else {}
    return App(msg.applicationID, queue, seq, msg.ugi.user, ugi_groups(msg.ugi), msg.tags,
               msg.executionTimeoutMilliSeconds, gang, msg.gangSchedulingStyle == "Hard", submitted)


def user_groups(user: str, groups: Any) -> list[str]:
    """The groups of an application's user: those the RM gives, else the user's own name (as
    YuniKorn resolves a user it is given no groups for: without a resolver, a user is in the
    primary group of the same name)."""
    if groups:
        return list(groups)
    return [user] if user else []


def ugi_groups(ugi: m.UserGroupInformation) -> list[str]:
    return user_groups(ugi.user, ugi.groups)


def is_leader(ask: Ask) -> bool:
    return ask.tags.get(ROLE_TAG) == LEADER_ROLE


def app_hold(app: App) -> why.Why | None:
    """Why `app` holds its asks that are not parked, if it does: a queue's or limit's
    `maxapplications` (it waits to start), or a `stateaware` queue not admitting it yet."""
    reason = app.why
    if reason is not None and (app.blocked_on is not None or reason.code is why.PendingCode.NOT_ADMITTED):
        return reason
    return None


def pending_leader(app: App) -> Ask | None:
    """The ask of `app` tagged `ykbus.io/role: leader` that still waits to be placed, if
    any: its workers wait for it (a job is placed in its order, leader first). O(1) while
    none waits (the application counts them); a search of its asks when one does."""
    if not app.leaders_waiting:
        return None
    for ask in app.asks.values():
        if ask.pending and is_leader(ask):
            return ask
    return None


STATE_LOG_KEPT: Final = 32  # an application's last state changes kept for readers (it can cycle Running <-> Completing)


def most_held(history: AppHistory, allocated: Res) -> Res:
    """The most an application held of each resource: before any release, or now."""
    out = dict(history.max_used)
    max_into(out, allocated)
    return out


INSTANCE_TYPE_ATTR: Final = "node.kubernetes.io/instance-type"  # a node's instance type (YuniKorn's; UNKNOWN without it)
UNKNOWN_INSTANCE_TYPE: Final = "UNKNOWN"
# read once (compiled, an imported name is looked up at every use); below the second, a sum
# is compared in machine integers (INT64_MAX is past them: a comparison with it is a call)
_INT64_MAX: Final = INT64_MAX
_SMALL_INT_MAX: Final = 4_611_686_018_427_387_903  # 2**62 - 1
USED: Final = "resourceUsage"
PLACEHOLDER_USED: Final = "placeholderResource"
PREEMPTED_USED: Final = "preemptedResource"


class AppHistory:
    """What readers are told of an application's past (the REST API's submissionTime,
    stateLog, maxUsedResource, user and groups, placeholderData and resourceHistory), kept
    with it and after it ended. Log times (ns); no decision reads it.

    `placeholders`: per task group, [placeholders asked, their resource, replaced, timed out]
    (YuniKorn's placeholderData: counts since the application began, not what is left).
    `tracked`: what its released allocations used, resource times whole seconds held, by
    kind (USED, PLACEHOLDER_USED, PREEMPTED_USED) and the node's instance type (YuniKorn's
    resourceHistory)."""

    __slots__ = ("submitted", "user", "groups", "states", "max_used", "placeholders", "tracked")

    def __init__(self, submitted: int, user: str, groups: list[str],
                 states: list[tuple[int, str]] | None = None, max_used: Res | None = None,
                 placeholders: dict[str, list[Any]] | None = None,
                 tracked: dict[str, dict[str, Res]] | None = None) -> None:
        self.submitted = submitted
        self.user = user
        self.groups = groups
        self.states: list[tuple[int, str]] = states if states is not None else []  # (log time, state entered)
        # the most it held of each resource before a release (with what it holds now: the most it held)
        self.max_used: Res = max_used if max_used is not None else {}
        self.placeholders: dict[str, list[Any]] = placeholders if placeholders is not None else {}
        self.tracked: dict[str, dict[str, Res]] = tracked if tracked is not None else {}

    def placeholder_asked(self, task_group: str, resource: Res, n: int) -> None:
        """`n` placeholders of `resource` asked for `task_group`."""
        group = self.placeholders.get(task_group)
        if group is None:
            self.placeholders[task_group] = [n, dict(resource), 0, 0]
        else:
            group[0] += n

    def released(self, alloc: Alloc, replaced: bool, timed_out: bool, ts: int) -> None:
        """`alloc` was released at `ts` (log time): what it used is tracked, and a placeholder
        counted as replaced or timed out."""
        kind = PREEMPTED_USED if alloc.preempting else PLACEHOLDER_USED if alloc.placeholder else USED
        held = ts - alloc.at
        seconds = held // 1_000_000_000 if held > 0 else 0
        by_type = self.tracked.get(kind)
        if by_type is None:
            by_type = self.tracked[kind] = {}
        itype = alloc.node.attributes.get(INSTANCE_TYPE_ATTR) or UNKNOWN_INSTANCE_TYPE
        used = by_type.get(itype)
        if used is None:
            used = by_type[itype] = {}
        for k, v in alloc.resource.items():  # saturated at int64, as YuniKorn's int64 figures are bounded
            total = used.get(k, 0) + v * seconds
            used[k] = total if total <= _SMALL_INT_MAX else min(total, _INT64_MAX)
        if alloc.placeholder and (replaced or timed_out):
            group = self.placeholders.get(alloc.task_group)
            if group is not None:
                group[2 if replaced else 3] += 1

    def entered(self, ts: int, state: str) -> None:
        states = self.states
        states.append((ts, state))
        if len(states) > STATE_LOG_KEPT:
            del states[0]

    def used(self, allocated: Res) -> None:
        """It holds `allocated` (about to release some of it): the most of each, saturated at
        int64 (recovered allocations may add up past it)."""
        most = self.max_used
        for name, value in allocated.items():
            if value > most.get(name, 0):
                most[name] = value if value <= _SMALL_INT_MAX else min(value, _INT64_MAX)


class Terminated:
    """An application that ended (Completed or Failed), kept until its terminated timer
    fires, or was rejected (kept among the partition's last rejected): how it ended, when
    (the log's clock, ns), in which queue, and its history."""

    __slots__ = ("state", "ts", "message", "queue", "history")

    def __init__(self, state: AppState, ts: int, message: str, queue: str, history: AppHistory | None = None) -> None:
        self.state = state
        self.ts = ts
        self.message = message
        self.queue = queue
        self.history = history if history is not None else AppHistory(0, "", [])


class Tracker:
    """What one user (or group) uses in one queue that has a limit for them.

    `key` is `<queue path>|user|<name>` or `<queue path>|group|<name>`: it is what an ask
    waiting for this limit has in `waiting`, and what a blocked application is blocked on."""

    __slots__ = ("key", "queue", "kind", "name", "limit", "allocated", "running", "app_waiters",
                 "apps", "room")

    def __init__(self, queue: Queue, kind: str, name: str, limit: LimitConfig) -> None:
        self.key = tracker_key(queue, kind, name)
        self.room = limit_room(self.key)  # where this limit holds asks (shared)
        self.queue = queue
        self.kind = kind
        self.name = name
        self.limit = limit
        self.allocated: Res = {}
        self.running = 0
        self.app_waiters: dict[str, App] = {}
        self.apps = 0  # applications it applies to: it goes with the last of them

    @property
    def path(self) -> str:
        return self.key

    def hold(self, app: App) -> None:
        """`app` waits until the limit runs fewer applications (a snapshot's load: the applier's `_hold` otherwise)."""
        self.app_waiters[app.id] = app

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


_RESOURCE_MSGS: Final[dict[int, tuple[Res, m.Resource]]] = {}


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
