"""`ykbus explain APP [ASK]`: why an application's asks are pending, in words.

Reads the `applications` projection of the read API (`yk.v1.api.applications` of a live
core, or a core that replayed a log file) and prints, per pending ask, its reason: the
code, the message the RM got as its SI scheduling state, and the details.
"""

from __future__ import annotations

from typing import Any

from ykbus import limits
from ykbus.core.resources import fmt_quantity
from ykbus.core.why import PendingCode
from ykbus.tables import fmt_time


def q(resource: str, value: Any) -> str:
    """A quantity of the read API's details in the units people read (core/resources.py)."""
    return fmt_quantity(resource, int(value))


def q2(resource: str, a: Any, b: Any) -> tuple[str, str]:
    """Two quantities compared, in the units people read; exact when the units would show
    them alike (an ask of 4 GB and 1 byte against 4 GB read `3.73 Gi` against `3.73 Gi`)."""
    x, y = q(resource, a), q(resource, b)
    if x == y and int(a) != int(b):
        return f"{x} ({int(a):,})", f"{y} ({int(b):,})"
    return x, y


def _details(code: str, d: dict[str, Any], message: str = "") -> str:
    line = _figures(code, d)
    if code in ("TopologyNoDomain", "GangNoRoom") and "estimate" in d and d["estimate"] not in message:
        # when the set would start, as the read gives it (a reserved domain's is in the message)
        line = d["estimate"] if code == "TopologyNoDomain" else "; ".join(filter(None, (line, d["estimate"])))
    if code in ("NoNodeRoom", "Reserved") and "preemption" in d and not message.endswith(f": {d['preemption']}"):
        # (not when the message ends with it: why it cannot preempt, or has not tried, as the RM got it)
        line = "; ".join(part for part in (line, f"preemption: {d['preemption']}") if part)
    return line


def _figures(code: str, d: dict[str, Any]) -> str:
    if code == "NoNodeRoom":
        if d.get("schedulableNodes") == 0:
            states = ", ".join(f"{n} {s.lower()}" for n, s in d.get("notSchedulable", {}).items())
            return f"no node is schedulable ({states})" if states else "the partition has no node"
        if d.get("fitsNoNodeEmpty"):  # not a wait for room: no node as large as it
            empty = d.get("largestEmpty", {})
            short = {r: v for r, v in d.get("asked", {}).items() if v > empty.get(r, 0)}
            return "it fits no schedulable node even empty, and waits until a larger one joins: " + (
                "; ".join("{}: asked {}, the most a node has when empty {}".format(r, *q2(r, v, empty.get(r, 0)))
                          for r, v in short.items()) or "no one node has all of it")
        free = d.get("largestFree", {})
        line = ("every schedulable node is reserved for another ask or by a gang"
                if d.get("allReserved") else
                "; ".join("{}: asked {}, the most free on a schedulable node not reserved for another ask {}".format(
                    r, *q2(r, v, free.get(r, 0))) for r, v in d.get("asked", {}).items()))
        held = d.get("heldWithRoom", {})
        if held:
            line += "; room on " + ", ".join(f"{n} (reserved by gang {a})" for n, a in held.items())
        taken = d.get("reservedWithRoom", {})
        if taken:
            more = d.get("reservedWithRoomMore", 0)
            line += ("; room on " + ", ".join(f"{n} (reserved for {a})" for n, a in taken.items())
                     + (f" and {more} more reserved nodes" if more else ""))
        if "estimate" in d:  # when room for it will be free, by the runtime limits (docs/time.md)
            line += f"; {d['estimate']}"
        return line
    if code in ("QueueMax", "UserLimit", "GroupLimit"):
        who = f"user {d['user']}, " if "user" in d else f"group {d['group']}, " if "group" in d else ""
        r = d["resource"]
        return (f"{who}queue {d['queue']}, {r}: {q(r, d['used'])} used + {q(r, d['asked'])} asked "
                f"> max {q(r, d['max'])}")
    if code.endswith("MaxApplications"):
        who = f"user {d['user']}, " if "user" in d else f"group {d['group']}, " if "group" in d else ""
        return f"{who}queue {d['queue']}: {d['running']} of {d['max']} applications running"
    if code == "NotAdmitted":
        return f"queue {d['queue']} starts {d['first']} first"
    if code == "Reserved":
        missing = d.get("missing", {})
        line = f"node {d['node']} misses " + ", ".join(f"{r} {q(r, v)}" for r, v in missing.items()) if missing else ""
        if "startsIn" in d:  # its estimated start (in the message), how far off now
            line = "; ".join(part for part in (line, f"it starts {d['startsIn']} at the latest") if part)
        return line
    if code == "RequiredNodeFull":
        return "; ".join("{}: asked {}, free on node {} {}".format(r, q2(r, v, d.get("free", {}).get(r, 0))[0], d["node"],
                                                                  q2(r, v, d.get("free", {}).get(r, 0))[1])
                         for r, v in d.get("asked", {}).items())
    if code in ("RequiredNodeGone", "RequiredNodeDraining", "RMPaused", "GangIncomplete", "GangNoRoom",
                "GangTooLarge", "GangPending", "Replacing", "LeaderPending", "TopologyNoDomain", "Preempting"):
        return ""  # the message says it all
    return ", ".join(f"{k} {v}" for k, v in d.items())


