"""`ykbus bench core --workload gang-reserve` (docs/gang.md, "A waiting gang reserves nodes"):
large gangs on a cluster kept full by a stream of small pods, with `ykbus.io/gang.reserve` on
their queue, against the same stream with it off.

The cluster: 500 nodes of 8 GPUs at scale 1 (`--scale` scales them, at least 20). A batch
queue keeps every GPU busy: one-GPU pods that run 20 to 200 entries (one entry a second of
log time), each ended pod's GPU asked for again by a new pod at once, and a backlog of 50
more. Every 25 entries a training gang arrives in its own queue: 2 to 8 members of a whole
node (8 GPUs) each, running 100 entries once placed. 2,000 entries at scale 1. Deterministic
(a seeded stream).

Reported, for the stream with the property on and off: the gangs placed of those that
came, how long the placed ones waited (p50 and p95, seconds of log time; one that never
started counts to the end of the stream), the small pods placed, and, with it on, entries
per second of `Core.apply` and the p99 of an entry.
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

QUEUES = ("partitions: [{{name: default, queues: [{{name: root, submitacl: '*', queues: ["
          "{{name: train, properties: {{ykbus.io/gang.reserve: '{reserve}'}}}}, {{name: batch}}]}}]}}]")
GPUS = 8  # per node
SECOND = 1_000_000_000
GANG_EVERY = 25  # entries between two gangs
GANG_RUNS = 100  # entries a placed gang runs
BACKLOG = 50  # small pods asked for beyond what the cluster holds


class ReserveStream:
    def __init__(self, nodes: int, steps: int, reserve: bool, seed: int = 7) -> None:
        self.n_nodes, self.steps, self.reserve = nodes, steps, reserve
        self.log = LogBuilder("bench", step_ns=SECOND)
        self.rng = random.Random(seed)  # the small pods' runtimes (drawn as they are placed)
        sizes = random.Random(seed + 1)  # the gangs, drawn up front: the same with the property on and off
        self.sizes = [sizes.randint(2, 8) for _ in range(steps // GANG_EVERY)]
        self.step = 0
        self.pods: dict[str, int] = {}  # small pod uuid -> the step it ends
        self.gangs: dict[str, int] = {}  # gang -> the step it came
        self.placed: dict[str, int] = {}  # gang -> the step it was placed
        self.gang_ends: dict[int, list[str]] = {}
        self.small_placed = 0
        self.asked = 0

    def setup(self) -> list[Entry]:
        nodes = [node(f"n{i:04d}", gpu=GPUS, vcore=64_000) for i in range(self.n_nodes)]
        return [self.log.register(QUEUES.format(reserve="true" if self.reserve else "false")), self.log.nodes(*nodes),
                self.log.apps(app("batch", "root.batch")), self._small(self.n_nodes * GPUS + BACKLOG, [])]

    def _small(self, count: int, releases: list[dict[str, Any]]) -> Entry:
        self.asked += 1
        body: dict[str, Any] = {"rmID": "bench"}
        if count:
            body["asks"] = [ask(f"s{self.asked}", "batch", gpu=1, vcore=100, max_allocations=count)]
        if releases:
            body["releases"] = {"allocationsToRelease": releases}
        return self.log.entry("alloc", body)

    def observe(self, outputs: list) -> None:
        for out in outputs:
            if out.kind != "alloc":
                continue
            for a in out.msg.new:
                if a.applicationID == "batch":
                    self.small_placed += 1
                    self.pods[a.UUID] = self.step + self.rng.randint(20, 200)
                elif a.placeholder and a.applicationID not in self.placed:
                    self.placed[a.applicationID] = self.step
                    self.gang_ends.setdefault(self.step + GANG_RUNS, []).append(a.applicationID)

    def entries(self) -> Iterator[Entry]:
        for step in range(1, self.steps + 1):
            self.step = step
            ended = sorted(uuid for uuid, end in self.pods.items() if end <= self.step)
            for uuid in ended:
                del self.pods[uuid]
            releases = [{"applicationID": "batch", "UUID": uuid, "partitionName": "default",
                         "terminationType": "STOPPED_BY_RM"} for uuid in ended]
            yield self._small(len(ended), releases)  # each freed GPU asked for again at once
            done = self.gang_ends.pop(self.step, [])
            if done:
                yield self.log.remove_apps(*done)
            if self.step % GANG_EVERY == 0:
                gang = f"g{self.step // GANG_EVERY}"
                members = self.sizes[self.step // GANG_EVERY - 1]
                self.gangs[gang] = self.step
                yield self.log.apps(app(gang, "root.train", placeholderAsk={"resources": {"gpu": {"value": members * GPUS}}},
                                        executionTimeoutMilliSeconds=10 * self.steps * 1000))
                yield self.log.asks({**ask("p", gang, gpu=GPUS, vcore=1000, max_allocations=members),
                                     "taskGroupName": "workers", "placeholder": True})


def _run(stream: ReserveStream, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.run import fresh_core

    core = fresh_core()
    for entry in stream.setup():
        stream.observe(core.apply(entry))
    gc.collect()
    took: list[float] = []
    for entry in stream.entries():
        t0 = time.perf_counter()
        outs = core.apply(entry)
        took.append(time.perf_counter() - t0)
        stream.observe(outs)
        if len(took) % 500 == 0:
            progress(f"core gang-reserve ({'on' if stream.reserve else 'off'}): step {stream.step} of {stream.steps}, "
                     f"{len(stream.placed)} gangs placed of {len(stream.gangs)}")
    waits = sorted((stream.placed.get(g, stream.steps) - came) for g, came in stream.gangs.items())
    took.sort()
    return {"seconds": sum(took), "entries": len(took), "gangs": len(stream.gangs), "gangs_placed": len(stream.placed),
            "wait_p50_s": statistics.median(waits) if waits else 0, "wait_p95_s": waits[int(len(waits) * 0.95)] if waits
            else 0, "small_placed": stream.small_placed, "entry_p99_ms": took[int(len(took) * 0.99)] * 1000}


def bench_gang_reserve(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.run import peak_rss_mib

    nodes, steps = max(20, round(500 * scale)), max(200, round(2000 * scale))
    runs = [_run(ReserveStream(nodes, steps, reserve=True), progress) for _ in range(repeat)]
    off = _run(ReserveStream(nodes, steps, reserve=False), progress)
    on = runs[0]
    return {"bench": "core", "workload": "gang-reserve", "nodes": nodes, "entries": on["entries"], "gangs": on["gangs"],
            "gangs_placed": on["gangs_placed"], "without_gangs_placed": off["gangs_placed"],
            "gang_wait_p50_s": on["wait_p50_s"], "without_gang_wait_p50_s": off["wait_p50_s"],
            "gang_wait_p95_s": on["wait_p95_s"], "without_gang_wait_p95_s": off["wait_p95_s"],
            "small_placed": on["small_placed"], "without_small_placed": off["small_placed"],
            "seconds": statistics.median(r["seconds"] for r in runs),
            "entries_per_s": statistics.median(r["entries"] / r["seconds"] for r in runs),
            "entry_p99_ms": statistics.median(r["entry_p99_ms"] for r in runs),
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}
