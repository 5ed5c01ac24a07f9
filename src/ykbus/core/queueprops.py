"""The queue properties ykbus reads by name and their values (core/config.py parses and
checks them; core/model.py `Queue.set_policies` turns them into a queue's policies):
YuniKorn's (`application.sort.policy`, `priority.*`, `preemption.*`) and ykbus's own
(`ykbus.io/...`: docs/gang.md, docs/time.md). The durations are core/runtimeprops.py's."""

from __future__ import annotations

import enum


class _Policy(enum.StrEnum):
    @classmethod
    def from_str(cls, value: str) -> _Policy:
        """The member named `value`, case-insensitive; ValueError naming the choices."""
        for member in cls:
            if member.value == value.strip().lower():
                return member
        choices = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown value {value!r}: expected one of {choices}")


class NodeSortPolicy(_Policy):
    FAIR = "fair"
    BINPACKING = "binpacking"


class AppSortPolicy(_Policy):
    FIFO = "fifo"
    FAIR = "fair"
    STATEAWARE = "stateaware"


class PriorityPolicy(_Policy):
    DEFAULT = "default"
    FENCE = "fence"


class PreemptionPolicy(_Policy):
    """`preemption.policy` of a queue (docs/preemption.md): `fence`: asks in or below it take
    only from inside it; `disabled`: its allocations (and those below it) are never victims."""

    DEFAULT = "default"
    FENCE = "fence"
    DISABLED = "disabled"


class WithinQueue(_Policy):
    """`preemption.withinqueue` of a leaf: `lowerpriority` lets its asks preempt strictly
    lower-priority allocations of the same leaf (docs/preemption.md)."""

    DISABLED = "disabled"
    LOWER_PRIORITY = "lowerpriority"


class GangReserve(_Policy):  # `ykbus.io/gang.reserve`: a waiting gang reserves nodes (docs/gang.md)
    TRUE = "true"
    FALSE = "false"


class SortPriority(_Policy):
    ENABLED = "enabled"
    DISABLED = "disabled"


PROP_SORT_POLICY = "application.sort.policy"
PROP_SORT_PRIORITY = "application.sort.priority"
PROP_PRIORITY_POLICY = "priority.policy"
PROP_PRIORITY_OFFSET = "priority.offset"
PROP_PREEMPTION_POLICY = "preemption.policy"
PROP_PREEMPTION_DELAY = "preemption.delay"  # how long an ask waits before it may preempt (default 30s)
PROP_WITHIN_QUEUE = "preemption.withinqueue"
PROP_QUOTA_DELAY = "quota.preemption.delay"  # YuniKorn 1.8: after a reload lowers max below usage (0: never)
PROP_GANG_RESERVE = "ykbus.io/gang.reserve"
PREEMPTION_DELAY_MS = 30_000
_ENUM_PROPERTIES: dict[str, type[_Policy]] = {
    PROP_SORT_POLICY: AppSortPolicy,
    PROP_SORT_PRIORITY: SortPriority,
    PROP_PRIORITY_POLICY: PriorityPolicy,
    PROP_PREEMPTION_POLICY: PreemptionPolicy,
    PROP_WITHIN_QUEUE: WithinQueue,
    PROP_GANG_RESERVE: GangReserve,
}
