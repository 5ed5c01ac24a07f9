"""Preemption: which running allocations an ask that finds no room may take the place of.

A what-if of the planner (docs/preemption.md): `Preemptor.search` reads the partition and
returns a `Preempt` decision (one node, the victims there, the rule that allows it) or the
reason there is none; it changes nothing. The applier (`Partition.commit`) asks the RM to
release the victims (`PREEMPTED_BY_SCHEDULER`), reserves the node for the ask, and parks
the ask at `Victims(node)` until the RM has confirmed them; capacity moves only then.

Guaranteed-share preemption between queues (YuniKorn's rules). An ask may look for
victims when its partition preempts, its `preemptionPolicy` allows it to preempt others,
it has waited its queue's `preemption.delay` for room, and a queue on its path has a
guarantee naming a resource it asks for (below C, for victims of a side: `_side`). Its
queue must stay within its guarantee on every level of its path that has one, once it is
placed and its victims are gone (those below a level count there). A victim is an
allocation that may be taken at all (`takeable`), of an application in another leaf, such
that, with C the deepest queue above both:

* no queue between the victim's leaf and C falls below its guarantee by losing it, in a
  resource the guarantee names that it holds more of than its guarantee, and it holds more
  than its guarantee of one resource it loses at least, counting what it holds: its usage
  less what is being preempted already (the ask's queues count, besides, the asks holding a
  node freed for them);
* no queue between the ask's leaf and C is a `fence` (`preemption.policy: fence`: asks
  inside it take only from inside it), and no queue on the victim's path is `disabled`;
* its priority, seen from C (each level adds its `priority.offset`; a `priority.policy:
  fence` level shows only its offset), is not above the ask's seen the same way.

On each node whose room (with what its victims free) would take the ask, the set taken is
the smallest: one victim if one is enough (the smallest, then the lowest priority, then the
newest), else victims in order of lowest priority, newest first, until the ask fits, then
those not needed dropped. The node chosen preempts the least: fewest victims, then least
resource (a share of the partition's total), then the lowest priority, the newest, the node
id. Nothing is taken unless the victims make room: a preemption always helps.

Why this cannot loop: after it, the ask's queues are within their guarantees and the
victims' at or above theirs in every named resource that moved; taking the capacity back
would need the victim's queue below its guarantee, which it is not (tests/property proves
it on random trees).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ykbus.core.backfill import old_at, young
from ykbus.core.decisions import Preempt
from ykbus.core.lifecycle import NodeState
from ykbus.core.model import INT32_MAX, INT32_MIN, REQUIRED_NODE_TAG, Alloc, App, Ask, Node, Queue
from ykbus.core.queueprops import PreemptionPolicy
from ykbus.core.resources import Res, fits, fmt_quantity
from ykbus.core.timeline import fmt_duration_ms, fmt_utc_second

if TYPE_CHECKING:
    from ykbus.core.state import PartitionState

RETRY_NS = 15 * 1_000_000_000  # a failed search is not tried again for this long (log time)
SHARE_SCALE = 1_000_000  # a victim set's size: the sum of its shares of the partition's total, in millionths
GUARANTEE_RULE = "guaranteed share"
REQUIRED_RULE = "required node"
WITHIN_RULE = "lower priority in its queue"
QUOTA_RULE = "quota"


def delay_ms(ask: Ask) -> int:
    """The `preemption.delay` of the ask's queue (the nearest level that sets it; 30s)."""
    for q in ask.app.path:
        if q.preempt_delay_ms >= 0:
            return q.preempt_delay_ms
    return 30_000


def seen_from(priority: int, path: list[Queue], below: Queue) -> int:
    """`priority` of an ask or allocation of a leaf on `path` as queue `below` (an ancestor)
    sees it: each level under it adds its offset; a priority fence shows only its offset."""
    value = priority
    for q in path:
        if q is below:
            break
        value = q.priority_offset if q.priority_fence else max(INT32_MIN, min(INT32_MAX, value + q.priority_offset))
    return value


