"""Preemption between queues by guaranteed share (docs/preemption.md): an ask of a queue under
its guarantee takes the place of allocations of a queue over its own, after its delay, taking
the least it can; the capacity moves on the RM's confirmation."""

from __future__ import annotations

import pytest

from tests import invariants
from tests.conftest import Harness, app_updates, events, new_allocs, released, states
from ykbus.core.config import ConfigError, parse_config
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask, node
from ykbus.yamlload import load_yaml

SECOND = 10**9
MAY_PREEMPT = (True, True)


def queues(a: str = "resources: {guaranteed: {vcore: 2000m}}", b: str = "", partition: str = "",
           extra: str = "") -> str:
    return f"""
partitions:
  - name: default
{partition}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            {a}
          - name: b
            {b}
{extra}
"""


def part(h: Harness):
    return h.core.rms["rm-1"].partitions["default"]


def why(h: Harness, app_id: str, key: str) -> dict:
    return h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"][app_id]["asks"][key]["why"]


def checked(h: Harness) -> None:
    invariants.state_is_consistent(h.core)
    assert load_snapshot(dump_snapshot(h.core), load_yaml).dump() == h.core.dump()


def b_fills_the_cluster(config: str, b_asks: list[dict] | None = None, **nodes) -> Harness:
    """Two nodes of 2 vcore (unless told), filled by queue b's four 1-vcore allocations."""
    h = Harness()
    h.setup(config, **(nodes or {"n1": {"vcore": 2000}, "n2": {"vcore": 2000}}))
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    for one in b_asks or [ask(f"b{i}", "batch", vcore=1000) for i in range(4)]:
        h.do(h.log.asks(one))
    assert len(part(h).allocations) == 4
    return h


def confirm(h: Harness, rel) -> list:
    return h.do(h.log.release(rel.applicationID, uuid=rel.UUID, termination="PREEMPTED_BY_SCHEDULER"))


def test_an_ask_under_its_guarantee_preempts_after_its_delay_and_takes_the_freed_node():
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert why(h, "urgent", "u")["code"] == "NoNodeRoom"
    outs = h.do(h.log.tick(29 * SECOND))
    assert released(outs) == []  # its delay (30 s by default) has not passed
    outs = h.do(h.log.tick(1 * SECOND))
    gone = released(outs)
    assert [(r.allocationKey, r.terminationType.value) for r in gone] == [("b3", "PREEMPTED_BY_SCHEDULER")]  # newest
    assert "preempted for ask u of application urgent" in gone[0].message
    victim_node = part(h).allocations[gone[0].UUID].node.id
    w = why(h, "urgent", "u")
    assert w["code"] == "Preempting" and w["details"] == {"node": victim_node, "victims": [gone[0].UUID]}
    told = {(e.objectID, e.eventChangeType.value) for e in events(outs)}
    assert told == {("batch", "REMOVE"), ("urgent", "SET")}
    assert new_allocs(outs) == []  # nothing moves before the RM releases the victim
    checked(h)
    outs = confirm(h, gone[0])
    assert released(outs) == []  # a confirmed preemption is not echoed back
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("u", victim_node)]
    assert part(h).preempted == {} and all(n.reserved is None for n in part(h).nodes.values())
    checked(h)


def test_a_queue_with_no_guarantee_on_its_path_never_preempts():
    h = b_fills_the_cluster(queues(a=""))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    outs = [o for _ in range(4) for o in h.do(h.log.tick(30 * SECOND))]
    assert released(outs) == [] and why(h, "urgent", "u")["code"] == "Reserved"  # a node, for when it frees
    assert why(h, "urgent", "u")["details"]["preemption"] == (
        "no queue on its path (root.a and above) guarantees what it asks for")


def test_an_ask_without_allow_preempt_other_does_not_preempt():
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000)))  # no policy: may be preempted, may not preempt
    outs = h.do(h.log.tick(60 * SECOND))
    assert released(outs) == []
    assert "preemption" not in why(h, "urgent", "u")["details"]  # it does not try: nothing to explain


def test_below_its_delay_the_reason_says_how_long_it_has_waited():
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    h.do(h.log.tick(12 * SECOND))
    assert why(h, "urgent", "u")["details"]["preemption"] == "below its delay: it has waited 12 s of 30 s"


