"""TYJob topology over a real nats-server and core (docs/tyjob.md, "Topology"): jobs applied
with `ykbus tyjob apply` run whole inside one rack of the controller's cluster; one no rack
holds waits, its message naming the rack that comes closest, and runs in a rack once hosts
are added to it in CLUSTER.yaml; a broken topology is refused by `apply` with its path, and
nothing is stored."""

from __future__ import annotations

import anyio
import pytest

from tests.integration.conftest import running_core
from tests.integration.test_tyjob_bus import apply, cluster_file, controller, statuses, wait_for
from tests.tyjob.test_topology import manifest
from ykbus.tyjob import cli

pytestmark = pytest.mark.anyio


def node(rack: str, block: str, i: int) -> str:
    return (f"  - {{name: {rack}-{i}, cpu: 16, memory: 64Gi, nvidia.com/gpu: 4, "
            f"attributes: {{ykbus.io/block: {block}, ykbus.io/rack: {rack}}}}}\n")


# racks of 4-GPU hosts: b1/r1 2 hosts (8 GPUs), b1/r2 3 (12), b2/r3 2 (8)
RACKS = "nodes:\n" + "".join(node(r, b, i) for r, b, n in (("r1", "b1", 2), ("r2", "b1", 3), ("r3", "b2", 2))
                             for i in range(1, n + 1))


def racks(status: dict) -> set[str]:
    return {p["node"].split("-")[0] for p in status["pods"] if p["node"]}


async def test_topology_jobs_run_each_in_one_rack_and_a_waiting_one_runs_once_its_rack_grows(nats_server, tmp_path):
    url = nats_server.url
    cluster = cluster_file(tmp_path, RACKS)
    async with running_core(url), controller(url, cluster):
        await apply(url, tmp_path, manifest("train", seconds="120"),  # 12 GPUs: only r2 holds them
                    manifest("big", sets=(("worker", 3, 4, ""),), seconds="120"))  # 16 GPUs: no rack yet
        st = await wait_for(url, lambda s: s.get("train", {}).get("stage") == "Running"
                            and "fits in no rack" in s.get("big", {}).get("message", ""))
        assert racks(st["train"]) == {"r2"} and len(st["train"]["pods"]) == 3
        assert st["big"]["stage"] == "Pending" and racks(st["big"]) == set()
        assert st["big"]["message"].startswith(  # no rack holds it even empty: it waits for the cluster to grow
            "its gang (4 pods, {vcore: 4 cores, nvidia.com/gpu: 16}) fits in no rack of the cluster even when it is "
            "empty (the largest for it, rack b1/r2, has "), st["big"]["message"]
        # two hosts more in rack b2/r3 (16 GPUs): the waiting job takes that rack
        cluster.write_text(RACKS + node("r3", "b2", 3) + node("r3", "b2", 4))
        st = await wait_for(url, lambda s: s["big"]["stage"] == "Running")
        assert racks(st["big"]) == {"r3"} and len({p["node"] for p in st["big"]["pods"]}) == 4
        assert st["big"]["message"] == "" and racks(st["train"]) == {"r2"}


async def test_a_broken_topology_is_refused_by_apply_and_nothing_is_stored(nats_server, tmp_path, capsys):
    url = nats_server.url
    path = tmp_path / "jobs.yaml"
    path.write_text(manifest("fine") + "---\n" + manifest("both", topology="{required: ykbus.io/rack, "
                                                                               "preferred: ykbus.io/block}"))
    assert await cli.apply(cli.Nats(url), [str(path)]) == 1
    err = capsys.readouterr().err
    assert (f"error: {path}: document 2: spec.topology: has both required and preferred: give one of them"
            in err.splitlines()), err
    assert "1 error(s); nothing stored" in err
    with anyio.fail_after(10):
        assert await statuses(url) == {}
