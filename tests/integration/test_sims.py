"""The simulated RMs: trace-file workloads, and recovery after the RM's own restart."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.integration.conftest import running_core
from ykbus.sim.base import SimRM
from ykbus.sim.k8s import K8sWorkload

pytestmark = pytest.mark.anyio


async def wait_for(predicate, timeout=20.0):
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


async def test_k8s_sim_replays_a_trace_and_recovers_its_pods_after_its_own_restart(nats_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(line) for line in [
        {"at": 0.0, "namespace": "team-a", "app": "long", "pods": 3, "vcore": 1000, "memory": 2**30, "duration": 600},
        {"at": 0.0, "namespace": "team-b", "app": "short", "pods": 2, "vcore": 500, "memory": 2**29, "duration": 0.2},
        {"at": 0.1, "namespace": "ml", "app": "gpu", "pods": 1, "vcore": 1000, "memory": 2**30, "gpu": 1,
         "duration": 600},
    ]) + "\n")
    state = tmp_path / "k8s.state"
    async with running_core(nats_server.url) as core:
        def allocations():
            part = core.read("partitions", {"rm": "k8s"})["partitions"].get("k8s", {}).get("default")
            return part["allocations"] if part else 0

        def uuids():
            apps = core.core.dump()["rms"]["k8s"]["partitions"]["default"]["applications"]
            return sorted(u for a in apps.values() for u in a["allocations"])

        sim = SimRM(nats_server.url, "k8s", K8sWorkload(nodes_count=4, profile="mixed", trace=str(trace)),
                    state_path=str(state))
        async with anyio.create_task_group() as tg:
            tg.start_soon(sim.run)
            # the short deployment ends and is removed; the long one and the gpu pod keep running
            await wait_for(lambda: sim.stats.apps_done == 1 and allocations() == 4)
            tg.cancel_scope.cancel()
        before = uuids()
        saved = json.loads(state.read_text())
        assert sorted(saved["running"]) == before and set(saved["apps"]) == {"long", "gpu"}

        again = SimRM(nats_server.url, "k8s", K8sWorkload(nodes_count=4, profile="mixed"), state_path=str(state))
        async with anyio.create_task_group() as tg:
            tg.start_soon(again.run)
            await wait_for(lambda: again.client is not None and again.client.state.value == "Running")
            assert again.stats.recovered == 4 and again.client.rejected == {}
            # the core counted the recovered pods (same UUIDs, nothing re-issued) and keeps scheduling
            assert set(before) <= set(uuids())
            nodes = core.core.dump()["rms"]["k8s"]["partitions"]["default"]["nodes"]
            assert sum(n["allocated"].get("nvidia.com/gpu", 0) for n in nodes.values()) == 1
            await wait_for(lambda: again.stats.allocated > 0)  # new generated work is placed too
            tg.cancel_scope.cancel()


async def test_an_application_is_in_the_sims_state_before_the_core_hears_of_it(nats_server, tmp_path):
    """A `kill -9` of the simulated RM loses none of its applications: each is in its state
    file before it is published (as a pod is stored before a scheduler sees it), so the
    registration after its restart reports it again (saved once a second, the applications of
    the last second were dropped by that registration, with no record of how they went)."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"at": 0.0, "namespace": "team-a", "app": "job", "pods": 1, "vcore": 100,
                                 "memory": 2**20, "duration": 600}) + "\n")
    state = tmp_path / "k8s.state"
    async with running_core(nats_server.url) as core:
        def apps():
            part = core.core.dump()["rms"].get("k8s", {}).get("partitions", {}).get("default")
            return set(part["applications"]) if part else set()

        sim = SimRM(nats_server.url, "k8s", K8sWorkload(nodes_count=2, profile="mixed", trace=str(trace)),
                    state_path=str(state))
        async with anyio.create_task_group() as tg:
            tg.start_soon(sim.run)
            await wait_for(lambda: apps())
            saved = json.loads(state.read_text()) if state.exists() else {"apps": {}}
            tg.cancel_scope.cancel()
    assert apps() <= set(saved["apps"]) and apps()
