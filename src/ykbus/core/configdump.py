"""The queue configuration written back as YuniKorn's queues.yaml reads it: `dump_config`
is the inverse of `parse_config` (core/config.py; tests/property/test_config_roundtrip.py)."""

from __future__ import annotations

from typing import Any

from ykbus.core.config import LimitConfig, NodeSortConfig, PlacementRule, QueueConfig, SchedulerConfig


def _quantities(res: dict[str, int]) -> dict[str, int | str]:
    """Configured quantities as YuniKorn writes them: vcore in milli-cores (`500m`)."""
    return {k: f"{v}m" if k == "vcore" else v for k, v in res.items()}


def _resources_obj(guaranteed: dict[str, int], maximum: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if guaranteed:
        out["guaranteed"] = _quantities(guaranteed)
    if maximum:
        out["max"] = _quantities(maximum)
    return out


def _dump_queue(q: QueueConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"name": q.name}
    if q.parent and not q.queues:
        out["parent"] = True
    if res := _resources_obj(q.guaranteed, q.max):
        out["resources"] = res
    if q.maxapplications:
        out["maxapplications"] = q.maxapplications
    if q.properties:
        out["properties"] = dict(q.properties)
    if q.submitacl is not None:
        out["submitacl"] = q.submitacl.text
    if q.adminacl is not None:
        out["adminacl"] = q.adminacl.text
    if q.limits:
        out["limits"] = [_dump_limit(lim) for lim in q.limits]
    if q.childtemplate is not None:
        t = q.childtemplate
        tpl: dict[str, Any] = {}
        if t.maxapplications:
            tpl["maxapplications"] = t.maxapplications
        if res := _resources_obj(t.guaranteed, t.max):
            tpl["resources"] = res
        if t.properties:
            tpl["properties"] = dict(t.properties)
        out["childtemplate"] = tpl
    if q.queues:
        out["queues"] = [_dump_queue(c) for c in q.queues]
    return out


def _dump_limit(lim: LimitConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"limit": lim.limit}
    if lim.users:
        out["users"] = list(lim.users)
    if lim.groups:
        out["groups"] = list(lim.groups)
    if lim.maxresources:
        out["maxresources"] = _quantities(lim.maxresources)
    if lim.maxapplications:
        out["maxapplications"] = lim.maxapplications
    return out


def _dump_rule(r: PlacementRule) -> dict[str, Any]:
    out: dict[str, Any] = {"name": r.name}
    if r.create:
        out["create"] = True
    if r.value:
        out["value"] = r.value
    if r.parent is not None:
        out["parent"] = _dump_rule(r.parent)
    f = r.filter
    if f.type != "allow" or f.users or f.groups:
        out["filter"] = {"type": f.type, **({"users": list(f.users)} if f.users else {}),
                         **({"groups": list(f.groups)} if f.groups else {})}
    return out


def dump_config(config: SchedulerConfig) -> dict[str, Any]:
    """The plain object (YAML-ready) of a parsed configuration: `parse_config` of it gives an
    equal configuration back (tests/property/test_config_roundtrip.py)."""
    parts = []
    for p in config.partitions:
        out: dict[str, Any] = {"name": p.name, "queues": [_dump_queue(p.root)]}
        if p.placementrules:
            out["placementrules"] = [_dump_rule(r) for r in p.placementrules]
        ns = p.nodesortpolicy
        if ns != NodeSortConfig():
            out["nodesortpolicy"] = {"type": ns.type.value, "resourceweights": dict(ns.resourceweights)}
        if p.preemption:
            out["preemption"] = dict(p.preemption)
        if p.reservationdelay_ms != 2000:
            out["reservationdelay"] = f"{p.reservationdelay_ms}ms"
        if p.topology.levels:
            out["topology"] = {"levels": list(p.topology.levels)}
        parts.append(out)
    return {"partitions": parts}
