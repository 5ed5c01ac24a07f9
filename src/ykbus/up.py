"""`ykbus up`: an embedded nats-server, the core service and three demo RMs (a Kubernetes-like
cluster, a YARN-like batch RM and the TYJob controller), with progress."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import getpass
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import anyio

from ykbus.bus.local import LOCK_SUFFIX, NatsUnreachable, leaves, register, unregister
from ykbus.bus.permissions import (
    CoreIdentity,
    RmIdentity,
    RmsConfig,
    Secrets,
    UserIdentity,
    connect_options,
    generate,
    load_secrets,
)
from ykbus.bus.server import NatsServer, spawn, stop_process
from ykbus.bus.service import CoreService, LogGap
from ykbus.bus.settings import ServiceSettings, StartError, service_settings
from ykbus.progress import Block
from ykbus.sim.base import SimRM
from ykbus.sim.batch import BatchWorkload
from ykbus.sim.k8s import K8sWorkload
from ykbus.tables import shown
from ykbus.tyjob.controller import QUEUES as TYJOB_QUEUES
from ykbus.tyjob.service import ControllerService
from ykbus.tyjob.store import BUCKET as TYJOB_BUCKET

DEFAULT_DATA = os.path.join("~", ".ykbus", "up")  # kept between runs: the next `ykbus up` resumes it
ADMIN = "(admin)"  # the process owner's identity among the demo RMs' connect options (not an RM id)
MARKER = ".ykbus-up"  # in a data directory `ykbus up` made: only such a directory is wiped by --fresh


@contextlib.contextmanager
def claimed(path: str) -> Iterator[None]:
    """Hold the data directory for this run (a lock file beside it, `<dir>.lock`): a second
    `ykbus up` on the same directory is refused, because two nats-servers on one JetStream
    store corrupt it (seen: an entry lost from the input log)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + LOCK_SUFFIX, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "another process"
            raise SystemExit(f"ykbus up: {path} is in use by another `ykbus up` ({owner}): stop that one, or give "
                             "this one its own --data DIR") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n")
        lock.flush()
        yield


def data_directory(path: str, fresh: bool) -> bool:
    """Make the data directory if missing; whether it holds an earlier run to resume. With
    `fresh`, an earlier run's directory is emptied first; a directory `ykbus up` did not
    make is never emptied."""
    marker = os.path.join(path, MARKER)
    if fresh and os.path.isdir(path) and os.listdir(path):
        if not os.path.exists(marker):
            raise SystemExit(f"ykbus up: --fresh: {path} was not made by `ykbus up` (no {MARKER} in it): "
                             "not emptied; remove it yourself or choose another --data")
        shutil.rmtree(path)
    resuming = os.path.exists(os.path.join(path, "js"))
    os.makedirs(path, exist_ok=True)
    with open(marker, "w", encoding="utf-8") as f:
        f.write("a data directory of `ykbus up`: `ykbus up --fresh` empties it\n")
    return resuming


