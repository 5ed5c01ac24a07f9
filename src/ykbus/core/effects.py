"""What a partition's changes mean outside it, derived in one place.

The applier (core/changes.py, core/indexes.py, core/applier.py) changes the state and
says what it did that matters beyond the state, as a typed event: an application changed
state, an ask's reason changed, an allocation was booked or released, a placeholder is to
be released for the real ask that takes its place, a placeholder ask was dropped, an ask
started waiting for room, a gang's placeholders started their timeout. `derive` turns each
into what the RM hears (messages in the entry's outbox) and the deadlines it sets (timers on
the log's clock), as it happens, so the order of outputs is the order of the changes. Every
message a partition sends and every timer it sets is written here and nowhere else.
"""

from __future__ import annotations

from typing import Final

from ykbus import limits
from ykbus.core.lifecycle import APP, AppEvent, AppState
from ykbus.core.model import Alloc, App, Ask, Node, Queue
from ykbus.core.outbox import Outbox
from ykbus.core.preemption import delay_ms, may_search
from ykbus.core.state import PartitionState
from ykbus.core.timers import (
    AllocationTimeoutTimer,
    AppTimeoutTimer,
    CompletingTimer,
    ExpireTimer,
    PlaceholderTimer,
    PreemptionTimer,
    QuotaTimer,
    ReservationTimer,
)
from ykbus.si import messages as m

ENDED = (AppState.COMPLETED, AppState.FAILED)
# read once: compiled code looks up the attributes of modules it did not compile at every use
REASON_MESSAGE: Final = m.UpdateContainerSchedulingStateRequest
RELEASE_MESSAGE: Final = m.AllocationRelease
APP_MESSAGE: Final = m.UpdatedApplication


class AppTransitioned:
    """`app` went from `old` to `new` (its timer generation already moved on)."""

    __slots__ = ("app", "old", "new", "message")

    def __init__(self, app: App, old: AppState, new: AppState, message: str) -> None:
        self.app, self.old, self.new, self.message = app, old, new, message


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
    """A search for victims for `ask` found none: it may search again at `at` (log time)."""

    __slots__ = ("ask", "at")

    def __init__(self, ask: Ask, at: int) -> None:
        self.ask, self.at = ask, at


class AskDropped:
    """The core removed ask `key` of `app` (a gang's pending placeholder at its timeout)."""

    __slots__ = ("app", "key", "termination", "message")

    def __init__(self, app: App, key: str, termination: m.TerminationType, message: str) -> None:
        self.app, self.key, self.termination, self.message = app, key, termination, message


class RoomWaitStarted:
    """`ask` started waiting for room at `since`: it may reserve a node after the delay."""

    __slots__ = ("ask", "since")

    def __init__(self, ask: Ask, since: int) -> None:
        self.ask, self.since = ask, since


class AppAdded:
    """`app` joined the partition (New); `replaced`: the ended state of the terminated
    record of the same id it took the place of (None: there was none)."""

    __slots__ = ("app", "replaced")

    def __init__(self, app: App, replaced: AppState | None) -> None:
        self.app, self.replaced = app, replaced


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
    """A gang's first placeholder is allocated: its placeholder timeout runs from now."""

    __slots__ = ("app",)

    def __init__(self, app: App) -> None:
        self.app = app


Event = (AppTransitioned | ReasonChanged | AllocationBooked | AllocationReleased | ReplacementAsked | AskDropped
         | RoomWaitStarted | PlaceholderTimerStarted | AppAdded | AppRejected | AppExpired | AllocationRecovered
         | AllocationPreempted | PreemptionStarted | PreemptionRetry | QuotaOverrun)