def test_preemption_disabled_in_the_partition():
    h = b_fills_the_cluster(queues(partition="    preemption: {enabled: false}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(60 * SECOND))) == []
    assert why(h, "urgent", "u")["details"]["preemption"] == "disabled in partition default"


def reasons(outs, key: str) -> list[str]:
    """The reasons the RM got for ask `key` (its SI scheduling states), in order."""
    return [s.reason for s in states(outs) if s.allocationKey == key]


def test_the_rm_hears_why_an_ask_that_may_preempt_waits_then_what_its_search_found():
    """Issue 40: not only the read API's `details.preemption`: the reason the RM gets (what a
    Kubernetes shim turns into pod events) says why the ask has not preempted yet."""
    h = b_fills_the_cluster(queues(b="resources: {guaranteed: {vcore: 4000m}}"))
    outs = h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert reasons(outs, "u") == [
        "no schedulable node has {vcore: 1 core} free, other than nodes reserved for other asks; "
        "preemption: it waits until its queue's preemption.delay (30 s) has passed"]
    assert why(h, "urgent", "u")["details"]["preemption"] == "below its delay: it has waited 0 s of 30 s"
    outs = h.do(h.log.tick(3 * SECOND))  # past the reservation delay: it reserves a node, still waiting to preempt
    assert reasons(outs, "u") == [
        "node n1 is reserved for it: the node takes nothing else until it has room for it (or another node "
        "has room first); preemption: it waits until its queue's preemption.delay (30 s) has passed"]
    outs = h.do(h.log.tick(27 * SECOND))  # its delay has passed: it searched and found nothing
    assert reasons(outs, "u") == [
        "node n1 is reserved for it: the node takes nothing else until it has room for it (or another node "
        "has room first); it cannot preempt: no allocation it may preempt would make room on any node without "
        "taking its queue below its guarantee"]
    checked(h)


def test_the_rm_hears_that_no_guarantee_on_its_path_lets_it_preempt():
    h = b_fills_the_cluster(queues(a="properties: {preemption.delay: 90s}", b=""))
    outs = h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert reasons(outs, "u") == [
        "no schedulable node has {vcore: 1 core} free, other than nodes reserved for other asks; "
        "preemption: no queue on its path (root.a and above) guarantees what it asks for"]
    outs = h.do(h.log.tick(60 * SECOND))
    assert [r.endswith("; preemption: no queue on its path (root.a and above) guarantees what it asks for")
            for r in reasons(outs, "u")] == [True]  # reserved now, the same note
    checked(h)


def test_the_rm_hears_that_its_partition_does_not_preempt():
    h = b_fills_the_cluster(queues(partition="    preemption: {enabled: false}"))
    outs = h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert reasons(outs, "u") == [
        "no schedulable node has {vcore: 1 core} free, other than nodes reserved for other asks; "
        "preemption: disabled in partition default"]
    outs = h.do(h.log.asks(ask("v", "urgent", vcore=1000)))  # may not preempt: nothing to say
    assert reasons(outs, "v") == [
        "no schedulable node has {vcore: 1 core} free, other than nodes reserved for other asks"]


def test_a_queue_at_its_guarantee_loses_nothing_and_the_reason_says_so():
    h = b_fills_the_cluster(queues(b="resources: {guaranteed: {vcore: 4000m}}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    outs = h.do(h.log.tick(30 * SECOND))
    assert released(outs) == []
    w = why(h, "urgent", "u")
    assert w["code"] == "Reserved" and "it cannot preempt" in w["message"]
    assert w["details"]["preemption"] == ("no allocation it may preempt would make room on any node without taking "
                                          "its queue below its guarantee")
    checked(h)


def test_b_above_its_guarantee_loses_only_what_it_has_over_it():
    h = b_fills_the_cluster(queues(a="resources: {guaranteed: {vcore: 4000m}}", b="resources: {guaranteed: {vcore: 3000m}}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, max_allocations=2, preemption=MAY_PREEMPT)))
    outs = h.do(h.log.tick(30 * SECOND))
    gone = released(outs)
    assert len(gone) == 1  # b keeps 3 of its 4: its guarantee
    outs = confirm(h, gone[0])
    assert len(new_allocs(outs)) == 1
    outs = h.do(h.log.tick(30 * SECOND))
    assert released(outs) == []
    assert part(h).queues["root.b"].allocated == {"vcore": 3000}
    checked(h)


def test_the_preemptor_stays_within_its_own_guarantee():
    h = b_fills_the_cluster(queues(a="resources: {guaranteed: {vcore: 500m}}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    assert why(h, "urgent", "u")["details"]["preemption"] == "queue root.a would go above its guarantee of vcore 0.5 cores"


def test_victims_that_do_not_allow_preemption_of_themselves_are_kept():
    h = b_fills_the_cluster(queues(), b_asks=[ask(f"b{i}", "batch", vcore=1000, preemption=(False, False))
                                              for i in range(4)])
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    assert why(h, "urgent", "u")["details"]["preemption"] == (
        "no running allocation may be preempted for it: of the allocations on nodes that could take it, 4 allow no "
        "preemption of themselves, are pinned to their node or are already leaving")


def test_a_victim_of_higher_priority_is_kept_and_the_reason_says_so():
    """The reason says why (regression, an outside review: it read "no running allocation may be
    preempted for it" alike for a priority, a fence, a disabled queue, a pinned pod)."""
    h = b_fills_the_cluster(queues(), b_asks=[ask(f"b{i}", "batch", vcore=1000, priority=10) for i in range(4)])
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, priority=5, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    assert why(h, "urgent", "u")["details"]["preemption"] == (
        "no running allocation may be preempted for it: of the allocations on nodes that could take it, 4 have a "
        "higher priority than it, as their common parent sees both")


def test_priority_offsets_count_as_the_common_parent_sees_them():
    h = b_fills_the_cluster(queues(a="resources: {guaranteed: {vcore: 2000m}}\n            properties: {priority.offset: '20'}"),
                            b_asks=[ask(f"b{i}", "batch", vcore=1000, priority=10) for i in range(4)])
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, priority=5, preemption=MAY_PREEMPT)))
    assert len(released(h.do(h.log.tick(30 * SECOND)))) == 1  # 5 + 20 is above 10


def test_a_disabled_queue_is_never_a_victim():
    h = b_fills_the_cluster(queues(b="properties: {preemption.policy: disabled}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(30 * SECOND))) == []


FENCED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            properties: {preemption.policy: fence}
            queues:
              - name: a
                resources: {guaranteed: {vcore: 2000m}}
              - name: c
          - name: b
"""


def test_asks_inside_a_fence_take_only_from_inside_it():
    h = Harness()
    h.setup(FENCED, n1={"vcore": 2000}, n2={"vcore": 2000})
    h.do(h.log.apps(app("batch", "root.b"), app("mine", "root.team.c"), app("urgent", "root.team.a")))
    h.do(h.log.asks(ask("b0", "batch", vcore=1000, max_allocations=3)))
    h.do(h.log.asks(ask("c0", "mine", vcore=1000)))
    assert len(part(h).allocations) == 4
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, max_allocations=2, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    assert [r.applicationID for r in gone] == ["mine"]  # not batch's, outside the fence
    confirm(h, gone[0])
    assert released(h.do(h.log.tick(30 * SECOND))) == []  # the second has nothing left inside
    checked(h)


def test_one_victim_is_preferred_to_two_and_the_smallest_that_makes_room():
    h = b_fills_the_cluster(queues(), n1={"vcore": 3000}, n2={"vcore": 2000},
                            b_asks=[ask("big", "batch", vcore=2000), ask("s1", "batch", vcore=1000),
                                    ask("s2", "batch", vcore=1000), ask("s3", "batch", vcore=1000)])
    h.do(h.log.asks(ask("u", "urgent", vcore=2000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    assert [r.allocationKey for r in gone] == ["big"]  # one victim, not two of 1 vcore


def test_preemption_that_would_not_help_takes_nothing():
    h = b_fills_the_cluster(queues(a="resources: {guaranteed: {vcore: 8000m}}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=3000, preemption=MAY_PREEMPT)))  # larger than any node
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    # (it said "no running allocation may be preempted for it", with four running)
    assert why(h, "urgent", "u")["details"]["preemption"] == "no schedulable node would take it even empty"


def test_a_failed_search_is_retried_after_15_seconds_and_finds_what_changed():
    h = b_fills_the_cluster(queues(b="resources: {guaranteed: {vcore: 4000m}}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    h.do(h.log.config(queues(b="resources: {guaranteed: {vcore: 1000m}}")))  # b's guarantee drops
    assert released(h.do(h.log.tick(14 * SECOND))) == []
    assert len(released(h.do(h.log.tick(1 * SECOND)))) == 1
    checked(h)


def test_the_preemptor_removed_before_the_release_leaves_the_node_free():
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    h.do(h.log.release_ask("urgent", "u"))
    assert all(n.reserved is None for n in part(h).nodes.values())
    confirm(h, gone[0])
    assert part(h).preempted == {}
    h.do(h.log.asks(ask("b9", "batch", vcore=1000)))
    assert len(part(h).allocations) == 4  # the freed room serves anyone again
    checked(h)


def test_a_snapshot_mid_preemption_resumes_to_the_same_outputs():
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    entry = h.log.release(gone[0].applicationID, uuid=gone[0].UUID, termination="PREEMPTED_BY_SCHEDULER")
    assert restored.apply(entry) == h.do(entry)
    assert restored.dump() == h.core.dump()


@pytest.mark.parametrize("where, text, problem", [
    ("queue", "properties: {preemption.policy: sometimes}", "preemption.policy: unknown value 'sometimes'"),
    ("queue", "properties: {preemption.delay: soon}", "preemption.delay: expected a duration"),
    ("partition", "    preemption: {enabled: 'yes'}", "preemption.enabled: expected true or false"),
    ("partition", "    preemption: {everything: true}", "preemption.everything: unknown key"),
])
def test_bad_preemption_settings_are_named(where, text, problem):
    config = queues(b=text) if where == "queue" else queues(partition=text)
    with pytest.raises(ConfigError) as err:
        parse_config(load_yaml(config))
    assert any(problem in e for e in err.value.errors), err.value.errors


PINNED = "yunikorn.apache.org/requiredNode"


def test_an_ask_required_on_a_full_node_preempts_there_at_once_placeholders_first():
    h = Harness()
    h.setup(queues(a=""), n1={"vcore": 3000})
    h.do(h.log.apps(app("batch", "root.b"), app("daemon", "root.a")))
    h.do(h.log.asks({**ask("pinned", "batch", vcore=1000), "tags": {PINNED: "n1"}}))
    h.do(h.log.asks({**ask("ph", "batch", vcore=1000), "placeholder": True, "taskGroupName": "tg"}))
    h.do(h.log.asks(ask("b", "batch", vcore=1000)))
    assert {a.key for a in part(h).nodes["n1"].allocations.values()} == {"pinned", "ph", "b"}
    outs = h.do(h.log.asks({**ask("ds", "daemon", vcore=1000), "tags": {PINNED: "n1"}}))  # no policy, no delay
    gone = released(outs)
    assert [r.allocationKey for r in gone] == ["ph"]  # a placeholder first; the pinned one is kept
    assert why(h, "daemon", "ds")["code"] == "Preempting"
    outs = confirm(h, gone[0])
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("ds", "n1")]
    checked(h)


def test_a_required_node_ask_does_not_preempt_higher_priority_allocations():
    h = Harness()
    h.setup(queues(a=""), n1={"vcore": 1000})
    h.do(h.log.apps(app("batch", "root.b"), app("daemon", "root.a")))
    h.do(h.log.asks(ask("b", "batch", vcore=1000, priority=100)))
    outs = h.do(h.log.asks({**ask("ds", "daemon", vcore=1000, priority=1), "tags": {PINNED: "n1"}}))
    assert released(outs) == [] and why(h, "daemon", "ds")["code"] == "Reserved"
    assert "would not make room" in why(h, "daemon", "ds")["details"]["preemption"]


WITHIN = queues(a="properties: {preemption.withinqueue: lowerpriority}", b="")


def test_a_leaf_with_withinqueue_lowerpriority_preempts_strictly_lower_priorities_of_its_own():
    h = Harness()
    h.setup(WITHIN, n1={"vcore": 2000})
    h.do(h.log.apps(app("low", "root.a"), app("same", "root.a"), app("high", "root.a")))
    h.do(h.log.asks(ask("l", "low", vcore=1000, priority=1)))
    h.do(h.log.asks(ask("s", "same", vcore=1000, priority=5)))
    h.do(h.log.asks(ask("h", "high", vcore=1000, priority=5, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    assert [r.applicationID for r in gone] == ["low"]  # not "same": equal priority
    outs = confirm(h, gone[0])
    assert [a.allocationKey for a in new_allocs(outs)] == ["h"]
    checked(h)


QUOTA = """
partitions:
  - name: default
    preemption: {{quotapreemptionenabled: true}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {{max: {{vcore: {max}}}}}
            properties: {{quota.preemption.delay: 10s}}
"""


def test_a_max_lowered_below_usage_is_enforced_after_the_quota_delay_newest_lowest_first():
    h = Harness()
    h.setup(QUOTA.format(max="4000m"), n1={"vcore": 4000})
    h.do(h.log.apps(app("x", "root.a")))
    h.do(h.log.asks(ask("hi", "x", vcore=1000, priority=9, max_allocations=2)))
    h.do(h.log.asks(ask("lo", "x", vcore=1000, priority=1, max_allocations=2)))
    h.do(h.log.config(QUOTA.format(max="1500m")))
    assert released(h.do(h.log.tick(9 * SECOND))) == []
    gone = released(h.do(h.log.tick(1 * SECOND)))
    assert sorted(r.allocationKey for r in gone) == ["hi", "lo", "lo"]  # down to 1 of 4, lowest priority first
    assert all(r.terminationType.value == "PREEMPTED_BY_SCHEDULER" for r in gone)
    checked(h)
    for r in gone:
        confirm(h, r)
    assert part(h).queues["root.a"].allocated == {"vcore": 1000}
    assert released(h.do(h.log.tick(30 * SECOND))) == []
    checked(h)


def test_quota_preemption_is_off_unless_the_partition_enables_it():
    h = Harness()
    h.setup(QUOTA.format(max="4000m").replace("quotapreemptionenabled: true", "enabled: true"), n1={"vcore": 4000})
    h.do(h.log.apps(app("x", "root.a")))
    h.do(h.log.asks(ask("lo", "x", vcore=1000, max_allocations=4)))
    h.do(h.log.config(QUOTA.format(max="1500m").replace("quotapreemptionenabled: true", "enabled: true")))
    assert released(h.do(h.log.tick(60 * SECOND))) == []


def test_a_reload_while_victims_are_released_keeps_the_node_for_the_preemptor():
    """Regression (found by tests/property/test_preemption_machine.py): judged again while its
    victims were still being released, the ask parked at them and dropped its reservation."""
    h = b_fills_the_cluster(queues())
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    h.do(h.log.config(queues()))  # wakes every reserved ask
    node = part(h).allocations[gone[0].UUID].node
    assert node.reserved is not None and node.reserved.key == "u"
    checked(h)
    outs = confirm(h, gone[0])
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("u", node.id)]


def test_a_victims_queue_is_judged_by_what_it_holds_not_by_what_is_coming_to_it():
    """Regression (found by tests/property/test_preemption_machine.py): an ask of the victim's
    queue holding a node freed for it counted as usage, and let that queue lose an allocation
    that took it below its guarantee."""
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 1000m}}", b="resources: {guaranteed: {vcore: 1000m}}",
                   extra="          - name: c"), n1={"vcore": 500}, n2={"vcore": 500}, n3={"vcore": 500})
    h.do(h.log.apps(app("filler", "root.c"), app("bee", "root.b"), app("ay", "root.a")))
    h.do(h.log.asks(ask("c", "filler", vcore=500, max_allocations=2)))
    h.do(h.log.asks(ask("b0", "bee", vcore=500)))  # b holds 500 of its 1000
    h.do(h.log.asks(ask("b1", "bee", vcore=500, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    assert [r.applicationID for r in gone] == ["filler"]  # coming to b: 500; not confirmed yet
    h.do(h.log.nodes(node("n4", vcore=500)))
    h.do(h.log.asks(ask("b2", "bee", vcore=500)))  # takes n4: b holds 1000, its guarantee
    assert part(h).queues["root.b"].allocated == {"vcore": 1000}
    h.do(h.log.asks(ask("a0", "ay", vcore=500, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(30 * SECOND)))
    assert [r.applicationID for r in gone] == ["filler"]  # never b's: it would fall below 1000
    checked(h)


def test_a_reserved_ask_held_by_a_new_max_frees_its_node_for_the_asks_after_it_in_the_walk():
    """Regression (found by tests/property/test_preemption_machine.py): a reload holds a reserved
    ask at its queue's new max; the walk went on judging later asks as if its node were still
    reserved, and one that fits it stayed waiting."""
    config = queues(a="", b="", extra="          - name: c")
    h = Harness()
    h.setup(config, n1={"vcore": 1000}, n2={"vcore": 1000})
    h.do(h.log.apps(app("filler", "root.c"), app("ay", "root.a"), app("bee", "root.b")))
    h.do(h.log.asks(ask("half", "filler", vcore=500), ask("full", "filler", vcore=1000)))
    h.do(h.log.asks(ask("A", "ay", vcore=1000)))
    h.do(h.log.tick(3 * SECOND))
    h.do(h.log.asks(ask("B", "bee", vcore=500)))
    h.do(h.log.tick(3 * SECOND))
    held = {n.id: n.reserved.key for n in part(h).nodes.values() if n.reserved is not None}
    assert held == {"n1": "A", "n2": "B"}  # A misses 500 on n1; B may not use n1's 500: it is A's
    outs = h.do(h.log.config(queues(a="resources: {max: {vcore: 500m}}", b="", extra="          - name: c")))
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("B", "n1")]
    checked(h)


def test_a_required_node_ask_blocked_by_young_allocations_is_told_when_and_preempts_then():
    """An ask that must run on one node, full of allocations younger than their queue's
    preemption.minruntime: it is told when the first is old enough, and is judged again by
    the retry interval (nothing on its node changes as they age), so it preempts then."""
    h = Harness()
    h.setup(queues(a="", b="properties: {preemption.minruntime: 10m}"), n1={"vcore": 1000})
    h.do(h.log.apps(app("batch", "root.b"), app("daemon", "root.a")))
    placed = new_allocs(h.do(h.log.asks(ask("b", "batch", vcore=1000))))
    outs = h.do(h.log.asks({**ask("ds", "daemon", vcore=1000), "tags": {PINNED: "n1"}}))
    assert released(outs) == []  # b is younger than 10 min: no victim
    said = why(h, "daemon", "ds")["details"]["preemption"]
    assert said.startswith("the allocations it may preempt on node n1 would not make room for it; those younger "
                           "than their queue's preemption.minruntime are no victims yet: the first is old enough at ")
    assert said.endswith(f" UTC (allocation {placed[0].UUID} in root.b, minimum 10 min)")
    gone = []
    for _ in range(9):  # 9 min: b is still young
        gone += released(h.do(h.log.tick(60 * SECOND)))
    assert gone == []
    for _ in range(2):  # past 10 min, and within a retry interval of it
        gone += released(h.do(h.log.tick(60 * SECOND)))
    assert [r.allocationKey for r in gone] == ["b"]
    outs = confirm(h, gone[0])
    assert [(a.allocationKey, a.nodeID) for a in new_allocs(outs)] == [("ds", "n1")]
    checked(h)


def _victim_waiting_for_its_confirmation(b_ask: dict, b_app: dict | None = None) -> tuple[Harness, object]:
    """Queue b (over its guarantee) holds two 1-vcore allocations of `b_ask` on two 1-vcore
    nodes; queue a's ask preempts one of them after its delay; the RM has not confirmed yet."""
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 2}}", b="resources: {guaranteed: {vcore: 1}}"),
            n1={"vcore": 1000}, n2={"vcore": 1000})
    h.do(h.log.apps(b_app or app("batch", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks(b_ask))
    assert len(part(h).allocations) == 2
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.terminationType.value for r in gone] == ["PREEMPTED_BY_SCHEDULER"]
    return h, gone[0]


def _request_errors(outs) -> list[str]:
    return [e.message for e in events(outs) if e.type.value == "REQUEST"]


def test_a_victims_own_execution_timeout_before_the_confirmation_does_not_release_it_twice():
    b = {**ask("b", "batch", vcore=1000, max_allocations=2), "executionTimeoutMilliSeconds": 40000}
    h, victim = _victim_waiting_for_its_confirmation(b)
    outs = h.do(h.log.tick(10 * SECOND))  # 41 s: both timeouts due; the victim is on its way out already
    timed_out = released(outs)
    assert victim.UUID not in [r.UUID for r in timed_out]
    assert [r.terminationType.value for r in timed_out] == ["TIMEOUT"]  # the other allocation only
    outs = confirm(h, victim)
    assert _request_errors(outs) == []  # the RM's confirmation is taken, not refused
    assert [a.allocationKey for a in new_allocs(outs)] == ["u"]
    checked(h)


def test_a_gangs_placeholder_timeout_does_not_release_a_preempted_placeholder_twice():
    from ykbus.log.build import resource
    gang = app("batch", "root.b", placeholderAsk=resource(vcore=2000), executionTimeoutMilliSeconds=40000,
               gangSchedulingStyle="Soft")
    ph = {**ask("ph", "batch", vcore=1000, max_allocations=2), "taskGroupName": "workers", "placeholder": True}
    h, victim = _victim_waiting_for_its_confirmation(ph, gang)
    outs = h.do(h.log.tick(10 * SECOND))  # 41 s: the placeholder timeout
    timed_out = released(outs)
    assert victim.UUID not in [r.UUID for r in timed_out]
    assert [r.terminationType.value for r in timed_out] == ["TIMEOUT"]  # the other placeholder only
    outs = confirm(h, victim)
    assert _request_errors(outs) == []
    assert [a.allocationKey for a in new_allocs(outs)] == ["u"]
    checked(h)


def test_an_application_failing_at_its_execution_timeout_does_not_release_a_preempted_allocation_twice():
    b = ask("b", "batch", vcore=1000, max_allocations=2)
    h, victim = _victim_waiting_for_its_confirmation(b, app("batch", "root.b", executionTimeoutMilliSeconds=40000))
    outs = h.do(h.log.tick(10 * SECOND))  # 41 s: the application fails, everything it holds goes
    assert ("batch", "Failed") in app_updates(outs)
    assert victim.UUID not in [r.UUID for r in released(outs)]
    assert len(released(outs)) == 1
    assert [a.allocationKey for a in new_allocs(outs)] == ["u"]  # its room is free at once, as on a timeout
    checked(h)


def test_an_allocation_pinned_to_its_node_is_never_a_victim():
    """A DaemonSet's pod (yunikorn.apache.org/requiredNode) is not taken: YuniKorn skips
    allocations that require a specific node. The unpinned one is taken instead."""
    pinned = {**ask("ds", "batch", vcore=1000), "tags": {"yunikorn.apache.org/requiredNode": "n2"}}
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 2}}", b="resources: {guaranteed: {vcore: 1}}"),
            n1={"vcore": 1000}, n2={"vcore": 1000})
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks(ask("old", "batch", vcore=1000)))
    h.do(h.log.asks(pinned))  # the newest: without the rule, the first victim
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.allocationKey for r in gone] == ["old"]
    checked(h)


def test_only_pinned_allocations_running_leaves_nothing_to_preempt():
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 2}}", b="resources: {guaranteed: {vcore: 1}}"),
            n1={"vcore": 1000}, n2={"vcore": 1000})
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    for n in ("n1", "n2"):
        h.do(h.log.asks({**ask(f"ds-{n}", "batch", vcore=1000), "tags": {"yunikorn.apache.org/requiredNode": n}}))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(31 * SECOND))) == []
    assert why(h, "urgent", "u")["code"] != "Preempting"


