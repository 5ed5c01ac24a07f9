"""The web UI as a person sees it (issues 23 and 40, docs/operations.md "Web UI"): headless
Chromium (Debian's `chromium`, installed by `make test`) driven by Playwright opens each page
of a running core that holds the reference state, reads what it shows, and checks screenshots:
the queue bars drawn in their colours, the heat map's cells, the timeline's dots. Then it works
in it as a person does: clicks an application for its page (its allocations, each pending
ask with its own reason, its state history and events), goes on to its queue and a node,
filters, sorts and pages the applications list (which refreshes in place), reads the event
feed in words and picks and zooms the timeline's window."""

from __future__ import annotations

import io
import os
import re
import shutil
import threading
from pathlib import Path

import anyio
import pytest
from PIL import Image

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_rest_conformance import app, ask, drive_reference_state
from ykbus import limits
from ykbus.bus.server import free_port

pytestmark = pytest.mark.anyio
SHOTS = Path(os.environ["YKBUS_UI_SHOTS"]) if os.environ.get("YKBUS_UI_SHOTS") else None  # keep them to look at
ALLOCATED, PENDING, GUARANTEED = (0x2B, 0x6C, 0xB0), (0xDD, 0x6B, 0x20), (0x2F, 0x85, 0x5A)  # style.css


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "chromium not found: the test set-up installs Debian's chromium package (make test)"
    return found


def pixels_like(png: bytes, rgb: tuple[int, int, int], tolerance: int = 40) -> int:
    """How many pixels of the screenshot are close to `rgb` (blending allowed for)."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(image.width * image.height) or []
    return sum(n for n, c in colours if all(abs(a - b) <= tolerance for a, b in zip(c, rgb, strict=True)))


class Rendezvous:
    """The browser's thread and the test's RM meet here: the browser says what it has open,
    the RM acts on it, the browser looks for the effect."""

    def __init__(self) -> None:
        self.events = {name: threading.Event() for name in ("apps", "apps-done", "feed", "feed-done")}

    def say(self, name: str) -> None:
        self.events[name].set()
        assert self.events[f"{name}-done"].wait(30), f"no answer to {name}"


def browse(port: int, meet: Rendezvous) -> dict[str, object]:
    """Every page of the UI, as a person opens it: its text and a screenshot; then, under load,
    the applications and queues pages as they update, and the live event feed."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, object] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            for name in ("overview", "queues", "applications", "nodes", "timeline"):
                page.goto(f"http://127.0.0.1:{port}/#/{name}" + ("?state=all" if name == "applications" else ""))
                page.wait_for_selector(f"body[data-ready='{name}']", timeout=15000)
                seen[name] = (page.inner_text(f"#{name}"), page.screenshot(full_page=True))
                if SHOTS:
                    (SHOTS / f"{name}.png").write_bytes(seen[name][1])  # type: ignore[index]
            # under load: an application comes and its asks flow in; the open pages follow
            page.goto(f"http://127.0.0.1:{port}/#queues")
            page.wait_for_selector("body[data-ready='queues']", timeout=15000)
            before = page.inner_text("[data-queue='root.b']")
            meet.say("apps")
            page.wait_for_function("t => document.querySelector(\"[data-queue='root.b']\").innerText !== t", arg=before,
                                   timeout=15000)
            seen["queues-later"] = (before, page.inner_text("[data-queue='root.b']"))
            page.goto(f"http://127.0.0.1:{port}/#applications")
            page.wait_for_selector("tr[data-app='app-8'] td.state-Running", timeout=15000)
            seen["apps-later"] = page.inner_text("tr[data-app='app-8']")
            page.goto(f"http://127.0.0.1:{port}/#events")
            page.wait_for_selector("#feed div", timeout=15000)
            meet.say("feed")
            page.wait_for_selector("#feed div:has-text('app-7')", timeout=15000)
            seen["events"] = page.inner_text("#feed")
            work_in_it(page, port, seen)
            seen["errors"] = errors
        finally:
            browser.close()
    return seen


def shot(page, name: str) -> None:
    """A screenshot to look at (YKBUS_UI_SHOTS=DIR keeps them)."""
    if SHOTS:
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def rows(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.dataset.app)")


