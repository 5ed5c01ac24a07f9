"""Benchmark workloads, built as log entries that speak only the wire contract.

`yunikorn_perf` is yunikorn-core's own `BenchmarkScheduling`: queues `root.a` (guaranteed
memory 100000, vcore 10000) and `root.b` (guaranteed memory 1000000, vcore 10000), one
application in each, 5,000 asks of memory 10 / vcore 1 per application, every node sized
for `10000 / nodes + 1` such asks. `mixed` is a larger tree with churn.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ykbus.core.entries import Entry
from ykbus.log.build import LogBuilder, app, ask, node

YUNIKORN_PERF = """
partitions:
  - name: default
    nodesortpolicy: {type: %s}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {guaranteed: {memory: 100000, vcore: 10000m}}
          - name: b
            resources: {guaranteed: {memory: 1000000, vcore: 10000m}}
"""


def yunikorn_perf(nodes: int, node_sort: str = "fair", asks_per_app: int = 5000) -> tuple[list[Entry], list[Entry]]:
    """(set-up entries, the entries timed): the timed part is all asks, in one entry."""
    log = LogBuilder("bench")
    per_node = 2 * asks_per_app // nodes + 1
    setup = [
        log.register(YUNIKORN_PERF % node_sort),
        log.nodes(*[node(f"node-{i:05d}", memory=10 * per_node, vcore=per_node) for i in range(nodes)]),
        log.apps(app("app-a", "root.a"), app("app-b", "root.b")),
    ]
    timed = [log.asks(*[ask(f"a-{i}", "app-a", memory=10, vcore=1) for i in range(asks_per_app)],
                      *[ask(f"b-{i}", "app-b", memory=10, vcore=1) for i in range(asks_per_app)])]
    return setup, timed


def mixed_config(departments: int = 5, teams: int = 10) -> str:
    lines = ["partitions:", "  - name: default", "    queues:", "      - name: root", "        submitacl: '*'", "        queues:"]
    for d in range(departments):
        lines += [f"          - name: dept{d}",
                  f"            properties: {{priority.offset: {d}}}" if d % 2 else
                  f"            resources: {{guaranteed: {{vcore: {2000 // departments}}}}}",
                  "            queues:"]
        for t in range(teams):
            policy = "fair" if t % 2 else "fifo"
            lines += [f"              - name: team{t}",
                      f"                properties: {{application.sort.policy: {policy}}}"]
    return "\n".join(lines) + "\n"


class Mixed:
    """5,000 nodes, 50 leaves in a 3-level tree, 1,000 apps, 100,000 asks of mixed sizes and
    priorities, arriving in batches; after each batch the oldest allocations are released,
    so waiting asks are woken and placed as capacity frees (`entries()` is driven by the
    outputs of the previous entry)."""

    def __init__(self, nodes: int = 5000, apps: int = 1000, asks: int = 100_000, batch: int = 100,
                 seed: int = 7) -> None:
        self.nodes, self.apps, self.asks, self.batch = nodes, apps, asks, batch
        self.rng = random.Random(seed)
        self.log = LogBuilder("bench")
        self.running: list[tuple[str, str]] = []  # (app, uuid), oldest first
        self.leaves = [f"root.dept{d}.team{t}" for d in range(5) for t in range(10)]

    def setup(self) -> list[Entry]:
        entries = [self.log.register(mixed_config()),
                   self.log.nodes(*[node(f"n{i:05d}", vcore=16_000, memory=64 * 2**30) for i in range(self.nodes)])]
        for start in range(0, self.apps, 100):
            entries.append(self.log.apps(*[app(f"app{i}", self.leaves[i % len(self.leaves)], user=f"u{i % 37}")
                                           for i in range(start, min(self.apps, start + 100))]))
        return entries

    def observe(self, new_allocations: list[tuple[str, str]]) -> None:
        self.running.extend(new_allocations)

    def entries(self) -> Iterator[Entry]:
        rng = self.rng
        sizes = [(250, 2**28), (500, 2**29), (1000, 2**30), (2000, 2**32), (4000, 2**33)]
        for start in range(0, self.asks, self.batch):
            asks = []
            for i in range(start, min(self.asks, start + self.batch)):
                vcore, memory = rng.choice(sizes)
                asks.append(ask(f"k{i}", f"app{rng.randrange(self.apps)}", vcore=vcore, memory=memory,
                                priority=rng.choice((0, 0, 0, 10, 100))))
            yield self.log.asks(*asks)
            release = self.running[: self.batch * 7 // 10]
            del self.running[: len(release)]
            if release:
                yield self.log.entry("alloc", {"releases": {"allocationsToRelease": [
                    {"applicationID": a, "UUID": u, "partitionName": "default"} for a, u in release]}})


def streaming_log(entries: int, nodes: int = 200, seed: int = 3) -> Iterator[Entry]:
    """A long log of small entries, as RMs send them: one ask, one release, a tick."""
    rng = random.Random(seed)
    log = LogBuilder("rm")
    yield log.register("partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: q1}, {name: q2}]}]}]")
    yield log.nodes(*[node(f"n{i}", vcore=64_000, memory=2**38) for i in range(nodes)])
    yield log.apps(*[app(f"a{i}", f"root.q{1 + i % 2}") for i in range(50)])
    live: list[tuple[str, str]] = []
    k = 0
    while log.seq < entries:
        r = rng.random()
        if r < 0.55 or not live:
            k += 1
            yield log.asks(ask(f"k{k}", f"a{k % 50}", vcore=rng.choice((100, 500, 1000)), memory=2**28))
            live.append((f"a{k % 50}", f"{log.seq}-0"))
        elif r < 0.95:
            a, uuid = live.pop(rng.randrange(len(live)))
            yield log.release(a, uuid=uuid)
        else:
            yield log.tick(100_000_000)


GANG_QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: jobs}]}]}]"


class Gangs:
    """5,000 nodes and 1,000 gangs of 8 to 64 placeholders (1 vcore, 1 GiB each), submitted
    10 gangs per entry. As an RM does, the driver answers what the core decides
    (`observe`): placed placeholders get their real asks (0.8 vcore, smaller), each
    `PLACEHOLDER_REPLACED` release gets its confirmation, and the core then reports the
    real allocation. Every gang ends with its real asks placed in its placeholders' places."""

    def __init__(self, nodes: int = 5000, gangs: int = 1000, per_entry: int = 10, seed: int = 11) -> None:
        self.nodes, self.gangs, self.per_entry = nodes, gangs, per_entry
        rng = random.Random(seed)
        self.members = [rng.randint(8, 64) for _ in range(gangs)]
        self.log = LogBuilder("bench")
        self.follow: list[Entry] = []  # the RM's answers to what it observed, next in the log

    def setup(self) -> list[Entry]:
        entries = [self.log.register(GANG_QUEUES),
                   self.log.nodes(*[node(f"n{i:05d}", vcore=16_000, memory=64 * 2**30) for i in range(self.nodes)])]
        for start in range(0, self.gangs, 100):
            entries.append(self.log.apps(*[
                app(f"g{i}", "root.jobs", placeholderAsk={"resources": {
                    "vcore": {"value": 1000 * self.members[i]}, "memory": {"value": 2**30 * self.members[i]}}})
                for i in range(start, min(self.gangs, start + 100))]))
        return entries

    def observe(self, outputs: list) -> None:
        real, confirm = [], []
        for out in outputs:
            if out.kind != "alloc":
                continue
            for a in out.msg.new:
                if a.placeholder:
                    real.append({**ask(f"{a.UUID}-real", a.applicationID, vcore=800, memory=2**29),
                                 "taskGroupName": "workers"})
            for r in out.msg.released:
                if r.terminationType.name == "PLACEHOLDER_REPLACED":
                    confirm.append({"applicationID": r.applicationID, "UUID": r.UUID, "partitionName": "default",
                                    "terminationType": "PLACEHOLDER_REPLACED"})
        if real:
            self.follow.append(self.log.asks(*real))
        if confirm:
            self.follow.append(self.log.entry("alloc", {"rmID": "bench", "releases": {"allocationsToRelease": confirm}}))

    def entries(self) -> Iterator[Entry]:
        for start in range(0, self.gangs, self.per_entry):
            yield self.log.asks(*[
                {**ask(f"g{i}-p", f"g{i}", vcore=1000, memory=2**30, max_allocations=self.members[i]),
                 "taskGroupName": "workers", "placeholder": True}
                for i in range(start, min(self.gangs, start + self.per_entry))])
            while self.follow:
                yield self.follow.pop(0)
        while self.follow:
            yield self.follow.pop(0)