def guaranteed_types(ask: Ask) -> bool:
    """Whether a queue on the ask's path has a guarantee naming a resource it asks for: only
    then does it ask for guaranteed capacity, and only then may it preempt between queues."""
    res = ask.resource
    return any(t in res for q in ask.app.path if q.guaranteed for t in q.guaranteed)


def may_search(ask: Ask) -> bool:
    """Whether a rule could let `ask` (which may preempt others) preempt once past its delay:
    its queues guarantee something it asks for, or its leaf preempts by priority."""
    return guaranteed_types(ask) or ask.app.queue.preempt_within


# why an ask that may preempt others has not looked for victims (`not_yet`)
DISABLED = 1  # its partition does not preempt
UNGUARANTEED = 2  # no rule could let it: no guarantee on its path names what it asks, no withinqueue
DELAYED = 3  # it has not waited its queue's preemption.delay for room yet


def not_yet(part: PartitionState, ask: Ask, now: int) -> int:
    """Why `ask`, which may preempt others and waits for room, has not looked for victims
    (`DISABLED`, `UNGUARANTEED`, `DELAYED`); 0 when it may (it did, and its reason says what
    it found, or it will when judged next)."""
    if not part.preempts():
        return DISABLED
    if not may_search(ask):
        return UNGUARANTEED
    if (now - ask.since if ask.since else 0) < delay_ms(ask) * 1_000_000:
        return DELAYED
    return 0


def fmt_delay(ms: int) -> str:
    """`30 s`, `1.5 s`, `250 ms`: a delay as its queue file could say it."""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms // 1000}.{str(ms % 1000).rjust(3, '0').rstrip('0')} s"


def not_yet_text(kind: int, part: PartitionState, ask: Ask, now: int, live: bool) -> str:
    """`not_yet`'s answer in words. `live` (the read API, `ykbus explain`): the delay as
    waited so far, which changes as time passes; else (the reason the RM gets, which changes
    only with the decision) the delay itself."""
    if kind == DISABLED:
        return f"disabled in partition {part.name}"
    if kind == UNGUARANTEED:
        return f"no queue on its path ({ask.app.queue.path} and above) guarantees what it asks for"
    if kind == DELAYED:
        if live:
            waited = now - ask.since if ask.since else 0
            return (f"below its delay: it has waited {waited // 1_000_000_000} s of "
                    f"{delay_ms(ask) // 1000} s")
        return f"it waits until its queue's preemption.delay ({fmt_delay(delay_ms(ask))}) has passed"
    return ""


YOUNG_NOTE: Final = "those younger than their queue's preemption.minruntime are no victims yet"


def young_text(too_young: list[Alloc]) -> str:
    """Why no victim: every allocation it may preempt (`too_young`) has run less than its
    queue's `preemption.minruntime` (core/backfill.py rule 5)."""
    return f"every allocation it may preempt has run less than its queue's preemption.minruntime; {_first_old(too_young)}"


def _first_old(too_young: list[Alloc]) -> str:
    """When the first of `too_young` is old enough to be a victim (it is a candidate like any
    other then: whether taking it makes room is judged at the next search)."""
    alloc = min(too_young, key=lambda a: (old_at(a)[0], a.uuid))
    at, minimum = old_at(alloc)
    return (f"the first is old enough at {fmt_utc_second(at)} (allocation {alloc.uuid} in "
            f"{alloc.app.queue.path}, minimum {fmt_duration_ms(minimum)})")


def why_not_yet(part: PartitionState, ask: Ask, now: int) -> str:
    """Why `ask`, which may preempt others and waits for room, has not looked for victims, in
    words as of `now` (read API, `ykbus explain`); "" when it may."""
    return not_yet_text(not_yet(part, ask, now), part, ask, now, True)


def preemption_for(part: PartitionState, ask: Ask, now: int,
                   nodes: list[Node] | None = None) -> Preempt | str | None:
    """Victims for `ask`, which found no room and may preempt others, or why there are none;
    None: it may not look for them (yet: its delay; or no rule could let it). `nodes`: only
    on these (a placed topology gang's domain, for its lost member); else on any node but
    those of a topology domain another gang reserved."""
    if now - ask.since < delay_ms(ask) * 1_000_000:
        return None
    found: Preempt | str | None = None
    if guaranteed_types(ask):
        found = Preemptor(part, ask, GUARANTEE_RULE, nodes, now).search()
        if isinstance(found, Preempt):
            return found
    if ask.app.queue.preempt_within:
        within = Preemptor(part, ask, WITHIN_RULE, nodes, now).search()
        if isinstance(within, Preempt) or found is None:
            return within
        return f"{found}; {WITHIN_RULE}: {within}"
    return found


