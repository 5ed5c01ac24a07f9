"""Build input log entries in code, speaking only the wire contract (JSON bodies).

Used by tests, golden traces, benchmarks and simulated RMs:

    log = LogBuilder("rm-1")
    entries = [log.register(CONFIG), log.nodes(node("n1", vcore=8000, memory=8 * GB)), ...]
"""

from __future__ import annotations

from typing import Any

import msgspec

from ykbus.core.entries import Entry

GB = 1_000_000_000
START_TS = 1_700_000_000_000_000_000
_enc = msgspec.json.Encoder()


def resource(**quantities: int) -> dict[str, Any]:
    return {"resources": {k: {"value": v} for k, v in quantities.items()}}


def node(node_id: str, action: str = "CREATE", attributes: dict[str, str] | None = None,
         occupied: dict[str, int] | None = None, existing: list[dict[str, Any]] | None = None,
         **capacity: int) -> dict[str, Any]:
    out: dict[str, Any] = {"nodeID": node_id, "action": action}
    if attributes:
        out["attributes"] = attributes
    if capacity:
        out["schedulableResource"] = resource(**capacity)
    if occupied is not None:
        out["occupiedResource"] = resource(**occupied)
    if existing:
        out["existingAllocations"] = existing
    return out


def app(app_id: str, queue: str = "root.default", user: str = "user", groups: list[str] | None = None,
        partition: str = "default", **extra: Any) -> dict[str, Any]:
    return {"applicationID": app_id, "queueName": queue, "partitionName": partition,
            "ugi": {"user": user, "groups": groups or []}, **extra}


def ask(key: str, app_id: str, priority: int = 0, max_allocations: int = 1, partition: str = "default",
        preemption: tuple[bool, bool] | None = None, **quantities: int) -> dict[str, Any]:
    """An ask; `preemption`: its (allowPreemptSelf, allowPreemptOther)."""
    out: dict[str, Any] = {"allocationKey": key, "applicationID": app_id, "partitionName": partition,
                           "resourceAsk": resource(**quantities), "maxAllocations": max_allocations}
    if priority:
        out["priority"] = priority
    if preemption is not None:
        out["preemptionPolicy"] = {"allowPreemptSelf": preemption[0], "allowPreemptOther": preemption[1]}
    return out


def allocation(uuid: str, key: str, app_id: str, node_id: str, partition: str = "default",
               **quantities: int) -> dict[str, Any]:
    return {"UUID": uuid, "allocationKey": key, "applicationID": app_id, "nodeID": node_id,
            "partitionName": partition, "resourcePerAlloc": resource(**quantities)}


class LogBuilder:
    """Entries with increasing seq, and ts advancing `step_ns` per entry unless told."""

    def __init__(self, rm: str = "rm-1", start_ts: int = START_TS, step_ns: int = 1_000_000, seq: int = 0) -> None:
        self.rm = rm
        self.seq = seq
        self.ts = start_ts
        self.step_ns = step_ns

    def entry(self, kind: str, msg: dict[str, Any] | bytes, rm: str | None = None,
              advance_ns: int | None = None) -> Entry:
        self.seq += 1
        self.ts += self.step_ns if advance_ns is None else advance_ns
        body = msg if isinstance(msg, bytes) else _enc.encode(msg)
        return Entry(seq=self.seq, ts=self.ts, rm=self.rm if rm is None else rm, kind=kind, msg=body)

    def register(self, config: str = "", policy_group: str = "queues", rm: str | None = None,
                 extra: dict[str, str] | None = None) -> Entry:
        rm_id = self.rm if rm is None else rm
        return self.entry("register", {"rmID": rm_id, "version": "test", "policyGroup": policy_group,
                                       "config": config, "extraConfig": extra or {}}, rm=rm_id)

    def nodes(self, *infos: dict[str, Any], rm: str | None = None) -> Entry:
        return self.entry("node", {"rmID": self.rm if rm is None else rm, "nodes": list(infos)}, rm=rm)

    def apps(self, *apps: dict[str, Any], rm: str | None = None) -> Entry:
        return self.entry("app", {"rmID": self.rm if rm is None else rm, "new": list(apps)}, rm=rm)

    def remove_apps(self, *app_ids: str, partition: str = "default") -> Entry:
        return self.entry("app", {"rmID": self.rm, "remove": [
            {"applicationID": a, "partitionName": partition} for a in app_ids]})

    def asks(self, *asks: dict[str, Any], rm: str | None = None) -> Entry:
        return self.entry("alloc", {"rmID": self.rm if rm is None else rm, "asks": list(asks)}, rm=rm)

    def release(self, app_id: str, uuid: str = "", key: str = "", partition: str = "default",
                termination: str = "STOPPED_BY_RM") -> Entry:
        return self.entry("alloc", {"rmID": self.rm, "releases": {"allocationsToRelease": [
            {"applicationID": app_id, "UUID": uuid, "allocationKey": key, "partitionName": partition,
             "terminationType": termination}]}})

    def release_ask(self, app_id: str, key: str = "", partition: str = "default") -> Entry:
        return self.entry("alloc", {"rmID": self.rm, "releases": {"allocationAsksToRelease": [
            {"applicationID": app_id, "allocationKey": key, "partitionName": partition}]}})

    def config(self, config: str) -> Entry:
        return self.entry("config", {"rmID": self.rm, "policyGroup": "queues", "config": config})

    def unregister(self) -> Entry:
        return self.entry("unregister", {})

    def tick(self, advance_ns: int = 500_000_000) -> Entry:
        return self.entry("tick", {}, rm="", advance_ns=advance_ns)
