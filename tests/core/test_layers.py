"""Layering rules: the core is sans-IO, and the committed JSON Schemas are current."""

import ast
import sys
from pathlib import Path

from ykbus.si.schema import schemas

SRC = Path(__file__).parents[2] / "src" / "ykbus"
ALLOWED = {"msgspec", "sortedcontainers", "ykbus"}
FORBIDDEN_YKBUS = ("ykbus.log", "ykbus.bus", "ykbus.cli", "ykbus.yamlload", "ykbus.api")
# the one module of the core that may look at files: it decides nothing, it chooses at import
# between the compiled modules and their sources (tests/core/test_compiled.py)
LOADER = SRC / "core" / "compiled.py"


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_core_imports_only_stdlib_msgspec_and_sortedcontainers():
    files = list((SRC / "core").rglob("*.py")) + list((SRC / "si").rglob("*.py")) + [SRC / "limits.py"]
    assert len(files) > 5
    io_stdlib = {"time", "random", "uuid", "socket", "asyncio", "threading", "os", "subprocess", "datetime", "secrets"}
    for path in files:
        for name in imports_of(path):
            top = name.split(".")[0]
            if path == LOADER and top in ("os", "sys", "importlib", "pathlib"):
                continue
            assert top not in io_stdlib, f"{path.name} imports {name}: the core has no clock, IO or randomness"
            assert top in ALLOWED or top in sys.stdlib_module_names, f"{path.name} imports {name}"
            assert not name.startswith(FORBIDDEN_YKBUS), f"{path.name} imports the shell module {name}"


def test_committed_schemas_are_current():
    directory = Path(__file__).parents[2] / "schemas"
    expected = schemas()
    present = {p.name: p.read_text() for p in directory.glob("*.json")}
    assert set(present) == set(expected), "run: ykbus schema --dir schemas"
    for name, text in expected.items():
        assert present[name] == text, f"schemas/{name} is stale: run ykbus schema --dir schemas"
