"""`ykbus bench e2e`: the whole path. An embedded nats-server, `ykbus core` in its own
process with its durable JetStream log, and an RM here publishing asks.

Phase 1 (throughput): asks in batches of `batch`, pipelined (at most `window` batches, 8 by
default, published and waiting for their allocations, each publish awaited for its ack), for
`seconds`: allocations received per second. With 1-ask messages the window bounds the rate
at window / round trip; a shim with a backlog of pods keeps more in flight (`--window`).
Phase 2 (latency): at half that rate, batches of `latency_batch` asks (100 by default: a
5 ms batching window at 20,000 asks/s) on a fixed schedule; latency is from just before the
publish of an ask to the arrival of its allocation at the RM.

`poll`: every `poll` seconds, during both phases, a process of its own fetches what a dashboard
polls (YuniKorn's web UI overview: POLLED) from the core's HTTP API.
`reader`: a reader process (`ykbus core --reader`) runs beside the core, which answers no
reads (`--no-reads`, HTTP off), and the polls go to the reader.
`dry_run`: every `dry_run` seconds, from the warm-up's end, a process of its own asks the core
for a dry run of a job (`POST /api/wouldfit`, core/dryrun.py) and times the answer.
`live`: the RM keeps at most `live` allocations, releasing its oldest as new ones arrive (a
cluster where work ends as it comes: the state stays that size, with churn); 0: none ends.
`limit_ms`: every ask carries that runtime limit (`executionTimeoutMilliSeconds`), so the
core keeps end bounds and the dry runs' estimates have them to read (docs/time.md).
`reader_cpu`: the reader on that CPU alone and everything else (nats-server, the core, this RM,
the dry runs and polls) on the others, as a deployment gives a reader a core (or a machine)
of its own; otherwise the operating system shares every CPU among them all.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.bus.server import NatsServer, free_port, spawn
from ykbus.si import messages as m

POLLED = ("/ws/v1/clusters", "/ws/v1/partitions", "/ws/v1/partition/default/queues",
          "/ws/v1/scheduler/node-utilizations", "/ws/v1/scheduler/healthcheck", "/ws/v1/history/apps",
          "/ws/v1/metrics")
SNAPSHOT_EVERY = 10_000  # as `ykbus core` runs (ServiceSettings.snapshot_every)
WINDOW = 8  # batches waiting for their allocations (throughput phase), unless told
RELEASE_BATCH = 100  # `live`: allocations released a message (a shim reports pods ending as they do)
QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}, {name: b}]}]}]"


def _res(**q: int) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


class _Counter(ResourceManagerCallback):
    def __init__(self, keep: bool = False) -> None:
        self.allocated = 0
        self.keep = keep  # keep (application, uuid) of each allocation in `held`, to release it (`live`)
        self.held: deque[tuple[str, str]] = deque()
        self.arrived: dict[str, float] = {}
        self.track = False
        self.changed = anyio.Event()

    def update_allocation(self, response: m.AllocationResponse) -> None:
        now = time.perf_counter()
        self.allocated += len(response.new)
        if self.keep:
            self.held.extend((a.applicationID, a.UUID) for a in response.new)
        if self.track:
            for a in response.new:
                self.arrived[a.allocationKey] = now
        self.changed.set()
        self.changed = anyio.Event()


# The dashboard, run as a process of its own with nothing but the standard library: every
# `every` seconds it fetches POLLED over one kept-alive connection, as a browser or Prometheus
# does (a new connection a request costs the server about 0.25 ms of CPU, against 0.14 ms
# kept alive), and prints the bytes each poll read, a line each. It imports no ykbus (whose
# import costs 0.7 s of CPU: a dashboard is running before the load, it does not start inside
# the measured phases on the cores they saturate).
POLLER = """
import http.client, sys, time
port, every, paths = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
while True:
    time.sleep(every)
    try:
        total = 0
        for path in paths:
            conn.request("GET", path)
            with conn.getresponse() as r:
                total += len(r.read())
        print(total, flush=True)
    except (ConnectionError, http.client.HTTPException):  # a reader still starting, or the server closed it
        conn.close()  # (the next request connects again)
