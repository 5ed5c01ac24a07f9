"""Lifecycles of the scheduler's objects: enums plus one transition table each.

Every state change in the core goes through `Lifecycle.advance()`, which looks the move up
in the table and raises `IllegalTransition` for a move the table does not list. The tables
are the single source of truth: `docs/lifecycles.md` is generated from them
(`YKBUS_PURE_PYTHON=1 python -m ykbus.core.lifecycle`), and the tests walk every legal and illegal pair.
"""

from __future__ import annotations

import enum
from typing import Generic, TypeVar

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)


class Event(enum.Enum):
    """What moves a lifecycle. Enum members hash by name through a Python-level `__hash__`,
    and every `advance` hashes one (with a state: a StrEnum, hashed in C): events hash by
    identity instead, in C. A member is one object for the process, so a table keyed by
    events finds the same entries; no decision iterates a set of them."""

    __hash__ = object.__hash__


class IllegalTransition(Exception):
    """A move the transition table does not allow: a bug in the caller, never bad input."""


class Lifecycle(Generic[S, E]):
    def __init__(self, name: str, table: dict[tuple[S, E], S]) -> None:
        self.name = name
        self.table = table

    def advance(self, state: S, event: E) -> S:
        try:
            return self.table[(state, event)]
        except KeyError:
            raise IllegalTransition(f"{self.name}: {event.name} is not allowed in {state.value}") from None

    def allows(self, state: S, event: E) -> bool:
        return (state, event) in self.table

    def mermaid(self) -> str:
        lines = ["stateDiagram-v2"]
        for (src, event), dst in self.table.items():
            lines.append(f"    {src.value} --> {dst.value}: {event.name}")
        return "\n".join(lines)


class AppState(enum.StrEnum):
    NEW = "New"
    ACCEPTED = "Accepted"
    RESUMING = "Resuming"  # a Soft gang whose placeholders timed out: it goes on as an ordinary application
    RUNNING = "Running"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    REJECTED = "Rejected"
    FAILING = "Failing"
    FAILED = "Failed"
    EXPIRED = "Expired"


class AppEvent(Event):
    RUN = "an ask was added"
    ALLOCATE = "the first allocation was made or recovered"
    COMPLETE = "no asks and no allocations are left"
    COMPLETING_TIMEOUT = "the completing timer fired"
    REJECT = "the application was rejected"
    FAIL = "the execution timeout fired (or a Hard gang's placeholder timeout)"
    RESUME = "a Soft gang's placeholder timeout fired before it ran"
    FAILED = "every allocation of a failing application was released"
    REMOVE = "the RM removed the application"
    EXPIRE = "the terminated timer fired"


_A, _E = AppState, AppEvent
APP = Lifecycle[AppState, AppEvent]("application", {
    (_A.NEW, _E.RUN): _A.ACCEPTED,
    (_A.NEW, _E.ALLOCATE): _A.RUNNING,
    (_A.NEW, _E.REJECT): _A.REJECTED,
    (_A.NEW, _E.REMOVE): _A.COMPLETED,
    (_A.NEW, _E.FAIL): _A.FAILING,
    (_A.ACCEPTED, _E.ALLOCATE): _A.RUNNING,
    (_A.ACCEPTED, _E.COMPLETE): _A.COMPLETING,
    (_A.ACCEPTED, _E.REMOVE): _A.COMPLETED,
    (_A.ACCEPTED, _E.FAIL): _A.FAILING,
    (_A.ACCEPTED, _E.RESUME): _A.RESUMING,
    (_A.RESUMING, _E.ALLOCATE): _A.RUNNING,
    (_A.RESUMING, _E.COMPLETE): _A.COMPLETING,
    (_A.RESUMING, _E.REMOVE): _A.COMPLETED,
    (_A.RESUMING, _E.FAIL): _A.FAILING,
    (_A.RUNNING, _E.COMPLETE): _A.COMPLETING,
    (_A.RUNNING, _E.REMOVE): _A.COMPLETED,
    (_A.RUNNING, _E.FAIL): _A.FAILING,
    (_A.COMPLETING, _E.RUN): _A.RUNNING,
    (_A.COMPLETING, _E.ALLOCATE): _A.RUNNING,
    (_A.COMPLETING, _E.COMPLETING_TIMEOUT): _A.COMPLETED,
    (_A.COMPLETING, _E.REMOVE): _A.COMPLETED,
    (_A.COMPLETING, _E.FAIL): _A.FAILING,
    (_A.FAILING, _E.FAILED): _A.FAILED,
    (_A.FAILING, _E.REMOVE): _A.FAILED,
    (_A.COMPLETED, _E.EXPIRE): _A.EXPIRED,
    (_A.FAILED, _E.EXPIRE): _A.EXPIRED,
    (_A.REJECTED, _E.EXPIRE): _A.EXPIRED,
})

