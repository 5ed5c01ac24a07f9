"""YuniKorn's REST objects about the scheduler rather than one queue, node or application:
the configuration (YAML and Go's JSON names), `validate-conf`, placement rules, users' and
groups' usage, the health check and its consistency checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from typing import Any

import yaml

from ykbus.core.config import ConfigError, PlacementRule, SchedulerConfig, parse_config
from ykbus.core.configdump import dump_config
from ykbus.core.lifecycle import AppState
from ykbus.core.model import App
from ykbus.core.partition import Partition
from ykbus.core.registry import ResourceManager
from ykbus.rest import steps
from ykbus.rest.dao import res
from ykbus.yamlload import load_yaml

# --- the configuration --------------------------------------------------------------------------


def checksum(text: str) -> str:
    """YuniKorn's config checksum: SHA-256 of the configuration text, upper-case hex."""
    return hashlib.sha256(text.encode()).hexdigest().upper()


def config_plain(rm: ResourceManager) -> dict[str, Any]:
    """The configuration in force for `rm` as its text says it (quantities as written), with
    what YuniKorn adds: a queue with children is a parent, root holds the partition's limits,
    the checksum, the RM's extra configuration."""
    try:
        plain = load_yaml(rm.config_text)
    except (ValueError, yaml.YAMLError):
        plain = None
    if not isinstance(plain, dict) or not isinstance(plain.get("partitions"), list):  # parsed before: cannot be
        plain = dump_config(SchedulerConfig([p.config for p in rm.partitions.values()]))
    for part in plain["partitions"]:
        stack = list(part.get("queues") or [])
        for q in stack:
            if q.get("queues"):
                q["parent"] = True
                stack.extend(q["queues"])
        roots = part.get("queues") or []
        if part.get("limits") and roots:
            roots[0].setdefault("limits", part["limits"])
    return {**plain, "checksum": checksum(rm.config_text), "extra": dict(sorted(rm.extra_config.items())),
            "deadlockdetectionenabled": False, "deadlocktimeoutseconds": 60}


def config_yaml(rm: ResourceManager) -> bytes:
    return yaml.safe_dump(config_plain(rm), sort_keys=False, default_flow_style=False).encode()


# queues.yaml's keys -> the Go field names YuniKorn's JSON uses
_GO_NAMES = {
    "partitions": "Partitions", "name": "Name", "queues": "Queues", "parent": "Parent", "resources": "Resources",
    "guaranteed": "Guaranteed", "max": "Max", "maxapplications": "MaxApplications", "properties": "Properties",
    "adminacl": "AdminACL", "submitacl": "SubmitACL", "childtemplate": "ChildTemplate", "limits": "Limits",
    "limit": "Limit", "users": "Users", "groups": "Groups", "maxresources": "MaxResources",
    "placementrules": "PlacementRules", "create": "Create", "value": "Value", "filter": "Filter", "type": "Type",
    "nodesortpolicy": "NodeSortPolicy", "resourceweights": "ResourceWeights", "preemption": "Preemption",
    "enabled": "Enabled", "quotapreemptionenabled": "QuotaPreemptionEnabled",
    "reservationdelay": "ReservationDelay", "checksum": "Checksum", "extra": "Extra",
    "deadlockdetectionenabled": "DeadlockDetectionEnabled", "deadlocktimeoutseconds": "DeadlockTimeoutSeconds",
}
_QUANTITIES = {"guaranteed", "max", "maxresources"}  # keys are resource names, values quantities (strings in Go)
_FREE_MAPS = {"properties", "extra", "resourceweights"}  # keys are data


