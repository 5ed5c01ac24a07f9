"""The compiled core (core/compiled.py): what runs is the current build of the sources, and
it decides exactly what the sources decide."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ykbus.core import compiled, partition

TRACES = Path(__file__).parent.parent / "traces"
PURE = os.environ.get(compiled.PURE_ENV, "") not in ("", "0")


@pytest.mark.skipif(PURE, reason=f"{compiled.PURE_ENV} asks for the pure-Python core")
def test_the_core_runs_compiled():
    """A build that failed, or is older than its sources, must not pass unnoticed: `make build`."""
    assert compiled.mode == "compiled", f"the core is not compiled ({compiled.mode}): run `make build`"
    assert partition.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def test_pure_python_replays_every_golden_trace_to_the_same_bytes():
    """The same traces the compiled core replays in tests/test_traces.py, through the sources."""
    script = """
import sys
from pathlib import Path
from ykbus.core import compiled
from ykbus.log.replay import replay_file
assert compiled.mode.startswith("python"), compiled.mode
import ykbus.core.partition
assert ykbus.core.partition.__file__.endswith(".py"), ykbus.core.partition.__file__
drifted = []
inputs = sorted(Path(sys.argv[1]).glob("*.in.jsonl"))
for inp in inputs:
    expected = inp.with_name(inp.name.replace(".in.", ".out.")).read_bytes()
    if b"".join(line + b"\\n" for line in replay_file(str(inp))) != expected:
        drifted.append(inp.name)
print(len(inputs), " ".join(drifted))
"""
    run = subprocess.run([sys.executable, "-c", script, str(TRACES)], capture_output=True, text=True,
                         env={**os.environ, compiled.PURE_ENV: "1"})
    assert run.returncode == 0, run.stderr
    count, _, drifted = run.stdout.strip().partition(" ")
    assert int(count) >= 10 and not drifted, f"pure Python drifts from the golden traces: {drifted}"
    assert "compiled core is not used" not in run.stderr  # asked for: nothing to warn about


def _build(package: Path, *, skip: tuple[str, ...] = (), record: bool = True) -> None:
    """A fake build under `package` (a `ykbus` directory): the core's sources, a compiled
    file beside each compiled module, and the record of what the build read."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (package / "core").mkdir(parents=True, exist_ok=True)
    (package / "si").mkdir(exist_ok=True)
    for name in (*compiled.MODULES, "core", "why"):
        (package / "core" / f"{name}.py").write_text(f"# {name}\n")
    (package / "si" / "messages.py").write_text("# messages\n")
    (package / "limits.py").write_text("# limits\n")
    for name in compiled.MODULES:
        if name not in skip:
            (package / "core" / f"{name}{suffix}").write_bytes(b"")
    if record:
        (package / "core" / compiled.BUILT_FROM).write_text(json.dumps(compiled.core_sources(package)))


def test_a_current_build_is_used(tmp_path):
    _build(tmp_path)
    assert compiled.why_pure(tmp_path, {}) == ""


def test_a_source_edited_after_the_build_is_run_from_source(tmp_path):
    _build(tmp_path)
    (tmp_path / "core" / "ledger.py").write_text("# ledger, edited\n")
    assert compiled.why_pure(tmp_path, {}) == "sources changed since the build: core/ledger.py"


def test_a_source_the_compiled_modules_only_import_counts_too(tmp_path):
    """The compiled code checks the types of what it imports (a float where an int was)."""
    _build(tmp_path)
    (tmp_path / "si" / "messages.py").write_text("# messages, edited\n")
    (tmp_path / "core" / "timers.py").write_text("# a new module\n")
    assert compiled.why_pure(tmp_path, {}) == "sources changed since the build: core/timers.py, si/messages.py"


def test_a_source_touched_but_not_changed_keeps_the_build(tmp_path):
    _build(tmp_path)
    os.utime(tmp_path / "core" / "ledger.py", (4_000_000_000, 4_000_000_000))
    assert compiled.why_pure(tmp_path, {}) == ""


def test_a_build_without_its_record_is_not_used(tmp_path):
    _build(tmp_path, record=False)
    assert compiled.why_pure(tmp_path, {}) == f"the build left no record of its sources ({compiled.BUILT_FROM})"


def test_a_build_missing_a_module_is_not_used(tmp_path):
    _build(tmp_path, skip=("gang",))
    assert compiled.why_pure(tmp_path, {}) == "compiled in part (missing: gang)"
    _build(tmp_path / "none", skip=compiled.MODULES)
    assert compiled.why_pure(tmp_path / "none", {}) == "not compiled"


@pytest.mark.parametrize("value, pure", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_environment_asks_for_pure_python(tmp_path, value, pure):
    _build(tmp_path)
    assert (compiled.why_pure(tmp_path, {compiled.PURE_ENV: value}) != "") is pure


def test_a_pure_python_build_takes_away_an_earlier_compiled_one(tmp_path):
    """`YKBUS_PURE_PYTHON=1 make build` after `make build`: nothing compiled is left to load."""
    repo = Path(__file__).parents[2]
    _build(tmp_path / "src" / "ykbus")
    (tmp_path / "src" / "ykbus" / "core" / "compiled.py").write_bytes((repo / "src/ykbus/core/compiled.py").read_bytes())
    (tmp_path / "src" / f"{compiled.GROUP}__mypyc.so").write_bytes(b"")
    (tmp_path / "setup.py").write_bytes((repo / "setup.py").read_bytes())
    run = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, compiled.PURE_ENV: "1"})
    assert run.returncode == 0, run.stderr
    assert compiled.why_pure(tmp_path / "src" / "ykbus", {}) == "not compiled"
    assert not (tmp_path / "src" / "ykbus" / "core" / compiled.BUILT_FROM).exists()
    assert not list((tmp_path / "src").glob(f"{compiled.GROUP}__mypyc*"))


def test_a_stale_build_warns_once_and_runs_the_sources(tmp_path):
    """The finder in a fresh interpreter, over a copy of the package with one source changed."""
    here = Path(compiled.__file__).parent
    if compiled.compiled_file(here, "partition") is None:
        pytest.skip("no compiled core in this checkout")
    import shutil

    root = tmp_path / "site"
    shutil.copytree(Path(compiled.__file__).parent.parent, root / "ykbus")
    for shared in Path(compiled.__file__).parent.parent.parent.glob(f"{compiled.GROUP}__mypyc*"):
        shutil.copy2(shared, root)
    with open(root / "ykbus" / "core" / "ledger.py", "a") as f:
        f.write("# edited after the build\n")
    script = "import ykbus.core, ykbus.core.partition as p; from ykbus.core import compiled; print(compiled.mode); print(p.__file__)"
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                         env={**env, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr
    mode, file = run.stdout.split("\n")[:2]
    assert mode == "python: sources changed since the build: core/ledger.py"
    assert file == str(root / "ykbus" / "core" / "partition.py")
    assert run.stderr.count("the compiled core is not used (sources changed since the build: core/ledger.py)") == 1
