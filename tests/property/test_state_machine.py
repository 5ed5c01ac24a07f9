"""Hypothesis state machine over generated logs, with the core's safety invariants.

After every entry:
- no node that received a new allocation is over-committed; no queue on the path of a new
  allocation is over its max;
- every allocation belongs to a live application and node, and every usage and pending
  counter equals the sum of what it counts;
- work conservation: no pending ask is left unplaced while a schedulable node fits it and
  every queue above it has headroom (the incremental wake-ups miss nothing);
- an entry that only carries bad input changes nothing.
At the end, replaying the same log in a fresh core gives byte-identical outputs, and a
snapshot plus the tail equals the full replay. The checks live in tests/invariants.py.
"""

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests import invariants
from ykbus.core import Core
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
        self.gangs = []
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
    @rule(leaf=st.sampled_from(LEAVES), timeout=st.sampled_from([0, 0, 1500, 40000]), user=st.integers(0, 3),
          policy=st.sampled_from(["", "", "", "BinPack", "LeaderFirst", "MinFragment", "JobAffinity",
                                  "JobAntiAffinity"]))
    def add_app(self, leaf, timeout, user, policy):
        self.apps += 1
        groups = [[], ["g0"], ["g1", "g0"], ["g2"]][user]
        tags = {"ykbus.io/node-policy": policy} if policy else {}
        self.do(self.log.apps(app(f"app{self.apps}", leaf, user=f"u{user}", groups=groups,
                                  executionTimeoutMilliSeconds=timeout, tags=tags)))

    @precondition(lambda self: self.registered)
    @rule(leaf=st.sampled_from(LEAVES[:3]), members=st.integers(1, 4), size=st.sampled_from([500, 1000, 2500]),
          hard=st.booleans(), timeout=st.sampled_from([0, 1500, 40000]))
    def add_gang(self, leaf, members, size, hard, timeout):
        """A gang: its placeholderAsk is members x size; placeholders and real asks come next."""
        self.apps += 1
        name = f"app{self.apps}"
        self.gangs.append((name, members, size))
        self.do(self.log.apps(app(name, leaf, user="u0", placeholderAsk={"resources": {"vcore": {"value": members * size}}},
                                  executionTimeoutMilliSeconds=timeout, gangSchedulingStyle="Hard" if hard else "Soft")))

    @precondition(lambda self: self.registered and self.gangs)
    @rule(data=st.data(), group=st.sampled_from(["g1", "g1", "g2"]), real=st.booleans())
    def gang_asks(self, data, group, real):
        """Placeholders of a task group (of the gang's member size, often enough to cover it),
        or a real ask of it (smaller, equal or larger: it replaces a placeholder or cancels them)."""
        gang, members, size = data.draw(st.sampled_from(self.gangs))
        self.asks += 1
        if real:  # one to three in an entry: each takes a placeholder of its own
            reals = [{**ask(f"k{self.asks}-{i}", gang, vcore=data.draw(st.sampled_from([300, size, size, 3000]))),
                      "taskGroupName": group} for i in range(data.draw(st.integers(1, 3)))]
            self.do(self.log.asks(*reals))
            return
        else:
            one = {**ask(f"k{self.asks}", gang, vcore=size, max_allocations=data.draw(st.integers(1, members))),
                   "taskGroupName": group, "placeholder": True}
        self.do(self.log.asks(one))

    @precondition(lambda self: self.registered and any(a.replacing for a in self.part().allocations.values()))
    @rule(data=st.data(), how=st.sampled_from(["PLACEHOLDER_REPLACED", "PLACEHOLDER_REPLACED", "STOPPED_BY_RM"]))
    def rm_releases_a_placeholder(self, data, how):
        """The RM's second step of a replacement (or a release of its own)."""
        phs = [a for a in self.part().allocations.values() if a.replacing]
        a = phs[data.draw(st.integers(0, len(phs) - 1))]
        self.do(self.log.entry("alloc", {"rmID": "rm", "releases": {"allocationsToRelease": [
            {"applicationID": a.app.id, "UUID": a.uuid, "partitionName": "default", "terminationType": how}]}}))

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
            # a few shapes come again and again (9000 cores: larger than any node), as in a backlog
            vcore, memory = data.draw(st.one_of(st.sampled_from([(1000, 1000), (3000, 2000), (9000, 500)]),
                                                st.tuples(st.integers(0, 3000), st.integers(0, 3000))))
            one = {**ask(key, f"app{data.draw(st.integers(1, self.apps))}",
                         priority=data.draw(st.integers(-3, 3)), max_allocations=data.draw(st.integers(1, 3)),
                         vcore=vcore, memory=memory),
                   "executionTimeoutMilliSeconds": data.draw(st.sampled_from([0, 0, 700, 2500]))}
            required = data.draw(st.sampled_from([0, 0, 0, 1, 2, 9]))  # a node that may come, go or never be
            if required:
                one["tags"] = {"yunikorn.apache.org/requiredNode": f"n{required}"}
            elif data.draw(st.booleans()):  # read by LeaderFirst
                one["tags"] = {"ykbus.io/role": data.draw(st.sampled_from(["leader", "worker"]))}
            asks.append(one)
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

    @precondition(lambda self: self.registered)
    @rule(event=st.sampled_from(["CONNECTION_LOST", "RECONNECT"]))
    def rm_heartbeats(self, event):
        """The service's record that the RM's heartbeats stopped or came back (Paused: nothing placed)."""
        self.do(self.log.entry("rmstate", {"rmID": "rm", "event": event, "reason": "test"}, rm=""))

    @rule(seconds=st.sampled_from([0, 1, 31]))
    def tick(self, seconds):
        self.do(self.log.tick(seconds * 10**9))

    @precondition(lambda self: self.registered)
    @rule(kind=st.sampled_from(["garbage", "unknown-app", "unknown-node", "negative", "bad-kind"]))
    def bad_input(self, kind):
        before = self.core.dump()
        entry = {
            # at the same log time as the entry before: no timer is due, only the input counts
            "garbage": lambda: self.log.entry("alloc", b"{]", advance_ns=0),
            "unknown-app": lambda: self.log.entry("alloc", {"rmID": "rm", "asks": [ask("x", "no-such-app", vcore=1)]},
                                                  advance_ns=0),
            "unknown-node": lambda: self.log.entry("node", {"rmID": "rm", "nodes": [
                node("no-such-node", action="UPDATE", vcore=1)]}, advance_ns=0),
            "negative": lambda: self.log.entry("alloc", {"rmID": "rm", "asks": [ask("x", "app1", vcore=-5)]},
                                               advance_ns=0),
            "bad-kind": lambda: self.log.entry("nonsense", {}, advance_ns=0),
        }[kind]()
        outs = self.do(entry)
        assert outs, "bad input must be answered"
        after = self.core.dump()
        for d in (before, after):
            d.pop("last_seq"), d.pop("now")
        assert after == before, f"{kind} changed the state"

    # --- invariants (tests/invariants.py, shared with the fuzz suite) ---------------

    @invariant()
    def new_allocations_fit(self):
        if self.registered:
            invariants.new_allocations_fit(self.core, self.last)
            invariants.new_allocations_placed_on_schedulable_nodes(self.core, self.last)
            invariants.gangs_placed_whole(self.core, self.last)

    @invariant()
    def accounting_is_consistent(self):
        if self.registered:
            invariants.uuids_live_once(self.core)
            invariants.accounting_is_consistent(self.part())
            invariants.reservations_are_consistent(self.part())
            invariants.read_model_is_the_state(self.part())
            invariants.waits_are_consistent(self.part())

    @invariant()
    def no_placeable_ask_left_waiting(self):
        if self.registered:
            invariants.no_placeable_ask_left_waiting(self.part())
            invariants.pending_reasons_are_true(self.part())

    def teardown(self):
        invariants.replay_is_identical(self.entries, self.per_entry)
        # snapshot + tail == full replay, cut at several points
        invariants.snapshot_plus_tail_is_full_replay(self.entries, self.per_entry,
                                                     range(0, len(self.entries), 5), self.core.dump())
        if self.registered and self.gangs:
            # every placeholder ends replaced, timed out or released: past every placeholder
            # timeout, only placeholders whose replacement the RM has yet to confirm are left
            # (a tick may place a waiting gang, whose own timeout the next tick passes)
            for _ in range(20):
                outs = self.do(self.log.tick(2 * 3600 * 10**9))
                if not any(a.placeholder for o in outs if o.kind == "alloc" for a in o.msg.new):
                    break
            for a in self.part().allocations.values():
                assert not a.placeholder or not a.app.gang or a.replacing, f"placeholder {a.uuid} outlived its timeout"


CoreMachine.TestCase.settings = settings(
    # CI runs 150 examples (seconds); YKBUS_EXAMPLES=5000 hunts longer.
    max_examples=int(os.environ.get("YKBUS_EXAMPLES", "150")), stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_core_state_machine = CoreMachine.TestCase
