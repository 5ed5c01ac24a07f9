"""YuniKorn's REST API, checked against what Apache YuniKorn really answered
(../shared/reference/yunikorn-rest/, issue 23): the reference's state is driven into a
running core over NATS as an RM would drive it (its README, "The state behind the capture"),
every request of its index.md is made over HTTP, and each answer is compared with the
reference's: the same status and content type; for JSON the same keys at every level and
the same types, lists as sets (matched by their ids), times and ids ignored; and the
scenario's values: application states and counts, allocations and pending requests, queue
and node resources, partition totals."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import anyio
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from tests.integration.test_bus import start_rm  # noqa: F401 (the metrics test imports it from here)
from tests.integration.test_rest_api import REFERENCE, fetch
from ykbus import limits
from ykbus.bus.client import ResourceManagerClient
from ykbus.bus.server import free_port
from ykbus.si import messages as m

DEFAULT_COMPLETING_TIMEOUT_NS = limits.COMPLETING_TIMEOUT_NS  # (tests shorten it)

pytestmark = pytest.mark.anyio

RM = "rm-123"
CONFIG = """
partitions:
  - name: default
    nodesortpolicy: {type: fair}
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources: {guaranteed: {memory: 100M, vcore: 10}, max: {memory: 150M, vcore: 20}}
          - name: b
            resources: {guaranteed: {memory: 50M, vcore: 5}}
            properties: {application.sort.policy: fair}
    placementrules:
      - name: provided
        create: false
    limits:
      - limit: user cap
        users: [testuser]
        maxapplications: 10
"""
UGI = m.UserGroupInformation(user="testuser", groups=["testgroup"])
SMALL = {"memory": 10_000_000, "vcore": 1000}


def res(q: dict[str, int]) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})


def app(app_id: str, queue: str, gang: bool = False) -> m.AddApplicationRequest:
    return m.AddApplicationRequest(
        applicationID=app_id, queueName=queue, partitionName="default", ugi=UGI,
        tags={"namespace": "default"},
        placeholderAsk=res({"memory": 20_000_000, "vcore": 2000}) if gang else None,
        gangSchedulingStyle="Soft" if gang else "")


def ask(app_id: str, key: str, q: dict[str, int] = SMALL, **kw) -> m.AllocationAsk:
    return m.AllocationAsk(allocationKey=key, applicationID=app_id, resourceAsk=res(q), maxAllocations=1,
                           partitionName="default",
                           tags={"kubernetes.io/meta/namespace": "default", "kubernetes.io/meta/podName": key}, **kw)


def node(i: int) -> m.NodeInfo:
    return m.NodeInfo(nodeID=f"node-{i}:1234", action=m.ActionFromRM.CREATE,
                      attributes={"si/hostname": f"node-{i}", "si/rackname": "/rack-default"},
                      schedulableResource=res({"memory": 100_000_000, "vcore": 10_000, "pods": 110}))


async def drive_reference_state(api, rec: Recorder):
    """The reference's state (its README), step by step, as an RM drives it."""
    client = ResourceManagerClient(api, RM, config=CONFIG, callback=rec, extra_config={"log.level": "WARN"})
    await client.start(nodes=[node(1), node(2), node(3)])  # (the reference's RM sent that extra configuration)
    held = lambda key: [a for a in rec.allocations if a.allocationKey == key]  # noqa: E731
    rejected = lambda app_id: any(r.applicationID == app_id for x in rec.app for r in x.rejected)  # noqa: E731
    went = lambda app_id, state: any(u.applicationID == app_id and u.state == state  # noqa: E731
                                     for x in rec.app for u in x.updated)
    # 2. app-1: four small asks allocated, one too big for its queue's max stays pending
    await client.add_applications([app("app-1", "root.a")])
    await client.add_asks([ask("app-1", f"app-1-alloc-{i}") for i in range(4)]
                          + [ask("app-1", "app-1-too-big", {"memory": 200_000_000, "vcore": 1000})])
    await rec.wait_for(lambda: sum(len(held(f"app-1-alloc-{i}")) for i in range(4)) == 4)
    # 3. app-6: a gang in a fair queue (YuniKorn rejects it: task groups need a fifo queue)
    await client.add_applications([app("app-6", "root.b", gang=True)])
    await rec.wait_for(lambda: rejected("app-6"))
    # 4. app-2: a gang in root.a; its real ask replaces one placeholder
    await client.add_applications([app("app-2", "root.a", gang=True)])
    await client.add_asks([ask("app-2", f"tg-1-placeholder-{i}", placeholder=True, taskGroupName="tg-1")
                           for i in range(2)])
    await rec.wait_for(lambda: held("tg-1-placeholder-0") and held("tg-1-placeholder-1"))
    await client.add_asks([ask("app-2", "app-2-real-0", taskGroupName="tg-1")])
    await rec.wait_for(lambda: any(r.terminationType == "PLACEHOLDER_REPLACED" for r in rec.released))
    replaced = next(r for r in rec.released if r.terminationType == "PLACEHOLDER_REPLACED")
    await client.release([m.AllocationRelease(partitionName="default", applicationID="app-2", UUID=replaced.UUID,
                                              allocationKey=replaced.allocationKey,
                                              terminationType=m.TerminationType.PLACEHOLDER_REPLACED)])
    await rec.wait_for(lambda: held("app-2-real-0"))
    # 5. app-3: no such queue, and placement may not create it
    await client.add_applications([app("app-3", "root.nonexistent")])
    await rec.wait_for(lambda: rejected("app-3"))
    # 6. and 7. app-4 and app-5: one allocation each, released by the RM: Completing
    for app_id in ("app-4", "app-5"):
        await client.add_applications([app(app_id, "root.b")])
        await client.add_asks([ask(app_id, f"{app_id}-alloc-0")])
        await rec.wait_for(lambda a=app_id: held(f"{a}-alloc-0"))
        alloc = held(f"{app_id}-alloc-0")[0]
        # app-5 stays Completing while the caller reads (on a loaded machine that takes more
        # than a shortened timeout): its deadline is the default one, set as it enters Completing
        shortened = limits.COMPLETING_TIMEOUT_NS
        if app_id == "app-5":
            limits.COMPLETING_TIMEOUT_NS = DEFAULT_COMPLETING_TIMEOUT_NS
        try:
            await client.release([m.AllocationRelease(partitionName="default", applicationID=app_id, UUID=alloc.UUID,
                                                      allocationKey=alloc.allocationKey,
                                                      terminationType=m.TerminationType.STOPPED_BY_RM)])
            await rec.wait_for(lambda a=app_id: went(a, "Completing"))
        finally:
            limits.COMPLETING_TIMEOUT_NS = shortened
        if app_id == "app-4":  # Completed after the (shortened) completing timeout: a tick fires it
            await rec.wait_for(lambda: went("app-4", "Completed"))
            await client.remove_applications(["app-4"])  # changes nothing
    return client


