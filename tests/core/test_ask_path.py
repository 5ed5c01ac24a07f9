"""The walk docs/architecture.md gives ("One ask, from the NATS message to its allocation")
is the path an ask really takes: every function a core row of its table names is called
when the guarded core applies the entry, in that row's module, and no call enters a module
again after leaving it on the way down (tests/core/askpath.py traces it, pure Python, in a
child process: a compiled core makes no Python frames to trace)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.core.askpath import counts, frame_counts, steps_back

ROOT = Path(__file__).resolve().parents[2]


def traced(*flags: str) -> dict:
    env = {**os.environ, "YKBUS_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.core.askpath", "--json", *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def walk_rows(bus: bool = False) -> list[tuple[str, list[str]]]:
    """(module, the functions its row names) for each row of the walk's table outside bus/
    (the service's part runs around the core, not in it), or, with `bus`, for each row in
    bus/ (its asides in parentheses included: they are frames on the way); names in
    parentheses are asides."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## One ask, from the NATS message to its allocation", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        modules = re.findall(r"`([\w/]+\.py)`", cells[1])
        if modules[0].startswith("bus/") != bus:
            continue
        names = re.findall(r"`([A-Za-z_][\w.]*)`", cells[2] if bus else re.sub(r"\([^)]*\)", "", cells[2]))
        rows.extend((module, names) for module in modules)
    return rows


def today_figures() -> list[str]:
    """The cells of the walk's figures row for today (docs/architecture.md), after its label."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| today |"))
    return [c.strip() for c in row.strip().strip("|").split("|")][1:]


def test_the_documented_walk_is_the_path_one_ask_takes_and_it_never_steps_back():
    found = traced()
    assert found["allocated"] == ["n0"], "the traced ask is allocated by that entry"
    calls = found["calls"]
    assert steps_back(calls) == [], "a call went back into a module it had left on the way down"
    called = {(module, name) for _depth, module, name, _stack in calls}
    rows = walk_rows()
    assert len(rows) >= 12, "the walk's table was not found in docs/architecture.md"
    for module, names in rows:
        assert names, f"the row of {module} names no function"
        for name in names:
            assert any(m == module and (q == name or q.endswith("." + name)) for m, q in called), (
                f"docs/architecture.md: {module} {name} is not called on the ask's path")
    figures = today_figures()
    every, every_modules = counts(calls, True)
    work, work_modules = counts(calls, False)
    assert figures[2:5] == [f"{every} in {every_modules} modules", f"{work} in {work_modules} modules",
                            str(max(d for d, *_ in calls))], "docs/architecture.md: the figures of today's path are stale"


def test_the_service_rows_of_the_walk_are_on_the_way_of_an_ask_sent_over_nats():
    """The rows in bus/ name frames the ask crosses on a live core (a real nats-server): its
    message read, applied, its allocation encoded, delivered and sent."""
    way = traced("--bus")
    assert way["allocated"] == ["n0"], "the ask sent over NATS is allocated"
    frames = [tuple(f) for f in way["frames"]]
    rows = walk_rows(bus=True)
    assert {m for m, _ in rows} >= {"bus/service.py", "bus/publisher.py"}, "the walk's bus rows were not found"
    row_modules: dict[tuple[str, ...], set[str]] = {}
    for module, names in rows:  # a row of two modules gives each the row's names: one of them has each
        row_modules.setdefault(tuple(names), set()).add(module)
    for names, modules in row_modules.items():
        for name in names:
            assert any(m in modules and (q == name or q.endswith("." + name)) for m, q in frames), (
                f"docs/architecture.md: {name} ({', '.join(sorted(modules))}) is not on the way of the ask sent over NATS")
    assert frames[0][0] == "bus/service.py" and frames[-1] == ("bus/publisher.py", "OutputPublisher.send"), (
        "the way starts at the message the service reads and ends at the publish")
    every, every_modules = frame_counts(way["frames"], True)
    work, work_modules = frame_counts(way["frames"], False)
    assert today_figures()[:2] == [f"{every} in {every_modules} modules", f"{work} in {work_modules} modules"], (
        "docs/architecture.md: the frames today's ask crosses are not the figures given")


def test_the_check_sees_a_step_back():
    calls = [(1, "core/a.py", "f", ["core/a.py"]), (2, "core/b.py", "g", ["core/a.py", "core/b.py"]),
             (3, "core/a.py", "h", ["core/a.py", "core/b.py", "core/a.py"])]
    assert steps_back(calls) == ["core/a.py > core/b.py > core/a.py"]
    assert steps_back(calls[:2]) == []
