"""Malformed log entries made from valid ones, driven by a `random.Random`.

Under Hypothesis the random object is `st.randoms(use_true_random=False)`, so every choice
is a draw that shrinks; the long campaign (`tests/fuzz/campaign.py`) uses a seeded
`random.Random` so it can count failures instead of stopping at the first.

What is mutated: bodies (a wrong type at any JSON path, a missing field, int64 edges and
non-integer quantities, unknown enum names and numbers, deep nesting, 100 KB+ strings,
non-UTF-8 bytes and lone surrogates inside strings, duplicate keys, invalid JSON, the same
object as MessagePack or MessagePack garbage), the entry itself (kind, rm, encoding), and
entries made up whole: `_core` ticks, rmstate and queue-file entries (YAML alias bombs,
rmIDs that are not subject tokens), nodes recovering duplicate, dangling and `<seq>-<n>`
allocation UUIDs, releases of UUIDs that do not exist. Queue configurations are mutated
inside their YAML too: a registration's or a configuration's text, or a queue file, with a
partition's `topology` made bad (`topology_case`: a repeated level, too many, names that are
not attribute names, values of the wrong type, an unknown key).
"""

from __future__ import annotations

import copy
import json
import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from ykbus import limits
from ykbus.core.entries import Entry
from ykbus.log.build import LogBuilder, allocation, app, ask, node
from ykbus.log.jsonl import read_entries

TRACES = Path(__file__).parent.parent / "traces"

INT_EDGES = [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -1, 0, 2**31 - 1, 2**31, -(2**31) - 1,
             10**30, 1, 1000]
FLOATS = [0.5, 1.5, -0.0, 1e3, 1e300, -1e300, 9.223372036854776e18, 1e-9]
NUMBER_TEXT = [b"1e999", b"-1e999", b"1E3", b"1.0", b"-0", b"9" * 400, b"-" + b"9" * 400, b"0.1e1", b"12345678901234567890"]
NUMBER_STRINGS = ["9223372036854775807", "9223372036854775808", "-1", "1" * 400, "0x10", " 5", "1e3", "NaN",
                  "", "+5", "1.5", "18446744073709551616", "٣"]
ENUM_VALUES: list[Any] = ["", "create", "CREATE ", "NOPE", "UNKNOWN_ACTION_FROM_RM", "DECOMMISSION", -1, 5, 6, 99,
                          2**40, 2**63, 1.0, 2.5, True, None, ["CREATE"]]
