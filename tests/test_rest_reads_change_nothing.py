"""Readers change nothing (issue 41): serving the REST API and the metrics leaves every
object of the core as it was, derived read models included.

- Statically: no module of src/ykbus/rest/ calls a method that changes a read model of
  the core (core/readmodel.py), such as `tally` (a `watch`, which switched on a fold of the
  nodes' usage from a reader, is gone: readers build the usage from the nodes).
- At run time: after the golden traces and the preemption example, the whole object graph
  reachable from the core (records, indexes, read models, caches: not only what a snapshot
  holds) is fingerprinted, every GET route of the REST API and a metrics exposition are
  served, and the fingerprint is the same.
"""

from __future__ import annotations

import ast
import enum
import re
from pathlib import Path
from typing import Any

import pytest

from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core
from ykbus.rest import router
from ykbus.rest.metrics import Metrics

ROOT = Path(__file__).resolve().parents[1]
REST = ROOT / "src" / "ykbus" / "rest"
READMODEL = ROOT / "src" / "ykbus" / "core" / "readmodel.py"
LOGS = [ROOT / "tests" / "traces" / "applications.in.jsonl", ROOT / "tests" / "traces" / "gang-timeouts.in.jsonl",
        ROOT / "examples" / "preemption.jsonl"]
READS = {"dao", "types", "nodes_in", "counts", "of"}  # the read models' methods that only read


def _mutators() -> set[str]:
    """The methods of core/readmodel.py's classes that are not among READS."""
    tree = ast.parse(READMODEL.read_text())
    return {f.name for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body
            if isinstance(f, ast.FunctionDef) and not f.name.startswith("__") and f.name not in READS}


def test_rest_calls_no_method_that_changes_a_read_model():
    mutators = _mutators()
    assert {"tally", "count", "app_entered"} <= mutators
    found = []
    for path in sorted(REST.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutators:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.func.attr}()")
    assert not found, "a reader changes the core's read models: " + ", ".join(found)


def fingerprint(root: Any) -> list[Any]:
    """Every value reachable from `root`, in a deterministic walk (objects by their slots
    and attributes, containers in their order; an object met again by its first index)."""
    out: list[Any] = []
    seen: dict[int, int] = {}
    keep: list[Any] = []  # alive while walking, so no id is reused
    stack = [root]
    while stack:
        obj = stack.pop()
        if obj is None or isinstance(obj, (bool, int, float, str, bytes, enum.Enum)):
            out.append(obj)
            continue
        if callable(obj) and not hasattr(obj, "__dict__") and not hasattr(type(obj), "__slots__"):
            out.append(("callable", getattr(obj, "__qualname__", type(obj).__name__)))
            continue
        if id(obj) in seen:
            out.append(("ref", seen[id(obj)]))
            continue
        seen[id(obj)] = len(seen)
        keep.append(obj)
        kind = type(obj)
        out.append(("obj", kind.__qualname__))
        if isinstance(obj, dict):
            out.append(len(obj))
            for k, v in obj.items():
                stack += [v, k]
        elif isinstance(obj, (list, tuple)):
            out.append(len(obj))
            stack += list(reversed(obj))
        elif isinstance(obj, (set, frozenset)):
            out.append(sorted(map(repr, obj)))
        elif kind.__module__.startswith(("ykbus", "msgspec")) or hasattr(obj, "__dict__"):
            names = [s for c in kind.__mro__ for s in getattr(c, "__slots__", ()) if hasattr(obj, s)]
            names += sorted(getattr(obj, "__dict__", {}))
            if hasattr(kind, "__struct_fields__"):
                names += list(kind.__struct_fields__)
            for name in reversed(names):
                stack += [getattr(obj, name), name]
        else:
            out.append(repr(obj))
    return out


def _paths(st: router.RestState) -> list[str]:
    """A path for every GET route, its parameters filled from the state where it has them."""
    core = st.core
    rm, p = st.partitions()[0]
    values = {
        "part": st.partition_name(rm, p),
        "app_id": next(iter(p.apps), "none"),
        "node_id": next(iter(p.nodes), "none"),
        "state": "active",
        "name": "root",
    }
    out = []
    for pattern, method, _fn, _fixed in router.ROUTES:
        if method != "GET":
            continue
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: values[m.group(1)], pattern.pattern)
        out.append(path)
    assert core.rms
    return out


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_serving_every_route_and_the_metrics_changes_nothing(log):
    guard = guarded_core(None)
    for entry in read_entries(log.read_bytes().splitlines(), str(log)):
        list(guard.apply(entry))
    st = router.RestState(live=lambda: guard.core, started=0)
    metrics = Metrics(st, lambda: {"entries": 0, "input_lag_entries": 0, "last_applied_sequence": 0,
                                   "allocations_decided": 0, "snapshot_age_seconds": 0.0, "rms": {},
                                   "role": "leader"})
    before = fingerprint(guard.core)
    served, paths = 0, _paths(st)
    for path in paths:
        status, _, _, _ = router.answer(st, router.Request("GET", path))
        served += status == 200
    metrics.exposition()
    assert served >= len(paths) - 4  # a few paths name an object the trace lacks (404): changing nothing either
    assert fingerprint(guard.core) == before, f"{log.name}: serving the REST API or the metrics changed the core"
