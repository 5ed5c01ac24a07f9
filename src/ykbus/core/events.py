"""What the applier did that matters beyond the records: the typed events it returns.

Every change that someone outside the records hears of, or that sets a deadline, or that a
read model counts, is one of these values, in the order it happened: the applier
(core/changes.py, core/indexes.py, core/applier.py) and the intake and registry
(core/intake.py, core/registry.py) append them to the entry's `Step` (core/step.py), with
the partition they happened in (None: the RM's, not a partition's). After the entry,
`derive` (core/effects.py) turns them into the messages to the RMs and the timers, and
`fold` (core/fold.py) into the read models: nothing else sends, sets a timer or
counts.

An event holds what its consequences read as it was when it happened (a timer generation,
an application's state, a deadline): the records may move on before the entry ends. Events
are msgspec Structs, frozen, and never tracked by the garbage collector (`gc=False`): they
live until the entry ends, and objects the collector tracks, alive then, made it run far
more often (a third of the speed of `bench core --workload yunikorn-perf`). Like the timers,
they are not compiled (mypyc compiles no Struct): compiled code tells them apart by
`type(...) is`, and `derive` reads the fields of the kinds it sees most (`ReasonChanged`,
`AllocationReleased`) in their order, in one call (`msgspec.structs.astuple`): their
fields' order is part of what it reads.
"""

from __future__ import annotations

import msgspec

from ykbus.core.lifecycle import AppState
from ykbus.core.model import Alloc, App, Ask, Node, Queue, Terminated
from ykbus.si import messages as m


class AppTransitioned(msgspec.Struct, frozen=True, gc=False):
    """`app` went from `old` to `new`; `generation`: its timer generation then (already
    moved on: a timer set for this state carries it)."""

    app: App
    old: AppState
    new: AppState
    message: str
    generation: int


class ReasonChanged(msgspec.Struct, frozen=True, gc=False):
    """Why `ask` waits is now `message` (the SI's scheduling `state` with it)."""

    ask: Ask
    state: m.SchedulingState
    message: str


class AllocationBooked(msgspec.Struct, frozen=True, gc=False):
    """`alloc` was placed (not recovered: the RM runs those already)."""

    alloc: Alloc
    timeout_ms: int


class AllocationReleased(msgspec.Struct, frozen=True, gc=False):
    """`alloc` was released by the core or the RM, `termination` and `message` saying why;
    `report`: the RM is told (not when it confirmed a release the core asked for)."""

    alloc: Alloc
    termination: m.TerminationType
    message: str
    report: bool


class ReplacementAsked(msgspec.Struct, frozen=True, gc=False):
    """Real `ask` takes placeholder `placeholder`'s place: the RM is to release it."""

    placeholder: Alloc
    ask: Ask


class AllocationPreempted(msgspec.Struct, frozen=True, gc=False):
    """`alloc` is preempted for `ask` (None: for its queue's quota) under `rule`: the RM is to
    release it (`PREEMPTED_BY_SCHEDULER`)."""

    alloc: Alloc
    ask: Ask | None
    rule: str


class PreemptionStarted(msgspec.Struct, frozen=True, gc=False):
    """`ask` preempts `victims` on `node` under `rule`, and holds the node meanwhile."""

    ask: Ask
    node: Node
    victims: list[Alloc]
    rule: str


class QuotaOverrun(msgspec.Struct, frozen=True, gc=False):
    """A reload left `queue` over its max: what it holds over is preempted `at` (log time)."""

    queue: Queue
    at: int


class PreemptionRetry(msgspec.Struct, frozen=True, gc=False):
    """A search for victims for `ask` (waiting for room since `since`) found none: it may
    search again at `at` (log time)."""

    ask: Ask
    at: int
    since: int


class AskDropped(msgspec.Struct, frozen=True, gc=False):
    """The core removed ask `key` of `app` (a gang's pending placeholder at its timeout)."""

    app: App
    key: str
    termination: m.TerminationType
    message: str


