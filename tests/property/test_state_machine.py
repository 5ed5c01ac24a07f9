"""Hypothesis state machine over generated logs, with the core's safety invariants.

After every entry:
- no node that received a new allocation is over-committed; no queue on the path of a new
  allocation is over its max;
- every allocation belongs to a live application and node, and every usage and pending
  counter equals the sum of what it counts;
- work conservation: no pending ask is left unplaced while a schedulable node fits it and
  every queue above it has headroom (the incremental wake-ups miss nothing);
- an entry that only carries bad input changes nothing.
At the end, replaying the same log in a fresh core gives byte-identical outputs.
"""

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ykbus.core import Core
from ykbus.core.lifecycle import SCHEDULABLE_APP_STATES, NodeState
from ykbus.core.resources import fits
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import encode_output
from ykbus.yamlload import load_yaml

CONFIGS = [
    """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {guaranteed: {vcore: 4}, max: {vcore: 10, memory: 10000}}
          - name: b
            properties: {application.sort.policy: fair}
            queues:
              - name: b1
                resources: {max: {vcore: 6}}
              - name: b2
                maxapplications: 2
                properties: {priority.offset: 10}
""",
    """
partitions:
  - name: default
    nodesortpolicy: {type: binpacking}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            properties: {priority.policy: fence}
          - name: b
            resources: {max: {memory: 8000}}
            queues:
              - name: b1
              - name: b2
""",
]
PLACEMENT = """
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: user
        create: true
        parent: {name: fixed, value: root.users}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {max: {vcore: 12}}
          - name: b
            queues:
              - name: b1
              - name: b2
          - name: users
            parent: true
            resources: {max: {vcore: 9}}
"""
CONFIGS.append(PLACEMENT)
LIMITS = """
partitions:
  - name: default
    limits:
      - {users: ['*'], maxresources: {vcore: 7}}
    queues:
      - name: root
        submitacl: ' g0,g1'
        queues:
          - name: a
            limits:
              - {users: [u1], maxapplications: 1, maxresources: {vcore: 3}}
              - {groups: [g0], maxresources: {vcore: 4}}
              - {groups: ['*'], maxapplications: 2}
          - name: b
            submitacl: 'u3'
            queues:
              - name: b1
              - name: b2
                limits:
                  - {users: ['*'], maxapplications: 1}
"""
CONFIGS.append(LIMITS)
LEAVES = ["root.a", "root.b.b1", "root.b.b2", ""]  # "": placed by rules, or rejected without


