"""The web UI's Topology view as a person sees it (docs/topology.md, docs/operations.md "Web
UI"): a core on a real nats-server holds a GPU cluster of two blocks and four racks (and one
node with no topology attributes) in a partition with `topology.levels`, beside a partition
without levels; gangs required in a rack and in a block are placed, one that no rack holds
waits. Headless Chromium (Debian's `chromium`, driven by Playwright) clicks to the Topology
view and reads it: the racks under their blocks, each domain's free and used GPUs, the gangs
where they sit (a link to the application's page), the one that waits and why, and the
partition without levels told how to name them."""

from __future__ import annotations

import re

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import res, start_rm
from tests.integration.test_web_ui import ALLOCATED, SHOTS, chromium, pixels_like
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

BLOCK, RACK = "ykbus.io/block", "ykbus.io/rack"
CONFIG = f"""
partitions:
  - name: default
    topology:
      levels: [{BLOCK}, {RACK}]
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
  - name: batch
    queues:
      - name: root
        submitacl: '*'
"""
RACKS = {"r1": ("b1", 4), "r2": ("b1", 2), "r3": ("b2", 4), "r4": ("b2", 2)}  # rack: (block, nodes of 8 GPUs)


def host(node_id: str, block: str | None = None, rack: str | None = None) -> m.NodeInfo:
    return m.NodeInfo(nodeID=node_id, action=m.ActionFromRM.CREATE,
                      schedulableResource=res(gpu=8, vcore=64_000, memory=256 * 2**30),
                      occupiedResource=res(gpu=4) if node_id == "r2-1" else None,  # 4 GPUs taken by pods not ykbus's
                      attributes={BLOCK: block, RACK: rack} if block and rack else {})


def gang(app_id: str, members: int, gpus: int, level: str) -> tuple[m.AddApplicationRequest, m.AllocationAsk]:
    """An application of `members` placeholders of `gpus` GPUs (task group `workers`), required in one `level` domain."""
    application = m.AddApplicationRequest(
        applicationID=app_id, queueName="root.jobs", partitionName="default", ugi=m.UserGroupInformation(user="u"),
        placeholderAsk=res(gpu=members * gpus), tags={"ykbus.io/topology-required": level})
    placeholders = m.AllocationAsk(allocationKey=f"{app_id}-ph", applicationID=app_id, partitionName="default",
                                   resourceAsk=res(gpu=gpus, vcore=1000), maxAllocations=members,
                                   taskGroupName="workers", placeholder=True)
    return application, placeholders


async def drive_topology_cluster(api, rec: Recorder) -> None:
    """48 GPUs in block b1 (racks r1 of 32, r2 of 16, 4 of them occupied by others), 48 in b2
    (r3 of 32, r4 of 16), 8 on a node with no attributes. `train` (5 x 4 GPUs, required in a rack) takes r1, the best fit
    (r1 and r3 leave 12; the tie goes to b1/r1 by key); `blocky` (6 x 8, required in a
    block) fills b2, both its racks; `huge` (5 x 8, required in a rack) fits no rack and waits."""
    hosts = [host(f"{rack}-{i}", block, rack) for rack, (block, n) in RACKS.items() for i in range(n)] + [host("loose-0")]
    client = await start_rm(api, "gpus", rec, nodes=hosts, config=CONFIG)
    placed = lambda app_id: len([a for a in rec.allocations if a.applicationID == app_id])  # noqa: E731
    for app_id, members, gpus, level in (("train", 5, 4, RACK), ("blocky", 6, 8, BLOCK)):
        application, placeholders = gang(app_id, members, gpus, level)
        await client.add_applications([application])
        await api.update_allocation(m.AllocationRequest(asks=[placeholders], rmID="gpus"))
        await rec.wait_for(lambda a=app_id, n=members: placed(a) == n)
    application, placeholders = gang("huge", 5, 8, RACK)
    await client.add_applications([application])
    await api.update_allocation(m.AllocationRequest(asks=[placeholders], rmID="gpus"))
    await rec.wait_for(lambda: any(s.applicartionID == "huge" for s in rec.states))
    assert {a.nodeID.split("-")[0] for a in rec.allocations if a.applicationID == "train"} == {"r1"}
    assert {a.nodeID.split("-")[0] for a in rec.allocations if a.applicationID == "blocky"} == {"r3", "r4"}


