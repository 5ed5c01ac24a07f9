"""The queue configuration: YuniKorn's queues.yaml, parsed and validated completely.

Input is the plain object a YAML loader produced (the shell loads the YAML; the core never
imports a YAML library). `parse_config()` returns a `SchedulerConfig` or raises
`ConfigError` listing *every* problem with its path (`partitions[0].queues[0].queues[1].name:
contains a dot`). Unknown keys are errors, unlike on the wire.

Rules, as YuniKorn applies them:
1. Queue names match `[a-zA-Z0-9_:#/@-]{1,64}`: a dot is the hierarchy separator and is never
   allowed in a configured name. Names are case-insensitive and stored lower-cased; a
   fully-qualified name must be unique.
2. Each partition has one `root` queue. A configuration whose top-level queues are not
   exactly `[root]` gets an implicit root above them, as YuniKorn does.
3. `root` takes no resources; `guaranteed` may not exceed `max`; a child's `max` may not
   exceed its parent's; a child's `guaranteed` may not exceed the parent's `max`; the sum of
   the children's `guaranteed` may not exceed the parent's `guaranteed`; a child's
   `maxapplications` may not exceed its parent's.
4. Quantities are integers as YuniKorn parses them: `vcore: 10` is 10000 milli-cores,
   `vcore: 500m` is 500; other resources take the SI (`k`, `M`, `G`, ...) and binary (`Ki`,
   `Mi`, `Gi`, ...) suffixes; a decimal is accepted only when the result is a whole number.
6. ACLs (`submitacl`, `adminacl`) follow YuniKorn's grammar (its Scheduler Configuration design): `*`, or a comma-separated
   user list, optionally a single space and a comma-separated group list; the empty string
   and a single space allow nobody. More than one space, or a name that is not a POSIX-like
   user or group name, is an error.
7. `limits` (on any queue; a partition's `limits` are the root queue's) need users or groups
   and set `maxresources` (not all zero) or `maxapplications` (> 0), neither above the
   queue's own limits; a user or group may appear in one limit per queue.
8. `childtemplate` (parent queues only) gives unmanaged children `maxapplications`,
   `resources` and `properties`; its resources may not exceed the queue's max.
9. `topology` (ykbus's own key on a partition, docs/topology.md): `levels`, the node
   attributes that name its topology domains, broadest first: each a valid attribute name
   (`[prefix/]name` as a Kubernetes label key), none repeated, at most
   `limits.MAX_TOPOLOGY_LEVELS`. No levels (the default): no topology.
5. Known properties with a fixed set of values (`application.sort.policy`,
   `application.sort.priority`, `priority.policy`) reject unknown values;
   `priority.offset` that does not parse as an int32 counts as 0 (YuniKorn's priority scheduling design).
10. Runtime properties (`ykbus.io/runtime.*`, `preemption.minruntime`): core/runtimeprops.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec
import re2  # type: ignore[import-untyped]

from ykbus import limits
from ykbus.core.acl import WILDCARD, Acl, parse_acl
from ykbus.core.limitnest import check_nested_limits
from ykbus.core.queueprops import (
    _ENUM_PROPERTIES,
    PROP_PREEMPTION_DELAY,
    PROP_PRIORITY_OFFSET,
    PROP_QUOTA_DELAY,
    NodeSortPolicy,
)
from ykbus.core.resources import fmt_quantity as fq
from ykbus.core.resources import parse_quantity
from ykbus.core.runtimeprops import RUNTIME_PROPERTIES, check_runtimes, parse_duration_ms

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")
# YuniKorn's UserRegExp and GroupRegExp: the names a limit may give (Kubernetes' `system:serviceaccount:ns:sa`)
LIMIT_USER = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$")
LIMIT_GROUP = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:_.-]*$")
DEFAULT_PARTITION = "default"
ROOT = "root"
RECOVERY_NAME = "@recovery@"  # root.@recovery@: YuniKorn's queue for recovered applications


class ConfigError(Exception):
    """A configuration that does not validate; `errors` holds every problem with its path."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


_DURATION_PROPERTIES = (PROP_PREEMPTION_DELAY, PROP_QUOTA_DELAY, *RUNTIME_PROPERTIES)
PROPERTIES = (*_ENUM_PROPERTIES, PROP_PRIORITY_OFFSET, *_DURATION_PROPERTIES)  # every queue property ykbus reads
_PREEMPTION_KEYS = {"enabled", "quotapreemptionenabled"}


