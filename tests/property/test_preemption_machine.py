"""Preemption cannot loop: a Hypothesis state machine over random queue trees with
guarantees, priorities, offsets, fences and disabled queues, random nodes, asks (that may or
may not preempt, or be preempted), releases, reloads and the RM's confirmations of what the
core preempted (docs/preemption.md). After every entry:

- a victim taken for a guaranteed share leaves every queue between its leaf and the
  preemptor's common ancestor at or above its guarantee in each named resource it frees and
  the queue held more of than its guarantee, and is taken from a queue over its guarantee in
  one of them that the preemptor asks for at least (counting what is being preempted
  already; two resources, vcore and memory, asks of either or both), and the preemptor's
  queues within theirs;
- no ping-pong: no ask preempts an allocation of an application that itself preempted an
  allocation of the ask's application, with no input but confirmations and ticks between;
- the core's own invariants (tests/invariants.py).
At the end, with inputs stopped but for the RM confirming each preemption and time passing,
the core makes no further preemption within a bounded number of rounds (quiescence); the
log replays to the same bytes, and snapshot + tail == full replay.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests import invariants
from ykbus.core import Core
from ykbus.core.preemption import GUARANTEE_RULE
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import encode_entry, encode_output
from ykbus.yamlload import load_yaml

LEAVES = ["root.p1.l1", "root.p1.l2", "root.p2.l3", "root.p2.l4", "root.l5"]
QUIESCENT_ROUNDS = 30


@st.composite
def queue_props(draw, leaf: bool, guaranteed: int | None = None) -> list[str]:
    """A queue's lines; a parent's guarantee is given (at least its children's)."""
    lines = []
    if leaf:
        guaranteed = draw(st.sampled_from([None, 1000, 2000, 4000]))
    maximum = draw(st.sampled_from([None, None, None, 3000, 6000])) if leaf else None
    if maximum and guaranteed and maximum < guaranteed:
        maximum = guaranteed
    memory = draw(st.sampled_from([None, None, 2048, 4096])) if leaf else None  # a second guaranteed resource
    if guaranteed or maximum or memory:
        named = ([f"vcore: {guaranteed}m"] if guaranteed else []) + ([f"memory: {memory}"] if memory else [])
        parts = ([f"guaranteed: {{{', '.join(named)}}}"] if named else []) + (
            [f"max: {{vcore: {maximum}m}}"] if maximum else [])
        lines.append(f"resources: {{{', '.join(parts)}}}")
    props = {}
    offset = draw(st.sampled_from([None, None, None, None, "-5", "5"]))
    if offset:
        props["priority.offset"] = f"'{offset}'"
    if draw(st.integers(0, 9)) == 0:
        props["priority.policy"] = "fence"
    policy = draw(st.sampled_from(["default"] * 8 + ["fence", "disabled"]))
    if policy != "default":
        props["preemption.policy"] = policy
    props["preemption.delay"] = draw(st.sampled_from(["0s", "1s", "2s"]))
    if leaf and draw(st.integers(0, 3)) == 0:
        props["preemption.withinqueue"] = "lowerpriority"
    if leaf and maximum and draw(st.booleans()):
        props["quota.preemption.delay"] = "1s"
    lines.append("properties: {" + ", ".join(f"{k}: {v}" for k, v in props.items()) + "}")
    return lines


@st.composite
def configs(draw) -> str:
    def q(name: str, indent: int, lines: list[str]) -> str:
        pad = " " * indent
        return f"{pad}- name: {name}\n" + "".join(f"{pad}  {line}\n" for line in lines)

    def guarantee(lines: list[str]) -> int:
        return next((int(line.split("guaranteed: {vcore: ")[1].split("m")[0]) for line in lines
                     if "guaranteed: {vcore" in line), 0)

    def parent(name: str, children: list[str]) -> str:
        kids = {c: draw(queue_props(True)) for c in children}
        floor = sum(guarantee(lines) for lines in kids.values())
        own = draw(st.sampled_from([None, floor, floor + 2000])) if floor else draw(st.sampled_from([None, 2000]))
        return (q(name, 10, draw(queue_props(False, own or None))) + "            queues:\n"
                + "".join(q(c, 14, lines) for c, lines in kids.items()))

    quota = draw(st.booleans())
    enabled = draw(st.sampled_from(["true", "true", "true", "false"]))
    tree = parent("p1", ["l1", "l2"]) + parent("p2", ["l3", "l4"]) + q("l5", 10, draw(queue_props(True)))
    return f"""
partitions:
  - name: default
    preemption: {{enabled: {enabled}, quotapreemptionenabled: {str(quota).lower()}}}
    queues:
      - name: root
        submitacl: '*'
        queues:
{tree}"""


class PreemptionMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.core = Core(load_yaml=load_yaml)
        self.log = LogBuilder("rm")
        self.entries, self.per_entry, self.last = [], [], []
        self.nodes = self.apps = self.asks = 0
        self.epoch = 0  # inputs other than confirmations and ticks so far
        self.preemptions: set[tuple[str, str, int]] = set()  # (victim app, preemptor app, epoch)
        self.preempted = 0

    def do(self, entry, quiet: bool = False):
        if not quiet:
            self.epoch += 1
        self.entries.append(entry)
        self.last = self.core.apply(entry)
        self.per_entry.append([encode_output(o) for o in self.last])
        if os.environ.get("DEBUG_PM"):  # the last example's log, to replay (`ykbus replay`)
            with open(os.environ["DEBUG_PM"], "ab" if len(self.entries) > 1 else "wb") as f:
                f.write(encode_entry(entry) + b"\n")
        self.check_new_preemptions()
        return self.last

    def part(self):
        return self.core.rms["rm"].partitions["default"]

    @initialize(config=configs())
    def register(self, config):
        self.do(self.log.register(config))

    @rule(config=configs())
    def reload(self, config):
        self.do(self.log.config(config))

    @precondition(lambda self: self.nodes < 4)
    @rule(vcore=st.sampled_from([1000, 2000, 3000, 4000]))
    def add_node(self, vcore):
        self.nodes += 1
        self.do(self.log.nodes(node(f"n{self.nodes}", vcore=vcore, memory=8192)))

    @rule(leaf=st.sampled_from(LEAVES))
    def add_app(self, leaf):
        self.apps += 1
        self.do(self.log.apps(app(f"app{self.apps}", leaf)))

    @precondition(lambda self: self.apps)
    @rule(data=st.data(), n=st.integers(1, 3))
    def add_asks(self, data, n):
        asks = []
        for _ in range(n):
            self.asks += 1
            policy = data.draw(st.sampled_from([None, (True, True), (True, True), (True, True), (True, False),
                                                (False, True), (False, False)]))
            memory = data.draw(st.sampled_from([0, 0, 1024, 2048]))
            vcore = data.draw(st.sampled_from([0, 500, 1000, 1000, 2000])) if memory else \
                data.draw(st.sampled_from([500, 1000, 1000, 2000]))  # (an ask of memory alone, too)
            one = ask(f"k{self.asks}", f"app{data.draw(st.integers(1, self.apps))}",
                      priority=data.draw(st.integers(-1, 1)), max_allocations=data.draw(st.integers(1, 4)),
                      preemption=policy, **({"vcore": vcore} if vcore else {}), **({"memory": memory} if memory else {}))
            if self.nodes and data.draw(st.integers(0, 7)) == 0:
                one["tags"] = {"yunikorn.apache.org/requiredNode": f"n{data.draw(st.integers(1, self.nodes))}"}
            asks.append(one)
        self.do(self.log.asks(*asks))

    @precondition(lambda self: self.nodes)
    @rule(filler=st.sampled_from(LEAVES), taker=st.sampled_from(LEAVES), size=st.sampled_from([500, 1000, 2000]),
          priority=st.integers(-1, 1), wait=st.sampled_from([1, 3, 31]))
    def contend(self, filler, taker, size, priority, wait):
        """One leaf's application fills the nodes; another's asks, which may preempt, wait."""
        self.apps += 2
        fill, take = f"app{self.apps - 1}", f"app{self.apps}"
        self.do(self.log.apps(app(fill, filler), app(take, taker)))
        self.asks += 2
        self.do(self.log.asks(ask(f"k{self.asks - 1}", fill, vcore=size, max_allocations=8, priority=priority)))
        self.do(self.log.asks(ask(f"k{self.asks}", take, vcore=size, max_allocations=2, preemption=(True, True))))
        self.do(self.log.tick(wait * 10**9), quiet=True)

    @precondition(lambda self: self.part().allocations)
    @rule(data=st.data())
    def rm_releases(self, data):
        allocs = list(self.part().allocations.values())
        a = allocs[data.draw(st.integers(0, len(allocs) - 1))]
        self.do(self.log.release(a.app.id, uuid=a.uuid))

    @precondition(lambda self: any(a.preempting for a in self.part().allocations.values()))
    @rule(data=st.data())
    def rm_confirms_a_preemption(self, data):
        victims = [a for a in self.part().allocations.values() if a.preempting]
        a = victims[data.draw(st.integers(0, len(victims) - 1))]
        self.do(self.log.release(a.app.id, uuid=a.uuid, termination="PREEMPTED_BY_SCHEDULER"), quiet=True)

    @precondition(lambda self: self.apps)
    @rule(data=st.data())
    def remove_app(self, data):
        self.do(self.log.remove_apps(f"app{data.draw(st.integers(1, self.apps))}"))

    @rule(seconds=st.sampled_from([0, 1, 3, 16, 31]))
    def tick(self, seconds):
        self.do(self.log.tick(seconds * 10**9), quiet=True)

    # --- checks ----------------------------------------------------------------------

    def check_new_preemptions(self):
        """The guarantee rule held for each allocation this entry preempted, and none undoes
        a preemption with nothing changed between."""
        p = self.part() if "rm" in self.core.rms and self.core.rms["rm"].partitions else None
        if p is None:
            return
        new = [r for o in self.last if o.kind == "alloc" for r in o.msg.released
               if r.terminationType.value == "PREEMPTED_BY_SCHEDULER" and r.UUID in p.allocations]
        placed_in = {a.applicationID for o in self.last if o.kind == "alloc" for a in o.msg.new}
        leaving = invariants.preempting_by_queue(p)
        for i, r in enumerate(new):
            victim = p.allocations[r.UUID]
            preemptor = victim.node.reserved
            self.preempted += 1
            event("preempted: " + r.message.rsplit("(", 1)[-1].split(":")[0].rstrip(")"))
            if preemptor is None or f"({GUARANTEE_RULE})" not in r.message:
                continue  # a quota, required-node or within-queue preemption, or its ask is gone
            mine = {q.path for q in preemptor.app.path}
            # as the rule was judged: the victims this entry took after it were not leaving yet
            # (a preemption inside the victim's leaf, say, taken after it for an ask of that leaf)
            leaving_then = invariants.preempting_by_queue(p, but=[later.UUID for later in new[i + 1:]])
            below = []
            for q in victim.app.path:
                if q.path in mine:
                    break
                below.append(q)
            for q in below:  # judged by what it held over its guarantee, type by type (docs/preemption.md)
                over = within = False
                for t, g in q.guaranteed.items():
                    if victim.resource.get(t, 0):
                        held = q.allocated.get(t, 0) - leaving_then.get(q.path, {}).get(t, 0)
                        if held + victim.resource[t] > g:
                            assert held >= g, f"{r.UUID} takes {q.path} below its guarantee of {t} {g}: {held}"
                        if held + victim.resource[t] > g and preemptor.resource.get(t, 0):
                            over = True
                        else:
                            within = True
                assert over or not within, f"{r.UUID} taken from {q.path}, within its guarantee in what it asks"
            if not placed_in & {a.id for q in preemptor.app.path for a in invariants.apps_below(q)}:
                coming = invariants.coming_by_queue(p)
                for q in preemptor.app.path:
                    for t, g in q.guaranteed.items():
                        if preemptor.resource.get(t, 0):
                            used = (q.allocated.get(t, 0) - leaving.get(q.path, {}).get(t, 0)
                                    + coming.get(q.path, {}).get(t, 0))
                            assert used <= g, f"{preemptor.key} takes {q.path} above its guarantee of {t} {g}: {used}"
            pair = (victim.app.id, preemptor.app.id)
            assert (pair[1], pair[0], self.epoch) not in self.preemptions, f"ping-pong between {pair}"
            self.preemptions.add((*pair, self.epoch))

    @invariant()
    def state_is_consistent(self):
        p = self.part()
        invariants.accounting_is_consistent(p)
        invariants.reservations_are_consistent(p)
        invariants.waits_are_consistent(p)
        invariants.pending_reasons_are_true(p)
        invariants.victim_index_is_the_allocations(p)

    def teardown(self):
        rounds_quiet = 0
        for _ in range(QUIESCENT_ROUNDS):
            before = self.preempted
            victims = [a for a in self.part().allocations.values() if a.preempting]
            for a in victims:
                self.do(self.log.release(a.app.id, uuid=a.uuid, termination="PREEMPTED_BY_SCHEDULER"), quiet=True)
            self.do(self.log.tick(31 * 10**9), quiet=True)
            rounds_quiet = rounds_quiet + 1 if self.preempted == before and not victims else 0
            if rounds_quiet == 3:
                break
        assert rounds_quiet == 3, f"still preempting after {QUIESCENT_ROUNDS} rounds with no input"
        invariants.replay_is_identical(self.entries, self.per_entry)
        invariants.snapshot_plus_tail_is_full_replay(self.entries, self.per_entry,
                                                     range(0, len(self.entries), 7), self.core.dump())


PreemptionMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("YKBUS_EXAMPLES", "100")), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_preemption_cannot_loop = PreemptionMachine.TestCase
