"""What both simulated RMs share: connect, register with recovery, run allocations for
their duration, release them, remove finished applications, count what happened.

`SimRM` is the one RM loop and holds the state; what differs between the simulated RMs is
a `Workload` it holds (sim/k8s.py `K8sWorkload`, sim/batch.py `BatchWorkload`): plain
settings, set when built and never changed, that say the queue configuration, the nodes
and, through `arrivals(sim)`, what work is submitted when (through `sim.submit`, drawing
from `sim.rng`).

Restart and recovery (YuniKorn's resilience design). With a state file, the RM saves what it
runs (its applications, the pods still waiting, the pods running with their node and end
time) every second and when it stops. Started again with the same file, it registers (the
core wipes what it had), sends its applications first, then its nodes with the running pods
as `existingAllocations`, waits for every answer, and only then sends the still-waiting
asks again and new work: the core counts the recovered pods without re-issuing them.
"""

from __future__ import annotations

import heapq
import os
import random
import time
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import msgspec

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient, SchedulerAPI
from ykbus.si import messages as m

GiB = 1024**3


def nats_identity(secrets_path: str | None, rm_id: str) -> dict | None:
    """nats.connect keywords for RM `rm_id` from a secrets file of `ykbus nats-config` (None: no file)."""
    if not secrets_path:
        return None
    from ykbus.bus.permissions import connect_options, load_secrets

    secret = load_secrets(secrets_path).rms.get(rm_id)
    if secret is None:
        raise SystemExit(f"{secrets_path}: no password for RM {rm_id!r}")
    return connect_options(secret.user, secret.password)


def resource(**q: int) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


class Waiting(msgspec.Struct):
    ask: m.AllocationAsk
    remaining: int
    duration_s: float


class Running(msgspec.Struct):
    app: str
    key: str
    node: str
    resource: m.Resource
    end_wall: float  # time.time() at which the pod ends


class SimState(msgspec.Struct):
    apps: dict[str, m.AddApplicationRequest] = msgspec.field(default_factory=dict)
    waiting: dict[str, Waiting] = msgspec.field(default_factory=dict)  # "<app>/<key>"
    running: dict[str, Running] = msgspec.field(default_factory=dict)  # uuid
    submitted: int = 0


@dataclass
class SimStats:
    submitted: int = 0
    allocated: int = 0
    released: int = 0
    rejected: int = 0
    apps_done: int = 0
    recovered: int = 0  # running pods reported as existing allocations on a resume
    recovered_apps: int = 0  # applications, and waiting pods asked again, on a resume (as saved)
    recovered_waiting: int = 0

    @property
    def running(self) -> int:
        return self.allocated - self.released


class Workload(Protocol):
    """What a simulated RM runs: its queues, its nodes, its arrivals. A value (settings
    only): the state of the run is the `SimRM`'s."""

    def queues_yaml(self) -> str:
        """The RM's queue configuration (YAML)."""
        ...

    def nodes(self, rm_id: str) -> list[m.NodeInfo]:
        """The nodes RM `rm_id` registers."""
        ...

    async def arrivals(self, sim: SimRM) -> None:
        """Submit work through `sim.submit` until cancelled."""
        ...