class LimitConfig(msgspec.Struct, frozen=True):
    """One entry of a queue's `limits`: who it is for and what they may use there."""

    limit: str
    users: tuple[str, ...]
    groups: tuple[str, ...]
    maxresources: dict[str, int]
    maxapplications: int


class ChildTemplate(msgspec.Struct, frozen=True):
    """What a parent gives the unmanaged queues created below it."""

    maxapplications: int = 0
    guaranteed: dict[str, int] = msgspec.field(default_factory=dict)
    max: dict[str, int] = msgspec.field(default_factory=dict)
    properties: dict[str, str] = msgspec.field(default_factory=dict)


class QueueConfig(msgspec.Struct, frozen=True):
    name: str
    parent: bool
    guaranteed: dict[str, int]
    max: dict[str, int]
    maxapplications: int
    properties: dict[str, str]
    submitacl: Acl | None
    adminacl: Acl | None
    queues: list[QueueConfig]
    limits: list[LimitConfig] = msgspec.field(default_factory=list)
    childtemplate: ChildTemplate | None = None


class RuleFilter(msgspec.Struct, frozen=True):
    """Who a placement rule applies to. A list of exactly one entry is a regular expression."""

    type: str = "allow"
    users: list[str] = msgspec.field(default_factory=list)
    groups: list[str] = msgspec.field(default_factory=list)


class PlacementRule(msgspec.Struct, frozen=True):
    name: str
    create: bool = False
    value: str = ""
    parent: PlacementRule | None = None
    filter: RuleFilter = msgspec.field(default_factory=RuleFilter)


RULE_NAMES = ("provided", "user", "fixed", "tag", "primarygroup", "secondarygroup")


class NodeSortConfig(msgspec.Struct, frozen=True):
    type: NodeSortPolicy = NodeSortPolicy.FAIR
    resourceweights: dict[str, float] = msgspec.field(
        default_factory=lambda: {"vcore": 1.0, "memory": 1.0}
    )


class TopologyConfig(msgspec.Struct, frozen=True):
    """A partition's `topology` (docs/topology.md): the node attributes that name its
    domains, broadest first (`ykbus.io/block`, `ykbus.io/rack`). No levels: no topology."""

    levels: tuple[str, ...] = ()


class PartitionConfig(msgspec.Struct, frozen=True):
    name: str
    root: QueueConfig
    nodesortpolicy: NodeSortConfig
    placementrules: list[PlacementRule] = msgspec.field(default_factory=list)
    # as configured (`enabled`, `quotapreemptionenabled`: booleans, checked); read through
    # `preemption_enabled`. (A partition's `limits` are its root queue's.)
    preemption: dict[str, Any] = msgspec.field(default_factory=dict)
    # how long an ask waits for room (log time) before it reserves a node (docs/scheduling.md)
    reservationdelay_ms: int = 2000
    # ykbus's own (docs/topology.md); not in YuniKorn's dump of the configuration
    topology: TopologyConfig = msgspec.field(default_factory=TopologyConfig)


class SchedulerConfig(msgspec.Struct, frozen=True):
    partitions: list[PartitionConfig]


