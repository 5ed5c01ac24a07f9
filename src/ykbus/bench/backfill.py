"""`ykbus bench core --workload backfill` (issue 43): utilization and the large gangs' wait
with backfill and with reservations alone, side by side, and the error of the estimated
starts.

The cluster: 40 racks × 25 hosts (1,000 nodes at scale 1; `--scale` scales the racks, at
least one: 25 nodes), 8 GPUs and 64 cores each, attribute `ykbus.io/rack` (the partition's
one topology level), one `fifo` leaf `root.jobs`, the default reservation delay (2 s).

The stream (seeded, the same for both runs): Poisson arrivals over 30 minutes of warm-up and
then the two hours measured, in steps of 10 s of log time:
- **small jobs**, one application of one ask each: 1, 2, 4 or 8 GPUs (weights 2, 2, 1, 1),
  8 cores a GPU, a runtime limit of 5, 10, 15, 20, 30, 45 or 60 minutes; offered 75 % of the
  cluster's GPU-time;
- **large gangs**: 8, 12, 16, 20 or 24 members of one whole host (64 to 192 GPUs),
  `ykbus.io/topology-required: ykbus.io/rack` (placed whole in one rack, and past the delay
  reserving one), placeholders then real asks that replace them (docs/gang.md); a limit of
  30, 45, 60 or 90 minutes; offered 50 %.
- Each job's actual runtime is drawn below its limit, 30 % to 95 % of it (and at least two
  steps short of it): when it has run that long its RM removes its application, before the
  core would end it at the limit. 125 % of the cluster is offered: a backlog grows, with
  churn and reservations (both of nodes, by small asks that waited past the delay, and of
  racks, by the gangs).

Each step the RM sends one `app` entry (the new jobs' applications, the ended jobs removed)
and one `alloc` entry (the new jobs' asks), then answers the core at the same log time (real
asks for placed placeholders, confirmations of `PLACEHOLDER_REPLACED`), or a tick when it has
nothing to send, so timers fire. Entries go through `Core.apply` in process.

Two runs: **with backfill** (every ask carries its limit as `executionTimeoutMilliSeconds`)
and **reservations without backfill** (`without_*`: the same asks without a limit, so no
estimate exists and nothing backfills; the RM ends every job at the same time). Reported,
over the two measured hours:
- `utilization`: allocated GPU-seconds / the cluster's GPU-seconds, in %;
- `gang_wait_p50_min`, `..._p95_min`: the gangs submitted in the window, from their asks to
  their placeholders' placement, in minutes of log time; a gang still waiting at the end
  counts its wait so far (a lower bound); `gangs_placed` of `gangs`, `small_placed` of
  `small`;
- `node_reservations` (asks that reserved a node), `domain_reservations` (gangs that
  reserved a rack), `backfilled` (small jobs placed on room a reservation kept: on a node
  reserved for another ask, or in a rack held for another gang, reserved before the entry
  and after it);
- with backfill, the estimates' error: for each job that reserved and was told an estimated
  start (`details.estimatedStart` of its reason), its placement less the *first* estimate it
  was told (negative: earlier), median and p95 over all (`estimate_error_*`) and over the
  gangs (`gang_estimate_error_*`), and how many started later than first estimated;
- `entry_p99_ms`: the p99 time `Core.apply` took per entry, `seconds` their sum;
  `ended_at_limit`: allocations the core ended at their limit (0: the RM ends each job first).

The row gives every figure of the run with backfill, and `without_<figure>` for those of
`SIDE_BY_SIDE`. `--repeat N` runs the stream with backfill N times (the same figures; the
times are the medians), the other once. At scale 1 in pure Python the two runs take some
15 minutes; `--scale 0.025` (one rack) takes a second.
"""

from __future__ import annotations

import gc
import heapq
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from ykbus.core.entries import Entry
from ykbus.log.build import LogBuilder, app, ask, node

RACK = "ykbus.io/rack"
QUEUES = ("partitions: [{name: default, topology: {levels: [ykbus.io/rack]}, "
          "queues: [{name: root, submitacl: '*', queues: [{name: jobs}]}]}]")
