"""Seed priority-scheduling: queue priority = max of children + offset; a fence hides it."""

import pytest

from tests.conftest import Harness, new_allocs
from ykbus.log.build import app, ask, node

# The seed's picture: `system` unfenced; `tenant1` fenced with `queueA` fenced and `queueB`
# unfenced; `tenant2` unfenced with `queue1` and `queue2`.
SEED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: system
          - name: tenant1
            properties: {priority.policy: fence}
            queues:
              - name: queueA
                properties: {priority.policy: fence}
              - name: queueB
          - name: tenant2
            properties: {priority.offset: "%s"}
            queues:
              - name: queue1
              - name: queue2
"""


def first_winner(asks, offset=0):
    """Stage one ask per (queue, priority) behind a drained node with room for one, then undrain."""
    h = Harness()
    h.setup(SEED % offset, n1={"vcore": 1000})
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(*[app(f"app-{i}", q) for i, (q, _) in enumerate(asks)]))
    h.do(h.log.asks(*[ask(f"k-{i}", f"app-{i}", vcore=1000, priority=p) for i, (_, p) in enumerate(asks)]))
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    (winner,) = new_allocs(outs)
    return asks[int(winner.applicationID.split("-")[1])][0]


@pytest.mark.parametrize("asks,offset,winner", [
    # unfenced priorities compete globally
    ([("root.tenant2.queue1", 5), ("root.system", 50)], 0, "root.system"),
    ([("root.tenant2.queue1", 50), ("root.system", 5)], 0, "root.tenant2.queue1"),
    # nothing under the tenant1 fence outranks system, whatever its priority
    ([("root.tenant1.queueB", 1000), ("root.system", 1)], 0, "root.system"),
    # inside tenant1: queueA is fenced, so queueB's priority wins over it
    ([("root.tenant1.queueA", 1000), ("root.tenant1.queueB", 1)], 0, "root.tenant1.queueB"),
    # the offset lifts tenant2 above system
    ([("root.system", 100), ("root.tenant2.queue2", 0)], 500, "root.tenant2.queue2"),
    # a negative offset sinks it
    ([("root.system", 0), ("root.tenant2.queue2", 10)], -100, "root.system"),
])
def test_seed_priority_fencing_and_offset(asks, offset, winner):
    assert first_winner(asks, offset) == winner


def test_queue_priority_is_exposed_in_state(h):
    h.setup(SEED % 7, n1={"vcore": 1000})
    h.do(h.log.apps(app("a", "root.tenant2.queue1"), app("b", "root.tenant1.queueB")))
    h.do(h.log.asks(ask("k1", "a", vcore=5000, priority=20), ask("k2", "b", vcore=5000, priority=30)))
    queues = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]
    assert queues["root.tenant2.queue1"]["priority"] == 20
    assert queues["root.tenant2"]["priority"] == 27
    assert queues["root.tenant1"]["priority"] == 0  # fenced: only its offset
    assert queues["root.tenant1.queueb"]["priority"] == 30
    # the app's max priority falls when its top ask goes away (O(n) remove path)
    h.do(h.log.release_ask("a", "k1"))
    queues = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]
    assert queues["root.tenant2.queue1"]["priority"] is None
    assert queues["root.tenant2"]["priority"] is None


def test_app_priority_cache_follows_adds_and_removes(h):
    h.setup(SEED % 0)
    h.do(h.log.apps(app("a", "root.system")))
    h.do(h.log.asks(ask("k1", "a", vcore=1, priority=3), ask("k2", "a", vcore=1, priority=9),
                    ask("k3", "a", vcore=1, priority=9)))
    apps = lambda: h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]  # noqa: E731
    assert apps()["a"]["maxPriority"] == 9
    h.do(h.log.release_ask("a", "k2"))
    assert apps()["a"]["maxPriority"] == 9  # k3 keeps it
    h.do(h.log.release_ask("a", "k3"))
    assert apps()["a"]["maxPriority"] == 3


def test_the_k8s_demos_namespaces_keep_their_guarantees_whatever_priorities_the_others_wait_with():
    """`ykbus up`'s k8s RM: a namespace's queue sat at 0% of the cluster for 12 s and more,
    its guarantee a third of it, while the other two held the rest: their pods of priority
    100 waiting outranked its pods of priority 0 across queues (the seed's queue sorting puts
    priority first). Each namespace is a tenant: its queue is fenced, so its priorities order
    its own pods, and the queue furthest below its guarantee is served first."""
    from ykbus.sim.k8s import K8sWorkload

    demo = K8sWorkload(nodes_count=3, node_vcore=4000)
    h = Harness()
    h.setup(demo.queues_yaml())
    h.do(h.log.nodes(*[node(n.nodeID, vcore=demo.node_vcore, memory=demo.node_memory) for n in demo.nodes("k8s")]))
    apps = {ns: f"{ns}-deploy" for ns in demo.namespaces}  # team-a, team-b, ml
    h.do(h.log.apps(*[app(a, f"root.{ns}") for ns, a in apps.items()]))
    # team-b and ml fill the cluster, and each keeps pods of priority 100 waiting; team-a's wait with priority 0
    outs = h.do(h.log.asks(ask("b", apps["team-b"], vcore=1000, max_allocations=6),
                           ask("m", apps["ml"], vcore=1000, max_allocations=6)))
    held = new_allocs(outs)
    assert len(held) == 12
    h.do(h.log.asks(ask("b-hi", apps["team-b"], vcore=1000, max_allocations=20, priority=100),
                    ask("m-hi", apps["ml"], vcore=1000, max_allocations=20, priority=100),
                    ask("a", apps["team-a"], vcore=1000, max_allocations=20)))
    placed: list[str] = []
    for alloc in held[:4]:  # room for four pods frees, one at a time
        outs = h.do(h.log.release(alloc.applicationID, alloc.UUID))
        placed += [a.allocationKey for a in new_allocs(outs)]
    assert placed == ["a"] * 4, placed  # team-a, at 0 of its guarantee of 4 cores, takes each


FENCED_CHILD = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: x
            queues:
              - {name: l1, properties: {priority.policy: fence}}
              - {name: l2}
          - name: y
          - name: z
"""


