"""`ykbus explain APP [ASK]`: why an application's asks are pending, in words.

Reads the `applications` projection of the read API (`yk.v1.api.applications` of a live
core, or a core that replayed a log file) and prints, per pending ask, its reason: the
code, the message the RM got as its SI scheduling state, and the details.
"""

from __future__ import annotations

from typing import Any


def _details(code: str, d: dict[str, Any]) -> str:
    if code == "NoNodeRoom":
        free = d.get("largestFree", {})
        return "; ".join(f"{r}: asked {v}, the most free on any schedulable node {free.get(r, 0)}"
                         for r, v in d.get("asked", {}).items())
    if code in ("QueueMax", "UserLimit", "GroupLimit"):
        who = f"user {d['user']}, " if "user" in d else f"group {d['group']}, " if "group" in d else ""
        return (f"{who}queue {d['queue']}, {d['resource']}: {d['used']} used + {d['asked']} asked "
                f"> max {d['max']}")
    if code.endswith("MaxApplications"):
        who = f"user {d['user']}, " if "user" in d else f"group {d['group']}, " if "group" in d else ""
        return f"{who}queue {d['queue']}: {d['running']} of {d['max']} applications running"
    if code == "NotAdmitted":
        return f"queue {d['queue']} starts {d['first']} first"
    if code == "Reserved":
        missing = d.get("missing", {})
        return f"node {d['node']} misses " + ", ".join(f"{r} {v}" for r, v in missing.items()) if missing else ""
    if code == "RequiredNodeFull":
        return "; ".join(f"{r}: asked {v}, free on node {d['node']} {d.get('free', {}).get(r, 0)}"
                         for r, v in d.get("asked", {}).items())
    if code in ("RequiredNodeGone", "RequiredNodeDraining", "RMPaused", "GangIncomplete", "GangNoRoom",
                "GangTooLarge", "GangPending", "Replacing"):
        return ""  # the message says it all
    return ", ".join(f"{k} {v}" for k, v in d.items())


def explain(applications: dict[str, Any], app_id: str, ask_key: str | None = None,
            rm: str | None = None) -> list[str]:
    """Lines explaining `app_id` (and only `ask_key`, if given) from an `applications`
    answer: `{rm: {partition: {app id: {...}}}}`. Empty when the application is not there."""
    lines: list[str] = []
    for rm_id, parts in applications.items():
        if rm and rm_id != rm:
            continue
        for pname, apps in parts.items():
            a = apps.get(app_id)
            if a is None:
                continue
            lines.append(f"application {app_id} (rm {rm_id}, partition {pname}, queue {a['queue']}): {a['state']}")
            for key, k in a["asks"].items():
                if ask_key is not None and key != ask_key:
                    continue
                head = f"  ask {key}: {k['pending']} pending, {k['allocated']} allocated"
                why = k.get("why")
                if why is None:
                    lines.append(f"{head}: nothing pending")
                    continue
                lines.append(f"{head}: {why['code']}: {why['message']}")
                detail = _details(why["code"], why.get("details", {}))
                if detail:
                    lines.append(f"    {detail}")
            if ask_key is not None and ask_key not in a["asks"]:
                lines.append(f"  ask {ask_key}: not known to this application")
    return lines