ROW = re.compile(r"^\| (\w+) \| `([^`]+)` \| ([^|]*) \| (\d+) \| `?([^|`]*)`? \| \d+ \| `?([^|`]*)`? \|")
SKIPPED = ("/ws/v1/metrics", "/ws/v1/events/")  # their own tests (metrics, events)


def requests_of_index():
    for line in (REFERENCE / "index.md").read_text().splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        method, path, extras, status, ctype, file = row.groups()
        if path.startswith(SKIPPED) or path == "/":  # `/` is ykbus's web UI (docs/operations.md)
            continue
        yield method, path, extras.strip(), int(status), ctype.strip(), file.strip()


def request_parts(extras: str) -> tuple[dict[str, str], bytes | None]:
    headers: dict[str, str] = {}
    body = None
    if extras.startswith("-H "):
        name, _, value = extras[3:].partition(": ")
        headers[name] = value
    elif extras.startswith("body:"):
        body = VALIDATE_BODIES[extras[5:]].encode()
    return headers, body


VALIDATE_BODIES = {
    "good": CONFIG,
    "broken": "partitions:\n  - name: default\n    queues: [\n",
    "invalid": "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n          - name: a\n"
               "            resources: {guaranteed: {memory: 200M}, max: {memory: 100M}}\n",
    "empty": "",
}

# values that differ between any two runs, or by design (docstring): compared by type only
IGNORED = {"startTime", "submissionTime", "finishedTime", "time", "timestamp", "requestTime", "allocationTime",
           "allocationDelay", "lastStateTransitionTime", "lastOccurrence", "InstanceUUID", "Checksum", "uuid",
           "allocationID", "message", "description", "rejectedMessage", "reason", "buildVersion",
           "buildDate", "isPluginVersion", "DiagnosisMessage", "version", "rmId", "clusterId", "si/node-partition",
           "logLevel", "allocationLog", "nodeId",
           "totalApplications", "totalContainers",  # the log's minute samples: when they fall is timing
           "arch", "coreSHA", "goVersion", "shimSHA", "siSHA"}  # the build's, not the state's
