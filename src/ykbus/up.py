"""`ykbus up`: an embedded nats-server, the core service and three demo RMs (a Kubernetes-like
cluster, a YARN-like batch RM and the TYJob controller), with progress."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import signal
import sys
import tempfile
import time

import anyio

from ykbus.bus.local import URL_FILE
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
from ykbus.bus.server import NatsServer
from ykbus.bus.service import CoreService, ServiceSettings
from ykbus.sim.batch import BatchSim
from ykbus.sim.k8s import K8sSim
from ykbus.tyjob.service import ControllerService


def up(args: argparse.Namespace) -> int:
    from ykbus.cli import _service_settings

    settings = _service_settings(argparse.Namespace(**{**vars(args), "nats": ""}))
    store, tmp, rm_options, auth = args.data, None, {}, ""
    if getattr(args, "secure", False):
        if store is None:
            tmp = tempfile.TemporaryDirectory(prefix="ykbus-up-")
            store = tmp.name
        config = _secure(store)
        settings.nats_options.update(user=config.core.user, password=config.core.password)
        rm_options = {r.id: connect_options(r.id, r.password) for r in config.rms}
        auth = 'include "auth.conf"\n'  # beside the nats.conf NatsServer writes in the store
    try:
        return _up(args, settings, store, rm_options, auth)
    finally:
        if tmp is not None:
            tmp.cleanup()


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
        rms=[RmIdentity(rm, password=kept(old.rms, rm)) for rm in ("k8s", "batch")],
        admins=[UserIdentity(owner, password=kept(old.admins, owner))])
    done = generate(config, os.path.join(store, "auth.conf"), secrets_path)
    print(f"ykbus up: secured: one NATS user per RM, core and admin {owner!r} ({store}/auth.conf); "
          f"their passwords in {secrets_path}", flush=True)
    return done.config


def _up(args: argparse.Namespace, settings: ServiceSettings, store: str | None, rm_options: dict[str, dict],
        auth: str) -> int:
    with NatsServer(store_dir=store, sync_always=args.sync_always, extra_conf=auth) as server:
        settings.nats_url = server.url
        settings.snapshot_dir = settings.snapshot_dir or os.path.join(server.store_dir, "snapshots")
        if not settings.queues_dir and not settings.queue_file:
            settings.queues_dir = _queue_files(os.path.join(server.store_dir, "queues"))
        print(f"ykbus up: nats-server on {server.url} (store: {server.store_dir})", flush=True)
        url_files = _write_url(server.url, server.store_dir)
        cluster = None if rm_options else _tyjob_cluster(os.path.join(server.store_dir, "tyjob"))
        if settings.queues_dir:
            print(f"ykbus up: queue configuration per RM in {settings.queues_dir}/<rm>.yaml: "
                  "edit it while this runs, a valid change applies within seconds", flush=True)
        try:
            anyio.run(_run, settings, args.duration, rm_options, cluster)
        finally:
            _remove_url(url_files[1], server.url)
    print("ykbus up: stopped", flush=True)
    return 0


def _write_url(url: str, store: str) -> tuple[str, str]:
    """The NATS URL in the data directory and in ~/.ykbus/nats.url, where `ykbus tyjob`
    commands look for it (the latter removed again at stop)."""
    mine = os.path.join(store, "nats.url")
    shared = os.path.expanduser(URL_FILE)
    for path in (mine, shared):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(url + "\n")
        except OSError as exc:
            print(f"ykbus up: could not write {path}: {exc}", flush=True)
    return mine, shared


def _remove_url(path: str, url: str) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            if f.read().strip() == url:  # not one a later `ykbus up` wrote
                os.remove(path)
    except OSError:
        pass


def _tyjob_cluster(directory: str) -> str:
    """The TYJob demo's cluster file, copied once into the data directory (then the user's
    to edit: the controller reads it every second)."""
    from importlib.resources import files

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "cluster.yaml")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(files("ykbus.examples").joinpath("tyjob/cluster.yaml").read_text(encoding="utf-8"))
    print(f"ykbus up: TYJob controller's cluster in {path}; jobs: ykbus tyjob apply -f FILE, ykbus tyjob get",
          flush=True)
    return path


def _queue_files(directory: str) -> str:
    """The demo RMs' queue files (policy groups `k8s` and `batch`), written once: after that
    they are the user's to edit, and the core watches them."""
    os.makedirs(directory, exist_ok=True)
    for rm in (K8sSim("", "k8s"), BatchSim("", "batch")):
        path = os.path.join(directory, f"{rm.rm_id}.yaml")
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(rm.queues_yaml().lstrip())
    return directory


