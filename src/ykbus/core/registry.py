"""The resource managers the core knows, and the configuration each runs: registration,
unregistration and RM state, the queue configuration an RM sends, and the operator's
queue files per policy group (shared by every RM of the group, and taking precedence over
what an RM sends). Reloads are checked against the live state before they are installed.

`RMRegistry` owns the RMs (`rms`), the configuration texts (`policy_groups`,
`operator_configs`), the order of every RM's deadlines (`timer_sequence`) and the count of
partitions dropped. Others read these attributes; only this module writes them: the core
through `register`, `unregister`, `rmstate`, `configure` (an entry's request), `take_out`
and `take_in` (an RM moving between core shards), the snapshot through `restore`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ykbus import limits
from ykbus.core.changes import check_reload
from ykbus.core.config import (
    DEFAULT_CONFIG_TEXT,
    ConfigError,
    SchedulerConfig,
    parse_config,
)
from ykbus.core.deadlines import Sequence, Timers
from ykbus.core.entries import Entry
from ykbus.core.events import CountsCarried, EndedKept, Noted, Registered
from ykbus.core.fold import add_counts
from ykbus.core.lifecycle import (
    RM,
    RMEvent,
    RMState,
)
from ykbus.core.partition import Partition
from ykbus.core.step import Step
from ykbus.core.timers import Timer
from ykbus.si import codec, compat
from ykbus.si import messages as m

RM_ID = re.compile(r"^[^.*>\s\x00-\x1f\x7f-\x9f]+$")  # a NATS subject token a terminal shows as it is
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def rm_id_problem(rm_id: str) -> str:
    """Why `rm_id` cannot be an RM's id (it is a NATS subject token), "" when it can."""
    if RM_ID.match(rm_id):
        return ""
    if CONTROL.search(rm_id):  # (a terminal showing the id would act on it: `ykbus up`'s verdicts name RMs)
        return f"rmID {limits.quoted(rm_id)} holds a control character"
    return f"rmID {limits.quoted(rm_id)} is not a NATS token: no '.', '*', '>' or whitespace"


RESERVED_RM = "_core"  # the subject token of entries the service itself appends (ticks, rmstate)
NODE_PARTITION_ATTR = "si/node-partition"

YamlLoader = Callable[[str], Any]


# Parsed configurations by (loader, text): RMs re-register and files are re-sent with the
# same text, and parsing YAML costs milliseconds. The configurations are frozen structs.
_PARSED: dict[tuple[Any, str], SchedulerConfig] = {}