RACKS, HOSTS, GPUS = 40, 25, 8  # racks at scale 1, hosts a rack, GPUs a host
VCORE_PER_GPU = 8000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
STEP_NS = 10 * SECOND  # the RM's clock: what happened in a step is sent at its end
WARMUP_NS = 30 * MINUTE  # not measured: the cluster fills
MEASURED_NS = 120 * MINUTE
SMALL_GPUS = (1, 1, 2, 2, 4, 8)
SMALL_LIMITS_MIN = (5, 10, 15, 20, 30, 45, 60)
GANG_MEMBERS = (8, 12, 16, 20, 24)  # whole hosts, in one rack
GANG_LIMITS_MIN = (30, 45, 60, 90)
ACTUAL = (0.3, 0.95)  # an actual runtime's share of its limit, uniform
SMALL_LOAD, GANG_LOAD = 0.75, 0.5  # work offered, as shares of the cluster's GPU-time
PLACEHOLDER_TIMEOUT_MS = 3_600_000  # the gangs' placeholders are replaced at once
RM = "bench"


class Job:
    """One job of the stream and what became of it (log times; 0: not yet)."""

    __slots__ = ("id", "gang", "size", "limit_ms", "actual_ns", "arrives", "submitted", "placed", "started",
                 "reserved", "first_estimate")

    def __init__(self, gang: bool, size: int, limit_ms: int, actual_ns: int, arrives: int) -> None:
        self.id = ""
        self.gang, self.size, self.limit_ms, self.actual_ns = gang, size, limit_ms, actual_ns
        self.arrives = arrives  # after the stream's start
        self.submitted = self.placed = self.started = 0
        self.reserved = 0  # when it was first seen holding a reservation
        self.first_estimate = 0  # the first estimated start it was told


def stream(racks: int, seed: int = 43) -> list[Job]:
    """The jobs in the order they arrive."""
    rng = random.Random(seed)
    capacity = racks * HOSTS * GPUS
    share = statistics.fmean(ACTUAL)
    jobs: list[Job] = []
    for gang, load, sizes, limits, gpus in ((False, SMALL_LOAD, SMALL_GPUS, SMALL_LIMITS_MIN, 1),
                                            (True, GANG_LOAD, GANG_MEMBERS, GANG_LIMITS_MIN, GPUS)):
        work = statistics.fmean(sizes) * gpus * statistics.fmean(limits) * 60 * share  # GPU-seconds a job
        rate = load * capacity / work  # jobs a second
        t = rng.expovariate(rate)
        while t * SECOND < WARMUP_NS + MEASURED_NS:
            size, limit_ms = rng.choice(sizes), rng.choice(limits) * 60_000
            actual = min(int(limit_ms * 1_000_000 * rng.uniform(*ACTUAL)), limit_ms * 1_000_000 - 2 * STEP_NS)
            jobs.append(Job(gang, size, limit_ms, actual, int(t * SECOND)))
            t += rng.expovariate(rate)
    jobs.sort(key=lambda j: (j.arrives, j.gang))
    for i, j in enumerate(jobs):
        j.id = f"{'g' if j.gang else 's'}{i}"
    return jobs