POLICY_NAMES = ("default", "BinPack", "LeaderFirst", "MinFragment", "JobAffinity", "JobAntiAffinity")


class PolicyJobs:
    """Arranger-style jobs on a mixed cluster, every job under one node policy (tag
    `ykbus.io/node-policy`; `default`: no tag, the partition's `fair` order).

    5,000 nodes of three shapes (3/5 CPU nodes: 16 vcore, 64 GiB; 1/5 memory nodes: 32
    vcore, 256 GiB; 1/5 GPU nodes: 32 vcore, 128 GiB, 8 GPUs) and 1,000 jobs of one leader
    (4 vcore, 16 GiB, 1 GPU, tag `ykbus.io/role: leader`) and 9 workers (sizes vary), 10
    jobs per entry: 10,000 pods, a quarter of the cluster's CPU."""

    def __init__(self, policy: str, nodes: int = 5000, jobs: int = 1000, per_entry: int = 10, seed: int = 5) -> None:
        self.policy, self.nodes, self.jobs, self.per_entry = policy, nodes, jobs, per_entry
        self.rng = random.Random(seed)
        self.log = LogBuilder("bench")

    @property
    def pods(self) -> int:
        return self.jobs * 10

    def setup(self) -> list[Entry]:
        shapes = [{"vcore": 16_000, "memory": 64 * 2**30}] * 3 + [{"vcore": 32_000, "memory": 256 * 2**30},
                                                                  {"vcore": 32_000, "memory": 128 * 2**30,
                                                                   "nvidia.com/gpu": 8}]
        tags = {} if self.policy == "default" else {"ykbus.io/node-policy": self.policy}
        entries = [self.log.register(GANG_QUEUES),
                   self.log.nodes(*[node(f"n{i:05d}", **shapes[i % 5]) for i in range(self.nodes)])]
        for start in range(0, self.jobs, 100):
            entries.append(self.log.apps(*[app(f"job{i}", "root.jobs", tags=tags)
                                           for i in range(start, min(self.jobs, start + 100))]))
        return entries

    def entries(self) -> Iterator[Entry]:
        rng = self.rng
        sizes = [(1000, 2**32), (2000, 2**32), (1000, 2**33), (4000, 2**32)]
        for start in range(0, self.jobs, self.per_entry):
            asks = []
            for j in range(start, min(self.jobs, start + self.per_entry)):
                leader = ask(f"job{j}-leader", f"job{j}", vcore=4000, memory=2**34, **{"nvidia.com/gpu": 1})
                leader["tags"] = {"ykbus.io/role": "leader"}
                asks.append(leader)
                vcore, memory = rng.choice(sizes)
                worker = ask(f"job{j}-worker", f"job{j}", vcore=vcore, memory=memory, max_allocations=9)
                worker["tags"] = {"ykbus.io/role": "worker"}
                asks.append(worker)
            yield self.log.asks(*asks)


