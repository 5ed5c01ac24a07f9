"""Topology: the domains of a partition's nodes, and the one domain a gang fits best.

Groundwork of issue 42 (docs/topology.md): nothing of the scheduling pass calls this yet.
Sans-IO, standard library only beside the core's resources; typed for mypyc (plain classes
with slots, no msgspec Struct), deterministic.

Theory of operation
1. **Levels.** A partition's `topology.levels` (core/config.py `TopologyConfig`) name node
   attributes, broadest first: `[ykbus.io/block, ykbus.io/rack]`.
2. **Domains.** A domain at level *i* is the set of schedulable nodes that share the values
   of levels 0..i: its key is that tuple of values (`("b1", "r3")`), its name the values
   joined by `/` (`b1/r3`). A node without level *i*'s attribute is in no domain at level *i*
   nor below it (it is still "anywhere", the whole partition). An unschedulable node is in
   no domain at all.
3. **Kept incrementally.** `DomainIndex.set_node` (a node added, or its attributes,
   schedulability or free room changed), `set_free` and `remove_node` cost O(levels) domain
   updates each (plus a bisection into each domain's sorted node ids). Each domain keeps its
   nodes' ids in order and the sum of their free room.
4. **Feasible means packed.** A domain holds a gang when first fit places every member, in
   the gang's order, on the domain's nodes in node order (by id, or the partition's node
   order when given): each member takes the first node whose room, less what the members
   before it took there, covers it. Summed room is only a quick way to rule a domain out.
5. **Room, by the dominant resource.** The gang's dominant resource is the one its total
   asks the largest share of the index's free room (over every schedulable node), compared
   exactly in integers, ties by resource name. A domain's room is its free room of that
   resource; its room left after the gang is that less the gang's total of it.
6. **Best fit.** Among the domains at the level that hold the gang, the one with the least
   room left, ties by domain key (the values level by level: the name, but never two
   domains for one name). Large domains stay whole for large gangs.
7. **Required or preferred.** `required`: a domain at that level, or `NoDomain`.
   `preferred`: the level, else each broader level in turn, else anywhere (all schedulable
   nodes, whatever their attributes), else `NoDomain` of the level asked for.
8. **What is closest.** When no domain at the level holds the gang, the fullest fit is the
   domain where first fit places the most members (a member that fits nowhere is skipped,
   the next tried); ties by least room left, then key. The reason says so:
   `TopologyNoDomain: no ykbus.io/rack domain has room for 16 × {gpu: 8}; the fullest fit,
   rack b1/r3, has room for 12`.
9. **Tags.** `ykbus.io/topology-required: <level>` or `ykbus.io/topology-preferred:
   <level>` on an application or an ask; an ask's (its task group's) wins over its
   application's. A level that is not one of the partition's, both keys on one object, or an
   empty value is a problem (`request_problem`), as `core/tags.py` checks its own.

Nothing here changes anything but the index's own records; a choice is a value (`Fit` or
`NoDomain`). Results never depend on the order nodes were added in (a property test).
"""

from __future__ import annotations

import enum
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ykbus.core.packing import MISSED, dominant_in, first_fit, packed
from ykbus.core.packing import repeat as repeat  # (a gang of one shape: for callers of this module)
from ykbus.core.resources import Res, add_into, fits, fmt_res, positive, sub_into

REQUIRED_TAG: Final = "ykbus.io/topology-required"
PREFERRED_TAG = "ykbus.io/topology-preferred"
NO_DOMAIN = "TopologyNoDomain"  # the code of the reason a topology gang waits
ANYWHERE = ""  # the level of a `Fit` that is the whole partition (a `preferred` gang's last resort)


# --- what a workload asks for: the tags ---------------------------------------------------


class TopologyMode(enum.Enum):
    REQUIRED = "required"  # one domain at the level, or wait
    PREFERRED = "preferred"  # the level, else broader ones, else anywhere


