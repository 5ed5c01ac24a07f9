"""`ykbus queues`, `ykbus apps`, `ykbus nodes`: a core's state as tables (or the read API's
JSON), here from a log replayed by the command, as an operator runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TRACE = Path(__file__).parent / "traces" / "preemption-guarantee.in.jsonl"


def ykbus(*args):
    return subprocess.run([sys.executable, "-m", "ykbus.cli", *map(str, args)], capture_output=True, text=True)


def rows(stdout: str) -> dict[str, list[str]]:
    head, *lines = stdout.splitlines()
    return {line.split()[2]: line.split() for line in lines}


def test_queues_show_guarantees_usage_and_pending_per_queue():
    run = ykbus("queues", "--log", TRACE)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].split()[:4] == ["RM", "PARTITION", "QUEUE", "KIND"]
    q = rows(run.stdout)
    # 2 apps, 2 running, guaranteed 2 cores, no max (quantities in the units people read: core/resources.py)
    assert q["root.under"][3:10] == ["leaf", "2", "2", "vcore:", "2", "cores", "-"]
    assert q["root.over"][6:10] == ["vcore:", "1", "core", "-"]  # guaranteed 1 core, no max


def test_apps_filter_by_queue_and_state_and_say_why_pending():
    run = ykbus("apps", "--log", TRACE, "--queue", "root.under")
    assert sorted(rows(run.stdout)) == ["polite", "urgent"]
    urgent = rows(run.stdout)["urgent"]
    assert urgent[3:5] == ["root.under", "Running"] and urgent[-1] == "Reserved"
    run = ykbus("apps", "--log", TRACE, "--state", "accepted")
    assert sorted(rows(run.stdout)) == ["other"]


def test_nodes_and_json():
    run = ykbus("nodes", "--log", TRACE)
    n = rows(run.stdout)
    assert sorted(n) == ["n1", "n2", "n3", "n4"] and n["n1"][3] == "Schedulable" and n["n1"][-2] == "100%"
    answer = json.loads(ykbus("nodes", "--log", TRACE, "--json").stdout)
    assert set(answer["rm-1"]["default"]) == {"n1", "n2", "n3", "n4"}


def test_a_missing_log_is_one_line_and_exit_2(tmp_path):
    run = ykbus("queues", "--log", tmp_path / "nope.jsonl")
    assert run.returncode == 2 and run.stderr.startswith("ykbus queues:") and len(run.stderr.splitlines()) == 1