DEFAULT_CONFIG_TEXT = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
"""

# --- parsing ---------------------------------------------------------------------------

_TOP_KEYS = {"partitions", "checksum"}
_PARTITION_KEYS = {
    "name", "queues", "placementrules", "limits", "nodesortpolicy", "preemption",
    "statedumpfilepath", "reservationdelay", "topology",
}
_QUEUE_KEYS = {
    "name", "parent", "resources", "maxapplications", "properties", "adminacl", "submitacl",
    "childtemplate", "queues", "limits",
}
_RESOURCE_KEYS = {"guaranteed", "max"}
_NODESORT_KEYS = {"type", "resourceweights"}
_TOPOLOGY_KEYS = {"levels"}
# a node attribute's name as a Kubernetes label key: an optional DNS subdomain prefix and `/`,
# then a name of 1 to 63 letters, digits, `-`, `_` and `.` that starts and ends alphanumeric
_ATTR_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ATTR_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class _Errors:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, reason: str) -> None:
        self.items.append(f"{path}: {reason}")

    def keys(self, obj: dict[Any, Any], allowed: set[str], path: str) -> None:
        for key in obj:
            if key not in allowed:
                self.add(f"{path}.{key}" if path else str(key), "unknown key")


def _mapping(obj: object, path: str, errors: _Errors) -> dict[Any, Any] | None:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        errors.add(path, f"expected a mapping, got {type(obj).__name__}")
        return None
    return obj


def _sequence(obj: object, path: str, errors: _Errors) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        errors.add(path, f"expected a list, got {type(obj).__name__}")
        return []
    return obj


def _resources(obj: object, path: str, errors: _Errors) -> dict[str, int]:
    raw = _mapping(obj, path, errors)
    out: dict[str, int] = {}
    for name, value in (raw or {}).items():
        try:
            out[str(name)] = parse_quantity(str(name), value)
        except ValueError as exc:
            errors.add(f"{path}.{name}", str(exc))
    return out


def _properties(obj: object, path: str, errors: _Errors) -> dict[str, str]:
    raw = _mapping(obj, path, errors)
    out: dict[str, str] = {}
    for key, value in (raw or {}).items():
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        policy = _ENUM_PROPERTIES.get(str(key))
        if policy is not None:
            if not text.strip():
                continue  # no policy set: its default (YuniKorn's priority scheduling design)
            try:
                text = policy.from_str(text).value
            except ValueError as exc:
                hint = " (YAML reads an unquoted yes, no, on, off, true or false as a boolean)" \
                    if isinstance(value, bool) else ""
                errors.add(f"{path}.{key}", f"{exc}{hint}")
        elif key in _DURATION_PROPERTIES:
            _duration(text, f"{path}.{key}", errors, 0)
        out[str(key)] = text
    return out


def _acl(obj: object, path: str, errors: _Errors) -> Acl | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        errors.add(path, f"expected a string, got {type(obj).__name__}")
        return None
    try:
        return parse_acl(obj)
    except ValueError as exc:
        errors.add(path, str(exc))
        return None


_LIMIT_KEYS = {"limit", "users", "groups", "maxresources", "maxapplications"}
_TEMPLATE_KEYS = {"maxapplications", "resources", "properties"}


def _maxapps(raw: dict[Any, Any], path: str, errors: _Errors) -> int:
    value = raw.get("maxapplications", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        errors.add(f"{path}.maxapplications", f"expected a non-negative integer, got {limits.shorten(repr(value), 64)}")
        return 0
    if value > limits.INT64_MAX:  # (a snapshot writes it as an int64)
        errors.add(f"{path}.maxapplications", f"at most {limits.INT64_MAX}, got {limits.shorten(str(value), 64)}")
        return 0
    return value


def _limit(obj: object, path: str, errors: _Errors) -> LimitConfig | None:
    raw = _mapping(obj, path, errors)
    if raw is None:
        return None
    errors.keys(raw, _LIMIT_KEYS, path)
    lists = []
    for what, rule in (("users", LIMIT_USER), ("groups", LIMIT_GROUP)):
        names = []
        for i, n in enumerate(_sequence(raw.get(what), f"{path}.{what}", errors)):
            if not isinstance(n, str) or not n:
                errors.add(f"{path}.{what}[{i}]", _not_a_name(n, f"a {what[:-1]}"))
            elif n != WILDCARD and not rule.fullmatch(n):
                errors.add(f"{path}.{what}[{i}]", f"{n!r} must be * or match {rule.pattern}")
            elif n in names:
                errors.add(f"{path}.{what}[{i}]", f"{n!r} is listed twice")
            names.append(str(n))
        lists.append(tuple(names))
    users, groups = lists
    if not users and not groups:
        errors.add(path, "a limit needs users or groups")
    maxres = _resources(raw.get("maxresources"), f"{path}.maxresources", errors)
    if "maxapplications" in raw and raw["maxapplications"] == 0:
        errors.add(f"{path}.maxapplications", "must be greater than 0")
    maxapps = _maxapps(raw, path, errors)
    if raw.get("maxresources") and not any(maxres.values()):  # (empty: not set, as YuniKorn reads it)
        errors.add(f"{path}.maxresources", "sets no resource above zero")
    if not raw.get("maxresources") and "maxapplications" not in raw:
        errors.add(path, "a limit needs maxresources or maxapplications")
    text = raw.get("limit")
    return LimitConfig(limit="" if text is None else str(text), users=users, groups=groups,
                       maxresources=maxres, maxapplications=maxapps)


def _limits(obj: object, path: str, errors: _Errors) -> list[LimitConfig]:
    """A queue's limits. As YuniKorn's validator has them: a name in one limit only; the `*`
    user (or group) after every named one; a `*` group limit only after a named group's (one
    alone would count every user's applications together: the queue's own max)."""
    out = []
    seen: dict[tuple[str, str], str] = {}
    for i, item in enumerate(_sequence(obj, path, errors)):
        lim = _limit(item, f"{path}[{i}]", errors)
        if lim is None:
            continue
        for what, names in (("user", lim.users), ("group", lim.groups)):
            for j, n in enumerate(names):
                where = seen.setdefault((what, n), f"{path}[{i}]")
                if where != f"{path}[{i}]":
                    errors.add(f"{path}[{i}]", f"{what} {n!r} already has a limit in {where}")
                elif n != WILDCARD and (what, WILDCARD) in seen:
                    errors.add(f"{path}[{i}].{what}s[{j}]", f"{n!r} comes after the '*' {what} limit "
                               f"({seen[(what, WILDCARD)]}): named {what}s' limits go first")
                elif n == WILDCARD and what == "group" and len([k for k in seen if k[0] == "group"]) == 1:
                    errors.add(f"{path}[{i}].groups[{j}]", "a '*' group limit needs a named group's limit before it "
                               "in the same queue (alone, it would hold all users together: that is the queue's max)")
        out.append(lim)
    return out


def _template(obj: object, path: str, errors: _Errors) -> ChildTemplate | None:
    if obj is None:
        return None
    raw = _mapping(obj, path, errors)
    if raw is None:
        return None
    errors.keys(raw, _TEMPLATE_KEYS, path)
    res = _mapping(raw.get("resources"), f"{path}.resources", errors) or {}
    errors.keys(res, _RESOURCE_KEYS, f"{path}.resources")
    return ChildTemplate(
        maxapplications=_maxapps(raw, path, errors),
        guaranteed=_resources(res.get("guaranteed"), f"{path}.resources.guaranteed", errors),
        max=_resources(res.get("max"), f"{path}.resources.max", errors),
        properties=_properties(raw.get("properties"), f"{path}.properties", errors),
    )


def _not_a_name(value: object, what: str) -> str:
    """Why `value` names nothing: missing, or a scalar YAML read as a number or a boolean
    (`name: 2024`, `name: off`) where YuniKorn's loader would have read the text."""
    if isinstance(value, bool):
        return f"{value} is a boolean in YAML: quote the name ('off', say) to name {what}"
    if isinstance(value, (int, float)):
        return f"{value} is a number in YAML: quote it ('{value}') to name {what}"
    return f"missing {what.split()[-1]} name"