def sibling_queues(team: str = "resources: {guaranteed: {vcore: 4}}") -> str:
    return f"""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            {team}
            queues:
              - name: x
                resources: {{guaranteed: {{vcore: 2}}}}
              - name: y
                resources: {{guaranteed: {{vcore: 2}}}}
          - name: other
"""


def test_a_child_takes_its_guarantee_back_from_a_sibling_under_a_parent_at_its_guarantee():
    """team is at its guarantee (y borrowed x's share): taking from y inside team leaves team
    where it is, so x (0 of its 2) preempts one of y's, as YuniKorn does (the victims leave
    every level above them before the ask's queues are judged)."""
    h = Harness()
    h.setup(sibling_queues(), n1={"vcore": 2000}, n2={"vcore": 2000})
    h.do(h.log.apps(app("batch", "root.team.y"), app("urgent", "root.team.x")))
    h.do(h.log.asks(ask("b", "batch", vcore=1000, max_allocations=4)))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [(r.applicationID, r.terminationType.value) for r in gone] == [("batch", "PREEMPTED_BY_SCHEDULER")]
    checked(h)


def test_a_parent_at_its_guarantee_still_stops_taking_from_outside_it():
    """The same ask takes nothing from a queue outside team: team would go above its guarantee."""
    h = Harness()
    h.setup(sibling_queues(), n1={"vcore": 2000}, n2={"vcore": 2000}, n3={"vcore": 1000})
    h.do(h.log.apps(app("batch", "root.team.y"), app("other", "root.other"), app("urgent", "root.team.x")))
    h.do(h.log.asks(ask("b", "batch", vcore=1000, max_allocations=4)))
    h.do(h.log.asks(ask("o", "other", vcore=1000)))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.applicationID for r in gone] == ["batch"]  # o (newest, smallest alike) is outside team: kept
    checked(h)