"""


# The dry runs (`dry_run`): a process of its own, standard library only, as a person or an
# agent asking "would this job fit, and when" every `every` seconds: POST /api/wouldfit with
# a job of 16 allocations that fits, one too large for any node (the largest shape that fits
# is computed), and one of a whole node (none is empty: its estimate is computed, from the
# end bounds with `limit_ms`), in turn, each timed from the request to the last byte of the
# answer; it prints the job (0, 1, 2) and the milliseconds, a line each.
DRY_RUNNER = """
import http.client, json, sys, time
port, every = int(sys.argv[1]), float(sys.argv[2])
def job(members, vcore):
    return json.dumps({"application": {"applicationID": "dry", "queueName": "root.a", "ugi": {"user": "me"}},
                       "asks": [{"allocationKey": "w", "applicationID": "dry", "maxAllocations": members,
                                 "resourceAsk": {"resources": {"vcore": {"value": vcore}}}}]}).encode()
bodies = [job(16, 100000), job(1, 2000000), job(1, 1000000)]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
n = 0
while True:
    time.sleep(every)
    try:
        t = time.perf_counter()
        conn.request("POST", "/api/wouldfit", body=bodies[n % len(bodies)], headers={"Content-Type": "application/json"})
        with conn.getresponse() as r:
            r.read()
            ok = r.status == 200
        if ok:
            print(n % len(bodies), f"{(time.perf_counter() - t) * 1000:.3f}", flush=True)
        n += 1
    except (ConnectionError, http.client.HTTPException):
        conn.close()
"""


DRY_RUN_JOBS = ("fits", "too_large", "whole_node")  # DRY_RUNNER's jobs, in turn


async def _dry_runner(port: int, every: float, times: list[tuple[int, float]]) -> None:
    """Dry runs from another process (`DRY_RUNNER`), their times collected when it stops."""
    proc = spawn([sys.executable, "-I", "-S", "-c", DRY_RUNNER, str(port), repr(every)],
                 stdout=subprocess.PIPE, text=True)
    try:
        await anyio.sleep_forever()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        for line in out.splitlines():
            job, _, ms = line.partition(" ")
            if job.isdigit() and ms.replace(".", "", 1).isdigit():
                times.append((int(job), float(ms)))


async def _poller(port: int, every: float, polls: list[int]) -> None:
    """Poll from another process, as a dashboard does: a thread here would take the GIL from
    the RM whose latency is measured (up to the 5 ms switch interval at each turn)."""
    proc = spawn([sys.executable, "-I", "-S", "-c", POLLER, str(port), repr(every), *POLLED],
                 stdout=subprocess.PIPE, text=True)
    try:
        await anyio.sleep_forever()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        polls.extend(int(line) for line in out.split() if line.isdigit())


async def _run(url: str, seconds: float, batch: int, nodes: int, progress: Callable[[str], None],
               latency_batch: int = 100, window: int = WINDOW, poll: float = 0, api_port: int = 0,
               dry_run: float = 0, live: int = 0, limit_ms: int = 0) -> dict[str, Any]:
    polls: list[int] = []
    dry: list[tuple[int, float]] = []
    async with anyio.create_task_group() as tg:
        if poll:
            tg.start_soon(_poller, api_port, poll, polls)
        tg.start_soon(_quiet_collector)
        out = await _phases(url, seconds, batch, nodes, progress, latency_batch, window,
                            (lambda: tg.start_soon(_dry_runner, api_port, dry_run, dry)) if dry_run else None,
                            live, limit_ms)
        tg.cancel_scope.cancel()
    extra: dict[str, Any] = {}
    if dry_run:
        every = sorted(ms for _, ms in dry)
        extra = {"dry_runs": len(every), "dry_run_p50_ms": every[len(every) // 2] if every else None,
                 "dry_run_p99_ms": every[min(len(every) - 1, int(len(every) * 0.99))] if every else None,
                 "dry_run_max_ms": every[-1] if every else None,
                 "dry_run_ms": [round(ms, 1) for ms in every]}  # every one, in order of its time
        for i, name in enumerate(DRY_RUN_JOBS):  # each job's slowest
            mine = [ms for job, ms in dry if job == i]
            extra[f"dry_run_{name}_max_ms"] = max(mine) if mine else None
    return {**out, "polls": len(polls), "polled_bytes": sum(polls), **extra}


async def _quiet_collector() -> None:
    """The RM here is the load, not what is measured: its garbage collector runs as the
    core's does (what lives is frozen, out of full collections' sight, here every 0.2 s).
    Left alone, its full collections walked every ask it keeps (sent and arrived times) every
    0.6 s for 15-30 ms with 1-ask messages, and the asks it sent or received meanwhile
    counted that pause as the core's latency."""
    gc.collect()
    try:
        while True:
            gc.freeze()
            await anyio.sleep(0.2)
    finally:
        gc.unfreeze()


