"""The TYJob controller's simulated cluster: CLUSTER.yaml.

    nodes:
      - {name: gpu-1, cpu: 32, memory: 128Gi, nvidia.com/gpu: 8, labels: {zone: a}}
      - {name: cpu-1, cpu: "16", memory: 64Gi}

Quantities are Kubernetes quantities (`500m`, `4`, `64Gi`). The controller reads the file
again every second: a node added is registered, a node gone is decommissioned (its pods
are lost and placed again), a node whose size changed is updated.
"""

from __future__ import annotations

from typing import Any

from ykbus.core.config import parse_quantity
from ykbus.si import messages as m
from ykbus.tyjob.manifest import MAX_NAME, NAME, RESOURCES
from ykbus.yamlload import load_yaml

MAX_NODES = 100_000


class ClusterError(ValueError):
    pass


class ClusterNode:
    __slots__ = ("name", "capacity", "labels")

    def __init__(self, name: str, capacity: dict[str, int], labels: dict[str, str]) -> None:
        self.name, self.capacity, self.labels = name, capacity, labels

    def info(self, action: m.ActionFromRM = m.ActionFromRM.CREATE,
             existing: list[m.Allocation] | None = None) -> m.NodeInfo:
        return m.NodeInfo(nodeID=self.name, action=action,
                          attributes={"si/hostname": self.name, **{f"label/{k}": v for k, v in self.labels.items()}},
                          schedulableResource=m.Resource(resources={k: m.Quantity(v) for k, v in self.capacity.items()}),
                          existingAllocations=existing or [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterNode) and (self.name, self.capacity, self.labels) == (
            other.name, other.capacity, other.labels)


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
        if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.match(name):
            errors.append(f"{path}.name: must be a DNS-1123 label of at most {MAX_NAME} characters (got {name!r:.80})")
            continue
        if name in nodes:
            errors.append(f"{path}.name: {name} is listed twice")
        capacity: dict[str, int] = {}
        for key, value in raw.items():
            if key in ("name", "labels"):
                continue
            si = RESOURCES.get(key)
            if si is None:
                errors.append(f"{path}.{key}: unknown field (known: name, labels, {', '.join(RESOURCES)})")
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
        nodes[name] = ClusterNode(name, capacity, {str(k): str(v) for k, v in labels.items()})
    if errors:
        raise ClusterError("\n".join(errors))
    return nodes


def load_cluster(path: str) -> dict[str, ClusterNode]:
    with open(path, encoding="utf-8") as f:
        return parse_cluster(f.read(), path)