def up(args: argparse.Namespace) -> int:
    try:
        settings = service_settings(argparse.Namespace(**{**vars(args), "nats": ""}))
    except StartError as exc:
        sys.exit(f"ykbus up: {exc}")
    if settings.limits.replicas != 1:  # (a service configuration's streams.replicas)
        sys.exit(f"ykbus up: streams.replicas {settings.limits.replicas}: `ykbus up` runs one nats-server, which keeps "
                 "one replica; replicas are for `ykbus core` on a NATS cluster")
    store = os.path.abspath(os.path.expanduser(args.data or DEFAULT_DATA))
    if args.api_port and not _port_free(settings.api_host, args.api_port):  # before anything starts
        print(f"ykbus up: --api-port {args.api_port}: the port is in use on {settings.api_host} (another `ykbus up`'s "
              "web UI?): choose another, or leave --api-port out for a free one", file=sys.stderr, flush=True)
        return 2
    held = contextlib.ExitStack()
    try:
        held.enter_context(claimed(store))
        resuming = data_directory(store, args.fresh)
    except OSError as exc:
        held.close()
        what = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
        print(f"ykbus up: --data {args.data or DEFAULT_DATA}: cannot use it as the data directory: {what}",
              file=sys.stderr, flush=True)
        return 2
    with held:
        fresh = ("`ykbus up --fresh` or `make run ARGS=--fresh`" if not args.data
                 else f"`ykbus up --data {args.data} --fresh`")  # (the same directory, not the default one)
        print(f"ykbus up: data in {store} " + ("(resuming the run kept there" if resuming else "(new")
              + f"; {fresh} starts clean)", flush=True)
        rm_options, auth, secrets = {}, "", None
        if getattr(args, "secure", False):
            secrets = os.path.join(store, "secrets.yaml")
            config = _secure(store)
            settings.nats_options.update(user=config.core.user, password=config.core.password)
            rm_options = {r.id: connect_options(r.id, r.password) for r in config.rms}
            rm_options[ADMIN] = connect_options(config.admins[0].user, config.admins[0].password)
            auth = 'include "auth.conf"\n'  # beside the nats.conf NatsServer writes in the store
        gaps: list[BaseException] = []
        exits: list[BaseException] = []
        try:
            return _up(args, settings, store, rm_options, auth, secrets)
        except* LogGap as group:
            gaps += leaves(group)
        except* ReaderExited as group:
            exits += leaves(group)
        if exits:
            print(f"ykbus up: {exits[0]}, {READER_STARTS} times (its reason above); stopped", file=sys.stderr,
                  flush=True)
            return 2
        print(f"ykbus up: the input log in {store} has a gap ({gaps[0]}): the store is damaged and "
              f"cannot be resumed; `ykbus up{f' --data {args.data}' if args.data else ''} --fresh` starts clean",
              file=sys.stderr, flush=True)
        return 3


def _secure(store: str) -> RmsConfig:
    """Users and permissions for `ykbus up --secure` in the data directory (0600): the core,
    the demo RMs, and the process owner as admin. Passwords kept from an earlier run."""
    os.makedirs(store, exist_ok=True)
    secrets_path = os.path.join(store, "secrets.yaml")
    old = load_secrets(secrets_path) if os.path.exists(secrets_path) else Secrets()
    owner = getpass.getuser()

    def kept(section: dict, name: str) -> str | None:
        return section[name].password if name in section else None

    config = RmsConfig(
        core=CoreIdentity(password=old.core.password if old.core else None),
        rms=[RmIdentity(rm, password=kept(old.rms, rm), buckets=[TYJOB_BUCKET] if rm == "tyjob" else [])
             for rm in ("k8s", "batch", "tyjob")],
        admins=[UserIdentity(owner, password=kept(old.admins, owner), buckets=[TYJOB_BUCKET])])
    done = generate(config, os.path.join(store, "auth.conf"), secrets_path)
    print(f"ykbus up: secured: one NATS user per RM, core and admin {owner!r} ({store}/auth.conf); "
          f"their passwords in {secrets_path} (ykbus tyjob get --nats-secrets {secrets_path})", flush=True)
    return done.config


HTTP_PORT = 9080  # YuniKorn's REST port


