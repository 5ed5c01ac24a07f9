"""`ykbus tyjob controller`: the TYJob controller's IO around `controller.Controller`.

It connects to NATS, registers as an RM (default id `tyjob`) with the nodes of CLUSTER.yaml,
watches the job specs in the KV bucket, and every 50 ms lets pods' runs end, sends what the
controller decided, and saves what changed (each job's status and run) back to the
bucket. Restarted, it reads the saved runs and follows the recovery protocol of YuniKorn's resilience design:
register, recover the applications, then the nodes with the allocations its pods and
placeholders hold, then send the asks still waiting; jobs go on where they were.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
from nats.errors import Error as NatsError

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.bus.leadership import Lease, identity, lease_holder
from ykbus.bus.local import connect
from ykbus.si import messages as m
from ykbus.tyjob import store
from ykbus.tyjob.cluster import ClusterError, ClusterNode, attribute_doubts, load_cluster
from ykbus.tyjob.controller import QUEUES, Controller
from ykbus.tyjob.manifest import check_job

log = logging.getLogger("ykbus.tyjob")
TICK_S = 0.05
SAVE_S = 0.2
SAVE_AT_STOP_S = 1.5  # the last save when stopped; a container's stop (SIGTERM) is done within 2 s
CLAIM_KEY = "controller"  # the key of the bucket whose holder is the one controller of the server
CLAIM_TTL_S = 2.0  # a controller killed is taken over this long after its last renewal


class OtherController(Exception):
    """Another controller serves this server's TYJobs (it renews its claim): one does."""