# why an allocation on a node that could take the ask is no victim for it, in `Preemptor.kept`'s
# order: (said of one, said of several)
KEPT_WHY = (("allows no preemption of itself, is pinned to its node or is already leaving",
             "allow no preemption of themselves, are pinned to their node or are already leaving"),
            ("is in a queue it may not preempt from", "are in queues it may not preempt from"),
            ("has a higher priority than it, as their common parent sees both",
             "have a higher priority than it, as their common parent sees both"))
KEPT_NOTE = " (by a preemption policy or fence, or for want of a guarantee on its side of the common parent)"


def kept_text(kept: list[int]) -> str:
    """`: of the allocations on nodes that could take it, 3 have a higher priority than it;
    ...` for the counts of `KEPT_WHY`, "" if none."""
    said = [f"{n} {why[n > 1]}" for n, why in zip(kept, KEPT_WHY, strict=True) if n]
    if not said:
        return ""
    return ": of the allocations on nodes that could take it, " + "; ".join(said) + (KEPT_NOTE if kept[1] else "")


def takeable(alloc: Alloc) -> bool:
    """Whether `alloc` may be a victim at all, by any rule: it allows preemption of itself, is
    not being preempted or replaced already, and is not pinned to its node (a DaemonSet's pod,
    `REQUIRED_NODE_TAG`: YuniKorn never takes those either)."""
    return (alloc.preempt_self and not alloc.preempting and not alloc.replacing
            and not alloc.tags.get(REQUIRED_NODE_TAG))


def required_node_victims(part: PartitionState, ask: Ask, node: Node, now: int = 0) -> Preempt | str:
    """Victims on `node` for `ask`, which must run there (`yunikorn.apache.org/requiredNode`)
    and does not fit: at once, whatever its policy, queue or delay; allocations of lower or
    equal priority that allow it and are not pinned to the node themselves, placeholders
    first, then the lowest priority, the newest. Or why there are none."""
    candidates: list[Alloc] = []
    too_young: list[Alloc] = []
    for a in node.allocations.values():
        if takeable(a) and a.priority <= ask.priority:
            if young(a, now):
                too_young.append(a)
            else:
                candidates.append(a)
    candidates.sort(key=lambda a: (not a.placeholder, a.originator, a.priority, -a.born, a.uuid))
    taken = _cover(_short(ask.resource, node.free), candidates)
    if taken is None:
        text = f"the allocations it may preempt on node {node.id} would not make room for it"
        return f"{text}; {YOUNG_NOTE}: {_first_old(too_young)}" if too_young else text
    return Preempt(ask, node, taken, REQUIRED_RULE)


def _short(res: Res, free: Res) -> Res:
    """What `free` misses of `res`, per resource it misses."""
    return {t: v - free.get(t, 0) for t, v in res.items() if v > free.get(t, 0)}


def _cover(short: Res, order: list[Alloc], admit: Callable[[list[Alloc], Alloc], bool] | None = None
           ) -> list[Alloc] | None:
    """The first of `order` (that `admit` lets join those taken before) that together free
    `short`, less those the others make room without; None: they do not."""
    taken: list[Alloc] = []
    left = dict(short)
    for alloc in order:
        if not any(alloc.resource.get(t, 0) > 0 for t, v in left.items() if v > 0):
            continue  # frees nothing still missing
        if admit is not None and not admit(taken, alloc):
            continue
        taken.append(alloc)
        for t in left:
            left[t] -= alloc.resource.get(t, 0)
        if all(v <= 0 for v in left.values()):
            break
    else:
        return None
    for alloc in list(reversed(taken)):  # drop those the others make room without
        if all(sum(a.resource.get(t, 0) for a in taken if a is not alloc) >= v for t, v in short.items()):
            taken.remove(alloc)
    return taken


