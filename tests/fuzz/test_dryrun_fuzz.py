"""Fuzz the dry run (issue 43, core/dryrun.py): any JSON-like request, valid ones mutated
field by field, over a core holding a real state (the preemption example's log), answers or
raises DryRunError naming a field, never anything else, and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profile import FUZZ
from ykbus.core.dryrun import DryRunError, would_fit
from ykbus.core.snapshot import dump_snapshot
from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core

ROOT = Path(__file__).resolve().parents[2]
_guard = guarded_core(None)
for _entry in read_entries((ROOT / "examples" / "preemption.jsonl").read_bytes().splitlines(), "preemption.jsonl"):
    list(_guard.apply(_entry))
CORE = _guard.core
BEFORE = dump_snapshot(CORE)
_part = next(p for rm in CORE.rms.values() for p in rm.partitions.values())
LEAVES = [q.path for q in _part.queues.values() if q.leaf]
QUEUES = [*list(_part.queues), "root.nope", "", "x" * 300]

SCALAR = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True)
          | st.text(max_size=20) | st.sampled_from(QUEUES))
JSONISH = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=4), max_leaves=20)
QUANTITY = st.integers(1, 20_000) | st.integers(-5, 2**63) | st.sampled_from([0, 2**63 - 1])  # mostly fine
ASK = st.fixed_dictionaries({
    "allocationKey": st.text(min_size=1, max_size=8), "applicationID": st.just("dry"),
    "resourceAsk": st.fixed_dictionaries({"resources": st.dictionaries(st.sampled_from(["vcore", "memory", "gpu"]),
                                                                       st.fixed_dictionaries({"value": QUANTITY}),
                                                                       min_size=1, max_size=3)}),
    "maxAllocations": st.integers(0, 20) | st.integers(-2, 50) | st.sampled_from([2**31 - 1, 20_000]),
    "priority": st.integers(-(2**31), 2**31 - 1)})
APPLICATION = st.fixed_dictionaries({
    "applicationID": st.just("dry"), "queueName": st.sampled_from(LEAVES) | st.sampled_from(QUEUES),
    "partitionName": st.sampled_from(["", "", _part.name, "nope"]),
    "tags": st.dictionaries(st.sampled_from(["ykbus.io/topology-required", "ykbus.io/topology-preferred", "x"]),
                            st.sampled_from(["ykbus.io/rack", "nope", ""]), max_size=2)})
REQUEST = st.fixed_dictionaries({"application": APPLICATION, "asks": st.lists(ASK, min_size=1, max_size=4)})

# a core with racks and blocks (the topology golden trace), for asks with topology tags of
# their own, task groups and placeholders (each task group in a domain of its own)
_topo = guarded_core(None)
for _entry in read_entries((ROOT / "tests" / "traces" / "topology.in.jsonl").read_bytes().splitlines(), "topology"):
    list(_topo.apply(_entry))
TOPO = _topo.core
TOPO_BEFORE = dump_snapshot(TOPO)
_tpart = next(p for rm in TOPO.rms.values() for p in rm.partitions.values())
LEVEL_TAGS = st.dictionaries(st.sampled_from(["ykbus.io/topology-required", "ykbus.io/topology-preferred"]),
                             st.sampled_from([*_tpart.records.config.topology.levels, "nope"]), max_size=1) | \
    st.dictionaries(st.sampled_from(["ykbus.io/topology-required", "ykbus.io/topology-preferred"]),
                    st.sampled_from([*_tpart.records.config.topology.levels, "nope"]), max_size=2)
TOPO_ASK = st.fixed_dictionaries({
    "allocationKey": st.text("abc", min_size=1, max_size=2), "applicationID": st.just("dry"),
    "resourceAsk": st.fixed_dictionaries({"resources": st.dictionaries(st.sampled_from(["gpu", "vcore"]),
                                                                       st.fixed_dictionaries({"value": st.integers(1, 9)}),
                                                                       min_size=1, max_size=2)}),
    "maxAllocations": st.integers(0, 12)},
    optional={"tags": LEVEL_TAGS, "taskGroupName": st.sampled_from(["a", "b", "c", ""]), "placeholder": st.booleans(),
              "priority": st.integers(-2, 2)})
TOPO_REQUEST = st.fixed_dictionaries({
    "application": st.fixed_dictionaries({
        "applicationID": st.just("dry"), "queueName": st.sampled_from([q.path for q in _tpart.records.queues.values() if q.leaf]),
        "ugi": st.just({"user": "u"})},
        optional={"tags": LEVEL_TAGS, "placeholderAsk": st.just({"resources": {"gpu": {"value": 8}}})}),
    "asks": st.lists(TOPO_ASK, min_size=1, max_size=5)})


def _answers_or_names_a_field(request) -> None:
    try:
        answer = would_fit(CORE, request)
    except DryRunError as exc:
        assert ": " in str(exc), str(exc)  # `<field>: <why>`
        return
    json.dumps(answer)  # plain values only
    assert answer["fits"] in (True, False)


@FUZZ
@given(request=REQUEST, field=st.sampled_from(["application", "asks", "rm", "extra", None]), junk=JSONISH)
def test_requests_mutated_field_by_field_are_answered_or_refused_by_name(request, field, junk):
    if field is not None:
        request = {**request, field: junk}
    _answers_or_names_a_field(request)
    assert dump_snapshot(CORE) == BEFORE


@FUZZ
@given(junk=JSONISH)
def test_any_json_is_answered_or_refused_by_name(junk):
    _answers_or_names_a_field(junk)


@FUZZ
@given(request=TOPO_REQUEST)
def test_asks_with_topology_tags_of_their_own_are_answered_or_refused_by_name(request):
    try:
        answer = would_fit(TOPO, request)
    except DryRunError as exc:
        assert ": " in str(exc), str(exc)
    else:
        json.dumps(answer)
        if answer["fits"]:  # every allocation placed, on a node of the partition
            assert len(answer["placement"]) == answer["members"]
            assert all(p["nodeID"] in _tpart.records.nodes for p in answer["placement"])
    assert dump_snapshot(TOPO) == TOPO_BEFORE