def _queue(obj: object, path: str, errors: _Errors) -> QueueConfig | None:
    raw = _mapping(obj, path, errors)
    if raw is None:
        return None
    errors.keys(raw, _QUEUE_KEYS, path)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        errors.add(f"{path}.name", _not_a_name(name, "a queue"))
        name = "?"
    elif "." in name:
        errors.add(f"{path}.name", f"queue name {name!r} contains a dot")
    elif not QUEUE_NAME.fullmatch(name):
        errors.add(f"{path}.name", f"queue name {name!r} must match {QUEUE_NAME.pattern}")
    parent = raw.get("parent", False)
    if not isinstance(parent, bool):
        errors.add(f"{path}.parent", f"expected true or false, got {parent!r}")
        parent = False
    res = _mapping(raw.get("resources"), f"{path}.resources", errors) or {}
    errors.keys(res, _RESOURCE_KEYS, f"{path}.resources")
    maxapps = _maxapps(raw, path, errors)
    children = []
    for i, child in enumerate(_sequence(raw.get("queues"), f"{path}.queues", errors)):
        parsed = _queue(child, f"{path}.queues[{i}]", errors)
        if parsed is not None:
            children.append(parsed)
    return QueueConfig(
        name=name.lower(),
        parent=bool(parent) or bool(children),
        guaranteed=_resources(res.get("guaranteed"), f"{path}.resources.guaranteed", errors),
        max=_resources(res.get("max"), f"{path}.resources.max", errors),
        maxapplications=maxapps,
        properties=_properties(raw.get("properties"), f"{path}.properties", errors),
        submitacl=_acl(raw.get("submitacl"), f"{path}.submitacl", errors),
        adminacl=_acl(raw.get("adminacl"), f"{path}.adminacl", errors),
        queues=children,
        limits=_limits(raw.get("limits"), f"{path}.limits", errors),
        childtemplate=_template(raw.get("childtemplate"), f"{path}.childtemplate", errors),
    )


