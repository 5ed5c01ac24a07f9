"""The core: one object that owns all state and folds log entries into decisions.

`Core.apply(entry) -> list[Output]` is the whole interface. It is deterministic: no clock
(now is `entry.ts`), no randomness, ids from sequence numbers, and every iteration over
insertion-ordered dicts or sorted lists, never sets.

Rules:
1. An entry is decoded here (msgspec, strict, see `ykbus.si.codec`). A body that does not
   decode becomes an `EventRecord` naming the path and the reason; a bad item becomes the
   matching rejection; the rest of the message still applies.
2. A rejected input changes nothing. Every check that can reject runs before the first
   change an item makes.
3. Timers (completing, terminated, execution timeouts) fire at the start of the first entry
   whose `ts` reaches their deadline, in deadline order.
4. A scheduling pass runs after every entry, on the partitions that have active work.
5. Partitions belong to one RM; re-registering an RM wipes everything it owned.
6. A broken invariant raises (a bug). Nothing here catches it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ykbus import limits
from ykbus.core.config import (
    DEFAULT_CONFIG_TEXT,
    DEFAULT_PARTITION,
    ConfigError,
    SchedulerConfig,
    parse_config,
)
from ykbus.core.lifecycle import (
    APP,
    NODE,
    RM,
    AppEvent,
    AppState,
    NodeEvent,
    RMEvent,
    RMState,
)
from ykbus.core.outbox import ENTRY_KINDS, Entry, Outbox, Output
from ykbus.core.partition import App, Partition
from ykbus.core.policies import policy_problem, role_problem
from ykbus.core.projection import SECTIONS, project
from ykbus.core.resources import Res, first_over
from ykbus.core.timers import (
    AllocationTimeoutTimer,
    AppTimeoutTimer,
    CompletingTimer,
    PlaceholderTimer,
    ReservationTimer,
    Timers,
)
from ykbus.si import codec, compat
from ykbus.si import messages as m

RM_ID = re.compile(r"^[^.*>\s]+$")
RESERVED_RM = "_core"  # the subject token of entries the service itself appends (ticks, rmstate)
NODE_PARTITION_ATTR = "si/node-partition"

YamlLoader = Callable[[str], Any]


class OutOfOrder(Exception):
    """An entry whose seq is not above the last applied one: the caller's bug, not input."""


# Parsed configurations by (loader, text): RMs re-register and files are re-sent with the
# same text, and parsing YAML costs milliseconds. The configurations are frozen structs.
_PARSED: dict[tuple[Any, str], SchedulerConfig] = {}


class ResourceManager:
    def __init__(self, msg: m.RegisterResourceManagerRequest, config: SchedulerConfig,
                 config_text: str, own_config_text: str, timers: Timers, seq: int) -> None:
        self.id = msg.rmID
        self.state = RM.advance(RMState.INIT, RMEvent.REGISTER)
        self.version = msg.version
        self.policy_group = msg.policyGroup
        self.build_info = dict(msg.buildInfo)
        self.extra_config = dict(msg.extraConfig)
        self.encoding = msg.extraConfig.get("encoding", "json")
        self.config_text = config_text  # the configuration in force
        self.own_config_text = own_config_text  # what the RM itself configured (in force without a queue file)
        self.partitions = {p.name: Partition(self.id, p, timers, seq) for p in config.partitions}
        self.node_partition: dict[str, Partition] = {}
        self.link_partitions()

    def uuid_live(self, uuid: str) -> bool:
        """Whether an allocation of this RM has this UUID, in any of its partitions."""
        return any(uuid in p.allocations for p in self.partitions.values())

    def link_partitions(self) -> None:
        """Tell each partition how to see whether a UUID is live in this RM (it never issues
        one that is): its own allocations when it is the RM's only partition (the fast path),
        else all of them. Called whenever the RM's partitions change."""
        for p in self.partitions.values():
            p.uuid_taken = p.allocations.__contains__ if len(self.partitions) == 1 else self.uuid_live

    def wipe(self) -> None:
        for p in self.partitions.values():
            p.alive = False
        self.partitions = {}
        self.node_partition = {}


def _res(msg: m.Resource | None) -> Res:
    if msg is None:
        return {}
    return {k: q.value for k, q in msg.resources.items() if q.value}