async def _run(settings: ServiceSettings, duration: float, rm_options: dict[str, dict] | None = None,
               tyjob_cluster: str | None = None) -> None:
    service = CoreService(settings)
    rm_options = rm_options or {}
    rms: list = [K8sSim(settings.nats_url, "k8s", nats_options=rm_options.get("k8s")),
                 BatchSim(settings.nats_url, "batch", nats_options=rm_options.get("batch"))]
    if tyjob_cluster:  # not in secure mode: the tyjob RM has no identity there yet (docs/tyjob.md)
        rms.append(ControllerService(settings.nats_url, tyjob_cluster))
    async with anyio.create_task_group() as outer:
        outer.start_soon(service.run)  # ends after its final snapshot, once stopped
        with anyio.fail_after(30):
            await service.started.wait()
        print("ykbus up: core ready; RMs 'k8s' (kubernetes-like), 'batch' (yarn-like)"
              + (" and 'tyjob' (TYJob controller, example jobs from examples/tyjob/jobs.yaml)" if tyjob_cluster else "")
              + " connecting. Ctrl-C stops.", flush=True)
        stopping = anyio.Event()
        async with anyio.create_task_group() as tg:
            for rm in rms:
                tg.start_soon(_run_rm, rm, stopping)
            tg.start_soon(_progress, service, rms)
            if tyjob_cluster:
                tg.start_soon(_example_jobs, settings.nats_url, rms[-1])
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                with anyio.move_on_after(duration or None):
                    async for _ in signals:
                        break
            print("\nykbus up: stopping (the core writes a snapshot)", flush=True)
            stopping.set()
            tg.cancel_scope.cancel()
        service.stop()


async def _example_jobs(url: str, controller: ControllerService) -> None:
    """The example TYJobs, applied once the controller is ready (again on every start:
    unchanged ones stay as they are)."""
    from importlib.resources import files

    from ykbus.tyjob.cli import apply_text

    await controller.ready.wait()
    text = files("ykbus.examples").joinpath("tyjob/jobs.yaml").read_text(encoding="utf-8")
    await apply_text(url, text, "examples/tyjob/jobs.yaml")


async def _run_rm(rm, stopping: anyio.Event) -> None:
    """A demo RM. While running, its errors stop `ykbus up`; once stopping, an error from
    tearing down its connection (seen rarely: a write on a closing transport) is only logged."""
    try:
        await rm.run()
    except Exception as exc:  # noqa: BLE001 - only swallowed after the shutdown began
        if not stopping.is_set():
            raise
        logging.getLogger("ykbus.up").info("demo RM stopped with an error during shutdown",
                                           extra={"fields": {"rm": rm.rm_id, "error": repr(exc)}})


async def _progress(service: CoreService, rms: list) -> None:
    start = time.monotonic()
    last, last_t = 0, start
    while True:
        await anyio.sleep(1.0)
        now = time.monotonic()
        allocs = service.stats["allocations"]
        rate = (allocs - last) / (now - last_t)
        last, last_t = allocs, now
        parts = service.read("partitions", {})["partitions"]
        queues = service.read("queues", {})["queues"]
        line = [f"t={now - start:5.0f}s", f"allocs/s={rate:7.0f}", f"allocations={allocs}",
                f"entries={service.stats['entries']}"]
        for rm in rms:
            p = parts.get(rm.rm_id, {}).get("default")
            if p is None:
                continue
            pending = sum(q["pending"].get("vcore", 0) for path, q in queues[rm.rm_id]["default"].items()
                          if path != "root" and "." not in path[5:])
            leaves = {path[5:]: q for path, q in queues[rm.rm_id]["default"].items() if path != "root"}
            total = p["total"].get("vcore", 0) or 1
            usage = " ".join(f"{name}:{100 * q['allocated'].get('vcore', 0) // total}%" for name, q in leaves.items())
            line.append(f"| {rm.rm_id}: nodes={p['nodes']} apps={p['applications']} "
                        f"running={p['allocations']} pending_vcore={pending // 1000} {usage}")
        print("  ".join(line), flush=True, file=sys.stdout)