class TopologyRequest:
    """One domain at `level` for a gang or task group, `mode` says how strictly."""

    __slots__ = ("mode", "level")

    def __init__(self, mode: TopologyMode, level: str) -> None:
        self.mode, self.level = mode, level

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopologyRequest) and (self.mode, self.level) == (other.mode, other.level)

    def __hash__(self) -> int:
        return hash((self.mode.value, self.level))

    def __repr__(self) -> str:
        return f"TopologyRequest({self.mode.value}, {self.level!r})"


def request_of(tags: Mapping[str, str]) -> TopologyRequest | None:
    """The topology an object's tags ask for (None: none); `request_problem` checked them."""
    level = tags.get(REQUIRED_TAG)
    if level is not None:
        return TopologyRequest(TopologyMode.REQUIRED, level)
    level = tags.get(PREFERRED_TAG)
    if level is not None:
        return TopologyRequest(TopologyMode.PREFERRED, level)
    return None


def request_problem(tags: dict[str, str], levels: Sequence[str]) -> str:
    """Why the topology tags of an application or an ask are not valid for a partition of
    `levels` ("" when absent or valid): both keys set, an empty value, or a level that is
    not one of the partition's. (A dict, as the wire's tags are, not a Mapping: compiled, a
    Mapping's `get` is a call by name, for every ask.)"""
    required, preferred = tags.get(REQUIRED_TAG), tags.get(PREFERRED_TAG)
    if required is not None and preferred is not None:
        return f"tags {REQUIRED_TAG} and {PREFERRED_TAG}: only one of them may be set"
    tag = REQUIRED_TAG if required is not None else PREFERRED_TAG
    level = required if required is not None else preferred
    if level is None:
        return ""
    if not level:
        return f"tag {tag}: empty (a topology level of the partition)"
    if level not in levels:
        known = f"its levels are {', '.join(levels)}" if levels else "it has no topology levels"
        return f"tag {tag}: {level[:64]!r} is not a topology level of the partition ({known})"
    return ""


def effective_request(app_tags: Mapping[str, str], ask_tags: Mapping[str, str]) -> TopologyRequest | None:
    """What an ask's task group asks for: its own tags' request if it has one (it wins),
    else its application's."""
    own = request_of(ask_tags)
    return own if own is not None else request_of(app_tags)


# --- the index of domains -----------------------------------------------------------------


def path_of(levels: Sequence[str], attributes: Mapping[str, str]) -> tuple[str, ...]:
    """A node's path (rule 2): its values of `levels`, broadest first, up to the first level
    it lacks; its domain at level i is `path[: i + 1]` when the path is longer than i."""
    values: list[str] = []
    for level in levels:
        value = attributes.get(level)
        if value is None:
            break
        values.append(value)
    return tuple(values)


class Domain:
    """The schedulable nodes sharing `values` (one per level, broadest first) at level
    `level` (an index into the levels): their ids in order, the sum of their free room."""

    __slots__ = ("level", "values", "name", "node_ids", "free")

    def __init__(self, level: int, values: tuple[str, ...]) -> None:
        self.level = level
        self.values = values
        self.name = "/".join(values)
        self.node_ids: list[str] = []
        self.free: Res = {}

    def __repr__(self) -> str:
        return f"Domain({self.name!r}, {len(self.node_ids)} nodes, free {self.free})"


def _own_ids(domain: Domain) -> list[str]:
    return domain.node_ids


class _Member:
    """A node as the index knows it: its path (the values of the levels it has, broadest
    first, up to the first it lacks), whether it is schedulable, its free room."""

    __slots__ = ("id", "path", "schedulable", "free")

    def __init__(self, node_id: str, path: tuple[str, ...], schedulable: bool, free: Res) -> None:
        self.id, self.path, self.schedulable, self.free = node_id, path, schedulable, free