def _check_tree(q: QueueConfig, path: str, errors: _Errors, limits: dict[str, int], maxapps: int) -> dict[str, int]:
    """Rule 3 below `q`. `limits`: the nearest max per resource above; `maxapps` likewise.
    Returns what `q` is guaranteed as its parent counts it: its own guarantee when it has
    one, else its children's sum (YuniKorn's checkQueueResource)."""
    for res, value in q.guaranteed.items():
        if res in q.max and value > q.max[res]:
            errors.add(f"{path}.resources", f"guaranteed {res} {fq(res, value)} exceeds max {fq(res, q.max[res])}")
    for res, value in q.max.items():
        if res in limits and value > limits[res]:
            errors.add(f"{path}.resources.max", f"{res} {fq(res, value)} exceeds the parent's max {fq(res, limits[res])}")
    for res, value in q.guaranteed.items():
        if res in limits and value > limits[res]:
            errors.add(
                f"{path}.resources.guaranteed", f"{res} {fq(res, value)} exceeds the parent's max {fq(res, limits[res])}"
            )
    if maxapps and q.maxapplications > maxapps:
        errors.add(
            f"{path}.maxapplications", f"{q.maxapplications} exceeds the parent's {maxapps}"
        )
    own_max = {**limits, **q.max}
    own_apps = q.maxapplications or maxapps
    for i, lim in enumerate(q.limits):
        for res, value in lim.maxresources.items():
            if res in own_max and value > own_max[res]:
                whose = "the queue's max" if res in q.max else "the max up the tree"
                errors.add(f"{path}.limits[{i}].maxresources",
                           f"{res} {fq(res, value)} exceeds {whose} {fq(res, own_max[res])}")
        if own_apps and lim.maxapplications > own_apps:
            whose = "the queue's" if q.maxapplications else "the maxapplications up the tree,"
            errors.add(f"{path}.limits[{i}].maxapplications",
                       f"{lim.maxapplications} exceeds {whose} {own_apps}")
    t = q.childtemplate
    if t is not None:
        if not q.parent:
            errors.add(f"{path}.childtemplate", "only a parent queue has a child template")
        for res, value in t.max.items():
            if res in own_max and value > own_max[res]:
                errors.add(f"{path}.childtemplate.resources.max",
                           f"{res} {fq(res, value)} exceeds the queue's max {fq(res, own_max[res])}")
        for res, value in t.guaranteed.items():
            if res in t.max and value > t.max[res]:
                errors.add(f"{path}.childtemplate.resources", f"guaranteed {res} {fq(res, value)} exceeds max {fq(res, t.max[res])}")
            elif res in own_max and value > own_max[res]:
                errors.add(f"{path}.childtemplate.resources.guaranteed",
                           f"{res} {fq(res, value)} exceeds the queue's max {fq(res, own_max[res])}")
        if own_apps and t.maxapplications > own_apps:
            errors.add(f"{path}.childtemplate.maxapplications", f"{t.maxapplications} exceeds the queue's {own_apps}")
    seen: dict[str, int] = {}
    for i, child in enumerate(q.queues):
        if child.name in seen and child.name != "?":  # ("?": no name, an error of its own)
            errors.add(f"{path}.queues[{i}].name", f"duplicate queue name {child.name!r} under {path}")
        seen.setdefault(child.name, i)
    below = {**limits, **q.max}
    totals: dict[str, int] = {}
    for i, child in enumerate(q.queues):  # a child without a guarantee counts its children's
        for res, value in _check_tree(child, f"{path}.queues[{i}]", errors, below, q.maxapplications or maxapps).items():
            totals[res] = totals.get(res, 0) + value
    for res, total in sorted(totals.items()):
        if res in q.guaranteed and total > q.guaranteed[res]:
            errors.add(
                f"{path}.queues",
                f"the children's guaranteed {res} {fq(res, total)} exceeds the queue's {fq(res, q.guaranteed[res])}",
            )
        elif res in q.max and total > q.max[res]:
            errors.add(f"{path}.queues",
                       f"the children's guaranteed {res} {fq(res, total)} exceeds the queue's max {fq(res, q.max[res])}")
    return dict(q.guaranteed) if any(q.guaranteed.values()) else totals


_RULE_KEYS = {"name", "create", "value", "parent", "filter"}
_FILTER_KEYS = {"type", "users", "groups"}


def _names(obj: object, path: str, errors: _Errors) -> list[str]:
    items = _sequence(obj, path, errors)
    out = [str(x) for x in items]
    if len(out) == 1:
        try:
            name_pattern(out[0])
        except ValueError as exc:
            errors.add(path, f"not a regular expression: {exc}")
    return out


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # (said as a configuration error, not written to stderr)
_PATTERNS: dict[str, Any] = {}  # compiled once (a placement judges each new application by them)


