"""`ykbus bench core --workload topology` (issue 42): gangs placed whole inside one rack or
block, against the same stream with topology ignored.

The cluster: 10 blocks × 20 racks × 25 hosts (5,000 nodes at scale 1; `--scale` scales the
blocks, at least one: 500 nodes), 8 GPUs each, attributes `ykbus.io/block` and `ykbus.io/rack`. The stream:
one gang an entry, each entry 3.6 s of log time, so 1,000 gangs are an hour; a gang has 8 to
256 members of one GPU: half `required` at rack (at most 128 members: a rack has 200 GPUs),
a quarter `required` at block, a quarter `preferred` at rack. A placed gang runs for 100 to
600 entries, then its RM removes it (churn), and the gangs waiting for room are placed as it
frees. Deterministic (a seeded stream).

Reported: the p99 of the entries that placed a gang (the time `Core.apply` took), gangs
placed per second of apply time, the share of `preferred` gangs that landed in one rack, and
the racks wholly free at the end; and the last two again for the same stream with the tags
left out (topology ignored: gangs placed as any gang is, wherever the node order puts them).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from ykbus.core.entries import Entry
from ykbus.log.build import LogBuilder, app, ask, node

BLOCK, RACK = "ykbus.io/block", "ykbus.io/rack"
QUEUES = ("partitions: [{name: default, topology: {levels: [ykbus.io/block, ykbus.io/rack]}, "
          "queues: [{name: root, submitacl: '*', queues: [{name: jobs}]}]}]")
GPUS = 8  # per host
HOUR_NS = 3_600_000_000_000


class TopologyStream:
    def __init__(self, blocks: int = 10, gangs: int = 1000, topology: bool = True, seed: int = 42) -> None:
        self.blocks, self.gangs, self.topology = blocks, gangs, topology
        self.log = LogBuilder("bench", step_ns=HOUR_NS // gangs)
        rng = random.Random(seed)
        self.plan: list[tuple[int, str, int]] = []  # per gang: members, its tag ("" none), entries it runs
        for i in range(gangs):
            kind = i % 4  # 0, 2: required at rack; 1: required at block; 3: preferred at rack
            sizes = (8, 16, 32, 64, 128) if kind in (0, 2) else (8, 16, 32, 64, 128, 256)
            tag = "required-rack" if kind in (0, 2) else "required-block" if kind == 1 else "preferred-rack"
            self.plan.append((rng.choice(sizes), tag, rng.randint(100, 600)))
        self.ends: dict[int, list[str]] = {}  # entry number -> the gangs its RM removes then
        self.placed: dict[str, int] = {}  # gang -> the entry it was placed at
        self.entry_no = 0

    def rack_of(self, node_id: str) -> str:
        return node_id.rsplit("-", 1)[0]  # "b3.r17-h04" -> "b3.r17"

    def setup(self) -> list[Entry]:
        nodes = [node(f"b{b}.r{r}-h{h:02d}", attributes={BLOCK: f"b{b}", RACK: f"r{r}"}, gpu=GPUS, vcore=64_000)
                 for b in range(self.blocks) for r in range(20) for h in range(25)]
        entries = [self.log.register(QUEUES), self.log.nodes(*nodes)]
        for start in range(0, self.gangs, 200):
            entries.append(self.log.apps(*[self._app(i) for i in range(start, min(self.gangs, start + 200))]))
        return entries

    def _app(self, i: int) -> dict[str, Any]:
        members, tag, _ = self.plan[i]
        mode, level = tag.split("-")
        tags = {f"ykbus.io/topology-{mode}": RACK if level == "rack" else BLOCK} if self.topology else {}
        # a placeholder timeout past the stream: the gangs end by their RM's removal only
        return app(f"g{i}", "root.jobs", placeholderAsk={"resources": {"gpu": {"value": members}}}, tags=tags,
                   executionTimeoutMilliSeconds=10 * HOUR_NS // 1_000_000)

    def observe(self, outputs: list) -> list[str]:
        """The gangs the entry placed (their first placeholders); each is removed after its run."""
        placed = []
        for out in outputs:
            if out.kind == "alloc":
                for a in out.msg.new:
                    if a.placeholder and a.applicationID not in self.placed:
                        self.placed[a.applicationID] = self.entry_no
                        placed.append(a.applicationID)
                        runs = self.plan[int(a.applicationID[1:])][2]
                        self.ends.setdefault(self.entry_no + runs, []).append(a.applicationID)
        return placed

    def entries(self) -> Iterator[Entry]:
        for i in range(self.gangs):
            self.entry_no += 1
            ended = self.ends.pop(self.entry_no, [])
            if ended:
                yield self.log.remove_apps(*ended)
            members = self.plan[i][0]
            yield self.log.asks({**ask(f"g{i}-p", f"g{i}", max_allocations=members, gpu=1, vcore=1000),
                                 "taskGroupName": "workers", "placeholder": True})


def _run(stream: TopologyStream, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.run import apply_all, fresh_core

    core = fresh_core()
    apply_all(core, stream.setup())
    gc.collect()
    total, placing, allocations = 0.0, [], 0
    racks_of: dict[str, set[str]] = {}
    for n, entry in enumerate(stream.entries(), 1):
        t0 = time.perf_counter()
        outs = core.apply(entry)
        took = time.perf_counter() - t0
        total += took
        for o in outs:
            if o.kind == "alloc":
                allocations += len(o.msg.new)
                for a in o.msg.new:
                    racks_of.setdefault(a.applicationID, set()).add(stream.rack_of(a.nodeID))
        if stream.observe(outs):
            placing.append(took)
        if n % 200 == 0:
            progress(f"core topology: {len(stream.placed)} gangs placed of {stream.gangs}")
    part = core.rms["bench"].partitions["default"]
    racks: dict[str, bool] = {}
    for node_ in part.nodes.values():
        rack = stream.rack_of(node_.id)
        racks[rack] = racks.get(rack, True) and node_.free.get("gpu", 0) == GPUS
    preferred = [f"g{i}" for i, (_, tag, _) in enumerate(stream.plan) if tag == "preferred-rack"
                 and f"g{i}" in racks_of]
    one_rack = sum(1 for g in preferred if len(racks_of[g]) == 1)
    placing.sort()
    return {"seconds": total, "gangs_placed": len(stream.placed), "allocations": allocations,
            "gangs_per_s": len(stream.placed) / total if total else 0.0,
            "placement_p99_ms": placing[min(len(placing) - 1, int(len(placing) * 0.99))] * 1000 if placing else 0.0,
            "preferred_in_one_rack": one_rack / len(preferred) if preferred else 0.0,
            "racks_wholly_free": sum(racks.values()), "racks": len(racks)}


def bench_topology(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.run import peak_rss_mib

    blocks = max(1, round(10 * scale))
    gangs = max(10, round(1000 * scale))
    runs = [_run(TopologyStream(blocks, gangs), progress) for _ in range(repeat)]
    ignored = _run(TopologyStream(blocks, gangs, topology=False), progress)
    return {"bench": "core", "workload": "topology", "nodes": 500 * blocks, "gangs": runs[0]["gangs_placed"],
            "allocations": runs[0]["allocations"],
            "seconds": statistics.median(r["seconds"] for r in runs),
            "gangs_per_s": statistics.median(r["gangs_per_s"] for r in runs),
            "placement_p99_ms": statistics.median(r["placement_p99_ms"] for r in runs),
            "preferred_in_one_rack": runs[0]["preferred_in_one_rack"], "racks_wholly_free": runs[0]["racks_wholly_free"],
            "ignored_preferred_in_one_rack": ignored["preferred_in_one_rack"],
            "ignored_racks_wholly_free": ignored["racks_wholly_free"], "racks": runs[0]["racks"],
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}