class DomainIndex:
    """The domains of a partition's nodes at each of `levels` (rules 2 and 3). The owner
    tells it of every node change; readers ask for domains and choices."""

    def __init__(self, levels: Sequence[str]) -> None:
        self.levels: tuple[str, ...] = tuple(levels)
        self._nodes: dict[str, _Member] = {}
        self._domains: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.levels]
        self.anywhere = Domain(-1, ())  # every schedulable node, with or without attributes

    # -- changes: O(levels) each --

    def set_node(self, node_id: str, attributes: Mapping[str, str], schedulable: bool, free: Res) -> None:
        """A node added, or changed (attributes, schedulability, free room)."""
        path = path_of(self.levels, attributes)
        old = self._nodes.get(node_id)
        if old is not None and old.path == path and old.schedulable == schedulable:
            self.set_free(node_id, free)
            return
        if old is not None:
            self.remove_node(node_id)
        member = _Member(node_id, path, schedulable, positive(free))
        self._nodes[node_id] = member
        if schedulable:
            for domain in self._chain(member, create=True):
                insort(domain.node_ids, node_id)
                add_into(domain.free, member.free)

    def set_free(self, node_id: str, free: Res) -> None:
        """A node's free room changed (an allocation booked or released on it); KeyError for
        a node the index was never told of (a bug of its owner)."""
        member = self._nodes[node_id]
        new = positive(free)  # (no zeros: a domain's sums keep none either)
        if member.schedulable:
            for domain in self._chain(member, create=False):
                sub_into(domain.free, member.free)
                add_into(domain.free, new)
        member.free = new

    def remove_node(self, node_id: str) -> None:
        """A node gone; nothing when the index does not know it."""
        member = self._nodes.get(node_id)
        if member is None:
            return
        del self._nodes[node_id]
        if not member.schedulable:
            return
        for domain in self._chain(member, create=False):
            ids = domain.node_ids
            ids.pop(bisect_left(ids, node_id))
            sub_into(domain.free, member.free)
            if not ids and domain.level >= 0:
                del self._domains[domain.level][domain.values]

    def _chain(self, member: _Member, create: bool) -> list[Domain]:
        """`anywhere`, then the member's domain at each level it has, broadest first."""
        out = [self.anywhere]
        for i in range(len(member.path)):
            key = member.path[: i + 1]
            level = self._domains[i]
            domain = level.get(key)
            if domain is None:
                if not create:
                    raise AssertionError(f"node {member.id} is not in its domain {key} (a bug)")
                domain = Domain(i, key)
                level[key] = domain
            out.append(domain)
        return out

    # -- reads --

    def level_index(self, level: str) -> int:
        """The index of `level` in the levels; ValueError when it is not one."""
        return self.levels.index(level)

    def domains(self, level: str) -> list[Domain]:
        """The domains at `level`, by key."""
        by_key = self._domains[self.level_index(level)]
        return [by_key[key] for key in sorted(by_key)]

    def domain(self, level: int, values: tuple[str, ...]) -> Domain | None:
        """The domain `values` at level index `level` (None: no schedulable node is in it)."""
        return self._domains[level].get(values)

    def domain_of(self, node_id: str, level: str) -> Domain | None:
        """The domain at `level` of a schedulable node (None: it has none there)."""
        member = self._nodes.get(node_id)
        i = self.level_index(level)
        if member is None or not member.schedulable or len(member.path) <= i:
            return None
        return self._domains[i][member.path[: i + 1]]

    def free(self, node_id: str) -> Res:
        """A node's free room as the index last heard it (read only)."""
        return self._nodes[node_id].free

    def in_order(self, level: int, order: Sequence[str] | None) -> Callable[[Domain], list[str]]:
        """The node ids of a domain at `level` (-1: `anywhere`) in node order: by id (each
        domain keeps them so), or as `order` lists them (grouped in one pass over it; a node
        it does not list is not offered)."""
        if order is None:
            return _own_ids
        groups: dict[tuple[str, ...], list[str]] = {}
        depth = level + 1
        for node_id in order:
            member = self._nodes.get(node_id)
            if member is None or not member.schedulable or len(member.path) < depth:
                continue
            key = member.path[:depth]
            group = groups.get(key)
            if group is None:
                groups[key] = [node_id]
            else:
                group.append(node_id)
        empty: list[str] = []
        return lambda d: groups.get(d.values, empty)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes


