"""A user's or group's limit below a limit for them higher up (YuniKorn's configvalidator,
`checkLimitResource`): a child queue's limit for `bob` may not allow more than the limit for
`bob` in force above it (from the queues up the tree that have one, each resource and the
application count taken as the least on the way), since that one holds anyway and the
child's would do nothing. A name with no limit of its own above is held to the `*` limit
above (YuniKorn's check: for a user it holds anyway), and its own limit is what the queues
below it are held to (as YuniKorn carries it); resources and counts the limit above does
not set are not compared.

core/config.py imports this module, never the reverse (it reads a configured queue's
`limits` and `queues` as `QueueConfig` has them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ykbus.core.resources import fmt_quantity

# (kind, name) -> (the least maxresources on the way down, the least maxapplications, 0: none)
Above = dict[tuple[str, str], tuple[dict[str, int], int]]


def check_nested_limits(q: Any, path: str, add: Callable[[str, str], None], above: Above | None = None) -> None:
    """Check `q` (at config `path`) and every queue below it against the limits above it;
    `add(path, reason)` takes each error."""
    inherited = above or {}
    mine: Above = {}
    for i, lim in enumerate(q.limits):
        for kind, names in (("user", lim.users), ("group", lim.groups)):
            for name in names:
                key = (kind, name)
                if key not in inherited and name != "*" and (kind, "*") in inherited:
                    key, above_what = (kind, "*"), f"the '*' {kind} limit up the tree"
                else:
                    above_what = "the limit for them up the tree"
                res, apps = inherited.get(key, ({}, 0))
                for r, v in sorted(lim.maxresources.items()):
                    if r in res and v > res[r]:
                        add(f"{path}.limits[{i}].maxresources", f"{kind} {name!r}: {r} {fmt_quantity(r, v)} is above "
                            f"{above_what}, {fmt_quantity(r, res[r])}")
                if apps and lim.maxapplications > apps:
                    add(f"{path}.limits[{i}].maxapplications",
                        f"{kind} {name!r}: {lim.maxapplications} is above {above_what}, {apps}")
                if key != (kind, name):  # held to the '*' limit above, carried down as its own (as YuniKorn does)
                    res, apps = {}, 0
                least = {**res, **{r: min(v, res.get(r, v)) for r, v in lim.maxresources.items()}}
                counts = [x for x in (apps, lim.maxapplications) if x]
                mine[(kind, name)] = (least, min(counts) if counts else 0)
    below = {**inherited, **mine}
    for i, child in enumerate(q.queues):
        check_nested_limits(child, f"{path}.queues[{i}]", add, below)
