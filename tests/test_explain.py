"""`ykbus explain`: why an application's asks are pending, from a log file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.core.test_why import QUEUES
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import encode_entry


def explain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", *args], capture_output=True, text=True)


def test_explain_from_a_log_prints_each_pending_asks_reason_in_words(tmp_path):
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000)),
               log.apps(app("a", "root.small")),
               log.asks(ask("k", "a", vcore=1000, max_allocations=3), ask("huge", "a", vcore=9000))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = explain("a", "--log", str(path))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "application a (rm k8s, partition default, queue root.small): Running",
        "  ask k: 1 pending, 2 allocated: QueueMax: queue root.small max vcore 2 cores would be exceeded: "
        "2 cores used + 1 core asked",
        "    queue root.small, vcore: 2 cores used + 1 core asked > max 2 cores",
        "  ask huge: 1 pending, 0 allocated: QueueMax: queue root.small max vcore 2 cores would be exceeded: "
        "2 cores used + 9 cores asked",
        "    queue root.small, vcore: 2 cores used + 9 cores asked > max 2 cores",
    ]
    only = explain("a", "k", "--log", str(path), "--rm", "k8s")
    assert only.stdout.count("ask ") == 1
    assert explain("nope", "--log", str(path)).returncode == 1


def test_explain_says_the_priority_of_an_application_and_of_its_asks(tmp_path):
    """An outside review: neither `ykbus explain` nor `ykbus apps` said a priority, so a
    high-priority ask waiting behind reservations of lower ones did not show why it mattered."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000)), log.apps(app("a", "root.small")),
               log.asks(ask("hi", "a", priority=100, vcore=9000), ask("lo", "a", vcore=9000),
                        ask("lo2", "a", vcore=9000))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    lines = explain("a", "--log", str(path)).stdout.splitlines()
    assert lines[0] == "application a (rm k8s, partition default, queue root.small): Accepted, priority 100"
    assert [line.split(":")[0] for line in lines if not line.startswith("    ")][1:] == [
        "  ask hi", "  2 asks (lo, lo2; --all lists each)"]  # grouped by priority too
    assert "  ask hi: 1 pending, 0 allocated, priority 100: " in "\n".join(lines)
    assert "  2 asks (lo, lo2; --all lists each): 2 pending, 0 allocated: " in "\n".join(lines)


def test_explain_says_quantities_in_cores_and_binary_units(tmp_path):
    """Issue 40: the reason and its figures read `1.5 cores` and `128 Gi`, not millicores and bytes."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000, memory=64 * 2**30)),
               log.apps(app("a", "root.gated")), log.asks(ask("big", "a", vcore=1500, memory=128 * 2**30))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = explain("a", "--log", str(path))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1:] == [
        "  ask big: 1 pending, 0 allocated: NoNodeRoom: no schedulable node has {vcore: 1.5 cores, memory: 128 Gi} "
        "free, other than nodes reserved for other asks",
        "    it fits no schedulable node even empty, and waits until a larger one joins: memory: asked 128 Gi, "
        "the most a node has when empty 64 Gi",
    ]


def test_an_ask_larger_than_every_node_is_said_to_fit_none_even_empty_not_to_wait_for_room(tmp_path):
    """Regression: an ask of 16 cores on nodes of 4 read "the most free on a schedulable node
    ... 2 cores", as if it waited for room to free; it can never be placed as the nodes are.
    One that fits an empty node still reads what is free now."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(*[node(f"n{i}", vcore=4000, memory=8 * 2**30) for i in range(3)]),
               log.apps(app("a", "root.gated"), app("b", "root.gated")),
               log.asks(ask("busy", "b", vcore=2000, max_allocations=3)),
               log.asks(ask("huge", "a", vcore=16000, memory=2**30), ask("wide", "a", vcore=3000))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    lines = explain("a", "--log", str(path), "--all").stdout.splitlines()
    huge = lines.index(next(line for line in lines if line.startswith("  ask huge")))
    assert lines[huge + 1] == ("    it fits no schedulable node even empty, and waits until a larger one joins: "
                               "vcore: asked 16 cores, the most a node has when empty 4 cores")
    wide = lines.index(next(line for line in lines if line.startswith("  ask wide")))
    assert lines[wide + 1].startswith("    vcore: asked 3 cores, the most free on a schedulable node not reserved "
                                      "for another ask 2 cores"), lines