# --- choosing the domain ------------------------------------------------------------------


def describe(members: Sequence[Res]) -> str:
    """A gang as a reason names it: `16 × {gpu: 8}`, or runs of equal shapes in its order
    joined by ` + ` (`2 × {gpu: 8} + 1 × {vcore: 1 core}`)."""
    runs: list[tuple[Res, int]] = []
    for shape in members:
        if runs and runs[-1][0] == shape:
            runs[-1] = (shape, runs[-1][1] + 1)
        else:
            runs.append((shape, 1))
    return " + ".join([f"{n} × {fmt_res(shape)}" for shape, n in runs]) if runs else "no members"


class Fit:
    """The gang fits `domain` (at `level`; `ANYWHERE` for the whole partition): first fit
    puts member i on `nodes[i]`, and `room_left` of the dominant resource stays free."""

    __slots__ = ("level", "domain", "nodes", "room_left")

    def __init__(self, level: str, domain: Domain, nodes: list[str], room_left: int) -> None:
        self.level, self.domain, self.nodes, self.room_left = level, domain, nodes, room_left

    def __repr__(self) -> str:
        return f"Fit({self.level or 'anywhere'} {self.domain.name!r}, room left {self.room_left})"


class NoDomain:
    """No domain at `level` holds the gang. `closest`: the fullest fit (None when no
    domain at the level has room for even one member, or there is none), holding `holds`
    of the gang's `wanted` members. `message` is the reason's text."""

    __slots__ = ("code", "level", "closest", "holds", "wanted", "message", "remembered", "never")

    def __init__(self, level: str, closest: Domain | None, holds: int, wanted: int, message: str,
                 remembered: str | None = None, never: int | None = None) -> None:
        self.code = NO_DOMAIN
        self.level, self.closest, self.holds, self.wanted, self.message = level, closest, holds, wanted, message
        self.remembered = remembered  # the placed gang's domain its lost members must go back into
        # the most members a domain would hold with its nodes empty (None: not asked), when fewer than `wanted`
        self.never = never if never is not None and never < wanted else None

    def details(self) -> dict[str, object]:
        """The reason's figures, as the read API's `details` keep them."""
        out: dict[str, object] = {"level": self.level, "closest": self.closest.name if self.closest is not None else None,
                                  "holds": self.holds, "wanted": self.wanted}
        if self.remembered is not None:
            out["domain"] = self.remembered
        if self.never is not None:
            out["holdsEmpty"] = self.never  # no domain would hold it even empty: at most this many
        return out

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"NoDomain({self})"


def dominant(index: DomainIndex, total: Res) -> str:
    """Rule 5: the resource whose share of the index's free room `total` asks most, ties
    by name; "" when `total` asks nothing (core/packing.py `dominant_in`)."""
    return dominant_in(total, index.anywhere.free)


class Taken:
    """What a gang's earlier task groups took in a what-if (each group in a domain of its
    own, one after the other): the room on each node and its sum per domain, read as less
    free room by the groups after them. Nothing in the index changes."""

    __slots__ = ("index", "nodes", "domains", "all")

    def __init__(self, index: DomainIndex) -> None:
        self.index = index
        self.nodes: dict[str, Res] = {}
        self.domains: dict[tuple[str, ...], Res] = {}  # by domain key (keys of two levels differ in length)
        self.all: Res = {}

    def take(self, node_id: str, shape: Res) -> None:
        used = self.nodes.get(node_id)
        if used is None:
            self.nodes[node_id] = dict(shape)
        else:
            add_into(used, shape)
        add_into(self.all, shape)
        path = self.index._nodes[node_id].path
        for i in range(len(path)):
            add_into(self.domains.setdefault(path[: i + 1], {}), shape)

    def free(self, node_id: str) -> Res:
        return _less(self.index.free(node_id), self.nodes.get(node_id))

    def domain_free(self, d: Domain) -> Res:
        return _less(d.free, self.all if d.level < 0 else self.domains.get(d.values))


