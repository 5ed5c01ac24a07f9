"""The TYJob controller's simulated cluster: CLUSTER.yaml.

    nodes:
      - {name: gpu-1, cpu: 32, memory: 128Gi, nvidia.com/gpu: 8, labels: {zone: a}}
      - {name: cpu-1, cpu: "16", memory: 64Gi}
      - {name: gpu-b1-r1-1, cpu: 64, memory: 512Gi, nvidia.com/gpu: 8,
         attributes: {ykbus.io/block: b1, ykbus.io/rack: r1}}

Quantities are Kubernetes quantities (`500m`, `4`, `64Gi`). Labels go to the core as node
attributes `label/<name>`; `attributes` go as they are (the SI's `NodeInfo.attributes`):
the topology levels of the controller's partition, `ykbus.io/block` and `ykbus.io/rack`,
are such attributes. The controller reads the file again every second: a node added is
registered, a node gone is decommissioned (its pods are lost and placed again), a node
whose size, labels or attributes changed is updated.
"""

from __future__ import annotations

import difflib
from typing import Any

from ykbus.core.config import attribute_name_problem
from ykbus.core.resources import parse_quantity
from ykbus.si import messages as m
from ykbus.tyjob.manifest import MAX_NAME, NAME, RESOURCES
from ykbus.yamlload import load_yaml

MAX_NODES = 100_000
MAX_ATTRIBUTES = 64  # per node
MAX_VALUE = 63  # characters of an attribute's value (a Kubernetes label value's bound)


class ClusterError(ValueError):
    pass


class ClusterNode:
    __slots__ = ("name", "capacity", "labels", "attributes")

    def __init__(self, name: str, capacity: dict[str, int], labels: dict[str, str],
                 attributes: dict[str, str] | None = None) -> None:
        self.name, self.capacity, self.labels = name, capacity, labels
        self.attributes = attributes or {}

    def info(self, action: m.ActionFromRM = m.ActionFromRM.CREATE,
             existing: list[m.Allocation] | None = None) -> m.NodeInfo:
        return m.NodeInfo(nodeID=self.name, action=action,
                          attributes={"si/hostname": self.name, **{f"label/{k}": v for k, v in self.labels.items()},
                                      **self.attributes},
                          schedulableResource=m.Resource(resources={k: m.Quantity(v) for k, v in self.capacity.items()}),
                          existingAllocations=existing or [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterNode) and (self.name, self.capacity, self.labels, self.attributes) == (
            other.name, other.capacity, other.labels, other.attributes)


def parse_cluster(text: str, source: str = "cluster") -> dict[str, ClusterNode]:
    """Nodes by name; ClusterError listing every problem (with its path)."""
    try:
        doc: Any = load_yaml(text)
    except ValueError as exc:
        raise ClusterError(f"{source}: not valid YAML: {exc}") from None
    errors: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise ClusterError(f"{source}: must be a mapping with a list `nodes`")
    if len(doc["nodes"]) > MAX_NODES:
        raise ClusterError(f"{source}: more than {MAX_NODES} nodes")
    nodes: dict[str, ClusterNode] = {}
    for i, raw in enumerate(doc["nodes"]):
        path = f"{source}: nodes[{i}]"
        if not isinstance(raw, dict):
            errors.append(f"{path}: must be a mapping")
            continue
        name = raw.get("name")
        if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
            errors.append(f"{path}.name: must be a DNS-1123 label of at most {MAX_NAME} characters (got {name!r:.80})")
            continue
        if name in nodes:
            errors.append(f"{path}.name: {name} is listed twice")
        capacity: dict[str, int] = {}
        for key, value in raw.items():
            if key in ("name", "labels", "attributes"):
                continue
            si = RESOURCES.get(key)
            if si is None:
                errors.append(f"{path}.{key}: unknown field (known: name, labels, attributes, {', '.join(RESOURCES)})")
                continue
            try:
                q = parse_quantity(si, value)
            except ValueError as exc:
                errors.append(f"{path}.{key}: {exc}")
                continue
            if q < 0:
                errors.append(f"{path}.{key}: must not be negative")
            elif q:
                capacity[si] = q
        labels = raw.get("labels") or {}
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str | int | float | bool)
                                                   for k, v in labels.items()):
            errors.append(f"{path}.labels: must map names to values")
            labels = {}
        if not capacity:
            errors.append(f"{path}: a node needs some cpu, memory or nvidia.com/gpu")
        attributes = _attributes(raw.get("attributes"), f"{path}.attributes", errors)
        nodes[name] = ClusterNode(name, capacity, {str(k): str(v) for k, v in labels.items()}, attributes)
    if errors:
        raise ClusterError("\n".join(errors))
    return nodes


def attribute_doubts(nodes: dict[str, ClusterNode]) -> list[str]:
    """Attribute names that look misspelt: on fewer nodes than a name of the other nodes it
    is close to and that this node lacks (`ykbus.io/blok` where the others have
    `ykbus.io/block`: the node would silently leave its block). One line each, by node."""
    counts: dict[str, int] = {}
    for n in nodes.values():
        for key in n.attributes:
            counts[key] = counts.get(key, 0) + 1
    out = []
    for n in nodes.values():
        for key in n.attributes:
            near = [k for k in difflib.get_close_matches(key, list(counts), n=3, cutoff=0.8)
                    if k != key and k not in n.attributes and counts[k] > counts[key]]
            if near:
                out.append(f"node {n.name}: attribute {key}, where {counts[near[0]]} other nodes have {near[0]} "
                           "(misspelt? the node is in no domain of it)")
    return out


def _attributes(raw: Any, path: str, errors: list[str]) -> dict[str, str]:
    """A node's `attributes`: node attribute names (`[prefix/]name`, as a Kubernetes label
    key; not the SI's own `si/...`) to values of 1 to 63 characters (numbers as text)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        errors.append(f"{path}: must map node attribute names to values, e.g. {{ykbus.io/rack: r1}}")
        return {}
    if len(raw) > MAX_ATTRIBUTES:
        errors.append(f"{path}: more than {MAX_ATTRIBUTES} attributes")
        return {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        where = f"{path}.{key}"
        problem = attribute_name_problem(key) if isinstance(key, str) else "it is not text"
        if problem:
            errors.append(f"{where}: {str(key)[:64]!r} is not a node attribute name: {problem}")
            continue
        if key.startswith("si/"):
            errors.append(f"{where}: si/ attributes are the SI's own (si/hostname is the node's name)")
            continue
        if isinstance(value, bool) or not isinstance(value, str | int) or not 1 <= len(str(value)) <= MAX_VALUE:
            errors.append(f"{where}: must be a value of 1 to {MAX_VALUE} characters (got {str(value)[:80]!r})")
            continue
        out[key] = str(value)
    return out


def load_cluster(path: str) -> dict[str, ClusterNode]:
    with open(path, encoding="utf-8") as f:
        return parse_cluster(f.read(), path)