def test_explain_on_a_broken_log_exits_2(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("not a log\n")
    run = explain("a", "--log", str(path))
    assert run.returncode == 2 and "log.jsonl:1" in run.stderr and "Traceback" not in run.stderr


def test_explain_names_a_required_node_and_a_paused_rm(tmp_path):
    log = LogBuilder("k8s")
    ds = ask("ds", "a", vcore=1000)
    ds["tags"] = {"yunikorn.apache.org/requiredNode": "n2"}
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000), node("n2", vcore=500)),
               log.apps(app("a", "root.gated")), log.asks(ds)]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = explain("a", "--log", str(path))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1:] == [
        "  ask ds: 1 pending, 0 allocated: RequiredNodeFull: it must run on node n2, which has {vcore: 0.5 cores} "
        "free of the {vcore: 1 core} it asks",
        "    vcore: asked 1 core, free on node n2 0.5 cores",
    ]
    entries.append(log.entry("rmstate", {"rmID": "k8s", "event": "CONNECTION_LOST"}, rm=""))
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    assert explain("a", "--log", str(path)).stdout.splitlines()[1] == (
        "  ask ds: 1 pending, 0 allocated: RMPaused: resource manager k8s is Paused (its heartbeats stopped): "
        "nothing of it is placed until it is back")


def test_explain_says_why_a_gang_waits(tmp_path):
    from pathlib import Path

    log = Path(__file__).parent / "traces" / "gangs.in.jsonl"
    prefix = tmp_path / "gang.jsonl"
    prefix.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:5]))  # up to the gang that does not fit
    lines = explain("g", "--log", str(prefix), "--all").stdout.splitlines()  # each ask: their counts differ
    assert lines[0] == "application g (rm rm-1, partition default, queue root.jobs): Accepted"
    assert lines[1:] == [
        "  ask p: 3 pending, 0 allocated: GangNoRoom: gang g does not fit yet: no room for {vcore: 1 core} of its "
        "{vcore: 4 cores} once the rest is placed",
        "  ask q: 1 pending, 0 allocated: GangNoRoom: gang g does not fit yet: no room for {vcore: 1 core} of its "
        "{vcore: 4 cores} once the rest is placed",
    ]


def test_without_all_the_gangs_asks_of_one_reason_are_one_line(tmp_path):
    from pathlib import Path

    log = Path(__file__).parent / "traces" / "gangs.in.jsonl"
    prefix = tmp_path / "gang.jsonl"
    prefix.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:5]))
    lines = explain("g", "--log", str(prefix)).stdout.splitlines()
    assert lines[1:] == [
        "  2 asks (p, q; --all lists each): 4 pending, 0 allocated: GangNoRoom: gang g does not fit yet: no room "
        "for {vcore: 1 core} of its {vcore: 4 cores} once the rest is placed"]


