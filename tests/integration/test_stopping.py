"""Stopping what ykbus starts (issue 40, section 1): Ctrl-C in a terminal reaches the whole
foreground process group, and `ykbus up` must still stop its parts in order (RMs, the core
with its final snapshot, the reader, nats-server last); every service stops on SIGTERM, as a
container's PID 1 is stopped."""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.output import Output
from tests.integration.test_first_hour import home_env

ROOT = Path(__file__).parents[2]
START_S = 180  # a loaded 2-core machine, the core perhaps pure Python: generous
STOP_S = 20  # the issue saw 20 s and a traceback; a clean stop takes about a second


class Terminal:
    """`argv` run as a shell runs a foreground job: the session leader of a pseudo-terminal
    that is its controlling terminal, so the terminal's Ctrl-C (the byte 0x03 written to the
    master side) sends SIGINT to its whole foreground process group."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a new session, the pty its controlling terminal
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.out = b""
        self._changed = threading.Condition()
        self.status: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)  # a pty nobody reads blocks the writer
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every process holding the terminal has gone
                data = b""
            with self._changed:
                self.out += data
                self._changed.notify_all()
            if not data:
                return

    def text(self) -> str:
        return self.out.decode(errors="replace")

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = re.search(pattern, self.text())
                if found:
                    return found
                left = deadline - time.monotonic()
                assert left > 0 and self._reader.is_alive(), f"no {pattern!r} within {timeout} s:\n{self.text()[-3000:]}"
                self._changed.wait(min(left, 1.0))

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")  # what a terminal does on Ctrl-C (ISIG: SIGINT to the foreground group)

    def wait(self, timeout: float) -> int | None:
        """The exit status (as subprocess gives it: -N for a signal), or None if still running."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                self._reader.join(timeout=10)
                return self.status
            time.sleep(0.05)
        return None

    def close(self) -> None:
        if self.status is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait(30)
        os.close(self.fd)


