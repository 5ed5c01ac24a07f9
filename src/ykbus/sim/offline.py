"""`ykbus up`'s demo traffic without NATS or a wall clock: a log, as `ykbus record` writes it.

`demo_log(seconds)` runs `ykbus up`'s demo RMs — `k8s` (sim/k8s.py) and `batch`
(sim/batch.py), each a `SimRM`, and `tyjob`, the TYJob controller with the example cluster
and jobs of ykbus/examples/tyjob/ (gangs among them, on a GPU pool of racks, each in one
rack) — against a core in this process.
They run on an asyncio loop whose clock is virtual: when nothing is ready, time jumps to
the next timer. So `seconds` of demo take only what the core takes, and the same
arguments give the same log, entry for entry. Each request an RM sends becomes the next
entry with the JSON body it would publish, applied before the RM goes on (its answers
delivered to it); the core service's ticks are appended every second, and at once after
an entry that left a backlog. Not logged, as nothing here goes quiet: heartbeats and the
`rmstate` entries they cause.
"""

from __future__ import annotations

import asyncio
import selectors
from importlib.resources import files
from typing import Any

import anyio

from ykbus.bus.client import (
    RegistrationError,
    ResourceManagerCallback,
    ResourceManagerClient,
    SchedulerAPI,
    deliver,
)
from ykbus.core import Core, Entry
from ykbus.log.build import START_TS
from ykbus.si import codec
from ykbus.si import messages as m
from ykbus.sim.base import SimRM
from ykbus.sim.batch import BatchWorkload
from ykbus.sim.k8s import K8sWorkload
from ykbus.tyjob.cluster import parse_cluster
from ykbus.tyjob.controller import QUEUES, Controller
from ykbus.tyjob.manifest import parse_manifests
from ykbus.tyjob.service import TICK_S, ControllerService
from ykbus.yamlload import load_yaml

TICK_INTERVAL_S = 1.0  # the core service's default (`tick_interval`)


class _VirtualSelector(selectors.SelectSelector):
    """No IO: a wait for `timeout` seconds moves the clock on by that much."""

    now = 0.0

    def select(self, timeout: float | None = None) -> list:
        if timeout is None:
            raise RuntimeError("demo_log: every task waits and no timer is set")
        self.now += max(0.0, timeout)
        return []


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now


class _Log:
    """The core and the entries every RM (and the ticker) appends to it, in order."""

    def __init__(self) -> None:
        self.core = Core(load_yaml=load_yaml)
        self.entries: list[Entry] = []
        self.callbacks: dict[str, ResourceManagerCallback] = {}

    async def append(self, rm: str, kind: str, body: bytes) -> list[Any]:
        """Apply the next entry, hand its outputs to their RMs; its outputs."""
        outputs = await self._apply(rm, kind, body)
        while self.core.backlog:  # the pass stopped at its per-entry budget: the service ticks at once
            await self._apply("", "tick", b"{}")
        return outputs

    async def _apply(self, rm: str, kind: str, body: bytes) -> list[Any]:
        core = self.core
        ts = max(START_TS + round(anyio.current_time() * 1e9), core.now)
        entry = Entry(seq=core.last_seq + 1, ts=ts, rm=rm, kind=kind, msg=body)
        self.entries.append(entry)
        outputs = core.apply(entry)
        for out in outputs:
            callback = self.callbacks.get(out.rm)
            if callback is not None and out.kind != "register":
                await deliver(callback, out.kind, out.msg)
        return outputs

    async def ticker(self) -> None:
        while True:
            await anyio.sleep(TICK_INTERVAL_S)
            await self.append("", "tick", b"{}")