def _bound_port(host: str, port: int) -> int:
    """The port a bind of `port` (0: any free one) on `host` gets, 0 if it is taken. Bound
    as the HTTP server binds (SO_REUSEADDR): a port whose last connections wait out their
    close (TIME_WAIT, a minute after a browser's use) is free for it, one listened on is not."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return 0
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    """Whether nothing listens on `port` of `host` (a bind would succeed)."""
    return _bound_port(host, port) != 0


def _http_port(host: str) -> int:
    """HTTP_PORT if nothing listens there, else a free port (the URL is printed either way)."""
    return _bound_port(host, HTTP_PORT) or _bound_port(host, 0)


def _up(args: argparse.Namespace, settings: ServiceSettings, store: str, rm_options: dict[str, dict],
        auth: str, secrets: str | None = None) -> int:
    with NatsServer(store_dir=store, sync_always=args.sync_always, extra_conf=auth) as server:
        settings.nats_url = server.url
        settings.snapshot_dir = settings.snapshot_dir or os.path.join(server.store_dir, "snapshots")
        if not settings.queues_dir and not settings.queue_file:
            settings.queues_dir = _queue_files(os.path.join(server.store_dir, "queues"))
        if args.api_port is None:  # HTTP on by default, on loopback: YuniKorn's port if it is free
            settings.api_port = _http_port(settings.api_host)
            if settings.api_port and settings.api_port != HTTP_PORT:  # said at once: the README's `curl localhost:9080` will not answer
                host = settings.api_host
                print(f"ykbus up: port {HTTP_PORT} is busy; web UI on "
                      f"http://{f'[{host}]' if ':' in host else host}:{settings.api_port}/ (--api-port P chooses)",
                      flush=True)
        reader = None
        if settings.api_port:  # reads are a reader process's: none waits on the writer (docs/operations.md)
            reader = Reader(settings, settings.api_port, secrets)
            settings.api_port, settings.reads = 0, False
        print(f"ykbus up: nats-server on {server.url} (store: {server.store_dir})", flush=True)
        url_files = _write_url(server.url, store)
        cluster = _tyjob_cluster(os.path.join(server.store_dir, "tyjob"))
        if settings.queues_dir:
            print(f"ykbus up: queue configuration per RM in {settings.queues_dir}/<rm>.yaml: "
                  "edit it while this runs, a valid change applies within seconds", flush=True)
        try:
            signum = anyio.run(_run, settings, args.duration, os.path.join(store, "rms"), rm_options, cluster, reader)
        finally:
            _stopping_already("nats-server stops")  # until it has: a Ctrl-C now is not a traceback
            unregister(url_files)
    print("ykbus up: stopped", flush=True)
    return 128 + signal.SIGINT if signum == signal.SIGINT else 0  # Ctrl-C: 130, as a shell reports it


def _write_url(url: str, store: str) -> list[str]:
    """The NATS URL in the data directory, and this run in ~/.ykbus/running, where other
    commands find it (bus/local.py); removed again at stop. Others running on other data
    directories keep theirs."""
    try:
        return register(store, url)
    except OSError as exc:
        print(f"ykbus up: could not write where commands find this server ({exc}): give them --nats {url}",
              flush=True)
        return []


def _tyjob_cluster(directory: str) -> str:
    """The TYJob demo's cluster file, copied once into the data directory (then the user's
    to edit: the controller reads it every second)."""
    from importlib.resources import files

    from ykbus.tyjob.cluster import ClusterError, load_cluster

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "cluster.yaml")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(files("ykbus.examples").joinpath("tyjob/cluster.yaml").read_text(encoding="utf-8"))
    print(f"ykbus up: TYJob controller's cluster in {path}; jobs: ykbus tyjob apply -f FILE, ykbus tyjob get",
          flush=True)
    try:
        racks = any("ykbus.io/rack" in n.attributes for n in load_cluster(path).values())
    except (OSError, ClusterError):
        racks = True  # the controller says what is wrong with it
    if not racks:  # a data directory from before the GPU pool: the topology jobs would wait for racks
        print(f"ykbus up: {path} has no node in a rack (attribute ykbus.io/rack): the example jobs of namespace "
              "train need racks; `ykbus up --fresh` starts with the example cluster's GPU pool", flush=True)
    return path


def _queue_files(directory: str) -> str:
    """The demo RMs' queue files (policy groups `k8s`, `batch` and `tyjob`, the last with
    the topology levels of the TYJob GPU pool), each written once when missing: after that
    they are the user's to edit, and the core watches them."""
    os.makedirs(directory, exist_ok=True)
    for rm_id, text in (("k8s", K8sWorkload().queues_yaml()), ("batch", BatchWorkload().queues_yaml()),
                        ("tyjob", TYJOB_QUEUES)):
        path = os.path.join(directory, f"{rm_id}.yaml")
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.lstrip())
    return directory


