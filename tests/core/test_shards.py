"""Cores sharded by RM, sans IO (core/shards.py, core/fleet.py): which shard applies each
entry, an RM's move at an assign entry, and the replay of every shard."""

from pathlib import Path

import pytest

from tests.conftest import events, new_allocs, released
from ykbus.core import Core
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import read_entries
from ykbus.log.replay import replay
from ykbus.yamlload import load_yaml

TRACES = sorted((Path(__file__).parents[1] / "traces").glob("*.in.jsonl"))
QUEUES = """
partitions:
  - name: default
    placementrules: [{name: provided, create: true}]
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {max: {vcore: 3}}
"""


def traffic(log: LogBuilder) -> list:
    """Two RMs with nodes, applications and asks; rm-b's queue max keeps asks pending."""
    out = []
    for rm in ("rm-a", "rm-b"):
        out += [log.register(QUEUES, rm=rm), log.nodes(node(f"{rm}-n1", vcore=4000), node(f"{rm}-n2", vcore=4000), rm=rm),
                log.apps(app(f"{rm}-app", "root.a"), rm=rm)]
    for i in range(6):
        for rm in ("rm-a", "rm-b"):
            out.append(log.asks(ask(f"{rm}-k{i}", f"{rm}-app", vcore=1000), rm=rm))
    return out


def assign(log: LogBuilder, rm: str, shard: str):
    return log.entry("assign", {"rm": rm, "shard": shard}, rm="")


def release_first(log: LogBuilder, rm: str, uuid: str):
    return log.entry("alloc", {"rmID": rm, "releases": {"allocationsToRelease": [
        {"applicationID": f"{rm}-app", "UUID": uuid, "partitionName": "default",
         "terminationType": "STOPPED_BY_RM"}]}}, rm=rm)


def outputs_of(entries, shard=None):
    return list(replay(entries, shard=shard))


@pytest.mark.parametrize("trace", TRACES, ids=[t.name.split(".")[0] for t in TRACES])
def test_one_shard_named_default_makes_every_output_of_the_unsharded_core(trace):
    with open(trace, "rb") as f:
        entries = list(read_entries(f, str(trace)))
    assert outputs_of(entries, shard="default") == outputs_of(entries)


def test_each_shard_applies_only_the_entries_of_the_rms_it_owns():
    log = LogBuilder()
    entries = [assign(log, "rm-b", "s2"), *traffic(log)]
    a, b = outputs_of(entries, "default"), outputs_of(entries, "s2")
    assert {o.rm for o in a} == {"rm-a"} and {o.rm for o in b} == {"rm-b"}
    whole = outputs_of(entries)  # one core: the same decisions, two RMs at once
    assert sorted(a + b, key=lambda o: o.seq) == whole


def test_a_moved_rm_goes_on_as_if_it_had_not_moved():
    """rm-b moves to s2 with allocations held and asks pending behind its queue max; a
    release there lets the next ask through, exactly as one core would decide."""
    log = LogBuilder()
    entries = traffic(log)
    unsharded = outputs_of(entries)
    held = [a.UUID for a in new_allocs([o for o in unsharded if o.rm == "rm-b"])]
    assert len(held) == 3  # the queue max: three of six
    move = assign(log, "rm-b", "s2")
    tail = [release_first(log, "rm-b", held[0]), log.asks(ask("rm-b-late", "rm-b-app", vcore=1000), rm="rm-b")]
    moved = entries + [move] + tail
    whole = outputs_of(entries + tail)
    s2 = outputs_of(moved, "s2")
    assert [e.message for e in events(s2)] == [f"resource manager 'rm-b' moved from core shard 'default' to 's2' "
                                               f"at entry {len(entries) + 1}"]
    after = [a.allocationKey for a in new_allocs(s2)]
    assert after == [a.allocationKey for a in new_allocs([o for o in whole if o.seq > len(entries)])] == ["rm-b-k3"]
    assert not [o for o in outputs_of(moved, "default") if o.rm == "rm-b" and o.seq > len(entries)]


def test_the_state_that_arrives_is_the_state_that_left():
    log = LogBuilder()
    entries = traffic(log)
    one = Core(load_yaml=load_yaml)
    for e in entries:
        one.apply(e)
    left = Core(load_yaml=load_yaml, shard="default")
    came = Core(load_yaml=load_yaml, shard="s2")
    for e in entries:
        left.apply(e), came.apply(e)
    move = assign(log, "rm-b", "s2")
    left.apply(move)
    from ykbus.core.snapshot import dump_moved, load_moved
    data = dump_moved(left.moved_out[0])
    came.arriving[move.seq] = lambda: load_moved(data, load_yaml)
    came.apply(move)
    assert "rm-b" not in left.dump()["rms"] and came.dump()["rms"]["rm-b"] == one.dump()["rms"]["rm-b"]
    assert came.owners == left.owners == {"rm-b": "s2"}


