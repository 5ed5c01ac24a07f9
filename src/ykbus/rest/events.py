"""YuniKorn's events made from the core's output messages, and the timeline's history: plain
functions and values, no IO. The endpoints `/ws/v1/events/batch` and `/ws/v1/events/stream`
are served from the durable output stream (YK_OUT) rather than a ring buffer in memory: what
the core told the RMs, as YuniKorn's EventRecords. Nothing is lost across a restart, and a
reader resumes where it stopped (`?start=<id>`). Reading the stream is bus/eventfeed.py's
(`EventFeed`); this module imports neither nats nor ykbus.bus (tests/core/test_layers.py).

An event's id is its output message's stream sequence times 2^20 plus its place in that
message (`LowestID`, `HighestID` and `start` use it): stable across restarts, and ordered.
What becomes an event (YuniKorn's types and change details, SI `EventRecord`):

- an allocation: APP ADD `APP_ALLOC` (200) and NODE ADD `NODE_ALLOC` (303);
- a release: APP REMOVE with the termination's detail (`ALLOC_CANCEL` 500, `ALLOC_PREEMPT`
  501, `ALLOC_TIMEOUT` 502, `ALLOC_REPLACED` 503) and, but for a replaced placeholder,
  NODE REMOVE `NODE_ALLOC` (303), both with the allocation's resource (the real allocation
  that takes a replaced placeholder's place on its node has no NODE ADD either, as in
  YuniKorn); an ask released: APP REMOVE `REQUEST_CANCEL` (100);
- a rejected ask, and why an ask waits: REQUEST with the reason as message;
- an application accepted (APP ADD `APP_NEW` 203), rejected (APP ADD `APP_NEW` 203, then APP
  SET `APP_REJECT` 202) or in a new state (APP SET, the state's detail);
- a node accepted: NODE SET `NODE_SCHEDULABLE` (302, `schedulable: true`), then NODE ADD with
  its capacity; a node rejected: NODE, the reason;
- the core's own EventRecords, as they are.

As YuniKorn, a message only where YuniKorn writes one (a rejection, a reason, a node added,
the core's own records): its key is left out otherwise (omitempty). A release names its
allocation by UUID only; its node and resource are those of the allocation the feed read
when it was made (`Placed`: the last MAX_PLACED allocations read, by UUID), and a node's
capacity is the node's as the state holds it now.

The timeline's history (`GET /api/timeline`, docs/operations.md "Web UI"): one task of the
feed (bus/eventfeed.py `EventFeed.count`) reads the whole stream once, in order, from its first message on,
and counts each event in a `Histogram` of the kinds the UI's timeline draws (`KINDS`, sorted
by `timeline_kind`, the same tests as app.js's `ROWS`), per second for the last day and per
minute for the last 30 days: a fixed 3 MiB (2.0 + 1.0) however long the log, counts older than that
dropped. An event is counted at its own time, or at its message's when that is earlier (a
timestamp an RM sent from the future cannot wipe the rings). It counts from scratch at each
start: the stream is the history.
"""

from __future__ import annotations

import re
from array import array
from typing import Any

from ykbus.core import Core
from ykbus.si import messages as m

ID_SHIFT = 20  # an event id: stream sequence << 20 | place in its message
MAX_COUNT = 10_000  # events one answer holds at most (and its default)
MAX_STREAMS = 100  # /ws/v1/events/stream answers open at once
MAX_PLACED = 100_000  # allocations whose node and resource the feed keeps for their release's events
TYPES = {m.EventType.UNKNOWN_EVENTRECORD_TYPE: 0, m.EventType.REQUEST: 1, m.EventType.APP: 2, m.EventType.NODE: 3,
         m.EventType.QUEUE: 4}
CHANGES = {m.ChangeType.NONE: 0, m.ChangeType.SET: 1, m.ChangeType.ADD: 2, m.ChangeType.REMOVE: 3}
NONE, SET, ADD, REMOVE = 0, 1, 2, 3
REQUEST, APP, NODE = 1, 2, 3
APP_STATES = {"New": 203, "Accepted": 204, "Starting": 205, "Running": 206, "Completing": 207, "Completed": 208,
              "Failing": 209, "Failed": 210, "Resuming": 211, "Expired": 212, "Rejected": 202}