def name_pattern(text: str) -> Any:
    """A rule filter's lone name as the regular expression it is, in the RE2 syntax of
    YuniKorn's Go: matched in time linear in the name, where a backtracking engine takes
    exponential time on `(a+)+` and a 30-character user name (a security review: one
    application froze the writer 18 s, each character more doubling it). ValueError says why
    it is not one (RE2 has no backreferences or lookarounds, as Go has none)."""
    found = _PATTERNS.get(text)
    if found is None:
        try:
            found = re2.compile(text, _RE2_OPTIONS)
        except re2.error as exc:
            why = exc.args[0] if exc.args else exc
            raise ValueError(why.decode(errors="replace") if isinstance(why, bytes) else str(why)) from None
        if len(_PATTERNS) >= 1024:
            _PATTERNS.clear()
        _PATTERNS[text] = found
    return found


def from_root(name: str) -> bool:
    """Whether a queue name a placement rule gives is a path from root (`root.a`, any case):
    the queue itself, with no parent rule run for it (YuniKorn's rules)."""
    return name.strip().lower().startswith(ROOT + ".")


def _rule(obj: object, path: str, errors: _Errors) -> PlacementRule | None:
    raw = _mapping(obj, path, errors)
    if raw is None:
        return None
    errors.keys(raw, _RULE_KEYS, path)
    name = str(raw.get("name", "")).strip().lower()
    if name not in RULE_NAMES:
        errors.add(f"{path}.name", f"unknown placement rule {raw.get('name')!r}: expected one of {', '.join(RULE_NAMES)}")
    create = raw.get("create", False)
    if not isinstance(create, bool):
        errors.add(f"{path}.create", f"expected true or false, got {create!r}")
        create = False
    value = "" if raw.get("value") is None else str(raw.get("value"))
    if name in ("fixed", "tag") and not value:
        errors.add(f"{path}.value", f"the {name} rule needs a value")
    parent = _rule(raw["parent"], f"{path}.parent", errors) if raw.get("parent") is not None else None
    if name == "fixed" and parent is not None and from_root(value):
        errors.add(f"{path}.parent", f"a fixed rule naming a queue from root ({value!r}) has no parent rule "
                                     "(YuniKorn refuses it too)")
    flt = _mapping(raw.get("filter"), f"{path}.filter", errors) or {}
    errors.keys(flt, _FILTER_KEYS, f"{path}.filter")
    ftype = str(flt.get("type") or "allow").strip().lower()
    if ftype not in ("allow", "deny"):
        errors.add(f"{path}.filter.type", f"unknown value {flt.get('type')!r}: expected allow or deny")
    return PlacementRule(name=name, create=create, value=value, parent=parent, filter=RuleFilter(
        type=ftype, users=_names(flt.get("users"), f"{path}.filter.users", errors),
        groups=_names(flt.get("groups"), f"{path}.filter.groups", errors)))


def _leaves(root: QueueConfig) -> dict[str, bool]:
    """Each configured queue's path: whether it is a leaf."""
    out: dict[str, bool] = {}
    stack = [(root, ROOT)]
    while stack:
        q, at = stack.pop()
        out[at] = not q.parent and not q.queues
        stack.extend((c, f"{at}.{c.name.lower()}") for c in q.queues)
    return out


def _check_fixed(rule: PlacementRule, path: str, leaves: dict[str, bool], leaf: bool, errors: _Errors) -> None:
    """A fixed rule whose queue is configured as the other kind places nothing, ever: the
    queue of a rule must be a leaf, of a parent rule a parent (YuniKorn's
    checkPlacementRules); a `.`-separated part that is no queue name neither."""
    if rule.name == "fixed" and rule.value:
        bad = [part for part in rule.value.strip().split(".") if not QUEUE_NAME.match(part)]
        if bad:
            errors.add(f"{path}.value", f"{bad[0][:80]!r} is not a queue name (1 to 64 of letters, digits and _:#/@-)")
        elif rule.parent is None or from_root(rule.value):
            name = rule.value.strip().lower()
            at = name if name == ROOT or from_root(name) else f"{ROOT}.{name}"
            if leaves.get(at) is (not leaf):
                errors.add(f"{path}.value", f"queue {at} is a {'parent' if leaf else 'leaf'} queue: "
                                            f"{'a rule places in a leaf' if leaf else 'a parent rule names a parent'}")
    if rule.parent is not None:
        _check_fixed(rule.parent, f"{path}.parent", leaves, False, errors)


