"""What an entry's changes mean outside the core, derived in one place.

The applier (core/changes.py, core/indexes.py, core/applier.py), the intake and the
registry change the state and say what they did that matters beyond it as typed events
(core/events.py), collected in the entry's `Step` (core/step.py): an item accepted or
refused, an application changed state, an ask's reason changed, an allocation was booked or
released, a placeholder is to be released for the real ask that takes its place, an ask
started waiting for room, ... After the entry, `derive` turns them, in order, into what the
RMs hear (the entry's outputs) and the deadlines they set (timers on the log's clock), so
the order of outputs is the order of the changes. Every message the core sends and every
timer it sets is written here and nowhere else; the read models are folded from the same
events by core/fold.py's `fold`.

The `Outbox` collects the output items of one entry: grouped into one message per (rm,
kind), in the order each group was first used, and in decision order inside it. Only
`derive` fills one. The entries and outputs themselves are msgspec Structs, in
core/entries.py.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec.structs import astuple

from ykbus import limits
from ykbus.core.entries import Output
from ykbus.core.events import (
    Accepted,
    AllocationBooked,
    AllocationPreempted,
    AllocationRecovered,
    AllocationReleased,
    AppAdded,
    AppExpired,
    AppRejected,
    AppTransitioned,
    AskDropped,
    CountsCarried,
    EndedKept,
    Event,
    Noted,
    PlaceholderTimerStarted,
    PreemptionRetry,
    PreemptionStarted,
    QuotaOverrun,
    ReasonChanged,
    Refused,
    Registered,
    ReplacementAsked,
    RoomWaitStarted,
)
from ykbus.core.lifecycle import APP, AppEvent, AppState
from ykbus.core.model import Alloc, App, Ask
from ykbus.core.state import PartitionState
from ykbus.core.step import Step
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

_RUNNING: Final = AppState.RUNNING  # (an enum's member, read once: compiled, each use is a lookup on its class)
_COMPLETING: Final = AppState.COMPLETING
ENDED: Final = (AppState.COMPLETED, AppState.FAILED)
# read once: compiled code looks up the attributes of modules it did not compile at every use
REASON_MESSAGE: Final = m.UpdateContainerSchedulingStateRequest
RELEASE_MESSAGE: Final = m.AllocationRelease
APP_MESSAGE: Final = m.UpdatedApplication
# the events' types (Structs, not compiled), told apart by `type(event) is` (an isinstance of a
# class mypyc did not compile is a generic call)
_AppTransitioned: Final = AppTransitioned
_ReasonChanged: Final = ReasonChanged
_AllocationBooked: Final = AllocationBooked
_AllocationReleased: Final = AllocationReleased
_ReplacementAsked: Final = ReplacementAsked
_AllocationPreempted: Final = AllocationPreempted
_PreemptionStarted: Final = PreemptionStarted
_QuotaOverrun: Final = QuotaOverrun
_PreemptionRetry: Final = PreemptionRetry
_AskDropped: Final = AskDropped
_RoomWaitStarted: Final = RoomWaitStarted
_AppAdded: Final = AppAdded
_AppRejected: Final = AppRejected
_AppExpired: Final = AppExpired
_AllocationRecovered: Final = AllocationRecovered
_PlaceholderTimerStarted: Final = PlaceholderTimerStarted
_EndedKept: Final = EndedKept
_CountsCarried: Final = CountsCarried
_Accepted: Final = Accepted
_Refused: Final = Refused
_Registered: Final = Registered
_Noted: Final = Noted
# an event's fields in their order, read in one call (compiled, each field read by name is a
# lookup on its type: the kinds derived most often read them this way)
_fields: Final = astuple
# the timers' types (Structs, not compiled), read once
_AllocationTimeoutTimer: Final = AllocationTimeoutTimer
_AppTimeoutTimer: Final = AppTimeoutTimer
_CompletingTimer: Final = CompletingTimer
_ExpireTimer: Final = ExpireTimer
_PlaceholderTimer: Final = PlaceholderTimer
_PreemptionTimer: Final = PreemptionTimer
_QuotaTimer: Final = QuotaTimer
_ReservationTimer: Final = ReservationTimer


# --- the outbox: one entry's output items, grouped into messages --------------------------

# Each output item's type -> (output kind, list field of that kind's message)
PLACES: Final[dict[type, tuple[str, str]]] = {
    m.Allocation: ("alloc", "new"),
    m.AllocationRelease: ("alloc", "released"),
    m.AllocationAskRelease: ("alloc", "releasedAsks"),
    m.RejectedAllocationAsk: ("alloc", "rejected"),
    m.RejectedAllocation: ("alloc", "rejectedAllocations"),
    m.AcceptedApplication: ("app", "accepted"),
    m.RejectedApplication: ("app", "rejected"),
    m.UpdatedApplication: ("app", "updated"),
    m.AcceptedNode: ("node", "accepted"),
    m.RejectedNode: ("node", "rejected"),
    m.EventRecord: ("event", "events"),
    m.UpdateContainerSchedulingStateRequest: ("state", "states"),
}

_BUILDERS: Final[dict[str, type[m.Message]]] = {
    "alloc": m.AllocationResponse,
    "app": m.ApplicationResponse,
    "node": m.NodeResponse,
    "event": m.EventBatch,
    "state": m.StateBatch,
}


class Outbox:
    __slots__ = ("seq", "ts", "_groups", "_last_rm", "_last_type", "_last_items")

    def __init__(self, seq: int, ts: int) -> None:
        self.seq = seq
        self.ts = ts
        self._groups: dict[tuple[str, str], Any] = {}
        # the list the last item went to, with its RM and type: items come in runs of one kind
        # for one RM (the reasons of a pass), each of them then an append
        self._last_rm = ""
        self._last_type: type | None = None
        self._last_items: list[Any] = []

    def put(self, rm: str, item: Any) -> None:
        """Add `item` to the answer to `rm`; its type says which message and list it goes in
        (`PLACES`), so an item cannot land in the wrong one."""
        t = type(item)
        if t is self._last_type and rm == self._last_rm:
            self._last_items.append(item)
            return
        kind, field = PLACES[t]
        found = self._groups.get((rm, kind))
        group: dict[str, list[Any]]
        if found is None:
            group = self._groups[(rm, kind)] = {}
        else:
            group = found
        items = group.get(field)
        if items is None:
            items = group[field] = []
        items.append(item)
        self._last_rm, self._last_type, self._last_items = rm, t, items

    def register(self, rm: str, error: str = "") -> None:
        self._groups[(rm, "register")] = m.RegisterResourceManagerResponse(error=limits.shorten(error))

    def event(self, rm: str, etype: m.EventType, object_id: str, message: str,
              change: m.ChangeType = m.ChangeType.NONE) -> None:
        """An EventRecord to `rm`; the message is shortened to MAX_REASON_CHARS and the
        object id to MAX_QUOTED_CHARS, so that an event always fits in an answer."""
        self.put(rm, m.EventRecord(
            type=etype, objectID=limits.shorten(object_id, limits.MAX_QUOTED_CHARS),
            message=limits.shorten(message), timestampNano=self.ts,
            eventChangeType=change,
        ))

    def outputs(self) -> list[Output]:
        out = []
        for (rm, kind), group in self._groups.items():
            msg = group if kind == "register" else _BUILDERS[kind](**group)
            out.append(Output(self.seq, rm, kind, msg))
        return out


def derive(step: Step) -> list[Output]:
    """The outputs of the entry `step` applied: the messages to the RMs, in the order of its
    events, with the timers that follow from them set on the way."""
    out = Outbox(step.seq, step.ts)
    parts = step.parts
    for i, event in enumerate(step.events):
        part = parts[i]
        if part is None:
            _answer(event, out)
        else:
            item = _derive(part, event, out)
            if item is not None:
                out.put(part.rm, item)
    return out.outputs()


def outputs_of(seq: int, ts: int, events: list[Event]) -> list[Output]:
    """The outputs of `events`, none of a partition, as entry `seq` at `ts` would send them
    (the guard's answer to an entry it could not apply: core/guard.py)."""
    out = Outbox(seq, ts)
    for event in events:
        _answer(event, out)
    return out.outputs()


def _answer(event: Any, out: Outbox) -> None:
    """What an RM hears of an event not of a partition: the answer to its request."""
    t = type(event)
    if t is _Accepted:
        out.put(event.rm, event.item)
    elif t is _Refused:
        out.put(event.rm, event.item)
    elif t is _Noted:
        out.event(event.rm, event.etype, event.object_id, event.message, event.change)
    elif t is _Registered:
        out.register(event.rm, event.error)
    else:  # a kind added and not told here fails, not dropped
        raise AssertionError(f"an event of no partition of no known kind: {event!r}")


def _derive(part: PartitionState, event: Any, ctx: Outbox) -> Any:
    """The timers that follow from `event` of partition `part`, and the message to its RM
    (returned, for `derive` to put; None if none, or if it put them itself: two of them)."""
    rm, ts = part.rm, ctx.ts
    t = type(event)
    if t is _ReasonChanged:
        fields = _fields(event)  # (ask, state, message): one call, where each read by name is a lookup
        ask: Ask = fields[0]  # (typed: what is read of it is read natively, not by name)
        return REASON_MESSAGE(applicartionID=ask.app.id, allocationKey=ask.key, state=fields[1], reason=fields[2])
    if t is _AllocationBooked:
        alloc: Alloc = event.alloc
        timeout_ms: int = event.timeout_ms
        if timeout_ms > 0:
            part.timers.schedule(ts + timeout_ms * 1_000_000, _AllocationTimeoutTimer(part, alloc, timeout_ms))
        return alloc.message(part.name)
    if t is _AllocationReleased:
        fields = _fields(event)  # (alloc, termination, message, report)
        alloc = fields[0]
        if alloc.limit_ms > 0:  # its timeout can do nothing now: taken out (estimates read the live ones)
            part.timers.cancel(alloc.end, _AllocationTimeoutTimer(part, alloc, alloc.limit_ms))  # (its deadline)
        if not fields[3]:
            return None
        return RELEASE_MESSAGE(partitionName=part.name, applicationID=alloc.app.id, UUID=alloc.uuid,
                               terminationType=fields[1], message=fields[2], allocationKey=alloc.key)
    if t is _AppTransitioned:
        app: App = event.app
        old: AppState = event.old
        new: AppState = event.new
        if new is _RUNNING and app.timeout_ms > 0 and not app.gang and old is not _COMPLETING:
            part.timers.schedule(ts + app.timeout_ms * 1_000_000, _AppTimeoutTimer(part, app, event.generation))
        elif new is _COMPLETING:
            part.timers.schedule(ts + limits.COMPLETING_TIMEOUT_NS, _CompletingTimer(part, app, event.generation))
        elif new in ENDED:
            part.timers.schedule(ts + limits.TERMINATED_TIMEOUT_NS, _ExpireTimer(part, app.id, new))
        return APP_MESSAGE(applicationID=app.id, state=str(new), stateTransitionTimestamp=ts, message=event.message)
    if t is _ReplacementAsked:
        ph: Alloc = event.placeholder
        ask = event.ask
        return m.AllocationRelease(
            partitionName=part.name, applicationID=ph.app.id, UUID=ph.uuid,
            terminationType=m.TerminationType.PLACEHOLDER_REPLACED, allocationKey=ph.key,
            message=f"placeholder {ph.uuid} is replaced by {ask.key}")
    if t is _AskDropped:
        return m.AllocationAskRelease(
            partitionName=part.name, applicationID=event.app.id, allocationKey=event.key,
            terminationType=event.termination, message=event.message)
    if t is _RoomWaitStarted:
        ask = event.ask
        part.timers.schedule(event.reserve_at, _ReservationTimer(part, ask.app, ask.key, event.since))
        if event.preempt_at:  # it may preempt after its delay
            part.timers.schedule(event.preempt_at, _PreemptionTimer(part, ask.app, ask.key, event.since))
    elif t is _AllocationPreempted:
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
    elif t is _QuotaOverrun:
        part.timers.schedule(event.at, _QuotaTimer(part, event.queue.path))
    elif t is _PreemptionStarted:
        ask = event.ask
        taken = ", ".join(f"{a.uuid} ({a.app.id}, queue {a.app.queue.path})" for a in event.victims)
        ctx.event(rm, m.EventType.APP, ask.app.id,
                  f"ask {ask.key} in queue {ask.app.queue.path} preempts {len(event.victims)} allocation(s) on "
                  f"node {event.node.id} ({event.rule}): {taken}", m.ChangeType.SET)
    elif t is _PreemptionRetry:
        ask = event.ask
        part.timers.schedule(event.at, _PreemptionTimer(part, ask.app, ask.key, event.since))
    elif t is _PlaceholderTimerStarted:
        app = event.app
        part.timers.schedule(ts + app.placeholder_timeout_ms * 1_000_000, _PlaceholderTimer(part, app, event.generation))
    elif t is _AppExpired:
        until: int = event.until
        if until:  # its timer can do nothing now: taken out (a timer a record, for 3 days)
            part.timers.cancel(until, _ExpireTimer(part, event.app_id, event.state))
        return m.UpdatedApplication(
            applicationID=event.app_id, state=APP.advance(event.state, AppEvent.EXPIRE).value,
            stateTransitionTimestamp=ts, message="terminated timeout" if not until else
            f"forgotten before its terminated timeout: the partition keeps the last {limits.TERMINATED_KEPT} ended")
    elif t is _EndedKept:
        if event.expires:
            part.timers.schedule(event.expires, _ExpireTimer(part, event.app_id, event.ended.state))
    elif t is _AllocationRecovered:
        alloc = event.alloc
        if alloc.limit_ms > 0:  # its queue's runtime limit, from its recovery
            part.timers.schedule(alloc.end, _AllocationTimeoutTimer(part, alloc, alloc.limit_ms))
    elif t is not _AppAdded and t is not _AppRejected and t is not _CountsCarried:  # (read models only)
        raise AssertionError(f"an event of no known kind: {event!r}")
    return None
