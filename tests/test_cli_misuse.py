"""A command misused (a number out of range, a file that cannot be read or written) says so
in one line naming what is wrong and exits 2: no traceback, and no long replay first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOG = str(ROOT / "examples" / "preemption.jsonl")


def ykbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ykbus.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


@pytest.mark.parametrize("args, said", [
    (["core", "--tick", "-1"], "argument --tick: expected a number of seconds above 0, got -1"),
    (["core", "--tick", "0"], "argument --tick: expected a number of seconds above 0, got 0"),
    (["core", "--api-port", "99999"], "argument --api-port: expected an integer from 0 to 65535, got 99999"),
    (["bench", "core", "--nodes", "0"], "argument --nodes: expected an integer of at least 1, got 0"),
    (["bench", "core", "--nodes", "500,x"], "argument --nodes: expected an integer, got 'x'"),
    (["bench", "e2e", "--seconds", "0"], "argument --seconds: expected a number of seconds above 0, got 0"),
    (["bench", "e2e", "--batch", "0"], "argument --batch: expected an integer of at least 1, got 0"),
    (["up", "--duration", "-3"], "argument --duration: expected a number of seconds from 0, got -3"),
    (["whatif", LOG, "--queues", "q.yaml", "--limit", "-5"], "argument --limit: expected an integer of at least 0"),
    (["replay", LOG, "--out", "/nonexistent-dir/out.jsonl"], "ykbus replay: [Errno 2] No such file or directory: "
                                                            "'/nonexistent-dir/out.jsonl'"),
    (["replay", LOG, "--check", "/nonexistent-dir/recorded.jsonl"], "ykbus replay: [Errno 2] No such file"),
    (["record", "--nats", "nats://127.0.0.1:1", "--out", "/nonexistent-dir/x.jsonl"], "ykbus record: [Errno 2]"),
    (["bench", "replay", "--log", "/nonexistent-dir/log.jsonl", "--repeat", "1"], "ykbus bench: [Errno 2]"),
    # found by an outside review of every command: each was a traceback, a machine's memory filled, or a run of nothing
    (["sim", "k8s", "--nodes", "99999999999"], "ykbus sim k8s: error: argument --nodes: expected an integer from 1 "
                                               "to 100000, got 99999999999"),
    (["sim", "batch", "--nodes", "-1"], "argument --nodes: expected an integer from 1 to 100000, got -1"),
    (["sim", "k8s", "--rate", "-3"], "argument --rate: expected a number above 0, got -3"),
    (["sim", "batch", "--max-waiting", "-1"], "argument --max-waiting: expected an integer of at least 0, got -1"),
    (["sim", "k8s", "--rm-id", "bad id"], "argument --rm-id: expected an rmID of 1 to"),
    (["sim", "k8s", "--rm-id", "ansi\x1b[2J"], "argument --rm-id: expected an rmID of 1 to"),  # as the core refuses it
    (["sim", "k8s", "--namespaces", ""], "argument --namespaces: expected queue names matching"),
    (["tyjob", "controller", "--cluster", "c.yaml", "--rm", "a.b"], "argument --rm: expected an rmID of 1 to"),
    (["core", "--log-level", "foo"], "ykbus core: error: argument --log-level: invalid choice: 'foo'"),
    (["up", "--log-level", "warning"], "ykbus up: error: unrecognized arguments: --log-level warning"),
    (["up", "--replicas", "3"], "ykbus up: error: unrecognized arguments: --replicas 3"),
    (["bench", "core", "--node-sort", "bogus"], "ykbus bench core: error: argument --node-sort: expected fair, "
                                                "binpacking, or both (fair,binpacking), got 'bogus'"),
    (["schema", "--dir", "README.md"], "ykbus schema: --dir README.md: not a directory"),
    (["queues", "--nats", "http://127.0.0.1:1"], "ykbus queues: http://127.0.0.1:1: not a NATS URL (expected "
                                                 "nats://HOST:PORT"),  # it said "Name or service not known"
])
def test_a_misused_command_says_what_is_wrong_in_one_line(args, said):
    done = ykbus(*args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert said in done.stderr, done.stderr


def test_a_truncated_log_given_to_bench_replay_is_named_with_its_line(tmp_path):
    log = tmp_path / "cut.jsonl"
    log.write_bytes(Path(LOG).read_bytes()[:300])
    done = ykbus("bench", "replay", "--log", str(log), "--repeat", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{log}:" in done.stderr and "not a log entry" in done.stderr, done.stderr


def test_a_lone_surrogate_in_a_logs_body_is_named_not_called_truncated(tmp_path):
    """Regression (an outside review): msgspec calls a lone surrogate escape "Input data was
    truncated", which sends a user to look for a cut file."""
    log = tmp_path / "sur.jsonl"
    log.write_text('{"seq":1,"ts":1,"rm":"r","kind":"alloc","msg":"\\ud800"}\n')
    done = ykbus("replay", str(log))
    assert done.returncode == 2 and "truncated" not in done.stderr, done.stderr
    assert f"{log}:1: not a log entry: a lone surrogate escape" in done.stderr


def test_control_characters_in_an_rms_ids_are_shown_escaped_not_sent_to_the_terminal(tmp_path):
    """An RM may name an application with any character: ESC sequences (clear the screen,
    recolour) and bidirectional overrides reached the terminal as they were."""
    from ykbus.log.build import LogBuilder, app, ask, node
    from ykbus.log.jsonl import encode_entry

    log = LogBuilder("rm-1")
    evil = "job\x1b[2J\u202e-1"
    entries = [log.register(), log.nodes(node("n1", vcore=1000)), log.apps(app(evil, "root.default")),
               log.asks(ask("k", evil, vcore=5000))]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    done = ykbus("explain", "--log", str(path))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "job\\x1b[2J\\u202e-1" in done.stdout, done.stdout


def test_a_line_break_in_an_id_makes_no_row_of_its_own(tmp_path):
    """Regression (a security review): an application id holding a line break printed a
    forged row in `ykbus apps` (`root.fake  Running  injected-line`); and U+200F, a
    right-to-left mark, went to the terminal as it was."""
    from ykbus.log.build import LogBuilder, app
    from ykbus.log.jsonl import encode_entry

    log = LogBuilder("rm-1")
    evil = "job\nrm-1  default  forged  root.fake  Running\u200f"
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in [log.register(), log.apps(app(evil, "root.default"))]))
    done = ykbus("apps", "--log", str(path))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == 2 and "job\\nrm-1  default  forged  root.fake  Running\\u200f" in rows[1], done.stdout


def test_every_option_and_argument_of_every_command_says_what_it_is():
    """`--help` of any command explains each of its flags (an option listed bare sends the
    user to the source)."""
    import argparse

    from ykbus.cli import build_parser

    def bare(parser: argparse.ArgumentParser, path: str) -> list[str]:
        out = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out += bare(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                out.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return out

    assert bare(build_parser(), "ykbus") == []


def test_trimming_the_input_log_of_core_shards_is_refused():
    """The shards share one input log and each snapshot is at its own entry: one shard's trim
    would take entries another still needs."""
    done = ykbus("core", "--shard", "s1", "--in-keep", "5", "--nats", "nats://127.0.0.1:1")
    assert done.returncode == 1 and done.stderr.startswith("ykbus core: --in-keep 5 with --shard: the core shards "
                                                           "share one input log"), done.stderr