WRONG_TYPES: list[Any] = [None, True, False, 0, -1, 1.5, "", "x", [], {}, [1, "a"], {"a": 1}, [[]], {"value": 1}]
BAD_UTF8 = [b"\xff", b"\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"a\x80b", b"\xfe\xff"]
DEPTHS = [64, 200, 500, 1000, 3000, 20000]
LONG = [100_000, 150_000, 400_000, 1_100_000]
RM_IDS = ["rm-1", "rm-2", "", "_core", "a.b", "a b", "*", ">", "rm\t1", "x" * 5000, "rm-1.x", "ünï", "rm\x00"]
KINDS = ["register", "app", "node", "alloc", "config", "unregister", "rmstate", "tick", "nope", "", "TICK",
         "app.extra", "_core"]
EVENTS: list[Any] = ["CONNECTION_LOST", "RECONNECT", "TIMEOUT", "LOST", "", 0, 1, 2, 3, None]

PLACEHOLDER = "\u0001ykfuzz{}\u0001"

# Mutation families a hunt may switch off (`campaign.py --exclude`) to look past failure
# classes already known: names of `mutate_value` ops, "invalid" (invalid JSON and
# MessagePack garbage), "bomb" (YAML bombs and deep YAML), "badrm" (rmIDs that are not
# subject tokens), "uuid" (recovered `<seq>-<n>` UUIDs), "topology" (bad `topology` keys in
# queue configurations). The tests never switch any off.
DISABLED: set[str] = set()


def yaml_bomb(levels: int, width: int = 9, where: str = "properties") -> str:
    """A queue file whose aliases expand to width**levels strings: small text, huge object."""
    lines = [f'a0: &a0 [{", ".join(["lol"] * width)}]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    top = f"*a{levels - 1}"
    if where == "properties":
        tail = ("partitions:\n  - name: default\n    queues:\n      - name: root\n"
                f"        properties: {{p: {top}}}\n")
    else:
        tail = f"partitions: {top}\n"
    return "\n".join(lines) + "\n" + tail


# --- a partition's topology (docs/topology.md), made bad ----------------------------------

LEVELS = ["ykbus.io/block", "ykbus.io/rack", "topology.kubernetes.io/zone", "si/hostname", "rack"]
BAD_LEVEL_NAMES = ["rack row", "-rack", "rack-", "/rack", "ykbus.io/", "Ykbus.IO/rack", "a/b/c", "", "r" * 64, "é",
                   "x" * 300 + "/r", "rack\n", "ykbus.io/rack/", "*"]
BAD_LEVEL_ITEMS: list[Any] = [1, -1, None, True, 1.5, ["rack"], {"a": 1}, {}, []]  # an item of `levels` not a string
BAD_LEVELS: list[Any] = [5, "ykbus.io/rack", {"a": 1}, True, 1.5]  # `levels` not a list
BAD_TOPOLOGIES: list[Any] = [["ykbus.io/rack"], 5, "levels", True, 1.5]  # `topology` not a mapping
QUEUES = [{"name": "root", "submitacl": "*", "queues": [{"name": "jobs"}]}]


def topology_case(rng: random.Random) -> tuple[Any, str, str]:
    """A bad value of a partition's `topology` key: (the value, the path of the error it must
    get below the partition (`.levels[2]`), a piece of the error's words)."""
    kind = rng.choice(["repeated", "too many", "bad name", "wrong item", "wrong levels", "wrong topology",
                       "unknown key"])
    good = rng.sample(LEVELS, rng.randint(0, 3))
    if kind == "repeated":
        good = good or [rng.choice(LEVELS)]
        at = rng.randint(1, len(good))
        twice = rng.choice(good[:at])
        return {"levels": good[:at] + [twice] + good[at:]}, f".levels[{at}]", f"level {twice!r} is repeated"
    if kind == "too many":
        n = limits.MAX_TOPOLOGY_LEVELS + rng.choice([1, 2, 100])
        return {"levels": [f"ykbus.io/level-{i}" for i in range(n)]}, ".levels", f"{n} levels, at most"
    if kind == "unknown key":
        key = rng.choice(["zones", "Levels", "level", "domains"])
        return {"levels": good, key: _pick(rng, [["rack"], 1, None])}, f".{key}", "unknown key"
    if kind == "wrong levels":
        return {"levels": _pick(rng, BAD_LEVELS)}, ".levels", "expected a list"
    if kind == "wrong topology":
        return _pick(rng, BAD_TOPOLOGIES), "", "expected a mapping"
    at = rng.randint(0, len(good))
    if kind == "bad name":
        return ({"levels": good[:at] + [rng.choice(BAD_LEVEL_NAMES)] + good[at:]}, f".levels[{at}]",
                "is not a valid attribute name")
    return {"levels": good[:at] + [_pick(rng, BAD_LEVEL_ITEMS)] + good[at:]}, f".levels[{at}]", \
        "expected a node attribute name"


def bad_topology_config(rng: random.Random, text: str = "") -> tuple[str, str, str]:
    """`text` (a queue configuration; none or one that does not load: a small one of our own)
    with one partition's `topology` made bad by `topology_case`: (the YAML text, the path of
    the error, a piece of its words)."""
    try:
        obj = yaml.safe_load(text) if text else None
    except Exception:  # noqa: BLE001 - not YAML (or an earlier mutation's): a configuration of our own
        obj = None
    parts = obj.get("partitions") if isinstance(obj, dict) else None
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        names = ["default"] + (["gpu"] if rng.random() < 0.3 else [])
        obj = {"partitions": [{"name": name, "queues": copy.deepcopy(QUEUES)} for name in names]}
        parts = obj["partitions"]
        if rng.random() < 0.5:  # beside a valid topology of the other partition, or its own before
            rng.choice(parts)["topology"] = {"levels": rng.sample(LEVELS, 2)}
    i = rng.randrange(len(parts))
    value, below, words = topology_case(rng)
    parts[i]["topology"] = value
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True), f"partitions[{i}].topology{below}", words


def trace_logs() -> dict[str, list[Entry]]:
    """The golden input traces, by name: valid logs to mutate."""
    out = {}
    for path in sorted(TRACES.glob("*.in.jsonl")):
        with open(path, "rb") as f:
            out[path.name.split(".")[0]] = list(read_entries(f, str(path)))
    return out


def generated_log() -> list[Entry]:
    """A flow the traces lack: an RM that registered for MessagePack outputs, two
    partitions, recovery, timeouts, a second RM, and the service's own entries."""
    config = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {max: {vcore: 6000}}
          - name: b
  - name: gpu
    queues:
      - name: root
        submitacl: '*'
"""
    log = LogBuilder("rm-1")
    other = LogBuilder("rm-2")
    entries = [
        log.register(config, extra={"encoding": "msgpack"}),
        log.apps(app("app1", "root.a"), app("app2", "root.b", executionTimeoutMilliSeconds=5000),
                 app("g1", "root", partition="gpu")),
        log.nodes(node("n1", vcore=4000, memory=4000, existing=[allocation("r-1", "k0", "app1", "n1", vcore=500)]),
                  node("n2", vcore=2000, memory=8000),
                  node("g", attributes={"si/node-partition": "gpu"}, gpu=4)),
        log.asks(ask("k1", "app1", vcore=1000, memory=100, max_allocations=3),
                 ask("k2", "app2", vcore=500, priority=3),
                 {**ask("k3", "app2", memory=100), "executionTimeoutMilliSeconds": 1500},
                 ask("gk", "g1", partition="gpu", gpu=1)),
        log.nodes(node("n2", action="DRAIN_NODE")),
        log.release("app1", key="k1"),
        log.tick(2_000_000_000),
        log.entry("config", {"policyGroup": "*", "config": config}, rm=""),
        log.entry("rmstate", {"rmID": "rm-1", "event": "CONNECTION_LOST", "reason": "quiet"}, rm=""),
        log.entry("rmstate", {"rmID": "rm-1", "event": "RECONNECT"}, rm=""),
    ]
    other.seq, other.ts = log.seq, log.ts
    entries += [other.register(""), other.nodes(node("m1", vcore=100)),
                other.apps(app("x", "root.default")), other.asks(ask("xk", "x", vcore=10))]
    log.seq, log.ts = other.seq, other.ts
    entries += [log.nodes(node("n1", action="DECOMISSION")), log.tick(40_000_000_000), log.unregister()]
    return entries


# --- JSON bodies ------------------------------------------------------------------------


def _locations(obj: Any) -> list[tuple[Any, Any, Any]]:
    """(container, key, value) of every value in `obj`, the root as (None, None, obj)."""
    out: list[tuple[Any, Any, Any]] = [(None, None, obj)]
    stack = [obj]
    while stack:
        cur = stack.pop()
        items = cur.items() if isinstance(cur, dict) else enumerate(cur) if isinstance(cur, list) else ()
        for k, v in items:
            out.append((cur, k, v))
            if isinstance(v, dict | list):
                stack.append(v)
    return out


class Body:
    """A JSON object being mutated, and the raw bytes that replace its placeholders."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.raw: dict[str, bytes] = {}

    def placeholder(self, raw: bytes) -> str:
        key = PLACEHOLDER.format(len(self.raw))
        self.raw[key] = raw
        return key

    def encode(self) -> bytes:
        try:
            data = msgspec.json.encode(self.obj)
        except RecursionError:  # a body nested deep by an earlier mutation: keep it as text
            return b"[" * 3000 + b"]" * 3000
        except TypeError:  # a MessagePack body held bytes or an ext type: JSON has neither
            return b'{"ext": "not representable"}'
        for key, raw in self.raw.items():
            data = data.replace(msgspec.json.encode(key), raw)
        return data

    def set(self, container: Any, key: Any, value: Any) -> None:
        if container is None:
            self.obj = value
        else:
            container[key] = value


def _pick(rng: random.Random, pool: list[Any]) -> Any:
    """A fresh copy of one of `pool`: later mutations must not change the pool itself."""
    return copy.deepcopy(rng.choice(pool))


def _long_string(rng: random.Random) -> str:
    n = rng.choice(LONG)
    return rng.choice("aZ-") * n


def _deep(rng: random.Random) -> bytes:
    d = rng.choice(DEPTHS)
    if rng.random() < 0.5:
        return b"[" * d + b"]" * d
    return b'{"a":' * d + b"1" + b"}" * d


def mutate_value(rng: random.Random, body: Body) -> str:
    """One mutation at one place of `body`; returns what it did (for messages)."""
    locs = _locations(body.obj)
    # leaves and small containers are where the interesting fields are
    container, key, value = rng.choice(locs[1:] if len(locs) > 1 and rng.random() < 0.9 else locs)
    op = rng.choice(["type", "type", "delete", "number", "number", "enum", "deep", "long", "nonutf8",
                     "surrogate", "dupkey", "extra", "numtext", "numstring"])
    if op in DISABLED:
        op = "type"
    where = f"{key!r}" if container is not None else "$"
    if op == "type":
        body.set(container, key, _pick(rng, WRONG_TYPES))
    elif op == "delete" and container is not None:
        del container[key]
    elif op == "number":
        body.set(container, key, rng.choice(INT_EDGES + FLOATS))
    elif op == "numtext":
        body.set(container, key, body.placeholder(rng.choice(NUMBER_TEXT)))
    elif op == "numstring":
        body.set(container, key, rng.choice(NUMBER_STRINGS))
    elif op == "enum":
        body.set(container, key, _pick(rng, ENUM_VALUES))
    elif op == "deep":
        body.set(container, key, body.placeholder(_deep(rng)))
    elif op == "long":
        if isinstance(container, dict) and rng.random() < 0.3:  # a long map key
            container[_long_string(rng)] = value
        else:
            body.set(container, key, _long_string(rng))
    elif op == "nonutf8":
        text = value if isinstance(value, str) else "id"
        cut = rng.randint(0, len(text)) if len(text) < 1000 else 0
        raw = msgspec.json.encode(text[:cut])[:-1] + rng.choice(BAD_UTF8) + msgspec.json.encode(text[cut:])[1:]
        body.set(container, key, body.placeholder(raw))
    elif op == "surrogate":
        body.set(container, key, body.placeholder(rng.choice([b'"\\ud800"', b'"a\\udfffb"', b'"\\u0000"'])))
    elif op == "dupkey" and isinstance(container, dict):
        # {"k": v, "k": other}: JSON parsers disagree on which one wins
        container[body.placeholder(msgspec.json.encode(key))] = _pick(rng, WRONG_TYPES)
    elif op == "extra" and isinstance(value, dict):
        value[rng.choice(["unknown", "UUID", "rmID", "\u00e9", ""])] = _pick(rng, WRONG_TYPES)
    else:
        body.set(container, key, _pick(rng, WRONG_TYPES))
    return f"{op} at {where[:40]}"


def _msgpack_str(data: bytes) -> bytes:
    """A MessagePack str holding `data` as is (even when it is not UTF-8)."""
    n = len(data)
    if n < 32:
        return bytes([0xA0 | n]) + data
    if n < 256:
        return b"\xd9" + bytes([n]) + data
    return b"\xda" + struct.pack(">H", n) + data


def msgpack_garbage(rng: random.Random, obj: Any) -> bytes:
    d = rng.choice(DEPTHS)
    choices: list[Callable[[], bytes]] = [
        lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))),
        lambda: b"\x91" * d + b"\xc0",  # arrays nested d deep
        lambda: b"\x81\xa1a" * d + b"\xc0",  # maps nested d deep
        lambda: b"\x81" + _msgpack_str(b"rmID") + _msgpack_str(rng.choice(BAD_UTF8)),  # str not UTF-8
        lambda: b"\x81" + _msgpack_str(b"rmID") + b"\xc4\x02rm",  # bin where a str is expected
        lambda: b"\x81" + _msgpack_str(b"nodes") + b"\xc7\x01\x05x",  # an ext type
        lambda: b"\x81" + _msgpack_str(b"asks") + b"\xdd\xff\xff\xff\xff",  # array of 4G items, truncated
        lambda: b"\x81" + _msgpack_str(b"x") + b"\xcf" + b"\xff" * 8,  # uint64 max
        lambda: msgspec.msgpack.encode(obj)[: rng.randint(0, 40)],  # truncated
        lambda: msgspec.msgpack.encode(obj) + b"\xc0",  # trailing bytes
        lambda: b"\xc1",  # never used
        lambda: msgspec.msgpack.encode([obj]),
    ]
    try:
        return rng.choice(choices)()
    except (OverflowError, TypeError, RecursionError):  # obj holds what MessagePack cannot carry
        return b"\xc1"