# maps whose keys are data (resource names, states, attributes): compared as values, not shapes
DATA_MAPS = {"capacity", "usedCapacity", "utilization", "applications", "resourceWeights", "attributes",
             "allocationTags", "properties", "Extra", "Guaranteed", "Max", "resource", "pendingResource",
             "maxResource", "guaranteedResource", "allocatedResource", "headroom", "absUsedCapacity",
             "usedResource", "maxUsedResource", "allocated", "available", "utilized", "minResource",
             "resourceUsage", "parameters", "tags"}
ID_KEYS = ("applicationID", "allocationKey", "nodeID", "queuename", "queuePath", "userName", "taskGroupName",
           "bucketName", "type", "name", "Name", "partitionName", "partition", "applicationState", "rmId")
# maps compared by their keys at every level and the types of their values (resource times
# seconds held: how long an allocation lived is timing)
SHAPES = {"resourceHistory"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
ADDED_ROW = re.compile(r"^\| (\w+DAOInfo) \| `(\w+)` \|")


def documented_additions() -> set[tuple[str, str]]:
    """(YuniKorn object, key) of every key ykbus adds to YuniKorn's objects: the table of
    docs/operations.md ("What ykbus adds to YuniKorn's objects")."""
    return {(row.group(1), row.group(2)) for line in DOCS.read_text().splitlines()
            if (row := ADDED_ROW.match(line)) is not None}


YKBUS_FIELDS = documented_additions()


def dao_of(key: str, obj: dict) -> str:
    """Which of YuniKorn's objects `obj` is (found under `key`, `name[]` for a list's item)."""
    if key == "requests[]":
        return "AllocationAskDAOInfo"
    for id_key, dao in (("applicationID", "ApplicationDAOInfo"), ("queuename", "PartitionQueueDAOInfo"),
                        ("nodeID", "NodeDAOInfo"), ("allocationKey", "AllocationDAOInfo")):
        if id_key in obj:
            return dao
    return key or "$"


def ident(item):
    if isinstance(item, dict):
        for k in ID_KEYS:
            if k in item and isinstance(item[k], str):
                return f"{k}={item[k]}"
        item = {k: v for k, v in item.items() if k not in IGNORED}
    return json.dumps(item, sort_keys=True)


def shape(x):
    return {k: shape(v) for k, v in x.items()} if isinstance(x, dict) else type(x).__name__


def conform(got, want, where="$", key="", added=None):
    """Differences between `got` and the reference `want` (module docstring), as text lines;
    the keys ykbus adds that docs/operations.md lists go in `added` as (object, key)."""
    if want is None or got is None:
        return [] if got is want else [f"{where}: {got!r} vs {want!r}"]
    if not (type(got) is type(want) or {type(got), type(want)} <= {int, float}):
        return [f"{where}: type {type(got).__name__} vs {type(want).__name__} ({got!r} vs {want!r})"]
    if key in IGNORED:
        return []
    if isinstance(want, dict):
        if key in DATA_MAPS:
            return [] if got == want else [f"{where}: {got} vs {want}"]
        if key in SHAPES:
            return [] if shape(got) == shape(want) else [f"{where}: {got} vs {want} (shapes)"]
        out = []
        dao = dao_of(key, want)
        ours = {k for k in set(got) - set(want) if (dao, k) in YKBUS_FIELDS}
        if added is not None:
            added |= {(dao, k) for k in ours}
        missing, extra = set(want) - set(got), set(got) - set(want) - ours
        if missing or extra:
            out.append(f"{where}: keys missing {sorted(missing)}, extra {sorted(extra)} (in {dao})")
        for k in set(want) & set(got):
            out += conform(got[k], want[k], f"{where}.{k}", k, added)
        return out
    if isinstance(want, list):
        if want and all(not isinstance(x, dict | list) for x in want) and all(not isinstance(x, dict | list) for x in got):
            return [] if sorted(map(str, got)) == sorted(map(str, want)) else [f"{where}: {got} vs {want} (as sets)"]
        g, w = {ident(x): x for x in got}, {ident(x): x for x in want}
        if set(g) != set(w):
            return [f"{where}: items {sorted(g)} vs {sorted(w)}"]
        return [d for k in w for d in conform(g[k], w[k], f"{where}[{k}]", f"{key}[]", added)]
    return [] if got == want else [f"{where}: {got!r} vs {want!r}"]


def reference_headers() -> dict[tuple[str, str, str], dict[str, str]]:
    """The reference's headers.txt: (method, path, extras as index.md writes them) -> headers."""
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in (REFERENCE / "headers.txt").read_text().splitlines():
        if line.startswith("### "):
            method, path, extras = re.match(r"### (\S+) (\S+)  \((.*)\)$", line).groups()
            extras = f"body:{extras[1:]}" if extras.startswith("@") else extras
            current = out.setdefault((method, path, extras), {})
        elif ": " in line:
            name, _, value = line.partition(": ")
            current[name] = value
    return out


CORS_HEADERS = ("Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Allow-Headers", "Allow")


async def test_every_route_answers_as_yunikorn_did_for_the_same_state(nats_server, monkeypatch):
    monkeypatch.setattr(limits, "COMPLETING_TIMEOUT_NS", 2_000_000_000)  # as the reference's capture did
    port = free_port()
    async with running_core(nats_server.url, api_port=port, tick_interval_s=0.25) as core, rm_client(nats_server.url) as api:
        with anyio.fail_after(10):
            await core.http_started.wait()
        rec = Recorder()
        with anyio.fail_after(30):
            await drive_reference_state(api, rec)
        problems, added, their_headers = [], set(), reference_headers()
        for method, path, extras, status, ctype, file in requests_of_index():
            headers, body = request_parts(extras)
            got_status, got_headers, data = await anyio.to_thread.run_sync(fetch, port, path, method, headers, body)
            where = f"{method} {path} {extras}".strip()
            if got_status != status:
                problems.append(f"{where}: status {got_status}, YuniKorn {status}")
                continue
            if ctype != "-" and got_headers.get("Content-Type") != ctype:
                problems.append(f"{where}: content type {got_headers.get('Content-Type')!r}, YuniKorn {ctype!r}")
            theirs = their_headers[(method, path, extras)]
            for name in CORS_HEADERS:  # the CORS headers and Allow of every route, as YuniKorn sends them
                if got_headers.get(name) != theirs.get(name):
                    problems.append(f"{where}: {name} {got_headers.get(name)!r}, YuniKorn {theirs.get(name)!r}")
            if got_headers.get("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            elif "gzip" in headers.get("Accept-Encoding", ""):
                problems.append(f"{where}: not gzipped")
            if file.endswith(".json") and file != "-":
                want = json.loads((REFERENCE / file).read_text().replace("rm:123", RM))  # ids are tokens here
                problems += [f"{where}: {d}" for d in conform(json.loads(data), want, added=added)]
            elif file.endswith(".yaml"):  # YuniKorn's YAML dump, byte for byte
                if data != (REFERENCE / file).read_bytes():
                    problems.append(f"{where}: YAML\n{data.decode()}")
            elif file.endswith((".txt", ".html")) and status != 200:
                if data != (REFERENCE / file).read_bytes():
                    problems.append(f"{where}: body {data[:80]!r}")
        assert not problems, "\n".join(problems)
        assert added, "the reference's state shows ykbus's documented additions (pendingCount, whyPending)"


def test_the_documented_additions_are_not_yunikorns_own_keys():
    """docs/operations.md lists the keys ykbus adds to YuniKorn's objects (the test above lets
    no other key through): none of them is a key YuniKorn itself writes on that object in any
    reference answer, so the list says what ykbus adds, no more."""
    assert {("AllocationAskDAOInfo", "pendingCount"), ("AllocationAskDAOInfo", "whyPending")} <= YKBUS_FIELDS

    def walk(x, key=""):
        if isinstance(x, dict):
            yield from ((dao_of(key, x), k) for k in x)
            for k, v in x.items():
                yield from walk(v, k)
        elif isinstance(x, list):
            for item in x:
                yield from walk(item, f"{key}[]")

    theirs = {pair for f in REFERENCE.glob("*.json") for pair in walk(json.loads(f.read_text()))}
    assert not YKBUS_FIELDS & theirs, YKBUS_FIELDS & theirs
