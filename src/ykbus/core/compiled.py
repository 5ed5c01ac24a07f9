"""The compiled core: which of the core's modules mypyc compiles, and whether they are loaded.

`setup.py` compiles `MODULES` with mypyc into extension modules that sit beside their
sources (`partition.py` and `partition.cpython-311-x86_64-linux-gnu.so`); the scheduling
pass then runs as C (docs/architecture.md, "The compiled core"). They are the same code:
the sources are what is compiled, and the golden traces replay to the same bytes either way
(tests/core/test_compiled.py).

Python imports an extension module before a source of the same name, so a build older than
its sources would run old code. `select()`, which `ykbus/core/__init__.py` calls before any
of these modules is imported, loads every one of them from its source instead when:
- `YKBUS_PURE_PYTHON` is set (to anything but empty or 0),
- a source is newer than its compiled module (edited, or checked out, after the build),
- or not every module was compiled (a pure-Python install: `YKBUS_PURE_PYTHON=1 pip install`).
It says why on stderr, once. All or none: the compiled modules share native classes, so a
compiled module cannot take objects of a pure-Python one.

Nothing here may be compiled itself, and it imports nothing of ykbus: setup.py reads it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

# the scheduling pass and the model it reads: everything a pass runs, bar the reasons it
# records (why.py) and the outbox, which hold msgspec Structs (mypyc compiles no Struct)
MODULES = ("resources", "lifecycle", "model", "policies", "ledger", "scorers", "gang", "scheduling",
           "partition")
PACKAGE = "ykbus.core"
PURE_ENV = "YKBUS_PURE_PYTHON"
# wheels are unpacked in any order within a moment: a source newer by more than this was
# written after the build
STALE_AFTER_S = 1.0

UNSELECTED = "python: not selected yet"
mode = UNSELECTED  # "compiled", or "python: <why>" (`ykbus bench` reports it)


def compiled_file(directory: Path, name: str) -> Path | None:
    """The extension module built for `name` in `directory`, if any."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = directory / f"{name}{suffix}"
        if path.exists():
            return path
    return None


def why_pure(directory: Path, environ: Mapping[str, str] = os.environ) -> str:
    """Why the modules in `directory` must be loaded from their sources; "" when the build is current."""
    if environ.get(PURE_ENV, "") not in ("", "0"):
        return f"{PURE_ENV} is set"
    missing, newer = [], []
    for name in MODULES:
        built = compiled_file(directory, name)
        if built is None:
            missing.append(name)
            continue
        source = directory / f"{name}.py"
        if source.exists() and source.stat().st_mtime > built.stat().st_mtime + STALE_AFTER_S:
            newer.append(f"{name}.py")
    if len(missing) == len(MODULES):
        return "not compiled"
    if missing:
        return f"compiled in part (missing: {', '.join(missing)})"
    if newer:
        return f"sources newer than their build: {', '.join(newer)}"
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
    why = why_pure(directory)
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
