"""What the applier did that matters beyond the records: the typed events it returns.

Every change that someone outside the records hears of, or that sets a deadline, or that a
read model counts, is one of these values, in the order it happened: the applier
(core/changes.py, core/indexes.py, core/applier.py) and the intake and registry
(core/intake.py, core/registry.py) append them to the entry's `Step` (core/step.py), with
the partition they happened in (None: the RM's, not a partition's). After the entry,
`derive` (core/effects.py) turns them into the messages to the RMs and the timers, and
`fold` (core/readmodel.py) into the read models: nothing else sends, sets a timer or
counts.

An event holds what its consequences read as it was when it happened (a timer generation,
an application's state, a deadline): the records may move on before the entry ends.
"""

from __future__ import annotations

from ykbus.core.lifecycle import AppState
from ykbus.core.model import Alloc, App, Ask, Node, Queue, Terminated
from ykbus.si import messages as m


class AppTransitioned:
    """`app` went from `old` to `new`; `generation`: its timer generation then (already
    moved on: a timer set for this state carries it)."""

    __slots__ = ("app", "old", "new", "message", "generation")

    def __init__(self, app: App, old: AppState, new: AppState, message: str) -> None:
        self.app, self.old, self.new, self.message = app, old, new, message
        self.generation = app.timer


class ReasonChanged:
    """Why `ask` waits is now `message` (the SI's scheduling `state` with it)."""

    __slots__ = ("ask", "state", "message")

    def __init__(self, ask: Ask, state: m.SchedulingState, message: str) -> None:
        self.ask, self.state, self.message = ask, state, message


class AllocationBooked:
    """`alloc` was placed (not recovered: the RM runs those already)."""

    __slots__ = ("alloc", "timeout_ms")

    def __init__(self, alloc: Alloc, timeout_ms: int) -> None:
        self.alloc, self.timeout_ms = alloc, timeout_ms


class AllocationReleased:
    """`alloc` was released by the core or the RM, `termination` and `message` saying why;
    `report`: the RM is told (not when it confirmed a release the core asked for)."""

    __slots__ = ("alloc", "termination", "message", "report")

    def __init__(self, alloc: Alloc, termination: m.TerminationType, message: str, report: bool) -> None:
        self.alloc, self.termination, self.message, self.report = alloc, termination, message, report


class ReplacementAsked:
    """Real `ask` takes placeholder `placeholder`'s place: the RM is to release it."""

    __slots__ = ("placeholder", "ask")

    def __init__(self, placeholder: Alloc, ask: Ask) -> None:
        self.placeholder, self.ask = placeholder, ask


class AllocationPreempted:
    """`alloc` is preempted for `ask` (None: for its queue's quota) under `rule`: the RM is to
    release it (`PREEMPTED_BY_SCHEDULER`)."""

    __slots__ = ("alloc", "ask", "rule")

    def __init__(self, alloc: Alloc, ask: Ask | None, rule: str) -> None:
        self.alloc, self.ask, self.rule = alloc, ask, rule


class PreemptionStarted:
    """`ask` preempts `victims` on `node` under `rule`, and holds the node meanwhile."""

    __slots__ = ("ask", "node", "victims", "rule")

    def __init__(self, ask: Ask, node: Node, victims: list[Alloc], rule: str) -> None:
        self.ask, self.node, self.victims, self.rule = ask, node, victims, rule


class QuotaOverrun:
    """A reload left `queue` over its max: what it holds over is preempted `at` (log time)."""

    __slots__ = ("queue", "at")

    def __init__(self, queue: Queue, at: int) -> None:
        self.queue, self.at = queue, at


class PreemptionRetry:
    """A search for victims for `ask` (waiting for room since `since`) found none: it may
    search again at `at` (log time)."""

    __slots__ = ("ask", "at", "since")

    def __init__(self, ask: Ask, at: int) -> None:
        self.ask, self.at, self.since = ask, at, ask.since


class AskDropped:
    """The core removed ask `key` of `app` (a gang's pending placeholder at its timeout)."""

    __slots__ = ("app", "key", "termination", "message")

    def __init__(self, app: App, key: str, termination: m.TerminationType, message: str) -> None:
        self.app, self.key, self.termination, self.message = app, key, termination, message