async def _churn(client: ResourceManagerClient, cb: _Counter, live: int) -> None:
    """`live`: release the oldest allocations beyond `live`, at most `RELEASE_BATCH` a message."""
    while True:
        await cb.changed.wait()
        while len(cb.held) > live:
            oldest = [cb.held.popleft() for _ in range(min(RELEASE_BATCH, len(cb.held) - live))]
            await client.release([m.AllocationRelease(partitionName="default", applicationID=app_id, UUID=uuid,
                                                      terminationType=m.TerminationType.STOPPED_BY_RM)
                                  for app_id, uuid in oldest])


async def _phases(url: str, seconds: float, batch: int, nodes: int, progress: Callable[[str], None],
                  latency_batch: int, window: int, measured: Callable[[], None] | None = None,
                  live: int = 0, limit_ms: int = 0) -> dict[str, Any]:
    """The two phases; `measured`, called once the warm-up is placed (the dry runs start then)."""
    cb = _Counter(keep=live > 0)
    async with NatsScheduler(url) as api, anyio.create_task_group() as churn:
        out = await _measure(api, cb, churn, seconds, batch, nodes, progress, latency_batch, window, measured,
                             live, limit_ms)
        churn.cancel_scope.cancel()
        return out


async def _measure(api: NatsScheduler, cb: _Counter, churn: Any, seconds: float, batch: int, nodes: int,
                   progress: Callable[[str], None], latency_batch: int, window: int,
                   measured: Callable[[], None] | None, live: int, limit_ms: int) -> dict[str, Any]:
    client = ResourceManagerClient(api, "bench", config=QUEUES, callback=cb)
    per_node = 1_000_000
    await client.start(nodes=[m.NodeInfo(nodeID=f"n{i:05d}", action=m.ActionFromRM.CREATE,
                                         schedulableResource=_res(vcore=per_node, memory=10 * per_node))
                              for i in range(nodes)])
    await client.add_applications([m.AddApplicationRequest(applicationID=q, queueName=f"root.{q}",
                                                           partitionName="default",
                                                           ugi=m.UserGroupInformation(user="bench"))
                                   for q in ("a", "b")])
    k = 0

    def asks(n: int) -> list[m.AllocationAsk]:
        nonlocal k
        out = []
        for _ in range(n):
            k += 1
            out.append(m.AllocationAsk(allocationKey=f"k{k}", applicationID="a" if k % 2 else "b",
                                       partitionName="default", resourceAsk=_res(vcore=1, memory=10),
                                       maxAllocations=1, executionTimeoutMilliSeconds=limit_ms))
        return out

    if live:
        churn.start_soon(_churn, client, cb, live)
    # warm-up, then phase 1: throughput
    await client.add_asks(asks(batch))
    while cb.allocated < batch:
        await cb.changed.wait()
    submitted, start_alloc = batch, cb.allocated
    if measured is not None:
        measured()
    t0 = time.perf_counter()
    deadline = t0 + seconds

    async def feed() -> None:  # one of WINDOW publishers: each publish is awaited for its ack
        nonlocal submitted
        while True:
            while submitted - cb.allocated > window * batch:
                await cb.changed.wait()
            if time.perf_counter() >= deadline:
                return
            submitted += batch
            await client.add_asks(asks(batch))
            progress(f"e2e throughput: {cb.allocated - start_alloc:,} allocations in "
                     f"{time.perf_counter() - t0:4.1f}s")

    async with anyio.create_task_group() as tg:  # so up to WINDOW publishes are in flight
        for _ in range(window):
            tg.start_soon(feed)
    while cb.allocated < submitted:
        await cb.changed.wait()
    elapsed = time.perf_counter() - t0
    rate = (cb.allocated - start_alloc) / elapsed

    # phase 2: latency at half the rate
    half = rate / 2
    per = latency_batch
    interval = per / half
    cb.track = True
    sent: dict[str, float] = {}
    t1 = time.perf_counter()
    n = 0
    async with anyio.create_task_group() as tg:  # on schedule: a publish does not wait for the previous ack
        while time.perf_counter() - t1 < seconds:
            target = t1 + n * interval
            now = time.perf_counter()
            if target > now:
                await anyio.sleep(target - now)
            batch_asks = asks(per)
            stamp = time.perf_counter()
            for a in batch_asks:
                sent[a.allocationKey] = stamp
            tg.start_soon(client.add_asks, batch_asks)
            n += 1
            if n % 50 == 0:
                progress(f"e2e latency at {half:,.0f}/s: {len(cb.arrived):,} allocations")
    with anyio.fail_after(60):
        while not all(key in cb.arrived for key in sent):
            await cb.changed.wait()
    lat = sorted((cb.arrived[key] - t) * 1000 for key, t in sent.items())
    return {"bench": "e2e", "nodes": nodes, "batch": batch, "latency_batch": per, "seconds": round(elapsed, 2),
            "allocations": cb.allocated - start_alloc, "sustained_allocations_per_s": rate,
            "half_rate": half, "latency_p50_ms": lat[len(lat) // 2], "latency_p99_ms": lat[int(len(lat) * 0.99)],
            "latency_p999_ms": lat[int(len(lat) * 0.999)], "latency_max_ms": lat[-1],
            "latency_samples": len(lat)}


def reader_cpu_problem(reader: bool, reader_cpu: int | None) -> str | None:
    """What is wrong with `--reader-cpu`, naming it, or None."""
    if reader_cpu is None:
        return None
    cpus = os.sched_getaffinity(0)
    if not reader:
        return f"--reader-cpu {reader_cpu}: only with --reader"
    if reader_cpu not in cpus or len(cpus) < 2:
        return (f"--reader-cpu {reader_cpu}: not one of this process's CPUs ({', '.join(map(str, sorted(cpus)))}) "
                "with another left for the rest")
    return None


def bench_e2e(seconds: float, batch: int, nodes: int, progress: Callable[[str], None],
              latency_batch: int = 100, window: int = WINDOW, poll: float = 0,
              snapshot_every: int = SNAPSHOT_EVERY, reader: bool = False, dry_run: float = 0,
              live: int = 0, limit_ms: int = 0, reader_cpu: int | None = None) -> dict[str, Any]:
    from ykbus.bus.service import asyncio_loop_policy

    asyncio_loop_policy()
    api_port = free_port() if poll or reader or dry_run else 0
    problem = reader_cpu_problem(reader, reader_cpu)
    if problem:
        raise ValueError(problem)
    if reader_cpu is None:
        return _bench_e2e(seconds, batch, nodes, progress, latency_batch, window, poll, snapshot_every, reader,
                          dry_run, live, limit_ms, reader_cpu, api_port)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus - {reader_cpu})  # what starts from here (nats-server, the core, the dry runs) inherits it
    try:
        return _bench_e2e(seconds, batch, nodes, progress, latency_batch, window, poll, snapshot_every, reader,
                          dry_run, live, limit_ms, reader_cpu, api_port)
    finally:
        os.sched_setaffinity(0, cpus)


