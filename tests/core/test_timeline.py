"""core/timeline.py (issue 43 groundwork, docs/time.md): runtime limits, end bounds, the
earliest start of an ask or a gang, the backfill rule and the text; table tests, then
Hypothesis properties against a brute force that simulates every moment."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.core.resources import Res, add_into, fits
from ykbus.core.timeline import (
    Candidate,
    Estimate,
    Holding,
    NoEstimate,
    NoEstimateReason,
    Reservation,
    Waited,
    backfill_refusal,
    earliest_start,
    end_bound,
    fmt_duration_ms,
    fmt_in,
    fmt_log_time,
    fmt_utc_minute,
    fmt_utc_second,
    may_backfill,
    old_enough,
    one_node_at,
    one_node_start,
    pack,
    repeat,
    runtime_limit_ms,
)

MIN = 60_000_000_000  # a minute in ns
EXAMPLES = int(os.environ.get("YKBUS_EXAMPLES", "200"))


# --- limits and bounds ---------------------------------------------------------------------


@pytest.mark.parametrize("timeout, default, maximum, expected", [
    (0, 0, 0, None),               # nothing set: no limit
    (5000, 0, 0, 5000),            # the ask's own
    (0, 60_000, 0, 60_000),        # the queue's default
    (5000, 60_000, 0, 5000),       # the ask's own wins over the default
    (90_000, 0, 60_000, 60_000),   # capped by the max
    (0, 0, 60_000, 60_000),        # the max is the limit of an ask without one
    (0, 90_000, 60_000, 60_000),   # a default above the max (a config error, but capped anyway)
    (-1, 0, 0, None),              # a negative timeout counts as not set
])
def test_runtime_limit_of_an_ask(timeout, default, maximum, expected):
    assert runtime_limit_ms(timeout, default, maximum) == expected


def test_end_bound_is_start_plus_limit_or_none():
    assert end_bound(10 * MIN, 60_000) == 11 * MIN
    assert end_bound(10 * MIN, None) is None


def test_old_enough_follows_the_minimum_runtime():
    assert old_enough(0, 0, 0)  # no minimum
    assert not old_enough(0, 4 * MIN, 300_000)
    assert old_enough(0, 5 * MIN, 300_000)


# --- the estimate, table -------------------------------------------------------------------


def node(nid: str, cap: Res, free: Res, *holdings: tuple[str, int | None, Res]) -> Candidate:
    return Candidate(nid, cap, free, [Holding(k, e, r) for k, e, r in holdings])


GPU8 = {"gpu": 8}


def test_an_ask_that_fits_now_starts_now_waiting_for_nothing():
    est = earliest_start([node("n1", GPU8, GPU8)], [{"gpu": 4}], now_ns=5)
    assert isinstance(est, Estimate) and (est.at, est.nodes, est.waits_for) == (5, ["n1"], [])


def test_an_ask_waits_for_the_first_end_that_makes_room():
    n1 = node("n1", GPU8, {"gpu": 2}, ("a", 30 * MIN, {"gpu": 2}), ("b", 10 * MIN, {"gpu": 4}))
    n2 = node("n2", GPU8, {}, ("c", 20 * MIN, GPU8))
    est = earliest_start([n2, n1], [{"gpu": 6}], now_ns=0)
    assert isinstance(est, Estimate)
    assert (est.at, est.nodes, est.waits_for) == (10 * MIN, ["n1"], [Waited("n1", "b", 10 * MIN)])


def test_a_gang_waits_until_all_its_members_fit_at_once():
    n1 = node("n1", GPU8, {}, ("a", 10 * MIN, GPU8))
    n2 = node("n2", GPU8, {}, ("b", 20 * MIN, {"gpu": 4}), ("c", 40 * MIN, {"gpu": 4}))
    n3 = node("n3", GPU8, {"gpu": 4}, ("d", 30 * MIN, {"gpu": 4}))
    est = earliest_start([n1, n2, n3], repeat(3, GPU8), now_ns=0)
    assert isinstance(est, Estimate)
    assert est.at == 40 * MIN and est.nodes == ["n1", "n2", "n3"]
    assert est.waits_for == [Waited("n1", "a", 10 * MIN), Waited("n2", "b", 20 * MIN),
                             Waited("n2", "c", 40 * MIN), Waited("n3", "d", 30 * MIN)]


def test_a_gang_that_fits_now_starts_now_though_first_fit_misses_it_on_empty_nodes():
    """Members of mixed shapes that fit the nodes' room now (3 GPUs on n1, 1 GPU and 2 of
    memory on n0): first fit on the nodes empty puts the first on n0 and finds no room for
    the second, which once made the estimate `TOO_LARGE` (found by the property test below)."""
    nodes = [Candidate("n1", {"gpu": 3, "memory": 1}, {"gpu": 3, "memory": 1}, []),
             Candidate("n0", {"gpu": 3, "memory": 2}, {"gpu": 2, "memory": 2}, []),
             Candidate("n2", {"gpu": 1, "memory": 1}, {"gpu": 1, "memory": 1}, [])]
    est = earliest_start(nodes, [{"gpu": 3}, {"gpu": 1, "memory": 2}], now_ns=0)
    assert isinstance(est, Estimate) and (est.at, est.nodes) == (0, ["n1", "n0"])


def test_a_gang_is_packed_not_summed():
    """Two nodes with 4 GPUs free each are no room for one member of 8."""
    n1 = node("n1", GPU8, {"gpu": 4}, ("a", 10 * MIN, {"gpu": 4}))
    n2 = node("n2", GPU8, {"gpu": 4}, ("b", 20 * MIN, {"gpu": 4}))
    est = earliest_start([n1, n2], [GPU8], now_ns=0)
    assert isinstance(est, Estimate) and (est.at, est.nodes) == (10 * MIN, ["n1"])


def test_mixed_shapes_are_placed_by_first_fit_in_order():
    n1 = node("n1", GPU8, {"gpu": 2}, ("a", 5 * MIN, {"gpu": 6}))
    n2 = node("n2", GPU8, {"gpu": 6}, ("b", 9 * MIN, {"gpu": 2}))
    est = earliest_start([n1, n2], [{"gpu": 6}, {"gpu": 2}, {"gpu": 6}], now_ns=0)
    assert isinstance(est, Estimate) and est.at == 5 * MIN and est.nodes == ["n1", "n1", "n2"]


def test_an_end_bound_already_past_counts_at_now():
    n1 = node("n1", GPU8, {}, ("late", 1 * MIN, GPU8))
    est = earliest_start([n1], [GPU8], now_ns=3 * MIN)
    assert isinstance(est, Estimate) and est.at == 3 * MIN and est.waits_for == [Waited("n1", "late", 3 * MIN)]


@pytest.mark.parametrize("candidates, members, reason, blockers", [
    ([], [GPU8], NoEstimateReason.NO_NODES, []),
    ([node("n1", {"gpu": 4}, {"gpu": 4})], [GPU8], NoEstimateReason.TOO_LARGE, []),
    ([node("n1", GPU8, {}, ("x", None, {"gpu": 4}), ("y", 10 * MIN, {"gpu": 4})),
      node("n0", GPU8, {}, ("z", None, GPU8))], [GPU8], NoEstimateReason.NO_LIMIT, [("n0", "z"), ("n1", "x")]),
    ([node("n1", GPU8, {}, ("y", 10 * MIN, {"gpu": 4}))], [GPU8], NoEstimateReason.OCCUPIED, []),  # 4 occupied
])
def test_no_estimate_says_why(candidates, members, reason, blockers):
    est = earliest_start(candidates, members, now_ns=0)
    assert isinstance(est, NoEstimate) and est.reason is reason and est.blockers == blockers


def test_the_texts_a_person_reads():
    now = int(datetime(2026, 11, 28, 13, 53, 20, tzinfo=UTC).timestamp()) * 10**9
    n7 = node("n7", GPU8, {}, *[(f"a{i}", now + 12 * MIN - i, {"gpu": 2}) for i in range(3)], ("x", None, {"gpu": 2}))
    est = earliest_start([n7], [{"gpu": 6}], now)
    assert isinstance(est, Estimate)
    assert est.text(now) == "estimated start 2026-11-28 14:06 UTC, in 12 min, when 3 allocations on node n7 end"
    two = earliest_start([n7, node("n8", GPU8, {"gpu": 4}, ("b", now + MIN, {"gpu": 2}))], repeat(2, {"gpu": 6}), now)
    assert isinstance(two, Estimate)
    assert two.text(now).endswith("when 3 allocations on node n7 and 1 on node n8 end")
    blocked = earliest_start([node("n1", GPU8, {}, ("x", None, GPU8))], [GPU8], now)
    assert isinstance(blocked, NoEstimate)
    assert blocked.text() == "no estimate: the allocations in the way have no runtime limit"
    big = earliest_start([node("n1", GPU8, GPU8)], repeat(2, {"gpu": 8, "memory": 2**31}), now)
    assert isinstance(big, NoEstimate) and big.text() == (
        "no estimate: it does not fit the candidate nodes even when they are empty (2 × {gpu: 8, memory: 2 Gi})")


@pytest.mark.parametrize("delta, text", [
    (0, "now"), (-5, "now"), (1, "in 1 min"), (12 * MIN, "in 12 min"), (12 * MIN + 1, "in 13 min"),
    (60 * MIN, "in 1 h"), (125 * MIN, "in 2 h 5 min"), (48 * 60 * MIN, "in 2 d"),
    (3 * 1440 * MIN + 4 * 60 * MIN - MIN, "in 3 d 4 h"), (3 * 1440 * MIN + 23 * 60 * MIN + 1, "in 4 d"),
])
def test_how_far_a_time_is(delta, text):
    assert fmt_in(delta) == text


@pytest.mark.parametrize("ms, text", [
    (500, "500 ms"), (45_000, "45 s"), (30 * 60_000, "30 min"), (90 * 60_000, "1 h 30 min"),
    (2 * 3_600_000, "2 h"), (49 * 3_600_000, "2 d 1 h"), (61_000, "1 min 1 s"),
])
def test_durations_as_people_read_them(ms, text):
    assert fmt_duration_ms(ms) == text


def utc_text(seconds: int) -> str:
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d} UTC"


@given(st.integers(-62_135_596_800 // 60, 253_402_300_680 // 60))  # datetime's years 1..9999
def test_the_calendar_matches_pythons_for_any_minute(minutes):
    """`fmt_utc_minute` computes the civil date by integer arithmetic (no datetime in the core)."""
    at = minutes * MIN
    assert fmt_utc_minute(at) == utc_text(minutes * 60)
    assert fmt_utc_minute(at + 1) == utc_text(minutes * 60 + 60)  # rounded up


@given(st.integers(-62_135_596_800, 253_402_300_799))  # datetime's years 1..9999
def test_the_calendar_matches_pythons_for_any_second(seconds):
    """`fmt_utc_second`, the same by the second, rounded up: never before the moment."""
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d} UTC"
    assert fmt_utc_second(seconds * 10**9) == text
    if seconds < 253_402_300_799:
        later = datetime.fromtimestamp(seconds + 1, tz=UTC)
        assert fmt_utc_second(seconds * 10**9 + 1).endswith(f"{later.minute:02d}:{later.second:02d} UTC")


def test_fmt_log_time_rounds_up_and_says_how_far():
    now = int(datetime(2026, 11, 28, 13, 54, tzinfo=UTC).timestamp()) * 10**9
    assert fmt_log_time(now + 12 * MIN, now) == "2026-11-28 14:06 UTC, in 12 min"


# --- backfill, table -----------------------------------------------------------------------


@pytest.mark.parametrize("end, start, allowed", [
    (10, 20, True), (20, 20, True), (21, 20, False), (None, 20, False), (10, None, False), (None, None, False),
])
def test_may_backfill_only_ends_before_the_reserved_start(end, start, allowed):
    assert may_backfill(end, start) is allowed


def test_backfill_refusal_names_the_reservation_in_the_way():
    now = 0
    rs = [Reservation("gang-b", ["n2", "n1"], 30 * MIN), Reservation("ask-a", ["n1"], 20 * MIN),
          Reservation("ask-c", ["n3"], None)]
    assert backfill_refusal(20 * MIN, "n1", rs, now) == ""
    assert backfill_refusal(25 * MIN, "n2", rs, now) == ""
    assert backfill_refusal(25 * MIN, "n1", rs, now) == (
        "it may run until 1970-01-01 00:25 UTC, in 25 min, after the estimated start of ask-a on node n1 "
        "(1970-01-01 00:20 UTC, in 20 min)")
    assert backfill_refusal(None, "n2", rs, now) == "it has no runtime limit, and node n2 is reserved for gang-b"
    assert backfill_refusal(MIN, "n3", rs, now) == "node n3 is reserved for ask-c, which has no estimated start"
    assert backfill_refusal(None, "n4", rs, now) == ""  # not reserved: no rule


# --- properties ----------------------------------------------------------------------------

RES = ("gpu", "memory")
SHAPES = st.fixed_dictionaries({"gpu": st.integers(0, 4)}, optional={"memory": st.integers(1, 4)})
ENDS = st.one_of(st.none(), st.integers(0, 40))


@st.composite
def cluster(draw, max_nodes=4):
    """Candidates with capacity, allocations (end bound or none) that fit it, and some of the
    rest free (the remainder is occupied by other than allocations)."""
    n = draw(st.integers(1, max_nodes))
    out = []
    for i in draw(st.permutations(range(n))):
        cap = {"gpu": draw(st.integers(1, 8)), "memory": draw(st.integers(1, 8))}
        left = dict(cap)
        holdings = []
        for j in range(draw(st.integers(0, 4))):
            res = {k: draw(st.integers(0, left[k])) for k in RES}
            for k in RES:
                left[k] -= res[k]
            holdings.append(Holding(f"n{i}-a{j}", draw(ENDS), res))
        free = {k: left[k] - draw(st.integers(0, min(1, left[k]))) for k in RES}
        out.append(Candidate(f"n{i}", cap, free, holdings))
    return out


GANG = st.one_of(st.builds(repeat, st.integers(1, 4), SHAPES), st.lists(SHAPES, min_size=1, max_size=3))
UNIFORM = st.builds(repeat, st.integers(1, 4), SHAPES)
NOW = st.integers(0, 10)


def rooms_at(nodes: list[Candidate], t: int, now: int) -> list[Res]:
    """The room of each node (by id) at time t, from scratch."""
    out = []
    for c in sorted(nodes, key=lambda c: c.id):
        room = dict(c.free)
        for h in c.holdings:
            if h.end is not None and max(h.end, now) <= t:
                add_into(room, h.resource)
        out.append(room)
    return out


def feasible(rooms: list[Res], members: list[Res]) -> bool:
    """Whether the gang fits at once: for members of one shape, by counting how many each
    node takes (any assignment: independent of first fit); for mixed shapes, first fit."""
    shape = members[0]
    if all(m == shape for m in members):
        if not any(v > 0 for v in shape.values()):
            return bool(rooms)
        total = 0
        for room in rooms:
            left = dict(room)
            while fits(shape, left):
                for k, v in shape.items():
                    left[k] = left.get(k, 0) - v
                total += 1
        return total >= len(members)
    return pack(rooms, members) is not None


def brute_force(nodes: list[Candidate], members: list[Res], now: int) -> int | None:
    """The first moment, trying every one from now to past the last end bound, at which the
    gang fits; None when it never does."""
    last = max([h.end for c in nodes for h in c.holdings if h.end is not None] + [now])
    for t in range(now, last + 2):
        if feasible(rooms_at(nodes, t, now), members):
            return t
    return None


def at_of(est: Estimate | NoEstimate) -> int | None:
    return est.at if isinstance(est, Estimate) else None


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(), GANG, NOW)
def test_the_estimate_is_the_true_earliest_start(nodes, members, now):
    """(a) Never later than the first moment the gang fits, and equal to it; its placement
    is a real placement then; no estimate exactly when it never fits."""
    est = earliest_start(nodes, members, now)
    truth = brute_force(nodes, members, now)
    assert at_of(est) == truth
    if isinstance(est, Estimate):
        rooms = rooms_at(nodes, est.at, now)
        ids = sorted(c.id for c in nodes)
        used: dict[str, Res] = {}
        for shape, nid in zip(members, est.nodes, strict=True):
            add_into(used.setdefault(nid, {}), shape)
        assert all(fits(u, rooms[ids.index(nid)]) for nid, u in used.items())
        by_id = {c.id: c for c in nodes}
        assert all(w.end <= est.at and w.node in used for w in est.waits_for)
        assert all(any(h.key == w.key for h in by_id[w.node].holdings) for w in est.waits_for)
        assert est.waits_for == sorted(est.waits_for, key=lambda w: (w.node, w.end, w.key))
    else:
        assert est.reason is not NoEstimateReason.NO_NODES


class Bounded:
    """An allocation with an end bound, as the ledger keeps them (`Node.ends`)."""

    def __init__(self, end: int, uuid: str, resource: Res) -> None:
        self.end, self.uuid, self.resource = end, uuid, resource


def bounds(c: Candidate) -> tuple[list[Bounded], Res]:
    """`c`'s holdings with an end bound, by end bound then key, and what they hold together."""
    ends = sorted((Bounded(h.end, h.key, h.resource) for h in c.holdings if h.end is not None),
                  key=lambda b: (b.end, b.uuid))
    ending: Res = {}
    for b in ends:
        add_into(ending, b.resource)
    return ends, ending


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(max_nodes=1), SHAPES, NOW)
def test_a_reserved_nodes_estimate_is_the_general_ones(nodes, member, now):
    """A reserved node's estimate (one member, one node: `one_node_start`, asked at each
    change of the node's room, and for the free nodes one by one) is `earliest_start`'s, to
    the allocations it waits for, and none exactly where that gives none."""
    c = nodes[0]
    ends, ending = bounds(c)
    fast = one_node_start(c.id, c.capacity, c.free, ends, ending, member, now)
    est = earliest_start(nodes, [member], now)
    if isinstance(est, NoEstimate):
        assert fast is None
    else:
        assert fast is not None
        assert (fast.at, fast.nodes, fast.waits_for) == (est.at, est.nodes, est.waits_for)


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(), SHAPES, NOW)
def test_one_allocations_estimate_node_by_node_is_the_sweeps(nodes, member, now):
    """One allocation over many nodes, as the free nodes' estimate makes it (each node's own
    time, `one_node_at`, the first node by id of the soonest): `earliest_start`'s answer."""
    best = None
    for c in sorted(nodes, key=lambda c: c.id):
        if fits(member, c.free) and fits(member, c.capacity):  # now, waiting for nothing: none is sooner
            best = (now, one_node_start(c.id, c.capacity, c.free, [], {}, member, now))
            break
        ends, ending = bounds(c)
        at = one_node_at(c.capacity, c.free, ends, ending, member, now)
        if at is not None and (best is None or at < best[0]):
            best = (at, one_node_start(c.id, c.capacity, c.free, ends, ending, member, now))
    est = earliest_start(nodes, [member], now)
    if isinstance(est, NoEstimate):
        assert best is None
    else:
        assert best is not None and best[1] is not None
        assert (best[1].at, best[1].nodes, best[1].waits_for) == (est.at, est.nodes, est.waits_for)


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(), UNIFORM, NOW, st.data())
def test_less_in_the_way_never_makes_the_estimate_later(nodes, members, now, data):
    """(b) Removing an allocation, or bringing its end bound earlier, never moves the
    estimate of an ask or a count × shape gang later (nor takes it away)."""
    holdings = [(c, h) for c in nodes for h in c.holdings]
    before = at_of(earliest_start(nodes, members, now))
    if not holdings or before is None:
        return
    c, h = data.draw(st.sampled_from(holdings))
    if data.draw(st.booleans()):  # removed: its room is free now
        changed = Candidate(c.id, c.capacity, {k: c.free.get(k, 0) + h.resource.get(k, 0) for k in RES},
                            [x for x in c.holdings if x is not h])
    else:  # its limit comes earlier (a limit given where there was none is earlier than never)
        sooner = data.draw(st.integers(0, h.end if h.end is not None else 40))
        changed = Candidate(c.id, c.capacity, c.free, [Holding(x.key, sooner, x.resource) if x is h else x
                                                       for x in c.holdings])
    after = at_of(earliest_start([changed if x is c else x for x in nodes], members, now))
    assert after is not None and after <= before


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(), GANG, NOW, st.lists(st.tuples(SHAPES, st.integers(0, 40)), max_size=6))
def test_backfill_never_holds_room_at_the_reserved_start(nodes, members, now, asks):
    """(c) Asks that backfill on the reserved nodes (end bound E at or before the reserved
    start T; the other nodes are not reserved: anything goes there) hold no room there at
    T: on its nodes, the reserved gang still starts by T, and for an ask or a count × shape
    gang exactly at T."""
    est = earliest_start(nodes, members, now)
    if not isinstance(est, Estimate) or est.at == now:
        return
    reserved = Reservation("gang", est.nodes, est.at)
    by_id = {c.id: Candidate(c.id, c.capacity, dict(c.free), c.holdings) for c in nodes}
    for i, (shape, length) in enumerate(asks):
        end = now + length
        for nid in sorted(by_id):
            c = by_id[nid]
            if fits(shape, c.free) and backfill_refusal(end, nid, [reserved], now) == "":
                c.free = {k: c.free.get(k, 0) - shape.get(k, 0) for k in RES}
                c.holdings = [*c.holdings, Holding(f"bf{i}", end, shape)]
                assert nid not in reserved.nodes or end <= est.at  # gone by T
                break
    mine = [by_id[nid] for nid in reserved.nodes]
    again = earliest_start(mine, members, now)
    assert isinstance(again, Estimate) and again.at <= est.at
    if all(m == members[0] for m in members):
        assert again.at == est.at