SHOWN_KEYS = 3  # ask keys named on a grouped line


def _ask_lines(asks: dict[str, Any], ask_key: str | None, each: bool) -> list[str]:
    """A line (and its details) per ask, or, unless `each`, per group of asks that wait
    for the same reason (an application of 9,000 asks of one shape is one group)."""
    groups: dict[tuple[str, int, str, str], list[tuple[str, dict[str, Any]]]] = {}
    for key, k in asks.items():
        if ask_key is not None and key != ask_key:
            continue
        why = k.get("why")
        if why is None:
            reason, detail = "nothing pending", ""
        else:
            reason, detail = (f"{why['code']}: {why['message']}",
                              _details(why["code"], why.get("details", {}), why["message"]))
        groups.setdefault((key if each else "", int(k.get("priority") or 0), reason, detail), []).append((key, k))
    lines: list[str] = []
    for (_, priority, reason, detail), members in groups.items():
        pending = sum(k["pending"] for _, k in members)
        allocated = sum(k["allocated"] for _, k in members)
        if len(members) == 1:
            head = f"  ask {members[0][0]}"
        else:
            keys = ", ".join(key for key, _ in members[:SHOWN_KEYS])
            more = f" and {len(members) - SHOWN_KEYS} more" if len(members) > SHOWN_KEYS else ""
            head = f"  {len(members)} asks ({keys}{more}; --all lists each)"
        ranked = f", priority {priority}" if priority else ""
        lines.append(f"{head}: {pending} pending, {allocated} allocated{ranked}: {reason}")
        if detail:
            lines.append(f"    {detail}")
    return lines


def _short(level: str) -> str:
    return level.rpartition("/")[2] or level


def _topology_lines(t: dict[str, Any] | None, placed: bool) -> list[str]:
    """What an application asks of the topology and where it sits (docs/topology.md)."""
    if t is None or (t["request"] is None and not t["taskGroups"] and not t["domains"] and not t.get("reserved")):
        return []
    asked = [f"{r['mode']} {r['level']}" for r in ([t["request"]] if t["request"] else [])]
    asked += [f"task group {g}: {r['mode']} {r['level']}" for g, r in t["taskGroups"].items()]
    line = f"  topology: {'; '.join(asked) if asked else 'none asked'}"
    where = t.get("placedIn")
    if where is not None:
        line += f"; placed in {_short(where['level'])} {where['domain']}"
    elif placed and t["taskGroups"]:
        line += "; placed across domains (its task groups each in one of their own)"
    elif placed and (t["request"] or {}).get("mode") == "preferred":  # broader, then anywhere
        line += "; placed across domains: no domain of the partition held it whole"
    elif placed:  # required, not a gang: each set of asks sent together in a domain of its own
        line += "; placed across domains (its sets of asks, each sent together, each in one of their own)"
    elif t["request"] is not None or t["taskGroups"]:
        line += "; not placed yet"
    out = [line]
    spread = t.get("allocationsIn") or {}
    if spread:
        parts = [f"{n} in {_short(where.split(' ')[0])} {where.split(' ', 1)[1]}" if where != "-" else
                 f"{n} on nodes without the level" for where, n in spread.items()]
        out.append(f"  its {sum(spread.values())} allocations: {', '.join(parts)}")
    held = t.get("reserved")
    if held is not None:
        out.append(f"  it reserved {_short(held['level'])} {held['domain']}: no other ask takes room there until it "
                   "is placed")
    for group, kept in t["domains"].items():
        whose = "its" if group == "*" else f"task group {group}'s"
        out.append(f"  {whose} {_short(kept['level'])} {kept['domain']} is kept: a member lost and asked again "
                   "goes back into it")
    return out


