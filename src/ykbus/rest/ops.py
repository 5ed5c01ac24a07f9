"""YuniKorn's REST objects about the scheduler rather than one queue, node or application:
the configuration (YAML and Go's JSON names), `validate-conf`, placement rules, users' and
groups' usage, the health check and its consistency checks.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final

import yaml

from ykbus.core.config import ConfigError, LimitConfig, PlacementRule, SchedulerConfig, parse_config
from ykbus.core.configdump import dump_config
from ykbus.core.lifecycle import AppState
from ykbus.core.model import App, Queue
from ykbus.core.partition import Partition
from ykbus.core.registry import ResourceManager
from ykbus.core.usergroups import app_group, group_limit, user_limit
from ykbus.rest import steps
from ykbus.rest.dao import res
from ykbus.yamlload import load_yaml

# --- the configuration --------------------------------------------------------------------------


def checksum(text: str) -> str:
    """YuniKorn's config checksum: SHA-256 of the configuration text, upper-case hex."""
    return hashlib.sha256(text.encode()).hexdigest().upper()


# YuniKorn's SchedulerConfig as it dumps it (yunikorn-core pkg/common/configs/config.go):
# per kind of object, its fields in Go's order: (YAML key, JSON name, kind of value). A kind
# in _KINDS is a struct, "[kind]" a list of them, "quantities" a map of quantities (strings
# in Go: `vcore: "10"`), "strings" a map of strings (properties), "map" a map written as is,
# "scalar" a value. `omitempty` leaves out
# false, 0, "" and empty lists and maps in both dumps; a struct is left out of the YAML when
# nothing of it is written, and is always in the JSON (Go's omitempty keeps structs).
_KINDS: dict[str, list[tuple[str, str, str]]] = {
    "scheduler": [("partitions", "Partitions", "[partition]"), ("checksum", "Checksum", "scalar"),
                  ("extra", "Extra", "map"), ("deadlockdetectionenabled", "DeadlockDetectionEnabled", "scalar"),
                  ("deadlocktimeoutseconds", "DeadlockTimeoutSeconds", "scalar")],
    "partition": [("name", "Name", "scalar"), ("queues", "Queues", "[queue]"),
                  ("placementrules", "PlacementRules", "[rule]"), ("limits", "Limits", "[limit]"),
                  ("preemption", "Preemption", "preemption"), ("nodesortpolicy", "NodeSortPolicy", "nodesort"),
                  ("statedumpfilepath", "StateDumpFilePath", "scalar"),
                  ("usergroupresolver", "UserGroupResolver", "usergroupresolver"),
                  ("reservationdelay", "ReservationDelay", "scalar")],  # ykbus's own (docs/configuration.md)
    "queue": [("name", "Name", "scalar"), ("parent", "Parent", "scalar"), ("resources", "Resources", "resources"),
              ("maxapplications", "MaxApplications", "scalar"), ("properties", "Properties", "strings"),
              ("adminacl", "AdminACL", "scalar"), ("submitacl", "SubmitACL", "scalar"),
              ("childtemplate", "ChildTemplate", "template"), ("queues", "Queues", "[queue]"),
              ("limits", "Limits", "[limit]")],
    "template": [("maxapplications", "MaxApplications", "scalar"), ("properties", "Properties", "strings"),
                 ("resources", "Resources", "resources")],
    "resources": [("guaranteed", "Guaranteed", "quantities"), ("max", "Max", "quantities")],
    "rule": [("name", "Name", "scalar"), ("create", "Create", "scalar"), ("filter", "Filter", "filter"),
             ("parent", "Parent", "rule"), ("value", "Value", "scalar")],
    "filter": [("type", "Type", "scalar"), ("users", "Users", "scalar"), ("groups", "Groups", "scalar")],
    "limit": [("limit", "Limit", "scalar"), ("users", "Users", "scalar"), ("groups", "Groups", "scalar"),
              ("maxresources", "MaxResources", "quantities"), ("maxapplications", "MaxApplications", "scalar")],
    "nodesort": [("type", "Type", "scalar"), ("resourceweights", "ResourceWeights", "map")],
    "preemption": [("enabled", "Enabled", "scalar"), ("quotapreemptionenabled", "QuotaPreemptionEnabled", "scalar")],
    "usergroupresolver": [],
}
_KEPT = {("scheduler", "partitions"), ("scheduler", "extra"), ("scheduler", "deadlockdetectionenabled"),
         ("scheduler", "deadlocktimeoutseconds"), ("partition", "name"), ("partition", "queues"),
         ("queue", "name"), ("rule", "name"), ("filter", "type"), ("limit", "limit"),
         ("nodesort", "type")}  # fields without omitempty: written even when empty