class Core:
    def __init__(self, load_yaml: YamlLoader | None = None,
                 queues_override: SchedulerConfig | None = None) -> None:
        """`load_yaml(text)` turns configuration text into plain objects (ValueError if it
        cannot); the core itself imports no YAML library. `queues_override` replaces the
        configuration of every registration and update (replay's what-if)."""
        self._load_yaml = load_yaml
        self._override = queues_override
        # The operator's queue files (entries from the service, rm ""): policy group -> text,
        # "*" for every RM. They take precedence over what RMs send.
        self.operator_configs: dict[str, str] = {}
        self.rms: dict[str, ResourceManager] = {}
        self.policy_groups: dict[str, str] = {}
        self.timers = Timers()
        self.last_seq = 0
        self.now = 0
        self.allocations_made = 0  # allocations decided since the log began (in snapshots: survives restarts)
        self.backlog = False  # the last pass stopped at the allocation budget (not in snapshots: the next entry recomputes it)
        # Partitions dropped so far (their queue trees hold reference cycles that only the
        # cyclic GC frees); the service collects once when this changes. Not in snapshots.
        self.dropped_partitions = 0

    # --- the interface ---------------------------------------------------------------

    def apply(self, entry: Entry, decoded: codec.Decoded | None = None) -> list[Output]:
        """Apply one log entry. `decoded`, when given, is the entry's body already decoded
        (the in-process API); `entry.msg` is then not read."""
        if entry.seq <= self.last_seq:
            raise OutOfOrder(f"entry seq {entry.seq} is not after {self.last_seq}")
        self.last_seq = entry.seq
        self.now = max(self.now, entry.ts)
        ctx = Outbox(entry.seq, self.now)
        self._fire_timers(ctx)
        if decoded is None or entry.kind == "tick":  # a tick has no body to hand over
            self._dispatch(entry, ctx)
        else:
            getattr(self, f"_on_{entry.kind}")(entry, decoded, ctx)
        backlog = False
        for rm in self.rms.values():
            for p in rm.partitions.values():
                if p.paused:
                    p.settle()
                elif p.root.active or p.pool.open:
                    p.schedule(ctx)
                    backlog = backlog or p.root.active
        # True when the pass stopped at the per-entry allocation budget: the next entry goes
        # on (the service appends a tick at once, so that it comes soon).
        self.backlog = backlog
        self.allocations_made += ctx.allocations
        return ctx.outputs()


    def _dispatch(self, entry: Entry, ctx: Outbox) -> None:
        if entry.kind == "tick":
            return
        if entry.kind == "failed":  # the service's record of a failed entry: see core/guard.py
            if entry.rm:
                ctx.event(entry.rm, m.EventType.REQUEST, entry.rm,
                          f"entry {entry.seq}: failed entries are recorded by the core service only; not applied")
            return
        if entry.kind not in ENTRY_KINDS:
            ctx.event(entry.rm, m.EventType.UNKNOWN_EVENTRECORD_TYPE, entry.rm,
                      f"entry {entry.seq}: unknown kind {limits.quoted(entry.kind)}: expected one of "
                      f"{', '.join(ENTRY_KINDS)}")
            return
        try:
            msg = codec.decode_input(entry.kind, entry.msg, entry.encoding)
        except codec.DecodeError as exc:
            if entry.kind == "register":
                ctx.register(entry.rm, f"invalid RegisterResourceManagerRequest: {exc}")
            else:
                ctx.event(entry.rm, m.EventType.REQUEST, entry.rm,
                          f"entry {entry.seq}: invalid {entry.kind} message: {exc}; nothing applied")
            return
        handler = getattr(self, f"_on_{entry.kind}")
        handler(entry, msg, ctx)

    # --- RMs -------------------------------------------------------------------------

    def _load(self, text: str) -> SchedulerConfig:
        if self._override is not None:
            return self._override
        return self.load_config(text)

    def load_config(self, text: str) -> SchedulerConfig:
        """Parse and validate a queue configuration as this core does (size limit, YAML,
        `parse_config`); ConfigError lists every problem. Cached by text."""
        if len(text) > limits.MAX_CONFIG_BYTES:
            raise ConfigError([f"config: {len(text)} bytes, over the limit of {limits.MAX_CONFIG_BYTES}"])
        if self._load_yaml is None:
            raise ConfigError(["config: this core was built without a YAML loader"])
        key = (self._load_yaml, text)
        found = _PARSED.get(key)
        if found is not None:
            return found
        try:
            obj = self._load_yaml(text)
        except ValueError as exc:
            raise ConfigError([f"config: not valid YAML: {exc}"]) from None
        config = parse_config(obj)
        if len(_PARSED) >= 64:
            _PARSED.clear()
        _PARSED[key] = config
        return config

    def _on_register(self, entry: Entry, msg: m.RegisterResourceManagerRequest, ctx: Outbox) -> None:
        to = entry.rm or msg.rmID
        if entry.rm and msg.rmID != entry.rm:
            ctx.register(to, f"rmID {limits.quoted(msg.rmID)} does not match the subject's rm {entry.rm!r}")
            return
        if not RM_ID.match(msg.rmID):
            ctx.register(entry.rm, f"rmID {limits.quoted(msg.rmID)} is not a NATS token: no '.', '*', '>' or whitespace")
            return
        if msg.rmID == RESERVED_RM:
            ctx.register(entry.rm, f"rmID {RESERVED_RM!r} is reserved for the core service")
            return
        if not entry.rm:
            ctx.register(entry.rm, f"rmID {limits.quoted(msg.rmID)}: a registration must come on the RM's own subject "
                         f"(yk.v1.in.{msg.rmID}.register), not on the core service's")
            return
        encoding = msg.extraConfig.get("encoding", "json")
        if encoding not in codec.ENCODINGS:
            ctx.register(to, f"extraConfig.encoding {encoding!r}: expected json or msgpack")
            return
        if reason := compat.extra_config_error(msg.extraConfig):
            ctx.register(to, reason)
            return
        own = msg.config or self.policy_groups.get(msg.policyGroup, "") or DEFAULT_CONFIG_TEXT
        text = self._operator_text(msg.policyGroup) or own
        try:
            config = self._load(text)
            if own != text:
                self._load(own)  # the RM's own configuration must be valid too: it comes back
        except ConfigError as exc:
            ctx.register(to, "invalid configuration: " + "; ".join(exc.errors))
            return
        old = self.rms.get(msg.rmID)
        if old is not None:
            self.dropped_partitions += len(old.partitions)
            old.wipe()
        self.rms[msg.rmID] = ResourceManager(msg, config, text, own, self.timers, entry.seq)
        if msg.config:
            self.policy_groups[msg.policyGroup] = msg.config
        ctx.register(to)

    def _operator_text(self, policy_group: str) -> str:
        return self.operator_configs.get(policy_group) or self.operator_configs.get("*", "")

    def _on_unregister(self, entry: Entry, msg: m.UnregisterRequest, ctx: Outbox) -> None:
        rm = self._running_rm(entry, ctx)
        if rm is None:
            return
        rm.state = RM.advance(rm.state, RMEvent.SHUTDOWN)
        self.dropped_partitions += len(rm.partitions)
        rm.wipe()
        ctx.event(rm.id, m.EventType.UNKNOWN_EVENTRECORD_TYPE, rm.id,
                  f"resource manager {rm.id} unregistered: its partitions were removed",
                  m.ChangeType.REMOVE)

    def _on_rmstate(self, entry: Entry, msg: m.RMStateChange, ctx: Outbox) -> None:
        """The service recorded a heartbeat change of an RM (spec: RM lifecycle)."""
        rm = self.rms.get(msg.rmID)
        event = {m.RMLifecycleEvent.CONNECTION_LOST: RMEvent.CONNECTION_LOST,
                 m.RMLifecycleEvent.RECONNECT: RMEvent.RECONNECT,
                 m.RMLifecycleEvent.TIMEOUT: RMEvent.TIMEOUT}[msg.event]
        if entry.rm:
            ctx.event(entry.rm, m.EventType.UNKNOWN_EVENTRECORD_TYPE, msg.rmID,
                      "rmstate entries are recorded by the core service only; not applied")
            return
        if not RM_ID.match(msg.rmID):
            ctx.event("", m.EventType.REQUEST, "rmstate",
                      f"entry {entry.seq}: rmID {limits.quoted(msg.rmID)} is not a NATS subject token; not applied")
            return
        if rm is None or not RM.allows(rm.state, event):
            state = rm.state.value if rm is not None else "not registered"
            ctx.event(msg.rmID, m.EventType.UNKNOWN_EVENTRECORD_TYPE, msg.rmID,
                      f"{msg.event.value} does not apply to resource manager {msg.rmID} ({state})")
            return
        rm.state = RM.advance(rm.state, event)
        for p in rm.partitions.values():  # a Paused RM gets nothing placed until it is back
            p.paused = rm.state is RMState.PAUSED
        note = f": {msg.reason}" if msg.reason else ""
        if rm.state is RMState.STOPPED:
            self.dropped_partitions += len(rm.partitions)
            rm.wipe()
            note += "; its nodes, applications and allocations were removed"
        ctx.event(rm.id, m.EventType.UNKNOWN_EVENTRECORD_TYPE, rm.id,
                  f"resource manager {rm.id} is {rm.state.value}{note}", m.ChangeType.SET)

    def _running_rm(self, entry: Entry, ctx: Outbox) -> ResourceManager | None:
        rm = self.rms.get(entry.rm)
        if rm is None or rm.state is RMState.STOPPED:
            ctx.event(entry.rm, m.EventType.REQUEST, entry.rm,
                      f"entry {entry.seq}: resource manager {entry.rm!r} is not registered; "
                      f"{entry.kind} message not applied")
            return None
        return rm

    def _rm_for(self, entry: Entry, rm_id: str, ctx: Outbox) -> tuple[ResourceManager | None, str]:
        """The RM an app/node/alloc message applies to, or None and why each item is rejected."""
        if rm_id and rm_id != entry.rm:
            return None, f"rmID {limits.quoted(rm_id)} does not match the subject's rm {entry.rm!r}"
        rm = self.rms.get(entry.rm)
        if rm is None or rm.state is RMState.STOPPED:
            return None, f"resource manager {entry.rm!r} is not registered"
        return rm, ""

    def _on_config(self, entry: Entry, msg: m.UpdateConfigurationRequest, ctx: Outbox) -> None:
        if not entry.rm:
            self._on_queue_file(entry, msg, ctx)
            return
        rm = self._running_rm(entry, ctx)
        if rm is None:
            return
        if msg.rmID and msg.rmID != entry.rm:
            ctx.event(rm.id, m.EventType.QUEUE, rm.id, f"configuration not applied: rmID {limits.quoted(msg.rmID)} "
                      f"does not match the subject's rm {entry.rm!r}")
            return
        if self._operator_text(rm.policy_group):
            ctx.event(rm.id, m.EventType.QUEUE, rm.id, "configuration not applied: the service's queue file "
                      f"for policy group {rm.policy_group!r} is in force")
            return
        text = msg.config or rm.own_config_text
        try:
            config = self._load(text)
            errors = self._reload_errors(rm, config)
        except ConfigError as exc:
            errors = exc.errors
        if errors:
            ctx.event(rm.id, m.EventType.QUEUE, rm.id,
                      "configuration rejected, the active one stays: " + "; ".join(errors))
            return
        self._install(rm, config, text, entry, ctx)
        rm.own_config_text = text
        if msg.config:
            self.policy_groups[rm.policy_group] = msg.config

    def _on_queue_file(self, entry: Entry, msg: m.UpdateConfigurationRequest, ctx: Outbox) -> None:
        """The service's queue file for policy group `msg.policyGroup` ("*": every RM), or
        its withdrawal (`config: ""`). Atomic: the file must validate, and the configuration
        each live RM would then have must fit its live state; otherwise nothing changes and
        an event lists why. In force, it wins over the RMs' own configurations, now and at
        their later registrations; withdrawn, each RM goes back to the `*` file or its own."""
        group = msg.policyGroup or "*"
        what = f"queue file of policy group {group!r}"
        try:
            if msg.config:
                self._load(msg.config)
        except ConfigError as exc:
            ctx.event("", m.EventType.QUEUE, group,
                      f"{what} rejected, the active configuration stays: " + "; ".join(exc.errors))
            return
        after = dict(self.operator_configs)
        if msg.config:
            after[group] = msg.config
        else:
            after.pop(group, None)
        changes: list[tuple[ResourceManager, SchedulerConfig, str]] = []
        errors: list[str] = []
        for rm in self.rms.values():
            if rm.state is RMState.STOPPED:
                continue
            text = after.get(rm.policy_group) or after.get("*") or rm.own_config_text
            if text == rm.config_text:
                continue
            try:
                config = self._load(text)  # checked above, or when the RM configured it
            except ConfigError as exc:
                errors += [f"{rm.id}: {e}" for e in exc.errors]
                continue
            errors += [f"{rm.id}: {e}" for e in self._reload_errors(rm, config)]
            changes.append((rm, config, text))
        if errors:
            ctx.event("", m.EventType.QUEUE, group,
                      f"{what} rejected, the active configuration stays: " + "; ".join(dict.fromkeys(errors)))
            return
        self.operator_configs = after
        for rm, config, text in changes:
            self._install(rm, config, text, entry, ctx)
        applied = ", ".join(rm.id for rm, _, _ in changes) or "no RM"
        ctx.event("", m.EventType.QUEUE, group,
                  f"{what} {'in force' if msg.config else 'withdrawn'}; reconfigured: {applied}", m.ChangeType.SET)

    def _reload_errors(self, rm: ResourceManager, config: SchedulerConfig) -> list[str]:
        """Why `config` cannot replace `rm`'s configuration over its live state, if it cannot."""
        errors = []
        names = {p.name for p in config.partitions}
        for name, part in rm.partitions.items():
            if name not in names and (part.apps or part.nodes):
                errors.append(f"partition {name}: still has nodes or applications")
        for pc in config.partitions:
            if pc.name in rm.partitions:
                errors += rm.partitions[pc.name].check_reload(pc)
        return errors

    def _install(self, rm: ResourceManager, config: SchedulerConfig, text: str, entry: Entry, ctx: Outbox) -> None:
        """Hot-swap `rm`'s configuration (checked by `_reload_errors` already)."""
        names = {p.name for p in config.partitions}
        for name in [n for n in rm.partitions if n not in names]:
            self.dropped_partitions += 1
            rm.partitions.pop(name).alive = False
        draining = []
        for pc in config.partitions:
            part = rm.partitions.get(pc.name)
            if part is None:
                rm.partitions[pc.name] = Partition(rm.id, pc, self.timers, entry.seq)
            else:
                draining += part.apply_config(pc, ctx.ts)
        rm.config_text = text
        rm.link_partitions()
        note = f"; draining: {', '.join(draining)}" if draining else ""
        ctx.event(rm.id, m.EventType.QUEUE, rm.id, f"configuration updated{note}", m.ChangeType.SET)

    # --- applications ----------------------------------------------------------------

    @staticmethod
    def _partition_name(name: str) -> str:
        return (name or DEFAULT_PARTITION).lower()

    @staticmethod
    def _each(items: list[Any], why: str, apply: Callable[[Any], str],
              reject: Callable[[Callable[[str], str], str], None]) -> None:
        """Apply each decoded item, or reject it: a BadItem with its decode error, the others
        with `why` (the whole message is refused) or the reason `apply` returned. `reject`
        gets a lookup of the item's ids (allocationKey, applicationID, nodeID, UUID)."""
        for item in items:
            if isinstance(item, codec.BadItem):
                reject(lambda k, ids=item.ids: ids.get(k, ""), item.error)
                continue
            reason = why or apply(item)
            if reason:
                reject(lambda k, it=item: getattr(it, k, ""), reason)

    def _on_app(self, entry: Entry, msg: codec.DecodedApplicationRequest, ctx: Outbox) -> None:
        rm, why = self._rm_for(entry, msg.rmID, ctx)
        to = entry.rm
        self._each(msg.new, why, lambda item: self._add_app(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.put(to, m.RejectedApplication(ids("applicationID"), reason)))
        self._each(msg.remove, why, lambda item: self._remove_app(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.event(to, m.EventType.APP, ids("applicationID"),
                                                 f"remove not applied: {reason}"))

    def _add_app(self, rm: ResourceManager, msg: m.AddApplicationRequest, ctx: Outbox) -> str:
        part = rm.partitions.get(self._partition_name(msg.partitionName))
        if part is None:
            return f"partition {msg.partitionName!r} does not exist"
        if msg.applicationID in part.apps:
            return f"application {msg.applicationID} already exists"
        problem = policy_problem(msg.tags)
        if problem:
            return problem
        queue, reason = part.place(msg)
        if queue is None:
            return reason
        gang = _res(msg.placeholderAsk)
        for q in queue.ancestry():
            over = first_over({}, gang, q.max) if q.max else None
            if over is not None:
                part.remove_if_empty(queue)
                return (f"placeholderAsk {over} {gang[over]} exceeds queue {q.path} max {q.max[over]}: "
                        "the gang could never run")
        part.add_app(msg, queue)
        ctx.put(rm.id, m.AcceptedApplication(msg.applicationID))
        return ""

    def _remove_app(self, rm: ResourceManager, msg: m.RemoveApplicationRequest, ctx: Outbox) -> str:
        part = rm.partitions.get(self._partition_name(msg.partitionName))
        if part is None:
            return f"partition {msg.partitionName!r} does not exist"
        app = part.apps.get(msg.applicationID)
        if app is None:
            if msg.applicationID in part.terminated:
                return ""  # already ended: removing it again is a no-op
            return f"application {msg.applicationID} does not exist"
        part.remove_app(app, ctx, m.TerminationType.STOPPED_BY_RM, "application removed by the RM")
        return ""

    # --- nodes -----------------------------------------------------------------------

    def _on_node(self, entry: Entry, msg: codec.DecodedNodeRequest, ctx: Outbox) -> None:
        rm, why = self._rm_for(entry, msg.rmID, ctx)
        self._each(msg.nodes, why, lambda item: self._node(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.put(entry.rm, m.RejectedNode(ids("nodeID"), reason)))

    def _node(self, rm: ResourceManager, info: m.NodeInfo, ctx: Outbox) -> str:
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
            capacity = None if info.schedulableResource is None else _res(info.schedulableResource)
            occupied = node.occupied if info.occupiedResource is None else _res(info.occupiedResource)
            part.update_node(node, info.attributes, capacity, occupied)
            return ""
        event = {A.DRAIN_NODE: NodeEvent.DRAIN, A.DRAIN_TO_SCHEDULABLE: NodeEvent.UNDRAIN,
                 A.DECOMISSION: NodeEvent.DECOMMISSION}[action]
        if not NODE.allows(node.state, event):
            return f"node {node.id} is {node.state.value}: {action.value} does not apply"
        if event is NodeEvent.DECOMMISSION:
            part.decommission(node, ctx)
            del rm.node_partition[node.id]
        else:
            part.node_event(node, event)
        return ""

    def _create_node(self, rm: ResourceManager, info: m.NodeInfo, ctx: Outbox) -> str:
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
                ctx.put(rm.id, m.RejectedAllocationAsk(
                    alloc.allocationKey, alloc.applicationID,
                    f"existingAllocations[{i}] of node {info.nodeID}: {reason}"))
                continue
            uuids.add(alloc.UUID)
            recovered.append((alloc, part.apps[alloc.applicationID], _res(alloc.resourcePerAlloc)))
        node = part.add_node(info, _res(info.schedulableResource), _res(info.occupiedResource))
        rm.node_partition[node.id] = part
        if info.action is m.ActionFromRM.CREATE_DRAIN:  # SI 1.6: created draining, in the same item
            part.node_event(node, NodeEvent.DRAIN)
        for alloc, app, res in recovered:
            part.recover(alloc, app, node, res, ctx)
        ctx.put(rm.id, m.AcceptedNode(info.nodeID))
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
        if not _res(alloc.resourcePerAlloc):
            return "resourcePerAlloc is empty"
        return ""

    # --- asks and allocations --------------------------------------------------------

    def _on_alloc(self, entry: Entry, msg: codec.DecodedAllocationRequest, ctx: Outbox) -> None:
        rm, why = self._rm_for(entry, msg.rmID, ctx)
        to = entry.rm
        self._each(msg.releases, why, lambda item: self._release(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.event(to, m.EventType.REQUEST, ids("UUID") or ids("applicationID"),
                                                 f"release not applied: {reason}"))
        self._each(msg.askReleases, why, lambda item: self._release_ask(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.event(to, m.EventType.REQUEST,
                                                 ids("allocationKey") or ids("applicationID"),
                                                 f"ask release not applied: {reason}"))
        self._each(msg.asks, why, lambda item: self._add_ask(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.put(to, m.RejectedAllocationAsk(
                       ids("allocationKey"), ids("applicationID"), reason)))
        # SI 1.6 requests, already asks (ykbus.si.compat); answered the 1.6 way
        self._each(msg.allocations, why, lambda item: self._add_ask(rm, item, ctx),  # type: ignore[arg-type]
                   lambda ids, reason: ctx.put(to, m.RejectedAllocation(
                       ids("allocationKey"), ids("applicationID"), reason)))

    def _app(self, rm: ResourceManager, partition: str, app_id: str) -> tuple[Partition | None, App | None, str]:
        part = rm.partitions.get(self._partition_name(partition))
        if part is None:
            return None, None, f"partition {partition!r} does not exist"
        app = part.apps.get(app_id)
        if app is None:
            ended = part.terminated.get(app_id)
            if ended is not None:
                return part, None, f"application {app_id} is {ended.state.value}"
            return part, None, f"application {app_id!r} does not exist"
        return part, app, ""

    def _add_ask(self, rm: ResourceManager, ask: m.AllocationAsk, ctx: Outbox) -> str:
        part, app, reason = self._app(rm, ask.partitionName, ask.applicationID)
        if reason:
            return reason
        res = _res(ask.resourceAsk)
        if not res:
            return "resourceAsk is empty: an ask needs at least one quantity above zero"
        if ask.tags:
            problem = role_problem(ask.tags)
            if problem:
                return problem
        if app.state is AppState.FAILING:  # type: ignore[union-attr]
            return f"application {ask.applicationID} is Failing"
        if ask.placeholder and app.gang and app.gang_timer < 0:  # type: ignore[union-attr]
            return f"the placeholder timeout of gang {ask.applicationID} has passed: it takes no more placeholders"
        part.add_ask(ask, app, res, ctx)  # type: ignore[union-attr,arg-type]
        return ""

    def _release(self, rm: ResourceManager, rel: m.AllocationRelease, ctx: Outbox) -> str:
        part, app, reason = self._app(rm, rel.partitionName, rel.applicationID)
        if reason:
            return reason
        assert part is not None and app is not None
        if rel.UUID:
            alloc = app.allocations.get(rel.UUID)
            if alloc is None:
                return f"allocation {rel.UUID} of application {app.id} does not exist"
            targets = [alloc]
        elif rel.allocationKey:
            targets = [a for a in app.allocations.values() if a.key == rel.allocationKey]
            ask = app.asks.get(rel.allocationKey)
            if not targets and ask is not None and ask.pending:
                part.release_ask(ask, ctx)  # SI 1.6: a request not placed yet is released by its key
                return ""
            if not targets:
                return f"application {app.id} has no allocation with allocationKey {rel.allocationKey!r}"
        else:
            targets = list(app.allocations.values())
        for alloc in targets:
            if alloc.replacing and rel.terminationType is m.TerminationType.PLACEHOLDER_REPLACED:
                part.confirm_replacement(alloc, ctx)  # the second step of a replacement
            else:
                part.release(alloc, m.TerminationType.STOPPED_BY_RM, rel.message or "released by the RM", ctx)
        return ""

    def _release_ask(self, rm: ResourceManager, rel: m.AllocationAskRelease, ctx: Outbox) -> str:
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
            part.release_ask(ask, ctx)
        return ""

    # --- timers ----------------------------------------------------------------------

    def _fire_timers(self, ctx: Outbox) -> None:
        for timer in self.timers.due(ctx.ts):
            if not timer.live():
                continue
            part = timer.partition
            if isinstance(timer, CompletingTimer):
                app = timer.app
                if app.timer == timer.generation and app.state is AppState.COMPLETING:
                    part.app_event(app, AppEvent.COMPLETING_TIMEOUT, ctx, "completing timeout")
            elif isinstance(timer, AppTimeoutTimer):
                app = timer.app
                if app.timer == timer.generation and app.state in (AppState.RUNNING, AppState.COMPLETING):
                    part.fail_app(app, ctx, f"execution timeout of {app.timeout_ms} ms reached")
            elif isinstance(timer, ReservationTimer):
                part.reservation_due(timer)
            elif isinstance(timer, PlaceholderTimer):
                if timer.app.gang_timer == timer.generation:
                    part.placeholder_timeout(timer.app, ctx)
            elif isinstance(timer, AllocationTimeoutTimer):
                part.release(timer.alloc, m.TerminationType.TIMEOUT,
                             f"execution timeout of {timer.timeout_ms} ms reached", ctx)
            else:
                del part.terminated[timer.app_id]
                ctx.put(part.rm, m.UpdatedApplication(
                    applicationID=timer.app_id, state=APP.advance(timer.state, AppEvent.EXPIRE).value,
                    stateTransitionTimestamp=ctx.ts, message="terminated timeout"))

    # --- read side (core/projection.py) ---------------------------------------------

    def dump(self, sections: tuple[str, ...] = SECTIONS) -> dict[str, Any]:
        """A plain, deterministic projection of the state (read API, tests). `sections`
        limits what is built per partition (counts of everything are always there)."""
        return project(self, sections)