def _backfilled_lines(backfilled: list[dict[str, Any]], ask_key: str | None) -> list[str]:
    """An allocation placed on room a reservation holds, ahead of it: whose, and by when its
    runtime limit ends it (before the reservation's estimated start: docs/time.md)."""
    out = []
    for b in backfilled:
        if ask_key is not None and b["allocationKey"] != ask_key:
            continue
        by = fmt_time(b["endsBy"]) + " UTC"
        out.append(f"  allocation {b['allocationKey']} on node {b['nodeID']}: backfilled, on room held for "
                   f"{b['lentBy']}; its runtime limit ends it by {by}, before that one's estimated start")
    return out


def _ended(app_id: str, rm_id: str, pname: str, t: dict[str, Any]) -> str:
    when = fmt_time(t["endedAt"]) + " UTC"
    how = f": {t['message']}" if t.get("message") else ""
    kept = (f"the core remembers the newest {limits.REJECTED_KEPT} rejected" if t["state"] == "Rejected" else
            f"the core remembers it for {limits.TERMINATED_TIMEOUT_NS // 3_600_000_000_000} h after it ended")
    return (f"application {app_id} (rm {rm_id}, partition {pname}, queue {t['queue'] or '?'}): {t['state']} at "
            f"{when}{how} ({kept})")


def explain(applications: dict[str, Any], app_id: str, ask_key: str | None = None,
            rm: str | None = None, terminated: dict[str, Any] | None = None, each: bool = False) -> list[str]:
    """Lines explaining `app_id` (and only `ask_key`, if given) from an `applications`
    answer: `{rm: {partition: {app id: {...}}}}`, and, for an application that ended, from a
    `terminated` answer of the same shape. Asks that wait for the same reason are one line
    with their count, unless `each`. Empty when the application is not there."""
    lines: list[str] = []
    for rm_id, parts in applications.items():
        if rm and rm_id != rm:
            continue
        for pname, apps in parts.items():
            a = apps.get(app_id)
            if a is None:
                continue
            ranked = f", priority {a['maxPriority']}" if a.get("maxPriority") else ""  # its highest pending ask's
            lines.append(f"application {app_id} (rm {rm_id}, partition {pname}, queue {a['queue']}): {a['state']}{ranked}")
            lines += _topology_lines(a.get("topology"), bool(a["allocations"]))
            lines += _ask_lines(a["asks"], ask_key, each)
            lines += _backfilled_lines(a.get("backfilled", []), ask_key)
            if ask_key is not None and ask_key not in a["asks"]:
                lines.append(f"  ask {ask_key}: not known to this application")
    for rm_id, parts in (terminated or {}).items():
        if rm and rm_id != rm:
            continue
        for pname, ended in parts.items():
            if app_id in ended:
                lines.append(_ended(app_id, rm_id, pname, ended[app_id]))
    return lines


OVERVIEW_LINES = 20  # applications listed by `ykbus explain` without an application id


# The codes of an ask that waits for another of its application (its gang's placeholders, its
# leader): the application's reason is that ask's, which the list names instead
WAITS_FOR_ANOTHER = frozenset({PendingCode.GANG_PENDING.value, PendingCode.LEADER_PENDING.value})


def overview(applications: dict[str, Any], rm: str | None = None, limit: int = OVERVIEW_LINES) -> list[str]:
    """`ykbus explain` without an application: from the read API's brief `applications`
    answer (each application's pending asks counted by reason code), those that have pending
    asks, most pending first (ties by id), each with its asks' most common reason, not counting
    asks that wait for another ask of it while another reason holds (WAITS_FOR_ANOTHER)."""
    waiting: list[tuple[int, str, str, str]] = []
    for rm_id, parts in applications.items():
        if rm and rm_id != rm:
            continue
        for apps in parts.values():
            for app_id, a in apps.items():
                codes: dict[str, int] = a["waiting"]
                pending = sum(codes.values())
                if not pending:
                    continue
                causes = [c for c in sorted(codes) if c not in WAITS_FOR_ANOTHER] or sorted(codes)
                code = max(causes, key=lambda c: codes[c]) if codes else "Queued"
                waiting.append((-pending, app_id, rm_id, f"{a['queue']}, {a['state']}: {pending} pending, {code}"))
    waiting.sort()
    lines = [f"  {app_id} (rm {rm_id}, queue {text})" for _, app_id, rm_id, text in waiting[:limit]]
    if len(waiting) > limit:
        lines.append(f"  and {len(waiting) - limit} more")
    head = (f"{len(waiting)} application{' has' if len(waiting) == 1 else 's have'} pending asks"
            + (":" if waiting else ""))
    return [head, *lines, "ykbus explain APP tells why each of its asks waits."] if waiting else [head]