def test_explain_without_an_application_lists_those_that_wait():
    run = explain("--log", str(Path(__file__).parent / "traces" / "limits.in.jsonl"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "4 applications have pending asks:",
        "  b1 (rm rm-1, queue root.b, Running: 1 pending, UserLimit)",
        "  d1 (rm rm-1, queue root.a, Running: 1 pending, GroupLimit)",
        # the '*' group limit's 2 applications: a1 (alice, given no groups: in her own) and w1
        "  w2 (rm rm-1, queue root.a, Accepted: 1 pending, GroupMaxApplications)",
        "  w3 (rm rm-1, queue root.a, Accepted: 1 pending, GroupMaxApplications)",
        "ykbus explain APP tells why each of its asks waits."]



def test_the_list_names_why_a_gang_waits_not_that_its_members_wait_for_it(tmp_path):
    """`ykbus explain --rm tyjob` in the README: rack-late's gang waits for a rack, but the
    list said `GangPending`, its 8 real asks waiting for its placeholders outnumbering them.
    An ask that only waits for another of its application (GangPending, LeaderPending) does
    not name the application's reason while another does."""
    log = Path(__file__).parent / "traces" / "topology.in.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)[:8]
    real = {"allocationKey": "w", "applicationID": "late", "partitionName": "default", "taskGroupName": "w",
            "resourceAsk": {"resources": {"gpu": {"value": 1}}}, "maxAllocations": 16}  # more than the placeholders
    lines.append(json.dumps({"seq": 9, "ts": 1700000000009000000, "rm": "rm-1", "kind": "alloc",
                             "msg": {"rmID": "rm-1", "asks": [real]}}).encode() + b"\n")
    prefix = tmp_path / "gang.jsonl"
    prefix.write_bytes(b"".join(lines))
    assert "GangPending" in explain("late", "--log", str(prefix)).stdout  # the members wait for the gang
    assert explain("--log", str(prefix)).stdout.splitlines()[1] == (
        "  late (rm rm-1, queue root.jobs, Accepted: 24 pending, TopologyNoDomain)")


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """Regression (walkthrough): `ykbus explain APP | head` printed a BrokenPipeError
    traceback once the output outgrew the pipe."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000)), log.apps(app("a", "root.small")),
               log.asks(*[ask(f"k{i}", "a", vcore=1000) for i in range(3000)])]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = subprocess.run(f"{sys.executable} -m ykbus.cli explain a --all --log {path} | head -c 11", shell=True,
                         capture_output=True, text=True)
    assert run.stdout == "application" and "Traceback" not in run.stderr, run.stderr[-1000:]


def test_a_preempting_asks_victims_are_said_once_in_words_not_as_a_python_list():
    """`node n1, victims ['4-0']` followed the message that already named them."""
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", "urgent", "--all", "--log",
                          str(Path(__file__).parent.parent / "examples" / "preemption.jsonl")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "Preempting: node n1 is reserved for it while the RM releases" in run.stdout
    assert "[" not in run.stdout and "victims" not in run.stdout, run.stdout



def test_two_quantities_that_read_alike_are_given_exactly(tmp_path):
    """An ask of 4 GB and one byte on nodes of 4 GB read "memory: asked 3.73 Gi, the most a
    node has when empty 3.73 Gi": the figures now say the difference."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000, memory=4_000_000_000)),
               log.apps(app("a", "root.gated")), log.asks(ask("big", "a", vcore=1000, memory=4_000_000_001))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    lines = explain("a", "--log", str(path)).stdout.splitlines()
    assert lines[2] == ("    it fits no schedulable node even empty, and waits until a larger one joins: memory: asked "
                        "3.73 Gi (4,000,000,001), the most a node has when empty 3.73 Gi (4,000,000,000)"), lines


def test_an_unknown_ask_exits_1_json_is_the_answer_and_a_gap_in_the_log_is_warned_of(tmp_path):
    """Regressions (an outside review): `explain APP NOKEY` said the ask was not known and
    exited 0; `explain APP --json` printed words; a log with entries missing was read in
    silence by explain (replay warned)."""
    log = LogBuilder("k8s")
    entries = [log.register(QUEUES), log.nodes(node("n1", vcore=8000)), log.apps(app("a", "root.small")),
               log.asks(ask("k", "a", vcore=1000))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = explain("a", "nokey", "--log", str(path))
    assert run.returncode == 1 and "ask nokey: not known to this application" in run.stdout
    run = explain("a", "--log", str(path), "--json")
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["applications"]["k8s"]["default"]["a"]["asks"]["k"]["allocated"] == 1
    lines = path.read_bytes().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(lines[:2] + lines[3:]) + b"\n")  # the application's entry gone
    run = explain("a", "--log", str(cut))
    assert "warning: " in run.stderr and "1 entry missing" in run.stderr, run.stderr