class ReaderExited(Exception):
    """The reader process exited before its HTTP answered (its reason is on stderr, its own)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"the reader process exited with {returncode} as it started")
        self.returncode = returncode


READER_STARTS = 3  # a reader that exits as it starts is started again, twice


async def _start_reader(reader: Reader) -> None:
    """The reader started, until its HTTP answers. One that exits first (seen on a busy
    machine: its reason, one line, on stderr) is started again, the user told; the third
    exit ends `ykbus up` (ReaderExited, said in one line)."""
    for started in range(1, READER_STARTS + 1):
        reader.start()
        try:
            await anyio.to_thread.run_sync(reader.wait_ready)
            return
        except ReaderExited as exc:
            if started == READER_STARTS:
                raise
            print(f"ykbus up: {exc}; starting it again", flush=True)


class Reader:
    """`ykbus core --reader` beside `ykbus up`'s core, serving HTTP (the web UI, YuniKorn's
    REST API, metrics, the read API) and the NATS read API from its own copy of the state."""

    def __init__(self, settings: ServiceSettings, port: int, secrets: str | None) -> None:
        self.settings, self.port, self.secrets = settings, port, secrets
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        host = self.settings.api_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def start(self) -> None:
        s = self.settings
        flags = ["--reader", "--nats", s.nats_url, "--prefix", s.prefix, "--api-host", s.api_host,
                 "--api-port", str(self.port), "--log-level", "warning"]
        if self.secrets:
            flags += ["--nats-secrets", self.secrets]
        env = {**os.environ, **({"YKBUS_API_TOKEN": s.api_token} if s.api_token else {})}
        self.proc = spawn([sys.executable, "-m", "ykbus.cli", "core", *flags], env=env)  # a Ctrl-C is not its

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until its HTTP answers as a reader, and it runs still (it loads the latest snapshot
        and follows the log first; whatever else answers on its port is not it); ReaderExited
        if it exits first."""
        assert self.proc is not None
        headers = {"Authorization": f"Bearer {self.settings.api_token}"} if self.settings.api_token else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ReaderExited(self.proc.returncode)
            try:
                with urllib.request.urlopen(urllib.request.Request(self.base + "/api/health", headers=headers),
                                            timeout=2) as answer:
                    if json.loads(answer.read()).get("role") == "reader" and self.proc.poll() is None:
                        return
            except (OSError, ValueError, AttributeError):  # nothing there yet, or not a reader's answer
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the reader process did not answer on {self.base} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


async def _run(settings: ServiceSettings, duration: float, rm_states: str, rm_options: dict[str, dict] | None = None,
               tyjob_cluster: str | None = None, reader: Reader | None = None) -> int | None:
    """The core and the demo RMs until Ctrl-C or SIGTERM (or `duration`); the signal that
    stopped them (None: the duration ended). Each simulated RM keeps its state in
    `rm_states`/<rm>.json: started again, it resumes through YuniKorn's recovery protocol
    (its running pods reported as existing allocations); the TYJob controller resumes from
    its KV bucket.

    The stop, in order: the RMs, the core (its final snapshot), the reader; nats-server
    after this returns. The children run in sessions of their own (`spawn`), so a terminal's
    Ctrl-C reaches this process only; signals are taken from the start to the end of the
    stop (a second one is told to wait, never a traceback)."""
    stop = _StopSignal()
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as watching:
            watching.start_soon(stop.watch, signals)
            try:
                await _run_until(stop, settings, duration, rm_states, rm_options, tyjob_cluster, reader)
            finally:
                watching.cancel_scope.cancel()
    _stopping_already("nats-server stops")  # the event loop no longer takes them
    return stop.signum


