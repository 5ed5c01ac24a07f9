"""Golden traces and the `ykbus replay` command, as an outside user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

TRACES = Path(__file__).parent / "traces"
INPUTS = sorted(TRACES.glob("*.in.jsonl"))


def ykbus(*args, check=True):
    return subprocess.run([sys.executable, "-m", "ykbus.cli", *map(str, args)], capture_output=True, check=check)


def test_there_are_traces():
    assert len(INPUTS) >= 10


@pytest.mark.parametrize("inp", INPUTS, ids=[p.name.split(".")[0] for p in INPUTS])
def test_golden_trace(inp):
    from ykbus.log.replay import replay_file

    expected = inp.with_name(inp.name.replace(".in.", ".out.")).read_bytes()
    got = b"".join(line + b"\n" for line in replay_file(str(inp)))
    assert got == expected, f"{inp.name} drifted: run python tests/traces/generate.py and read the diff"
    where = inp.with_name(inp.name.replace(".in.jsonl", ".queues.json"))
    if where.exists():  # placement traces also keep where each live application sits
        sys.path.insert(0, str(TRACES))
        from generate import placements

        assert placements(inp) == where.read_bytes(), f"{where.name} drifted"


def test_replay_twice_is_byte_identical(tmp_path):
    inp = TRACES / "priority.in.jsonl"
    ykbus("replay", inp, "--out", tmp_path / "a.jsonl")
    ykbus("replay", inp, "--out", tmp_path / "b.jsonl")
    a, b = (tmp_path / "a.jsonl").read_bytes(), (tmp_path / "b.jsonl").read_bytes()
    assert a and a == b


def test_check_passes_on_a_match_and_names_the_first_difference(tmp_path):
    inp = TRACES / "two-queues.in.jsonl"
    recorded = TRACES / "two-queues.out.jsonl"
    assert ykbus("replay", inp, "--out", tmp_path / "o.jsonl", "--check", recorded).returncode == 0
    lines = recorded.read_bytes().splitlines()
    assert b'"node-1"' in lines[5]
    lines[5] = lines[5].replace(b'"node-1"', b'"node-9"', 1)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(b"\n".join(lines) + b"\n")
    proc = ykbus("replay", inp, "--out", tmp_path / "o.jsonl", "--check", tampered, check=False)
    assert proc.returncode == 1
    assert b"output line 6 differs" in proc.stderr and b"node-9" in proc.stderr


def new_allocations(jsonl: bytes, key: str) -> int:
    import json
    return sum(1 for line in jsonl.splitlines() for a in json.loads(line)["msg"].get("new", [])
               if json.loads(line)["kind"] == "alloc" and a["allocationKey"] == key)


def test_queues_what_if_replaces_every_registration(tmp_path):
    what_if = tmp_path / "q.yaml"
    what_if.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n"
                       "          - name: prod\n          - name: dev\n            resources: {max: {memory: 8G}}\n")
    baseline = (TRACES / "two-queues.out.jsonl").read_bytes()
    assert new_allocations(baseline, "notebook-1-kernel") == 2  # dev capped at 4G
    out = ykbus("replay", TRACES / "two-queues.in.jsonl", "--queues", what_if).stdout
    assert new_allocations(out, "notebook-1-kernel") == 3  # what if dev had 8G


def test_invalid_queues_file_is_reported_with_every_error(tmp_path):
    bad = tmp_path / "q.yaml"
    bad.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        resources: {max: {vcore: 1}}\n        queues:\n          - name: a.b\n")
    proc = ykbus("replay", TRACES / "two-queues.in.jsonl", "--queues", bad, check=False)
    assert proc.returncode != 0
    assert b"resources cannot be set on the root queue" in proc.stderr and b"contains a dot" in proc.stderr


def test_broken_log_line_is_named(tmp_path):
    log = tmp_path / "l.jsonl"
    log.write_text('{"seq": 2, "ts": 1, "kind": "tick", "msg": {}}\n{"seq": 1, "ts": 2, "kind": "tick", "msg": {}}\n')
    proc = ykbus("replay", log, check=False)
    assert proc.returncode == 2 and b"l.jsonl:2: seq 1 does not increase" in proc.stderr


def test_raw_bodies_round_trip_through_the_log_format():
    from ykbus.core.entries import Entry
    from ykbus.log.jsonl import encode_entry, read_entries

    entries = [Entry(1, 10, "rm", "app", b"{not json"), Entry(2, 11, "rm", "node", b"\xff\x00"),
               Entry(3, 12, "rm", "node", b'{"nodes": []}'), Entry(4, 13, "rm", "alloc", b"\x80", "msgpack"),
               Entry(5, 14, "rm", "app", b'"a string"')]
    lines = [encode_entry(e) for e in entries]
    assert list(read_entries(lines)) == entries


def test_demo_prints_the_example_decisions():
    out = ykbus("demo").stdout.decode()
    assert "allocated spark-1-driver" in out and out.count("allocated notebook-1-kernel") == 2


def test_replay_says_what_it_did_on_stderr_and_stdout_stays_the_outputs(tmp_path):
    """Issue 40, item 7: a replay that succeeds said nothing; one line now, on stderr."""
    import re

    inp = TRACES / "two-queues.in.jsonl"
    proc = ykbus("replay", inp)
    assert proc.stdout == (TRACES / "two-queues.out.jsonl").read_bytes()  # the outputs alone
    entries = sum(1 for line in inp.read_bytes().splitlines() if line.strip())
    outputs = len(proc.stdout.splitlines())
    said = [line for line in proc.stderr.decode().splitlines()
            if not line.startswith("ykbus: the compiled core is not used")]  # a stale build says so first
    assert len(said) == 1 and re.fullmatch(rf"ykbus replay: {entries:,} entries, {outputs:,} outputs in \d+\.\d s",
                                           said[0]), said


def test_check_alone_prints_only_the_verdict_and_a_gap_in_seq_is_warned(tmp_path):
    """Regression (an outside review): `--check` without `--out` printed every output before
    the verdict; a log with an entry cut out replayed without a word, where a live core stops."""
    inp = TRACES / "two-queues.in.jsonl"
    recorded = TRACES / "two-queues.out.jsonl"
    checked = ykbus("replay", inp, "--check", recorded)
    assert checked.returncode == 0 and checked.stdout == b""
    assert b"outputs match" in checked.stderr and b"warning" not in checked.stderr
    lines = inp.read_bytes().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(lines[:4] + lines[5:]) + b"\n")
    seqs = [json.loads(line)["seq"] for line in lines[3:6]]
    proc = ykbus("replay", cut, "--out", tmp_path / "o.jsonl")
    assert proc.returncode == 0
    assert (f"ykbus replay: warning: {cut}:5: seq {seqs[2]} follows {seqs[0]}: 1 entry missing: replayed as it "
            "is, from an empty state (a live core stops at a gap)").encode() in proc.stderr


def test_replay_of_a_shard_the_log_never_names_says_so():
    """Regression (a review): `ykbus replay LOG --shard s22` gave 0 outputs, exit 0, and no word."""
    run = ykbus("replay", TRACES / "priority.in.jsonl", "--shard", "s22")
    assert run.stdout == b""
    assert b"warning: the log names no shard 's22' (it names default): no entry is its, and no output" in run.stderr
    named = ykbus("replay", TRACES / "priority.in.jsonl", "--shard", "default")
    assert named.stdout and b"names no shard" not in named.stderr