@dataclass
class SimRM(ResourceManagerCallback):
    """A simulated RM: the loop that runs `workload` (connect, recover, submit, end pods)."""

    url: str
    rm_id: str
    workload: Workload
    seed: int = 1
    state_path: str | None = None
    stats: SimStats = field(default_factory=SimStats)
    nats_options: dict | None = None  # nats.connect keywords: this RM's NATS identity on a secured server
    scheduler: SchedulerAPI | None = None  # the core to talk to instead of NATS at `url` (sim/offline.py)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.state = SimState()
        self._ends: list[tuple[float, str]] = []  # (end, uuid); times are the event loop's clock
        # (anyio.current_time(): time.monotonic() on asyncio, virtual in sim/offline.py)
        self._open: dict[str, int] = {}  # app -> pods waiting or running
        self._finished: list[str] = []
        self._preempted: list[m.AllocationRelease] = []  # the core preempted them: deleted, confirmed next
        self.client: ResourceManagerClient | None = None
        self.started = anyio.Event()  # registered and recovered: new work flows

    def waiting_pods(self, queue: str | None = None) -> int:
        """Pods submitted and not yet placed (in `queue` only, if given)."""
        apps = self.state.apps
        return sum(w.remaining for w in self.state.waiting.values()
                   if queue is None or (w.ask.applicationID in apps and apps[w.ask.applicationID].queueName == queue))

    async def queue_with_room(self, leaves: list[str], max_waiting: int) -> str:
        """A generator's next queue (`root.<leaf>`), drawn from `leaves` (a leaf named twice
        is drawn twice as often) among those with fewer than `max_waiting` pods waiting (0:
        any); while none has room, it waits. A generator offers more than the cluster runs:
        without the bound its backlog would grow without end; per queue, so one queue at
        its max does not starve the others."""
        while True:
            open_leaves = [leaf for leaf in leaves
                           if not max_waiting or self.waiting_pods(f"root.{leaf}") < max_waiting]
            if open_leaves:
                return self.rng.choice(open_leaves)
            await anyio.sleep(0.05)

    # state file
    def _load(self) -> bool:
        if not self.state_path or not os.path.exists(self.state_path):
            return False
        with open(self.state_path, "rb") as f:
            self.state = msgspec.json.decode(f.read(), type=SimState)
        self.rng.seed(self.seed + self.state.submitted)
        return bool(self.state.apps)

    def save(self) -> None:
        if self.state_path:
            tmp = self.state_path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(msgspec.json.encode(self.state))
            os.replace(tmp, self.state_path)

    # running
    async def run(self) -> None:
        # a run again (`ykbus up` starts an RM again when its NATS did not answer) begins as a start
        # does, from the state saved: nothing of the run before is still to end or confirm
        self._ends, self._open, self._finished, self._preempted = [], {}, [], []
        recovering = self._load()
        st = self.state
        nodes = self.workload.nodes(self.rm_id)
        apps: list[m.AddApplicationRequest] = []
        if recovering:
            by_node: dict[str, list[m.Allocation]] = {}
            for uuid, pod in st.running.items():
                by_node.setdefault(pod.node, []).append(m.Allocation(
                    allocationKey=pod.key, UUID=uuid, resourcePerAlloc=pod.resource, nodeID=pod.node,
                    applicationID=pod.app, partitionName="default"))
            nodes = [msgspec.structs.replace(n, existingAllocations=by_node.get(n.nodeID, [])) for n in nodes]
            apps = list(st.apps.values())
            for app_id in st.apps:
                self._open[app_id] = 0
            for w in st.waiting.values():
                self._open[w.ask.applicationID] = self._open.get(w.ask.applicationID, 0) + w.remaining
            now_wall, now = time.time(), anyio.current_time()
            for uuid, pod in st.running.items():
                self._open[pod.app] = self._open.get(pod.app, 0) + 1
                heapq.heappush(self._ends, (now + max(0.0, pod.end_wall - now_wall), uuid))
            self.stats.recovered = len(st.running)
            self.stats.recovered_apps, self.stats.recovered_waiting = len(st.apps), self.waiting_pods()
        try:
            async with (self.scheduler or NatsScheduler(self.url, nats_options=self.nats_options)) as api:
                self.client = ResourceManagerClient(api, self.rm_id, config=self.workload.queues_yaml(),
                                                    callback=self, policy_group=self.rm_id)
                await self.client.start(apps=apps, nodes=nodes)  # apps first, then nodes with their pods
                if st.waiting:
                    await self.client.add_asks([msgspec.structs.replace(w.ask, maxAllocations=w.remaining)
                                                for w in st.waiting.values()])
                self.started.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.workload.arrivals, self)
                    tg.start_soon(self._finisher)
        finally:
            self.save()

    async def submit(self, app: m.AddApplicationRequest, asks: list[m.AllocationAsk], duration_s: float) -> None:
        assert self.client is not None
        st = self.state
        st.apps[app.applicationID] = app
        count = 0
        for a in asks:
            n = max(1, a.maxAllocations)
            st.waiting[f"{app.applicationID}/{a.allocationKey}"] = Waiting(a, n, duration_s)
            count += n
        self._open[app.applicationID] = count
        st.submitted += count
        self.stats.submitted += count
        self.save()  # stored before the core hears of it, as a pod is: a kill -9 now loses no application
        await self.client.add_applications([app])
        await self.client.add_asks(asks)

    async def _finisher(self) -> None:
        assert self.client is not None
        last_save = anyio.current_time()
        while True:
            await anyio.sleep(0.05)
            now = anyio.current_time()
            due = []
            while self._ends and self._ends[0][0] <= now:
                _, uuid = heapq.heappop(self._ends)
                pod = self.state.running.get(uuid)
                if pod is not None:
                    due.append((uuid, pod))
            if due:
                await self.client.release([
                    m.AllocationRelease(partitionName="default", applicationID=pod.app, UUID=uuid,
                                        allocationKey=pod.key, terminationType=m.TerminationType.STOPPED_BY_RM,
                                        message="finished")
                    for uuid, pod in due])
            if self._preempted:  # the pods are deleted: the core may place what it preempted them for
                confirmed, self._preempted = self._preempted, []
                await self.client.release(confirmed)
            if self._finished:
                done, self._finished = self._finished, []
                await self.client.remove_applications(done)
            if now - last_save >= 1.0:
                self.save()
                last_save = now

    # callback
    def update_allocation(self, response: m.AllocationResponse) -> None:
        st, now, now_wall = self.state, anyio.current_time(), time.time()
        for a in response.new:
            self.stats.allocated += 1
            slot = f"{a.applicationID}/{a.allocationKey}"
            waiting = st.waiting.get(slot)
            duration = waiting.duration_s if waiting is not None else 1.0
            if waiting is not None:
                waiting.remaining -= 1
                if waiting.remaining <= 0:
                    del st.waiting[slot]
            st.running[a.UUID] = Running(a.applicationID, a.allocationKey, a.nodeID, a.resourcePerAlloc,
                                         now_wall + duration)
            heapq.heappush(self._ends, (now + duration, a.UUID))
        for r in response.released:
            self.stats.released += 1
            st.running.pop(r.UUID, None)
            if r.terminationType is m.TerminationType.PREEMPTED_BY_SCHEDULER:
                self._preempted.append(m.AllocationRelease(
                    partitionName="default", applicationID=r.applicationID, UUID=r.UUID,
                    allocationKey=r.allocationKey, terminationType=m.TerminationType.PREEMPTED_BY_SCHEDULER,
                    message="pod deleted: preempted"))
            left = self._open.get(r.applicationID)
            if left is not None:
                if left <= 1:
                    del self._open[r.applicationID]
                    st.apps.pop(r.applicationID, None)
                    self.stats.apps_done += 1
                    self._finished.append(r.applicationID)
                else:
                    self._open[r.applicationID] = left - 1
        self.stats.rejected += len(response.rejected)


