"""What both simulated RMs share: connect, register with recovery, run allocations for
their duration, release them, remove finished applications, count what happened."""

from __future__ import annotations

import heapq
import random
import time
from dataclasses import dataclass, field

import anyio

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.si import messages as m

GiB = 1024**3


def resource(**q: int) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


@dataclass
class SimStats:
    submitted: int = 0
    allocated: int = 0
    released: int = 0
    rejected: int = 0
    apps_done: int = 0
    running: int = 0


@dataclass
class SimRM(ResourceManagerCallback):
    """Base of the simulated RMs. Subclasses give `queues_yaml()`, `nodes()` and `arrivals()`."""

    url: str
    rm_id: str
    seed: int = 1
    stats: SimStats = field(default_factory=SimStats)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._ends: list[tuple[float, int, str, str, str]] = []  # (end, n, app, uuid, key)
        self._n = 0
        self._open: dict[str, int] = {}  # app -> allocations still expected or running
        self._durations: dict[tuple[str, str], float] = {}  # (app, key) -> seconds
        self.client: ResourceManagerClient | None = None
        self._finished: list[str] = []  # applications whose allocations all ended

    # subclass hooks
    def queues_yaml(self) -> str:
        raise NotImplementedError

    def nodes(self) -> list[m.NodeInfo]:
        raise NotImplementedError

    async def arrivals(self) -> None:
        raise NotImplementedError

    # running
    async def run(self) -> None:
        async with NatsScheduler(self.url) as api:
            self.client = ResourceManagerClient(api, self.rm_id, config=self.queues_yaml(), callback=self)
            await self.client.start(nodes=self.nodes())
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.arrivals)
                tg.start_soon(self._finisher)

    async def submit(self, app: m.AddApplicationRequest, asks: list[m.AllocationAsk], duration_s: float) -> None:
        assert self.client is not None
        await self.client.add_applications([app])
        for a in asks:
            self._durations[(app.applicationID, a.allocationKey)] = duration_s
        self._open[app.applicationID] = sum(max(1, a.maxAllocations) for a in asks)
        await self.client.add_asks(asks)
        self.stats.submitted += self._open[app.applicationID]

    async def _finisher(self) -> None:
        assert self.client is not None
        while True:
            await anyio.sleep(0.05)
            now = time.monotonic()
            due = []
            while self._ends and self._ends[0][0] <= now:
                due.append(heapq.heappop(self._ends))
            if due:
                await self.client.release([
                    m.AllocationRelease(partitionName="default", applicationID=app, UUID=uuid, allocationKey=key,
                                        terminationType=m.TerminationType.STOPPED_BY_RM, message="finished")
                    for _, _, app, uuid, key in due])
            if self._finished:
                done, self._finished = self._finished, []
                await self.client.remove_applications(done)

    # callback
    def update_allocation(self, response: m.AllocationResponse) -> None:
        now = time.monotonic()
        for a in response.new:
            self.stats.allocated += 1
            self.stats.running += 1
            self._n += 1
            duration = self._durations.get((a.applicationID, a.allocationKey), 1.0)
            heapq.heappush(self._ends, (now + duration, self._n, a.applicationID, a.UUID, a.allocationKey))
        for r in response.released:
            self.stats.released += 1
            self.stats.running -= 1
            left = self._open.get(r.applicationID)
            if left is not None:
                self._open[r.applicationID] = left - 1
                if left - 1 <= 0:
                    del self._open[r.applicationID]
                    self.stats.apps_done += 1
                    self._finished.append(r.applicationID)
        self.stats.rejected += len(response.rejected)
