"""The decisions of a walk, as values: what the planner (core/scheduling.py) returns and
the one applier (`Applier.commit`) applies, in order. Nothing here reads or changes the
state; each decision names what it acts on. What a walk learned on the way that the waits
and records keep (`Learned`: the gates it judged, the queue keys it computed) comes first,
as a value too: the planner writes none of it.
"""

from __future__ import annotations

from typing import Any

from ykbus.core import why
from ykbus.core.model import Alloc, App, Ask, Node, NodeRoom, Queue, RequiredNode, Tracker, Victims, Wait
from ykbus.core.waits import Gate
from ykbus.si import messages as m


class Allocate:
    """Place one allocation of `ask` on `node`: the first node in the scorer's order with room."""

    __slots__ = ("ask", "node")

    def __init__(self, ask: Ask, node: Node) -> None:
        self.ask, self.node = ask, node

    def __repr__(self) -> str:
        return f"Allocate({self.ask.app.id}/{self.ask.key} -> {self.node.id})"


class Backfilled:
    """Place one allocation of `ask`, which has a runtime limit, on `node`, reserved for
    another ask or in a gang's reserved domain: it ends before that reservation's estimated
    start (core/backfill.py)."""

    __slots__ = ("ask", "node")

    def __init__(self, ask: Ask, node: Node) -> None:
        self.ask, self.node = ask, node

    def __repr__(self) -> str:
        return f"Backfilled({self.ask.app.id}/{self.ask.key} -> {self.node.id})"


class Park:
    """`ask` waits at `where` (a `Wait`: room on a node, a queue, a limit, its gang, ...) for `why`; the RM
    hears `state` and the reason when it changed."""

    __slots__ = ("ask", "where", "state", "why")

    def __init__(self, ask: Ask, where: Wait, state: m.SchedulingState, reason: why.Why) -> None:
        self.ask, self.where, self.state, self.why = ask, where, state, reason

    def __repr__(self) -> str:
        return f"Park({self.ask.app.id}/{self.ask.key} at {self.where.name}: {self.why.code})"


class Preempt:
    """`victims` on `node` are to be released for `ask` (under `rule`): the RM is asked to
    release them, the node is reserved for the ask, which waits for their release."""

    __slots__ = ("ask", "node", "victims", "rule")

    def __init__(self, ask: Ask, node: Node, victims: list[Alloc], rule: str) -> None:
        self.ask, self.node, self.victims, self.rule = ask, node, victims, rule

    def __repr__(self) -> str:
        return f"Preempt({self.ask.app.id}/{self.ask.key} on {self.node.id}: {', '.join(a.uuid for a in self.victims)})"


class Unpreempted:
    """A search for victims for `ask` found none (core/preemption.py), `reason` says why: it
    does not search again for the retry interval, and `then` (its `Park` or `Reserve`) is
    applied with a reason that says it cannot preempt either."""

    __slots__ = ("ask", "then", "reason")

    def __init__(self, ask: Ask, then: Park | Reserve, reason: str) -> None:
        self.ask, self.then, self.reason = ask, then, reason

    def __repr__(self) -> str:
        return f"Unpreempted({self.then!r}: {self.reason})"


class CancelReservation:
    """`node`'s reservation for `other` (an ask not pinned to it) ends, and `then` (an
    `Allocate`, `Preempt`, `Reserve` or `Unpreempted` of an ask that must run on the node) is
    applied: YuniKorn cancels a required node's other reservations for such an ask. `other`
    waits on, judged again."""

    __slots__ = ("other", "then")

    def __init__(self, other: Ask, then: Allocate | Preempt | Reserve | Unpreempted) -> None:
        self.other, self.then = other, then

    def __repr__(self) -> str:
        return f"CancelReservation({self.other.app.id}/{self.other.key}, then {self.then!r})"


class Reserve:
    """`node` is reserved for `ask`, which has waited for room the partition's reservation
    delay: the node takes no other ask until `ask` is placed (there or elsewhere). `note`: why
    it has not looked for victims yet, though it may preempt (`why.preempts_later`)."""

    __slots__ = ("ask", "node", "note")

    def __init__(self, ask: Ask, node: Node, note: str = "") -> None:
        self.ask, self.node, self.note = ask, node, note

    def __repr__(self) -> str:
        return f"Reserve({self.ask.app.id}/{self.ask.key} on {self.node.id})"


class Hold:
    """`app` may not start: `on` (a queue or a tracker) runs its `maxapplications`."""

    __slots__ = ("app", "on", "why")

    def __init__(self, app: App, on: Queue | Tracker, reason: why.Why) -> None:
        self.app, self.on, self.why = app, on, reason

    def __repr__(self) -> str:
        return f"Hold({self.app.id}: {self.why.code})"