def browse(port: int) -> dict[str, object]:
    """Opens the UI, clicks to the Topology view, reads it, then follows a gang's link."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, object] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("body[data-ready='overview']", timeout=15000)
            page.click("nav a[data-page='topology']")
            page.wait_for_selector("body[data-ready='topology'] #topology [data-domain='b2/r4']", timeout=15000)
            seen["hash"] = page.evaluate("location.hash")
            seen["active"] = page.inner_text("nav a.active")
            seen["text"] = page.inner_text("#topology")
            seen["order"] = page.eval_on_selector_all(
                "#topology [data-partition='default'] [data-domain]", "els => els.map(e => [e.dataset.domain, +e.dataset.depth])")
            seen["rows"] = {d: page.inner_text(f"#topology [data-domain='{d}']") for d in ("b1", "b1/r1", "b1/r2", "b2", "b2/r3", "b2/r4")}
            seen["gpu"] = {d: page.inner_text(f"#topology [data-domain='{d}'] [data-resource='gpu'] .bar-label")
                           for d in ("b1", "b1/r1", "b1/r2", "b2", "b2/r3", "b2/r4")}
            seen["fills"] = page.eval_on_selector_all(  # the used and occupied parts of each gpu bar, as drawn (% of it)
                "#topology [data-domain] [data-resource='gpu'] .bar", "els => els.map(b => [b.closest('[data-domain]')"
                ".dataset.domain, ['allocated', 'occupied'].map(f => 100 * b.querySelector('.fill.' + f)"
                ".getBoundingClientRect().width / b.getBoundingClientRect().width)])")
            seen["gangs-order"] = page.eval_on_selector_all("#topology tr[data-gang]", "els => els.map(e => e.dataset.gang)")
            seen["gangs-table"] = {g: page.inner_text(f"#topology tr[data-gang='{g}']") for g in ("train", "blocky", "huge")}
            seen["batch"] = page.inner_text("#topology [data-partition='batch']")
            seen["shot"] = page.screenshot(full_page=True)
            if SHOTS:
                (SHOTS / "topology.png").write_bytes(seen["shot"])  # type: ignore[arg-type]
            # a refresh (every 3 s) patches the tree in place: the rows are the same elements
            page.evaluate("() => { document.querySelector(\"[data-domain='b1/r1']\").kept = true; }")
            stamp = page.inner_text("#status")
            page.wait_for_function("t => document.querySelector('#status').innerText !== t", arg=stamp, timeout=15000)
            seen["kept"] = page.evaluate("() => document.querySelector(\"[data-domain='b1/r1']\").kept === true")
            # the gang's name in its rack is a link to its page
            page.click("#topology [data-domain='b1/r1'] .gangs a:has-text('train')")
            page.wait_for_selector("body[data-ready='app'] #app h2:has-text('Application train')", timeout=15000)
            seen["app-hash"] = page.evaluate("location.hash")
            seen["app-page"] = page.inner_text("#app")
            # the nodes' heat maps: the GPUs too, and a node's page says none are left
            page.click("nav a[data-page='nodes']")
            page.wait_for_selector("body[data-ready='nodes'] .heat", timeout=15000)
            seen["heat"] = page.eval_on_selector_all(".heat", "els => els.map(e => e.dataset.resource)")
            seen["full"] = page.get_attribute(".heat[data-resource='gpu'] a[title^='r3-1:']", "title")
            page.click(".heat[data-resource='gpu'] a[title^='r3-1:']")
            page.wait_for_selector("body[data-ready='node'] #node h2", timeout=15000)
            seen["node-page"] = page.inner_text("#node")
            # a node or queue that is not there (a link kept from before, a typo) says so on the page
            for kind, what in (("node", "no-such-node"), ("queue", "root.nope")):
                page.goto(f"http://127.0.0.1:{port}/#/{kind}/default/{what}")
                page.wait_for_selector(f"body[data-ready='{kind}'] #{kind} .empty", timeout=15000)
                seen[f"missing-{kind}"] = page.inner_text(f"#{kind}")
            seen["errors"] = errors
        finally:
            browser.close()
    return seen


async def test_the_topology_view_draws_the_domains_as_a_tree_with_their_room_and_gangs(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        with anyio.fail_after(30):
            await drive_topology_cluster(api, Recorder())
        seen = await anyio.to_thread.run_sync(browse, port)

    assert seen["errors"] == []
    assert seen["hash"] == "#/topology" and seen["active"] == "Topology"
    text = seen["text"]
    assert "RM gpus · partition default" in text and "levels, broadest first: block (ykbus.io/block) › rack (ykbus.io/rack)" in text
    assert "6 domains · 1 node of 13 in no block" in text, text
    # the racks under their blocks, in tree order
    assert seen["order"] == [["b1", 0], ["b1/r1", 1], ["b1/r2", 1], ["b2", 0], ["b2/r3", 1], ["b2/r4", 1]], seen["order"]
    # each domain's room: GPUs free of its capacity and used, its nodes and allocations
    assert seen["gpu"] == {"b1": "gpu 24 of 48 free · 20 used · 4 occupied by others", "b1/r1": "gpu 12 of 32 free · 20 used",
                           "b1/r2": "gpu 12 of 16 free · none used · 4 occupied by others", "b2": "gpu 0 of 48 free · 48 used",
                           "b2/r3": "gpu 0 of 32 free · 32 used", "b2/r4": "gpu 0 of 16 free · 16 used"}, seen["gpu"]
    rows = seen["rows"]
    assert "6 nodes · 5 allocations" in rows["b1"] and "4 nodes · 5 allocations" in rows["b1/r1"], rows
    assert "2 nodes · 0 allocations" in rows["b1/r2"] and "6 nodes · 6 allocations" in rows["b2"], rows
    assert "vcore 251 cores of 256 cores free · 5 cores used" in rows["b1/r1"], rows["b1/r1"]
    assert "memory 1 Ti of 1 Ti free · none used" in rows["b1/r1"], rows["b1/r1"]
    fills = dict(seen["fills"])
    drawn = {"b1": (20 / 48, 4 / 48), "b1/r1": (20 / 32, 0), "b1/r2": (0, 4 / 16), "b2": (1, 0), "b2/r3": (1, 0), "b2/r4": (1, 0)}
    assert fills.keys() == drawn.keys(), fills
    assert all(abs(fills[d][i] - 100 * drawn[d][i]) < 1 for d in drawn for i in (0, 1)), fills
    # the gangs where they sit: train in its rack, blocky in its block (it spans both racks), huge nowhere
    assert "gangs: train" in rows["b1/r1"] and "gangs: blocky" in rows["b2"], rows
    for domain in ("b1", "b1/r2", "b2/r3", "b2/r4"):
        assert "no gang here" in rows[domain], rows[domain]
    assert "huge" not in "".join(rows.values())
    table = seen["gangs-table"]
    assert table["train"].split("\t")[:4] == ["train", "required rack", "Running", "rack b1/r1"], table
    assert table["blocky"].split("\t")[:4] == ["blocky", "required block", "Running", "block b2"], table
    assert "required rack\tAccepted\t—" in table["huge"] and "TopologyNoDomain: no ykbus.io/rack domain has room for 5 × {gpu: 8" \
        in table["huge"], table
    assert seen["gangs-order"] == ["huge", "blocky", "train"], seen["gangs-order"]  # the gangs that wait first
    # the partition without levels says how to name them
    assert "RM gpus · partition batch" in seen["batch"] and "Partition batch has no topology levels" in seen["batch"]
    assert "topology.levels" in seen["batch"] and "docs/topology.md" in seen["batch"]
    # drawn: the used part of the bars in the allocated colour
    assert pixels_like(seen["shot"], ALLOCATED) > 2000
    assert seen["kept"] is True
    # the gang's link opens its application's page
    assert seen["app-hash"] == "#/app/default/root.jobs/train"
    assert "Application train Running" in seen["app-page"] and "queue root.jobs" in seen["app-page"]
    # GPUs are what is used up here: the heat maps draw them, a node's page says none are left
    assert seen["heat"] == ["vcore", "memory", "gpu"], seen["heat"]
    assert seen["full"] == "r3-1: 100%", seen["full"]
    assert re.search(r"available\t.*\b0 gpu\b", seen["node-page"]), seen["node-page"]
    assert seen["missing-node"] == ("Node no-such-node\n\nnot known to partition default: it is not registered "
                                    "(removed, or never added)"), seen["missing-node"]
    assert seen["missing-queue"] == ("Queue root.nope\n\nnot known to partition default: no such queue "
                                     "(removed by a reload, or never configured)"), seen["missing-queue"]