def work_in_it(page, port: int, seen: dict[str, object]) -> None:
    """What a person does in the UI of a busy partition (app-8's asks keep coming)."""
    base = f"http://127.0.0.1:{port}/"
    seen["units"] = page.evaluate("""() => [['memory', 137438953472], ['memory', 2147483648], ['memory', 536870912],
        ['memory', 100000000], ['ephemeral-storage', 10737418240], ['vcore', 1000], ['vcore', 2500], ['vcore', 500],
        ['vcore', 50000], ['pods', 110]].map(([k, v]) => ykbusQuantity(k, v))""")
    # the applications list, waiting ones only; a click on app-9 opens its page
    page.goto(base + "#/applications?waiting=yes")
    page.wait_for_selector("body[data-ready='applications'] tr[data-app='app-9']", timeout=15000)
    seen["waiting-rows"] = rows(page, "#applications tbody tr[data-app]")
    page.click("tr[data-app='app-9'] td >> nth=0 >> a")
    page.wait_for_selector("#app tr[data-ask='app-9-wide']", timeout=15000)
    page.wait_for_selector("#app .events .ev", timeout=15000)
    seen["app-hash"] = page.evaluate("location.hash")
    seen["app-page"] = page.inner_text("#app")
    seen["app-allocations"] = page.inner_text("#app .allocations tbody")
    seen["app-asks"] = {key: page.inner_text(f"#app tr[data-ask='{key}']") for key in ("app-9-huge", "app-9-wide")}
    seen["app-states"] = page.inner_text("#app .states")
    seen["app-events"] = page.inner_text("#app .events")
    shot(page, "app")
    # its queue, then the node its allocation is on
    page.click("#app .facts a")
    page.wait_for_selector("body[data-ready='queue'] #queue tr[data-app='app-9']", timeout=15000)
    seen["queue-page"] = (page.evaluate("location.hash"), page.inner_text("#queue"))
    shot(page, "queue")
    page.go_back()
    page.wait_for_selector("#app .allocations tbody a", timeout=15000)
    node = page.inner_text("#app .allocations tbody a >> nth=0")
    page.click("#app .allocations tbody a >> nth=0")
    page.wait_for_selector(f"body[data-ready='node'] #node h2:has-text('{node}')", timeout=15000)
    seen["node-page"] = (node, page.inner_text("#node"))
    shot(page, "node")
    page.goto(base + "#/app/default/-/app-4")  # an application that ended
    page.wait_for_selector("body[data-ready='app'] #app .states tbody tr", timeout=15000)
    seen["ended-states"] = page.inner_text("#app .states")
    # the list: every state, then filtered by the selects, sorted by a column, paged
    page.goto(base + "#/applications?state=all&sort=id")
    page.wait_for_selector("tr[data-app='app-6']", timeout=15000)
    seen["all-count"] = page.inner_text("#applications .pager .count")
    seen["all-rows"] = rows(page, "#applications tbody tr[data-app]")
    shot(page, "applications-all")
    page.select_option("#applications select[name=queue]", "root.a")
    page.wait_for_function("() => location.hash.includes('queue=root.a')")
    page.wait_for_function("() => ![...document.querySelectorAll('#applications tbody tr[data-app]')]"
                           ".some(tr => tr.dataset.app === 'app-9')", timeout=15000)
    seen["root.a-rows"] = page.eval_on_selector_all(
        "#applications tbody tr[data-app]", "els => els.map(e => [e.dataset.app, e.cells[1].innerText, e.cells[2].innerText])")
    page.select_option("#applications select[name=queue]", "")
    page.select_option("#applications select[name=state]", "Running")
    page.wait_for_function("() => location.hash.includes('state=Running') && !location.hash.includes('queue=')")
    page.wait_for_function("() => ![...document.querySelectorAll('#applications tbody tr[data-app]')]"
                           ".some(tr => tr.cells[2].innerText !== 'Running')", timeout=15000)
    seen["running-rows"] = rows(page, "#applications tbody tr[data-app]")
    page.select_option("#applications select[name=state]", "all")
    page.wait_for_selector("body[data-ready='applications'] #applications tr[data-app='app-6']", timeout=15000)
    page.click("#applications th a[data-sort='submitted']")
    page.wait_for_selector("body[data-ready='applications'] #applications th a[data-sort='submitted']:has-text('▲')", timeout=15000)
    page.click("#applications th a[data-sort='id']")
    page.wait_for_selector("body[data-ready='applications'] #applications th a[data-sort='id']:has-text('▲')", timeout=15000)
    seen["sorted-up"] = rows(page, "#applications tbody tr[data-app]")
    page.click("#applications th a[data-sort='id']")
    page.wait_for_selector("body[data-ready='applications'] #applications th a[data-sort='id']:has-text('▼')", timeout=15000)
    seen["sorted-down"] = rows(page, "#applications tbody tr[data-app]")
    seen["page-1"] = (page.inner_text("#applications .pager .count"), rows(page, "#applications tbody tr[data-app]"))
    page.click("#applications .pager a.next")
    page.wait_for_function("() => location.hash.includes('page=2')")
    page.wait_for_selector("#applications .pager .count:has-text('51–')", timeout=15000)
    seen["page-2"] = (page.inner_text("#applications .pager .count"), rows(page, "#applications tbody tr[data-app]"))
    seen["sorted-hash"] = page.evaluate("location.hash")
    # a refresh patches the list in place: the rows are the same elements, the scroll stays
    page.goto(base + "#/applications?state=all&sort=id")
    page.wait_for_selector("#applications .pager .count:has-text('1–50 of') >> xpath=//ancestor::body//tr[@data-app='app-9']",
                           timeout=15000)
    page.evaluate("() => { document.querySelector(\"tr[data-app='app-9']\").kept = true; window.scrollTo(0, 300); }")
    stamp = page.inner_text("#status")
    page.wait_for_function("t => document.querySelector('#status').innerText !== t", arg=stamp, timeout=15000)
    seen["kept"] = page.evaluate("() => [document.querySelector(\"tr[data-app='app-9']\").kept === true, window.scrollY]")
    # the event feed in words
    page.goto(base + "#/events")
    page.wait_for_selector("#feed .ev", timeout=15000)
    seen["feed-words"] = page.inner_text("#feed")
    seen["feed-what"] = page.eval_on_selector_all("#feed .ev .what", "els => els.map(e => e.innerText)")
    shot(page, "events")
    # the timeline: a window picked, zoomed, then one from-to with nothing in it
    page.goto(base + "#/timeline")
    page.wait_for_selector("body[data-ready='timeline'] #timeline-svg", timeout=15000)
    page.click("#timeline button[data-window='60']")
    page.wait_for_selector("#timeline .window-text:has-text('last 1 min')", timeout=15000)
    seen["timeline-1min"] = (page.inner_text("#timeline .window-text"), page.inner_text("#timeline .plot"))
    shot(page, "timeline-1min")
    page.click("#timeline button[data-zoom='0.5']")
    page.wait_for_function("() => location.hash.includes('from=')")
    page.wait_for_selector("#timeline .window-text:has-text('(30 s)')", timeout=15000)
    seen["timeline-zoomed"] = page.inner_text("#timeline .window-text")
    page.fill("#timeline input[name=from]", "2001-01-01T10:00:00")
    page.fill("#timeline input[name=to]", "2001-01-01T10:05:00")
    page.click("#timeline button[data-apply]")
    page.wait_for_selector("#timeline .window-text:has-text('(5 min 0 s)')", timeout=15000)
    seen["timeline-past"] = page.inner_text("#timeline .plot")
    shot(page, "timeline-past")
    seen["timeline-ticks"] = page.evaluate("""() => {  // each time label, and whether all of it is in the plot
      const plot = document.querySelector('#timeline-svg').getBoundingClientRect();
      return [...document.querySelectorAll('#timeline-svg text.tick')].map((t) => {
        const b = t.getBoundingClientRect(); return [t.textContent, b.left >= plot.left && b.right <= plot.right]; });
    }""")
    page.goto(base + "#/queues")
    page.wait_for_selector("body[data-ready='queues'] [data-queue='root.a']", timeout=15000)
    seen["queues-busy"] = page.inner_text("[data-queue='root.a']")
    seen["b-busy"] = page.inner_text("[data-queue='root.b'] .bar-row[data-resource='vcore'] .bar-label")
    shot(page, "queues-busy")