def _nodesort(obj: object, path: str, errors: _Errors) -> NodeSortConfig:
    raw = _mapping(obj, path, errors) or {}
    errors.keys(raw, _NODESORT_KEYS, path)
    policy = NodeSortPolicy.FAIR
    if raw.get("type") is not None:
        try:
            policy = NodeSortPolicy.from_str(str(raw["type"]))
        except ValueError as exc:
            errors.add(f"{path}.type", str(exc))
    weights = {"vcore": 1.0, "memory": 1.0}
    given = _mapping(raw.get("resourceweights"), f"{path}.resourceweights", errors)
    if given:
        weights = {}
        for name, value in given.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                errors.add(f"{path}.resourceweights.{name}", f"expected a finite number >= 0, got {value!r}")
                continue
            weights[str(name)] = float(value)
    return NodeSortConfig(type=policy, resourceweights=weights)


def attribute_name_problem(name: str) -> str:
    """Why `name` is not a valid node attribute name ("" when it is): `[prefix/]name` as a
    Kubernetes label key (`ykbus.io/rack`, `si/hostname`, `rack`)."""
    prefix, slash, local = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _ATTR_PREFIX.fullmatch(prefix)):
        return "its prefix must be a DNS subdomain (lower-case letters, digits, '-' and '.')"
    if not local or len(local) > 63 or not _ATTR_NAME.fullmatch(local):
        return ("its name must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with "
                "a letter or digit")
    return ""


def _topology(obj: object, path: str, errors: _Errors) -> TopologyConfig:
    """Rule 9: a partition's `topology`."""
    raw = _mapping(obj, path, errors) or {}
    errors.keys(raw, _TOPOLOGY_KEYS, path)
    items = _sequence(raw.get("levels"), f"{path}.levels", errors)
    if len(items) > limits.MAX_TOPOLOGY_LEVELS:
        errors.add(f"{path}.levels", f"{len(items)} levels, at most {limits.MAX_TOPOLOGY_LEVELS}")
    levels: list[str] = []
    for i, item in enumerate(items):
        where = f"{path}.levels[{i}]"
        if not isinstance(item, str):
            errors.add(where, f"expected a node attribute name, got {type(item).__name__}")
            continue
        problem = attribute_name_problem(item)
        if problem:
            errors.add(where, f"{item[:64]!r} is not a valid attribute name: {problem}")
        elif item in levels:
            errors.add(where, f"level {item!r} is repeated (levels[{items.index(item)}])")
        else:
            levels.append(item)
    return TopologyConfig(levels=tuple(levels))


def _partition(obj: object, path: str, errors: _Errors) -> PartitionConfig | None:
    raw = _mapping(obj, path, errors)
    if raw is None:
        return None
    errors.keys(raw, _PARTITION_KEYS, path)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        errors.add(f"{path}.name", _not_a_name(name, "a partition"))
        name = "?"
    elif "." in name:
        errors.add(f"{path}.name", f"partition name {name!r} contains a dot")
    elif any(c in name for c in "[]/"):  # the REST API names an RM's partition `[rm]name` (docs/operations.md)
        errors.add(f"{path}.name", f"partition name {name!r} contains one of [ ] /")
    queues_raw = _sequence(raw.get("queues"), f"{path}.queues", errors)
    top = [q for q in (_queue(r, f"{path}.queues[{i}]", errors) for i, r in enumerate(queues_raw)) if q]
    if len(top) == 1 and top[0].name == ROOT:
        root = top[0]
        root_path = f"{path}.queues[0]"
        if isinstance(queues_raw[0], dict) and queues_raw[0].get("parent") is False:
            errors.add(f"{root_path}.parent", "the root queue is always a parent")
        if root.guaranteed or root.max:
            errors.add(f"{root_path}.resources", "resources cannot be set on the root queue")
        root = msgspec.structs.replace(root, parent=True)
    else:
        for i, q in enumerate(top):
            if q.name == ROOT:
                errors.add(f"{path}.queues[{i}].name", "root must be the only top-level queue")
        root = QueueConfig(ROOT, True, {}, {}, 0, {}, None, None, top)
        root_path = f"{path}.queues"
    if raw.get("limits") is not None:  # YuniKorn: the partition's limits are the root queue's
        if root.limits:
            errors.add(f"{path}.limits", f"limits are set on both the partition and {root_path}")
        root = msgspec.structs.replace(root, limits=_limits(raw.get("limits"), f"{path}.limits", errors))
    _check_tree(root, root_path, errors, {}, 0)
    check_nested_limits(root, root_path, errors.add)
    check_runtimes(root, root_path, errors.add)
    for i, child in enumerate(root.queues):
        if child.name == RECOVERY_NAME:
            errors.add(f"{root_path}.queues[{i}].name", f"root.{RECOVERY_NAME} is reserved for recovered applications")
    rules, leaves = [], _leaves(root)
    for i, item in enumerate(_sequence(raw.get("placementrules"), f"{path}.placementrules", errors)):
        if (r := _rule(item, f"{path}.placementrules[{i}]", errors)) is not None:
            _check_fixed(r, f"{path}.placementrules[{i}]", leaves, True, errors)
            rules.append(r)
    return PartitionConfig(
        name=name.lower(),
        root=root,
        nodesortpolicy=_nodesort(raw.get("nodesortpolicy"), f"{path}.nodesortpolicy", errors),
        placementrules=rules,
        preemption=_preemption(raw.get("preemption"), f"{path}.preemption", errors),
        reservationdelay_ms=_duration(raw.get("reservationdelay"), f"{path}.reservationdelay", errors, 2000),
        topology=_topology(raw.get("topology"), f"{path}.topology", errors),
    )