RELEASES = {"STOPPED_BY_RM": 500, "PREEMPTED_BY_SCHEDULER": 501, "TIMEOUT": 502, "PLACEHOLDER_REPLACED": 503}
NODE_SCHEDULABLE, NODE_ALLOC = 302, 303
KINDS = ("allocations", "releases", "application states", "rejections", "why asks wait", "nodes")  # app.js ROWS
HISTORY_SECONDS = 24 * 3600  # cells of 1 s kept: 86,400 x 6 kinds x 4 bytes = 2.0 MiB
HISTORY_MINUTES = 30 * 24 * 60  # cells of 1 min kept: 43,200 x 6 kinds x 4 bytes = 1.0 MiB (YK_OUT keeps 7 days by default)
MAX_BINS = 2_000  # bins one /api/timeline answer holds at most
DEFAULT_BINS = 60
DEFAULT_SPAN_MS = 3_600_000  # /api/timeline without `from`: the hour before `to`
MAX_MS = 2**53 - 1  # the largest time /api/timeline takes (ms): a browser's numbers are exact up to it


def node_capacity(core: Core, rm_id: str, node_id: str) -> dict[str, int] | None:
    """A node's capacity as `core` holds it now (its NODE ADD event's resource)."""
    rm = core.rms.get(rm_id)
    for p in rm.partitions.values() if rm is not None else ():
        node = p.nodes.get(node_id)
        if node is not None:
            return dict(node.capacity)
    return None


class Placed:
    """The node and resource of the last MAX_PLACED allocations read, by UUID (the events
    of a release carry them; its message names the UUID only)."""

    def __init__(self, size: int = MAX_PLACED) -> None:
        self.size = size
        self.by_uuid: dict[str, tuple[str, dict[str, Any], str]] = {}  # node, resource, task group
        # placeholders being replaced, by (application, task group, node): the real allocation
        # takes its place on the node, which YuniKorn does not report as a node event
        self.replacing: dict[tuple[str, str, str], int] = {}

    def add(self, uuid: str, node_id: str, resource: dict[str, Any], task_group: str = "") -> None:
        self.by_uuid[uuid] = (node_id, resource, task_group)
        if len(self.by_uuid) > self.size:
            del self.by_uuid[next(iter(self.by_uuid))]  # the oldest

    def get(self, uuid: str) -> tuple[str, dict[str, Any], str] | None:
        return self.by_uuid.get(uuid)

    def replaced(self, app_id: str, task_group: str, node_id: str) -> None:
        key = (app_id, task_group, node_id)
        self.replacing[key] = self.replacing.get(key, 0) + 1
        if len(self.replacing) > self.size:
            del self.replacing[next(iter(self.replacing))]

    def replaces(self, app_id: str, task_group: str, node_id: str) -> bool:
        """Whether a real allocation so placed takes a replaced placeholder's place (once)."""
        key = (app_id, task_group, node_id)
        n = self.replacing.get(key, 0)
        if n > 1:
            self.replacing[key] = n - 1
        elif n:
            del self.replacing[key]
        return n > 0


class BadCount(ValueError):
    pass


UINT64_MAX = 2**64 - 1


