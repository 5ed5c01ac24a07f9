"""The web UI as a person sees it (issue 23, docs/operations.md "Web UI"): headless Chromium
(Debian's `chromium`, installed by `make test`) driven by Playwright opens each page of a
running core that holds the reference state, reads what it shows, and checks screenshots:
the queue bars drawn in their colours, the heat map's cells, the timeline's dots."""

from __future__ import annotations

import io
import os
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
                page.goto(f"http://127.0.0.1:{port}/#{name}")
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
            seen["errors"] = errors
        finally:
            browser.close()
    return seen


async def test_every_page_shows_the_state_and_draws_it(nats_server, monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, \
            rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        with anyio.fail_after(30):
            client = await drive_reference_state(api, Recorder())
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
    assert "0 cores" in before and "0 cores" not in after.split("\n")[2], (before, after)
    assert "root.b" in seen["apps-later"] and "Running" in seen["apps-later"]