def quota_victims(part: PartitionState, q: Queue) -> list[Alloc]:
    """The allocations of `q`'s subtree to preempt so that its usage (less what is being
    preempted already) is within its max again: lowest priority first, the newest first,
    each one that frees a resource still over and leaves every queue between its leaf and
    `q` at or above its guarantee (YuniKorn's quota preemptor takes only what a child holds
    above its guarantee); those that do not allow it, or are pinned to their node, are kept."""
    flows = _Flows(list(part.preempted.values()))
    over = {t: flows.held(q, t) - limit for t, limit in q.max.items() if flows.held(q, t) > limit}
    if not over:
        return []
    mine = [a for app in _apps_below(q) for a in app.allocations.values() if takeable(a)]
    mine.sort(key=lambda a: (a.originator, a.priority, -a.born, a.uuid))
    taken: list[Alloc] = []
    for alloc in mine:
        if any(alloc.resource.get(t, 0) > 0 for t, v in over.items() if v > 0):
            levels = alloc.app.path[:alloc.app.path.index(q)]
            if not levels_keep(levels, flows, taken, alloc, None):
                continue  # it would take its queue below its guarantee
            taken.append(alloc)
            for t in over:
                over[t] -= alloc.resource.get(t, 0)
            if all(v <= 0 for v in over.values()):
                break
    return taken


def levels_keep(levels: list[Queue], flows: _Flows, taken: list[Alloc], alloc: Alloc, asked: Res | None) -> bool:
    """Whether taking `alloc` besides `taken` keeps each of `levels` at or above its guarantee
    in every named resource it frees and holds more of than its guarantee, and the level is
    over its guarantee in one of them at least that counts (`asked`: one the ask asks for;
    None: any). A named resource a level holds within its guarantee is not judged: YuniKorn
    takes from a queue what it holds over its guarantee, type by type, so a queue over its
    vcore guarantee and under its memory one loses pods to an ask of vcore, not to an ask of
    memory alone (which would let two such queues take memory pods from each other for ever)."""
    for q in levels:
        if not q.guaranteed:
            continue
        over = within = False
        for t, g in q.guaranteed.items():
            freed = alloc.resource.get(t, 0)
            if not freed:
                continue
            held = flows.held(q, t)
            for other in taken:
                if q in other.app.path:
                    held -= other.resource.get(t, 0)
            if held - freed < g < held:
                return False  # over its guarantee in t, and below it once `alloc` is taken
            if held > g and (asked is None or t in asked):
                over = True
            else:
                within = True  # (within it in t, or over it in what the ask does not ask)
        if within and not over:
            return False
    return True


def _apps_below(q: Queue) -> list[App]:
    if q.leaf:
        return list(q.apps.values())
    return [app for child in q.children.values() for app in _apps_below(child)]


class _Flows:
    """What preemptions under way already move: per queue, the allocations being preempted
    (leaving) and the asks holding a node freed for them (coming)."""

    __slots__ = ("leaving", "coming")

    def __init__(self, nodes: list[Node]) -> None:
        self.leaving: dict[str, Res] = {}
        self.coming: dict[str, Res] = {}
        for node in nodes:
            for alloc in node.allocations.values():
                if alloc.preempting:
                    for q in alloc.app.path:
                        _add(self.leaving, q.path, alloc.resource)
            ask = node.reserved
            if ask is not None:
                for q in ask.app.path:
                    _add(self.coming, q.path, ask.resource)

    def held(self, q: Queue, t: str) -> int:
        """What `q` uses of `t`, less what is being preempted."""
        leaving = self.leaving.get(q.path)
        return q.allocated.get(t, 0) - (leaving.get(t, 0) if leaving else 0)

    def used(self, q: Queue, t: str) -> int:
        """What `q` holds of `t`, and what the asks holding a node freed for them will take."""
        coming = self.coming.get(q.path)
        return self.held(q, t) + (coming.get(t, 0) if coming else 0)


def _add(into: dict[str, Res], key: str, res: Res) -> None:
    total = into.get(key)
    if total is None:
        total = into[key] = {}
    for t, v in res.items():
        total[t] = total.get(t, 0) + v


