"""Hypothesis state machine over topology gangs through the core (docs/topology.md).

A partition of levels `ykbus.io/block`, `ykbus.io/rack` over a random tree of blocks, racks
and hosts (random GPU and vcore capacities, some hosts lacking one attribute or both; rack
names repeat across blocks, so `b1/r1` and `b2/r1` are two domains), then a random sequence
of: gangs (applications with `placeholderAsk`, tagged `ykbus.io/topology-required` or
`-preferred` with a level, their placeholders in one or two task groups of random counts
and shapes, sent at once or group by group, and now and then a placeholder sent again for a
gang already placed, as an RM does for a lost member), real asks replacing placeholders and
the RM's confirmations, releases, removed applications, nodes added and removed, ticks (the
placeholder timeout), and reloads of the queue configuration, the levels possibly changed.

Checked after every entry, from the core's outputs and its dump only (`Core.dump()`, the
outputs' allocations):
- a `required` gang's live placeholders never span two domains at its level, nor lie
  outside every domain (a node's domain at a level: its attributes' values of that level
  and of every broader one; none when it lacks one of them). Placeholders placed under
  other levels (a reload changed them) are judged by those levels, among themselves;
- all or nothing: in every entry that places placeholders of a gang, none of its
  placeholders is left pending.
At the end, a fresh core fed the same log makes byte-identical outputs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests import invariants
from tests.conftest import Harness
from ykbus.log.build import app, ask, node, resource
from ykbus.log.jsonl import encode_output
from ykbus.si.messages import TerminationType

BLOCK, RACK = "ykbus.io/block", "ykbus.io/rack"
REQUIRED, PREFERRED = "ykbus.io/topology-required", "ykbus.io/topology-preferred"
# the levels a reload may set: as registered, fewer, reversed, none
LEVEL_SETS = [(BLOCK, RACK), (BLOCK, RACK), (BLOCK,), (RACK,), (RACK, BLOCK), ()]
# which of its attributes a host has
ATTRS = st.sampled_from(["both", "both", "both", "both", "no-rack", "no-block", "none"])
GPUS = st.sampled_from([0, 2, 4, 4, 8, 8])
VCORES = st.sampled_from([2000, 8000, 32000])


def config(levels: tuple[str, ...]) -> str:
    topology = f"    topology:\n      levels: [{', '.join(levels)}]\n" if levels else ""
    return ("partitions:\n  - name: default\n" + topology +
            "    queues:\n      - name: root\n        submitacl: '*'\n"
            "        properties: {ykbus.io/gang.reserve: 'true'}\n"  # an untagged waiting gang reserves nodes (docs/gang.md)
            "        queues:\n          - name: jobs\n")


def host(node_id: str, block: str, rack: str, attrs: str, gpu: int, vcore: int) -> dict:
    attributes = {BLOCK: block, RACK: rack}
    if attrs in ("no-rack", "none"):
        del attributes[RACK]
    if attrs in ("no-block", "none"):
        del attributes[BLOCK]
    return node(node_id, attributes=attributes, gpu=gpu, vcore=vcore) if gpu else node(
        node_id, attributes=attributes, vcore=vcore)


# a tree: blocks of racks of hosts, each host (attributes, GPUs, vcore)
TREE = st.lists(st.lists(st.lists(st.tuples(ATTRS, GPUS, VCORES), min_size=1, max_size=3),
                         min_size=1, max_size=3), min_size=1, max_size=3)
# a task group: (members, GPUs each, vcore each)
GROUP = st.tuples(st.integers(1, 5), st.sampled_from([1, 1, 2, 4]), st.sampled_from([100, 500]))


def domain(attributes: dict[str, str], levels: tuple[str, ...], level: str) -> tuple[str, ...] | None:
    """A node's domain at `level`: its values of that level and every broader one (None: it
    lacks one of them)."""
    key = tuple(attributes.get(name) for name in levels[:levels.index(level) + 1])
    return None if None in key else key


class Gang:
    __slots__ = ("id", "tag", "level", "groups", "unsent", "keys", "asks", "placed")

    def __init__(self, app_id: str, tag: str, level: str, groups: list[tuple[int, int, int]]) -> None:
        self.id, self.tag, self.level = app_id, tag, level
        self.groups = {f"g{i}": shape for i, shape in enumerate(groups)}  # name -> (members, gpu, vcore)
        self.unsent = list(self.groups)
        self.keys: set[str] = set()  # its placeholder asks' keys
        self.asks = 0
        self.placed = False

    def __repr__(self) -> str:  # as a failing example shows a drawn gang
        return f"Gang({self.id}: {self.tag.rsplit('-', 1)[1]} {self.level}, groups {self.groups})"


class TopologyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.entries: list = []
        self.per_entry: list[list[bytes]] = []
        self.levels: tuple[str, ...] = (BLOCK, RACK)
        self.epoch = 0  # changes with the levels
        self.hosts = 0
        self.live_nodes: list[str] = []
        self.gangs: dict[str, Gang] = {}
        self.placeholders: dict[str, tuple[str, int, tuple[str, ...]]] = {}  # UUID -> (gang, epoch, levels) when placed
        self.replacing: dict[str, str] = {}  # placeholder UUID released for a replacement -> its gang
        self.placed_now: set[str] = set()  # gangs that got placeholders in the last entry
        self.crashed = False

    # --- driving the core -----------------------------------------------------------------

    def do(self, entry, replacing: str = "") -> list:
        self.entries.append(entry)
        before = self.reserved()  # the domains reserved when the entry comes: no one else may take room there
        # (but an ask keeps a node reserved for it before: docs/topology.md's exceptions)
        rm = self.h.core.registry.rms.get("rm-1")
        kept = {n.id: n.reserved.app.id for n in rm.partitions["default"].nodes.values() if n.reserved is not None
                } if rm is not None and "default" in rm.partitions else {}
        self.crashed = True  # until apply returns: a log that crashed the core is not replayed
        outs = self.h.do(entry)
        self.crashed = False
        self.per_entry.append([encode_output(o) for o in outs])
        after = self.reserved()  # (a reservation that ended within the entry, its gang gone or timed out: free)
        before = {app: held for app, held in before.items() if after.get(app) == held}
        self.placed_now = set()
        for o in outs:
            if o.kind != "alloc":
                continue
            for a in o.msg.new:
                for holder, (level, values) in before.items():
                    node = self.part()["nodes"][a.nodeID]
                    if holder != a.applicationID and a.applicationID != replacing and kept.get(a.nodeID) != \
                            a.applicationID and level in self.levels and \
                            domain(node["attributes"], self.levels, level) == values:
                        raise AssertionError(f"{a.applicationID} took room on {a.nodeID}, in {values} which "
                                             f"{holder} reserved")
                if a.placeholder:
                    self.placeholders[a.UUID] = (a.applicationID, self.epoch, self.levels)
                    self.placed_now.add(a.applicationID)
                    if a.applicationID in self.gangs:
                        self.gangs[a.applicationID].placed = True
                else:
                    self.placeholders.pop(a.UUID, None)
            for r in o.msg.released:
                if r.terminationType is TerminationType.PLACEHOLDER_REPLACED:
                    self.replacing[r.UUID] = r.applicationID
        return outs

    def reserved(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The topology domains reserved by waiting gangs, as the read API shows them."""
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        rm = self.h.core.dump()["rms"].get("rm-1")
        if rm is None or "default" not in rm["partitions"]:
            return out
        for app_id, a in rm["partitions"]["default"]["applications"].items():
            held = (a.get("topology") or {}).get("reserved")
            if held is not None:
                out[app_id] = (held["level"], tuple(held["domain"].split("/")))
        return out

    def part(self) -> dict:
        return self.h.core.dump()["rms"]["rm-1"]["partitions"]["default"]

    def new_host(self, block: str, rack: str, attrs: str, gpu: int, vcore: int) -> dict:
        self.hosts += 1
        node_id = f"h{self.hosts}"
        self.live_nodes.append(node_id)
        return host(node_id, block, rack, attrs, gpu, vcore)

    def send_group(self, gang: Gang, name: str, split: bool) -> None:
        members, gpu, vcore = gang.groups[name]
        asks = []
        for count in ([1] * members if split else [members]):
            gang.asks += 1
            key = f"{name}-ph{gang.asks}"
            gang.keys.add(key)
            asks.append({**ask(key, gang.id, max_allocations=count, gpu=gpu, vcore=vcore),
                         "taskGroupName": name, "placeholder": True})
        self.do(self.h.log.asks(*asks))

    # --- rules ------------------------------------------------------------------------------

    @initialize(tree=TREE)
    def cluster(self, tree):
        self.do(self.h.log.register(config(self.levels)))
        infos = [self.new_host(f"b{b}", f"r{r}", *spec)
                 for b, racks in enumerate(tree, 1) for r, hosts in enumerate(racks, 1) for spec in hosts]
        self.do(self.h.log.nodes(*infos))

    @rule(block=st.integers(1, 3), rack=st.integers(1, 3), attrs=ATTRS, gpu=GPUS, vcore=VCORES)
    def add_node(self, block, rack, attrs, gpu, vcore):
        self.do(self.h.log.nodes(self.new_host(f"b{block}", f"r{rack}", attrs, gpu, vcore)))

    @precondition(lambda self: self.live_nodes)
    @rule(data=st.data())
    def remove_node(self, data):
        node_id = data.draw(st.sampled_from(self.live_nodes))
        self.live_nodes.remove(node_id)
        self.do(self.h.log.nodes(node(node_id, action="DECOMISSION")))

    @rule(tag=st.sampled_from([REQUIRED, REQUIRED, PREFERRED, ""]), level=st.sampled_from([BLOCK, RACK, RACK]),
          groups=st.lists(GROUP, min_size=1, max_size=2), at_once=st.booleans(), split=st.booleans(),
          timeout=st.sampled_from([0, 0, 1500, 40000]), hard=st.booleans())
    def add_gang(self, tag, level, groups, at_once, split, timeout, hard):
        gang = Gang(f"gang{len(self.gangs) + 1}", tag, level, groups)
        self.gangs[gang.id] = gang
        total = {"gpu": sum(n * g for n, g, _ in groups), "vcore": sum(n * v for n, _, v in groups)}
        self.do(self.h.log.apps(app(gang.id, "root.jobs", placeholderAsk=resource(**total), tags={tag: level} if tag else {},
                                    executionTimeoutMilliSeconds=timeout,
                                    gangSchedulingStyle="Hard" if hard else "Soft")))
        for name in list(gang.unsent) if at_once else gang.unsent[:1]:
            gang.unsent.remove(name)
            self.send_group(gang, name, split)

    @precondition(lambda self: any(g.unsent for g in self.gangs.values()))
    @rule(data=st.data(), split=st.booleans())
    def send_the_rest(self, data, split):
        """The gang's other task group, in an entry of its own."""
        gang = data.draw(st.sampled_from([g for g in self.gangs.values() if g.unsent]))
        self.send_group(gang, gang.unsent.pop(0), split)

    @precondition(lambda self: any(g.placed for g in self.gangs.values()))
    @rule(data=st.data())
    def placeholder_again(self, data):
        """One more placeholder of a placed gang's group: the RM re-creating a lost member."""
        gang = data.draw(st.sampled_from([g for g in self.gangs.values() if g.placed]))
        name = data.draw(st.sampled_from(sorted(gang.groups)))
        _, gpu, vcore = gang.groups[name]
        gang.asks += 1
        key = f"{name}-ph{gang.asks}"
        gang.keys.add(key)
        self.do(self.h.log.asks({**ask(key, gang.id, gpu=gpu, vcore=vcore), "taskGroupName": name,
                                 "placeholder": True}))

    @precondition(lambda self: any(g.placed for g in self.gangs.values()))
    @rule(data=st.data(), smaller=st.booleans())
    def real_ask(self, data, smaller):
        """A real ask of a placed gang's group: it takes one of the group's placeholders."""
        gang = data.draw(st.sampled_from([g for g in self.gangs.values() if g.placed]))
        name = data.draw(st.sampled_from(sorted(gang.groups)))
        _, gpu, vcore = gang.groups[name]
        gang.asks += 1
        self.do(self.h.log.asks({**ask(f"{name}-real{gang.asks}", gang.id, gpu=gpu, vcore=vcore // 2 if smaller else vcore),
                                 "taskGroupName": name}))

    @precondition(lambda self: self.replacing)
    @rule(data=st.data())
    def confirm_replacement(self, data):
        uuid = data.draw(st.sampled_from(sorted(self.replacing)))
        gang = self.replacing.pop(uuid)
        # (the real ask takes the placeholder's place, on its node, reserved domain or not)
        self.do(self.h.log.release(gang, uuid=uuid, termination="PLACEHOLDER_REPLACED"), replacing=gang)

    @precondition(lambda self: self.placeholders)
    @rule(data=st.data())
    def release(self, data):
        """The RM stops an allocation: a placeholder, or what replaced one (when none is
        left, one that is gone)."""
        live = self.part()["allocations"]
        uuid = data.draw(st.sampled_from(sorted(live) or sorted(self.placeholders)))
        gang = live[uuid]["applicationID"] if uuid in live else self.placeholders[uuid][0]
        self.do(self.h.log.release(gang, uuid=uuid))

    @precondition(lambda self: self.gangs)
    @rule(data=st.data())
    def remove_app(self, data):
        self.do(self.h.log.remove_apps(data.draw(st.sampled_from(sorted(self.gangs)))))

    @rule(levels=st.sampled_from(LEVEL_SETS))
    def reload(self, levels):
        if levels != self.levels:
            self.epoch += 1
        self.levels = levels
        outs = self.do(self.h.log.config(config(levels)))
        notes = [e.message for o in outs if o.kind == "event" for e in o.msg.events]
        assert any(n.startswith("configuration updated") for n in notes), notes

    @rule(seconds=st.sampled_from([1, 2, 31, 1000]))
    def tick(self, seconds):
        self.do(self.h.log.tick(seconds * 10**9))

    # --- properties (from the dump and the outputs only) ----------------------------------

    @invariant()
    def required_gangs_lie_in_one_domain(self):
        part = self.part()
        nodes, live = part["nodes"], part["allocations"]
        by_gang: dict[tuple[str, int], list[str]] = {}
        for uuid, (gang_id, epoch, _) in self.placeholders.items():
            if uuid in live and live[uuid]["applicationID"] == gang_id:
                by_gang.setdefault((gang_id, epoch), []).append(uuid)
        for (gang_id, _epoch), uuids in sorted(by_gang.items()):
            gang = self.gangs.get(gang_id)
            levels = self.placeholders[uuids[0]][2]
            if gang is None or gang.tag != REQUIRED or gang.level not in levels:
                continue
            where = {}
            for uuid in uuids:
                node_id = live[uuid]["nodeID"]
                where[uuid] = (node_id, domain(nodes[node_id]["attributes"], levels, gang.level))
            domains = {d for _, d in where.values()}
            assert None not in domains and len(domains) == 1, (
                f"required gang {gang_id} ({gang.level}, levels {levels}) spans {sorted(map(str, domains))}: {where}")

    @invariant()
    def reservations_never_hold_the_same_room(self):
        held = sorted(self.reserved().items())
        for i, (a, (_, x)) in enumerate(held):
            for b, (_, y) in held[i + 1:]:
                n = min(len(x), len(y))
                assert x[:n] != y[:n], f"{a} reserved {x} and {b} reserved {y}: the same room"
        invariants.state_is_consistent(self.h.core)  # (and the core's own view: held nodes out of its index)

    @invariant()
    def gangs_placed_whole(self):
        if not self.placed_now:
            return
        apps = self.part()["applications"]
        for gang_id in sorted(self.placed_now):
            gang = self.gangs.get(gang_id)
            asks = apps.get(gang_id, {}).get("asks", {})
            left = {k: a["pending"] for k, a in asks.items() if gang is not None and k in gang.keys and a["pending"]}
            assert not left, f"gang {gang_id} placed in part: placeholders {left} still pending"

    def teardown(self):
        if not self.crashed:
            invariants.replay_is_identical(self.entries, self.per_entry)


TopologyMachine.TestCase.settings = settings(
    # CI runs 150 examples (seconds when nothing fails); YKBUS_EXAMPLES=2000 hunts longer
    max_examples=int(os.environ.get("YKBUS_EXAMPLES", "150")), stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_topology_machine = TopologyMachine.TestCase