class ResourceManager:
    def __init__(self, rm_id: str, version: str, policy_group: str, build_info: dict[str, str],
                 extra_config: dict[str, str], config: SchedulerConfig, config_text: str, own_config_text: str,
                 sequence: Sequence, seq: int) -> None:
        self.id = rm_id
        self.state = RM.advance(RMState.INIT, RMEvent.REGISTER)
        self.version = version
        self.policy_group = policy_group
        self.build_info = dict(build_info)
        self.extra_config = dict(extra_config)
        self.encoding = extra_config.get("encoding", "json")
        self.config_text = config_text  # the configuration in force
        self.own_config_text = own_config_text  # what the RM itself configured (in force without a queue file)
        self.timers: Timers[Timer] = Timers(sequence)  # its partitions' deadlines: they go with it
        self.partitions = {p.name: Partition(self.id, p, self.timers, seq) for p in config.partitions}
        self.node_partition: dict[str, Partition] = {}
        # the decisions counted by its partitions that are gone (it unregistered, was Stopped or
        # registered again; a reload removed one), by partition name: YuniKorn's counters never
        # go down, so a partition of that name made again starts from them (`take_counts`)
        self.retired_counts: dict[str, dict[tuple[str, str, str], int]] = {}
        self.link_partitions()

    def uuid_live(self, uuid: str) -> bool:
        """Whether an allocation of this RM has this UUID, in any of its partitions."""
        return any(uuid in p.allocations for p in self.partitions.values())

    def link_partitions(self) -> None:
        """Tell each partition how to see whether a UUID is live in this RM (it never issues
        one that is): its own allocations when it is the RM's only partition (the fast path),
        else all of them. Called whenever the RM's partitions change."""
        for p in self.partitions.values():
            p.records.link_uuids(p.allocations.__contains__ if len(self.partitions) == 1 else self.uuid_live)

    def keep_ended(self, before: dict[str, Partition], ctx: Step) -> None:
        """After a registration again: the applications that had ended in `before` (the
        wiped partitions) are remembered by the partitions of the same name, counted, and
        forgotten at the deadline they had. A new registration starts the RM's live state
        afresh (its recovery reports it again), not the history of what ended: `explain`
        answers for an ended application for limits.TERMINATED_TIMEOUT_NS, restart or not."""
        for name, old in before.items():
            p = self.partitions.get(name)
            if p is None:
                continue
            for app_id, ended in old.terminated.items():
                p.records.remember_ended(app_id, ended)
                ctx.emit(p.records, EndedKept(app_id, ended, ended.ts + limits.TERMINATED_TIMEOUT_NS))
            for app_id, ended in old.rejected.items():  # at most limits.REJECTED_KEPT, as they were
                p.records.remember_ended(app_id, ended)
                ctx.emit(p.records, EndedKept(app_id, ended, 0))

    def place_node(self, node_id: str, part: Partition) -> None:
        """Node `node_id` is in partition `part` (the intake, once the node is added)."""
        self.node_partition[node_id] = part

    def forget_node(self, node_id: str) -> None:
        """Node `node_id` left (decommissioned)."""
        del self.node_partition[node_id]

    def wipe(self) -> None:
        for p in self.partitions.values():
            self.retire_counts(p)
            p.records.retire()
        self.partitions = {}
        self.node_partition = {}

    def retire_counts(self, p: Partition) -> None:
        """Keep what partition `p`, about to go, counted."""
        add_counts(self.retired_counts.setdefault(p.name, {}), p.records.summary.counts)

    def take_counts(self, retired: dict[str, dict[tuple[str, str, str], int]], ctx: Step) -> None:
        """The counts of partitions gone (this RM's, or its registration before): a partition
        of the same name goes on from them (`CountsCarried`, folded); the others stay kept."""
        for name, counts in retired.items():
            p = self.partitions.get(name)
            if p is not None:
                ctx.emit(p.records, CountsCarried(dict(counts)))
            else:
                add_counts(self.retired_counts.setdefault(name, {}), counts)


