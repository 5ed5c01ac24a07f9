"""Round trip over NATS and whole-process restart (`python benchmarks/nats_roundtrip_restart.py`).

An embedded nats-server and `ykbus core` as a process; one RM with 5,000 nodes sends 300
asks one at a time and times each to its allocation; then 100,000 allocations are made,
the core is stopped (SIGTERM: final snapshot) and started again, and the time from the
process start to the first decision it publishes is taken.
"""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import anyio
import nats

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.bus.server import NatsServer
from ykbus.si import messages as m

CONFIG = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: q}]}]}]"
SNAPSHOTS = tempfile.mkdtemp(prefix="ykbus-snap-")  # the core keeps a local copy of its snapshot here
CORE = [sys.executable, "-m", "ykbus.cli", "core", "--tick", "3600", "--rm-pause", "600", "--snapshot-dir", SNAPSHOTS]


def res(**q: int) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


def ask(key: str, **q: int) -> m.AllocationAsk:
    return m.AllocationAsk(allocationKey=key, applicationID="a", partitionName="default", resourceAsk=res(**q),
                           maxAllocations=1)


class Arrivals(ResourceManagerCallback):
    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.changed = anyio.Event()

    def update_allocation(self, response: m.AllocationResponse) -> None:
        now = time.perf_counter()
        for a in response.new:
            self.at[a.allocationKey] = now
        self.changed.set()
        self.changed = anyio.Event()

    async def wait(self, predicate) -> None:
        with anyio.fail_after(300):
            while not predicate():
                await self.changed.wait()


async def last_seq(url: str) -> int:
    nc = await nats.connect(url)
    try:
        return json.loads((await nc.request("yk.v1.api.health", b"", timeout=5)).data)["lastSeq"]
    finally:
        await nc.close()


async def main() -> None:
    with NatsServer() as server:
        core = subprocess.Popen([*CORE, "--nats", server.url, "--snapshot-every", "1000000"], stderr=subprocess.DEVNULL)
        cb = Arrivals()
        async with NatsScheduler(server.url) as api:
            rm = ResourceManagerClient(api, "rm", config=CONFIG, callback=cb)
            await rm.start(nodes=[m.NodeInfo(nodeID=f"n{i}", action=m.ActionFromRM.CREATE,
                                             schedulableResource=res(vcore=100_000, memory=10**12))
                                  for i in range(5000)])
            await rm.add_applications([m.AddApplicationRequest(applicationID="a", queueName="root.q",
                                                               partitionName="default",
                                                               ugi=m.UserGroupInformation(user="u"))])
            latencies = []
            for i in range(300):
                t0 = time.perf_counter()
                await rm.add_asks([ask(f"rt{i}", vcore=10)])
                await cb.wait(lambda key=f"rt{i}": key in cb.at)
                latencies.append((cb.at[f"rt{i}"] - t0) * 1000)
            latencies.sort()
            print(f"round trip ask -> allocation over NATS (5,000 nodes, sequential, n=300): "
                  f"p50={latencies[150]:.2f} ms p99={latencies[296]:.2f} ms")
            for b in range(100):
                await rm.add_asks([ask(f"s{b}-{i}", vcore=10, memory=10) for i in range(1000)])
            await cb.wait(lambda: len(cb.at) >= 100_300)
            print(f"state built: {await last_seq(server.url)} entries, {len(cb.at)} allocations")
            core.send_signal(signal.SIGTERM)
            core.wait()
            t0 = time.perf_counter()
            core = subprocess.Popen([*CORE, "--nats", server.url], stderr=subprocess.DEVNULL)
            await rm.add_asks([ask("after-restart", vcore=10)])
            await cb.wait(lambda: "after-restart" in cb.at)
            print(f"restart (process start -> first decision, 5,000 nodes, 100,000 allocations, from snapshot): "
                  f"{cb.at['after-restart'] - t0:.2f} s")
        core.send_signal(signal.SIGTERM)
        core.wait()


if __name__ == "__main__":
    try:
        anyio.run(main)
    finally:
        shutil.rmtree(SNAPSHOTS, ignore_errors=True)  # (the local copy of the snapshot: 17 MB)