def _less(room: Res, used: Res | None) -> Res:
    if not used:
        return room
    out = dict(room)
    sub_into(out, used)
    return out


def pack(index: DomainIndex, node_ids: Sequence[str], members: Sequence[Res], stop_at_miss: bool,
         taken: Taken | None = None, resource: str = "") -> list[str]:
    """Rule 4: first fit of `members`, in order, over `node_ids`, in order (core/packing.py):
    the node of each member ("" for one that fits nowhere; with `stop_at_miss` the list ends
    at the first), beside what earlier groups of the gang `taken`; with `resource` (the
    gang's dominant), again largest first in it if one misses (`packed`). Nothing in the
    index changes."""
    room_of = index.free if taken is None else taken.free
    if resource:
        placed = packed(lambda i: room_of(node_ids[i]), len(node_ids), members, stop_at_miss, resource)
    else:
        placed = first_fit(lambda i: room_of(node_ids[i]), len(node_ids), members, stop_at_miss)
    return [node_ids[i] if i != MISSED else "" for i in placed]


def total_of(members: Sequence[Res]) -> Res:
    total: Res = {}
    for shape in members:
        add_into(total, shape)
    return total


def best_fit(index: DomainIndex, members: Sequence[Res], level: str,
             order: Sequence[str] | None = None, taken: Taken | None = None) -> Fit | NoDomain:
    """Rules 4 to 6 and 8 at one level (`ANYWHERE`: the whole partition): the domain with
    the least room left among those that hold `members`, or why none does. `order`: the
    partition's node order (None: by node id); `taken`: what the gang's groups before these
    members took. ValueError for a level that is not one."""
    scope = _Scope(index, members, level, order, taken)
    fit = scope.best()
    return fit if fit is not None else scope.closest()


