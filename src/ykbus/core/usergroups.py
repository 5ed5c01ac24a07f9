"""Whom the user and group limits hold, as YuniKorn's user and group manager has it: an
application's groups (`model.ugi_groups`), the one group its group limits count it under
(`app_group`), and the limit of a queue for a user or for that group. Read by the changes
(an application's trackers) and the REST API (the usage of users and groups); drawn in
docs/configuration.md, "User and group limits".
"""

from __future__ import annotations

from ykbus.core.acl import WILDCARD
from ykbus.core.config import LimitConfig
from ykbus.core.model import Queue


def user_limit(queue: Queue, user: str) -> LimitConfig | None:
    """The limit of `queue` for `user`: the one that names them, else the `*` user limit
    (each user on their own under it), else None."""
    own = wild = None
    for lim in queue.limits:
        if user in lim.users:
            own = lim
        elif WILDCARD in lim.users and wild is None:
            wild = lim
    return own or wild


def group_limit(queue: Queue, group: str) -> LimitConfig | None:
    """The limit of `queue` for the tracked group `group` (`*`: the `*` group limit)."""
    return next((lim for lim in queue.limits if group in lim.groups), None)


def app_group(path: list[Queue], groups: list[str]) -> str:
    """The one group the group limits count an application under, as YuniKorn's user and
    group manager resolves it: from the leaf (`path[0]`) up, at the first queue where a
    group limit applies to it, the first group its limits name (in the limits' order) that
    the user is in, else `*` if that queue has a `*` group limit (all the users it takes
    share it); "" if none applies up to root, or the user is in no group (YuniKorn's
    `ensureGroup`: only a user without a name has none here)."""
    if not groups:
        return ""
    for q in path:
        if not q.limits:
            continue
        wildcard = False
        for lim in q.limits:
            for g in lim.groups:
                if g == WILDCARD:
                    wildcard = True
                elif g in groups:
                    return g
        if wildcard:
            return WILDCARD
    return ""


def app_limits(path: list[Queue], user: str, groups: list[str]) -> list[tuple[Queue, str, str, LimitConfig]]:
    """The limits that hold an application of `user` (in `groups`) on its `path` (leaf to
    root), as (queue, kind, tracked name, limit): on each queue its user limit, and the limit
    there of the one group `app_group` counts it under, if that queue has one (a group's
    limits are its own: a named group is not held by a `*` group limit, nor the reverse)."""
    out: list[tuple[Queue, str, str, LimitConfig]] = []
    group = app_group(path, groups)
    for q in path:
        if not q.limits:
            continue
        lim = user_limit(q, user)
        if lim is not None:
            out.append((q, "user", user, lim))
        glim = group_limit(q, group) if group else None
        if glim is not None:
            out.append((q, "group", group, glim))
    return out
