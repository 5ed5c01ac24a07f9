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
    assert q["root.under"][-1] == "Active"  # the STATE column: it was empty for every queue but a draining one
    # a parent counts its subtree's applications, as RUNNING does (it said APPS 0 beside RUNNING 3: a review)
    assert q["root"][4:6] == ["4", "3"]


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
    assert sorted(n) == ["n1", "n2", "n3", "n4"] and n["n1"][3] == "Schedulable" and "100%" in n["n1"]
    assert n["n1"][-2:] == ["ask", "other/o"] and n["n3"][-2:] == ["ask", "urgent/u3"], "RESERVED FOR: its ask"
    answer = json.loads(ykbus("nodes", "--log", TRACE, "--json").stdout)
    assert set(answer["rm-1"]["default"]) == {"n1", "n2", "n3", "n4"}


def test_a_missing_log_is_one_line_and_exit_2(tmp_path):
    run = ykbus("queues", "--log", tmp_path / "nope.jsonl")
    assert run.returncode == 2 and run.stderr.startswith("ykbus queues:") and len(run.stderr.splitlines()) == 1


def said(run) -> str:
    """What a command said on stderr, past the note of a stale compiled build."""
    return "".join(line for line in run.stderr.splitlines(keepends=True)
                   if not line.startswith("ykbus: the compiled core is not used"))


def test_a_filter_naming_nothing_there_says_so_instead_of_an_empty_table():
    """A newcomer's typo (`--rm yarn`, `--queue root.teama`, `--state Runing`) printed only
    the header and exit 0: the cluster looked empty. Each now names what is there."""
    for command in ("queues", "apps", "nodes", "explain"):
        run = ykbus(command, "--log", TRACE, "--rm", "yarn")
        assert run.returncode == 2 and run.stdout == "", (command, run)
        assert said(run) == f"ykbus {command}: rm: 'yarn' is not registered (registered: rm-1)\n", run.stderr
    run = ykbus("apps", "--log", TRACE, "--queue", "root.undr")
    assert run.returncode == 2 and run.stdout == ""
    assert said(run).startswith("ykbus apps: no queue root.undr (did you mean root.under?") and "root.over" in said(run)
    run = ykbus("apps", "--log", TRACE, "--state", "Runing")
    assert run.returncode == 2 and run.stdout == ""
    assert said(run).startswith("ykbus apps: --state Runing is not an application state (New, Accepted, Resuming, Running,")
    run = ykbus("apps", "--log", TRACE, "--queue", "root.under", "--state", "new")  # there, with none in that state
    assert run.returncode == 0 and run.stdout.splitlines()[0].startswith("RM") and len(run.stdout.splitlines()) == 1


def test_explain_of_an_application_under_another_rm_names_that_rm(tmp_path):
    from ykbus.log.build import LogBuilder, app
    from ykbus.log.jsonl import encode_entry

    log = LogBuilder("k8s")
    queues = 'partitions: [{name: default, queues: [{name: root, submitacl: "*", queues: [{name: default}]}]}]'
    entries = [log.register(queues), log.register(queues, rm="batch"), log.apps(app("job-1"), rm="batch")]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = ykbus("explain", "job-1", "--log", path, "--rm", "k8s")
    assert run.returncode == 1 and run.stdout == ""
    assert said(run) == "ykbus explain: application job-1 is not known to RM k8s (it is under RM batch: --rm batch)\n"
    run = ykbus("explain", "job-1", "--log", path, "--rm", "batch")
    assert run.returncode == 0 and "job-1" in run.stdout, run.stderr
    run = ykbus("explain", "nosuch", "--log", path)
    assert run.returncode == 1 and said(run) == "ykbus explain: application nosuch is not known\n"
