"""The compiled core (core/compiled.py): what runs is the current build of the sources, and
it decides exactly what the sources decide."""

from __future__ import annotations

import importlib.machinery
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


def _build(directory: Path, *, skip: tuple[str, ...] = ()) -> None:
    """A fake build in `directory`: every module's source, and a compiled file beside each."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in compiled.MODULES:
        (directory / f"{name}.py").write_text("")
        if name not in skip:
            (directory / f"{name}{suffix}").write_bytes(b"")
            os.utime(directory / f"{name}.py", (1_000, 1_000))
            os.utime(directory / f"{name}{suffix}", (1_000, 1_000))


def test_a_current_build_is_used(tmp_path):
    _build(tmp_path)
    assert compiled.why_pure(tmp_path, {}) == ""


def test_a_source_edited_after_the_build_is_run_from_source(tmp_path):
    _build(tmp_path)
    os.utime(tmp_path / "ledger.py", (1_060, 1_060))  # a minute later
    assert compiled.why_pure(tmp_path, {}) == "sources newer than their build: ledger.py"


def test_files_unpacked_in_any_order_within_a_moment_are_one_build(tmp_path):
    _build(tmp_path)
    os.utime(tmp_path / "ledger.py", (1_000.5, 1_000.5))
    assert compiled.why_pure(tmp_path, {}) == ""


def test_a_build_missing_a_module_is_not_used(tmp_path):
    _build(tmp_path, skip=("gang",))
    assert compiled.why_pure(tmp_path, {}) == "compiled in part (missing: gang)"
    (tmp_path / "none").mkdir()
    _build(tmp_path / "none", skip=compiled.MODULES)
    assert compiled.why_pure(tmp_path / "none", {}) == "not compiled"


@pytest.mark.parametrize("value, pure", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_environment_asks_for_pure_python(tmp_path, value, pure):
    _build(tmp_path)
    assert (compiled.why_pure(tmp_path, {compiled.PURE_ENV: value}) != "") is pure


def test_a_stale_build_warns_once_and_runs_the_sources(tmp_path):
    """The finder in a fresh interpreter, over a copy of the package whose sources are newer."""
    here = Path(compiled.__file__).parent
    if compiled.compiled_file(here, "partition") is None:
        pytest.skip("no compiled core in this checkout")
    import shutil

    root = tmp_path / "site"
    shutil.copytree(Path(compiled.__file__).parent.parent, root / "ykbus")
    for shared in Path(compiled.__file__).parent.parent.parent.glob("ykbus_core__mypyc*"):
        shutil.copy2(shared, root)
    later = compiled.compiled_file(here, "ledger").stat().st_mtime + 60
    os.utime(root / "ykbus" / "core" / "ledger.py", (later, later))
    script = "import ykbus.core, ykbus.core.partition as p; from ykbus.core import compiled; print(compiled.mode); print(p.__file__)"
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root,
                         env={**env, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr
    mode, file = run.stdout.split("\n")[:2]
    assert mode == "python: sources newer than their build: ledger.py"
    assert file == str(root / "ykbus" / "core" / "partition.py")
    assert run.stderr.count("the compiled core is not used (sources newer than their build: ledger.py)") == 1