class _StopSignal:
    """The first SIGINT or SIGTERM `ykbus up` gets asks it to stop; later ones only say that
    it is stopping."""

    def __init__(self) -> None:
        self.requested = anyio.Event()
        self.signum: int | None = None

    async def watch(self, signals) -> None:
        async for signum in signals:
            if self.signum is None:
                self.signum = signum
                self.requested.set()
            else:
                print("ykbus up: stopping already: the core writes its snapshot, then the reader and nats-server "
                      "stop", flush=True)


async def _run_until(stop: _StopSignal, settings: ServiceSettings, duration: float, rm_states: str,
                     rm_options: dict[str, dict] | None, tyjob_cluster: str | None, reader: Reader | None) -> None:
    service = CoreService(settings, notify=_say)
    rm_options = rm_options or {}
    os.makedirs(rm_states, exist_ok=True)
    rms: list = [SimRM(settings.nats_url, "k8s", K8sWorkload(), nats_options=rm_options.get("k8s"),
                       state_path=os.path.join(rm_states, "k8s.json")),
                 SimRM(settings.nats_url, "batch", BatchWorkload(), nats_options=rm_options.get("batch"),
                       state_path=os.path.join(rm_states, "batch.json"))]
    if tyjob_cluster:
        rms.append(ControllerService(settings.nats_url, tyjob_cluster, nats_options=rm_options.get("tyjob"),
                                     notify=_say))
    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(service.run)  # ends after its final snapshot, once stopped
            with anyio.fail_after(30):
                await service.started.wait()
            if reader is not None:
                await _start_reader(reader)
                base = reader.base
                print(f"ykbus up: web UI on {base}/ (YuniKorn's REST API under {base}/ws/v1, e.g. /ws/v1/partitions; "
                      f"Prometheus metrics at {base}/ws/v1/metrics)", flush=True)
                print(f"ykbus up: HTTP read API on {base}/api/health "
                      "(also /api/partitions, queues, applications, nodes; docs/operations.md)", flush=True)
            print("ykbus up: core ready; RMs 'k8s' (kubernetes-like), 'batch' (yarn-like)"
                  + (" and 'tyjob' (TYJob controller, example jobs from examples/tyjob/jobs.yaml)" if tyjob_cluster else "")
                  + " connecting. Ctrl-C stops.", flush=True)
            stopping = anyio.Event()
            async with anyio.create_task_group() as tg:
                for rm in rms:
                    tg.start_soon(_run_rm, rm, stopping)
                    if isinstance(rm, SimRM):
                        tg.start_soon(_say_resumed, rm)
                tg.start_soon(_progress, service, rms)
                if reader is not None:
                    tg.start_soon(_keep_reading, reader)
                if tyjob_cluster:
                    tg.start_soon(_example_jobs, settings.nats_url, rms[-1], rm_options.get(ADMIN))
                with anyio.move_on_after(duration or None):
                    await stop.requested.wait()
                print("\nykbus up: stopping (the core writes a snapshot)", flush=True)
                stopping.set()
                tg.cancel_scope.cancel()
            service.stop()
    finally:
        if reader is not None:  # after the core's final snapshot, before nats-server
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(reader.stop)


def _stopping_already(what: str) -> None:
    """From here on a SIGINT or SIGTERM only says that `ykbus up` is stopping (outside the
    event loop, whose own handling of them has ended)."""
    def say(signum: int, frame: object) -> None:
        print(f"ykbus up: stopping already: {what}", flush=True)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, say)


async def _keep_reading(reader: Reader) -> None:
    """A reader that exits while `ykbus up` runs is started again (the web UI and the read
    API are its), and the user is told."""
    while True:
        await anyio.sleep(1)
        if reader.proc is not None and reader.proc.poll() is not None:
            print(f"ykbus up: the reader process exited with {reader.proc.returncode}; starting it again",
                  flush=True)
            reader.start()


