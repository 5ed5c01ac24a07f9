"""Builds ykbus with its scheduling core compiled by mypyc: the modules listed in
src/ykbus/core/compiled.py become extension modules beside their sources (docs/architecture.md,
"The compiled core"). The metadata is in pyproject.toml.

YKBUS_PURE_PYTHON=1 builds nothing: the core then runs as pure Python (slower, same decisions).
Compiling needs a C compiler and Python's headers; the build fails, naming what is missing,
without them.
"""

import os
import runpy

from setuptools import setup

compiled = runpy.run_path("src/ykbus/core/compiled.py")


def ext_modules() -> list:
    if os.environ.get(compiled["PURE_ENV"], "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    sources = [f"src/ykbus/core/{name}.py" for name in compiled["MODULES"]]
    # the build environment has none of the runtime dependencies: mypy sees them as Any
    return mypycify(["--ignore-missing-imports", "--follow-imports=silent", *sources],
                    opt_level="3", group_name="ykbus_core")


setup(ext_modules=ext_modules())