@settings(max_examples=EXAMPLES, deadline=None)
@given(cluster(), GANG, NOW, st.randoms(use_true_random=False))
def test_the_estimate_does_not_depend_on_input_order(nodes, members, now, rnd):
    """(d) Deterministic: the same answer, in every detail, whatever order the nodes and their
    allocations come in, and when asked twice."""
    def answer(ns):
        est = earliest_start(ns, members, now)
        if isinstance(est, Estimate):
            return ("at", est.at, est.nodes, est.waits_for, est.text(now))
        return ("none", est.reason, est.blockers, est.text())

    first = answer(nodes)
    shuffled = []
    for c in nodes:
        hs = list(c.holdings)
        rnd.shuffle(hs)
        shuffled.append(Candidate(c.id, c.capacity, c.free, hs))
    rnd.shuffle(shuffled)
    assert answer(shuffled) == first == answer(nodes)


@pytest.mark.parametrize("module", ["timeline", "packing"])
def test_the_module_imports_only_the_standard_library_and_resources(module):
    """timeline.py reads no core state: the standard library, resources, and the first fit
    it shares with topology (packing.py, held to the same rule)."""
    import ast
    from pathlib import Path

    source = Path(__file__).parents[2] / "src" / "ykbus" / "core" / f"{module}.py"
    tree = ast.parse(source.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= {"__future__", "enum", "collections.abc", "typing", "ykbus.core.resources", "ykbus.core.packing"}