async def _say_resumed(sim: SimRM) -> None:
    """One line once a simulated RM that had run before has recovered."""
    await sim.started.wait()
    stats = sim.stats  # (as saved: new work may already have moved the state on)
    if stats.recovered or stats.recovered_apps:
        print(f"ykbus up: {sim.rm_id} resumed: {stats.recovered_apps} applications recovered, {stats.recovered} "
              f"running pods reported as existing allocations, {stats.recovered_waiting} waiting pods asked again",
              flush=True)


ROUND_CHECK_S = 10.0  # how often `ykbus up` looks whether its example TYJobs have all ended
ROUND_MAX_S = 600.0  # past this, those that ended run again without waiting for the rest ($YKBUS_DEMO_ROUND_MAX_S)


async def _example_jobs(url: str, controller: ControllerService, admin: dict | None) -> None:
    """The example TYJobs, applied once the controller is ready (again on every start:
    unchanged ones stay as they are); then in rounds, so that the demo keeps having gangs
    that wait for a rack: once every one has ended (or ROUND_MAX_S passed), those that ended
    are deleted and applied again, together, as at the start."""
    from importlib.resources import files

    from ykbus.tyjob.cli import Nats, apply_text, rerun_ended

    await controller.ready.wait()
    text = files("ykbus.examples").joinpath("tyjob/jobs.yaml").read_text(encoding="utf-8")
    nats = Nats(url, admin or {})
    applied = False
    longest = float(os.environ.get("YKBUS_DEMO_ROUND_MAX_S", ROUND_MAX_S))
    began = anyio.current_time()
    while True:
        try:  # (a NATS stalled a moment, a machine suspended say, does not stop `ykbus up`: the next round tries again)
            if not applied:
                await apply_text(nats, text, "examples/tyjob/jobs.yaml")
                applied, began = True, anyio.current_time()
                continue
            await anyio.sleep(ROUND_CHECK_S)
            overdue = anyio.current_time() - began > longest
            again = await rerun_ended(nats, text, "examples/tyjob/jobs.yaml", whole=not overdue)
        except Exception as exc:  # noqa: BLE001 - NATS trouble only: anything else stops `ykbus up`
            if not _nats_trouble(exc):
                raise
            logging.getLogger("ykbus.up").warning("the example TYJobs: NATS did not answer, trying again",
                                                  extra={"fields": {"error": str(leaves(exc)[0])}})
            await anyio.sleep(ROUND_CHECK_S if not applied else 0)
            continue
        if again:
            began = anyio.current_time()
            print(f"ykbus up: the example TYJobs run again ({len(again)} that ended, applied anew)", flush=True)


def _nats_trouble(exc: BaseException) -> bool:
    """Whether `exc` is only `ykbus up`'s own NATS not answering for a while (a connection
    refused or timed out, a publish not acked after its retries)."""
    from nats.errors import Error as NatsError

    return all(isinstance(e, (NatsUnreachable, NatsError, TimeoutError)) for e in leaves(exc))


async def _run_rm(rm, stopping: anyio.Event) -> None:
    """A demo RM. While running, its errors stop `ykbus up`, but for `ykbus up`'s own NATS not
    answering (stalled a moment: a machine suspended, say): the RM starts again, from what it
    saved, as it does when `ykbus up` starts again. Once stopping, an error from tearing down
    its connection (seen rarely: a write on a closing transport) is only logged."""
    while True:
        try:
            await rm.run()
            return
        except Exception as exc:  # noqa: BLE001 - only swallowed after the shutdown began
            if not stopping.is_set() and _nats_trouble(exc):
                logging.getLogger("ykbus.up").warning("demo RM: NATS did not answer, starting it again",
                                                      extra={"fields": {"rm": rm.rm_id, "error": str(leaves(exc)[0])}})
                await anyio.sleep(1)
                continue
            if not stopping.is_set():
                raise
            logging.getLogger("ykbus.up").info("demo RM stopped with an error during shutdown",
                                               extra={"fields": {"rm": rm.rm_id, "error": repr(exc)}})
            return


