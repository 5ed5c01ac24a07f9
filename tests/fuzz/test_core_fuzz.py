"""Hypothesis mutating valid logs through the in-process core, and the JSONL reader.

Every entry of every generated log goes through `tests.fuzz.checks.Run`: apply never
raises nor runs away, malformed RM input is answered, the safety invariants hold, every
output can be published; at the end the log replays identically, a snapshot plus the tail
equals the full replay, and the log file round-trips. A failure names its class and
leaves the log that broke in `.fuzz-failures/` (replay it with `ykbus replay`).
"""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.checks import Failure, Run
from tests.fuzz.mutate import (
    BAD_LEVEL_ITEMS,
    BAD_LEVEL_NAMES,
    BAD_LEVELS,
    BAD_TOPOLOGIES,
    BAD_UTF8,
    DEPTHS,
    bad_topology_config,
    generated_log,
    mutated_log,
    trace_logs,
)
from tests.fuzz.profile import FUZZ, READER
from ykbus.core.entries import Entry
from ykbus.log.jsonl import LogError, encode_entry, read_entries

BASES = {**trace_logs(), "generated": generated_log()}


@pytest.mark.parametrize("name", sorted(BASES))
def test_valid_logs_pass_every_check(name):
    """The checker itself: the unmutated logs break no rule (so a failure below is the core's)."""
    run = Run()
    run.apply_all(BASES[name])
    run.finish(cuts=[0, len(BASES[name]) // 2])


def test_the_checker_notices_an_unanswered_entry_and_an_oversized_output(monkeypatch):
    from ykbus.core import Core
    from ykbus.core.entries import Output
    from ykbus.si import messages as m

    run = Run()
    run.apply(BASES["bad-input"][0])
    monkeypatch.setattr(Core, "apply", lambda self, entry, decoded=None: [])
    with pytest.raises(Failure, match=r"\[unanswered\]"):
        run.apply(Entry(2, 2, "rm-1", "alloc", b"{not json"))
    huge = m.EventBatch(events=[m.EventRecord(message="x" * (1 << 20))])
    monkeypatch.setattr(Core, "apply", lambda self, entry, decoded=None: [Output(entry.seq, "rm-1", "event", huge)])
    with pytest.raises(Failure, match=r"\[wire\].*cannot be split"):
        run.apply(Entry(3, 3, "rm-1", "tick", b"{}"))


@FUZZ
@given(rnd=st.randoms(use_true_random=False), base=st.sampled_from(sorted(BASES)),
       mutations=st.integers(1, 4), specials=st.integers(0, 2))
def test_mutated_logs_keep_the_core_safe(rnd, base, mutations, specials):
    entries = mutated_log(rnd, BASES[base], mutations, specials)
    run = Run()
    run.apply_all(entries)
    run.finish(cuts=sorted({rnd.randint(0, len(entries)) for _ in range(2)}))


# --- queue configurations with a bad topology (docs/topology.md) ---------------------------

TOPOLOGY_BASE = BASES["topology"][:7]  # levels block and rack, gangs placed in racks and one waiting
ROUTES = ["register", "config", "queue file"]


def _config_entry(route: str, text: str) -> Entry:
    """`text` as the RM's registration again, the RM's own configuration, or the operator's
    queue file, after TOPOLOGY_BASE."""
    last = TOPOLOGY_BASE[-1]
    rm, kind, body = {
        "register": ("rm-1", "register", {"rmID": "rm-1", "version": "test", "policyGroup": "queues", "config": text,
                                          "extraConfig": {}}),
        "config": ("rm-1", "config", {"rmID": "rm-1", "policyGroup": "queues", "config": text}),
        "queue file": ("", "config", {"policyGroup": "*", "config": text}),
    }[route]
    return Entry(last.seq + 1, last.ts + 1_000_000, rm, kind, json.dumps(body).encode())


def _kept(core) -> dict:
    state = core.dump()
    state.pop("last_seq"), state.pop("now")
    return state


def refused_naming_the_field(route: str, text: str, field: str, words: str) -> None:
    """The core does not crash (nor break any check of tests/fuzz/checks.py), answers with an
    error naming `field` (the path, then `: `) in words containing `words`, and keeps the
    configuration and state it had."""
    run = Run()
    run.apply_all(TOPOLOGY_BASE)
    before = _kept(run.core)
    outputs = run.apply(_config_entry(route, text))
    said = [o.msg.error for o in outputs if o.kind == "register"] + \
        [e.message for o in outputs if o.kind == "event" for e in o.msg.events]
    assert any(f"{field}: " in line and words in line for line in said), \
        f"{route}: no error names {field} ({words!r}):\n  {said}\n  config:\n{text}"
    assert _kept(run.core) == before, f"{route}: a refused configuration changed the state"
    run.finish(cuts=[len(TOPOLOGY_BASE)])


def _bad_topologies() -> list[tuple[object, str, str]]:
    """Every bad value of a partition's `topology` the fuzzer draws from, once: (value, the
    error's path below `partitions[0].topology`, its words)."""
    from ykbus import limits

    cases: list[tuple[object, str, str]] = [
        ({"levels": ["ykbus.io/block", "ykbus.io/rack", "ykbus.io/block"]}, ".levels[2]",
         "level 'ykbus.io/block' is repeated (levels[0])"),
        ({"levels": ["rack", "rack"]}, ".levels[1]", "level 'rack' is repeated"),
        ({"levels": [f"l{i}" for i in range(limits.MAX_TOPOLOGY_LEVELS + 1)]}, ".levels",
         f"{limits.MAX_TOPOLOGY_LEVELS + 1} levels, at most {limits.MAX_TOPOLOGY_LEVELS}"),
        ({"levels": ["ykbus.io/block"], "zones": ["a"]}, ".zones", "unknown key"),
    ]
    cases += [({"levels": ["ykbus.io/block", name]}, ".levels[1]", "is not a valid attribute name")
              for name in BAD_LEVEL_NAMES]
    cases += [({"levels": [item, "ykbus.io/rack"]}, ".levels[0]", "expected a node attribute name")
              for item in BAD_LEVEL_ITEMS]
    cases += [({"levels": levels}, ".levels", "expected a list") for levels in BAD_LEVELS]
    cases += [(topology, "", "expected a mapping") for topology in BAD_TOPOLOGIES]
    return cases


@pytest.mark.parametrize(("i", "value", "below", "words"),
                         [pytest.param(i, *case, id=f"{ROUTES[i % len(ROUTES)]}-{i}")
                          for i, case in enumerate(_bad_topologies())])
def test_each_bad_topology_is_refused_naming_the_field(i, value, below, words):
    import yaml

    text = yaml.safe_dump({"partitions": [{"name": "default", "topology": value, "queues": [
        {"name": "root", "submitacl": "*", "queues": [{"name": "jobs"}]}]}]}, allow_unicode=True)
    refused_naming_the_field(ROUTES[i % len(ROUTES)], text, f"partitions[0].topology{below}", words)


@FUZZ
@given(rnd=st.randoms(use_true_random=False), route=st.sampled_from(ROUTES), own=st.booleans())
def test_bad_topologies_are_refused_naming_the_field(rnd, route, own):
    """A bad `topology` (mutate.py `topology_case`) in the trace's own configuration, or in a
    small one with one or two partitions."""
    base = json.loads(TOPOLOGY_BASE[0].msg)["config"] if own else ""
    text, field, words = bad_topology_config(rnd, base)
    refused_naming_the_field(route, text, field, words)


# --- the JSONL reader ----------------------------------------------------------------------

BAD_B64: list[object] = ["@@@", "abc", "====", "YQ", "YQ=", "Y", "é", "YWJj\n", "YW Jj", " ", 5, None, [], "YQ==YQ=="]
NOT_OBJECTS: list[bytes] = [b"5", b"[1]", b'"text"', b'"\\ud800"', b"null", b"true", b"1e999", b'"\\u0000"',
                            b"[" * 3000 + b"]" * 3000, b'"' + b"\\" + b'"', b"{}"]
NUMBERS: list[bytes] = [b"18446744073709551616", b"9223372036854775808", b"-1", b"0", b"1.5", b'"1"', b"1e30",
                        b"null", b"9" * 400, b"-9223372036854775809", b"true"]


def mutate_line(rnd, line: bytes) -> bytes:
    obj = json.loads(line)
    field = rnd.choice(["msg_b64", "msg", "seq", "ts", "kind", "rm", "encoding", "drop", "bytes"])
    raw: bytes | None = None
    if field == "msg_b64":
        obj.pop("msg", None)
        obj["msg_b64"] = rnd.choice(BAD_B64 + [base64.b64encode(bytes(rnd.getrandbits(8) for _ in range(9))).decode()])
        if rnd.random() < 0.5:
            obj["encoding"] = "msgpack"
    elif field == "msg":
        raw = rnd.choice(NOT_OBJECTS)
    elif field in ("seq", "ts"):
        raw = rnd.choice(NUMBERS)
    elif field in ("kind", "rm", "encoding"):
        obj[field] = rnd.choice([5, None, "", "x" * 100_000, [], "tick", "msgpack"])
    elif field == "drop":
        obj.pop(rnd.choice(list(obj)))
    data = json.dumps(obj).encode()
    if raw is not None:
        key = "msg" if field == "msg" else field
        obj[key] = "\u0001RAW\u0001"
        data = json.dumps(obj).encode().replace(b'"\\u0001RAW\\u0001"', raw)
    if field == "bytes":
        i = rnd.randint(0, len(data))
        data = rnd.choice([data[:i], data[:i] + rnd.choice(BAD_UTF8) + data[i:], data[:i] + b"\x00" + data[i:],
                           b"[" * rnd.choice(DEPTHS), data + b"\r"])
    return data


@READER
@given(rnd=st.randoms(use_true_random=False), base=st.sampled_from(sorted(BASES)), n=st.integers(1, 3))
def test_log_reader_raises_only_log_error(rnd, base, n):
    lines = [encode_entry(e) for e in BASES[base]]
    changed = []
    for i in sorted(rnd.sample(range(len(lines)), min(n, len(lines)))):  # each line mutated once: a
        lines[i] = mutate_line(rnd, lines[i])  # mutated line may not be JSON any more
        changed.append(lines[i][:300])
    try:
        entries = list(read_entries(lines, "fuzz.jsonl"))
    except LogError:
        return
    except Exception as exc:  # noqa: BLE001 - anything but LogError is the finding
        raise AssertionError(f"read_entries raised {exc!r} (not LogError) reading lines {changed!r}") from exc
    for e in entries:  # what it reads, it reads as entries the core can be handed
        assert isinstance(e.msg, bytes) and isinstance(e.seq, int) and e.seq > 0, e


def test_msgspec_raw_lines_are_entries():
    """A sanity check of the reader test's premise: the valid lines read back unchanged."""
    for entries in BASES.values():
        lines = [encode_entry(e) for e in entries]
        assert list(read_entries(lines)) == entries
        assert all(msgspec.json.decode(line)["seq"] == e.seq for line, e in zip(lines, entries, strict=True))


# --- cores sharded by RM -----------------------------------------------------------------

ASSIGN_BODIES: list[bytes] = [b"{not json", b"[1]", b'{"rm": "a.b", "shard": "s2"}', b'{"rm": "rm-1", "shard": ""}',
                              b'{"rm": "rm-1", "shard": "s2", "x": 1}', b'{"rm": "' + b"r" * 5000 + b'", "shard": "s2"}',
                              b'{"rm": 5, "shard": "s2"}', b"\xff\xfe"]


@FUZZ
@given(rnd=st.randoms(use_true_random=False), base=st.sampled_from(sorted(BASES)), moves=st.integers(1, 6))
def test_assign_entries_anywhere_keep_every_shard_safe_and_each_rm_in_one_shard(rnd, base, moves):
    """Assign entries (good, or not) at random places of a valid log, moving its RMs between
    shards: no shard raises, an RM's outputs of an entry come from one shard, and the whole
    fleet replays to the same bytes."""
    from ykbus.core.fleet import Fleet, shard_names
    from ykbus.log.jsonl import encode_output
    from ykbus.log.replay import guarded_core
    from ykbus.yamlload import load_yaml

    entries = list(BASES[base])
    rms = sorted({e.rm for e in entries if e.rm}) or ["rm-1"]
    for _ in range(moves):
        at = rnd.randint(0, len(entries))
        body = (json.dumps({"rm": rnd.choice(rms), "shard": rnd.choice(["default", "s2", "s3"])}).encode()
                if rnd.random() < 0.8 else rnd.choice(ASSIGN_BODIES))
        entries.insert(at, Entry(0, 0, "" if rnd.random() < 0.9 else rms[0], "assign", body))
    ts = 1_700_000_000_000_000_000
    entries = [Entry(i, max(ts, e.ts) + i, e.rm, e.kind, e.msg, e.encoding) for i, e in enumerate(entries, 1)]

    def run() -> list[bytes]:
        fleet = Fleet(shard_names(entries), lambda name, arriving: guarded_core(shard=name, arriving=arriving),
                      load_yaml)
        lines = []
        for entry in entries:
            by_shard = fleet.apply(entry)
            for guard in fleet.shards.values():
                assert guard.last_failure is None, f"entry {entry.seq} raised: {guard.last_failure[1]!r}"
            speakers = {}
            for shard, outs in by_shard.items():
                for out in outs:
                    if out.rm:
                        assert speakers.setdefault(out.rm, shard) == shard, f"{out.rm} answered by two shards"
                    lines.append(shard.encode() + b" " + encode_output(out))
        return lines

    assert run() == run()