BACKLOG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: work
          - name: capped
            resources: {max: {vcore: 10}}
          - name: limited
            limits:
              - limit: one user
                users: [late]
                maxresources: {vcore: 10}
          - name: gangs
"""


class Backlog:
    """`ykbus bench core --workload backlog`: a busy cluster with a backlog of `pending`
    asks that cannot be placed now, and steady churn. 5,000 nodes of 8 cores are filled by
    1-core pods of `root.work`; the backlog is a quarter each of asks larger than any node
    (`NoNodeRoom`), asks of a queue at its max (`QueueMax`), asks of a user at their limit
    (`UserLimit`) and real asks of gangs whose placeholders cannot all be asked yet
    (`GangPending`). The timed entries alternate: release `churn` running pods, then ask
    for `churn` new ones (they take the freed room). A good core's entry costs the same
    whatever the backlog."""

    def __init__(self, nodes: int, pending: int, churn: int = 10, entries: int = 2000, seed: int = 1) -> None:
        self.nodes, self.pending, self.churn, self.n_entries = nodes, pending, churn, entries
        self.log = LogBuilder("bench")
        self.rng = random.Random(seed)
        self.running: list[tuple[str, str]] = []  # (application, uuid) of root.work's pods
        self.asked = 0

    def setup(self) -> Iterator[Entry]:
        log, per_node = self.log, 8
        yield log.register(BACKLOG)
        yield log.nodes(*[node(f"n{i:05d}", vcore=per_node * 1000) for i in range(self.nodes)])
        yield log.apps(*[app(f"w{i}", "root.work") for i in range(100)], app("capped-0", "root.capped"),
                       app("limited-0", "root.limited", user="late"))
        # the room used: the capped queue and the limited user at their max, the rest by pods
        yield log.asks(*[ask(f"c{i}", "capped-0", vcore=1000) for i in range(10)],
                       *[ask(f"l{i}", "limited-0", vcore=1000) for i in range(10)])
        fill = self.nodes * per_node - 20
        for start in range(0, fill, 20_000):
            yield log.asks(*[self._pod() for _ in range(min(20_000, fill - start))])
        quarter = self.pending // 4
        gangs = max(1, quarter // 100)
        yield log.apps(*[app(f"g{i}", "root.gangs", placeholderAsk={"resources": {"vcore": {"value": 2_000_000}}})
                         for i in range(gangs)])
        backlog = [ask(f"big{i}", f"w{i % 100}", vcore=64_000) for i in range(quarter)]
        backlog += [ask(f"cq{i}", "capped-0", vcore=1000) for i in range(quarter)]
        backlog += [ask(f"lu{i}", "limited-0", vcore=1000) for i in range(quarter)]
        for g in range(gangs):  # one placeholder ask short of its placeholderAsk: the gang is incomplete
            backlog.append({**ask(f"ph{g}", f"g{g}", vcore=1000), "taskGroupName": "tg", "placeholder": True})
        backlog += [{**ask(f"gr{i}", f"g{i % gangs}", vcore=1000), "taskGroupName": "tg"}
                    for i in range(self.pending - len(backlog))]
        for start in range(0, len(backlog), 20_000):
            yield log.asks(*backlog[start:start + 20_000])

    def _pod(self) -> dict:
        self.asked += 1
        return ask(f"p{self.asked}", f"w{self.asked % 100}", vcore=1000)

    def observe(self, new: list[tuple[str, str]]) -> None:
        """Allocations just made (application, uuid): the pods of root.work run."""
        self.running += [(a, u) for a, u in new if a.startswith("w")]

    def entries(self) -> Iterator[Entry]:
        for i in range(self.n_entries):
            if i % 2 == 0:
                gone = [self.running.pop(self.rng.randrange(len(self.running))) for _ in range(self.churn)]
                yield self.log.entry("alloc", {"rmID": "bench", "releases": {"allocationsToRelease": [
                    {"applicationID": a, "UUID": u, "partitionName": "default", "terminationType": "STOPPED_BY_RM"}
                    for a, u in gone]}})
            else:
                yield self.log.asks(*[self._pod() for _ in range(self.churn)])


def preemption_config(parents: int = 5, leaves: int = 10, preemptors: int = 2, over_guarantee: int = 500,
                      under_guarantee: int = 200) -> str:
    """5 parents of 10 leaves; in each parent the last `preemptors` leaves (`pre*`) have a
    guarantee of `under_guarantee` cores (and 4 GiB per core) and nothing running, the
    others (`run*`) one of `over_guarantee` cores, far below what they will run."""
    lines = ["partitions:", "  - name: default", "    queues:", "      - name: root", "        submitacl: '*'",
             "        queues:"]
    for p in range(parents):
        lines += [f"          - name: dept{p}", "            queues:"]
        for leaf in range(leaves):
            name, cores = (f"pre{leaf}", under_guarantee) if leaf >= leaves - preemptors else (f"run{leaf}", over_guarantee)
            lines += [f"              - name: {name}",
                      f"                resources: {{guaranteed: {{vcore: {cores}, memory: {cores * 4 * 2**30}}}}}"]
    return "\n".join(lines) + "\n"


class Preemption:
    """`ykbus bench core --workload preemption` (issue 22): 5,000 nodes of 20 cores and 80
    GiB filled by 100,000 running 1-core, 4 GiB allocations (20 per node) of the 40 `run*`
    leaves of a 50-leaf tree (5 parents x 10 leaves), each leaf at 2,500 cores over a
    guarantee of 500 (a fifth: the guarantees scale with the cluster); victims' priorities
    cycle 0, 10, 50, 200. Then a burst of `burst` asks (1 core, 4 GiB, priority 100, allowed
    to preempt) from the 10 `pre*` leaves, which guarantee twice their share of the burst
    (200 cores each) and run nothing: none fits, each may take the place of one
    allocation of priority 100 or less once its queue's `preemption.delay` (30 s of log
    time) has passed (`delay_tick`); the RM then confirms every release in one entry
    (`confirm`) and the asks are placed on the nodes freed for them."""

    PER_NODE = 20
    PRIORITIES = (0, 10, 50, 200)

    def __init__(self, nodes: int = 5000, burst: int = 1000) -> None:
        self.nodes, self.burst = nodes, burst
        self.log = LogBuilder("bench")
        self.runners = [f"root.dept{p}.run{leaf}" for p in range(5) for leaf in range(8)]
        self.preemptors = [f"root.dept{p}.pre{leaf}" for p in range(5) for leaf in (8, 9)]

    @property
    def allocations(self) -> int:
        return self.nodes * self.PER_NODE

    def setup(self) -> Iterator[Entry]:
        """The tree, the nodes, and the allocations filling them, 10,000 per entry (the
        core's per-entry budget)."""
        log = self.log
        per_leaf = self.allocations // len(self.runners)
        per_preemptor = -(-self.burst // len(self.preemptors))
        yield log.register(preemption_config(over_guarantee=max(1, per_leaf // 5), under_guarantee=2 * per_preemptor))
        for start in range(0, self.nodes, 5000):
            yield log.nodes(*[node(f"n{i:05d}", vcore=self.PER_NODE * 1000, memory=self.PER_NODE * 4 * 2**30)
                              for i in range(start, min(self.nodes, start + 5000))])
        yield log.apps(*[app(f"run{i}", q) for i, q in enumerate(self.runners)],
                       *[app(f"pre{i}", q) for i, q in enumerate(self.preemptors)])
        per_app = -(-self.allocations // len(self.runners))  # asks of 100 allocations each, round robin
        asks, left = [], self.allocations
        for k in range(per_app // 100 + 1):
            for i in range(len(self.runners)):
                n = min(100, left)
                if n <= 0:
                    break
                asks.append(ask(f"r{k}", f"run{i}", vcore=1000, memory=4 * 2**30, max_allocations=n,
                                priority=self.PRIORITIES[(k + i) % len(self.PRIORITIES)]))
                left -= n
        for start in range(0, len(asks), 100):  # 10,000 allocations per entry
            yield log.asks(*asks[start:start + 100])

    def burst_entry(self) -> Entry:
        """The burst: every ask waits for room (the cluster is full)."""
        return self.log.asks(*[ask(f"b{i}", f"pre{i % len(self.preemptors)}", vcore=1000, memory=4 * 2**30,
                                   priority=100, preemption=(True, True)) for i in range(self.burst)])

    def delay_tick(self) -> Entry:
        """Past the preemption delay (30 s) of the burst's queues: each of its asks looks for victims."""
        return self.log.tick(30 * 1_000_000_000 + 1_000_000)

    def confirm(self, released: list[tuple[str, str]]) -> Entry:
        """The RM's confirmation of every preempted allocation (application, uuid), in one entry."""
        return self.log.entry("alloc", {"rmID": "bench", "releases": {"allocationsToRelease": [
            {"applicationID": a, "UUID": u, "partitionName": "default", "terminationType": "PREEMPTED_BY_SCHEDULER"}
            for a, u in released]}})