class RMRegistry:
    def __init__(self, load_yaml: YamlLoader | None = None, queues_override: SchedulerConfig | None = None,
                 override_group: str | None = None) -> None:
        """`load_yaml(text)` turns configuration text into plain objects (ValueError if it
        cannot). `queues_override` replaces the configuration of every registration and update
        (replay's what-if), or only those of the RMs of policy group `override_group` if given."""
        self._load_yaml = load_yaml
        self._override = queues_override
        self._override_group = override_group
        self.rms: dict[str, ResourceManager] = {}
        # The operator's queue files (entries from the service, rm ""): policy group -> text,
        # "*" for every RM. They take precedence over what RMs send.
        self.operator_configs: dict[str, str] = {}
        self.policy_groups: dict[str, str] = {}  # policy group -> the configuration its RMs last sent
        self.timer_sequence = Sequence()  # the insertion order of every RM's deadlines
        # Partitions dropped so far (their queue trees hold reference cycles that only the
        # cyclic GC frees); the service collects once when this changes. Not in snapshots.
        self.dropped_partitions = 0

    def restore(self, policy_groups: dict[str, str], operator_configs: dict[str, str],
                rms: list[ResourceManager], timers_n: int) -> None:
        """The state a snapshot stored (core/snapshot.py), RMs built on `timer_sequence`."""
        self.policy_groups = dict(policy_groups)
        self.operator_configs = dict(operator_configs)
        for rm in rms:
            self.rms[rm.id] = rm
        self.timer_sequence.reach(timers_n)

    def take_out(self, rm_id: str) -> tuple[ResourceManager | None, str]:
        """RM `rm_id`'s unit leaving this core (None if it has none here) and the configuration
        text its policy group has, which goes with it (core/shards.py)."""
        unit = self.rms.pop(rm_id, None)
        return unit, self.policy_groups.get(unit.policy_group, "") if unit is not None else ""

    def take_in(self, rm_id: str, unit: ResourceManager, policy_group_text: str) -> None:
        """RM `rm_id`'s unit arriving from another core shard: its deadlines keep their order,
        new ones take ours, after them."""
        unit.timers.adopt(self.timer_sequence)
        self.rms[rm_id] = unit
        if policy_group_text:
            self.policy_groups.setdefault(unit.policy_group, policy_group_text)

    def _load(self, text: str, policy_group: str | None = None) -> SchedulerConfig:
        """`text` as a configuration of `policy_group` (None: of no one group, a `*` queue
        file's): what-if's override instead, for every group or for the one it is given for."""
        if self._override is not None and self._override_group in (None, policy_group):
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

    def register(self, entry: Entry, msg: m.RegisterResourceManagerRequest, ctx: Step) -> None:
        """A registration: a new RM, or one registered again, whose state starts afresh."""
        to = entry.rm or msg.rmID
        if entry.rm and msg.rmID != entry.rm:
            ctx.emit(None, Registered(to, f"rmID {limits.quoted(msg.rmID)} does not match the subject's rm {entry.rm!r}"))
            return
        if problem := rm_id_problem(msg.rmID):
            ctx.emit(None, Registered(entry.rm, problem))
            return
        if msg.rmID == RESERVED_RM:
            ctx.emit(None, Registered(entry.rm, f"rmID {RESERVED_RM!r} is reserved for the core service"))
            return
        if not entry.rm:
            ctx.emit(None, Registered(entry.rm, f"rmID {limits.quoted(msg.rmID)}: a registration must come on the RM's own subject "
                         f"(yk.v1.in.{msg.rmID}.register), not on the core service's"))
            return
        encoding = msg.extraConfig.get("encoding", "json")
        if encoding not in codec.ENCODINGS:
            ctx.emit(None, Registered(to, f"extraConfig.encoding {encoding!r}: expected json or msgpack"))
            return
        if reason := compat.extra_config_error(msg.extraConfig):
            ctx.emit(None, Registered(to, reason))
            return
        own = msg.config or self.policy_groups.get(msg.policyGroup, "") or DEFAULT_CONFIG_TEXT
        text = self._operator_text(msg.policyGroup) or own
        try:
            config = self._load(text, msg.policyGroup)
        except ConfigError as exc:
            ctx.emit(None, Registered(to, "invalid configuration: " + "; ".join(exc.errors)))
            return
        own_errors: list[str] = []
        if own != text:  # a queue file in force: the RM's own configuration comes back with its withdrawal
            try:
                self._load(own, msg.policyGroup)
            except ConfigError as exc:  # registered under the file; its own is the last valid one of its group
                own_errors = exc.errors
                own = self.policy_groups.get(msg.policyGroup, "") or DEFAULT_CONFIG_TEXT
        old = self.rms.get(msg.rmID)
        before = dict(old.partitions) if old is not None else {}
        if old is not None:
            self.dropped_partitions += len(old.partitions)
            old.wipe()
        rm = ResourceManager(msg.rmID, msg.version, msg.policyGroup, msg.buildInfo, msg.extraConfig,
                             config, text, own, self.timer_sequence, entry.seq)
        rm.keep_ended(before, ctx)
        if old is not None:
            rm.take_counts(old.retired_counts, ctx)
        self.rms[msg.rmID] = rm
        if msg.config and not own_errors:
            self.policy_groups[msg.policyGroup] = msg.config
        ctx.emit(None, Registered(to))
        if own_errors:
            ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id, "its own configuration is invalid, the service's "
                      f"queue file for policy group {msg.policyGroup!r} applies: " + "; ".join(own_errors)))

    def _operator_text(self, policy_group: str) -> str:
        return self.operator_configs.get(policy_group) or self.operator_configs.get("*", "")

    def unregister(self, entry: Entry, msg: m.UnregisterRequest, ctx: Step) -> None:
        """An RM leaves: its partitions are removed."""
        rm = self._running_rm(entry, ctx)
        if rm is None:
            return
        rm.state = RM.advance(rm.state, RMEvent.SHUTDOWN)
        self.dropped_partitions += len(rm.partitions)
        rm.wipe()
        ctx.emit(None, Noted(rm.id, m.EventType.UNKNOWN_EVENTRECORD_TYPE, rm.id,
                  f"resource manager {rm.id} unregistered: its partitions were removed",
                  m.ChangeType.REMOVE))

    def rmstate(self, entry: Entry, msg: m.RMStateChange, ctx: Step) -> None:
        """The service recorded a heartbeat change of an RM (spec: RM lifecycle)."""
        rm = self.rms.get(msg.rmID)
        event = {m.RMLifecycleEvent.CONNECTION_LOST: RMEvent.CONNECTION_LOST,
                 m.RMLifecycleEvent.RECONNECT: RMEvent.RECONNECT,
                 m.RMLifecycleEvent.TIMEOUT: RMEvent.TIMEOUT}[msg.event]
        if not RM_ID.match(msg.rmID):
            ctx.emit(None, Noted("", m.EventType.REQUEST, "rmstate",
                      f"entry {entry.seq}: rmID {limits.quoted(msg.rmID)} is not a NATS subject token; not applied"))
            return
        if rm is None or not RM.allows(rm.state, event):
            state = rm.state.value if rm is not None else "not registered"
            ctx.emit(None, Noted(msg.rmID, m.EventType.UNKNOWN_EVENTRECORD_TYPE, msg.rmID,
                      f"{msg.event.value} does not apply to resource manager {msg.rmID} ({state})"))
            return
        rm.state = RM.advance(rm.state, event)
        for p in rm.partitions.values():  # a Paused RM gets nothing placed until it is back
            p.records.pause(rm.state is RMState.PAUSED)
        note = f": {msg.reason}" if msg.reason else ""
        if rm.state is RMState.STOPPED:
            self.dropped_partitions += len(rm.partitions)
            rm.wipe()
            note += "; its nodes, applications and allocations were removed"
        ctx.emit(None, Noted(rm.id, m.EventType.UNKNOWN_EVENTRECORD_TYPE, rm.id,
                  f"resource manager {rm.id} is {rm.state.value}{note}", m.ChangeType.SET))

    def _running_rm(self, entry: Entry, ctx: Step) -> ResourceManager | None:
        rm = self.rms.get(entry.rm)
        if rm is None or rm.state is RMState.STOPPED:
            ctx.emit(None, Noted(entry.rm, m.EventType.REQUEST, entry.rm,
                      f"entry {entry.seq}: resource manager {entry.rm!r} is not registered; "
                      f"{entry.kind} message not applied"))
            return None
        return rm

    def rm_for(self, entry: Entry, rm_id: str) -> tuple[ResourceManager | None, str]:
        """The RM an app/node/alloc message applies to, or None and why each item is refused
        (core/intake.py)."""
        if rm_id and rm_id != entry.rm:
            return None, f"rmID {limits.quoted(rm_id)} does not match the subject's rm {entry.rm!r}"
        rm = self.rms.get(entry.rm)
        if rm is None or rm.state is RMState.STOPPED:
            return None, f"resource manager {entry.rm!r} is not registered"
        return rm, ""

    def configure(self, entry: Entry, msg: m.UpdateConfigurationRequest, ctx: Step) -> None:
        """A `config` entry: an RM's own queue configuration, or (rm "") the operator's queue file."""
        if not entry.rm:
            self._on_queue_file(entry, msg, ctx)
            return
        rm = self._running_rm(entry, ctx)
        if rm is None:
            return
        if msg.rmID and msg.rmID != entry.rm:
            ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id, f"configuration not applied: rmID {limits.quoted(msg.rmID)} "
                      f"does not match the subject's rm {entry.rm!r}"))
            return
        if self._operator_text(rm.policy_group):  # kept for when the file is withdrawn, if it is valid
            try:
                if msg.config:
                    self._load(msg.config, rm.policy_group)
            except ConfigError as exc:
                ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id,
                          "configuration rejected: " + "; ".join(exc.errors)))
                return
            if msg.config:
                rm.own_config_text = self.policy_groups[rm.policy_group] = msg.config
            kept = "kept, not applied" if msg.config else "not applied"
            ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id, f"configuration {kept}: the service's queue file for "
                      f"policy group {rm.policy_group!r} is in force" + (" (it applies if the file is withdrawn)"
                                                                          if msg.config else "")))
            return
        text = msg.config or rm.own_config_text
        try:
            config = self._load(text, rm.policy_group)
            errors = self._reload_errors(rm, config)
        except ConfigError as exc:
            errors = exc.errors
        if errors:
            ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id,
                      "configuration rejected, the active one stays: " + "; ".join(errors)))
            return
        self._install(rm, config, text, entry, ctx)
        rm.own_config_text = text
        if msg.config:
            self.policy_groups[rm.policy_group] = msg.config

    def _on_queue_file(self, entry: Entry, msg: m.UpdateConfigurationRequest, ctx: Step) -> None:
        """The service's queue file for policy group `msg.policyGroup` ("*": every RM), or
        its withdrawal (`config: ""`). Atomic: the file must validate, and the configuration
        each live RM would then have must fit its live state; otherwise nothing changes and
        an event lists why. In force, it wins over the RMs' own configurations, now and at
        their later registrations; withdrawn, each RM goes back to the `*` file or its own."""
        group = msg.policyGroup or "*"
        what = f"queue file of policy group {group!r}"
        try:
            if msg.config:
                self._load(msg.config, None if group == "*" else group)
        except ConfigError as exc:
            ctx.emit(None, Noted("", m.EventType.QUEUE, group,
                      f"{what} rejected, the active configuration stays: " + "; ".join(exc.errors)))
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
                config = self._load(text, rm.policy_group)  # checked above, or when the RM configured it
            except ConfigError as exc:
                errors += [f"{rm.id}: {e}" for e in exc.errors]
                continue
            errors += [f"{rm.id}: {e}" for e in self._reload_errors(rm, config)]
            changes.append((rm, config, text))
        if errors:
            ctx.emit(None, Noted("", m.EventType.QUEUE, group,
                      f"{what} rejected, the active configuration stays: " + "; ".join(dict.fromkeys(errors))))
            return
        self.operator_configs = after
        for rm, config, text in changes:
            self._install(rm, config, text, entry, ctx)
        applied = ", ".join(rm.id for rm, _, _ in changes) or "no RM yet (an RM of the group takes it as it registers)"
        ctx.emit(None, Noted("", m.EventType.QUEUE, group,
                  f"{what} {'in force' if msg.config else 'withdrawn'}; reconfigured: {applied}", m.ChangeType.SET))

    def _reload_errors(self, rm: ResourceManager, config: SchedulerConfig) -> list[str]:
        """Why `config` cannot replace `rm`'s configuration over its live state, if it cannot."""
        errors = []
        names = {p.name for p in config.partitions}
        for name, part in rm.partitions.items():
            if name not in names and (part.apps or part.nodes):
                errors.append(f"partition {name}: still has nodes or applications")
        for pc in config.partitions:
            if pc.name in rm.partitions:
                errors += check_reload(rm.partitions[pc.name].records, pc)
        return errors

    def _install(self, rm: ResourceManager, config: SchedulerConfig, text: str, entry: Entry, ctx: Step) -> None:
        """Hot-swap `rm`'s configuration (checked by `_reload_errors` already)."""
        names = {p.name for p in config.partitions}
        for name in [n for n in rm.partitions if n not in names]:
            self.dropped_partitions += 1
            gone = rm.partitions.pop(name)
            rm.retire_counts(gone)
            gone.records.retire()
        draining = []
        for pc in config.partitions:
            part = rm.partitions.get(pc.name)
            if part is None:
                rm.partitions[pc.name] = Partition(rm.id, pc, rm.timers, entry.seq)
                if pc.name in rm.retired_counts:
                    rm.take_counts({pc.name: rm.retired_counts.pop(pc.name)}, ctx)
            else:
                draining += part.changes.apply_config(pc, ctx)
                part.applier.quota_reloaded(ctx)  # a max lowered below usage: preempted down to it after a delay
        rm.config_text = text
        rm.link_partitions()
        note = f"; draining: {', '.join(draining)}" if draining else ""
        ctx.emit(None, Noted(rm.id, m.EventType.QUEUE, rm.id, f"configuration updated{note}", m.ChangeType.SET))
