"""The planner is pure, checked at run time (issue 41): tests/conftest.py switches on
`partition.CHECK_PURE`, so every plan of every pass in the tests (the golden traces, the
property state machines, the rest) is checked to leave the partition's whole object graph
as it was (core/purity.py). These tests show the check is on and catches a write: to the
records, and to the gates (the walk's judging of a gate is a value it returns, `Learned`,
that the applier applies)."""

from __future__ import annotations

import pytest

from tests.conftest import Harness
from ykbus.core import compiled, partition, purity, scheduling
from ykbus.core.decisions import Learned
from ykbus.core.step import Step
from ykbus.log.build import app, ask

COMPILED = compiled.mode == "compiled"


def test_the_check_is_on_in_the_tests():
    assert partition.CHECK_PURE


def gated() -> Harness:
    """Three asks of one shape on a node with room for one: two wait behind their shape's
    room gate."""
    h = Harness()
    h.setup(n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "root.default")))
    h.do(h.log.asks(ask("k1", "a", vcore=1000), ask("k2", "a", vcore=1000), ask("k3", "a", vcore=1000)))
    p = h.core.rms["rm-1"].partitions["default"]
    assert p.apps["a"].asks["k2"].pooled and p.apps["a"].asks["k3"].pooled
    return h


def test_a_walk_judging_a_gate_returns_it_and_the_applier_closes_it():
    h = gated()
    p = h.core.rms["rm-1"].partitions["default"]
    uuid = next(iter(p.allocations.values())).uuid
    p.scheduler.tried = []
    outs = h.do(h.log.release("a", uuid=uuid))  # room for one: the gate opens, k2 is placed, k3 judged
    assert [a.allocationKey for o in outs if o.kind == "alloc" for a in o.msg.new] == ["k2"]
    assert p.scheduler.tried == ["k2", "k3"]  # k3 found no node: the gate closed, no other ask judged
    assert not p.waits.pool.open and not p.waits.pool.showing  # and the entry's gates settled


def test_a_plan_returns_the_gates_it_judged_first_and_changes_nothing():
    h = gated()
    p = h.core.rms["rm-1"].partitions["default"]
    pool = p.waits.pool
    gate = pool.gates_for(p.apps["a"].asks["k2"])[0]
    pool.open[gate] = pool.showing[gate] = None  # shown, as a wake-up shows it (n1 has no room: a stale opening)
    skip = purity.planner_own(p)
    before = purity.fingerprint(p, skip)
    p.scheduler.start(h.core.now)
    plan = p.scheduler.plan()
    learned = plan[0]
    assert isinstance(learned, Learned) and learned.closed == [gate]  # k2 found no node: the gate is judged
    assert [d.ask.key for d in plan[1:]] == ["k2"]  # and k3, behind it, is not tried
    assert purity.fingerprint(p, skip) == before and gate in pool.showing  # the plan closed nothing itself
    p.applier.commit(plan, Step(h.core.last_seq + 1, h.core.now))
    assert gate not in pool.showing  # the applier did
    p.scheduler.finish()
    p.waits.settle(Step(h.core.last_seq + 1, h.core.now))


def test_the_check_catches_a_planner_writing_into_the_records():
    """The planner appends every ask it judges to `tried` (a hook for tests): made one of
    the records' lists, that is a write into the state, which the check finds (compiled or
    not: nothing is monkeypatched)."""
    h = Harness()
    h.setup(n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "root.default")))
    p = h.core.rms["rm-1"].partitions["default"]
    p.scheduler.tried = p.apps["a"].groups  # the planner's scratch, aliased to an application's groups
    with pytest.raises(purity.PlannerWrote, match="changed the state"):
        h.do(h.log.asks(ask("k1", "a", vcore=100)))


@pytest.mark.skipif(COMPILED, reason="a compiled module's functions cannot be monkeypatched")
def test_the_check_catches_a_monkeypatched_planner_function_that_writes(monkeypatch):
    real = scheduling.maxapplications

    def writing(a):  # judges as before, and marks the application: a write
        a.tags = {**a.tags, "judged": "yes"}
        return real(a)

    monkeypatch.setattr(scheduling, "maxapplications", writing)
    h = Harness()
    h.setup(n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "root.default")))
    with pytest.raises(purity.PlannerWrote, match="changed the state"):
        h.do(h.log.asks(ask("k1", "a", vcore=100)))


@pytest.mark.skipif(COMPILED, reason="a compiled module's methods cannot be monkeypatched")
def test_the_check_catches_a_planner_closing_a_gate_itself(monkeypatch):
    """As the planner did before it returned the gates it judged (`Learned.closed`): closing
    a gate in the waits from the walk is a write, and the gates are in the fingerprint."""
    real = scheduling.Scheduler._close

    def closing(self, gate):
        self.pool.close(gate)
        real(self, gate)

    h = gated()
    p = h.core.rms["rm-1"].partitions["default"]
    monkeypatch.setattr(scheduling.Scheduler, "_close", closing)
    with pytest.raises(purity.PlannerWrote, match="changed the state"):
        h.do(h.log.release("a", uuid=next(iter(p.allocations.values())).uuid))


def test_the_fingerprint_sees_a_gate_closed():
    h = gated()
    p = h.core.rms["rm-1"].partitions["default"]
    gate = p.waits.pool.gates_for(p.apps["a"].asks["k3"])[0]
    p.waits.pool.open[gate] = None
    p.waits.pool.showing[gate] = None
    skip = purity.planner_own(p)
    before = purity.fingerprint(p, skip)
    p.waits.pool.close(gate)
    assert purity.fingerprint(p, skip) != before
    p.waits.settle(Step(h.core.last_seq + 1, h.core.now))