def _bench_e2e(seconds: float, batch: int, nodes: int, progress: Callable[[str], None], latency_batch: int,
               window: int, poll: float, snapshot_every: int, reader: bool, dry_run: float, live: int,
               limit_ms: int, reader_cpu: int | None, api_port: int) -> dict[str, Any]:
    with NatsServer() as server:
        core_log = os.environ.get("YKBUS_BENCH_CORE_LOG")  # keep the core's log (info) there, to find stalls
        err = open(core_log, "ab") if core_log else subprocess.DEVNULL  # noqa: SIM115 - closed below

        def start(*flags: str) -> subprocess.Popen:
            return spawn([sys.executable, "-m", "ykbus.cli", "core", "--nats", server.url, "--tick", "3600",
                          "--rm-pause", "3600", "--snapshot-every", str(snapshot_every),
                          "--log-level", "info" if core_log else "warning", *flags],
                         stderr=err, env={**os.environ})

        cores = [start("--no-reads"), start("--reader", "--api-port", str(api_port))] if reader else [
            start("--api-port", str(api_port))]
        if reader_cpu is not None:  # before it makes a thread: they all inherit it
            os.sched_setaffinity(cores[1].pid, {reader_cpu})
        try:
            return {**anyio.run(_run, server.url, seconds, batch, nodes, progress, latency_batch, window, poll,
                                api_port, dry_run, live, limit_ms), "window": window, "poll_s": poll,
                    "snapshot_every": snapshot_every, "reader": reader, "dry_run_s": dry_run, "live": live,
                    "limit_ms": limit_ms, "reader_cpu": reader_cpu}
        finally:
            for core in cores:
                core.send_signal(signal.SIGTERM)
            for core in cores:
                core.wait(timeout=60)
            if core_log:
                err.close()  # type: ignore[union-attr]
