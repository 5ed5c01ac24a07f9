"""`ykbus whatif LOG --queues NEW.yaml`: what a recorded log's decisions would have been under
another queue configuration.

The log is replayed twice, as recorded and with NEW.yaml in place of the queue configuration
of one policy group (`--policy-group`, or `--rm` for the group of that RM; a log whose RMs
are all of one group needs neither), and the allocations compared: per ask (RM,
application, allocationKey), the nodes its allocations went to, in order. An allocation is
*added* or *lost* when one replay made more of an ask's allocations than the other, *moved*
when both made it on different nodes. Time to placement is the log time from the entry that
asked to the entry that placed it; the report gives medians over the asks both replays placed,
per queue (the application's queue after the change) and per application that changed. The
RMs' releases name the recorded UUIDs: in the second replay they release its allocation of
the same ask (`_renamed`).
Deterministic: the same log and file give the same report, byte for byte.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ykbus.core.config import SchedulerConfig
from ykbus.core.entries import Entry
from ykbus.log.replay import guarded_core
from ykbus.si import codec
from ykbus.tables import align

AskId = tuple[str, str, str]  # (rm, application, allocationKey)


@dataclass
class Outcome:
    """One replay's decisions: per ask, the nodes and log times of its allocations in order;
    when each ask was first asked; the queue of each application at the end."""

    placed: dict[AskId, list[tuple[str, int]]] = field(default_factory=dict)
    asked: dict[AskId, int] = field(default_factory=dict)
    queues: dict[tuple[str, str], str] = field(default_factory=dict)
    # (RM, UUID) -> the allocation it named: its ask and which of the ask's allocations it was
    made: dict[tuple[str, str], tuple[AskId, int]] = field(default_factory=dict)
    # (RM, what, its id) -> the reason of its first rejection: applications, nodes, asks
    rejected: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def allocations(self) -> int:
        return sum(len(v) for v in self.placed.values())


def _body(entry: Entry) -> dict[str, Any]:
    """An entry's message as plain objects ({} for a bad body: the core rejects it anyway),
    within the core's bounds (a body nested past them is bad, not a RecursionError)."""
    try:
        codec.check_bounds(entry.msg, entry.encoding)
        body = (msgspec.json.decode(entry.msg) if entry.encoding == "json" else msgspec.msgpack.decode(entry.msg))
    except (codec.DecodeError, msgspec.DecodeError, ValueError, RecursionError):
        return {}
    return body if isinstance(body, dict) else {}


def policy_groups(entries: Iterable[Entry]) -> dict[str, str]:
    """RM -> the policy group it registered with (its last registration), in RM order."""
    groups = {entry.rm: str(_body(entry).get("policyGroup", "")) for entry in entries
              if entry.kind == "register" and entry.rm}
    return dict(sorted(groups.items()))


def policy_group(entries: list[Entry], rm: str | None, group: str | None) -> str | None:
    """The policy group a queue file is for: `group`, or `rm`'s, or the only one of the
    log's RMs (None: a log with no RM, where it is for everyone). ValueError, naming the
    choices, when it is not one of the log's or the log has several and none was said."""
    groups = policy_groups(entries)
    choices = "; ".join(f"policy group {g!r} (RM {', '.join(r for r, gr in groups.items() if gr == g)})"
                        for g in sorted(set(groups.values())))
    if rm is not None:
        if rm not in groups:
            raise ValueError(f"--rm {rm}: no RM of that name registered in the log; it has {choices or 'none'}")
        return groups[rm]
    if group is not None:
        if group not in groups.values():
            raise ValueError(f"--policy-group {group}: no RM of the log registered with it; it has {choices or 'none'}")
        return group
    if len(set(groups.values())) > 1:
        raise ValueError(f"the log has RMs of several policy groups: {choices}. Say which one the queue file is "
                         "for: --policy-group GROUP or --rm RM")
    return next(iter(groups.values()), None)


