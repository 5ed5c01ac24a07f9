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

from tests.core.askpath import steps_back

ROOT = Path(__file__).resolve().parents[2]


def traced() -> dict:
    env = {**os.environ, "YKBUS_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.core.askpath", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def walk_rows() -> list[tuple[str, list[str]]]:
    """(module, the functions its row names) for each row of the walk's table outside bus/
    (the service's part runs around the core, not in it); names in parentheses are asides."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## One ask, from the NATS message to its allocation", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        module = cells[1].strip("`")
        if module.startswith("bus/"):
            continue
        names = re.findall(r"`([A-Za-z_][\w.]*)`", re.sub(r"\([^)]*\)", "", cells[2]))
        rows.append((module, names))
    return rows


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


def test_the_check_sees_a_step_back():
    calls = [(1, "core/a.py", "f", ["core/a.py"]), (2, "core/b.py", "g", ["core/a.py", "core/b.py"]),
             (3, "core/a.py", "h", ["core/a.py", "core/b.py", "core/a.py"])]
    assert steps_back(calls) == ["core/a.py > core/b.py > core/a.py"]
    assert steps_back(calls[:2]) == []