def first_diff(a, b, path="$"):
    """Where two dumps first differ, and how."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return first_diff(a.get(k), b.get(k), f"{path}.{k}")
    return f"{path}: {a!r} != {b!r}"


class CoreMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.core = Core(load_yaml=load_yaml)
        self.log = LogBuilder("rm")
        self.entries = []
        self.outputs = []
        self.per_entry = []
        self.last = []
        self.nodes = 0
        self.apps = 0
        self.asks = 0
        self.registered = False

    def do(self, entry):
        self.entries.append(entry)
        self.last = self.core.apply(entry)
        self.outputs += self.last
        self.per_entry.append([encode_output(o) for o in self.last])
        return self.last

    def part(self):
        return self.core.rms["rm"].partitions["default"]

    @precondition(lambda self: not self.registered)
    @rule(config=st.sampled_from(CONFIGS))
    def register(self, config):
        self.do(self.log.register(config))
        self.registered = True

    @rule(config=st.sampled_from(CONFIGS + [""]), group=st.sampled_from(["*", "queues"]))
    def queue_file(self, config, group):
        """The operator's queue file (an entry of the service), or its withdrawal."""
        self.do(self.log.entry("config", {"policyGroup": group, "config": config}, rm=""))

    @precondition(lambda self: self.registered)
    @rule(vcore=st.integers(0, 8000), memory=st.integers(0, 8000), occupied=st.integers(0, 2000))
    def add_node(self, vcore, memory, occupied):
        self.nodes += 1
        self.do(self.log.nodes(node(f"n{self.nodes}", vcore=vcore, memory=memory, occupied={"vcore": occupied})))

    @precondition(lambda self: self.registered and self.nodes)
    @rule(data=st.data(), action=st.sampled_from(["UPDATE", "DRAIN_NODE", "DRAIN_TO_SCHEDULABLE", "DECOMISSION"]))
    def change_node(self, data, action):
        n = data.draw(st.integers(1, self.nodes))
        extra = {}
        if action == "UPDATE":
            extra = {"vcore": data.draw(st.integers(0, 8000)), "memory": data.draw(st.integers(0, 8000))}
        self.do(self.log.nodes(node(f"n{n}", action=action, **extra)))

    @precondition(lambda self: self.registered)
    @rule(leaf=st.sampled_from(LEAVES), timeout=st.sampled_from([0, 0, 1500, 40000]), user=st.integers(0, 3))
    def add_app(self, leaf, timeout, user):
        self.apps += 1
        groups = [[], ["g0"], ["g1", "g0"], ["g2"]][user]
        self.do(self.log.apps(app(f"app{self.apps}", leaf, user=f"u{user}", groups=groups,
                                  executionTimeoutMilliSeconds=timeout)))

    @precondition(lambda self: self.registered and self.apps)
    @rule(data=st.data())
    def remove_app(self, data):
        self.do(self.log.remove_apps(f"app{data.draw(st.integers(1, self.apps))}"))

    @precondition(lambda self: self.registered and self.apps)
    @rule(data=st.data(), n=st.integers(1, 4))
    def add_asks(self, data, n):
        asks = []
        for _ in range(n):
            self.asks += 1
            key = f"k{self.asks}" if data.draw(st.booleans()) or self.asks < 3 else f"k{data.draw(st.integers(1, self.asks))}"
            asks.append({**ask(key, f"app{data.draw(st.integers(1, self.apps))}",
                               priority=data.draw(st.integers(-3, 3)), max_allocations=data.draw(st.integers(1, 3)),
                               vcore=data.draw(st.integers(0, 3000)), memory=data.draw(st.integers(0, 3000))),
                         "executionTimeoutMilliSeconds": data.draw(st.sampled_from([0, 0, 700, 2500]))})
        self.do(self.log.asks(*asks))

    @precondition(lambda self: self.registered and self.part().allocations)
    @rule(data=st.data(), by=st.sampled_from(["uuid", "key", "all"]))
    def release(self, data, by):
        allocs = list(self.part().allocations.values())
        a = allocs[data.draw(st.integers(0, len(allocs) - 1))]
        kw = {"uuid": {"uuid": a.uuid}, "key": {"key": a.key}, "all": {}}[by]
        self.do(self.log.release(a.app.id, **kw))

    @precondition(lambda self: self.registered and self.apps)
    @rule(data=st.data())
    def release_ask(self, data):
        self.do(self.log.release_ask(f"app{data.draw(st.integers(1, self.apps))}",
                                     f"k{data.draw(st.integers(1, max(1, self.asks)))}"))

    @rule(seconds=st.sampled_from([0, 1, 31]))
    def tick(self, seconds):
        self.do(self.log.tick(seconds * 10**9))

    @precondition(lambda self: self.registered)
    @rule(kind=st.sampled_from(["garbage", "unknown-app", "unknown-node", "negative", "bad-kind"]))
    def bad_input(self, kind):
        before = self.core.dump()
        entry = {
            "garbage": lambda: self.log.entry("alloc", b"{]"),
            "unknown-app": lambda: self.log.asks(ask("x", "no-such-app", vcore=1)),
            "unknown-node": lambda: self.log.nodes(node("no-such-node", action="UPDATE", vcore=1)),
            "negative": lambda: self.log.asks(ask("x", "app1", vcore=-5)),
            "bad-kind": lambda: self.log.entry("nonsense", {}),
        }[kind]()
        outs = self.do(entry)
        assert outs, "bad input must be answered"
        after = self.core.dump()
        for d in (before, after):
            d.pop("last_seq"), d.pop("now")
        assert after == before, f"{kind} changed the state"

    # --- invariants ----------------------------------------------------------------

    @invariant()
    def new_allocations_fit(self):
        if not self.registered:
            return
        p = self.part()
        for out in self.last:
            if out.kind != "alloc":
                continue
            for a in out.msg.new:
                live = p.allocations.get(a.UUID)
                if live is None:
                    continue
                n = live.node
                # the scheduler never over-commits a resource it places (an RM that shrinks
                # a node may over-commit it itself; then only asks not needing it fit there)
                for r in live.resource:
                    assert n.allocated.get(r, 0) + n.occupied.get(r, 0) <= n.capacity.get(r, 0), \
                        f"new allocation {a.UUID} over-commits {r} on {n.id}"
                for q in live.app.path:
                    for r, limit in q.max.items():
                        assert q.allocated.get(r, 0) <= limit, f"{q.path} over max {r}"
                for t in live.app.trackers:
                    for r, limit in t.limit.maxresources.items():
                        assert t.allocated.get(r, 0) <= limit, f"{t.key} over its limit {r}"

    @invariant()
    def accounting_is_consistent(self):
        if not self.registered:
            return
        p = self.part()
        node_sum, app_sum, queue_sum, queue_pending = {}, {}, {}, {}
        for a in p.allocations.values():
            assert p.apps.get(a.app.id) is a.app, "allocation of a dead application"
            assert p.nodes.get(a.node.id) is a.node, "allocation on a dead node"
            for r, v in a.resource.items():
                node_sum.setdefault(a.node.id, {}).setdefault(r, 0)
                node_sum[a.node.id][r] += v
                app_sum.setdefault(a.app.id, {}).setdefault(r, 0)
                app_sum[a.app.id][r] += v
                for q in a.app.path:
                    queue_sum.setdefault(q.path, {}).setdefault(r, 0)
                    queue_sum[q.path][r] += v
        for n in p.nodes.values():
            assert n.allocated == node_sum.get(n.id, {})
        active = 0
        for app_ in p.apps.values():
            assert app_.allocated == app_sum.get(app_.id, {})
            pending = {}
            for k in app_.asks.values():
                for r, v in k.resource.items():
                    if k.pending:
                        pending[r] = pending.get(r, 0) + v * k.pending
                        for q in app_.path:
                            queue_pending.setdefault(q.path, {}).setdefault(r, 0)
                            queue_pending[q.path][r] += v * k.pending
            assert app_.pending == pending
            active += app_.entry is not None
        for q in p.queues.values():
            assert q.allocated == queue_sum.get(q.path, {}), q.path
            assert q.pending == queue_pending.get(q.path, {}), q.path
        assert p.root.active == active
        for q in p.queues.values():  # the leaves' per-priority counts of their applications
            if q.leaf:
                counts = {}
                for a in q.apps.values():
                    if a.max_priority is not None:
                        counts[a.max_priority] = counts.get(a.max_priority, 0) + 1
                assert q.app_prios == counts, q.path
                assert q.raw_priority == (max(counts) if counts else None), q.path
        tracked, running = {}, {}
        for app_ in p.apps.values():
            for t in app_.trackers:
                assert p.trackers[t.key] is t
                for r, v in app_.allocated.items():
                    tracked.setdefault(t.key, {}).setdefault(r, 0)
                    tracked[t.key][r] += v
                running[t.key] = running.get(t.key, 0) + (app_.state.value == "Running")
        for key, t in p.trackers.items():
            assert {r: v for r, v in t.allocated.items() if v} == tracked.get(key, {}), key
            assert t.running == running.get(key, 0), key

    @invariant()
    def no_placeable_ask_left_waiting(self):
        if not self.registered:
            return
        p = self.part()
        schedulable = [n for n in p.nodes.values() if n.state is NodeState.SCHEDULABLE]
        for app_ in p.apps.values():
            if app_.state not in SCHEDULABLE_APP_STATES or app_.blocked_on is not None:
                continue
            for k in app_.asks.values():
                if not k.pending:
                    continue
                headroom = all(
                    all(q.allocated.get(r, 0) + v <= q.max[r] for r, v in k.resource.items() if r in q.max)
                    for q in app_.path) and all(
                    all(t.allocated.get(r, 0) + v <= t.limit.maxresources[r]
                        for r, v in k.resource.items() if r in t.limit.maxresources)
                    for t in app_.trackers)
                if headroom:
                    assert not any(fits(k.resource, n.free) for n in schedulable), \
                        f"ask {k.key} of {app_.id} could be placed but waits ({k.waiting})"

    def teardown(self):
        again = Core(load_yaml=load_yaml)
        replayed = [o for e in self.entries for o in again.apply(e)]
        assert [encode_output(o) for o in replayed] == [encode_output(o) for o in self.outputs]
        # snapshot + tail == full replay, cut at several points
        final = self.core.dump()
        for cut in range(0, len(self.entries), 5):
            head = Core(load_yaml=load_yaml)
            for e in self.entries[:cut]:
                head.apply(e)
            resumed = load_snapshot(dump_snapshot(head), load_yaml)
            assert resumed.dump() == head.dump(), \
                f"snapshot after entry {cut} restores another state: {first_diff(head.dump(), resumed.dump())}"
            for i, e in enumerate(self.entries[cut:], cut):
                got = [encode_output(o) for o in resumed.apply(e)]
                assert got == self.per_entry[i], f"snapshot at {cut}: entry {i} decided differently"
            assert resumed.dump() == final


CoreMachine.TestCase.settings = settings(
    # CI runs 150 examples (seconds); YKBUS_EXAMPLES=5000 hunts longer.
    max_examples=int(os.environ.get("YKBUS_EXAMPLES", "150")), stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_core_state_machine = CoreMachine.TestCase
