"""An ask past its reservation delay that judging could only park again goes behind its
reservation gate without being woken (`Partition.reservation_due`, `RESERVING_SHORTCUT`).
Random backlogs of a few shapes, with releases, node changes, limits and the clock moving
past the delay, decide byte for byte the same with the shortcut and without it, and end in
the same state."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import invariants
from ykbus.core import Core, partition
from ykbus.core.waits import POOLED_RESERVING
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import encode_output
from ykbus.yamlload import load_yaml

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            properties: {application.sort.policy: fair}
          - name: b
            resources: {max: {vcore: 9000}}
          - name: c
            maxapplications: 2
            limits:
              - {users: [u1], maxresources: {vcore: 5000}}
"""
SHAPES = [(1000, 1000), (3000, 2000), (9000, 500)]  # 9000 cores: larger than any node
ACTIONS = st.one_of(
    st.tuples(st.just("node"), st.integers(1, 4), st.sampled_from([4000, 8000]),
              st.sampled_from(["CREATE", "UPDATE", "DRAIN_NODE", "DRAIN_TO_SCHEDULABLE", "DECOMISSION"])),
    st.tuples(st.just("app"), st.sampled_from(["root.a", "root.b", "root.c"]), st.sampled_from(["u0", "u1"])),
    st.tuples(st.just("asks"), st.integers(0, 30), st.lists(st.sampled_from(SHAPES), min_size=1, max_size=4),
              st.sampled_from([None, None, None, "leader", "worker"])),
    st.tuples(st.just("release"), st.integers(0, 1000), st.integers(1, 3)),
    st.tuples(st.just("tick"), st.sampled_from([100, 1000, 2100, 5000])),
    st.tuples(st.just("asks"), st.integers(0, 30), st.lists(st.just((9000, 500)), min_size=1, max_size=3), st.none()),
    st.tuples(st.just("tick"), st.just(2100)),
)


class Lockstep:
    """Two cores fed the same entries, the shortcut on for one and off for the other."""

    def __init__(self) -> None:
        self.fast, self.slow = Core(load_yaml=load_yaml), Core(load_yaml=load_yaml)
        self.log = LogBuilder("rm")
        self.running: list[tuple[str, str]] = []  # (application, uuid)
        self.apps = 0
        self.asks = 0

    def do(self, entry) -> None:
        outs = self.fast.apply(entry)
        partition.RESERVING_SHORTCUT = False
        try:
            slow = self.slow.apply(entry)
        finally:
            partition.RESERVING_SHORTCUT = True
        got, expected = [encode_output(o) for o in outs], [encode_output(o) for o in slow]
        assert got == expected, f"entry {entry.seq} ({entry.kind}): the shortcut decided differently"
        for o in outs:
            if o.kind == "alloc":
                self.running += [(a.applicationID, a.UUID) for a in o.msg.new]
                gone = {r.UUID for r in o.msg.released}
                self.running = [r for r in self.running if r[1] not in gone]

    def judged(self, core: Core) -> list[str]:
        """The keys of the asks the walks judged, in order (the scheduler's `tried`)."""
        tried = core.rms["rm"].partitions["default"].scheduler.tried
        assert tried is not None
        return tried


def run(actions) -> Lockstep:
    s = Lockstep()
    s.do(s.log.register(CONFIG))
    for core in (s.fast, s.slow):
        core.rms["rm"].partitions["default"].scheduler.tried = []
    for action in actions:
        kind = action[0]
        if kind == "node":
            _, n, vcore, how = action
            s.do(s.log.nodes(node(f"n{n}", action=how, vcore=vcore, memory=8000)))
        elif kind == "app":
            s.apps += 1
            s.do(s.log.apps(app(f"app{s.apps}", action[1], user=action[2])))
        elif kind == "asks" and s.apps:
            _, which, shapes, role = action
            owner = f"app{which % s.apps + 1}"
            asks = []
            for vcore, memory in shapes:
                s.asks += 1
                one = ask(f"k{s.asks}", owner, vcore=vcore, memory=memory)
                if role:
                    one["tags"] = {"ykbus.io/role": role}
                asks.append(one)
            s.do(s.log.asks(*asks))
        elif kind == "release" and s.running:
            _, which, n = action
            for _ in range(min(n, len(s.running))):
                app_id, uuid = s.running[which % len(s.running)]
                s.do(s.log.release(app_id, uuid=uuid))
        elif kind == "tick":
            s.do(s.log.tick(action[1] * 1_000_000))
    assert s.fast.dump() == s.slow.dump(), "the shortcut left a different state"
    return s


@settings(max_examples=int(os.environ.get("YKBUS_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=20, max_size=80))
def test_the_reservation_shortcut_decides_as_judging_does(actions):
    run(actions)


def test_the_shortcut_is_taken_with_a_backlog_past_its_delay():
    """A backlog of asks larger than any node: as each passes the delay it goes behind its
    reservation gate without a walk judging it (the walks without the shortcut judge each
    once more), and the two cores decide the same."""
    actions = [("node", 1, 8000, "CREATE"), ("node", 2, 8000, "CREATE"), ("app", "root.a", "u0")]
    for _ in range(6):
        actions += [("asks", 0, [(9000, 500)], None), ("tick", 1000)]
    actions += [("tick", 2100), ("tick", 2100)]
    s = run(actions)
    fast, slow = s.judged(s.fast), s.judged(s.slow)
    assert sorted(slow) == sorted(fast + [f"k{i}" for i in range(1, 7)])  # each judged once more without
    part = s.fast.rms["rm"].partitions["default"]
    assert all(a.pooled == POOLED_RESERVING for app in part.apps.values() for a in app.asks.values())
    invariants.waits_are_consistent(part)
