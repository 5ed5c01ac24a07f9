"""The compiled core: which of the core's modules mypyc compiles, and whether they are loaded.

`setup.py` compiles `MODULES` with mypyc into extension modules that sit beside their
sources (`partition.py` and `partition.cpython-311-x86_64-linux-gnu.so`); the scheduling
pass then runs as C (docs/architecture.md, "The compiled core"). They are the same code:
the sources are what is compiled, and the golden traces replay to the same bytes either way
(tests/core/test_compiled.py).

Python imports an extension module before a source of the same name, so a build older than
its sources would run old code. The build records in `BUILT_FROM` what it compiled from:
the SHA-256 of every source of the core (`core/`, `si/` and `limits.py`: compiled, or
imported by compiled code that checks their types at run time), taken before mypyc reads
them. `select()`, which
`ykbus/core/__init__.py` calls before any of these modules is imported, loads every one of
them from its source instead when:
- `YKBUS_PURE_PYTHON` is set (to anything but empty or 0),
- a source of the core differs from what the build read (edited, or checked out, since:
  even during the build), or the build left no record of it,
- or not every module was compiled (a pure-Python install: `YKBUS_PURE_PYTHON=1 pip install`).
It says why on stderr, once. All or none: the compiled modules share native classes, so a
compiled module cannot take objects of a pure-Python one.

Nothing here may be compiled itself, and it imports nothing of ykbus: setup.py runs it.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

# the scheduling pass, the model it reads and the outbox it writes: everything a pass runs,
# bar the reasons it records (why.py), msgspec Structs (mypyc compiles no Struct)
MODULES = ("resources", "chunked", "sortedseq", "lifecycle", "step", "tags", "model", "readmodel", "fold", "packing", "timeline", "backfill", "topology", "topoplace", "dryrun", "policies", "ledger", "scorers", "waits", "decisions", "gang", "preemption",
           "state", "nodefinder", "scheduling", "effects", "indexes", "changes", "applier", "partition", "deadlines", "registry", "intake", "core")
PACKAGE = "ykbus.core"
GROUP = "ykbus_core"  # mypyc's group: the shared library `ykbus_core__mypyc.<suffix>` beside the package
PURE_ENV = "YKBUS_PURE_PYTHON"
BUILT_FROM = "compiled-sources.json"  # beside the modules: source path -> SHA-256, as the build read them

UNSELECTED = "python: not selected yet"
mode = UNSELECTED  # "compiled", or "python: <why>" (`ykbus bench` reports it)


def core_source_paths(package: Path) -> list[Path]:
    """Every source of the core under `package` (the `ykbus` directory): what the compiled
    modules are built from, and build against (the Makefile rebuilds when one changes)."""
    return [*sorted((package / "core").glob("*.py")), *sorted((package / "si").glob("*.py")), package / "limits.py"]


def core_sources(package: Path) -> dict[str, str]:
    """SHA-256 of each of `core_source_paths`, by path relative to `package`."""
    return {p.relative_to(package).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in core_source_paths(package)}


def compiled_file(directory: Path, name: str) -> Path | None:
    """The extension module built for `name` in `directory`, if any."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = directory / f"{name}{suffix}"
        if path.exists():
            return path
    return None


def why_pure(package: Path, environ: Mapping[str, str] = os.environ) -> str:
    """Why the compiled modules under `package` (the `ykbus` directory) must be loaded from
    their sources; "" when the build is current."""
    if environ.get(PURE_ENV, "") not in ("", "0"):
        return f"{PURE_ENV} is set"
    core = package / "core"
    missing = [name for name in MODULES if compiled_file(core, name) is None]
    if len(missing) == len(MODULES):
        return "not compiled"
    if missing:
        return f"compiled in part (missing: {', '.join(missing)})"
    try:
        recorded = json.loads((core / BUILT_FROM).read_text())
    except (OSError, ValueError):
        return f"the build left no record of its sources ({BUILT_FROM})"
    now = core_sources(package)
    changed = sorted(path for path in recorded.keys() | now.keys() if recorded.get(path) != now.get(path))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return f"sources changed since the build: {', '.join(changed[:3])}{more}"
    return ""


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources, ahead of the extension modules beside them."""

    def __init__(self, directory: Path) -> None:
        self.sources = {f"{PACKAGE}.{name}": directory / f"{name}.py" for name in MODULES}

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def select() -> str:
    """Load the compiled modules, or all of them from source (see the module's docstring)."""
    global mode
    if mode != UNSELECTED:
        return mode
    directory = Path(__file__).parent
    why = why_pure(directory.parent)
    if not why:
        mode = "compiled"
        return mode
    if any(compiled_file(directory, name) for name in MODULES):  # else Python finds the sources anyway
        sys.meta_path.insert(0, SourceFinder(directory))
        if why != f"{PURE_ENV} is set":  # asked for: nothing to say
            print(f"ykbus: the compiled core is not used ({why}): the core runs as pure Python, slower. "
                  f"Rebuild it with `make build` (or `pip install -e .`).", file=sys.stderr)
    mode = f"python: {why}"
    return mode
