"""The timeline as a history (issue 40 §4; docs/operations.md "Web UI"): the event feed counts
every event of the output stream per second (rest/events.py `Histogram`) and `/api/timeline`
answers the counts per bin of any window, so the web UI's window of an hour counts the
decisions older than the events it loaded (here lowered to 100 with `?events=100`) as bars,
zooming in asks for finer bins, and a window the loaded events cover shows their dots. The
route over HTTP: its counts against the RM's own record, its bounds, and each bad parameter
a 400 that names it."""

from __future__ import annotations

import json
import re
import time

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_rest_api import fetch
from tests.integration.test_rest_conformance import app, ask, drive_reference_state
from tests.integration.test_web_ui import SHOTS, chromium
from ykbus import limits
from ykbus.bus.server import free_port
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio
LOADED = 100  # the events the page loads (?events=)
MORE = 150  # allocations beyond the reference state's


def timeline(port: int, query: str) -> tuple[int, dict]:
    status, _, body = fetch(port, f"/api/timeline{query}")
    return status, json.loads(body)


def browse(port: int, loaded_from_ms: int) -> dict[str, object]:
    """The timeline of the last hour with the last LOADED events loaded, zoomed in once, then
    a window the loaded events cover."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, object] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            base = f"http://127.0.0.1:{port}/?events={LOADED}"
            page.goto(base + "#/timeline?w=3600")
            page.wait_for_selector("body[data-ready='timeline'] #timeline-svg[data-source='history']", timeout=15000)
            seen["hour"] = (page.inner_text("#timeline .window-text"), page.inner_text("#timeline .plot"),
                            int(page.get_attribute("#timeline-svg", "data-bin-ms") or 0))
            if SHOTS:
                page.screenshot(path=str(SHOTS / "timeline-history.png"), full_page=True)
            box = page.locator("#timeline-svg").bounding_box()  # the wheel, at the present's end of the plot
            assert box is not None
            page.mouse.move(box["x"] + box["width"] - 22, box["y"] + 60)
            page.mouse.wheel(0, -100)
            page.wait_for_function("b => location.hash.includes('from=') && document.body.dataset.ready === 'timeline'"
                                   " && Number(document.querySelector('#timeline-svg').dataset.binMs) < b",
                                   arg=seen["hour"][2], timeout=15000)
            seen["zoomed"] = (page.inner_text("#timeline .plot"), int(page.get_attribute("#timeline-svg", "data-bin-ms") or 0))
            page.goto(base + f"#/timeline?from={loaded_from_ms}&to={int(time.time() * 1000) + 5000}")
            page.wait_for_selector("body[data-ready='timeline'] #timeline-svg[data-source='loaded']", timeout=15000)
            seen["covered"] = (page.inner_text("#timeline .window-text"), page.inner_text("#timeline .plot"))
            seen["errors"] = errors
        finally:
            browser.close()
    return seen


def shown(plot: str, row: str) -> int:
    found = re.search(rf"{row} \(([\d,]+)\)", plot)
    assert found, (row, plot)
    return int(found.group(1).replace(",", ""))


async def test_the_timeline_counts_what_the_page_did_not_load(nats_server, monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        with anyio.fail_after(60):
            client = await drive_reference_state(api, rec)
            await client.add_applications([app("app-8", "root.b")])
            for i in range(0, MORE, 30):
                await client.add_asks([ask("app-8", f"app-8-{j}", {"memory": 100_000, "vcore": 10})
                                       for j in range(i, i + 30)])
            await rec.wait_for(lambda: sum(a.applicationID == "app-8" for a in rec.allocations) == MORE)
            freed = [a for a in rec.allocations if a.applicationID == "app-8"][:20]
            await client.release([m.AllocationRelease(partitionName="default", applicationID="app-8", UUID=a.UUID,
                                                      allocationKey=a.allocationKey,
                                                      terminationType=m.TerminationType.STOPPED_BY_RM) for a in freed])
            await rec.wait_for(lambda: sum(r.applicationID == "app-8" for r in rec.released) == 20)
        allocations, releases = len(rec.allocations), len(rec.released)
        now = int(time.time() * 1000)
        whole = f"?from={now - 3_600_000}&to={now + 60_000}&bins=2000"

        # the route: every allocation and release counted, once the feed has read them
        with anyio.fail_after(20):
            while True:
                status, got = await anyio.to_thread.run_sync(timeline, port, whole)
                assert status == 200, got
                if sum(got["counts"]["allocations"]) >= allocations and sum(got["counts"]["releases"]) >= releases:
                    break
                await anyio.sleep(0.1)
        assert sum(got["counts"]["allocations"]) == allocations and sum(got["counts"]["releases"]) == releases
        assert got["kinds"] == ["allocations", "releases", "application states", "rejections", "why asks wait", "nodes"]
        assert got["bins"] <= 2000 and (got["binMs"], got["resolutionMs"]) == (2000, 1000) and got["from"] <= now - 3_600_000
        assert all(len(c) == got["bins"] for c in got["counts"].values())
        assert all(type(n) is int for c in got["counts"].values() for n in c)
        assert got["to"] >= now + 60_000 and got["to"] - got["from"] == got["bins"] * got["binMs"]
        assert sum(got["counts"]["nodes"]) == 6  # three nodes: schedulable, then added
        assert sum(got["counts"]["rejections"]) >= 2  # app-3 and app-6
        assert got["covered"]["from"] <= got["covered"]["to"] <= now + 1000
        status, coarse = await anyio.to_thread.run_sync(timeline, port, "?bins=3")  # the last hour, by default
        assert status == 200 and coarse["bins"] <= 3 and coarse["resolutionMs"] == 60_000
        assert sum(coarse["counts"]["allocations"]) == allocations
        for query, field in (("?from=soon", "from"), ("?to=-5", "to"), ("?from=10&to=10", "to"),
                             ("?bins=0", "bins"), ("?bins=2001", "bins"), (f"?to={2**53}", "to")):
            status, bad = await anyio.to_thread.run_sync(timeline, port, query)
            assert status == 400 and bad["field"] == field and bad["error"].startswith(f"{field}: "), (query, bad)

        # the page: the last hour counted from the history, far beyond the events it loaded
        status, _, body = await anyio.to_thread.run_sync(fetch, port, f"/ws/v1/events/batch?count={LOADED}")
        last = json.loads(body)["EventRecords"]
        loaded_from_ms = last[0]["timestampNano"] // 1_000_000 + 1
        seen = await anyio.to_thread.run_sync(browse, port, loaded_from_ms)

    assert seen["errors"] == []
    text, plot, bin_ms = seen["hour"]
    assert "last 1 h" in text and "from the history of the log" in text, text
    assert shown(plot, "allocations") == allocations > LOADED and shown(plot, "releases") == releases
    assert shown(plot, "nodes") == 6, plot
    plot, finer = seen["zoomed"]
    assert shown(plot, "allocations") == allocations and 0 < finer < bin_ms, (finer, bin_ms)
    text, plot = seen["covered"]  # inside the loaded events: their dots, as many as were loaded in it
    loaded_allocations = sum(1 for e in last if (e["type"], e.get("eventChangeType"), e.get("eventChangeDetail")) == (2, 2, 200)
                             and e["timestampNano"] // 1_000_000 >= loaded_from_ms)
    assert "events loaded" in text and shown(plot, "allocations") == loaded_allocations < allocations, (text, plot)