def _go_json(obj: Any, key: str = "") -> Any:
    if isinstance(obj, dict):
        if key in _QUANTITIES:
            return {k: str(v) for k, v in obj.items()}
        if key in _FREE_MAPS:
            return dict(obj)
        return {_GO_NAMES.get(k, k): _go_json(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_go_json(v, key) for v in obj]
    return obj


def config_json(rm: ResourceManager) -> dict[str, Any]:
    """The configuration as YuniKorn's JSON writes it (`Accept: application/json`): Go's field
    names; every queue has `Resources` and a `ChildTemplate`, every partition the sections
    YuniKorn always writes."""
    out = _go_json(config_plain(rm))
    for part in out["Partitions"]:
        part.setdefault("PlacementRules", [])
        part.setdefault("Limits", [])
        part.setdefault("Preemption", {})
        part.setdefault("NodeSortPolicy", {"Type": "fair"})
        part.setdefault("UserGroupResolver", {})
        for rule in part["PlacementRules"]:
            rule.pop("Create", None)  # YuniKorn leaves false out, and the reference's rule is false
            rule.setdefault("Filter", {"Type": ""})
        stack = list(part.get("Queues", []))
        while stack:
            q = stack.pop()
            q.setdefault("Resources", {})
            q.setdefault("ChildTemplate", {"Resources": {}})
            stack.extend(q.get("Queues", []))
    return out


def validate(body: bytes) -> dict[str, Any]:
    """`POST /ws/v1/validate-conf`: whether `body` (queues.yaml) would be accepted, and why not."""
    if not body.strip():
        return {"allowed": True}
    try:
        parse_config(load_yaml(body.decode("utf-8", errors="replace")))
    except (ConfigError, ValueError, yaml.YAMLError) as exc:
        return {"allowed": False, "reason": str(exc)}
    return {"allowed": True}


def _rule(r: PlacementRule) -> dict[str, Any]:
    params: dict[str, str] = {"create": "true" if r.create else "false"}
    if r.value:
        params["value"] = r.value
    out: dict[str, Any] = {"name": r.name, "parameters": params}
    if r.parent is not None:
        out["parentRule"] = _rule(r.parent)
    return out


def placement_rules(p: Partition) -> list[dict[str, Any]]:
    """RuleInfo per configured rule, then YuniKorn's own last rule, `recovery`."""
    return [_rule(r) for r in p.config.placementrules] + [{"name": "recovery",
                                                           "parameters": {"queue": "root.@recovery@"}}]


# --- users and groups -------------------------------------------------------------------------------


def _usage_tree(p: Partition, apps: list[App], limits: dict[str, tuple[int, dict[str, int]]]) -> dict[str, Any]:
    """A user's or group's ResourceUsageDAOInfo from root down to the queues its `apps` use."""
    nodes: dict[str, dict[str, Any]] = {}
    for app in sorted(apps, key=lambda a: a.id):
        for q in reversed(app.path):
            n = nodes.setdefault(q.path, {"queuePath": q.path, "resourceUsage": {}, "runningApplications": []})
            for k, v in app.allocated.items():
                n["resourceUsage"][k] = n["resourceUsage"].get(k, 0) + v
            if app.state is AppState.RUNNING:
                n["runningApplications"].append(app.id)
    for path in [path for path, n in nodes.items() if path != "root" and not any(n["resourceUsage"].values())
                 and not n["runningApplications"]]:  # YuniKorn tracks a queue while it is used
        del nodes[path]
    for path, n in nodes.items():
        n["resourceUsage"] = res(n["resourceUsage"])
        maxapps, maxres = limits.get(path, (0, {}))
        if maxres:
            n["maxResources"] = res(maxres)
        if maxapps:
            n["maxApplications"] = maxapps
        parent = path.rpartition(".")[0]
        if parent in nodes:
            nodes[parent].setdefault("children", []).append(n)
    return nodes.get("root", {"queuePath": "root"})


def _limits(p: Partition, kind: str, name: str) -> dict[str, tuple[int, dict[str, int]]]:
    out: dict[str, tuple[int, dict[str, int]]] = {}
    for q in p.queues.values():
        for lim in q.limits:
            names = lim.users if kind == "user" else lim.groups
            if name in names or "*" in names:
                out.setdefault(q.path, (lim.maxapplications, dict(lim.maxresources)))
    return out


def users(p: Partition) -> list[dict[str, Any]]:
    by_user: dict[str, list[App]] = {}
    for app in p.apps.values():
        by_user.setdefault(app.history.user, []).append(app)
    return [{"userName": u, "queues": _usage_tree(p, apps, _limits(p, "user", u))}
            for u, apps in sorted(by_user.items())]


def groups(p: Partition) -> list[dict[str, Any]]:
    """Groups are tracked only where a group limit names them (YuniKorn's)."""
    limited = {g for q in p.queues.values() for lim in q.limits for g in lim.groups}
    by_group: dict[str, list[App]] = {}
    for app in p.apps.values():
        for g in app.history.groups:
            if g in limited or "*" in limited:
                by_group.setdefault(g, []).append(app)
    return [{"groupName": g, "queues": _usage_tree(p, apps, _limits(p, "group", g))}
            for g, apps in sorted(by_group.items())]


# --- health ---------------------------------------------------------------------------------------------


def _check(name: str, description: str, bad: list[str], message: str) -> dict[str, Any]:
    return {"Name": name, "Succeeded": not bad, "Description": description,
            "DiagnosisMessage": f"{message}: [{' '.join(bad)}]"}


HEALTH_STEP = steps.STEP  # units of work (a node, an allocation) between two yields: 4,096 held the writer 11 ms (400,000 allocations)


def healthcheck(parts: list[tuple[str, Partition]]) -> dict[str, Any]:
    """SchedulerHealthDAOInfo: YuniKorn's checks, on the records as they are now."""
    return steps.run(health_steps(parts))


async def healthcheck_sliced(parts: list[tuple[str, Partition]]) -> dict[str, Any]:
    """The same checks, letting the event loop run between slices of HEALTH_STEP units of
    work (the service runs it in the background, as YuniKorn does every 30 s)."""
    return await steps.run_sliced(health_steps(parts))


def health_steps(parts: list[tuple[str, Partition]]) -> Generator[None, None, dict[str, Any]]:
    """The checks, yielding after each HEALTH_STEP units of work (a node, an allocation):
    each node is checked whole between two yields; an allocation that left its application
    meanwhile is not an orphan."""
    neg_parts, neg_nodes, bad_totals, bad_nodes, orphans_node, orphans_app = [], [], [], [], [], []
    reserved = nodes = work = 0
    for _rm, p in parts:
        if any(v < 0 for v in p.total.values()):
            neg_parts.append(p.name)
        total: dict[str, int] = {}  # in one go: nodes come and go between slices
        for n in p.nodes.values():
            for k, v in n.capacity.items():
                total[k] = total.get(k, 0) + v
        if {k: v for k, v in total.items() if v} != {k: v for k, v in p.total.items() if v}:
            bad_totals.append(p.name)
        booked = p.allocations.get
        for n in list(p.nodes.values()):
            if work >= HEALTH_STEP:
                work = 0
                yield None
            if p.nodes.get(n.id) is not n:
                continue  # removed meanwhile
            work += 1 + len(n.allocations)
            nodes += 1
            reserved += n.reserved is not None
            if any(v < 0 for r in (n.capacity, n.occupied, n.free) for v in r.values()):
                neg_nodes.append(n.id)
            used: dict[str, int] = {}  # what its allocations hold, in one pass over them
            for a in n.allocations.values():
                if booked(a.uuid) is not a:
                    orphans_node.append(a.uuid)
                for k, v in a.resource.items():
                    used[k] = used.get(k, 0) + v
            for k, cap in n.capacity.items():
                if cap != used.get(k, 0) + n.occupied.get(k, 0) + n.free.get(k, 0):
                    bad_nodes.append(n.id)
                    break
        for app in list(p.apps.values()):
            held = list(app.allocations.values())
            for i in range(0, len(held), HEALTH_STEP):
                if work >= HEALTH_STEP:
                    work = 0
                    yield None
                chunk = held[i:i + HEALTH_STEP]
                work += len(chunk)
                orphans_app += [a.uuid for a in chunk if booked(a.uuid) is not a and app.allocations.get(a.uuid) is a]
    checks = [
        _check("Scheduling errors", "Check for scheduling error entries in metrics", [],
               "There were 0 scheduling errors logged in the metrics"),
        _check("Failed nodes", "Check for failed nodes entries in metrics", [],
               "There were 0 failed nodes logged in the metrics"),
        _check("Negative resources", "Check for negative resources in the partitions", neg_parts,
               "Partitions with negative resources"),
        _check("Negative resources", "Check for negative resources in the nodes", neg_nodes,
               "Nodes with negative resources"),
        _check("Consistency of data", "Check if total partition resource == sum of the node resources from the partition",
               bad_totals, "Partitions with inconsistent data"),
        _check("Consistency of data",
               "Check if node total resource = allocated resource + occupied resource + available resource",
               bad_nodes, "Nodes with inconsistent data"),
        {"Name": "Reservation check", "Succeeded": True,
         "Description": "Check the reservation nr compared to the number of nodes",
         "DiagnosisMessage": f"Reservation/node nr ratio: [{(reserved / nodes if nodes else 0):f}]"},
        _check("Orphan allocation on node check", "Check if there are orphan allocations on the nodes", orphans_node,
               "Orphan allocations"),
        _check("Orphan allocation on app check", "Check if there are orphan allocations on the applications",
               orphans_app, "OrphanAllocations"),
    ]
    for c in checks[:2]:  # their messages count, not list
        c["DiagnosisMessage"] = c["DiagnosisMessage"].rsplit(": [", 1)[0]
    return {"Healthy": all(c["Succeeded"] for c in checks), "HealthChecks": checks}
