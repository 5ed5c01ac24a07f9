"""`ykbus bench failover`: how long scheduling stops when the leader core dies.

An embedded nats-server, two `ykbus core` processes (one leads, one is a warm standby) and
an RM here publishing asks at a steady `rate`. Every few seconds the leader (the process
whose `/api/health` says `"role": "leader"`) is killed with SIGKILL and a new candidate is
started in its place. The failover time of a kill is from the kill to the arrival at the
RM of the first allocation of an ask published after the kill: the next decision, as the RM
sees it. At the end the RM must have received every ask's allocation exactly once, and the
output stream must hold no message id twice.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import anyio

from ykbus.bench.e2e import QUEUES, _res
from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.bus.server import NatsServer, free_port, spawn
from ykbus.si import messages as m


def _core_log() -> Any:
    """Where a core's log goes: YKBUS_BENCH_CORE_LOG (appended, to find slow takeovers), else nowhere."""
    path = os.environ.get("YKBUS_BENCH_CORE_LOG")
    return open(path, "ab") if path else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it


class _Candidate:
    def __init__(self, url: str, ttl: float) -> None:
        self.port = free_port()
        self.proc = spawn(
            [sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--tick", "3600", "--rm-pause", "3600",
             "--lease-ttl", str(ttl), "--api-port", str(self.port), "--log-level", "warning"],
            stderr=_core_log(), env={**os.environ})

    def role(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/health", timeout=1) as r:
                return json.loads(r.read()).get("role")
        except (OSError, ValueError):
            return None


class _Arrivals(ResourceManagerCallback):
    def __init__(self) -> None:
        self.keys: list[str] = []
        self.at: dict[str, float] = {}

    def update_allocation(self, response: m.AllocationResponse) -> None:
        now = time.perf_counter()
        for a in response.new:
            self.keys.append(a.allocationKey)
            self.at.setdefault(a.allocationKey, now)


async def _leader(cores: list[_Candidate], timeout: float = 30.0) -> _Candidate:
    with anyio.fail_after(timeout):
        while True:
            roles = [await anyio.to_thread.run_sync(c.role) for c in cores]
            if roles.count("leader") == 1 and None not in roles:
                return cores[roles.index("leader")]
            await anyio.sleep(0.05)


async def _run(url: str, kills: int, ttl: float, rate: float, nodes: int, every: float,
               progress: Callable[[str], None]) -> dict[str, Any]:
    cores = [_Candidate(url, ttl)]
    await _leader(cores)  # the first one leads; then a standby
    cores.append(_Candidate(url, ttl))
    await _leader(cores)
    rec = _Arrivals()
    sent: dict[str, float] = {}
    times: list[float] = []
    try:
        async with NatsScheduler(url) as api:
            client = ResourceManagerClient(api, "bench", config=QUEUES, callback=rec)
            await client.start(nodes=[m.NodeInfo(nodeID=f"n{i:04d}", action=m.ActionFromRM.CREATE,
                                                 schedulableResource=_res(vcore=10**9, memory=10**10))
                                      for i in range(nodes)])
            await client.add_applications([m.AddApplicationRequest(
                applicationID="a", queueName="root.a", partitionName="default",
                ugi=m.UserGroupInformation(user="bench"))])

            async def feed() -> None:  # 10 asks a message, `rate` asks a second, on schedule
                n, t0 = 0, time.perf_counter()
                while True:
                    n += 1
                    await anyio.sleep(max(0.0, t0 + n * 10 / rate - time.perf_counter()))
                    batch = [m.AllocationAsk(allocationKey=f"k{n}-{i}", applicationID="a", partitionName="default",
                                             resourceAsk=_res(vcore=1, memory=1), maxAllocations=1)
                             for i in range(10)]
                    stamp = time.perf_counter()
                    for a in batch:
                        sent[a.allocationKey] = stamp
                    await client.add_asks(batch)

            async with anyio.create_task_group() as tg:
                tg.start_soon(feed)
                for k in range(kills):
                    await anyio.sleep(every)
                    leader = await _leader(cores)
                    killed_at = time.perf_counter()
                    os.kill(leader.proc.pid, signal.SIGKILL)
                    leader.proc.wait()
                    cores[cores.index(leader)] = _Candidate(url, ttl)
                    with anyio.fail_after(30):
                        while True:
                            after = [rec.at[key] for key, t in list(sent.items()) if t > killed_at and key in rec.at]
                            if after:
                                break
                            await anyio.sleep(0.005)
                    times.append((min(after) - killed_at) * 1000)
                    progress(f"failover {k + 1}/{kills}: {times[-1]:,.0f} ms")
                await anyio.sleep(every)
                tg.cancel_scope.cancel()
            with anyio.fail_after(30):
                while len(set(rec.keys)) < len(sent):
                    await anyio.sleep(0.05)
    finally:
        for c in cores:
            c.proc.send_signal(signal.SIGTERM)
        for c in cores:
            c.proc.wait(timeout=60)
    ordered = sorted(times)
    return {"bench": "failover", "kills": kills, "lease_ttl_s": ttl, "rate": rate, "asks": len(sent),
            "allocations": len(rec.keys), "lost": len(set(sent) - set(rec.keys)),
            "duplicated": len(rec.keys) - len(set(rec.keys)),
            "failover_p50_ms": statistics.median(ordered), "failover_min_ms": ordered[0],
            "failover_max_ms": ordered[-1], "failover_ms": [round(t) for t in times]}


def bench_failover(kills: int, ttl: float, rate: float, nodes: int, every: float,
                   progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bus.service import asyncio_loop_policy

    asyncio_loop_policy()
    with NatsServer() as server:
        return anyio.run(_run, server.url, kills, ttl, rate, nodes, every, progress)