def quota_children(max_vcore: int, children: dict[str, str], parent: str = "guaranteed: {vcore: 4}, ") -> str:
    """Quota preemption on, a parent of max `max_vcore` cores (after `parent`'s other
    resources) whose children have the guarantees given (`{vcore: 2}`), its delay 1 s."""
    kids = "".join(f"              - name: {name}\n                resources: {{guaranteed: {g}}}\n"
                   for name, g in children.items())
    return f"""
partitions:
  - name: default
    preemption: {{enabled: true, quotapreemptionenabled: true}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: parent
            resources: {{{parent}max: {{vcore: {max_vcore}}}}}
            properties: {{quota.preemption.delay: 1s}}
            queues:
{kids}"""


QUOTA_CHILDREN = {"a": "{vcore: 2}", "b": "{vcore: 2}"}


def test_quota_preemption_takes_from_the_child_above_its_guarantee_not_the_one_at_it():
    """parent's max lowered from 8 to 4 with a at its guarantee (2, the newest) and b at 4:
    the 2 over come from b, as YuniKorn's quota preemptor takes only what each child holds
    above its guarantee; a keeps what it is guaranteed."""
    h = Harness()
    h.setup(quota_children(8, QUOTA_CHILDREN), n1={"vcore": 16000})
    h.do(h.log.apps(app("bb", "root.parent.b"), app("aa", "root.parent.a")))
    h.do(h.log.asks(ask("b", "bb", vcore=1000, max_allocations=4)))
    h.do(h.log.asks(ask("a", "aa", vcore=1000, max_allocations=2)))
    h.do(h.log.config(quota_children(4, QUOTA_CHILDREN)))
    gone = released(h.do(h.log.tick(2 * SECOND)))
    assert [r.applicationID for r in gone] == ["bb", "bb"]
    for r in gone:
        confirm(h, r)
    assert part(h).queues["root.parent.a"].allocated == {"vcore": 2000}
    assert part(h).queues["root.parent.b"].allocated == {"vcore": 2000}
    checked(h)