PIPE_EVERY_S = 10.0  # a progress line this often when stdout is not a terminal ($YKBUS_PROGRESS_EVERY)


def _say(text: str) -> None:
    """A verdict the user should see (a queue or cluster file's edit): a line of its own, what
    a terminal would act on escaped (it names RMs, and quotes a file's errors)."""
    print(shown(f"ykbus up: {text}"), flush=True)


async def _progress(service: CoreService, rms: list) -> None:
    """The core's rate and totals (allocations and log entries since the log began, so a
    restart goes on counting), then per RM its nodes, applications, running allocations,
    pending vcores, the rejections it got since this start, and each top-level queue's usage
    as a share of the partition's total vcores. On a terminal: a block redrawn in place every
    second (a line per RM, folded to the width). Elsewhere (a pipe, a log file): one line
    every PIPE_EVERY_S seconds (or `$YKBUS_PROGRESS_EVERY`), and one more at the stop."""
    terminal = sys.stdout.isatty()
    every = 1.0 if terminal else _seconds(os.environ.get("YKBUS_PROGRESS_EVERY", ""), PIPE_EVERY_S)
    start = time.monotonic()
    last, last_t = service.core.allocations_made, start
    block = Block(sys.stdout) if terminal else None
    out = sys.stdout
    if block is not None:
        sys.stdout = block.hold()  # what else `ykbus up` prints goes above the block
    try:
        while True:
            await anyio.sleep(every)
            last, last_t = _progress_shown(service, rms, block, start, last, last_t)
    except anyio.get_cancelled_exc_class():
        if block is None:  # the totals at the stop (a short run's only line)
            _progress_shown(service, rms, None, start, last, last_t)
        raise
    finally:
        sys.stdout = out


def _seconds(text: str, default: float) -> float:
    """`text` as a positive number of seconds, else `default`."""
    try:
        value = float(text)
    except ValueError:
        return default
    return value if value > 0 else default


def _progress_shown(service: CoreService, rms: list, block: Block | None, start: float, last: int,
                    last_t: float) -> tuple[int, float]:
    """One progress report (the block, or a line); returns the allocations and time it counted."""
    now = time.monotonic()
    allocs = service.core.allocations_made
    rate = (allocs - last) / (now - last_t) if now > last_t else 0.0
    parts = service.read("partitions", {})["partitions"]
    queues = service.read("queues", {})["queues"]
    head = [f"t={now - start:5.0f}s", f"allocs/s={rate:7.0f}", f"allocations={allocs}",
            f"entries={service.core.last_seq}"]  # both since the log began, whatever restarts
    per_rm = []
    for rm in rms:
        p = parts.get(rm.rm_id, {}).get("default")
        if p is None:
            continue
        pending = sum(q["pending"].get("vcore", 0) for path, q in queues[rm.rm_id]["default"].items()
                      if path != "root" and "." not in path[5:])
        leaves = {path[5:]: q for path, q in queues[rm.rm_id]["default"].items() if path != "root"}
        total = p["total"].get("vcore", 0) or 1
        usage = " ".join(f"{name}:{100 * q['allocated'].get('vcore', 0) // total}%" for name, q in leaves.items())
        per_rm.append(f"{rm.rm_id}: nodes={p['nodes']} apps={p['applications']} "
                      f"running={p['allocations']} pending_vcore={pending // 1000} "
                      f"rejected={service.publisher.rejections[rm.rm_id]}  {usage}")
    if block is not None:
        block.draw(["  ".join(head), *(f"  {line}" for line in per_rm)])
    else:
        print("  ".join(head + [f"| {line}" for line in per_rm]), flush=True, file=sys.stdout)
    return allocs, now
