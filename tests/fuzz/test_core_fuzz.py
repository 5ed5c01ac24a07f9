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
from tests.fuzz.mutate import BAD_UTF8, DEPTHS, generated_log, mutated_log, trace_logs
from tests.fuzz.profile import FUZZ, READER
from ykbus.core.outbox import Entry
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
    from ykbus.core.outbox import Output
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