class _Scope:
    """One level's domains (or the one domain `within`, a key at that level), sorted by room
    left after `members` (then key), with their nodes in node order, their room less what
    `taken` holds: what `best_fit` and `choose` search."""

    def __init__(self, index: DomainIndex, members: Sequence[Res], level: str, order: Sequence[str] | None,
                 taken: Taken | None = None, within: tuple[str, ...] | None = None) -> None:
        i = -1 if level == ANYWHERE else index.level_index(level)
        self.index, self.members, self.level, self.taken = index, members, level, taken
        if i < 0:
            self.domains = [index.anywhere]
        elif within is None:
            self.domains = index.domains(level)
        else:
            one = index.domain(i, within)
            self.domains = [one] if one is not None else []
        self.total = total_of(members)
        self.resource = dominant(index, self.total)
        self.need = self.total.get(self.resource, 0)
        self.nodes = index.in_order(i, order)
        self.by_fit = sorted(self.domains, key=self._rank)

    def free(self, d: Domain) -> Res:
        return d.free if self.taken is None else self.taken.domain_free(d)

    def left(self, d: Domain) -> int:
        return self.free(d).get(self.resource, 0) - self.need if self.resource else 0

    def _rank(self, d: Domain) -> tuple[int, tuple[str, ...]]:
        return (self.left(d), d.values)

    def best(self) -> Fit | None:
        """Rule 6: the first domain, by room left, that holds the gang."""
        for d in self.by_fit:
            if fits(self.total, self.free(d)):  # (summed room: only rules a domain out)
                placed = pack(self.index, self.nodes(d), self.members, True, self.taken, self.resource)
                if len(placed) == len(self.members):
                    return Fit(self.level, d, placed, self.left(d))
        return None

    def closest(self, empty: Callable[[str], Res] | None = None) -> NoDomain:
        """Rule 8: the fullest fit, and the reason; with `empty` (a node's room when nothing
        of the scheduler's runs on it), whether any domain would hold the gang even empty:
        when none would, the reason says so (it waits for the cluster to grow, not for room)."""
        closest: Domain | None = None
        holds = 0
        for d in self.by_fit:
            count = len(self.members) - pack(self.index, self.nodes(d), self.members, False, self.taken,
                                             self.resource).count("")
            if count > holds:
                closest, holds = d, count
        text = _no_domain_text(self.level, self.domains, closest, holds, self.members)
        ever = None
        if empty is not None and self.domains and self.level != ANYWHERE:
            wanted = len(self.members)
            ever = 0
            for d in self.domains:  # (stops at the first that would hold it all: the usual case)
                ever = max(ever, self._holds_empty(d, empty))
                if ever == wanted:
                    break
            if ever < wanted:
                text += f"; no {short(self.level)} would hold it even empty (at most {ever}{self._too_large(empty)})"
        return NoDomain(self.level, closest, holds, len(self.members), text, never=ever)

    def _too_large(self, empty: Callable[[str], Res]) -> str:
        """What a member asks that no node of the level's domains has even empty, where one
        is: `: no node has vcore 100 cores` (else "": members that fit a node alone)."""
        rooms = [empty(i) for d in self.domains for i in d.node_ids]
        member = next((m for m in self.members if not any(fits(m, room) for room in rooms)), None)
        if member is None:
            return ""
        over = {name: v for name, v in member.items() if all(v > room.get(name, 0) for room in rooms)}
        return f": no node has {fmt_res(over)[1:-1]}" if over else f": no node holds {fmt_res(member)}"

    def _holds_empty(self, d: Domain, empty: Callable[[str], Res]) -> int:
        """How many of the members domain `d`'s nodes (every one, by node id: those of a
        domain another gang reserved too) would hold with nothing running on them."""
        ids = d.node_ids
        placed = packed(lambda i: empty(ids[i]), len(ids), self.members, False, self.resource)
        return len(placed) - placed.count(MISSED)


def short(level: str) -> str:
    """A level as a reason names its domains: `ykbus.io/rack` -> `rack`."""
    return level.rpartition("/")[2] or level


def _no_domain_text(level: str, domains: list[Domain], closest: Domain | None, holds: int,
                    members: Sequence[Res]) -> str:
    where = f"no {level} domain" if level != ANYWHERE else "no set of schedulable nodes"
    head = f"{where} has room for {describe(members)}"
    if not domains or (level == ANYWHERE and not domains[0].node_ids):
        return f"{head}; no schedulable node has {level}" if level != ANYWHERE else f"{head}; there is no schedulable node"
    if closest is None:
        return f"{head}; none has room for even one member"
    if level == ANYWHERE:
        return f"{head}; the nodes have room for {holds}"
    return f"{head}; the fullest fit, {short(level)} {closest.name}, has room for {holds}"