def test_a_parent_forgets_a_fenced_childs_priority_once_the_child_has_nothing_pending():
    """Regression: a fenced leaf shows its parent its offset (0) whatever its asks' priority;
    once its only ask was placed in the entry that brought it, root.x kept 0 (it dropped no
    child that was active when the priority changed), so l2's ask of priority -10 went
    before y's of -5."""
    h = Harness()
    h.setup(FENCED_CHILD, n1={"vcore": 3000})
    h.do(h.log.apps(app("Z", "root.z"), app("L1", "root.x.l1"), app("L2", "root.x.l2"), app("Y", "root.y")))
    (z,) = new_allocs(h.do(h.log.asks(ask("z", "Z", vcore=2000))))
    h.do(h.log.asks(ask("b", "L2", vcore=2000, priority=-10), ask("c", "Y", vcore=2000, priority=-5)))
    assert [a.allocationKey for a in new_allocs(h.do(h.log.asks(ask("a", "L1", vcore=1000))))] == ["a"]
    assert h.core.rms["rm-1"].partitions["default"].queues["root.x"].raw_priority == -10
    outs = h.do(h.log.release("Z", uuid=z.UUID))
    assert [a.allocationKey for a in new_allocs(outs)] == ["c"]  # y's -5 before l2's -10


def test_a_reload_that_disables_priority_sorting_reaches_queues_placement_rules_created():
    """Regression (an outside review): a reload setting `application.sort.priority: disabled`
    on root left a queue a rule had created under a parent a rule had also created with the
    old setting: the higher-priority application still went first there."""
    from tests.conftest import Harness, new_allocs
    from ykbus.log.build import app, ask, node

    def cfg(sort: str) -> str:
        return f"""
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        parent: {{name: tag, value: ns, create: true}}
    queues:
      - name: root
        submitacl: '*'
        properties: {{application.sort.priority: {sort}}}
"""
    h = Harness()
    h.setup(cfg("enabled"))
    h.do(h.log.nodes(node("n1", vcore=1000)))
    h.do(h.log.nodes(node("n1", action="DRAIN_NODE")))
    h.do(h.log.apps(app("old", "", user="bob", tags={"ns": "team"}), app("new", "", user="bob", tags={"ns": "team"})))
    h.do(h.log.asks(ask("o", "old", vcore=1000)))
    h.do(h.log.asks(ask("n", "new", priority=100, vcore=1000)))
    h.do(h.log.config(cfg("disabled")))
    queues = h.core.registry.rms["rm-1"].partitions["default"].queues
    assert [queues[q].sort_priority for q in ("root", "root.team", "root.team.bob")] == [False] * 3
    outs = h.do(h.log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE")))
    assert [a.applicationID for a in new_allocs(outs)] == ["old"]  # first come, as with disabled from the start