class RoomWaitStarted:
    """`ask` started waiting for room at `since`: it may reserve a node at `reserve_at`, and
    look for victims at `preempt_at` (0: it may not preempt), both log times."""

    __slots__ = ("ask", "since", "reserve_at", "preempt_at")

    def __init__(self, ask: Ask, since: int, reserve_at: int, preempt_at: int) -> None:
        self.ask, self.since, self.reserve_at, self.preempt_at = ask, since, reserve_at, preempt_at


class AppAdded:
    """`app` joined the partition in `state` (New); `replaced`: the ended state of the
    terminated record of the same id it took the place of (None: there was none)."""

    __slots__ = ("app", "state", "replaced")

    def __init__(self, app: App, replaced: AppState | None) -> None:
        self.app, self.state, self.replaced = app, app.state, replaced


class AppRejected:
    """Application `app_id` (for `queue`, "" if placement found none) was rejected and is
    remembered among the rejected; `dropped`:
    how many rejected records that made it forget (the same id before, the oldest)."""

    __slots__ = ("app_id", "queue", "dropped")

    def __init__(self, app_id: str, queue: str, dropped: int) -> None:
        self.app_id, self.queue, self.dropped = app_id, queue, dropped


class AppExpired:
    """Ended application `app_id` (`state`: Completed or Failed) is forgotten, its terminated
    record gone."""

    __slots__ = ("app_id", "state")

    def __init__(self, app_id: str, state: AppState) -> None:
        self.app_id, self.state = app_id, state


class AllocationRecovered:
    """`alloc`, which the RM runs already, is counted (recovery: nothing is sent)."""

    __slots__ = ("alloc",)

    def __init__(self, alloc: Alloc) -> None:
        self.alloc = alloc


class PlaceholderTimerStarted:
    """A gang's first placeholder is allocated: its placeholder timeout runs from now, for
    its gang timer's `generation` then."""

    __slots__ = ("app", "generation")

    def __init__(self, app: App) -> None:
        self.app, self.generation = app, app.gang_timer


class EndedKept:
    """An application that had ended (`ended`) before its RM registered again is remembered
    by the new partition of the same name; a Completed or Failed one is forgotten at the
    deadline it had (`expires`: log time; 0 for a rejected one, kept among the rejected)."""

    __slots__ = ("app_id", "ended", "expires")

    def __init__(self, app_id: str, ended: Terminated, expires: int) -> None:
        self.app_id, self.ended, self.expires = app_id, ended, expires


class Accepted:
    """An item of RM `rm`'s was accepted: an application or a node (the SI's acceptance)."""

    __slots__ = ("rm", "item")

    def __init__(self, rm: str, item: m.AcceptedApplication | m.AcceptedNode) -> None:
        self.rm, self.item = rm, item


class Refused:
    """An item of RM `rm`'s was refused, changing nothing: the SI's rejection, which names it
    and says why."""

    __slots__ = ("rm", "item")

    def __init__(self, rm: str, item: m.RejectedApplication | m.RejectedNode | m.RejectedAllocationAsk
                 | m.RejectedAllocation) -> None:
        self.rm, self.item = rm, item


class Registered:
    """RM `rm`'s registration was answered: accepted (`error` empty) or refused."""

    __slots__ = ("rm", "error")

    def __init__(self, rm: str, error: str = "") -> None:
        self.rm, self.error = rm, error


class Noted:
    """Something `rm` is told in an `EventRecord` (a request not applied, a configuration in
    force or not, an RM moved between shards): of `object_id`, of type `etype`."""

    __slots__ = ("rm", "etype", "object_id", "message", "change")

    def __init__(self, rm: str, etype: m.EventType, object_id: str, message: str,
                 change: m.ChangeType = m.ChangeType.NONE) -> None:
        self.rm, self.etype, self.object_id, self.message, self.change = rm, etype, object_id, message, change


Event = (AppTransitioned | ReasonChanged | AllocationBooked | AllocationReleased | ReplacementAsked | AskDropped
         | RoomWaitStarted | PlaceholderTimerStarted | AppAdded | AppRejected | AppExpired | AllocationRecovered
         | AllocationPreempted | PreemptionStarted | PreemptionRetry | QuotaOverrun | EndedKept
         | Accepted | Refused | Registered | Noted)