def choose(index: DomainIndex, members: Sequence[Res], request: TopologyRequest,
           order: Sequence[str] | None = None, taken: Taken | None = None,
           empty: Callable[[str], Res] | None = None) -> Fit | NoDomain:
    """Rule 7: where a gang asking `request` goes. `required`: the best fit at its level,
    or why none holds it. `preferred`: the best fit at its level, else at each broader level,
    else anywhere; when nothing holds it, the reason of the level asked for (the fullest fit
    is looked for only then). `taken`: what the gang's groups before this one took; `empty`:
    a node's room with nothing running on it, for the reason of a `required` gang to say
    whether any domain of the level would hold it even so (`_Scope.closest`). A level the partition no
    longer has (a reload dropped it) holds nothing: `required` waits, `preferred` goes
    anywhere."""
    if request.level not in index.levels:
        if request.mode is TopologyMode.PREFERRED:
            fit = _Scope(index, members, ANYWHERE, order, taken).best()
            if fit is not None:
                return fit
        known = f"its levels are {', '.join(index.levels)}" if index.levels else "it has no topology levels"
        return NoDomain(request.level, None, 0, len(members),
                        f"{request.level} is no longer a topology level of the partition ({known})")
    asked = _Scope(index, members, request.level, order, taken)
    fit = asked.best()
    if fit is not None:
        return fit
    if request.mode is TopologyMode.PREFERRED:
        broader = [index.levels[i] for i in range(index.level_index(request.level) - 1, -1, -1)]
        for level in [*broader, ANYWHERE]:
            fit = _Scope(index, members, level, order, taken).best()
            if fit is not None:
                return fit
        return asked.closest()  # (it would go broader, then anywhere: "no rack even empty" says nothing)
    return asked.closest(empty)


def within(index: DomainIndex, members: Sequence[Res], level: str, values: tuple[str, ...],
           order: Sequence[str] | None = None, taken: Taken | None = None) -> Fit | NoDomain:
    """`members` in the one domain `values` at `level` (a placed gang's remembered domain:
    its lost members go back into it), or why it does not hold them now."""
    scope = _Scope(index, members, level, order, taken, values)
    fit = scope.best()
    if fit is not None:
        return fit
    name = "/".join(values)
    closest = scope.closest()
    text = (f"the gang's {short(level)} {name} has room for {closest.holds} of {describe(members)}"
            if scope.domains else f"the gang's {short(level)} {name} has no schedulable node")
    return NoDomain(level, scope.domains[0] if scope.domains else None, closest.holds, len(members), text, name)


# A group of a gang (docs/topology.md, "Task groups"): its request (None: anywhere), its
# members' shapes, and the domain it goes back into (level, values), if one is remembered
Group = tuple[TopologyRequest | None, Sequence[Res], tuple[str, tuple[str, ...]] | None]


def place_groups(index: DomainIndex, groups: Sequence[Group], order: Sequence[str] | None = None,
                 empty: Callable[[str], Res] | None = None) -> list[Fit] | tuple[int, NoDomain]:
    """Each group in a domain of its own (its remembered one; else `choose` by its request;
    else the best fit anywhere), one after the other in the order given, each beside what
    the groups before it took; if one finds none, again largest first in the gang's dominant
    resource (a group with a remembered domain first). The fit of each group, in the order
    given, or the group (its position) that found none in the order given, and why."""
    first = _groups_in(index, groups, range(len(groups)), order, empty)
    if not isinstance(first, tuple) or len(groups) < 2:
        return first
    resource = dominant(index, total_of([shape for g in groups for shape in g[1]]))
    again = sorted(range(len(groups)), key=lambda i: (groups[i][2] is None, -total_of(groups[i][1]).get(resource, 0)))
    if all(i == at for at, i in enumerate(again)):
        return first
    other = _groups_in(index, groups, again, order, empty)
    return first if isinstance(other, tuple) else other


def _groups_in(index: DomainIndex, groups: Sequence[Group], positions: Sequence[int], order: Sequence[str] | None,
               empty: Callable[[str], Res] | None) -> list[Fit] | tuple[int, NoDomain]:
    taken = Taken(index)
    fits: dict[int, Fit] = {}
    for i in positions:
        request, members, kept = groups[i]
        fit: Fit | NoDomain
        if kept is not None and kept[0] in index.levels:
            fit = within(index, members, kept[0], kept[1], order, taken)
        elif request is None:
            fit = best_fit(index, members, ANYWHERE, order, taken)
        else:
            fit = choose(index, members, request, order, taken, empty)
        if isinstance(fit, NoDomain):
            return i, fit
        for node_id, shape in zip(fit.nodes, members, strict=True):
            taken.take(node_id, shape)
        fits[i] = fit
    return [fits[i] for i in range(len(groups))]