def test_a_delay_in_gos_form_is_read_as_yunikorn_reads_it():
    """`preemption.delay: 1m30s` (Go's time.ParseDuration, which YuniKorn uses) rejected the
    whole registration; it is 90 s."""
    h = b_fills_the_cluster(queues(a="resources: {guaranteed: {vcore: 2000m}}\n            properties: "
                                     "{preemption.delay: 1m30s}"))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(89 * SECOND))) == []
    assert len(released(h.do(h.log.tick(1 * SECOND)))) == 1


def test_reservations_of_asks_it_may_preempt_do_not_block_its_preemption():
    """Both nodes reserved for asks of queue b (over its guarantee, asks that cannot fit): the
    ask of a (under its guarantee) waited for ever. A reservation of an ask whose allocations
    it may preempt gives way, as YuniKorn's preemption cancels it (YUNIKORN-3092)."""
    h = b_fills_the_cluster(queues(b="resources: {guaranteed: {vcore: 1000m}}"))
    h.do(h.log.apps(app("more", "root.b")))
    h.do(h.log.asks(ask("m1", "more", vcore=2000), ask("m2", "more", vcore=2000)))
    h.do(h.log.tick(3 * SECOND))
    assert sorted(n.reserved.key for n in part(h).nodes.values() if n.reserved) == ["m1", "m2"]
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.applicationID for r in gone] == ["batch"]
    w = why(h, "urgent", "u")
    assert w["code"] == "Preempting"
    assert part(h).nodes[w["details"]["node"]].reserved.key == "u"
    confirm(h, gone[0])
    assert part(h).queues["root.a"].allocated == {"vcore": 1000}
    checked(h)


