"""One minimal log per failure class the fuzzers found, through the same checks.

Each case is the smallest input we know that breaks a rule of tests/fuzz/checks.py; the
test name says the class. They fail until the core (or the log layer) is fixed, and then
keep the classes from coming back. Cases are kept even when a fuzzer finds them again,
because they say in one line what is wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.test_topology_gangs import QUEUES as TOPOLOGY  # a partition of blocks and racks
from tests.fuzz.checks import check_log, safe_line
from tests.fuzz.mutate import yaml_bomb
from ykbus.core.entries import Entry
from ykbus.log.build import LogBuilder, allocation, app, ask, node
from ykbus.log.jsonl import LogError, encode_entry, read_entries

MB = 1 << 20


def _flow(log: LogBuilder) -> list[Entry]:
    return [log.register(), log.apps(app("a1")), log.nodes(node("n1", vcore=8000, memory=8000))]


def non_utf8_in_a_json_string():
    log = LogBuilder("rm-1")
    return _flow(log) + [log.entry("alloc", b'{"asks":[{"allocationKey":"k\xff","applicationID":"a1"}]}')]


def json_nested_1000_deep():
    log = LogBuilder("rm-1")
    return _flow(log) + [log.entry("alloc", b'{"asks":' + b"[" * 1000 + b"]" * 1000 + b"}")]


def yaml_alias_bomb():
    log = LogBuilder("rm-1")
    return [log.register(yaml_bomb(9))]


def yaml_nested_deep():
    log = LogBuilder("rm-1")
    return [log.register("a: " + "[" * 5000)]


def identifier_repeated_in_its_rejection():
    """An application id of 600 KB added twice: the rejection carries the id and a reason
    that repeats it, 1.2 MB in one item that cannot be split under NATS's 1 MiB (the input
    was 600 KB: it came through that server)."""
    log = LogBuilder("rm-1")
    big = "a" * 600_000
    return _flow(log) + [log.apps(app(big)), log.apps(app(big))]


def execution_timeout_int64_max():
    log = LogBuilder("rm-1")
    return _flow(log) + [log.apps(app("a2", executionTimeoutMilliSeconds=2**63 - 1)),
                         log.asks(ask("k", "a2", vcore=1))]  # Running: its timer is set


def ask_execution_timeout_int64_max():
    log = LogBuilder("rm-1")
    return _flow(log) + [log.asks({**ask("k", "a1", vcore=1), "executionTimeoutMilliSeconds": 2**63 - 1})]


def max_allocations_int32_max():
    log = LogBuilder("rm-1")
    return [log.register(), log.apps(app("a1")), log.nodes(node("n1", vcore=2**62)),
            log.asks(ask("k", "a1", vcore=1, max_allocations=2**31 - 1))]


def rmstate_rm_id_not_a_subject_token():
    log = LogBuilder("rm-1")
    return [log.entry("rmstate", {"rmID": "a.b c", "event": "CONNECTION_LOST"}, rm="")]


def recovered_uuid_collides_with_an_issued_one():
    """A node recovers allocation `5-0`; entry 5 then issues `5-0` too."""
    log = LogBuilder("rm-1")
    return [log.register(), log.apps(app("a1")),
            log.nodes(node("n1", vcore=8000, existing=[allocation("5-0", "r", "a1", "n1", vcore=1)])),
            log.tick(),
            log.asks(ask("k", "a1", vcore=1))]


def placeholder_ask_updated_into_a_real_one():
    """A gang that must run in one rack reserved the closest (b1/r1) while its placeholders
    waited; its placeholder ask is then sent again with `placeholder: false`: the rack stayed
    reserved with no placeholder of the gang waiting (found by the fuzz campaign, seed 777313)."""
    log = LogBuilder("rm-1")
    racks = {"r1": ("b1", 3), "r2": ("b1", 2), "r3": ("b2", 4)}  # rack -> (block, GPUs taken of 4 by `fill`)
    gang = {"placeholderAsk": {"resources": {"gpu": {"value": 4}}}, "tags": {"ykbus.io/topology-required": "ykbus.io/rack"}}
    placeholders = {**ask("p", "other", max_allocations=4, gpu=1), "taskGroupName": "w", "placeholder": True}
    return [log.register(TOPOLOGY),
            log.nodes(*[node(f"{r}-0", attributes={"ykbus.io/block": b, "ykbus.io/rack": r}, gpu=4)
                        for r, (b, _) in racks.items()]),
            log.apps(app("fill", "root.jobs"), app("other", "root.jobs", **gang)),
            log.asks(*[{**ask(f"f-{r}", "fill", gpu=taken), "tags": {"yunikorn.apache.org/requiredNode": f"{r}-0"}}
                       for r, (_, taken) in racks.items()]),
            log.asks(placeholders),
            log.tick(3_000_000_000),
            log.asks({**placeholders, "placeholder": False})]


def recovered_placeholder_completes_a_gang():
    """Gang `soft` (placeholderAsk 2 cores) asked one placeholder of 1 core: incomplete. A
    node then comes with the gang's other placeholder running on it (recovery): the gang is
    whole, yet its ask kept `GangIncomplete` (found by the fuzz campaign, seed 777313)."""
    log = LogBuilder("rm-1")
    return [log.register(),
            log.nodes(node("n1", vcore=500)),
            log.apps(app("soft", "root.default", placeholderAsk={"resources": {"vcore": {"value": 2000}}},
                         gangSchedulingStyle="Soft")),
            log.asks({**ask("q", "soft", vcore=1000), "taskGroupName": "workers", "placeholder": True}),
            log.tick(),
            log.nodes(node("n2", vcore=1000, existing=[{**allocation("u-soft", "p", "soft", "n2", vcore=1000),
                                                         "taskGroupName": "workers", "placeholder": True}]))]


def reload_changes_the_reservation_delay():
    """Ask M has waited the reservation delay of 1 s (marked to reserve a node); the
    operator's queue file then brings the default delay: live, M kept its mark, while a
    snapshot's load derives it from the delay in force, so the restored core had it
    elsewhere and a restarted core could decide otherwise (found by the fuzz campaign, seed
    1201)."""
    log = LogBuilder("rm-1")
    queues = ("partitions:\n  - name: default\n    reservationdelay: 1s\n    queues:\n      - name: root\n"
              "        submitacl: '*'\n        queues:\n          - name: jobs\n          - name: small\n"
              "            resources: {max: {vcore: 3}}\n")
    return [log.register(queues),
            log.nodes(node("n2", vcore=4000)),
            log.apps(app("smalls", "root.jobs"), app("large", "root.jobs")),
            log.asks(ask("s", "smalls", vcore=1000, max_allocations=8)),
            log.asks(ask("L", "large", vcore=3000), ask("M", "large", vcore=2500)),
            log.tick(1_000_000_000),
            log.entry("config", {"policyGroup": "queues",  # the operator's queue file (`ykbus up`)
                                 "config": "partitions:\n  - name: default\n    queues: [{name: root, submitacl: '*'}]\n"},
                      rm="")]


def domain_hold_ends_beside_an_ask_with_none_to_reserve():
    """The log the fuzz campaign (seed 5252) found, as it wrote it: gangs `big` and `other`
    (4 × 1 GPU, one rack each) wait, holding racks; `s` (1 GPU) is past the reservation
    delay with no node to reserve, which the planner remembers for its shape; then `big` is
    placed and its hold ends. Live, the memo stayed and `s` reserved nothing; a core loaded
    from a snapshot has no memo and reserved r2-0: a restarted core decided otherwise. A
    hold's end now tells the planner, as a reservation's end does (core/holds.py)."""
    path = Path(__file__).parent / "cases" / "hold-ends-beside-none-to-reserve.in.jsonl"
    return list(read_entries(path.read_bytes().splitlines(), path.name))

CORE_CASES = [non_utf8_in_a_json_string, json_nested_1000_deep, yaml_alias_bomb, yaml_nested_deep,
              identifier_repeated_in_its_rejection, execution_timeout_int64_max,
              ask_execution_timeout_int64_max, max_allocations_int32_max, rmstate_rm_id_not_a_subject_token,
              recovered_uuid_collides_with_an_issued_one, placeholder_ask_updated_into_a_real_one,
              recovered_placeholder_completes_a_gang, reload_changes_the_reservation_delay,
              domain_hold_ends_beside_an_ask_with_none_to_reserve]


@pytest.mark.parametrize("case", CORE_CASES, ids=[c.__name__ for c in CORE_CASES])
def test_core_class(case):
    entries = case()
    check_log(entries, cuts=[len(entries) - 2, len(entries) - 1, len(entries)])


# --- the log file layer (encode_entry / read_entries) ------------------------------------------


def _round_trip(entry: Entry, tmp_path) -> list[Entry]:
    path = tmp_path / "log.in.jsonl"
    path.write_bytes(encode_entry(entry) + b"\n")
    with open(path, "rb") as f:
        return list(read_entries(f, str(path)))


@pytest.mark.parametrize("body", [b'{"asks": []\n}', b'\n{"asks": []}', b' {"asks": []}'],
                         ids=["newline-inside", "newline-before", "space-before"])
def test_log_keeps_a_json_object_body_with_whitespace_exactly(body, tmp_path):
    """The recorder writes an object body verbatim: a newline in it splits the JSONL line."""
    entry = Entry(1, 1, "rm-1", "alloc", body)
    assert _round_trip(entry, tmp_path) == [entry]


def test_log_keeps_an_empty_msgpack_body(tmp_path):
    """An empty MessagePack body is written without `msg_b64` and read back as `{}`."""
    entry = Entry(1, 1, "rm-1", "alloc", b"", "msgpack")
    assert _round_trip(entry, tmp_path) == [entry]


@pytest.mark.parametrize("body", [b'{"rmID":"\xff"}', b'{"a":' + b"[" * 3000 + b"]" * 3000 + b"}"],
                         ids=["non-utf8", "deep"])
def test_log_records_any_body(body, tmp_path):
    """`ykbus record` writes every acked input; encode_entry must not raise on any body."""
    entry = Entry(1, 1, "rm-1", "alloc", body)
    assert _round_trip(entry, tmp_path) == [entry]


@pytest.mark.parametrize("line", [
    b'{"seq":1,"ts":1,"kind":"alloc","msg_b64":"abc"}',
    b'{"seq":1,"ts":1,"kind":"alloc","msg_b64":"\\u00e9"}',
    b'{"seq":1,"ts":1,"kind":"alloc","msg_b64":"@@@"}',
    b'{"seq":1,"ts":1,"kind":"alloc","msg":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"seq":1,"ts":1,"kind":"al\xfeloc","msg":{}}',
], ids=["b64-padding", "b64-non-ascii", "b64-not-alphabet", "deep-msg", "non-utf8-kind"])
def test_reader_rejects_a_broken_line_with_log_error(line):
    with pytest.raises(LogError):
        list(read_entries([line]))


def test_safe_line_saves_what_encode_entry_cannot():
    """The fuzz suite's own fallback writer: failing logs are always saved readable."""
    entry = Entry(1, 1, "rm-1", "alloc", b'{"rmID":"\xff"}')
    assert list(read_entries([safe_line(entry)])) == [entry]