class _Port(SchedulerAPI):
    """One RM's connection to the shared `_Log`: a request becomes an entry with the body
    the RM would publish over NATS, applied before the call returns (the in-process
    transport's behaviour, `InProcessScheduler`, through the log)."""

    def __init__(self, log: _Log) -> None:
        self.log = log
        self.rm = ""

    async def _apply(self, kind: str, msg: Any) -> list[Any]:
        return await self.log.append(self.rm, kind, codec.encode(msg, "json"))

    async def register_resource_manager(self, request: m.RegisterResourceManagerRequest,
                                        callback: ResourceManagerCallback) -> m.RegisterResourceManagerResponse:
        self.rm = request.rmID
        self.log.callbacks[request.rmID] = callback
        outputs = await self._apply("register", request)
        response = next(o.msg for o in outputs if o.kind == "register")
        if response.error:
            raise RegistrationError(response.error)
        return response

    async def update_allocation(self, request: m.AllocationRequest) -> None:
        await self._apply("alloc", request)

    async def update_application(self, request: m.ApplicationRequest) -> None:
        await self._apply("app", request)

    async def update_node(self, request: m.NodeRequest) -> None:
        await self._apply("node", request)

    async def update_configuration(self, request: m.UpdateConfigurationRequest) -> None:
        await self._apply("config", request)

    async def unregister(self) -> None:
        await self._apply("unregister", m.UnregisterRequest())


class _TYJobs(ResourceManagerCallback):
    """The TYJob controller as `ykbus up` runs it, on the virtual clock, its jobs given
    (no KV bucket, no cluster file to watch): a `ControllerService` it holds (its
    controller, client and sends), answered on the virtual clock."""

    def __init__(self, port: _Port, jobs: str) -> None:
        self.service = ControllerService("", "")
        self.port, self.jobs = port, jobs

    def update_allocation(self, response: m.AllocationResponse) -> None:
        self.service.ctl.on_allocations(response, _wall())

    def update_application(self, response: m.ApplicationResponse) -> None:
        self.service.ctl.on_applications(response, _wall())

    def update_container_scheduling_state(self, states: list[m.UpdateContainerSchedulingStateRequest]) -> None:
        self.service.update_container_scheduling_state(states)

    async def run(self) -> None:
        service = self.service
        examples = files("ykbus.examples").joinpath("tyjob")
        service.nodes = parse_cluster(examples.joinpath("cluster.yaml").read_text(encoding="utf-8"), "cluster.yaml")
        service.ctl = Controller({n.name: n.capacity for n in service.nodes.values()})
        service.client = ResourceManagerClient(self.port, service.rm_id, config=QUEUES, callback=self,
                                               policy_group=service.rm_id)
        await service.client.start(nodes=[n.info() for n in service.nodes.values()])
        for revision, job in enumerate(parse_manifests(self.jobs, "jobs.yaml"), 1):
            service.ctl.apply(job, revision, _wall())
        while True:
            service.ctl.tick(_wall())
            await service._flush()  # the service's sends, as its own loop makes them
            await anyio.sleep(TICK_S)


def _wall() -> float:
    return START_TS / 1e9 + anyio.current_time()


def demo_log(seconds: float = 100.0, k8s: K8sWorkload | None = None, batch: BatchWorkload | None = None,
             jobs: str | None = None) -> list[Entry]:
    """The entries of `seconds` (virtual) of `ykbus up`'s demo: RMs `k8s` and `batch` with
    these workloads (default: `ykbus up`'s), and `tyjob` running `jobs` (TYJob manifests;
    default: examples/tyjob/jobs.yaml). Write them with `log.jsonl.encode_entry`."""
    if jobs is None:
        jobs = files("ykbus.examples").joinpath("tyjob/jobs.yaml").read_text(encoding="utf-8")
    log = _Log()
    rms = [SimRM("", "k8s", k8s or K8sWorkload(), scheduler=_Port(log)),
           SimRM("", "batch", batch or BatchWorkload(), scheduler=_Port(log)),
           _TYJobs(_Port(log), jobs)]

    async def run() -> None:
        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as tg:
                tg.start_soon(log.ticker)
                for rm in rms:
                    tg.start_soon(rm.run)

    loop = _VirtualLoop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    return log.entries
