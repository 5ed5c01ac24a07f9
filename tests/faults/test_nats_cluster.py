"""A 3-node NATS cluster underneath (issue 24): streams with 3 replicas; one NATS server is
killed under load and later started again. No acked input lost, no output twice, the cores
keep scheduling."""

from __future__ import annotations

import time

import anyio
import nats
import pytest

from tests.faults.profile import NATS_KILLS
from tests.faults.test_failover import Candidate, leader_of
from tests.faults.test_resilience import assert_outputs_are_the_replay, stop_all, wait_until_applied
from tests.integration.conftest import Recorder, rm_client
from tests.integration.test_bus import app, ask, node, start_rm
from ykbus.bus.server import NatsCluster
from ykbus.bus.subjects import IN_STREAM

pytestmark = pytest.mark.anyio


@pytest.fixture
def cluster(tmp_path):
    c = NatsCluster(str(tmp_path / "cluster")).start()
    yield c
    c.cleanup()


async def jetstream_ready(url: str, timeout: float = 30.0) -> None:
    """Until the cluster has elected its JetStream meta leader."""
    nc = await nats.connect(servers=url.split(","))
    try:
        with anyio.fail_after(timeout):
            while True:
                try:
                    await nc.jetstream().account_info()
                    return
                except nats.errors.Error:
                    await anyio.sleep(0.2)
    finally:
        await nc.close()


async def stream_leader(url: str) -> str:
    nc = await nats.connect(servers=url.split(","))
    try:
        return (await nc.jetstream().stream_info(IN_STREAM)).cluster.leader
    finally:
        await nc.close()


async def where_it_stands(url: str, cores: list[Candidate]) -> str:
    """What a stuck run shows: each stream's state and leader, each core's health."""
    said = []
    try:
        nc = await nats.connect(servers=url.split(","), connect_timeout=5)
        try:
            for stream in (IN_STREAM, "YK_OUT"):
                info = await nc.jetstream(timeout=5).stream_info(stream)
                said.append(f"{stream}: last {info.state.last_seq}, leader {info.cluster.leader}")
        finally:
            await nc.close()
    except Exception as exc:  # noqa: BLE001 - a diagnosis: say what failed
        said.append(f"streams: {exc!r}")
    said += [f"core {c.proc.pid}: {await anyio.to_thread.run_sync(c.health)}" for c in cores]
    return "; ".join(said)


async def test_a_nats_server_killed_under_load_and_restarted_loses_and_duplicates_nothing(cluster, tmp_path):
    """The server leading the input stream is killed (SIGKILL) while an RM publishes, then
    started again; once in CI, three times in the long profile."""
    url = cluster.url
    await jetstream_ready(url)
    cores = [Candidate(url, "--replicas", "3") for _ in range(2)]
    for c in cores:
        c.start()
    kill_at = {15 + 30 * k for k in range(NATS_KILLS)}
    batches, stalls = 30 * NATS_KILLS + 20, []
    try:
        await leader_of(cores, timeout=60)
        async with rm_client(url) as rm:
            rec = Recorder()
            client = await start_rm(rm, "k8s", rec, nodes=[node(f"n{i}", vcore=100_000) for i in range(10)])
            await client.add_applications([app(f"a{i}") for i in range(5)])
            killed = None
            for batch in range(batches):
                await client.add_asks([ask(f"p{batch}-{i}", f"a{i % 5}", vcore=100) for i in range(10)])
                await anyio.sleep(0.05)
                if batch in kill_at:  # the server that leads the input log: the hardest one to lose
                    name = await stream_leader(url)
                    killed = next(s for i, s in enumerate(cluster.servers) if name.endswith(f"-{i + 1}"))
                    t0 = time.perf_counter()
                    killed.stop(kill=True)
                if batch - 1 in kill_at:  # the first asks published after the kill: scheduled again
                    try:
                        await rec.wait_for(lambda b=batch: any(a.allocationKey.startswith(f"p{b}-")
                                                               for a in rec.allocations), timeout=60)
                    except TimeoutError:
                        raise AssertionError(f"batch {batch} not scheduled 60 s after the kill: "
                                             f"{await where_it_stands(url, cores)}") from None
                    stalls.append(time.perf_counter() - t0)
                if batch - 15 in kill_at:
                    killed.start()
            await rec.wait_for(lambda: len(rec.allocations) >= 10 * batches, timeout=60)
            await wait_until_applied(url)
    finally:
        stop_all(cores)
        for c in cores:  # shown when the test fails
            err = c.stderr()
            print(f"--- core {c.proc.pid}: {len(err)} bytes on stderr ---\n{err[-6000:]}")
    await assert_outputs_are_the_replay(url, tmp_path)
    keys = sorted(a.allocationKey for a in rec.allocations)
    assert keys == sorted(f"p{b}-{i}" for b in range(batches) for i in range(10))
    print(f"stalls after each kill: {', '.join(f'{s:.2f} s' for s in stalls)}")
    assert len(stalls) == NATS_KILLS and max(stalls) < 30  # bounded: new stream leaders, clients reconnect
