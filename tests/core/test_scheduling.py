"""The pass as plans: `Scheduler.plan()` decides from the model without changing it, and
`Partition.commit` applies what it decided."""

from __future__ import annotations

from tests.conftest import Harness
from tests.core.test_why import QUEUES
from ykbus.core.decisions import Allocate, Defer, Hold, Park
from ykbus.core.snapshot import dump_snapshot
from ykbus.core.step import Step
from ykbus.log.build import app, ask, node


def pending_state() -> Harness:
    """Asks that place, and asks that wait for a node, a queue max, maxapplications, stateaware."""
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 3000})
    h.do(h.log.apps(app("a", "root.small"), app("b", "root.small"), app("g1", "root.gated"), app("g2", "root.gated")))
    h.do(h.log.asks(ask("big", "g1", vcore=9000)))
    partition = h.core.rms["rm-1"].partitions["default"]
    partition.records.paused = True  # take the next asks in without a pass, to plan them here
    h.do(h.log.asks(ask("ka", "a", vcore=1000, max_allocations=3), ask("kb", "b", vcore=100),
                    ask("kg", "g2", vcore=100), ask("more", "g1", vcore=500)))
    partition.records.paused = False
    return h


def test_planning_changes_nothing_and_committing_does_what_the_plan_says():
    h = pending_state()
    p = h.core.rms["rm-1"].partitions["default"]
    before = dump_snapshot(h.core)
    p.scheduler.start(h.core.now)
    plans = [p.scheduler.plan() for _ in range(3)]
    p.scheduler.finish()
    assert dump_snapshot(h.core) == before  # a what-if: nothing moved
    assert [repr(d) for d in plans[0]] == [repr(d) for d in plans[1]] == [repr(d) for d in plans[2]]

    first = plans[0]
    assert isinstance(first[-1], Allocate)
    outs = h.do(h.log.tick())  # the pass plans and commits
    placed = [(a.applicationID, a.allocationKey, a.nodeID) for o in outs if o.kind == "alloc" for a in o.msg.new]
    allocate = next(d for d in first if isinstance(d, Allocate))
    assert placed[0] == (allocate.ask.app.id, allocate.ask.key, allocate.node.id)


def test_a_plan_names_every_kind_of_decision_with_its_reason():
    h = pending_state()
    p = h.core.rms["rm-1"].partitions["default"]
    p.scheduler.start(h.core.now)
    seen = {}
    while True:  # plan and commit by hand, as the pass does
        plan = p.scheduler.plan()
        for d in plan:
            seen.setdefault(d.__class__, []).append(d)
        p.applier.commit(plan, Step(h.core.last_seq + 1, h.core.now))
        if not plan or not isinstance(plan[-1], Allocate):
            break
    p.scheduler.finish()
    # g1 starts with "more" ("big" waits for a node since it came); stateaware then lets
    # g2 start; root.small holds 2 of ka (its max) and b waits for its maxapplications
    assert [repr(d) for d in seen[Allocate]] == ["Allocate(g1/more -> n1)", "Allocate(a/ka -> n1)",
                                                 "Allocate(g2/kg -> n1)", "Allocate(a/ka -> n1)"]
    assert [(d.ask.key, d.why.code.value, d.why.details) for d in seen[Park]] == [
        ("ka", "QueueMax", {"queue": "root.small", "resource": "vcore", "used": 2000, "max": 2000, "asked": 1000})]
    assert [(d.app.id, d.why.code.value) for d in seen[Hold]] == [("b", "QueueMaxApplications")]
    assert Defer not in seen  # g1 started first, so g2 was never the one kept back


def test_what_if_planning_leaves_a_later_pass_unchanged():
    """Planning at any point (a what-if) and dropping the plan changes no later decision."""
    def run(peek: bool) -> list[bytes]:
        from ykbus.log.jsonl import encode_output
        h = Harness()
        h.setup(QUEUES, n1={"vcore": 3000}, n2={"vcore": 2000})
        out: list[bytes] = []
        for i in range(12):
            h.do(h.log.apps(app(f"x{i}", "root.gated" if i % 3 else "root.small")))
            p = h.core.rms["rm-1"].partitions["default"]
            if peek:
                p.scheduler.start(h.core.now)
                p.scheduler.plan()
                p.scheduler.finish()
            out += [encode_output(o) for o in h.do(h.log.asks(ask(f"k{i}", f"x{i}", vcore=300 * (i % 4 + 1),
                                                                     max_allocations=1 + i % 3)))]
            if i % 4 == 3:
                out += [encode_output(o) for o in h.do(h.log.nodes(node(f"m{i}", vcore=1000)))]
        return out

    assert run(peek=True) == run(peek=False)


def test_cached_queue_keys_are_the_keys(monkeypatch):
    """Queue keys are kept until what they depend on changes: every decision of a churning
    workload on a deep tree (priority offsets, guaranteed shares, a reload, nodes coming)
    is the same as with every key computed afresh."""
    import ykbus.core.state as state
    from ykbus.bench.workloads import Mixed, mixed_config
    from ykbus.core import Core, partition
    from ykbus.log.jsonl import encode_output
    from ykbus.yamlload import load_yaml

    # thousands of plans over a growing state: without the purity check, which fingerprints
    # the partition around each (3 minutes with it; the traces and the machines run it)
    monkeypatch.setattr(partition, "CHECK_PURE", False)

    def run(cache: bool) -> list[bytes]:
        monkeypatch.setattr(state, "CACHE_QUEUE_KEYS", cache)
        w = Mixed(nodes=40, apps=120, asks=2500, batch=50, seed=3)
        core, out = Core(load_yaml=load_yaml), []
        for e in w.setup():
            core.apply(e)
        for i, e in enumerate(w.entries()):
            outs = core.apply(e)
            out += [encode_output(o) for o in outs]
            w.observe([(a.applicationID, a.UUID) for o in outs if o.kind == "alloc" for a in o.msg.new])
            if i == 30:  # a reload that moves guaranteed shares and priorities
                out += [encode_output(o) for o in core.apply(w.log.config(mixed_config().replace(
                    "priority.offset: 1", "priority.offset: 7").replace("vcore: 400", "vcore: 90")))]
            if i % 25 == 24:  # the total grows: every share moves
                out += [encode_output(o) for o in core.apply(w.log.nodes(node(f"extra{i}", vcore=9000, memory=2**34)))]
        return out

    cached, fresh = run(True), run(False)
    assert sum(b'"new"' in line for line in cached) > 50
    assert cached == fresh