class _Side:
    """How victims of one leaf stand to the ask: whether they may be taken, the levels whose
    guarantees they must keep, the ask's priority as their common ancestor sees it."""

    __slots__ = ("allowed", "levels", "common", "ask_priority")

    def __init__(self, allowed: bool, levels: list[Queue], common: Queue | None, ask_priority: int) -> None:
        self.allowed, self.levels, self.common, self.ask_priority = allowed, levels, common, ask_priority


class Preemptor:
    """One search for one ask (read-only scratch)."""

    __slots__ = ("part", "ask", "rule", "flows", "sides", "total", "nodes", "now", "young", "over", "guarded", "kept")

    def __init__(self, part: PartitionState, ask: Ask, rule: str = GUARANTEE_RULE,
                 nodes: list[Node] | None = None, now: int = 0) -> None:
        self.part, self.ask, self.rule, self.nodes = part, ask, rule, nodes
        self.now = now  # the log's time: an allocation younger than its queue's preemption.minruntime is no victim
        # the allocations that would be candidates but for their age: the first to be old
        # enough is named in the reason when no victims are found
        self.young: list[Alloc] = []
        self.flows = _Flows([n for n in part.preempted.values()])
        self.sides: dict[str, _Side] = {}
        self.total = part.total
        # the levels of the ask's path the ask would take above their guarantee, by how much
        # (queue, resource, excess): only victims below such a level may bring it back
        self.over: list[tuple[Queue, str, int]] = []
        self.guarded = False  # a set that would make room was refused: it took a queue below its guarantee
        self.kept = [0, 0, 0]  # allocations no victim for it, by reason (KEPT_WHY)

    def search(self) -> Preempt | str:
        """The preemption that takes the least, or why there is none."""
        ask = self.ask
        res = ask.resource
        flows = self.flows
        for q in ask.app.path if self.rule == GUARANTEE_RULE else ():  # within its guarantee once placed,
            for t, g in q.guaranteed.items():  # on every level that has one, its victims gone
                need = res.get(t, 0)
                if need and flows.used(q, t) + need > g:
                    self.over.append((q, t, flows.used(q, t) + need - g))
        if self.over and self.over[0][0] is ask.app.queue:  # its own leaf: no victim is below it
            return self._above_guarantee()
        if self.part.victims_indexed and self.nodes is None:
            single = self._single()
            if single is not None and not single.originator and (not single.node.held or single.node.held == ask.app.id):
                return Preempt(ask, single.node, [single], self.rule)
        best: tuple[tuple[int, int, int, int, int, str, str], Node, list[Alloc]] | None = None
        allowed_any = room_any = False
        for node in self.part.nodes.values() if self.nodes is None else self.nodes:
            if node.state is not NodeState.SCHEDULABLE or node.preempting or node.held not in ("", ask.app.id):
                continue
            if self._kept_for_another(node):
                continue
            cap, occ = node.capacity, node.occupied
            if any(cap.get(t, 0) - occ.get(t, 0) < v for t, v in res.items()):
                continue  # even empty it would not take the ask
            room_any = True
            candidates = self._candidates(node)
            if not candidates:
                continue
            allowed_any = True
            chosen = self._choose(node, candidates)
            if chosen is None:
                continue
            size = sum(self._share(a.resource) for a in chosen)
            key = (sum(a.originator for a in chosen), len(chosen), size, max(self._priority(a) for a in chosen), -max(a.born for a in chosen), node.id,
                   min(a.uuid for a in chosen))
            if best is None or key < best[0]:
                best = (key, node, chosen)
        if best is None:
            if self.over:  # (victims too young to take yet: that is what it waits for)
                return young_text(self.young) if self.young else self._above_guarantee()
            if allowed_any:
                text = ("no allocation it may preempt would make room on any node without taking its queue below "
                        "its guarantee" if self.guarded else "no allocation it may preempt would make room on any node")
                return f"{text}; {YOUNG_NOTE}: {_first_old(self.young)}" if self.young else text
            if self.young:
                return young_text(self.young)
            if not room_any and self.nodes is None:
                return "no schedulable node would take it even empty"
            return "no running allocation may be preempted for it" + kept_text(self.kept)
        return Preempt(ask, best[1], best[2], self.rule)

    def _above_guarantee(self) -> str:
        q, t, _ = self.over[0]
        return f"queue {q.path} would go above its guarantee of {t} {fmt_quantity(t, q.guaranteed[t])}"

    # --- victims -----------------------------------------------------------------------

    def _single(self) -> Alloc | None:
        """The one allocation whose preemption makes room, if one does: the least it can
        take, found by class (a leaf's allocations of one priority and size, `Queue.victims`)
        in the order of the least (share, then priority as the common parent sees it); within
        a class the last placed that makes room; between classes as small and as low, the
        newest (by the entry that placed it), then the node id, then the id."""
        classes: list[tuple[int, int, tuple[tuple[str, int], ...], str, dict[str, Alloc]]] = []
        for q in self.part.queues.values():
            if not q.victims:
                continue
            side = self._side(q)
            if not side.allowed:
                continue
            for (priority, _), same in q.victims.items():
                first = next(iter(same.values()))
                seen = seen_from(priority, first.app.path, side.common) if side.common is not None else priority
                if seen > side.ask_priority or not self._keeps_guarantees([], first) or not self._relieves([first]):
                    continue
                classes.append((self._share(first.resource), seen, tuple(sorted(first.resource.items())), q.path, same))
        classes.sort(key=lambda c: (c[0], c[1], c[2], c[3]))
        best: Alloc | None = None
        best_key: tuple[int, int] | None = None
        originator: Alloc | None = None  # the first found, if only originators make room
        for share, seen, _, _, same in classes:
            if best_key is not None and (share, seen) > best_key:
                break
            found = self._newest_fitting(same)
            if found is not None and found.originator:
                originator = originator or found
            elif found is not None and (best is None or (-found.born, found.node.id, found.uuid)
                                        < (-best.born, best.node.id, best.uuid)):
                best, best_key = found, (share, seen)
        return best or originator  # (an originator: the whole search, which may find others to take instead)

    def _newest_fitting(self, same: dict[str, Alloc]) -> Alloc | None:
        """Of one class, the last placed allocation whose preemption alone makes room on its
        node, an application's originator only if no other does."""
        ask = self.ask
        res = ask.resource
        originator: Alloc | None = None
        for alloc in reversed(same.values()):
            if not takeable(alloc) or alloc.app is ask.app or young(alloc, self.now):
                continue
            node = alloc.node
            if node.state is not NodeState.SCHEDULABLE or node.preempting or self._kept_for_another(node):
                continue
            free, freed = node.free, alloc.resource
            if all(free.get(t, 0) + freed.get(t, 0) >= v for t, v in res.items()):
                if not alloc.originator:
                    return alloc
                originator = originator or alloc
        return originator

    def _side(self, leaf: Queue) -> _Side:
        side = self.sides.get(leaf.path)
        if side is not None:
            return side
        ask = self.ask
        if self.rule == WITHIN_RULE:  # its own leaf only, by priority alone
            allowed = leaf is ask.app.queue and not any(
                q.preempt_policy is PreemptionPolicy.DISABLED for q in ask.app.path)
            side = self.sides[leaf.path] = _Side(allowed, [], leaf, ask.priority - 1)  # strictly lower
            return side
        mine = {q.path for q in ask.app.path}
        levels: list[Queue] = []
        common: Queue | None = None
        disabled = False
        q: Queue | None = leaf
        while q is not None:
            if q.preempt_policy is PreemptionPolicy.DISABLED:
                disabled = True
            if common is None:
                if q.path in mine:
                    common = q
                else:
                    levels.append(q)
            q = q.parent
        allowed = not disabled and common is not None and common is not ask.app.queue and bool(levels)
        ask_priority = ask.priority
        if allowed:
            entitled = False  # a guarantee below C names what it asks: what entitles it to take from this side
            for q in ask.app.path:
                if q is common:
                    break
                if q.preempt_policy is PreemptionPolicy.FENCE:
                    allowed = False
                if any(t in ask.resource for t in q.guaranteed):
                    entitled = True
            # (a guarantee only at or above C does not: C's share is taken from itself; two siblings
            # without guarantees of their own under a parent with one took from each other for ever)
            allowed = allowed and entitled
            ask_priority = seen_from(ask.priority, ask.app.path, common)  # type: ignore[arg-type]
            below_common = ask.app.path[:ask.app.path.index(common)]  # type: ignore[arg-type]
            if any(q in below_common for q, _, _ in self.over):
                allowed = False  # a level the ask takes above its guarantee that no victim here is under
        side = self.sides[leaf.path] = _Side(allowed, levels, common, ask_priority)
        return side

    def _kept_for_another(self, node: Node) -> bool:
        """Whether `node` is reserved for another ask whose reservation does not give way to
        this search (`_yields`), or has room for the ask already (nothing to take there)."""
        other = node.reserved
        return other is not None and other is not self.ask and (not self._yields(other) or fits(self.ask.resource, node.free))

    def _yields(self, other: Ask) -> bool:
        """Whether the reservation of a node for `other` gives way to this search (YuniKorn's
        YUNIKORN-3092: reservations must not block preemption for ever): `other` is of an
        application whose allocations the ask may preempt, by the same rule, and not pinned to
        the node. (A node with victims under way for it is passed over before this.)"""
        if other.required or other.app is self.ask.app:
            return False
        side = self._side(other.app.queue)
        if not side.allowed:
            return False
        seen = seen_from(other.priority, other.app.path, side.common) if side.common is not None else other.priority
        return seen <= side.ask_priority

    def _priority(self, alloc: Alloc) -> int:
        side = self._side(alloc.app.queue)
        return seen_from(alloc.priority, alloc.app.path, side.common) if side.common is not None else alloc.priority

    def _candidates(self, node: Node) -> list[Alloc]:
        """The allocations of `node` the ask may preempt (those too young aside, in `young`);
        why the others may not, counted in `kept` (KEPT_WHY)."""
        out: list[Alloc] = []
        kept = self.kept
        for alloc in node.allocations.values():
            if alloc.app is self.ask.app:
                continue
            if not takeable(alloc):
                kept[0] += 1
                continue
            side = self._side(alloc.app.queue)
            if not side.allowed:
                kept[1] += 1
            elif self._priority(alloc) > side.ask_priority:
                kept[2] += 1
            elif young(alloc, self.now):
                self.young.append(alloc)
            else:
                out.append(alloc)
        return out

    def _keeps_guarantees(self, taken: list[Alloc], alloc: Alloc) -> bool:
        """Whether taking `alloc` besides `taken` leaves every level between its leaf and the
        common ancestor (`levels_keep`) as YuniKorn's preemptable resource allows, judged for
        what the ask asks."""
        return levels_keep(self._side(alloc.app.queue).levels, self.flows, taken, alloc, self.ask.resource)

    def _choose(self, node: Node, candidates: list[Alloc]) -> list[Alloc] | None:
        short = _short(self.ask.resource, node.free)
        singles = [a for a in candidates if all(a.resource.get(t, 0) >= v for t, v in short.items())
                   and self._keeps_guarantees([], a) and self._relieves([a])]
        if singles:
            return [min(singles, key=lambda a: (a.originator, self._share(a.resource), self._priority(a), -a.born, a.uuid))]
        order = sorted(candidates, key=lambda a: (a.originator, self._priority(a), -a.born, a.uuid))
        taken = _cover(short, order, self._keeps_guarantees)
        if taken is None and _cover(short, order) is not None:
            self.guarded = True
        return taken if taken is not None and self._relieves(taken) else None

    def _relieves(self, taken: list[Alloc]) -> bool:
        """Whether `taken`, gone, bring each level of the ask's path that the ask would take
        above its guarantee (`over`) back within it: they free as much below that level."""
        for q, t, excess in self.over:
            if sum(a.resource.get(t, 0) for a in taken if q in a.app.path) < excess:
                return False
        return True

    def _share(self, res: Res) -> int:
        total = self.total
        return sum(v * SHARE_SCALE // max(1, total.get(t, 0)) for t, v in res.items())