def derive(part: PartitionState, event: Event, ctx: Outbox) -> None:
    """The messages to the RM and the timers that follow from `event`, now; and the read
    model's fold of it (core/readmodel.py)."""
    rm, ts = part.rm, ctx.ts
    summary = part.summary
    if isinstance(event, ReasonChanged):
        ask = event.ask
        ctx.put(rm, REASON_MESSAGE(
            applicartionID=ask.app.id, allocationKey=ask.key, state=event.state, reason=event.message))
    elif isinstance(event, AllocationBooked):
        alloc = event.alloc
        summary.containers += 1
        summary.count("container", alloc.app.queue.path, "allocated")
        if event.timeout_ms > 0:
            part.timers.schedule(ts + event.timeout_ms * 1_000_000, AllocationTimeoutTimer(part, alloc, event.timeout_ms))
        ctx.put(rm, alloc.message(part.name))
    elif isinstance(event, AllocationReleased):
        summary.containers -= 1
        summary.count("container", event.alloc.app.queue.path, "released")
        if event.report:
            alloc = event.alloc
            ctx.put(rm, RELEASE_MESSAGE(
                partitionName=part.name, applicationID=alloc.app.id, UUID=alloc.uuid,
                terminationType=event.termination, message=event.message, allocationKey=alloc.key))
    elif isinstance(event, AppTransitioned):
        app, old, new = event.app, event.old, event.new
        summary.app_left(old)
        summary.app_entered(new)
        if new in ENDED:
            summary.count("application", app.queue.path, str(new))
        ctx.put(rm, APP_MESSAGE(
            applicationID=app.id, state=str(new), stateTransitionTimestamp=ts, message=event.message))
        if new is AppState.RUNNING and app.timeout_ms > 0 and not app.gang and old is not AppState.COMPLETING:
            part.timers.schedule(ts + app.timeout_ms * 1_000_000, AppTimeoutTimer(part, app, app.timer))
        elif new is AppState.COMPLETING:
            part.timers.schedule(ts + limits.COMPLETING_TIMEOUT_NS, CompletingTimer(part, app, app.timer))
        elif new in ENDED:
            part.timers.schedule(ts + limits.TERMINATED_TIMEOUT_NS, ExpireTimer(part, app.id, new))
    elif isinstance(event, ReplacementAsked):
        ph, ask = event.placeholder, event.ask
        ctx.put(rm, m.AllocationRelease(
            partitionName=part.name, applicationID=ph.app.id, UUID=ph.uuid,
            terminationType=m.TerminationType.PLACEHOLDER_REPLACED, allocationKey=ph.key,
            message=f"placeholder {ph.uuid} is replaced by {ask.key}"))
    elif isinstance(event, AskDropped):
        ctx.put(rm, m.AllocationAskRelease(
            partitionName=part.name, applicationID=event.app.id, allocationKey=event.key,
            terminationType=event.termination, message=event.message))
    elif isinstance(event, RoomWaitStarted):
        ask = event.ask
        delay = part.reservation_delay_ns
        part.timers.schedule(event.since + delay, ReservationTimer(part, ask.app, ask.key, event.since))
        if ask.preempt_other and part.preempts() and may_search(ask):  # it may preempt after its delay
            part.timers.schedule(event.since + delay_ms(ask) * 1_000_000,
                                 PreemptionTimer(part, ask.app, ask.key, event.since))
    elif isinstance(event, AllocationPreempted):
        alloc, preemptor = event.alloc, event.ask
        for_what = (f"for ask {preemptor.key} of application {preemptor.app.id} in queue {preemptor.app.queue.path}"
                    if preemptor is not None else "for its queue's quota")
        ctx.put(rm, m.AllocationRelease(
            partitionName=part.name, applicationID=alloc.app.id, UUID=alloc.uuid,
            terminationType=m.TerminationType.PREEMPTED_BY_SCHEDULER, allocationKey=alloc.key,
            message=f"preempted {for_what} ({event.rule})"))
        ctx.event(rm, m.EventType.APP, alloc.app.id,
                  f"allocation {alloc.uuid} ({alloc.key}) of queue {alloc.app.queue.path} on node {alloc.node.id} "
                  f"is preempted {for_what} ({event.rule})", m.ChangeType.REMOVE)
    elif isinstance(event, QuotaOverrun):
        part.timers.schedule(event.at, QuotaTimer(part, event.queue.path))
    elif isinstance(event, PreemptionStarted):
        ask = event.ask
        taken = ", ".join(f"{a.uuid} ({a.app.id}, queue {a.app.queue.path})" for a in event.victims)
        ctx.event(rm, m.EventType.APP, ask.app.id,
                  f"ask {ask.key} in queue {ask.app.queue.path} preempts {len(event.victims)} allocation(s) on "
                  f"node {event.node.id} ({event.rule}): {taken}", m.ChangeType.SET)
    elif isinstance(event, PreemptionRetry):
        ask = event.ask
        part.timers.schedule(event.at, PreemptionTimer(part, ask.app, ask.key, ask.since))
    elif isinstance(event, PlaceholderTimerStarted):
        app = event.app
        part.timers.schedule(ts + app.placeholder_timeout_ms * 1_000_000, PlaceholderTimer(part, app, app.gang_timer))
    elif isinstance(event, AppAdded):
        if event.replaced is not None:
            summary.app_left(event.replaced)
        summary.app_entered(event.app.state)
        summary.count("application", event.app.queue.path, "Accepted")
    elif isinstance(event, AppRejected):
        summary.app_entered(AppState.REJECTED)
        summary.count("application", event.queue, AppState.REJECTED.value)
        for _ in range(event.dropped):
            summary.app_left(AppState.REJECTED)
    elif isinstance(event, AppExpired):
        summary.app_left(event.state)
        ctx.put(rm, m.UpdatedApplication(
            applicationID=event.app_id, state=APP.advance(event.state, AppEvent.EXPIRE).value,
            stateTransitionTimestamp=ts, message="terminated timeout"))
    else:
        summary.containers += 1
