"""A recorded demo log, replayed (issue 41): with the purity check on, every plan leaves the
state as it was; replayed twice by `ykbus replay`, the outputs are byte-identical.

The log is made here, never committed: `ykbus.sim.offline.demo_log` runs `ykbus up`'s demo
RMs (`k8s`, `batch`, and `tyjob`, the TYJob controller with the example jobs, a gang among
them) against a core in this process on a virtual clock, and gives the entries `ykbus
record` would write of that run, the same ones every time. Its workloads are `ykbus up`'s
scaled down with the same load per node (k8s to one node, batch to half), so with the
same backlog: asks no node has room for, a queue at its max, nodes reserved, a gang's
placeholders replaced; pods ending, applications added and removed. It runs 45 s of demo
time (about 1,200 entries, 3,500 checked plans) rather than 100: the check fingerprints a
partition's whole object graph twice a plan, and the graph grows with every application
that ends (kept for 3 days): 10 s of `ykbus up`'s full demo (1,400 entries) take about
3 minutes checked, its 100 s (13,000 entries) far longer. In pure Python (YKBUS_PURE_PYTHON=1) this file takes about 35 s
of CPU, nearly all of it the checked replay; the compiled core is hardly faster here, the
check being Python (core/purity.py walks every object by its attributes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from ykbus.core import partition, purity
from ykbus.log.jsonl import encode_entry, encode_output, read_entries
from ykbus.log.replay import replay
from ykbus.sim.batch import BatchWorkload
from ykbus.sim.k8s import K8sWorkload
from ykbus.sim.offline import demo_log

SECONDS = 45.0
K8S = K8sWorkload(nodes_count=1, pods_per_s=10, max_waiting=10)  # `ykbus up`'s: 20 nodes, 200 pods/s, 200
BATCH = BatchWorkload(nodes_count=5, jobs_per_s=2.5, max_waiting=100)  # `ykbus up`'s: 10 nodes, 5 jobs/s, 200
RMS = ("k8s", "batch", "tyjob")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo log file (JSON Lines, as `ykbus record` writes it)."""
    entries = demo_log(SECONDS, K8S, BATCH)
    path = tmp_path_factory.mktemp("demo") / "demo.in.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    return path


@pytest.fixture(scope="module")
def replayed(demo, tmp_path_factory):
    """`ykbus replay` of the demo log, twice, as a user runs it (each in its own process,
    with its own hash seed: set and dict orders of strings differ between the two)."""
    out = tmp_path_factory.mktemp("replayed")
    runs = []
    for seed in ("1", "2"):
        target = out / f"run-{seed}.out.jsonl"
        subprocess.run([sys.executable, "-m", "ykbus.cli", "replay", str(demo), "--out", str(target)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed})
        runs.append(target.read_bytes())
    return runs


def test_the_demo_log_is_the_demo_traffic(demo):
    entries = list(read_entries(demo.read_bytes().splitlines(), str(demo)))
    assert len(entries) > 1000
    kinds = Counter((e.rm, e.kind) for e in entries)
    for rm in RMS:
        assert kinds[rm, "register"] == 1 and kinds[rm, "node"] >= 1 and kinds[rm, "alloc"] >= 1
    assert kinds["k8s", "app"] > 100 and kinds["batch", "app"] > 100  # applications added and removed: churn
    assert kinds["", "tick"] >= SECONDS  # the service's ticks, one a second
    again = demo_log(SECONDS, K8S, BATCH)
    assert b"".join(encode_entry(e) + b"\n" for e in again) == demo.read_bytes()  # the same log every time


def test_replayed_twice_the_outputs_are_byte_identical_and_hold_the_backlog(replayed):
    first, second = replayed
    assert first == second
    placed, released, states = Counter(), Counter(), Counter()
    for line in first.splitlines():
        out = json.loads(line)
        msg = out["msg"]
        if out["kind"] == "alloc":
            placed[out["rm"]] += len(msg.get("new", []))
            released.update(r.get("terminationType", "") for r in msg.get("released", []))
        elif out["kind"] == "state":
            states.update((out["rm"], s["state"]) for s in msg["states"] if s.get("reason"))
    assert all(placed[rm] > 0 for rm in RMS), placed
    assert states["k8s", "FAILED"] > 100 and states["batch", "FAILED"] > 100  # asks no node has room for
    assert states["batch", "SKIPPED"] > 0  # root.adhoc at its max
    assert states["k8s", "RESERVED"] > 0  # nodes reserved for asks that wait
    assert released["STOPPED_BY_RM"] > 1000 and released["PLACEHOLDER_REPLACED"] > 0  # churn; the gang


def test_every_plan_of_the_demo_log_is_checked_pure(demo, replayed, monkeypatch):
    monkeypatch.setattr(partition, "CHECK_PURE", True)
    checked = Counter()
    planned = purity.planned

    def counted(part):
        checked[id(part)] += 1
        return planned(part)

    monkeypatch.setattr(purity, "planned", counted)
    with open(demo, "rb") as f:
        outputs = b"".join(encode_output(out) + b"\n" for out in replay(read_entries(f, str(demo))))
    assert len(checked) == len(RMS) and min(checked.values()) > 5, checked  # each RM's partition, planned often
    assert sum(checked.values()) > 1000
    assert outputs == replayed[0]  # checked or not, the same decisions