class Defer:
    """`app` stays Accepted for now: its `stateaware` queue starts another application first."""

    __slots__ = ("app", "why")

    def __init__(self, app: App, reason: why.Why) -> None:
        self.app, self.why = app, reason

    def __repr__(self) -> str:
        return f"Defer({self.app.id}: {self.why.code})"


class GangAllocate:
    """Place every pending placeholder of `app` at once: one (ask, node) per allocation;
    `domains`: the topology domain of each of its groups placed `required` (group, level,
    the domain's values), to remember (docs/topology.md)."""

    __slots__ = ("app", "places", "domains")

    def __init__(self, app: App, places: list[tuple[Ask, Node]],
                 domains: list[tuple[str, str, tuple[str, ...]]] | None = None) -> None:
        self.app, self.places = app, places
        self.domains = domains if domains is not None else []

    def __repr__(self) -> str:
        return f"GangAllocate({self.app.id}: {', '.join(f'{a.key}->{n.id}' for a, n in self.places)})"


class HoldDomain:
    """A required topology gang waited past the reservation delay and no domain holds it:
    it reserves `values` at `level`, the domain closest to holding it (docs/topology.md):
    no other ask takes room there until it is placed."""

    __slots__ = ("app", "level", "values")

    def __init__(self, app: App, level: str, values: tuple[str, ...]) -> None:
        self.app, self.level, self.values = app, level, values

    def __repr__(self) -> str:
        return f"HoldDomain({self.app.id}: {self.level} {'/'.join(self.values)})"


class Replace:
    """Real `ask` takes `placeholder`'s place: the RM is asked to release the placeholder
    (`PLACEHOLDER_REPLACED`); on its confirmation the real allocation is made on that node."""

    __slots__ = ("ask", "placeholder")

    def __init__(self, ask: Ask, placeholder: Alloc) -> None:
        self.ask, self.placeholder = ask, placeholder

    def __repr__(self) -> str:
        return f"Replace({self.ask.app.id}/{self.ask.key} <- {self.placeholder.uuid})"


class CancelGroup:
    """Real `ask` is larger than every placeholder of its task group: they are all released
    (`TIMEOUT`, naming the mismatch), and the ask is then scheduled as an ordinary one."""

    __slots__ = ("ask", "placeholders", "message")

    def __init__(self, ask: Ask, placeholders: list[Alloc], message: str) -> None:
        self.ask, self.placeholders, self.message = ask, placeholders, message

    def __repr__(self) -> str:
        return f"CancelGroup({self.ask.app.id}/{self.ask.key}: {len(self.placeholders)} placeholders)"


class Learned:
    """What a walk learned that the waits and the records keep, applied before its
    decisions (as it was learned before them, from the state they start from): `closed`, the
    gates it judged (core/waits.py `RoomWaits.close`: the first ask behind each found no
    node, or none to reserve, so the others would park again as they are; the walk showed
    their asks no more); `keys`, the queue keys it computed that were not memoized (each
    queue's `sort_key`, until what it depends on changes). At most one per plan, first."""

    __slots__ = ("closed", "keys")

    def __init__(self, closed: list[Gate], keys: list[tuple[Queue, tuple[Any, ...]]]) -> None:
        self.closed, self.keys = closed, keys

    def __repr__(self) -> str:
        return (f"Learned(closed {', '.join(repr(g) for g in self.closed)}; "
                f"keys of {', '.join(q.path for q, _ in self.keys)})")


Decision = (Allocate | Backfilled | Park | Hold | Defer | Reserve | GangAllocate | Replace | CancelGroup | Preempt | Unpreempted
            | Learned | HoldDomain | CancelReservation)
Plan = list[Decision]


def ends_walk(decision: Decision) -> bool:
    """Whether the walk ends after `decision`, and the next starts from root: one that changes
    what the walk reads (an allocation, a reservation, a gang placed, placeholders cancelled,
    a preemption: usage, or the placeholders a real ask would take); a reservation after a
    search for victims; or a reserved ask parked where it gives up its node (a queue's max, a
    limit, its gang): the node takes other asks again, which the rest of the walk must see.
    Parks, most of a walk's decisions, are told first (compiled, an `isinstance` of a class
    of the core is one comparison of types)."""
    if isinstance(decision, Unpreempted):  # as what it did instead
        decision = decision.then
    if isinstance(decision, Park):
        return bool(decision.ask.reserved) and not isinstance(decision.where, (NodeRoom, RequiredNode, Victims))
    return isinstance(decision, (Allocate, Backfilled, Reserve, GangAllocate, CancelGroup, Preempt, HoldDomain,
                                 CancelReservation))  # (a reservation ends, and its node is taken)
