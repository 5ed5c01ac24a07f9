"""One instance, one address (issue 40, section 2): each `ykbus up` keeps its NATS URL in its
own data directory and lists itself while it runs; commands find the one that runs, or name
the running ones and how to pick (`--data DIR`, `$YKBUS_NATS`); a busy port 9080 is said on
the first lines, with the web UI's URL."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.integration.output import Output
from tests.integration.test_first_hour import home_env, ykbus
from ykbus.up import HTTP_PORT

START_S = 180  # a loaded 2-core machine: generous


class Up:
    """`ykbus up --data DIR` as a child process, its output read as it is written."""

    def __init__(self, data: Path, env: dict[str, str]) -> None:
        self.data = data
        self.proc = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "up", "--data", str(data), "--duration",
                                      "600"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.output = Output(self.proc)

    @property
    def lines(self) -> list[str]:
        return self.output.lines

    def wait_for(self, pattern: str) -> re.Match:
        return self.output.search(pattern, START_S)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@contextlib.contextmanager
def port_taken(port: int):
    """`port` on loopback held by this test (or already by someone else: busy either way)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # held though a test before left it in TIME_WAIT
        with contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            s.listen()
        yield


def test_two_ups_on_two_data_directories_each_keep_their_address(tmp_path):
    """Regression (issue 40): the second `ykbus up` overwrote ~/.ykbus/nats.url and deleted it
    at its stop, so commands then missed the first (`ykbus tyjob get` fell back to :4222,
    exit 2). And with 9080 busy the web UI moved to another port without a word."""
    env = home_env(tmp_path)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with port_taken(HTTP_PORT):
        a = Up(a_dir, env)
        b = Up(b_dir, env)
        try:
            urls = {}
            for up in (a, b):
                up.wait_for(r"core ready")
                urls[up] = up.wait_for(r"ykbus up: nats-server on (nats://\S+) ").group(1)
                # said on the first lines, before anything else it starts, with the URL it moved to
                busy = next(i for i, line in enumerate(up.lines) if "is busy" in line)
                assert busy <= 3, up.lines[:6]
                moved = re.match(rf"ykbus up: port {HTTP_PORT} is busy; web UI on (http://127\.0\.0\.1:(\d+)/) ",
                                 up.lines[busy])
                assert moved and int(moved.group(2)) != HTTP_PORT, up.lines[busy]
                assert up.wait_for(r"ykbus up: web UI on (\S+) ").group(1) == moved.group(1)
                with urllib.request.urlopen(moved.group(1) + "ws/v1/partitions", timeout=10) as r:
                    assert r.status == 200
                assert (up.data / "nats.url").read_text().strip() == urls[up]  # its own address file

            both = ykbus("tyjob", "get", env=env)
            assert both.returncode == 2, both
            said = both.stderr.strip().splitlines()[-1]
            assert said.startswith("ykbus tyjob: 2 `ykbus up` run: --data "), said
            for up in (a, b):
                assert f"--data {up.data} ({urls[up]})" in said, said
            assert "pick one with --data DIR, or YKBUS_NATS=URL" in said, said

            for up in (a, b):  # --data picks one, for every command that needs the URL
                picked = ykbus("tyjob", "get", "--data", str(up.data), env=env)
                assert picked.returncode == 0 and "gang-learner" in picked.stdout, picked
                apps = ykbus("apps", "--data", str(up.data), "--rm", "k8s", env=env)
                assert apps.returncode == 0, apps
            chosen = ykbus("tyjob", "get", env={**env, "YKBUS_NATS": urls[a]})
            assert chosen.returncode == 0 and "gang-learner" in chosen.stdout, chosen

            assert b.stop() == 0
            assert not (b_dir / "nats.url").exists()
            alone = ykbus("tyjob", "get", env=env)  # the first is still found, alone now
            assert alone.returncode == 0 and "gang-learner" in alone.stdout, alone
            gone = ykbus("tyjob", "get", "--data", str(b_dir), env=env)
            assert gone.returncode == 2 and gone.stderr.strip().splitlines()[-1].startswith(
                f"ykbus tyjob: no `ykbus up` runs on {b_dir}; running: --data {a_dir} ({urls[a]})"), gone
        finally:
            for up in (a, b):
                up.stop()
    assert a.proc.returncode == 0, "".join(a.lines)[-3000:]


def test_an_up_killed_hard_is_not_offered(tmp_path):
    """An `ykbus up` killed with SIGKILL cannot remove its entry: commands skip it (and its
    children, nats-server and the reader, die with it)."""
    env = home_env(tmp_path)
    up = Up(tmp_path / "a", env)
    try:
        up.wait_for(r"core ready")
        children = subprocess.run(["pgrep", "-P", str(up.proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) >= 2, children  # nats-server and the reader
        up.proc.kill()
        up.proc.wait()
        deadline = time.monotonic() + 30
        while any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in children):
            assert time.monotonic() < deadline, "children outlived a kill -9 of `ykbus up`"
            time.sleep(0.1)
    finally:
        up.stop()
    run = ykbus("tyjob", "get", "--data", str(tmp_path / "a"), env=env)
    assert run.returncode == 2 and "no `ykbus up` runs on" in run.stderr, run


def test_data_finds_an_up_started_under_another_home(tmp_path):
    """`--data DIR` names the `ykbus up` to talk to; it found it only from the same HOME (its
    list of running ones), and said "no `ykbus up` runs on DIR" from another shell's."""
    (tmp_path / "other").mkdir()
    up = Up(tmp_path / "a", home_env(tmp_path))
    try:
        up.wait_for(r"core ready")
        run = ykbus("queues", "--data", str(tmp_path / "a"), env=home_env(tmp_path / "other"))
        assert run.returncode == 0 and run.stdout.startswith("RM "), run
    finally:
        up.stop()
    run = ykbus("queues", "--data", str(tmp_path / "a"), env=home_env(tmp_path / "other"))
    assert run.returncode == 2 and "no `ykbus up` runs on" in run.stderr, run  # stopped: its lock is free


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