async def test_every_page_shows_the_state_and_draws_it(nats_server, monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        with anyio.fail_after(30):
            rec = Recorder()
            client = await drive_reference_state(api, rec)
        meet = Rendezvous()
        result: dict[str, object] = {}

        async def run_browser() -> None:
            result.update(await anyio.to_thread.run_sync(browse, port, meet))

        async def wait_for(name: str) -> None:
            with anyio.fail_after(120):
                while not meet.events[name].is_set():
                    await anyio.sleep(0.05)

        async def load() -> None:  # an RM streaming asks into root.b while the pages are open
            for i in range(10_000):
                await client.add_asks([ask("app-8", f"app-8-{i}", {"memory": 1_000_000, "vcore": 100})])
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_browser)
            await wait_for("apps")
            await client.add_applications([app("app-9", "root.b")] + [app(f"bulk-{i:02}", "root.a") for i in range(60)])
            await client.add_asks([ask("app-9", "app-9-run"),
                                   ask("app-9", "app-9-huge", {"memory": 2 * 2**30, "vcore": 1000}),
                                   ask("app-9", "app-9-wide", {"memory": 10_000_000, "vcore": 50_000})])
            await rec.wait_for(lambda: any(a.allocationKey == "app-9-run" for a in rec.allocations))
            await client.add_applications([app("app-8", "root.b")])
            tg.start_soon(load)
            meet.events["apps-done"].set()
            await wait_for("feed")
            await client.add_applications([app("app-7", "root.a")])
            meet.events["feed-done"].set()
            while "events" not in result:
                await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
        seen = result

    assert seen["errors"] == []
    text, shot = seen["overview"]
    assert "RM rm-123 · partition default" in text and "RUNNING" in text.upper() and "REJECTED" in text.upper()
    text, shot = seen["queues"]
    assert all(q in text for q in ("root", "root.a", "root.b")) and "pending" in text
    # the bars as drawn: allocated, pending (app-1-too-big waits in root.a), a guarantee mark
    assert pixels_like(shot, ALLOCATED) > 500 and pixels_like(shot, PENDING) > 300
    assert pixels_like(shot, GUARANTEED) > 20
    text, shot = seen["applications"]
    for app_id in ("app-1", "app-2", "app-3", "app-4", "app-5", "app-6"):
        assert app_id in text
    assert "QueueMax" in text  # why app-1's big ask waits, as the core says
    assert "unsupported sort type" in text  # why app-6 was rejected
    text, shot = seen["nodes"]
    assert "3 nodes" in text and "node-1:1234" in text
    assert "memory: 20%" in text
    # the heat map: six cells (vcore and memory of three nodes) in the colour of 20 % (app.js heatColor)
    assert pixels_like(shot, (220, 198, 206), tolerance=4) >= 6 * 18 * 18 * 0.9
    text, shot = seen["timeline"]
    assert "allocations (9)" in text
    assert pixels_like(shot, ALLOCATED, tolerance=70) > 100  # the allocations' dots
    assert "app-7" in seen["events"]  # arrived live, after the page opened
    before, after = seen["queues-later"]  # root.b's bars moved as its asks were placed
    vcore = lambda text: next(line for line in text.split("\n") if line.startswith("vcore"))  # noqa: E731
    assert vcore(before).startswith("vcore 0 cores of") and not vcore(after).startswith("vcore 0 cores"), (before, after)
    assert "root.b" in seen["apps-later"] and "Running" in seen["apps-later"]

    # units, one function for the whole UI
    assert seen["units"] == ["128 Gi", "2 Gi", "512 Mi", "95.37 Mi", "10 Gi", "1 core", "2.5 cores", "0.5 cores",
                             "50 cores", "110"]
    text, _ = seen["nodes"]
    assert "10 cores, 95.37 Mi memory, 110 pods" in text  # a node's capacity
    # app-9's own page, reached by a click in the list of waiting applications
    assert "app-9" in seen["waiting-rows"] and "app-1" in seen["waiting-rows"] and "app-2" not in seen["waiting-rows"]
    assert seen["app-hash"] == "#/app/default/root.b/app-9"
    assert "Application app-9 Running" in seen["app-page"] and "queue root.b" in seen["app-page"]
    assert re.search(r"app-9-run\s+node-\d:1234\s+1 core, 9\.54 Mi memory\s+\d\d:\d\d:\d\d", seen["app-allocations"]), \
        seen["app-allocations"]
    huge, wide = seen["app-asks"]["app-9-huge"], seen["app-asks"]["app-9-wide"]
    assert "1 core, 2 Gi memory" in huge and "50 cores, 9.54 Mi memory" in wide, (huge, wide)
    reason = lambda row: row.split("\t")[-1]  # noqa: E731
    assert reason(huge) and reason(wide) and reason(huge) != reason(wide), (huge, wide)  # each its own reason
    assert "Pending asks (2)" in seen["app-page"]
    assert all(s in seen["app-states"] for s in ("Accepted", "Running")), seen["app-states"]
    assert "application state set: Running" in seen["app-events"] and "allocation added" in seen["app-events"]
    # what the events cover is said (the last events of the whole log: seconds of them when busy)
    assert re.match(r"of the last [\d,]+ events of the log, since \d\d:\d\d:\d\d", seen["app-events"]), seen["app-events"]
    assert re.search(r"Running\t[\d.]+ (ms|s|min) so far$", seen["app-states"].strip()), seen["app-states"]
    assert seen["ended-states"].strip().endswith("Completed\tfinal"), seen["ended-states"]  # (was "for 0 s")
    hash_, text = seen["queue-page"]
    assert hash_ == "#/queue/default/root.b" and "Queue root.b" in text and "app-9-huge" in text
    node, text = seen["node-page"]
    assert f"Node {node}" in text and "app-9-run" in text and "10 cores" in text
    # the list: every state; filtered by queue, by state; sorted; paged
    assert seen["all-count"].endswith("of 69"), seen["all-count"]  # app-1..9 and 60 bulk
    assert "app-6" in seen["all-rows"] and "app-4" in seen["all-rows"]
    assert seen["root.a-rows"] and all(q == "root.a" for _, q, _ in seen["root.a-rows"]), seen["root.a-rows"]
    assert {"app-1", "app-9", "app-8"} <= set(seen["running-rows"]) and "app-6" not in seen["running-rows"]
    assert seen["sorted-up"][:3] == ["app-1", "app-2", "app-3"], seen["sorted-up"]
    assert seen["sorted-down"][:3] == ["bulk-59", "bulk-58", "bulk-57"], seen["sorted-down"]
    assert seen["page-1"][0] == "1–50 of 69" and len(seen["page-1"][1]) == 50
    assert seen["page-2"][0] == "51–69 of 69" and seen["page-2"][1][-1] == "app-1", seen["page-2"]
    assert "sort=-id" in seen["sorted-hash"] and "state=all" in seen["sorted-hash"] and "page=2" in seen["sorted-hash"]
    assert seen["kept"][0] is True and seen["kept"][1] == 300, seen["kept"]
    # events in words, never codes
    assert "application added" in seen["events"] and "allocation added" in seen["events"], seen["events"]
    words = ("application", "allocation", "ask", "node", "placeholder", "queue")
    assert seen["feed-what"] and all(w.startswith(words) for w in seen["feed-what"]), seen["feed-what"]
    assert not re.search(r"\b(SET|ADD|REMOVE) \d{3}\b", seen["feed-words"] + seen["events"])
    # the timeline's window: picked, zoomed, and one in the past (nothing in it)
    window, plot = seen["timeline-1min"]
    assert "last 1 min" in window and re.search(r"allocations \([1-9]", plot), (window, plot)
    assert "(30 s)" in seen["timeline-zoomed"]
    assert "allocations (0)" in seen["timeline-past"] and "why asks wait (0)" in seen["timeline-past"]
    ticks = seen["timeline-ticks"]  # the window's last time label (10:05:00 at its right end) is read whole
    assert ticks and ticks[-1][0] == "10:05:00" and all(whole for _, whole in ticks), ticks
    # root.a: 60 applications beside app-1, its big ask beyond the max shown as such
    assert "beyond the max" in seen["queues-busy"], seen["queues-busy"]
    # root.b has no max: what it asks past the partition's capacity is said so (it read "the max")
    assert "beyond the partition's capacity" in seen["b-busy"], seen["b-busy"]