def mutate_entry(rng: random.Random, entry: Entry) -> Entry:
    """`entry` with one or more mutations of its body or of itself."""
    try:
        obj = msgspec.json.decode(entry.msg) if entry.encoding == "json" else msgspec.msgpack.decode(entry.msg)
    except Exception:  # noqa: BLE001 - an entry mutated before: start from an empty object
        obj = {}
    body = Body(obj)
    if (isinstance(obj, dict) and isinstance(obj.get("config"), str) and obj["config"] and "topology" not in DISABLED
            and rng.random() < 0.3):  # a queue configuration: its topology made bad, inside the YAML
        obj["config"] = bad_topology_config(rng, obj["config"])[0]
    else:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            mutate_value(rng, body)
    r = rng.random()
    kind, rm, encoding = entry.kind, entry.rm, entry.encoding
    if r < 0.55:
        data, encoding = body.encode(), "json"
    elif r < 0.65 and "invalid" not in DISABLED:
        data, encoding = _invalid_json(rng, body.encode()), "json"
    elif r < 0.75:
        try:
            data = msgspec.msgpack.encode(body.obj)
        except (OverflowError, TypeError, RecursionError):
            data = b"\xc1"
        encoding = "msgpack"
    elif r < 0.82 and "invalid" not in DISABLED:
        data, encoding = msgpack_garbage(rng, body.obj), "msgpack"
    elif r < 0.9:
        data = body.encode()
        kind = rng.choice(KINDS)
    elif r < 0.96:
        data = body.encode()
        rm = rng.choice(RM_IDS if "badrm" not in DISABLED else ["rm-1", "rm-2", "", "_core"])
    else:
        data = body.encode()
        encoding = rng.choice(["msgpack", "bogus", "JSON", ""])
    return Entry(seq=entry.seq, ts=entry.ts, rm=rm, kind=kind, msg=data, encoding=encoding)