def progress_line(sim: SimRM, elapsed: float, rate: float) -> str:
    """One line of what the simulated RM did so far (`ykbus sim`, every second)."""
    s = sim.stats
    return (f"t={elapsed:5.0f}s allocs/s={rate:6.0f} submitted={s.submitted} allocated={s.allocated} "
            f"running={s.running} waiting={sim.waiting_pods()} rejected={s.rejected} apps_done={s.apps_done}"
            + (f" recovered={s.recovered}" if s.recovered else ""))


async def _print_progress(sim: SimRM, every: float = 1.0) -> None:
    start = last_t = time.monotonic()
    last = 0
    while True:
        await anyio.sleep(every)
        now = time.monotonic()
        rate = (sim.stats.allocated - last) / (now - last_t)
        last, last_t = sim.stats.allocated, now
        print(progress_line(sim, now - start, rate), flush=True)


async def _until_stopped(sim: SimRM, name: str) -> None:
    import signal

    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            await sim.run()
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        tg.start_soon(_print_progress, sim)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                break
        print(f"{name}: stopping", flush=True)
        tg.cancel_scope.cancel()
    elapsed = time.monotonic() - start
    print(progress_line(sim, elapsed, sim.stats.allocated / elapsed if elapsed else 0.0), flush=True)  # the totals


def run_sim(sim: SimRM, name: str) -> None:
    """`ykbus sim KIND`: run the simulated RM with a progress line a second until Ctrl-C or
    SIGTERM, then stop cleanly (its state file saved)."""
    print(f"{name}: RM {sim.rm_id!r} on {sim.url}" + (f", state in {sim.state_path}" if sim.state_path else "")
          + ". Ctrl-C stops.", flush=True)
    anyio.run(_until_stopped, sim, name)
    print(f"{name}: stopped" + (f" (state saved in {sim.state_path})" if sim.state_path else ""), flush=True)
