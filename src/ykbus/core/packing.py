"""First fit of a gang's members over nodes' free room, in order: the one packing rule that
topology (a gang inside one domain, core/topology.py) and the start-time estimate (a gang
once the allocations in its way end, core/timeline.py) both judge by. Nothing is changed.

Cost: O(nodes + members) per distinct shape: a node that could not take a shape cannot
later (room only shrinks while packing), so each shape's search starts where its last one
ended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ykbus.core.resources import Res, add_into, fits

MISSED = -1  # a member that fits on no node


def repeat(count: int, shape: Res) -> list[Res]:
    """A gang of `count` members of one `shape` (the same dict, only read)."""
    return [shape] * count


def first_fit(room_of: Callable[[int], Res], n: int, members: Sequence[Res], stop_at_miss: bool) -> list[int]:
    """Each member in order on the first of nodes 0..n-1 (`room_of(i)`: node i's free room)
    with room for it beside the members before it: the node of each member, `MISSED` for one
    that fits nowhere (with `stop_at_miss` the list ends at the first)."""
    taken: dict[int, Res] = {}
    start: dict[tuple[tuple[str, int], ...], int] = {}
    out: list[int] = []
    for shape in members:
        key = tuple(sorted(shape.items()))
        i = start.get(key, 0)
        while i < n:
            used = taken.get(i)
            room = room_of(i)
            if used is None:
                if fits(shape, room):
                    break
            elif _fits_beside(shape, room, used):
                break
            i += 1
        start[key] = i
        if i == n:
            if stop_at_miss:
                return out
            out.append(MISSED)
            continue
        used = taken.get(i)
        if used is None:
            taken[i] = dict(shape)
        else:
            add_into(used, shape)
        out.append(i)
    return out


def _fits_beside(shape: Res, room: Res, used: Res) -> bool:
    for name, value in shape.items():
        if room.get(name, 0) - used.get(name, 0) < value:
            return False
    return True