def _invalid_json(rng: random.Random, data: bytes) -> bytes:
    ops: list[Callable[[], bytes]] = [
        lambda: data[: rng.randint(0, max(0, len(data) - 1))],
        lambda: data + rng.choice([b"}", b",", b"x", b" {}", b"\x00"]),
        lambda: rng.choice([b"", b"null", b"[]", b'"text"', b"1", b"{", b"}", b"\xff\xfe", b"{}{}", b"true",
                            b'{"a":1} trailing', b"\x00", b"[" * 100_000, b'"\\ud800"', b"{\n}\n", b"NaN"]),
        lambda: (lambda i: data[:i] + bytes([rng.getrandbits(8)]) + data[i + 1:])(rng.randint(0, max(0, len(data) - 1))),
        lambda: b"\n" + data + b"\n",  # whitespace around an object
    ]
    return rng.choice(ops)()


# --- entries made up whole ----------------------------------------------------------------


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def special_entry(rng: random.Random, base: list[Entry], n: int) -> Entry:
    """A made-up entry (seq and ts are set by `assemble`). `n`: how long the log will be."""
    rm = next((e.rm for e in base if e.kind == "register" and e.rm), "rm-1")
    app_ids = [a.get("applicationID") for e in base if e.kind == "app" for a in _items(e, "new")] or ["app1"]
    node_ids = [x.get("nodeID") for e in base if e.kind == "node" for x in _items(e, "nodes")] or ["n1"]
    an_app = str(rng.choice(app_ids))
    kind = rng.choice(["tick", "rmstate", "config", "recover", "recover", "release", "unregister", "register"])
    if kind == "tick":
        return Entry(0, 0, "", "tick", rng.choice([b"{}", b"garbage", b"\xff", b"[]", b""]))
    if kind == "rmstate":
        rm_id = rng.choice((RM_IDS if "badrm" not in DISABLED else ["rm-1", "rm-2", "_core"]) + [rm])
        body = {"rmID": rm_id, "event": rng.choice(EVENTS), "reason": rng.choice(["", "x" * 200_000])}
        return Entry(0, 0, rng.choice(["", "", rm]), "rmstate", _json(body))
    if kind == "config":
        bombs = [] if "bomb" in DISABLED else [
            yaml_bomb(rng.choice([8, 9, 12]), where=rng.choice(["properties", "partitions"])), "a: " + "[" * 5000]
        topology = [] if "topology" in DISABLED else [bad_topology_config(rng)[0]]
        text = rng.choice(bombs + topology + ["partitions: [", "{", "partitions: []", "", "x: " + "y" * 1_100_000,
                                              "partitions:\n  - name: default\n    queues: [{name: root, submitacl: '*'}]\n",
                                              "&a [*a]", "!!python/object:os.system []"])
        group = rng.choice(["*", "queues", "", "x" * 1000])
        return Entry(0, 0, rng.choice(["", "", rm]), "config", _json({"policyGroup": group, "config": text}))
    if kind == "recover":
        def uuid() -> str:
            return rng.choice(([] if "uuid" in DISABLED else [f"{rng.randint(1, n + 3)}-{rng.randint(0, 2)}"])
                              + ["dup", "", "r-1", "x" * rng.choice([10, 150_000])])
        allocs = [allocation(uuid(), f"rk{i}", an_app if rng.random() < 0.8 else "no-such-app",
                             "" if rng.random() < 0.7 else rng.choice(["fresh", "other"]),
                             "default" if rng.random() < 0.8 else rng.choice(["", "nope"]),
                             vcore=rng.choice([1, 1, 100, 0, 2**63 - 1]))
                  for i in range(rng.randint(1, 4))]
        info = node(rng.choice(["fresh", "fresh2", str(rng.choice(node_ids))]), vcore=rng.choice([10, 10_000, 2**63 - 1]),
                    existing=allocs)
        return Entry(0, 0, rm, "node", _json({"rmID": rm, "nodes": [info]}))
    if kind == "release":
        rel = [{"applicationID": rng.choice([an_app, "", "nope"]), "UUID": rng.choice(["", "1-0", "nope", "dup"]),
                "allocationKey": rng.choice(["", "k1", "nope"]), "partitionName": "default",
                "terminationType": rng.choice(["STOPPED_BY_RM", 9, "X", 1])} for _ in range(rng.randint(1, 3))]
        return Entry(0, 0, rm, "alloc", _json({"releases": {"allocationsToRelease": rel * rng.choice([1, 2])}}))
    if kind == "unregister":
        return Entry(0, 0, rng.choice([rm, "", "nobody"]), "unregister", rng.choice([b"{}", b"[]", b"x"]))
    body = {"rmID": rng.choice([rm, "other", ""]), "config": "",
            "extraConfig": {"encoding": rng.choice(["json", "msgpack", "bson", ""])}}
    return Entry(0, 0, rng.choice([rm, "", "other"]), "register", _json(body))


