"""YuniKorn's REST API (`/ws/v1/...`), as Apache YuniKorn answers it
(`../shared/reference/yunikorn-rest/`, docs/operations.md "YuniKorn's REST API").

This is its start (issue 23): the router's behaviour for every path, YuniKorn's, and the first
routes. Unknown paths get Go's `404 page not found` (text), a known path with a trailing
slash a 301 to it, a method a route does not take `405 Method Not Allowed` with `Allow`,
`OPTIONS` an empty 200 with `Allow`; JSON answers carry YuniKorn's CORS headers and are
written as Go's encoder writes them (compact, one line and a newline).

Routes: `GET /ws/v1/clusters` (one entry per RM and partition, YuniKorn's ClusterInfo) and
`GET /ws/v1/partitions` (PartitionInfo). Several RMs: each partition of each RM is an entry,
`clusterId` naming the RM.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ykbus.core import Core
from ykbus.core.config import preemption_enabled, quota_preemption_enabled
from ykbus.core.resources import add_into

JSON_TYPE = "application/json; charset=UTF-8"
TEXT_TYPE = "text/plain; charset=utf-8"
CORS = {"Access-Control-Allow-Headers": "X-Requested-With,Content-Type,Accept,Origin",
        "Access-Control-Allow-Methods": "GET, OPTIONS", "Access-Control-Allow-Origin": "*"}
NOT_FOUND = (404, TEXT_TYPE, b"404 page not found\n", {"X-Content-Type-Options": "nosniff"})  # Go's http.NotFound

Answer = tuple[int, str, bytes, dict[str, str]]  # status, content type, body, headers


def _number(value: float) -> int | float:
    """A float as Go writes it: 1, not 1.0."""
    return int(value) if float(value).is_integer() else value


def _total(resources: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for res in resources:
        add_into(out, res)
    return dict(sorted(out.items()))


def partitions(core: Core, started: int) -> list[dict[str, Any]]:
    out = []
    for rm in core.rms.values():
        for p in rm.partitions.values():
            capacity = _total([n.capacity for n in p.nodes.values()])
            used = _total([a.resource for a in p.allocations.values()])
            summary = p.summary.dao()
            out.append({
                "clusterId": rm.id,
                "name": p.name,
                "capacity": {
                    "capacity": capacity,
                    "usedCapacity": used,
                    "utilization": {k: v * 100 // capacity[k] for k, v in used.items() if capacity.get(k)},
                },
                "nodeSortingPolicy": {"type": p.node_sort.value,
                                      "resourceWeights": {k: _number(v) for k, v in sorted(p.weights.items())}},
                "preemptionEnabled": preemption_enabled(p.config),
                "quotaPreemptionEnabled": quota_preemption_enabled(p.config),
                "totalNodes": len(p.nodes),
                "applications": summary["applications"],
                "totalContainers": summary["totalContainers"],
                "state": "Active",
                "lastStateTransitionTime": started,  # a partition is Active from the start
            })
    return out


def clusters(core: Core, started: int) -> list[dict[str, Any]]:
    return [{"startTime": started,
             "rmBuildInformation": [{"rmId": rm.id, "buildVersion": rm.version, **rm.build_info}],
             "partition": p.name, "clusterName": "kubernetes"}
            for rm in core.rms.values() for p in rm.partitions.values()]


ROUTES: dict[str, Callable[[Core, int], Any]] = {"/ws/v1/clusters": clusters, "/ws/v1/partitions": partitions}
METHODS = "GET, OPTIONS"


def answer(core: Core, started: int, method: str, path: str) -> Answer:
    """YuniKorn's answer to `method path` (the query is not read by these routes yet);
    `started`: when the service started (Unix ns), YuniKorn's `startTime`."""
    route = ROUTES.get(path)
    if route is None:
        if len(path) > 1 and path.endswith("/") and path.rstrip("/") in ROUTES:
            to = path.rstrip("/")
            return 301, "text/html; charset=utf-8", f'<a href="{to}">Moved Permanently</a>.\n\n'.encode(), \
                {"Location": to}
        return NOT_FOUND
    if method == "OPTIONS":
        return 200, "", b"", {"Allow": METHODS}
    if method != "GET":
        return 405, TEXT_TYPE, b"Method Not Allowed\n", {"Allow": METHODS, "X-Content-Type-Options": "nosniff"}
    body = json.dumps(route(core, started), separators=(",", ":")).encode() + b"\n"
    return 200, JSON_TYPE, body, dict(CORS)