def _preemption(obj: object, path: str, errors: _Errors) -> dict[str, Any]:
    raw = _mapping(obj, path, errors) or {}
    errors.keys(raw, _PREEMPTION_KEYS, path)
    for key in sorted(_PREEMPTION_KEYS & set(raw)):
        if not isinstance(raw[key], bool):
            errors.add(f"{path}.{key}", f"expected true or false, got {raw[key]!r}")
    return dict(raw)


def preemption_enabled(config: PartitionConfig) -> bool:
    """Whether the partition preempts (`preemption.enabled`, default true)."""
    return config.preemption.get("enabled", True) is not False


def quota_preemption_enabled(config: PartitionConfig) -> bool:
    """Whether queues over a lowered max are preempted down to it (`preemption.quotapreemptionenabled`, default false)."""
    return config.preemption.get("quotapreemptionenabled", False) is True


def duration_ms(text: str) -> int:
    """A duration property already checked by the parser (`30s`, `500ms`, seconds), in ms."""
    errors = _Errors()
    return _duration(text, "", errors, 0)


def _duration(obj: object, path: str, errors: _Errors, default: int) -> int:
    """A duration in milliseconds (core/runtimeprops.py `parse_duration_ms`); `default` if absent."""
    if obj is None:
        return default
    try:
        return parse_duration_ms(obj)
    except ValueError as exc:
        errors.add(path, str(exc))
        return default


def parse_config(obj: object) -> SchedulerConfig:
    """Validate a loaded queues.yaml object; ConfigError lists every error with its path."""
    errors = _Errors()
    raw = _mapping(obj, "$", errors)
    partitions: list[PartitionConfig] = []
    if raw is not None:
        errors.keys(raw, _TOP_KEYS, "")
        if "partitions" not in raw:
            errors.add("partitions", "missing: at least one partition is required")
        items = _sequence(raw.get("partitions"), "partitions", errors)
        if "partitions" in raw and not items:
            errors.add("partitions", "at least one partition is required")
        seen: set[str] = set()
        for i, item in enumerate(items):
            p = _partition(item, f"partitions[{i}]", errors)
            if p is None:
                continue
            if p.name in seen:
                errors.add(f"partitions[{i}].name", f"duplicate partition name {p.name!r}")
            seen.add(p.name)
            partitions.append(p)
    if errors.items:
        raise ConfigError(errors.items)
    return SchedulerConfig(partitions=partitions)


_OFFSET = re.compile(r"[+-]?[0-9]+")


def parse_offset(text: str) -> int:
    """`priority.offset` as YuniKorn's priority scheduling design defines it: an int32, 0 when empty or unparsable."""
    return offset_of(text) or 0


def offset_of(text: str) -> int | None:
    """`priority.offset`'s int32, None when the text is none (Go's strconv.ParseInt(s, 10,
    32): a sign and ASCII digits, nothing else, in range)."""
    if not _OFFSET.fullmatch(text):
        return None
    value = int(text, 10)
    return value if INT32_MIN <= value <= INT32_MAX else None