_SCALAR_FIELDS = {"Type"}  # a struct's string field Go writes "" (`Filter: {Type: ""}`)
# keys of ykbus's own that YuniKorn's dump of the configuration leaves out (docs/operations.md):
# a partition's `topology` (docs/topology.md)
_YKBUS_ONLY = {("partition", "topology")}


def _empty(v: Any) -> bool:
    return v is None or v is False or (v == 0 and not isinstance(v, bool)) or v == "" or v == {} or v == []


def _go_string(v: Any) -> str:
    """A YAML scalar as Go's YAML reads it into a string: `true`, `300`, `1.5`, "" for null."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _go_number(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _dump(obj: Any, kind: str, json_names: bool) -> dict[str, Any]:
    """`obj` (a mapping of the queues.yaml text) as YuniKorn dumps the struct `kind`."""
    raw = obj if isinstance(obj, dict) else {}
    out: dict[str, Any] = {}
    for key, go, what in _KINDS[kind]:
        v = raw.get(key)
        name = go if json_names else key
        if what.startswith("["):
            items = [_dump(x, what[1:-1], json_names) for x in v] if isinstance(v, list) else []
            if items or (kind, key) in _KEPT:
                out[name] = items
        elif what in _KINDS:
            if v is None and (kind, key) == ("rule", "parent"):  # a pointer: nil is left out
                continue
            sub = _dump(v, what, json_names)
            if json_names or any(not _empty(x) for x in sub.values()):
                out[name] = sub
        elif what == "quantities":
            if isinstance(v, dict) and v:
                out[name] = {k: str(_go_number(q)) for k, q in v.items()}
        elif what == "strings":  # Go's map[string]string (properties): every value as its text
            if isinstance(v, dict) and v:
                out[name] = {k: _go_string(x) for k, x in v.items()}
        elif what == "map":
            if isinstance(v, dict) and v:
                out[name] = {k: _go_number(x) for k, x in v.items()}
            elif (kind, key) in _KEPT:
                out[name] = {}
        elif not _empty(v) or (kind, key) in _KEPT:
            out[name] = _go_number(v) if v is not None else ("" if go in _SCALAR_FIELDS else v)
    for key, v in raw.items():  # keys YuniKorn does not have: kept, last, bar ykbus's own
        if key not in {k for k, _, _ in _KINDS[kind]} and (kind, key) not in _YKBUS_ONLY and not _empty(v):
            out[key] = v
    return out


def config_plain(rm: ResourceManager) -> dict[str, Any]:
    """The configuration in force for `rm` as its text says it (quantities as written), with
    what YuniKorn adds: a queue with children is a parent, root holds the partition's limits,
    the checksum, the RM's extra configuration."""
    try:
        plain = load_yaml(rm.config_text)
    except (ValueError, yaml.YAMLError):
        plain = None
    if not isinstance(plain, dict) or not isinstance(plain.get("partitions"), list):  # parsed before: cannot be
        plain = dump_config(SchedulerConfig([p.records.config for p in rm.partitions.values()]))
    for part in plain["partitions"]:
        stack = list(part.get("queues") or [])
        for q in stack:
            if q.get("queues"):
                q["parent"] = True
                stack.extend(q["queues"])
        roots = part.get("queues") or []
        if part.get("limits") and roots:
            roots[0].setdefault("limits", copy.deepcopy(part["limits"]))
    return {**plain, "checksum": checksum(rm.config_text), "extra": dict(sorted(rm.extra_config.items())),
            "deadlockdetectionenabled": False, "deadlocktimeoutseconds": 60}


def config_yaml(rm: ResourceManager) -> bytes:
    """`GET /ws/v1/config`: the configuration as YuniKorn's YAML dump writes it (go-yaml v3)."""
    return go_yaml(_dump(config_plain(rm), "scheduler", json_names=False)).encode()


