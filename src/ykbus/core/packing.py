"""First fit of a gang's members over nodes' free room, in order: the one packing rule that
topology (a gang inside one domain, core/topology.py) and the start-time estimate (a gang
once the allocations in its way end, core/timeline.py) both judge by. Nothing is changed.

`packed` is what a topology gang's placement does with it: first fit in the order the
members came, and, when one misses and the members are not all of one shape, first fit
again largest first in the gang's dominant resource (`dominant_in`): a worker of 4 GPUs
sent before its leader of 8 does not take the one node that holds the leader.

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


def dominant_in(total: Res, pool: Res) -> str:
    """The resource whose share of `pool` `total` asks most (exact: a / A > b / B as
    a * B > b * A; a resource `pool` has none of is the largest share), ties by name; ""
    when `total` asks nothing."""
    best, best_ask, best_free = "", 0, 1
    for name in sorted(total):
        ask = total[name]
        if ask <= 0:
            continue
        have = pool.get(name, 0)
        if best == "":
            best, best_ask, best_free = name, ask, have
        elif have <= 0:
            if best_free > 0:
                best, best_ask, best_free = name, ask, have
        elif best_free > 0 and ask * best_free > best_ask * have:
            best, best_ask, best_free = name, ask, have
    return best


def largest_first(members: Sequence[Res], resource: str) -> list[int] | None:
    """The positions of `members`, largest first in `resource`, ties in the order given;
    None when that is the order given (nothing else to try)."""
    first = members[0] if members else None
    if all(m is first for m in members):  # (shapes are interned: a gang of one shape, the usual case)
        return None
    order = sorted(range(len(members)), key=lambda i: -members[i].get(resource, 0))
    return None if all(i == at for at, i in enumerate(order)) else order


def packed(room_of: Callable[[int], Res], n: int, members: Sequence[Res], stop_at_miss: bool,
           resource: str) -> list[int]:
    """`first_fit` of `members` in the order given; if one misses, again largest first in
    `resource` (`largest_first`), kept if it places more: the node of each member, in the
    order given (with `stop_at_miss`, every member's or the first order's up to its miss)."""
    placed = first_fit(room_of, n, members, stop_at_miss)
    if len(placed) == len(members) and MISSED not in placed:
        return placed
    order = largest_first(members, resource)
    if order is None:
        return placed
    again = first_fit(room_of, n, [members[i] for i in order], stop_at_miss)
    if len(again) - again.count(MISSED) <= len(placed) - placed.count(MISSED) or (
            stop_at_miss and len(again) < len(members)):
        return placed
    out = [MISSED] * len(members)
    for at, i in enumerate(order):
        out[i] = again[at]
    return out


def packed_whole(room_of: Callable[[int], Res], n: int, members: Sequence[Res]) -> list[int] | None:
    """`packed` of every member on nodes 0..n-1, largest first in each resource the members
    ask for tried in turn (by name) when the order given misses: the node of each member, or
    None when no order places them all (how a reserved domain or node set is judged)."""
    for resource in sorted({name for shape in members for name in shape}) or [""]:
        placed = packed(room_of, n, members, True, resource)
        if len(placed) == len(members):  # (with stop_at_miss, a miss ends the list: none missed)
            return placed
    return None


def _fits_beside(shape: Res, room: Res, used: Res) -> bool:
    for name, value in shape.items():
        if room.get(name, 0) - used.get(name, 0) < value:
            return False
    return True