class ControllerService(ResourceManagerCallback):
    def __init__(self, url: str, cluster_path: str, rm_id: str = "tyjob", nats_options: dict | None = None,
                 notify: Callable[[str], None] | None = None) -> None:
        """`notify`: told each verdict on an edit of the cluster file, in words (`ykbus up`
        prints them); they are logged either way."""
        self.url, self.cluster_path, self.rm_id = url, cluster_path, rm_id
        self.notify = notify
        self._cluster_refused = ""  # why the cluster file in its last form was not applied
        self.nats_options = nats_options or {}
        self.nodes: dict[str, ClusterNode] = {}
        self.ctl = Controller()
        self.client: ResourceManagerClient | None = None
        self.kv: Any = None
        self.ready = anyio.Event()
        self._cluster_mtime = 0.0

    # --- the core's answers --------------------------------------------------------------

    def update_allocation(self, response: m.AllocationResponse) -> None:
        self.ctl.on_allocations(response, time.time())

    def update_application(self, response: m.ApplicationResponse) -> None:
        self.ctl.on_applications(response, time.time())

    def update_container_scheduling_state(self, states: list[m.UpdateContainerSchedulingStateRequest]) -> None:
        self.ctl.on_states(states)

    # --- running -------------------------------------------------------------------------

    async def run(self) -> None:
        self.nodes = load_cluster(self.cluster_path)
        self._cluster_mtime = os.path.getmtime(self.cluster_path)
        self.ctl.capacities = {n.name: n.capacity for n in self.nodes.values()}
        self.ctl.attributes = {n.name: n.attributes for n in self.nodes.values()}
        nc = await connect(self.url, **self.nats_options)
        claim: Lease | None = None
        try:
            self.kv = await store.bucket(nc)
            claim = await self._claim()
            runs = []
            for key in await store.keys(nc, self.kv, "status."):
                data = await store.get_value(self.kv, key)
                if data is None:
                    continue
                try:
                    runs.append(store.decode_saved(data)[1])
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    log.warning("unreadable saved TYJob run: skipped", extra={"fields": {"key": key,
                                                                                      "error": str(exc)[:200]}})
            apps, held = self.ctl.recover(runs)
            nodes = [n.info(existing=held.get(n.name)) for n in self.nodes.values()]
            async with NatsScheduler(self.url, nats_options=self.nats_options) as api:
                self.client = ResourceManagerClient(api, self.rm_id, config=QUEUES, callback=self,
                                                    policy_group=self.rm_id)
                await self.client.start(apps=apps, nodes=nodes)
                self.ctl.resend()
                log.info("tyjob controller running", extra={"fields": {"rm": self.rm_id, "nodes": len(nodes),
                                                                       "recovered": len(runs)}})
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_specs)
                    tg.start_soon(self._loop)
                    tg.start_soon(self._watch_cluster)
                    tg.start_soon(self._hold, claim)
        finally:  # stopped (cancelled) too: the runs' last states saved, within a bound (SIGTERM: 2 s)
            with anyio.move_on_after(SAVE_AT_STOP_S, shield=True):
                if claim is not None and not claim.lost:
                    try:
                        await self._save()
                    except Exception as exc:  # NATS slow or gone at the stop: the saves before it stand (every SAVE_S)
                        log.warning("tyjob controller: the last save at the stop failed: %s", exc or type(exc).__name__)
                    await claim.release()  # the next controller starts at once
                await nc.close()

    async def _claim(self) -> Lease:
        """This controller's claim on the server's TYJobs, as a core's lease (bus/leadership.py):
        taken if no controller holds it, or once its holder stopped renewing (killed: within
        its TTL); `OtherController` as soon as its holder is seen renewing it."""
        claim = Lease(self.kv, identity(self.rm_id, CLAIM_TTL_S), CLAIM_TTL_S, key=CLAIM_KEY)
        first: int | None = None
        while not await claim.try_acquire():
            holder = await store.get_entry(self.kv, CLAIM_KEY)
            if holder is not None:
                if first is not None and holder.revision != first:
                    named = lease_holder(holder.value)
                    raise OtherController(
                        f"another TYJob controller serves the TYJobs of this server (rm {named.get('id')!r}, pid "
                        f"{named.get('pid')} on {named.get('host')}): one controller does; stop it first, or "
                        "run this one against another NATS server")
                first = holder.revision if first is None else first
            await anyio.sleep(0.1)
        return claim

    async def _hold(self, claim: Lease) -> None:
        """Renew the claim; another controller took it (this one stalled past its TTL): stop,
        saving nothing more (the runs are the other's now)."""
        await claim.hold()
        raise OtherController("another TYJob controller took over this server's TYJobs (this one stopped renewing "
                              "its claim for longer than its TTL): stopped")

    async def _watch_specs(self) -> None:
        watcher = await self.kv.watch("spec.>")
        seen: set[str] = set()
        initial = True
        async for entry in watcher:
            if entry is None:  # the values stored before the watch began are all in
                if initial:
                    initial = False
                    for key in [k for k in self.ctl.runs if k not in seen]:
                        self.ctl.delete(key, time.time())  # deleted while the controller was away
                    self.ready.set()
                continue
            key = entry.key[len("spec."):]
            if entry.operation in ("DEL", "PURGE") or not entry.value:
                self.ctl.delete(key, time.time())
                continue
            seen.add(key)
            try:
                job = store.decode_job(entry.value)
            except Exception as exc:  # noqa: BLE001 - a hostile or foreign value: logged, skipped
                log.warning("unreadable TYJob spec", extra={"fields": {"key": entry.key, "error": str(exc)[:200]}})
                continue
            problems = check_job(job)
            if job.key != key or problems:
                log.warning("TYJob spec refused", extra={"fields": {
                    "key": entry.key, "error": "; ".join(problems)[:500] or "stored under another job's key"}})
                continue
            self.ctl.apply(job, entry.revision, time.time())

    async def _loop(self) -> None:
        last_save = 0.0
        while True:
            self.ctl.tick(time.time())
            await self._flush()
            now = time.monotonic()
            if now - last_save >= SAVE_S:
                try:
                    await self._save()
                    last_save = now
                except (NatsError, TimeoutError) as exc:  # NATS stalled a moment: saved at the next tick
                    log.warning("tyjob controller: saving the runs' states failed, trying again",
                                extra={"fields": {"error": repr(exc)}})
            await anyio.sleep(TICK_S)

    async def _flush(self) -> None:
        assert self.client is not None
        out = self.ctl.drain()
        if not out:
            return
        api, rm = self.client.api, self.rm_id
        if out.apps:
            await api.update_application(m.ApplicationRequest(new=out.apps, rmID=rm))
        if out.asks or out.releases or out.ask_releases:
            releases = m.AllocationReleasesRequest(allocationsToRelease=out.releases,
                                                   allocationAsksToRelease=out.ask_releases) \
                if out.releases or out.ask_releases else None
            await api.update_allocation(m.AllocationRequest(asks=out.asks, releases=releases, rmID=rm))
        if out.removes:
            await self.client.remove_applications(out.removes)

    async def _save(self) -> None:
        if self.kv is None:
            return
        changed = sorted(self.ctl.take_changed())
        for i, key in enumerate(changed):
            run = self.ctl.runs.get(key)
            if run is None:
                try:
                    await self.kv.delete(store.status_key(key))
                except Exception:  # noqa: BLE001 - already gone
                    pass
                continue
            try:
                await self.kv.put(store.status_key(key), store.encode_saved(run))
            except BaseException:
                self.ctl.unsaved(changed[i:])
                raise

    def _say(self, text: str, warning: bool = False) -> None:
        """A verdict on the cluster file: to the operator if a listener hears verdicts (the
        log keeps it below the warnings `ykbus up` shows), else to the log."""
        (log.warning if warning and self.notify is None else log.info)(text, extra={"fields": {"file": self.cluster_path}})
        if self.notify is not None:
            self.notify(text)

    async def _watch_cluster(self) -> None:
        """CLUSTER.yaml read again when it changes: nodes added, decommissioned, resized."""
        assert self.client is not None
        while True:
            await anyio.sleep(1.0)
            try:
                mtime = os.path.getmtime(self.cluster_path)
                if mtime == self._cluster_mtime:
                    continue
                self._cluster_mtime = mtime
                nodes = load_cluster(self.cluster_path)
            except (OSError, ClusterError) as exc:
                if str(exc) != self._cluster_refused:
                    self._cluster_refused = str(exc)
                    self._say(f"cluster file {self.cluster_path} not applied, its nodes stay as they were: "
                              f"{str(exc)[:500]}", warning=True)
                continue
            added = [n.info() for name, n in nodes.items() if name not in self.nodes]
            gone = [m.NodeInfo(nodeID=name, action=m.ActionFromRM.DECOMISSION)
                    for name in self.nodes if name not in nodes]
            resized = [n.info(m.ActionFromRM.UPDATE) for name, n in nodes.items()
                       if name in self.nodes and n != self.nodes[name]]
            self.nodes = nodes
            if added or gone or resized:
                await self.client.add_nodes(added + gone + resized)
            counts = [f"{len(c)} node{'s' if len(c) != 1 else ''} {what}" for c, what in
                      ((added, "added"), (gone, "decommissioned"), (resized, "resized")) if c]
            if self._cluster_refused or counts:
                verdict = "back in force" if self._cluster_refused else "applied"
                self._cluster_refused = ""
                doubts = attribute_doubts(nodes)
                self._say(f"cluster file {self.cluster_path} {verdict}" + (f": {', '.join(counts)}" if counts else "")
                          + (f"; {'; '.join(doubts[:5])}" if doubts else ""), warning=bool(doubts))
            self.ctl.set_capacities({n.name: n.capacity for n in nodes.values()}, time.time(),
                                    {n.name: n.attributes for n in nodes.values()})
