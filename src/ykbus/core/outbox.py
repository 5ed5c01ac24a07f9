"""What one entry decided, on its way out: an `Outbox` collects the output items of one
entry. Items are grouped into one message per (rm, kind), in the order each group was
first used, and in decision order inside it. Compiled with the core (core/compiled.py).
Only `derive` (core/effects.py) fills one, from the entry's events. The entries and outputs
themselves are msgspec Structs, in core/entries.py (here too, for their readers).
"""

from __future__ import annotations

from typing import Any, Final

from ykbus import limits
from ykbus.core.entries import ENTRY_KINDS, Entry, Output
from ykbus.si import messages as m

__all__ = ["ENTRY_KINDS", "PLACES", "Entry", "Outbox", "Output"]

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
