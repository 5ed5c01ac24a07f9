"""Builds ykbus with its scheduling core compiled by mypyc: the modules listed in
src/ykbus/core/compiled.py become extension modules beside their sources (docs/architecture.md,
"The compiled core"). The metadata is in pyproject.toml.

YKBUS_PURE_PYTHON=1 builds nothing: the core then runs as pure Python (slower, same decisions).
Compiling needs a C compiler and Python's headers; the build fails, naming what is missing,
without them.
"""

import json
import os
import runpy
from pathlib import Path

from setuptools import setup

PACKAGE = Path("src/ykbus")
compiled = runpy.run_path(str(PACKAGE / "core" / "compiled.py"))  # the list, and what a build records


def ext_modules() -> list:
    record = PACKAGE / "core" / compiled["BUILT_FROM"]
    if os.environ.get(compiled["PURE_ENV"], "") not in ("", "0"):
        # an earlier build in this tree (`make build`) goes, so that nothing compiled is left to load
        record.unlink(missing_ok=True)
        for name in compiled["MODULES"]:
            old = compiled["compiled_file"](PACKAGE / "core", name)
            if old is not None:
                old.unlink()
        for shared in PACKAGE.parent.glob(f"{compiled['GROUP']}__mypyc.*"):
            shared.unlink()
        return []
    from mypyc.build import mypycify

    for built in (PACKAGE / "core").iterdir():  # a module taken off the list: its old build would still load first
        name = built.name.split(".")[0]
        if built.suffix in (".so", ".pyd") and name not in compiled["MODULES"]:
            built.unlink()

    # what mypyc is about to read: a source changed after this point makes the build stale
    record.write_text(json.dumps(compiled["core_sources"](PACKAGE), indent=1, sort_keys=True) + "\n")
    sources = [str(PACKAGE / "core" / f"{name}.py") for name in compiled["MODULES"]]
    # the build environment has none of the runtime dependencies: mypy sees them as Any
    try:
        return mypycify(["--ignore-missing-imports", "--follow-imports=silent", *sources],
                        opt_level="3", group_name=compiled["GROUP"])
    except BaseException:  # a type error: the modules of an earlier build are not of these sources
        record.unlink(missing_ok=True)
        raise


setup(ext_modules=ext_modules())