def _items(e: Entry, key: str) -> list[dict[str, Any]]:
    """The objects in list `key` of a JSON body, whatever shape the body has."""
    try:
        obj = msgspec.json.decode(e.msg) if e.encoding == "json" else {}
    except Exception:  # noqa: BLE001
        return []
    items = obj.get(key) if isinstance(obj, dict) else None
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


def assemble(entries: list[Entry]) -> list[Entry]:
    """Entries renumbered 1..n, with ts never going back."""
    out, ts = [], 0
    for i, e in enumerate(entries, 1):
        ts = max(ts, e.ts)
        out.append(Entry(seq=i, ts=ts, rm=e.rm, kind=e.kind, msg=e.msg, encoding=e.encoding))
    return out


def mutated_log(rng: random.Random, base: list[Entry], mutations: int, specials: int) -> list[Entry]:
    """`base` with `mutations` entries mutated (in place, or as an inserted copy) and
    `specials` made-up entries inserted, then renumbered."""
    entries = list(base)
    n = len(base) + mutations + specials
    for _ in range(mutations):
        i = rng.randrange(len(entries))
        bad = mutate_entry(rng, entries[i])
        if rng.random() < 0.5:
            entries[i] = bad
        else:
            entries.insert(rng.randint(i, len(entries)), bad)
    for _ in range(specials):
        i = rng.randint(0, len(entries))
        e = special_entry(rng, base, n)
        ts = entries[i - 1].ts if i else base[0].ts
        entries.insert(i, Entry(0, ts + rng.choice([0, 1, 10**9, 31 * 10**9, 4 * 24 * 3600 * 10**9]),
                                e.rm, e.kind, e.msg, e.encoding))
    return assemble(entries)