class RoomWaitStarted(msgspec.Struct, frozen=True, gc=False):
    """`ask` started waiting for room at `since`: it may reserve a node at `reserve_at`, and
    look for victims at `preempt_at` (0: it may not preempt), both log times."""

    ask: Ask
    since: int
    reserve_at: int
    preempt_at: int


class AppAdded(msgspec.Struct, frozen=True, gc=False):
    """`app` joined the partition in `state` (New); `replaced`: the ended state of the
    terminated record of the same id it took the place of (None: there was none)."""

    app: App
    replaced: AppState | None
    state: AppState


class AppRejected(msgspec.Struct, frozen=True, gc=False):
    """Application `app_id` (for `queue`, "" if placement found none) was rejected and is
    remembered among the rejected; `dropped`:
    how many rejected records that made it forget (the same id before, the oldest)."""

    app_id: str
    queue: str
    dropped: int


class AppExpired(msgspec.Struct, frozen=True, gc=False):
    """Ended application `app_id` (`state`: Completed or Failed) is forgotten, its terminated
    record gone."""

    app_id: str
    state: AppState
    until: int = 0  # gone early, before its timer's deadline `until` (limits.TERMINATED_KEPT); 0: the timer fired


class AllocationRecovered(msgspec.Struct, frozen=True, gc=False):
    """`alloc`, which the RM runs already, is counted (recovery: nothing is sent)."""

    alloc: Alloc


class PlaceholderTimerStarted(msgspec.Struct, frozen=True, gc=False):
    """A gang's first placeholder is allocated: its placeholder timeout runs from now, for
    its gang timer's `generation` then."""

    app: App
    generation: int


class EndedKept(msgspec.Struct, frozen=True, gc=False):
    """An application that had ended (`ended`) before its RM registered again is remembered
    by the new partition of the same name; a Completed or Failed one is forgotten at the
    deadline it had (`expires`: log time; 0 for a rejected one, kept among the rejected)."""

    app_id: str
    ended: Terminated
    expires: int


class CountsCarried(msgspec.Struct, frozen=True, gc=False):
    """The decisions a partition of the same name counted before it went (its RM registered
    again, or a reload removed it and brings it back): this one goes on from them, as
    YuniKorn's counters never go down. A read model's only (core/fold.py)."""

    counts: dict[tuple[str, str, str], int]


class Accepted(msgspec.Struct, frozen=True, gc=False):
    """An item of RM `rm`'s was accepted: an application or a node (the SI's acceptance)."""

    rm: str
    item: m.AcceptedApplication | m.AcceptedNode


class Refused(msgspec.Struct, frozen=True, gc=False):
    """An item of RM `rm`'s was refused, changing nothing: the SI's rejection, which names it
    and says why."""

    rm: str
    item: m.RejectedApplication | m.RejectedNode | m.RejectedAllocationAsk | m.RejectedAllocation


class Registered(msgspec.Struct, frozen=True, gc=False):
    """RM `rm`'s registration was answered: accepted (`error` empty) or refused."""

    rm: str
    error: str = ""


class Noted(msgspec.Struct, frozen=True, gc=False):
    """Something `rm` is told in an `EventRecord` (a request not applied, a configuration in
    force or not, an RM moved between shards): of `object_id`, of type `etype`."""

    rm: str
    etype: m.EventType
    object_id: str
    message: str
    change: m.ChangeType = m.ChangeType.NONE


Event = (AppTransitioned | ReasonChanged | AllocationBooked | AllocationReleased | ReplacementAsked | AskDropped
         | RoomWaitStarted | PlaceholderTimerStarted | AppAdded | AppRejected | AppExpired | AllocationRecovered
         | AllocationPreempted | PreemptionStarted | PreemptionRetry | QuotaOverrun | EndedKept | CountsCarried
         | Accepted | Refused | Registered | Noted)