def children(pid: int) -> dict[int, str]:
    """The processes whose parent is `pid`, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_in_a_terminal_stops_up_in_order_with_a_final_snapshot(tmp_path):
    """Regression (issue 40): the terminal's SIGINT reached nats-server and the reader as well
    as `ykbus up`, so the core's final snapshot met a stopping server: a 20 s stop ending in a
    traceback (`nats: timeout`), exit 1, no snapshot (the next start "took over from a
    leader"). Tests that signalled only the `ykbus up` process passed."""
    env = home_env(tmp_path)
    data = tmp_path / "data"
    term = Terminal([sys.executable, "-m", "ykbus.cli", "up", "--fresh", "--data", str(data)], env)
    try:
        term.wait_for(r"Ctrl-C stops\.", START_S)
        parts = children(term.pid)
        assert any("nats-server" in cmd for cmd in parts.values()), parts
        assert any("--reader" in cmd for cmd in parts.values()), parts
        term.wait_for(r"\nt=\s*\d+s|allocs/s", START_S)  # running: the demo RMs have work in flight
        term.ctrl_c()
        term.wait_for(r"ykbus up: stopping", STOP_S)
        term.ctrl_c()  # an impatient second one: told to wait, never a traceback
        status = term.wait(STOP_S)
        out = term.text()
        assert status is not None, f"still running {STOP_S} s after Ctrl-C:\n{out[-3000:]}"
    finally:
        term.close()
    assert "Traceback" not in out, out[-5000:]
    assert status == 130, out[-3000:]  # the shell's convention for a job ended by Ctrl-C
    assert "ykbus up: stopped" in out, out[-3000:]
    assert [pid for pid in parts if alive(pid)] == [], "children left behind"
    log = (data / "nats-server.log").read_text(errors="replace")
    assert 'Trapped "interrupt" signal' not in log, "nats-server took the terminal's Ctrl-C"  # `ykbus up` stops it
    again = subprocess.run([sys.executable, "-m", "ykbus.cli", "up", "--data", str(data), "--duration", "3"],
                           capture_output=True, text=True, timeout=START_S, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming the run kept there" in again.stdout
    assert "took over" not in again.stderr, again.stderr[-3000:]  # the last run ended with its final snapshot


class Service:
    """A script of services/ (what a container runs) as a child process, its output read as
    it is written (a pipe nobody reads fills and blocks the writer)."""

    def __init__(self, script: str, *args: str, pid_1: bool = False) -> None:
        """`pid_1`: as a container runs it, the first process of a PID namespace of its own
        (`unshare`): one that ignores every signal it has no handler for."""
        self.pid_1 = pid_1
        self.proc = subprocess.Popen([*(PID_1 if pid_1 else []), sys.executable, str(ROOT / "services" / script),
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output = Output(self.proc)

    @property
    def lines(self) -> list[str]:
        return self.output.lines

    def wait_for(self, text: str, timeout: float = START_S) -> None:
        self.output.search(re.escape(text), timeout)

    def terminate(self) -> float:
        """SIGTERM, as `docker stop` sends it; the seconds until it exited."""
        start = time.monotonic()
        if self.pid_1:  # the service, not `unshare` waiting for it
            os.kill(next(iter(children(self.proc.pid))), signal.SIGTERM)
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - start


PID_1 = ["unshare", "--pid", "--fork", "--kill-child"]
SERVICE_STOP_S = 2.0  # the bound (Docker kills at 10 s; `docker compose down` took 11.7 s)


def _can_be_pid_1() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run([*PID_1, "true"], capture_output=True).returncode == 0  # root, or user namespaces


@pytest.mark.parametrize("as_pid_1", [True, False], ids=["pid-1", "child"])
def test_every_service_stops_on_sigterm_within_two_seconds(nats_server, tmp_path, as_pid_1):
    """Regression (issue 40): the TYJob controller ignored SIGTERM as a container's PID 1 (no
    handler: Python's default, which PID 1 does not get) and was killed after 10 s. Each
    script of services/ must exit by a handler of its own: exit code 0 (not death by the
    signal, -15 where it is not PID 1), within 2 s; as PID 1 where this machine lets a test
    make a PID namespace (root), else as a plain child."""
    from importlib.resources import files

    if as_pid_1 and not _can_be_pid_1():
        pytest.skip("no PID namespace here (unshare needs root or user namespaces)")

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(files("ykbus.examples").joinpath("tyjob/cluster.yaml").read_text(encoding="utf-8"))
    url = nats_server.url
    core = Service("core.py", "--nats", url, "--snapshot-dir", str(tmp_path / "snapshots"), "--api-port", "0",
                   pid_1=as_pid_1)
    services = {"core.py": core}
    try:
        core.wait_for('"msg": "core started"')
        services["k8s_sim.py"] = Service("k8s_sim.py", "--nats", url, "--nodes", "5", pid_1=as_pid_1)
        services["batch_sim.py"] = Service("batch_sim.py", "--nats", url, "--nodes", "5", pid_1=as_pid_1)
        services["tyjob_controller.py"] = Service("tyjob_controller.py", "--nats", url, "--cluster", str(cluster),
                                                  pid_1=as_pid_1)
        services["k8s_sim.py"].wait_for("allocated=")
        services["batch_sim.py"].wait_for("allocated=")
        services["tyjob_controller.py"].wait_for('"msg": "tyjob controller running"')
        took = {}
        for name in ("tyjob_controller.py", "k8s_sim.py", "batch_sim.py", "core.py"):  # RMs first, as compose would
            took[name] = services[name].terminate()
    finally:
        for service in services.values():
            if service.proc.poll() is None:
                service.proc.kill()
                service.proc.wait()
    for name, service in services.items():
        out = "".join(service.lines)
        assert service.proc.returncode == 0, (name, service.proc.returncode, out[-3000:])
        assert "Traceback" not in out, (name, out[-3000:])
        assert took[name] < SERVICE_STOP_S, (name, took[name], out[-3000:])


def test_a_core_still_starting_stops_on_sigterm_at_once(tmp_path):
    """A core whose start waits (here for JetStream, which this server does not run; in the
    review, for a snapshot being replaced as it was read) ignored SIGTERM until its start-up
    gave up, 60 s later, with a traceback: a stop must not wait for the start to end."""
    from ykbus.bus.server import find_binary, free_port, spawn, stop_process

    port = free_port()
    plain = spawn([find_binary(), "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)  # no JetStream: the core's start-up waits for it
    try:
        time.sleep(0.5)
        core = Service("core.py", "--nats", f"nats://127.0.0.1:{port}", "--api-port", "0")
        try:
            core.wait_for("JetStream not answering yet", timeout=60)
            took = core.terminate()
        finally:
            if core.proc.poll() is None:
                core.proc.kill()
                core.proc.wait()
    finally:
        stop_process(plain)
    out = "".join(core.lines)
    assert took < SERVICE_STOP_S, (took, out[-3000:])
    assert core.proc.returncode == 0 and "Traceback" not in out, out[-3000:]


def test_a_benchmark_stopped_with_sigterm_stops_its_children_and_says_so():
    """Regression (a review): `ykbus bench e2e` ended by SIGTERM (a CI job's timeout, `kill`)
    exited 143 in silence and left its `ykbus core` running, adopted by init: Python's
    default SIGTERM skips the `finally` blocks that stop the children. Every command stops
    as it does on Ctrl-C."""
    proc = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "bench", "e2e", "--seconds", "60", "--nodes", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not any("ykbus.cli core" in line for line in children(proc.pid).values()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        spawned = set(children(proc.pid))
        time.sleep(2)  # the benchmark under way
        proc.send_signal(signal.SIGTERM)  # to it alone, not its process group
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM
        assert err.splitlines()[-1] == "ykbus bench: terminated", err[-2000:]
        assert not [pid for pid in spawned if alive(pid)]  # the core, the nats-server: stopped
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


STOPPED_IN_A_TASK = """
import asyncio, logging, os, signal, sys
from ykbus.cli import stop_on_sigterm

logging.basicConfig()  # as every command's logs.setup: asyncio's own complaints reach stderr
stop_on_sigterm("ykbus demo")

async def delivering():  # a NATS subscription's callback, busy when the signal lands
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10_000):
        pass
    await asyncio.sleep(30)

async def main():
    asyncio.create_task(delivering())
    await asyncio.sleep(30)

try:
    asyncio.run(main())
finally:
    print("finally ran", file=sys.stderr)
"""


def test_sigterm_landing_inside_a_task_ends_in_one_line_not_a_traceback():
    """Regression (CI): `ykbus bench e2e` ended by SIGTERM while a NATS subscription's callback
    ran printed "terminated" and then asyncio's "Task exception was never retrieved" with a
    traceback ending in SystemExit: 143 (the stop, raised in that task, is kept on it)."""
    run = subprocess.run([sys.executable, "-c", STOPPED_IN_A_TASK], capture_output=True, text=True, timeout=60)
    assert run.returncode == 128 + signal.SIGTERM
    assert run.stderr.splitlines() == ["ykbus demo: terminated", "finally ran"], run.stderr
