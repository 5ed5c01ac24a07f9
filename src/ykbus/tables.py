"""`ykbus queues`, `ykbus apps`, `ykbus nodes`: the read API's answers as aligned tables
(docs/operations.md, "Tables"), from a live core over NATS or a log replayed here.

Each function takes the read API's answer for its verb (`{rm: {partition: ...}}`, the shape
`yk.v1.api.<verb>` returns) and gives the lines of one table, a row per queue, application
or node of every RM and partition, in a stable order. Quantities read as everywhere a person
reads them (`fmt_quantity` of core/resources.py): vcore in cores, memory in binary units,
others as counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ykbus.core.resources import fmt_quantity

Answer = dict[str, dict[str, dict[str, Any]]]  # rm -> partition -> the verb's section


# what a terminal would act on rather than show (an RM's ids may hold any character): escaped
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7f, *range(0x80, 0xa0)] if c not in (0x09, 0x0a)}
_CONTROLS.update({c: f"\\u{c:04x}" for c in [*range(0x202a, 0x202f), *range(0x2066, 0x206a), 0x200e, 0x200f, 0x061c]})
_IN_CELL = {0x0a: "\\n", 0x09: "\\t"}  # a cell's own line or tab would make a row of its own


def shown(text: str) -> str:
    """`text` for a terminal: control characters and bidirectional overrides escaped (`\\x1b`),
    lines and tabs kept."""
    return text.translate(_CONTROLS)


def resources(res: dict[str, Any] | None) -> str:
    """`memory: 4 Gi, vcore: 2 cores` (`-` when empty), by name: the quantities read as ints
    (strings too)."""
    if not res:
        return "-"
    return ", ".join(f"{k}: {fmt_quantity(k, int(v))}" for k, v in sorted(res.items()))


def align(head: tuple[str, ...], rows: Iterable[tuple[str, ...]], right_from: int | None = None) -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell; from column `right_from` on
    (numbers), right-aligned."""
    rows = [tuple(v.translate(_IN_CELL) for v in row) for row in rows]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = len(head) if right_from is None else right_from
    return ["  ".join(v.rjust(w) if i >= right else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True)))
            .rstrip() for row in [head, *rows]]


def _each(answer: Answer) -> Iterable[tuple[str, str, dict[str, Any]]]:
    for rm in sorted(answer):
        for partition in sorted(answer[rm]):
            yield rm, partition, answer[rm][partition]


def queues(answer: Answer) -> list[str]:
    rows = []
    for rm, partition, section in _each(answer):
        held: dict[str, int] = dict.fromkeys(section, 0)  # a queue's applications and its subtree's, as RUNNING counts
        for path, q in section.items():
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                above = ".".join(parts[:i])
                if above in held:
                    held[above] += len(q.get("applications", []))
        for path in sorted(section):
            q = section[path]
            # YuniKorn's queue states; a queue a placement rule created (not in the configuration) says so
            state = "Draining" if q.get("draining") else "Active" if q.get("managed", True) else "Active (dynamic)"
            rows.append((rm, partition, path, "leaf" if q.get("leaf") else "parent", str(held[path]),
                         str(q.get("runningApplications", 0)), resources(q.get("guaranteed")), resources(q.get("max")),
                         resources(q.get("allocated")), resources(q.get("pending")), state))
    return align(("RM", "PARTITION", "QUEUE", "KIND", "APPS", "RUNNING", "GUARANTEED", "MAX", "ALLOCATED", "PENDING",
                  "STATE"), rows)