def test_a_shard_snapshot_keeps_its_name_and_the_assignments():
    log = LogBuilder()
    core = Core(load_yaml=load_yaml, shard="s2")
    for e in [assign(log, "rm-b", "s2"), *traffic(log)]:
        core.apply(e)
    again = load_snapshot(dump_snapshot(core), load_yaml)
    assert (again.shard, again.owners) == ("s2", {"rm-b": "s2"})
    assert again.dump() == core.dump()


def test_ticks_that_name_a_shard_fire_only_its_timers():
    log = LogBuilder()
    entries = [assign(log, "rm-b", "s2"), *traffic(log)]
    tick = log.entry("tick", {"shard": "s2"}, rm="")
    s2 = Core(load_yaml=load_yaml, shard="s2")
    default = Core(load_yaml=load_yaml, shard="default")
    for e in [*entries, tick]:
        s2.apply(e), default.apply(e)
    assert s2.now == tick.ts and default.now < tick.ts  # the default shard never saw it


@pytest.mark.parametrize("body, reason", [
    (b'{"rm": "a.b", "shard": "s2"}', "not an rmID"),
    (b'{"rm": "rm-1", "shard": "has space"}', "shard name"),
    (b'{"rm": "rm-1"}', "missing required field `shard`"),
    (b'[1]', "invalid assign entry"),
])
def test_a_bad_assign_entry_changes_nothing_and_says_why(body, reason):
    log = LogBuilder()
    core = Core(load_yaml=load_yaml, shard="default")
    for e in traffic(log):
        core.apply(e)
    before = core.dump()
    outs = core.apply(log.entry("assign", body, rm=""))
    assert reason in events(outs)[0].message and core.owners == {} and core.dump()["rms"] == before["rms"]


def test_an_rm_cannot_append_an_assign_entry():
    log = LogBuilder()
    core = Core(load_yaml=load_yaml, shard="default")
    outs = core.apply(log.entry("assign", {"rm": "rm-1", "shard": "s2"}, rm="rm-1"))
    assert "the core service's only" in events(outs)[0].message and core.owners == {}


def test_a_moved_rms_timers_fire_in_its_new_shard_and_new_ones_come_after_them():
    """Regression (review): the arriving timers kept their insertion numbers and the new
    shard's counter was not moved past them, so new deadlines could share (deadline, n)."""
    log = LogBuilder()
    entries = traffic(log)[:6]  # registrations, nodes, applications
    timed = ask("rm-b-t", "rm-b-app", vcore=1000)
    timed["executionTimeoutMilliSeconds"] = 60_000
    entries += [log.asks(ask("rm-a-k", "rm-a-app", vcore=1000), rm="rm-a"), log.asks(timed, rm="rm-b")]
    move = assign(log, "rm-b", "s2")
    later = log.entry("alloc", {"rmID": "rm-b", "asks": []}, rm="rm-b", advance_ns=61 * 10**9)
    left, came = Core(load_yaml=load_yaml, shard="default"), Core(load_yaml=load_yaml, shard="s2")
    for e in entries:
        left.apply(e), came.apply(e)
    left.apply(move)
    from ykbus.core.snapshot import dump_moved, load_moved
    data = dump_moved(left.moved_out[0])
    came.arriving[move.seq] = lambda: load_moved(data, load_yaml)
    came.apply(move)
    held = [n for _, n, _ in came.rms["rm-b"].timers.entries()]
    assert held and came.registry.timer_sequence.n >= max(held)
    timed_out = [r for r in released(came.apply(later)) if r.terminationType == "TIMEOUT"]
    assert [r.allocationKey for r in timed_out] == ["rm-b-t"]


def test_a_failed_entry_is_honoured_only_by_the_shard_it_failed_in():
    """Regression (review): every shard learnt every failure record, so a shard that applied
    an entry fine consumed it as failed on a replay, and a non-owner answered for it."""
    log = LogBuilder()
    entries = [assign(log, "rm-b", "s2"), *traffic(log)]
    register_b = next(e for e in entries if e.kind == "register" and e.rm == "rm-b")
    record = log.entry("failed", {"seq": register_b.seq, "error": "KeyError: x", "shard": "s2"}, rm="")
    default = outputs_of([*entries, record], "default")
    s2 = outputs_of([*entries, record], "s2")
    assert not [o for o in default if o.rm == "rm-b"]
    assert "internal error KeyError: x" in events([o for o in s2 if o.seq == register_b.seq])[0].message
    assert outputs_of([*entries, record], "default") == outputs_of(entries, "default")  # default ignores it