def parse_uint(text: str) -> int:
    """Go's `strconv.ParseUint(text, 10, 64)`: ASCII digits only (no sign, space or `_`),
    its error's text as YuniKorn answers it."""
    if not text or len(text) > 64 or not all("0" <= c <= "9" for c in text):
        raise BadCount(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    n = int(text)
    if n > UINT64_MAX:
        raise BadCount(f'strconv.ParseUint: parsing "{text}": value out of range')
    return n


def count_of(query: dict[str, str]) -> int:
    """`?count=` (YuniKorn's checks and messages; empty or absent: MAX_COUNT), at most MAX_COUNT."""
    text = query.get("count", "")
    if not text:
        return MAX_COUNT
    n = parse_uint(text)
    if n == 0:
        raise BadCount('0 is not a valid value for "count"')
    return min(n, MAX_COUNT)


def stream_count_of(query: dict[str, str]) -> int:
    """`?count=` of the stream: the events before it to send first (YuniKorn's: empty, absent
    or 0 none), at most MAX_COUNT."""
    text = query.get("count", "")
    return min(parse_uint(text), MAX_COUNT) if text else 0


def start_of(query: dict[str, str]) -> int | None:
    """`?start=` (YuniKorn's check and message; empty or absent: None, from the first kept)."""
    text = query.get("start", "")
    return parse_uint(text) if text else None


def _res(r: m.Resource | dict[str, int] | None) -> dict[str, Any]:
    if isinstance(r, dict):
        return {"resources": {k: {"value": v} for k, v in sorted(r.items())}} if r else {}
    return {"resources": {k: {"value": q.value} for k, q in sorted(r.resources.items())}} if r is not None else {}


def _event(etype: int, object_id: str, ts: int, change: int = NONE, detail: int = 0, ref: str = "",
           message: str = "", resource: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": etype, "objectID": object_id}
    if message:
        out["message"] = message
    out["timestampNano"] = ts
    if change:
        out["eventChangeType"] = change
    if detail:
        out["eventChangeDetail"] = detail
    if ref:
        out["referenceID"] = ref
    out["resource"] = resource or {}
    return out


def events_of(kind: str, body: Any, ts: int, placed: Placed | None = None, core: Core | None = None,
              rm: str = "") -> list[dict[str, Any]]:
    """YuniKorn's EventRecords of one output message (`kind`, decoded, to `rm`), at `ts` (ns);
    `placed` remembers allocations for their releases, `core` (as it is now) tells a node's
    capacity (module docstring); without it a node added has no resource."""
    out: list[dict[str, Any]] = []
    if isinstance(body, m.AllocationResponse):
        for a in body.new:
            res = _res(a.resourcePerAlloc)
            swapped = placed is not None and a.taskGroupName != "" and not a.placeholder and placed.replaces(
                a.applicationID, a.taskGroupName, a.nodeID)
            if placed is not None:
                placed.add(a.UUID, a.nodeID, res, a.taskGroupName)
            out.append(_event(APP, a.applicationID, ts, ADD, 200, a.allocationKey, resource=res))
            if not swapped:
                out.append(_event(NODE, a.nodeID, ts, ADD, NODE_ALLOC, a.allocationKey, resource=res))
        for r in body.released:
            held = placed.get(r.UUID) if placed is not None else None
            res = held[1] if held is not None else {}
            detail = RELEASES.get(str(r.terminationType), 500)
            out.append(_event(APP, r.applicationID, ts, REMOVE, detail, r.allocationKey or r.UUID, resource=res))
            if held is not None and placed is not None and detail == RELEASES["PLACEHOLDER_REPLACED"]:
                placed.replaced(r.applicationID, held[2], held[0])
            elif held is not None:
                out.append(_event(NODE, held[0], ts, REMOVE, NODE_ALLOC, r.allocationKey or r.UUID, resource=res))
        for k in body.releasedAsks:
            out.append(_event(APP, k.applicationID, ts, REMOVE, 100, k.allocationKey))
        for x in body.rejected:
            out.append(_event(REQUEST, x.allocationKey, ts, ref=x.applicationID, message=x.reason))
    elif isinstance(body, m.ApplicationResponse):
        for acc in body.accepted:
            out.append(_event(APP, acc.applicationID, ts, ADD, 203))
        for rej in body.rejected:  # new, then rejected (YuniKorn's order)
            out.append(_event(APP, rej.applicationID, ts, ADD, 203))
            out.append(_event(APP, rej.applicationID, ts, SET, 202, message=rej.reason))
        for u in body.updated:
            detail = APP_STATES.get(u.state, 0)
            out.append(_event(APP, u.applicationID, u.stateTransitionTimestamp or ts, SET, detail,
                              message=u.message if detail == APP_STATES["Rejected"] else ""))
    elif isinstance(body, m.NodeResponse):
        for n in body.accepted:
            cap = node_capacity(core, rm, n.nodeID) if core is not None else None
            out.append(_event(NODE, n.nodeID, ts, SET, NODE_SCHEDULABLE, message="schedulable: true"))
            out.append(_event(NODE, n.nodeID, ts, ADD, message="Node added to the scheduler", resource=_res(cap)))
        for bad in body.rejected:
            out.append(_event(NODE, bad.nodeID, ts, message=bad.reason))
    elif isinstance(body, m.EventBatch):
        for e in body.events:
            out.append(_event(TYPES.get(e.type, 0), e.objectID, e.timestampNano or ts, CHANGES.get(e.eventChangeType, 0),
                              message=e.message))
    elif isinstance(body, m.StateBatch):
        for s in body.states:
            out.append(_event(REQUEST, s.allocationKey, ts, ref=s.applicartionID, message=s.reason))
    return out


# --- the timeline's history --------------------------------------------------------------------

_REJECT = re.compile("reject", re.IGNORECASE)


def timeline_kind(e: dict[str, Any]) -> int | None:
    """The index in KINDS of the row an event is drawn in, None for none: the tests of app.js's
    `ROWS`, so the counts of the history and the dots of the loaded events agree."""
    t, c, d = e["type"], e.get("eventChangeType", NONE), e.get("eventChangeDetail", 0)
    if t == APP:
        if c == ADD and d == 200:
            return 0
        if c == REMOVE:
            return 1
        if d == APP_STATES["Rejected"]:
            return 3
        return 2 if c == SET else None
    if t == REQUEST:
        if _REJECT.search(e.get("message", "")):
            return 3 if c == NONE else None
        return 4
    if t == NODE and d != NODE_ALLOC:
        return 5
    return None


class Ring:
    """Counts per cell of time (`width` ms) and kind, for the last `size` cells: a cell is
    `time // width`; `head` the newest one written. Writing a newer cell clears the cells
    between (their slots held counts `size` cells older); a cell older than the ring is not
    kept (`add` says False). One flat array: slot-major, a cell's kinds side by side."""

    def __init__(self, width: int, size: int, kinds: int = len(KINDS)) -> None:
        self.width, self.size, self.kinds = width, size, kinds
        self.counts = array("I", bytes(4 * size * kinds))  # 4 bytes a count: 4e9 a cell is beyond any log
        self.head: int | None = None

    def oldest(self) -> int | None:
        """The oldest cell kept (None: nothing counted yet)."""
        return None if self.head is None else self.head - self.size + 1

    def add(self, cell: int, kind: int, n: int = 1) -> bool:
        if cell < 0:
            return False
        if self.head is None or cell > self.head:
            first = cell - self.size + 1 if self.head is None else max(self.head + 1, cell - self.size + 1)
            for a, b in self._slots(first, cell + 1):
                self.counts[a * self.kinds:b * self.kinds] = array("I", bytes(4 * (b - a) * self.kinds))
            self.head = cell
        elif cell <= self.head - self.size:
            return False
        self.counts[(cell % self.size) * self.kinds + kind] += n
        return True

    def total(self, first: int, end: int, kind: int) -> int:
        """The count of `kind` in the cells [first, end) (0 for cells not kept)."""
        oldest = self.oldest()
        if oldest is None or self.head is None:
            return 0
        first, end = max(first, oldest), min(end, self.head + 1)
        return sum(sum(self.counts[a * self.kinds + kind:b * self.kinds:self.kinds]) for a, b in self._slots(first, end))

    def _slots(self, first: int, end: int) -> list[tuple[int, int]]:
        """The slot ranges [a, b) of the cells [first, end) (at most `size` of them): one, or
        two where they wrap."""
        if end <= first:
            return []
        a, n = first % self.size, end - first
        return [(a, a + n)] if a + n <= self.size else [(a, self.size), (0, a + n - self.size)]


class BadQuery(ValueError):
    """A parameter of /api/timeline that is not right: `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _whole(query: dict[str, str], field: str, default: int, low: int, high: int, what: str) -> int:
    text = query.get(field)
    if text is None:
        return default
    try:
        n = int(text)
    except ValueError:
        raise BadQuery(field, f"{text!r} is not a whole number ({what})") from None
    if not low <= n <= high:
        raise BadQuery(field, f"{n} is out of range: {low} to {high} ({what})")
    return n


def timeline_query(query: dict[str, str], now_ms: int) -> tuple[int, int, int]:
    """`?from=&to=&bins=` of /api/timeline: the window [from, to) in Unix ms (by default the
    hour before now) and the most bins wanted (1 to MAX_BINS, by default DEFAULT_BINS).
    BadQuery names the first parameter that is wrong."""
    ms = "Unix time in milliseconds"
    end = _whole(query, "to", min(max(now_ms, 1), MAX_MS), 1, MAX_MS, ms)
    start = _whole(query, "from", max(0, end - DEFAULT_SPAN_MS), 0, MAX_MS, ms)
    if start >= end:
        raise BadQuery("to", f"{end} is not after from ({start}): the window is [from, to)")
    bins = _whole(query, "bins", DEFAULT_BINS, 1, MAX_BINS, "the most bins the answer may have")
    return start, end, bins


class Histogram:
    """Counts of the timeline's kinds per second (the last HISTORY_SECONDS) and per minute (the
    last HISTORY_MINUTES), written by one task (`note`), read by `counts`."""

    def __init__(self, seconds: int = HISTORY_SECONDS, minutes: int = HISTORY_MINUTES) -> None:
        self.rings = (Ring(1_000, seconds), Ring(60_000, minutes))
        self.first_ms: int | None = None  # the time of the first message counted
        self.last_ms: int | None = None  # and of the last
        self.seq = 0  # the stream sequence of the last message counted

    def note(self, seq: int, ts: int, events: list[dict[str, Any]]) -> None:
        """Count the events of message `seq`, published at `ts` (ns)."""
        at = ts // 1_000_000
        for e in events:
            kind = timeline_kind(e)
            if kind is not None:
                t = min(e["timestampNano"] // 1_000_000, at)
                for ring in self.rings:
                    ring.add(t // ring.width, kind)
        self.first_ms = at if self.first_ms is None else min(self.first_ms, at)
        self.last_ms = at if self.last_ms is None else max(self.last_ms, at)
        self.seq = seq

    def counts(self, start: int, end: int, bins: int) -> dict[str, Any]:
        """The counts per kind in at most `bins` bins over [start, end) (ms): bins a whole
        number of cells wide, aligned to their width (a window that moves keeps its bins), so
        the first begins at or before `start` and the last ends at or after `end`. Per second
        where the window's bins are narrower than a minute and it lies in the last day, else
        per minute. `covered`: the time the answer's ring holds counts of (None: nothing
        counted yet). The work is at most one pass over a ring, whatever the window."""
        seconds, minutes = self.rings
        oldest = seconds.oldest()
        fine = (end - start) < bins * minutes.width and oldest is not None and start >= oldest * seconds.width
        ring = seconds if fine or oldest is None else minutes
        res = ring.width
        span = end - start
        width = res * max(1, -(-span // (bins * res)))
        wider = res * max(1, -(-span // (max(1, bins - 1) * res)))  # always fits when bins > 1
        while True:
            first = start // width * width
            n = -(-(end - first) // width)
            if n <= bins:
                break
            width = max(width + res, wider) if bins > 1 else width * 2
        step = width // res
        counts = {name: [ring.total(first // res + b * step, first // res + (b + 1) * step, k) for b in range(n)]
                  for k, name in enumerate(KINDS)}
        kept = ring.oldest()
        covered = None
        if kept is not None and self.first_ms is not None and self.last_ms is not None:
            covered = {"from": max(self.first_ms // res * res, kept * res), "to": self.last_ms}
        return {"from": first, "to": first + n * width, "binMs": width, "bins": n, "resolutionMs": res,
                "kinds": list(KINDS), "counts": counts, "covered": covered, "seq": self.seq}