def apps(answer: Answer, ended: bool = False) -> list[str]:
    """The rows of the read API's brief `applications` answer (`brief`: its filters applied by
    the core), or, `ended`, of its `terminated` answer: how and when each ended."""
    rows = []
    if ended:
        for rm, partition, section in _each(answer):
            for app_id in sorted(section):
                a = section[app_id]
                rows.append((rm, partition, app_id, a.get("queue", ""), a.get("state", ""), fmt_time(a.get("endedAt")),
                             str(a.get("message") or "")))
        return align(("RM", "PARTITION", "APPLICATION", "QUEUE", "STATE", "ENDED", "MESSAGE"), rows)
    for rm, partition, section in _each(answer):
        for app_id in sorted(section):
            a = section[app_id]
            pending = sum(a.get("waiting", {}).values())
            why = (a.get("why") or {}).get("code", "") if pending else ""
            rows.append((rm, partition, app_id, a.get("queue", ""), a.get("state", ""), a.get("user", ""),
                         str(a.get("allocations", 0)), str(pending), resources(a.get("allocated")), why))
    return align(("RM", "PARTITION", "APPLICATION", "QUEUE", "STATE", "USER", "ALLOCATIONS", "PENDING", "ALLOCATED",
                  "WHY PENDING"), rows)


ENDED_STATES = ("completed", "failed", "rejected", "expired")  # kept in `terminated` once ended


def apps_request(rm: str | None, queue: str | None, state: str | None) -> tuple[str, dict[str, object]]:
    """The read API's verb and request of `ykbus apps`: the filters applied by the core (a
    cluster's list need not fit one message unfiltered); an ended state reads `terminated`."""
    body: dict[str, object] = {k: v for k, v in (("rm", rm), ("queue", queue), ("state", state)) if v}
    if state is not None and state.lower() in ENDED_STATES:
        return "terminated", body
    return "applications", {**body, "brief": True}


def fmt_time(ns: object) -> str:
    """Log time (ns since the epoch) as UTC to the second (`ykbus explain` adds " UTC"); ""
    for none."""
    import datetime

    if not isinstance(ns, int):
        return ""
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def nodes(answer: Answer) -> list[str]:
    rows = []
    for rm, partition, section in _each(answer):
        for node_id in sorted(section):
            n = section[node_id]
            cap, alloc = n.get("capacity", {}), n.get("allocated", {})
            used = max((int(alloc.get(k, 0)) * 100 // int(v) for k, v in cap.items() if int(v) > 0), default=0)
            reserved = (f"gang {n['heldFor']}" if n.get("heldFor") else
                        f"ask {n['reservedFor']}" if n.get("reservedFor") else "")
            rows.append((rm, partition, node_id, str(n.get("state", "")), resources(cap), resources(alloc),
                         f"{used}%", str(len(n.get("allocations", []))), reserved))
    return align(("RM", "PARTITION", "NODE", "STATE", "CAPACITY", "ALLOCATED", "USED", "ALLOCATIONS", "RESERVED FOR"),
                 rows)


TABLES: dict[str, tuple[str, Callable[..., list[str]]]] = {
    "queues": ("queues", queues), "apps": ("applications", apps), "nodes": ("nodes", nodes),
}


def app_filter_problem(state: str | None) -> str:
    """Why `--state` names no application state ("" if it names one, in any case)."""
    from ykbus.core.lifecycle import AppState

    names = [s.value for s in AppState]
    if state is None or state.lower() in (n.lower() for n in names):
        return ""
    return f"--state {state} is not an application state ({', '.join(names)})"


def queue_missing(queue: str, queues: dict) -> str:
    """Why `--queue` names no queue of a `queues` answer ("" if some RM's partition has it),
    with the nearest names."""
    import difflib

    paths = sorted({path for parts in queues.values() for section in parts.values() for path in section})
    if queue in paths:
        return ""
    near = difflib.get_close_matches(queue, paths, n=1, cutoff=0.6)
    return (f"no queue {queue} (" + (f"did you mean {near[0]}? " if near else "")
            + f"the queues: {', '.join(paths[:20])}{', ...' if len(paths) > 20 else ''})")


def unregistered(rm: str | None, answer: dict) -> str:
    """Why `rm` names no RM registered where `answer` was read (its `health` part's `rms`;
    one Stopped has left), with those that are; "" when it does (or none is named)."""
    live = sorted(r for r, state in answer.get("rms", {rm: None}).items() if state != "Stopped")
    if rm and rm not in live:
        return f"rm: {rm!r} is not registered (registered: {', '.join(live) or 'none'})"
    return ""