def _list(body: dict[str, Any], key: str) -> list[Any]:
    """`body[key]` if it is a list, else none (a bad body: the core rejects it, naming it)."""
    value = body.get(key)
    return value if isinstance(value, list) else []


def _asks_in(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(application, allocationKey) of the asks an alloc entry's `body` carries (bad bodies: none)."""
    items = [a for key in ("asks", "allocations") for a in _list(body, key) if isinstance(a, dict)]
    return [(str(a.get("applicationID", "")), str(a.get("allocationKey", ""))) for a in items
            if not a.get("nodeID")]


def outcome(entries: list[Entry], queues: SchedulerConfig | None, group: str | None = None,
            recorded: Outcome | None = None) -> Outcome:
    """Replay `entries` (under `queues`, if given: for the RMs of policy group `group`, or
    for every RM if None) and keep what `Outcome` holds. With the `recorded` replay's
    outcome, the RMs' releases are of this replay's allocations (`_renamed`)."""
    guard = guarded_core(queues, policy_group=group)
    result = Outcome()
    uuids: dict[tuple[AskId, int], str] = {}  # this replay's UUID of each allocation of `made`
    told: set[tuple[str, str]] = set()  # (RM, UUID) of allocations an RM reported (recovered): both replays' own
    for entry in entries:
        if entry.kind == "alloc":
            body = _body(entry)  # (read once: its asks, what it recovers, what it releases)
            for app_id, key in _asks_in(body):
                result.asked.setdefault((entry.rm, app_id, key), entry.ts)
            if recorded is not None:
                told.update((entry.rm, u) for u in _reported(entry.kind, body))
                entry = _renamed(entry, body, recorded.made, uuids, told)
        elif entry.kind == "node" and recorded is not None and b"existingAllocations" in entry.msg:
            told.update((entry.rm, u) for u in _reported(entry.kind, _body(entry)))
        for out in guard.apply(entry):
            _rejections(out, result.rejected)
            if out.kind == "alloc":
                for a in out.msg.new:
                    ask = (out.rm, a.applicationID, a.allocationKey)
                    made = result.placed.setdefault(ask, [])
                    result.made[(out.rm, a.UUID)] = (ask, len(made))
                    if recorded is not None:
                        uuids[(ask, len(made))] = a.UUID
                    made.append((a.nodeID, entry.ts))
    dump: dict[str, Any] = guard.core.dump(sections=("applications", "terminated"))
    for rm_id, rm in dump["rms"].items():
        for part in rm["partitions"].values():
            for app_id, ended in part["terminated"].items():
                result.queues[(rm_id, app_id)] = ended["queue"]
            for app_id, live in part["applications"].items():
                result.queues[(rm_id, app_id)] = live["queue"]
    return result


def _rejections(out: Any, into: dict[tuple[str, str, str], str]) -> None:
    """The applications, nodes and asks output `out` rejects, each's first reason."""
    if out.kind == "app":
        found = [("application", r.applicationID, r.reason) for r in out.msg.rejected]
    elif out.kind == "node":
        found = [("node", r.nodeID, r.reason) for r in out.msg.rejected]
    elif out.kind == "alloc":
        found = [("ask", f"{r.applicationID}/{r.allocationKey}", r.reason) for r in out.msg.rejected]
    else:
        return
    for what, item, reason in found:
        into.setdefault((out.rm, what, item), reason)


def _reported(kind: str, body: dict[str, Any]) -> list[str]:
    """The UUIDs of the allocations a node or alloc entry's `body` reports as running (a
    node's `existingAllocations`, SI 1.6's `allocations`): an RM recovering them names them itself."""
    items: list[Any] = []
    if kind == "node":
        for info in _list(body, "nodes"):
            if isinstance(info, dict):
                items += _list(info, "existingAllocations")
    else:
        items = [a for a in _list(body, "allocations") if isinstance(a, dict) and a.get("nodeID")]
    return [str(a["UUID"]) for a in items if isinstance(a, dict) and isinstance(a.get("UUID"), str) and a["UUID"]]


def _renamed(entry: Entry, body: dict[str, Any], recorded: dict[tuple[str, str], tuple[AskId, int]],
             uuids: dict[tuple[AskId, int], str], told: set[tuple[str, str]]) -> Entry:
    """`entry` with the allocations it releases named as this replay named them. An RM
    releases by the UUID the recorded run gave, and a UUID numbers an allocation within its
    entry across every RM (`<seq>-<n>`): once one RM's decisions change, the same allocation
    of another RM (of the same ask, its same n-th) may have another UUID here. A release of
    one this replay did not make is left out (not sent under another allocation's UUID, nor
    lengthened past a bound); one the RM reported itself (`told`: recovered) keeps its UUID.
    `body`: the entry's, decoded (changed in place when a release is)."""
    releases = body.get("releases")
    items = releases.get("allocationsToRelease") if isinstance(releases, dict) else None
    if not isinstance(items, list):
        return entry
    kept: list[Any] = []
    for item in items:
        uuid = item.get("UUID") if isinstance(item, dict) else None
        made = recorded.get((entry.rm, uuid)) if isinstance(uuid, str) and (entry.rm, uuid) not in told else None
        if made is None:
            kept.append(item)  # not one the recorded run made (by key, recovered, or bad): as it was
        elif made in uuids:
            kept.append({**item, "UUID": uuids[made]})
    if kept == items:
        return entry
    assert isinstance(releases, dict)
    releases["allocationsToRelease"] = kept
    encode = msgspec.json.encode if entry.encoding == "json" else msgspec.msgpack.encode
    return msgspec.structs.replace(entry, msg=encode(body))


def queues_missing(old: Outcome, rms: list[str], config: SchedulerConfig) -> list[str]:
    """The queues the applications of `rms` ran in under the recorded configuration, when
    `config` has none of them (else []): a file likely meant for another policy group."""
    paths: set[str] = set()
    for part in config.partitions:
        stack = [(part.root, part.root.name)]
        while stack:
            q, path = stack.pop()
            paths.add(path)
            stack += [(c, f"{path}.{c.name}") for c in q.queues]
    ran = sorted({queue for (rm, _app), queue in old.queues.items() if rm in rms and queue != "root"})
    return [] if not ran or any(q in paths for q in ran) else ran


@dataclass
class Row:
    """Counts of one group (a queue or an application)."""

    before: int = 0
    after: int = 0
    added: int = 0
    lost: int = 0
    moved: int = 0
    waits_before: list[int] = field(default_factory=list)
    waits_after: list[int] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.lost or self.moved) or self.waits_before != self.waits_after