# States in which an application may receive new allocations.
SCHEDULABLE_APP_STATES = frozenset({AppState.ACCEPTED, AppState.RESUMING, AppState.RUNNING, AppState.COMPLETING})
TERMINAL_APP_STATES = frozenset({AppState.COMPLETED, AppState.FAILED, AppState.REJECTED, AppState.EXPIRED})


class AskState(enum.StrEnum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"
    REJECTED = "Rejected"
    RELEASED = "Released"


class AskEvent(Event):
    ALLOCATE_LAST = "the last of maxAllocations was placed"
    REJECT = "the ask was rejected by the scheduler"
    RELEASE = "the RM released the ask, or its application went away"
    REPLACE = "the RM sent the ask again (same allocationKey) with allocations still wanted"


ASK = Lifecycle[AskState, AskEvent]("ask", {
    (AskState.PENDING, AskEvent.ALLOCATE_LAST): AskState.ALLOCATED,
    (AskState.PENDING, AskEvent.REJECT): AskState.REJECTED,
    (AskState.PENDING, AskEvent.RELEASE): AskState.RELEASED,
    (AskState.PENDING, AskEvent.REPLACE): AskState.PENDING,
    (AskState.ALLOCATED, AskEvent.RELEASE): AskState.RELEASED,
    (AskState.ALLOCATED, AskEvent.REPLACE): AskState.PENDING,
    (AskState.RELEASED, AskEvent.REPLACE): AskState.PENDING,
})


class AskPlace(enum.StrEnum):
    """Where a pending ask is: the registries that hold it (core/indexes.py `AskPlaces`, whose
    `move` is the one change of `Ask.place`), and whether a node is reserved for it. A
    reserved ask waits where an unreserved one would (for room, behind its shape's gate or
    with its gang's; at its required node; for its victims), or is judged again; it is never
    waiting to reserve another."""

    NOT_PENDING = "NotPending"  # nothing of it is pending (not asked yet, placed in full, or dropped): nowhere
    ACTIVE = "Active"  # in its application's active list
    PARKED = "Parked"  # at a `Wait` in `WaitPlaces` (a max, a limit, its gang, its leader, its placeholder, ...)
    PARKED_TO_RESERVE = "ParkedToReserve"  # a gang's ask waiting for room past its reservation delay: and in `reserve_waiters`
    POOLED = "Pooled"  # waiting for room behind its shape's room gate (`RoomWaits`)
    POOLED_TO_RESERVE = "PooledToReserve"  # past its reservation delay: behind the shape's reservation gate too
    RESERVED_ACTIVE = "ReservedActive"  # ACTIVE, holding a node
    RESERVED_PARKED = "ReservedParked"  # PARKED, holding a node (its required node, its victims' node, a gang's room)
    RESERVED_POOLED = "ReservedPooled"  # POOLED, holding a node


class AskPlaceEvent(Event):
    PEND = "its pending allocations are counted (asked, or asked again): active"
    PARK = "it waits at a place of WaitPlaces (core/waits.py): anything but room, or room with its gang"
    PARK_TO_RESERVE = "a gang's ask waits for room past its reservation delay, with no node to reserve"
    POOL = "it waits for room behind its shape's gate (again: nothing moves)"
    POOL_TO_RESERVE = "it waits for room past its reservation delay, with no node to reserve: behind the reservation gate too"
    WAKE = "it is judged again, or is about to be placed: active"
    RESERVE = "a node is reserved for it (to wait for room there, or for its victims to go)"
    UNRESERVE = "its reservation is dropped: placed, parked where it gives it up, or the node drained, shrank or went"
    PLACE_LAST = "its last pending allocation was placed"
    DROP = "the RM released it or sent it again, or its application went away"


_P, _M = AskPlace, AskPlaceEvent
ASK_PLACE = Lifecycle[AskPlace, AskPlaceEvent]("ask place", {
    (_P.NOT_PENDING, _M.PEND): _P.ACTIVE,
    (_P.ACTIVE, _M.PARK): _P.PARKED,
    (_P.ACTIVE, _M.PARK_TO_RESERVE): _P.PARKED_TO_RESERVE,
    (_P.ACTIVE, _M.POOL): _P.POOLED,
    (_P.ACTIVE, _M.POOL_TO_RESERVE): _P.POOLED_TO_RESERVE,
    (_P.ACTIVE, _M.RESERVE): _P.RESERVED_ACTIVE,
    (_P.ACTIVE, _M.PLACE_LAST): _P.NOT_PENDING,
    (_P.ACTIVE, _M.DROP): _P.NOT_PENDING,
    (_P.PARKED, _M.WAKE): _P.ACTIVE,
    (_P.PARKED, _M.DROP): _P.NOT_PENDING,
    (_P.PARKED_TO_RESERVE, _M.WAKE): _P.ACTIVE,
    (_P.PARKED_TO_RESERVE, _M.DROP): _P.NOT_PENDING,
    (_P.POOLED, _M.PARK): _P.PARKED,
    (_P.POOLED, _M.POOL): _P.POOLED,
    (_P.POOLED, _M.POOL_TO_RESERVE): _P.POOLED_TO_RESERVE,
    (_P.POOLED, _M.WAKE): _P.ACTIVE,
    (_P.POOLED, _M.RESERVE): _P.RESERVED_POOLED,
    (_P.POOLED, _M.DROP): _P.NOT_PENDING,
    (_P.POOLED_TO_RESERVE, _M.PARK): _P.PARKED,
    (_P.POOLED_TO_RESERVE, _M.POOL): _P.POOLED,
    (_P.POOLED_TO_RESERVE, _M.POOL_TO_RESERVE): _P.POOLED_TO_RESERVE,
    (_P.POOLED_TO_RESERVE, _M.WAKE): _P.ACTIVE,
    (_P.POOLED_TO_RESERVE, _M.RESERVE): _P.RESERVED_POOLED,
    (_P.POOLED_TO_RESERVE, _M.DROP): _P.NOT_PENDING,
    (_P.RESERVED_ACTIVE, _M.PARK): _P.RESERVED_PARKED,
    (_P.RESERVED_ACTIVE, _M.POOL): _P.RESERVED_POOLED,
    (_P.RESERVED_ACTIVE, _M.UNRESERVE): _P.ACTIVE,
    (_P.RESERVED_PARKED, _M.WAKE): _P.RESERVED_ACTIVE,
    (_P.RESERVED_PARKED, _M.UNRESERVE): _P.PARKED,
    (_P.RESERVED_POOLED, _M.PARK): _P.RESERVED_PARKED,
    (_P.RESERVED_POOLED, _M.POOL): _P.RESERVED_POOLED,
    (_P.RESERVED_POOLED, _M.WAKE): _P.RESERVED_ACTIVE,
    (_P.RESERVED_POOLED, _M.UNRESERVE): _P.POOLED,
})


class AllocationState(enum.StrEnum):
    ALLOCATED = "Allocated"
    COMPLETED = "Completed"
    PREEMPTED = "Preempted"
    EXPIRED = "Expired"


class AllocationEvent(Event):
    STOP = "stopped by the RM (or its node or application went away)"
    PREEMPT = "preempted by the scheduler"
    TIMEOUT = "the execution timeout fired"


ALLOCATION = Lifecycle[AllocationState, AllocationEvent]("allocation", {
    (AllocationState.ALLOCATED, AllocationEvent.STOP): AllocationState.COMPLETED,
    (AllocationState.ALLOCATED, AllocationEvent.PREEMPT): AllocationState.PREEMPTED,
    (AllocationState.ALLOCATED, AllocationEvent.TIMEOUT): AllocationState.EXPIRED,
})


class NodeState(enum.StrEnum):
    SCHEDULABLE = "Schedulable"
    DRAINING = "Draining"
    REMOVED = "Removed"


class NodeEvent(Event):
    DRAIN = "DRAIN_NODE"
    UNDRAIN = "DRAIN_TO_SCHEDULABLE"
    DECOMMISSION = "DECOMISSION"


NODE = Lifecycle[NodeState, NodeEvent]("node", {
    (NodeState.SCHEDULABLE, NodeEvent.DRAIN): NodeState.DRAINING,
    (NodeState.SCHEDULABLE, NodeEvent.DECOMMISSION): NodeState.REMOVED,
    (NodeState.DRAINING, NodeEvent.UNDRAIN): NodeState.SCHEDULABLE,
    (NodeState.DRAINING, NodeEvent.DECOMMISSION): NodeState.REMOVED,
})


class RMState(enum.StrEnum):
    INIT = "Init"
    RUNNING = "Running"
    PAUSED = "Paused"
    STOPPED = "Stopped"


class RMEvent(Event):
    REGISTER = "register (a re-registration wipes the RM's state)"
    CONNECTION_LOST = "heartbeats stopped"
    RECONNECT = "heartbeats resumed"
    TIMEOUT = "paused for longer than the RM timeout"
    SHUTDOWN = "voluntary unregister"


RM = Lifecycle[RMState, RMEvent]("resource manager", {
    (RMState.INIT, RMEvent.REGISTER): RMState.RUNNING,
    (RMState.RUNNING, RMEvent.REGISTER): RMState.RUNNING,
    (RMState.PAUSED, RMEvent.REGISTER): RMState.RUNNING,
    (RMState.STOPPED, RMEvent.REGISTER): RMState.RUNNING,
    (RMState.RUNNING, RMEvent.CONNECTION_LOST): RMState.PAUSED,
    (RMState.PAUSED, RMEvent.RECONNECT): RMState.RUNNING,
    (RMState.PAUSED, RMEvent.TIMEOUT): RMState.STOPPED,
    (RMState.RUNNING, RMEvent.SHUTDOWN): RMState.STOPPED,
    (RMState.PAUSED, RMEvent.SHUTDOWN): RMState.STOPPED,
})

class ShimState(enum.StrEnum):
    NEW = "New"
    REGISTERED = "Registered"
    RECOVERING = "Recovering"
    RUNNING = "Running"
    FAILED = "Failed"


class ShimEvent(Event):
    REGISTER = "the core accepted the registration"
    RECOVER = "applications, then nodes with their allocations, are being re-sent"
    RECOVERED = "every recovered application and node was answered"
    FAIL = "registration or recovery failed"


# The RM side of YuniKorn's resilience (recovery) design (used by ykbus.bus.client, kept here with the
# other tables so that the docs are generated from one place).
SHIM = Lifecycle[ShimState, ShimEvent]("RM client (recovery)", {
    (ShimState.NEW, ShimEvent.REGISTER): ShimState.REGISTERED,
    (ShimState.NEW, ShimEvent.FAIL): ShimState.FAILED,
    (ShimState.REGISTERED, ShimEvent.RECOVER): ShimState.RECOVERING,
    (ShimState.REGISTERED, ShimEvent.FAIL): ShimState.FAILED,
    (ShimState.RECOVERING, ShimEvent.RECOVERED): ShimState.RUNNING,
    (ShimState.RECOVERING, ShimEvent.FAIL): ShimState.FAILED,
})

LIFECYCLES: tuple[Lifecycle, ...] = (APP, ASK, ASK_PLACE, ALLOCATION, NODE, RM, SHIM)  # type: ignore[type-arg]


def render_docs() -> str:
    """docs/lifecycles.md, generated from the tables."""
    parts = [
        "# Lifecycles",
        "",
        "Generated from `src/ykbus/core/lifecycle.py` by `YKBUS_PURE_PYTHON=1 python -m ykbus.core.lifecycle`;"
        " a test fails when this file is stale. A move not drawn here raises `IllegalTransition`.",
    ]
    for lc in LIFECYCLES:
        parts += ["", f"## {lc.name}", "", "```mermaid", lc.mermaid(), "```", ""]
        events = {event: None for (_, event) in lc.table}
        parts += ["| event | meaning |", "|---|---|"]
        parts += [f"| {e.name} | {e.value} |" for e in events]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render_docs(), end="")