def test_a_reservation_of_an_ask_it_may_not_preempt_still_holds_its_node():
    """The same with the reserving asks of higher priority than the preemptor: they keep
    their nodes."""
    h = b_fills_the_cluster(queues(b="resources: {guaranteed: {vcore: 1000m}}"))
    h.do(h.log.apps(app("more", "root.b")))
    h.do(h.log.asks(ask("m1", "more", vcore=2000, priority=10), ask("m2", "more", vcore=2000, priority=10)))
    h.do(h.log.tick(3 * SECOND))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(31 * SECOND))) == []
    assert sorted(n.reserved.key for n in part(h).nodes.values() if n.reserved) == ["m1", "m2"]


def test_the_reason_names_the_guarantee_that_keeps_the_victims():
    """b at its own guarantee: its allocations would make room, but taking one takes b below
    its guarantee; the reason said they would not make room."""
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 2}}", b="resources: {guaranteed: {vcore: 2, memory: 4096}}"),
            n1={"vcore": 2000, "memory": 4096})
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks(ask("b", "batch", vcore=1000, memory=2048, max_allocations=2)))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(31 * SECOND))) == []
    assert "without taking its queue below its guarantee" in why(h, "urgent", "u")["message"]



def test_an_applications_originator_is_the_last_victim_chosen():
    """The driver of a Spark job (its originator) was taken as the smallest victim, ending the
    whole job; YuniKorn takes the others first (YUNIKORN-1988): here the executor."""
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 4}}", b="resources: {guaranteed: {vcore: 1}}"),
            n1={"vcore": 3000})
    h.do(h.log.apps(app("spark", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks({**ask("driver", "spark", vcore=1000), "Originator": True}))
    h.do(h.log.asks(ask("exec", "spark", vcore=2000)))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.allocationKey for r in gone] == ["exec"]
    checked(h)  # (the snapshot keeps which allocation is the originator)
    assert all(a.originator == (a.key == "driver") for a in load_snapshot(dump_snapshot(h.core), load_yaml)
               .rms["rm-1"].partitions["default"].allocations.values())


def test_an_originator_is_taken_when_nothing_else_makes_room():
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 4}}"),
            n1={"vcore": 2000})
    h.do(h.log.apps(app("spark", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks({**ask("driver", "spark", vcore=1000), "Originator": True}))
    h.do(h.log.asks(ask("exec", "spark", vcore=1000)))
    h.do(h.log.asks(ask("u", "urgent", vcore=2000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert sorted(r.allocationKey for r in gone) == ["driver", "exec"]


def test_a_queue_over_its_vcore_guarantee_and_under_its_memory_one_loses_what_it_holds_over():
    """Every pod asks vcore and memory; b holds 4 cores (guaranteed 1) and 4 Gi (guaranteed
    8): taking one of its pods took it below its memory guarantee, so nothing was ever taken
    from b (in any cluster guaranteeing both). YuniKorn judges b by what it holds over its
    guarantee: vcore. One pod is taken, and b cannot take it back (it is over its vcore
    guarantee)."""
    gi = 2**30
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 4}}", b=f"resources: {{guaranteed: {{vcore: 1, memory: {8 * gi}}}}}"),
            n1={"vcore": 2000, "memory": 2 * gi}, n2={"vcore": 2000, "memory": 2 * gi})
    h.do(h.log.apps(app("batch", "root.b"), app("urgent", "root.a")))
    h.do(h.log.asks(ask("b", "batch", vcore=1000, memory=gi, max_allocations=4)))
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, memory=gi, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [r.applicationID for r in gone] == ["batch"]
    confirm(h, gone[0])
    h.do(h.log.asks(ask("b2", "batch", vcore=1000, memory=gi, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(60 * SECOND))) == []  # no way back
    checked(h)


def test_siblings_without_guarantees_of_their_own_do_not_take_from_each_other():
    """p is guaranteed 2 and holds it; its children x and y have no guarantee. x took a pod
    from y, then y took it back, for ever (a review of this session's change; it also looped
    with p below its guarantee before it). A guarantee at or above the common parent does not
    entitle one child to another's allocations."""
    config = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: p
            resources: {guaranteed: {vcore: %s}}
            queues:
              - name: x
              - name: y
"""
    for guarantee in ("2000m", "4000m"):  # at it, and below it
        h = Harness()
        h.setup(config % guarantee, n1={"vcore": 2000})
        h.do(h.log.apps(app("ay", "root.p.y"), app("ax", "root.p.x")))
        h.do(h.log.asks(ask("y", "ay", vcore=1000, max_allocations=2, preemption=MAY_PREEMPT)))
        h.do(h.log.asks(ask("x", "ax", vcore=1000, preemption=MAY_PREEMPT)))
        assert released(h.do(h.log.tick(31 * SECOND))) == [], guarantee


def test_two_queues_over_their_vcore_guarantee_do_not_trade_pods_for_memory():
    """a and b each guaranteed {vcore: 10, memory: 10}, each holding five {vcore 4, memory 1}
    pods: over in vcore, under in memory. Their memory-only asks took each other's pods in
    turn, four pods killed for nothing: an ask of memory alone takes only from a queue over its
    memory guarantee."""
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 10, memory: 10}}",
                   b="resources: {guaranteed: {vcore: 10, memory: 10}}"), n1={"vcore": 40000, "memory": 10})
    h.do(h.log.apps(app("aa", "root.a"), app("bb", "root.b")))
    h.do(h.log.asks(ask("a", "aa", vcore=4000, memory=1, max_allocations=5)))
    h.do(h.log.asks(ask("b", "bb", vcore=4000, memory=1, max_allocations=5)))
    h.do(h.log.asks(ask("bm", "bb", memory=1, preemption=MAY_PREEMPT), ask("am", "aa", memory=1, preemption=MAY_PREEMPT)))
    assert released(h.do(h.log.tick(31 * SECOND))) == []


def test_quota_preemption_with_two_resources_judges_a_child_by_what_it_holds_over_its_guarantee():
    """A child guaranteed {vcore 2, memory 100} holding 8 pods of {1 core, 1}: its memory is
    within its guarantee, its vcore far over; the parent's max lowered to 4 cores took nothing
    (each pod's memory was judged as if it took the child below its guarantee)."""
    child = {"child": "{vcore: 2, memory: 100}"}
    h = Harness()
    h.setup(quota_children(8, child, parent=""), n1={"vcore": 16000, "memory": 100})
    h.do(h.log.apps(app("c", "root.parent.child")))
    h.do(h.log.asks(ask("k", "c", vcore=1000, memory=1, max_allocations=8)))
    h.do(h.log.config(quota_children(4, child, parent="")))
    assert len(released(h.do(h.log.tick(2 * SECOND)))) == 4


def test_room_free_on_a_node_reserved_for_another_is_not_a_reason_to_take_a_pod_there():
    """n1 had a core free, kept for a reserved ask of 2; the preemptor of 1 core took n1's
    pod (the newest: the first a search takes; n1's reservation gave way) though it needed
    none there: room nobody used. It preempts where room is missing: n2."""
    from ykbus.log.build import allocation, node
    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 2}}", b="resources: {guaranteed: {vcore: 1000m}}"))
    h.do(h.log.apps(app("batch", "root.b"), app("more", "root.b"), app("urgent", "root.a")))
    h.do(h.log.nodes(node("n2", vcore=2000, existing=[allocation("x2", "b2", "batch", "n2", vcore=1000),
                                                      allocation("x3", "b3", "batch", "n2", vcore=1000)])))
    h.do(h.log.nodes(node("n1", vcore=2000, existing=[allocation("x1", "b1", "batch", "n1", vcore=1000)])))
    h.do(h.log.asks(ask("m", "more", vcore=2000)))
    h.do(h.log.tick(3 * SECOND))
    assert {n.id: n.reserved.key for n in part(h).nodes.values() if n.reserved} == {"n1": "m"}
    h.do(h.log.asks(ask("u", "urgent", vcore=1000, preemption=MAY_PREEMPT)))
    gone = released(h.do(h.log.tick(31 * SECOND)))
    assert [part(h).allocations[r.UUID].node.id for r in gone] == ["n2"]
    checked(h)


def test_a_snapshot_written_before_originators_were_kept_takes_them_from_their_asks():
    """A snapshot of the fifteenth session's format has no `originator` on its allocations:
    loaded, they all read False, and the driver was the first victim again after a restart
    (snapshot and tail then differed from the log replayed whole)."""
    import msgspec

    from ykbus.core import snapshot as snap

    h = Harness()
    h.setup(queues(a="resources: {guaranteed: {vcore: 4}}", b="resources: {guaranteed: {vcore: 1}}"), n1={"vcore": 3000})
    h.do(h.log.apps(app("spark", "root.b")))
    h.do(h.log.asks({**ask("driver", "spark", vcore=1000), "Originator": True}, ask("exec", "spark", vcore=1000)))
    data = msgspec.msgpack.decode(dump_snapshot(h.core))  # as plain values: its arrays as lists
    assert isinstance(data, dict)
    partitions = snap.SRM.__struct_fields__.index("partitions")
    allocations = snap.SPartition.__struct_fields__.index("allocations")
    for rm in data["rms"]:
        for part_ in rm[partitions]:
            for alloc in part_[allocations]:
                assert alloc.pop() == (alloc[1] == "driver")  # the field this version added, last
    old = msgspec.msgpack.encode(data)
    loaded = load_snapshot(old, load_yaml)
    allocs = loaded.rms["rm-1"].partitions["default"].allocations.values()
    assert {a.key: a.originator for a in allocs} == {"driver": True, "exec": False}