@dataclass
class Comparison:
    total: Row
    queues: dict[str, Row]
    apps: dict[tuple[str, str], Row]
    # rejected in the new replay only, and in the recorded one only: (RM, what, id, reason)
    rejected: list[tuple[str, str, str, str]] = field(default_factory=list)
    accepted: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Every allocation made, on the same node, after the same wait; the same rejected."""
        return not self.total.changed and not self.rejected and not self.accepted


NO_QUEUE = "(no application)"  # the row of asks whose application neither replay knows at the end
# (it never existed, was rejected, or ended longer ago than the core remembers ended ones)


def compare(old: Outcome, new: Outcome) -> Comparison:
    total, queues, apps = Row(), {}, {}
    for ask in sorted(set(old.placed) | set(new.placed) | set(old.asked) | set(new.asked)):
        rm_id, app_id, _ = ask
        was, now = old.placed.get(ask, []), new.placed.get(ask, [])
        queue = new.queues.get((rm_id, app_id)) or old.queues.get((rm_id, app_id)) or NO_QUEUE
        # an RM's queue, as an RM's application: two RMs' root.a are two queues
        rows = (total, queues.setdefault(f"{rm_id}/{queue}", Row()), apps.setdefault((rm_id, app_id), Row()))
        both = min(len(was), len(now))
        moved = sum(1 for i in range(both) if was[i][0] != now[i][0])
        wait = None
        if was and now and ask in old.asked and ask in new.asked:  # placed in both: how long each waited
            wait = (was[0][1] - old.asked[ask], now[0][1] - new.asked[ask])
        for row in rows:
            row.before += len(was)
            row.after += len(now)
            row.added += max(0, len(now) - len(was))
            row.lost += max(0, len(was) - len(now))
            row.moved += moved
            if wait is not None:
                row.waits_before.append(wait[0])
                row.waits_after.append(wait[1])
    rejected = [(*k, r) for k, r in sorted(new.rejected.items()) if k not in old.rejected]
    accepted = [(*k, r) for k, r in sorted(old.rejected.items()) if k not in new.rejected]
    return Comparison(total, queues, apps, rejected, accepted)


def _seconds(waits: list[int]) -> str:
    return f"{statistics.median(waits) / 1e9:.2f} s" if waits else "-"


def report(c: Comparison, limit: int = 20) -> list[str]:
    """The report's lines: the totals, per queue, and the applications that changed (the
    `limit` with the most allocations added, lost or moved)."""
    t = c.total
    lines = [f"allocations: {t.before:,} before, {t.after:,} after: {t.added:,} added, {t.lost:,} lost, "
             f"{t.moved:,} moved to another node",
             f"time to placement (median over {len(t.waits_before):,} asks placed in both): "
             f"{_seconds(t.waits_before)} before, {_seconds(t.waits_after)} after"]
    if c.same:
        lines.append("no decision changes")
        return lines
    for told, items in (("rejected in the new replay only", c.rejected), ("rejected as recorded, not now", c.accepted)):
        if items:
            counts = {what: sum(1 for _, w, _, _ in items if w == what) for what in ("node", "application", "ask")}
            rm, what, item, reason = items[0]
            lines.append(f"{told}: " + ", ".join(f"{n:,} {w}{'s' if n > 1 else ''}" for w, n in counts.items() if n)
                         + f" (the first, {what} {item} of RM {rm}: {reason})")
    lines.append("")
    lines += _table("queue", [(q, r) for q, r in sorted(c.queues.items())])
    changed = sorted(((a, r) for a, r in c.apps.items() if r.changed),
                     key=lambda ar: (-(ar[1].added + ar[1].lost + ar[1].moved), ar[0]))
    if changed:
        lines.append("")
        lines += _table("application", [(f"{rm}/{app}", r) for (rm, app), r in changed[:limit]])
        if len(changed) > limit:
            lines.append(f"... and {len(changed) - limit:,} more applications changed")
    return lines


def _table(what: str, rows: Iterable[tuple[str, Row]]) -> list[str]:
    head = (what, "before", "after", "added", "lost", "moved", "wait before", "wait after")
    body = [(name, f"{r.before:,}", f"{r.after:,}", f"{r.added:,}", f"{r.lost:,}", f"{r.moved:,}",
             _seconds(r.waits_before), _seconds(r.waits_after)) for name, r in rows]
    return align(head, body, right_from=1)


def as_json(c: Comparison) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        return {"before": r.before, "after": r.after, "added": r.added, "lost": r.lost, "moved": r.moved,
                "waitBeforeMedianNs": int(statistics.median(r.waits_before)) if r.waits_before else None,
                "waitAfterMedianNs": int(statistics.median(r.waits_after)) if r.waits_after else None}

    def listed(items: list[tuple[str, str, str, str]]) -> list[dict[str, str]]:
        return [{"rm": rm, "kind": what, "id": item, "reason": reason} for rm, what, item, reason in items]

    return {"same": c.same, "total": row(c.total), "queues": {q: row(r) for q, r in sorted(c.queues.items())},
            "applications": {f"{rm}/{app}": row(r) for (rm, app), r in sorted(c.apps.items()) if r.changed},
            "rejectedNow": listed(c.rejected), "rejectedBefore": listed(c.accepted)}