class BackfillRun:
    """One run of the stream: `backfill`, its asks carry their limits; else none does."""

    def __init__(self, racks: int, backfill: bool, seed: int = 43) -> None:
        self.racks, self.backfill = racks, backfill
        self.jobs = stream(racks, seed)
        self.by_id = {j.id: j for j in self.jobs}
        self.log = LogBuilder(RM, step_ns=0)  # the log time is set per step
        self.on_step: Callable[[int, Any], None] | None = None  # (log time, partition) after each step, to look

    def setup(self) -> list[Entry]:
        nodes = [node(f"r{r:02d}-h{h:02d}", attributes={RACK: f"r{r:02d}"}, gpu=GPUS, vcore=GPUS * VCORE_PER_GPU)
                 for r in range(self.racks) for h in range(HOSTS)]
        return [self.log.register(QUEUES), self.log.nodes(*nodes)]

    def _app(self, j: Job) -> dict[str, Any]:
        if not j.gang:
            return app(j.id, "root.jobs")
        total = {"gpu": {"value": j.size * GPUS}, "vcore": {"value": j.size * GPUS * VCORE_PER_GPU}}
        return app(j.id, "root.jobs", tags={"ykbus.io/topology-required": RACK}, placeholderAsk={"resources": total},
                   executionTimeoutMilliSeconds=PLACEHOLDER_TIMEOUT_MS)

    def _ask(self, j: Job) -> dict[str, Any]:
        if j.gang:
            return {**ask(f"{j.id}-p", j.id, max_allocations=j.size, gpu=GPUS, vcore=GPUS * VCORE_PER_GPU),
                    "taskGroupName": "workers", "placeholder": True}
        return self._limited(ask(f"{j.id}-a", j.id, gpu=j.size, vcore=j.size * VCORE_PER_GPU), j)

    def _limited(self, a: dict[str, Any], j: Job) -> dict[str, Any]:
        return {**a, "executionTimeoutMilliSeconds": j.limit_ms} if self.backfill else a

    def run(self, progress: Callable[[str], None]) -> dict[str, Any]:
        from ykbus.bench.run import apply_all, fresh_core

        core = fresh_core()
        apply_all(core, self.setup())
        part = core.rms[RM].partitions["default"]
        root, holds = part.records.root, part.records.domain_holds
        reserved_nodes = part.scheduler.backfill.reserved_nodes  # the nodes reserved for asks (read)
        gc.collect()
        start = self.log.ts
        window = start + WARMUP_NS
        end = window + MEASURED_NS
        to_submit = list(reversed(self.jobs))  # the next last
        ends: list[tuple[int, str]] = []  # (log time its RM ends it, job), a heap
        ended: list[str] = []  # jobs the core ended at their limit: their RM removes them
        waiting = 0
        took: list[float] = []
        gpu_ns = 0
        backfilled = ended_at_limit = 0
        label = "with" if self.backfill else "without"
        for k in range((end - start) // STEP_NS):
            now = self.log.ts = start + k * STEP_NS
            new: list[Job] = []
            while to_submit and start + to_submit[-1].arrives <= now:
                new.append(to_submit.pop())
            done, ended = ended, []
            while ends and ends[0][0] <= now:
                done.append(heapq.heappop(ends)[1])
            queue: list[Entry] = []
            if new or done:
                body: dict[str, Any] = {"rmID": RM}
                if new:
                    body["new"] = [self._app(j) for j in new]
                if done:
                    body["remove"] = [{"applicationID": d, "partitionName": "default"} for d in done]
                queue.append(self.log.entry("app", body))
            if new:
                queue.append(self.log.asks(*[self._ask(j) for j in new]))
                for j in new:
                    j.submitted = now
                waiting += len(new)
            if not queue:
                queue.append(self.log.tick(advance_ns=0))
            while queue:
                entry = queue.pop(0)
                # the reservations as the entry finds them: a small job placed on their room is backfilled
                lent = {n_id: n.reserved.app.id for n_id, n in reserved_nodes.items() if n.reserved is not None}
                held = {values[-1]: a.id for values, a in holds.items()}
                t0 = time.perf_counter()
                outs = core.apply(entry)
                took.append(time.perf_counter() - t0)
                real: list[dict[str, Any]] = []
                confirm: list[dict[str, Any]] = []
                for out in outs:
                    if out.kind != "alloc":
                        continue
                    for a in out.msg.new:
                        j = self.by_id[a.applicationID]
                        if a.placeholder:  # the gang is placed: its real pods ask to take their places
                            if not j.placed:
                                j.placed = now
                                waiting -= 1
                            real.append(self._limited({**ask(f"{a.UUID}-real", j.id, gpu=GPUS,
                                                             vcore=GPUS * VCORE_PER_GPU),
                                                       "taskGroupName": "workers"}, j))
                            continue
                        if not j.gang and _lent(a.nodeID, j.id, lent, held, reserved_nodes, holds):
                            backfilled += 1
                        if not j.started:
                            j.started = now
                            if not j.gang:
                                j.placed = now
                                waiting -= 1
                            heapq.heappush(ends, (now + j.actual_ns, j.id))
                    for r in out.msg.released:
                        kind = r.terminationType.name
                        if kind == "PLACEHOLDER_REPLACED":
                            confirm.append({"applicationID": r.applicationID, "UUID": r.UUID,
                                            "partitionName": "default", "terminationType": kind})
                        elif kind == "TIMEOUT" and r.applicationID not in ended:
                            ended_at_limit += 1
                            ended.append(r.applicationID)
                if real:
                    queue.append(self.log.asks(*real))
                if confirm:
                    queue.append(self.log.entry("alloc", {"rmID": RM, "releases": {"allocationsToRelease": confirm}}))
            if now >= window:
                gpu_ns += root.allocated.get("gpu", 0) * STEP_NS  # held until the next step
            self._reservations(now, reserved_nodes, holds)
            if self.on_step is not None:
                self.on_step(now, part)
            if k % 30 == 0:
                progress(f"core backfill ({label} backfill): {(now - start) // MINUTE} of "
                         f"{(end - start) // MINUTE} min of log time, {waiting} jobs waiting")
        return self._figures(window, end, gpu_ns, took, backfilled, ended_at_limit)

    def _reservations(self, now: int, reserved_nodes: dict[str, Any], holds: dict[Any, Any]) -> None:
        """Who holds a reservation now, and the first estimated start each was told."""
        for n in reserved_nodes.values():
            holder = n.reserved
            if holder is not None:
                self._told(self.by_id[holder.app.id], holder, now)
        for gang in holds.values():
            for a in gang.asks.values():
                if a.placeholder and a.pending:
                    self._told(self.by_id[gang.id], a, now)
                    break

    @staticmethod
    def _told(j: Job, a: Any, now: int) -> None:
        if not j.reserved:
            j.reserved = now
        if not j.first_estimate and a.why is not None:
            j.first_estimate = a.why.details.get("estimatedStart") or 0

    def _figures(self, window: int, end: int, gpu_ns: int, took: list[float], backfilled: int,
                 ended_at_limit: int) -> dict[str, Any]:
        measured = [j for j in self.jobs if window <= j.submitted]
        gangs = [j for j in measured if j.gang]
        small = [j for j in measured if not j.gang]
        waits = [((j.placed or end) - j.submitted) / MINUTE for j in gangs]
        told = [j for j in measured if j.first_estimate and j.placed]
        errors = [(j.placed - j.first_estimate) / MINUTE for j in told]
        gang_errors = [(j.placed - j.first_estimate) / MINUTE for j in told if j.gang]
        took.sort()
        return {"utilization": round(100 * gpu_ns / (self.racks * HOSTS * GPUS * (end - window)), 2),
                "gangs": len(gangs), "gangs_placed": sum(1 for j in gangs if j.placed),
                "gang_wait_p50_min": _pct(waits, 0.5), "gang_wait_p95_min": _pct(waits, 0.95),
                "small": len(small), "small_placed": sum(1 for j in small if j.placed),
                "node_reservations": sum(1 for j in measured if j.reserved and not j.gang),
                "domain_reservations": sum(1 for j in gangs if j.reserved),
                "backfilled": backfilled, "ended_at_limit": ended_at_limit,
                "estimates": len(errors), "estimate_error_p50_min": _pct(errors, 0.5),
                "estimate_error_p95_min": _pct(errors, 0.95), "later_than_estimated": sum(1 for e in errors if e > 0),
                "gang_estimates": len(gang_errors), "gang_estimate_error_p50_min": _pct(gang_errors, 0.5),
                "gang_estimate_error_p95_min": _pct(gang_errors, 0.95),
                "gangs_later_than_estimated": sum(1 for e in gang_errors if e > 0),
                "entries": len(took), "seconds": sum(took),
                "entry_p99_ms": took[min(len(took) - 1, int(len(took) * 0.99))] * 1000 if took else 0.0}


def _lent(node_id: str, job: str, lent: dict[str, str], held: dict[str, str], reserved_nodes: dict[str, Any],
          holds: dict[Any, Any]) -> bool:
    """Whether an allocation of `job` on `node_id` was backfilled: the node was reserved for
    another ask, or its rack held for another gang, before the entry and still is after it
    (nothing but backfill places on room a reservation keeps)."""
    before = lent.get(node_id)
    if before == job:
        return False  # its own reserved node
    if before is not None:
        n = reserved_nodes.get(node_id)
        if n is not None and n.reserved is not None and n.reserved.app.id == before:
            return True
    rack = node_id.split("-")[0]
    gang = held.get(rack)
    if gang is None:
        return False
    after = holds.get((rack,))
    return after is not None and after.id == gang


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return round(s[min(len(s) - 1, int(len(s) * q))], 2)


SIDE_BY_SIDE = ("utilization", "gangs_placed", "gang_wait_p50_min", "gang_wait_p95_min", "small_placed",
                "node_reservations", "domain_reservations", "backfilled", "entry_p99_ms", "seconds")


def bench_backfill(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.run import peak_rss_mib

    racks = max(1, round(RACKS * scale))
    runs = [BackfillRun(racks, True).run(progress) for _ in range(repeat)]  # the same figures, timed again
    without = BackfillRun(racks, False).run(progress)
    row = {"bench": "core", "workload": "backfill", "nodes": racks * HOSTS, "racks": racks, **runs[0],
           "seconds": statistics.median(r["seconds"] for r in runs),
           "entry_p99_ms": statistics.median(r["entry_p99_ms"] for r in runs)}
    row.update({f"without_{key}": without[key] for key in SIDE_BY_SIDE})
    row.update(repeat=repeat, peak_rss_mib=round(peak_rss_mib(), 1))
    return row