def go_yaml(obj: dict[str, Any]) -> str:
    """A mapping as go-yaml v3 writes it (the indent 4 YuniKorn's dump uses): a nested block
    at the next multiple of 4 columns, the first line of a list item's mapping after its `- `,
    strings quoted only when they must be (double quotes when plain text would read as
    another type: `"10"`; single quotes otherwise: `'*'`)."""
    lines: list[str] = []

    def block(value: Any, indent: int, in_item: bool) -> None:
        at = indent + 2 if in_item else 4 * ((indent + 4) // 4)
        if isinstance(value, dict):
            mapping(value, at, first_prefix="")
        else:
            for item in value:
                if isinstance(item, dict) and item:
                    mapping(item, at + 2, first_prefix=" " * at + "- ")
                else:
                    lines.append(" " * at + "- " + _scalar(item))

    def mapping(d: dict[str, Any], indent: int, first_prefix: str) -> None:
        for i, (k, v) in enumerate(d.items()):
            head = (first_prefix if i == 0 and first_prefix else " " * indent) + _scalar(k) + ":"
            if isinstance(v, (dict, list)) and v:
                lines.append(head)
                block(v, indent, in_item=False)
            else:
                lines.append(head + " " + (("{}" if isinstance(v, dict) else "[]") if isinstance(v, (dict, list))
                                           else _scalar(v)))

    mapping(obj, 0, first_prefix="")
    return "\n".join(lines) + "\n"


_RESOLVER = yaml.resolver.Resolver()
_STR_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:yaml")  # (the second: `*`, `&`, `!`, text to go-yaml)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(_go_number(v))
    text = str(v)
    plain = yaml.safe_dump(text, default_style=None, width=1_000_000).removesuffix("\n...\n").rstrip("\n")
    if plain == text:
        return text
    if text == "" or _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) not in _STR_TAGS:  # plain, it would read
        # as a number, a bool or null
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "'" + text.replace("'", "''") + "'"


def config_json(rm: ResourceManager) -> dict[str, Any]:
    """The configuration as YuniKorn's JSON writes it (`Accept: application/json`): Go's field
    names, quantities as strings, and the structs Go always writes (`Resources`,
    `ChildTemplate`, a rule's `Filter`, a partition's `Preemption`, `NodeSortPolicy` and
    `UserGroupResolver`)."""
    return _dump(config_plain(rm), "scheduler", json_names=True)


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


PROVIDED: Final = {"name": "provided", "parameters": {"create": "false"}}  # the rule in force when none is configured
RECOVERY: Final = {"name": "recovery", "parameters": {"queue": "root.@recovery@"}}  # YuniKorn's own, always last


def placement_rules(p: Partition) -> list[dict[str, Any]]:
    """RuleInfo per configured rule (none configured: `provided`, which does what a
    partition without rules does: docs/configuration.md), then YuniKorn's own `recovery`."""
    rules = p.records.config.placementrules
    return ([_rule(r) for r in rules] if rules else [dict(PROVIDED)]) + [dict(RECOVERY)]


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


def _limits(p: Partition, lookup: Callable[[Queue, str], LimitConfig | None], name: str) -> dict[str, tuple[int, dict[str, int]]]:
    """(maxapplications, maxresources) of the limit `lookup` finds for `name` on each queue."""
    out: dict[str, tuple[int, dict[str, int]]] = {}
    for q in p.queues.values():
        lim = lookup(q, name) if q.limits else None
        if lim is not None:
            out[q.path] = (lim.maxapplications, dict(lim.maxresources))
    return out


def users(p: Partition) -> list[dict[str, Any]]:
    by_user: dict[str, list[App]] = {}
    for app in p.apps.values():
        by_user.setdefault(app.history.user, []).append(app)
    return [{"userName": u, "queues": _usage_tree(p, apps, _limits(p, user_limit, u))}
            for u, apps in sorted(by_user.items())]


def groups(p: Partition) -> list[dict[str, Any]]:
    """Each group the group limits count an application under (`app_group`: one an
    application, `*` for those a `*` group limit takes together), as YuniKorn tracks them."""
    by_group: dict[str, list[App]] = {}
    for app in p.apps.values():
        g = app_group(app.path, app.groups)
        if g:
            by_group.setdefault(g, []).append(app)
    return [{"groupName": g, "queues": _usage_tree(p, apps, _limits(p, group_limit, g))}
            for g, apps in sorted(by_group.items())]


# --- health ---------------------------------------------------------------------------------------------


def _check(name: str, description: str, bad: list[str], message: str) -> dict[str, Any]:
    return {"Name": name, "Succeeded": not bad, "Description": description,
            "DiagnosisMessage": f"{message}: [{' '.join(bad)}]"}


HEALTH_STEP = steps.STEP  # units of work (a node, an allocation) between two yields: 4,096 held the writer 11 ms (400,000 allocations)


def healthcheck(parts: list[tuple[str, Partition]]) -> dict[str, Any]:
    """SchedulerHealthDAOInfo: YuniKorn's checks, on the records as they are now."""
    return steps.run(health_steps(parts))


async def healthcheck_sliced(parts: list[tuple[str, Partition]],
                             pause: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """The same checks, letting the event loop run between slices of HEALTH_STEP units of
    work (the service runs it in the background, as YuniKorn does every 30 s); `pause`:
    awaited before each slice (`steps.run_sliced`)."""
    return await steps.run_sliced(health_steps(parts), pause)


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
