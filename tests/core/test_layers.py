"""Layering rules: the core is sans-IO, and the committed JSON Schemas are current."""

import ast
import sys
from pathlib import Path

from ykbus.si.schema import schemas

SRC = Path(__file__).parents[2] / "src" / "ykbus"
# msgspec decodes; re2 matches placement filters in linear time, as YuniKorn's Go does (pure,
# deterministic functions of their input: a backtracking `re` froze the writer on a pattern)
ALLOWED = {"msgspec", "re2", "ykbus"}
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


def test_core_imports_only_stdlib_and_msgspec():
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


# --- shape: no import cycle inside the core; files and classes one reading holds ----------

CORE = SRC / "core"
MODULE_LINES, CLASS_LINES, CLASS_METHODS = 800, 400, 40


def core_imports(path: Path) -> set[str]:
    """The core modules `path` imports, wherever the import is (under TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("ykbus.core."):
                found.add(node.module.split(".")[2])
            elif node.module == "ykbus.core":
                found.update(a.name for a in node.names if (CORE / f"{a.name}.py").exists())
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("ykbus.core."))
    found.discard(path.stem)
    return found


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (module -> modules it imports) as a path, or None."""
    done: set[str] = set()
    for start in sorted(graph):
        stack, on_path = [(start, iter(sorted(graph[start])))], [start]
        while stack:
            mod, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                on_path.pop()
                done.add(mod)
            elif dep in on_path:
                return on_path[on_path.index(dep):] + [dep]
            elif dep not in done and dep in graph:
                stack.append((dep, iter(sorted(graph[dep]))))
                on_path.append(dep)
    return None


def test_no_import_cycle_inside_the_core():
    graph = {p.stem: core_imports(p) for p in CORE.glob("*.py") if p.stem != "__init__"}
    assert {"scheduling", "state", "partition"} <= set(graph)
    cycle = import_cycle(graph)
    assert cycle is None, "core modules import each other in a circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None


def test_modules_and_classes_stay_readable():
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines (at most {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > CLASS_LINES:
                too_long.append(f"{path.relative_to(SRC)}: class {node.name}, "
                                f"{node.end_lineno - node.lineno + 1} lines (at most {CLASS_LINES})")
            if isinstance(node, ast.ClassDef):
                methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                if methods > CLASS_METHODS:
                    too_long.append(f"{path.relative_to(SRC)}: class {node.name}, {methods} methods "
                                    f"(at most {CLASS_METHODS})")
    assert not too_long, "split by what it owns: " + "; ".join(too_long)


# --- the planner reads the state and writes only its own scratch ---------------------------

PLANNER = [CORE / "scheduling.py", CORE / "nodefinder.py", CORE / "gang.py", CORE / "decisions.py",
           CORE / "preemption.py"]
# container mutators, and the methods of the waits, the gates and the read models that change
# them (the gates' `close` and `gates_for` among them: the walk returns the gates it judged,
# `Learned`, and looks gates up without making them)
MUTATORS = {"append", "add", "pop", "popitem", "remove", "discard", "clear", "update", "setdefault", "insert",
            "extend", "sort", "reverse", "__setitem__", "__delitem__", "enter", "leave", "rekey", "let_through",
            "close", "gates_for", "open_fitting", "open_reserving", "settle", "learned", "reservation_taken",
            "tally", "park", "wake", "wake_at", "activate", "unwait", "pend", "unpend", "unreserve", "book",
            "move", "reserve",  # an ask's place (core/indexes.py AskPlaces.move, and the waits' calls of it)
            "unbook", "sync_app", "deactivate", "index_node"}


# the planner's references to the state it reads (the partition's records, and the room gates
# and node index its waits keep): written through, they are not its scratch
STATE_REFS = {"part", "records", "pool", "node_index"}


def writes_outside_scratch(path: Path) -> list[str]:
    """Writes in `path` to anything but a local name or the planner's own attributes
    (`self.<attr>`, not through `self.part` or another of `STATE_REFS`): assignments,
    deletions and mutating calls through an attribute or subscript of another object."""
    tree = ast.parse(path.read_text())
    found = []

    def root_ok(expr: ast.expr) -> bool:
        """`expr` (an attribute or subscript chain) reaches the planner's own scratch or a
        local container: `self.<attr>...` (not through `STATE_REFS`), or `local[...]...`."""
        chain = []
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            chain.append(expr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return False
        innermost = chain[-1]
        if expr.id == "self":  # its own attribute (bound, or written into), not through the state
            return isinstance(innermost, ast.Attribute) and (innermost.attr not in STATE_REFS or len(chain) == 1)
        return all(isinstance(c, ast.Subscript) for c in chain)

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            for sub in ast.walk(target):  # a, b = ...: each element
                if isinstance(sub, (ast.Attribute, ast.Subscript)):
                    if not root_ok(sub):
                        found.append(f"{path.name}:{node.lineno}: {ast.unparse(sub)}")
                    break
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            receiver = node.func.value
            into_state = (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name)
                          and receiver.value.id == "self" and receiver.attr in STATE_REFS)  # self.pool.leave()
            if into_state or not (isinstance(receiver, ast.Name) or root_ok(receiver)):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}()")
    return found


def test_the_planner_writes_only_its_own_scratch():
    """The planner (core/scheduling.py, the gang planner, the decisions) changes nothing of
    the state it reads: tests/core/test_scheduling.py checks a plan leaves a snapshot byte
    for byte as it was; this checks the code has no write to the state to begin with."""
    for path in PLANNER:
        assert path.exists()
        assert writes_outside_scratch(path) == [], f"the planner writes state in {path.name}"


def test_the_write_finder_finds_writes(tmp_path):
    planner = tmp_path / "p.py"
    planner.write_text("class S:\n    def f(self, q, ask):\n        q.sort_key = 1\n        self.part.pool.leave(ask)\n"
                       "        ask.app.active.add(ask)\n        self.scratch[q] = 1\n        local = []\n"
                       "        local.append(q)\n        self.failed.add(q)\n        self.pool.leave(ask)\n"
                       "        self.node_index.add(q)\n        self.pool.close(q)\n"
                       "        self.pool.gates_for(ask)\n")
    assert writes_outside_scratch(planner) == ["p.py:3: q.sort_key", "p.py:4: self.part.pool.leave()",
                                               "p.py:5: ask.app.active.add()", "p.py:10: self.pool.leave()",
                                               "p.py:11: self.node_index.add()", "p.py:12: self.pool.close()",
                                               "p.py:13: self.pool.gates_for()"]


def module_imports(path: Path) -> set[str]:
    """The ykbus modules `path` imports (dotted, under src/ykbus), wherever the import is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in names:
            if name.startswith("ykbus."):
                found.add(name)
        if isinstance(node, ast.ImportFrom) and node.module in ("ykbus", "ykbus.bus", "ykbus.core", "ykbus.log"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_no_import_cycle_among_the_commands_and_the_service():
    """cli, up and the service's modules do not import each other in a circle (the service
    settings live in bus/settings.py: up takes them from there, not from the command line's
    module; the service's parts take `ServiceSettings` from there, not from bus/service.py)."""
    modules = {f"ykbus.{p.relative_to(SRC).with_suffix('').as_posix().replace('/', '.')}": p
               for p in SRC.rglob("*.py") if p.stem != "__init__"}
    graph = {name: {m for m in module_imports(path) if m in modules and m != name} for name, path in modules.items()
             if name in ("ykbus.cli", "ykbus.up") or name.startswith(("ykbus.bus.", "ykbus.tyjob."))}
    cycle = import_cycle(graph)
    assert cycle is None, "modules import each other in a circle: " + " -> ".join(cycle)


# --- rest/ reads the core; it does not reach the bus ----------------------------------------

REST = SRC / "rest"
REST_FORBIDDEN = ("nats", "ykbus.bus")  # bus/ imports rest/, never the other way (issue 41)


def forbidden_imports(path: Path, package: str, forbidden: tuple[str, ...]) -> list[str]:
    """The imports in `path` (a module of `package`) of a module in `forbidden` or under one,
    wherever they are: `import x.y`, `from x import y` (and `from ykbus import bus`),
    relative ones resolved against `package`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        hits = [n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)]
        if hits:
            found.append(f"{path.name}:{node.lineno}: {hits[0]}")
    return found


def test_rest_imports_neither_nats_nor_the_bus():
    """Every module under rest/ turns the core's state and outputs into YuniKorn's answers
    without IO of its own: reading NATS (the event feed) is bus/eventfeed.py's."""
    files = sorted(REST.rglob("*.py"))
    assert len(files) > 5
    found = [hit for path in files for hit in forbidden_imports(path, "ykbus.rest", REST_FORBIDDEN)]
    assert found == [], f"rest/ imports the bus or nats: {found}"


def test_the_rest_import_finder_finds_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import nats\nimport nats.errors as e\nfrom nats.js.api import ConsumerConfig\n"
                      "from ykbus.bus.subjects import OUT_STREAM\nfrom ykbus import bus\nfrom ..bus import live\n"
                      "from ykbus.busy import x\nfrom ykbus.rest import events\nimport natsort\n"
                      "def f():\n    import ykbus.bus.service\n")
    assert forbidden_imports(module, "ykbus.rest", REST_FORBIDDEN) == [
        "m.py:1: nats", "m.py:2: nats.errors", "m.py:3: nats.js.api", "m.py:4: ykbus.bus.subjects",
        "m.py:5: ykbus.bus", "m.py:6: ykbus.bus", "m.py:11: ykbus.bus.service"]


# --- components, composed: no stateful class inherits from another ---------------------------

# bases that make a class a value (or an error, or an interface), not a holder of state
VALUE_BASES = {"msgspec.Struct", "Struct", "enum.Enum", "enum.StrEnum", "enum.IntEnum", "enum.Flag", "Enum",
               "StrEnum", "IntEnum", "Exception", "BaseException", "ValueError", "KeyError", "RuntimeError",
               "Protocol", "NamedTuple", "TypedDict"}
# classes of src/ykbus whose instances are values though they are plain classes: set once when
# built, never changed after (the subclasses only name a kind)
VALUE_CLASSES = {
    "Wait",  # core/model.py: where an ask waits, a typed place (key, name), shared and never changed
    "NodeScorer",  # core/scorers.py: a node's key from its weights, given when built; a class for the method table
}
# stateful subclasses of stateful classes still to be composed (each with why it is left)
STATEFUL_SUBCLASSES_LEFT: dict[str, str] = {}


def class_table() -> dict[str, list[tuple[Path, ast.ClassDef]]]:
    table: dict[str, list[tuple[Path, ast.ClassDef]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                table.setdefault(node.name, []).append((path, node))
    return table


def holds_state(cls: ast.ClassDef) -> bool:
    """Whether the class declares state: non-empty `__slots__`, or a method that assigns an
    attribute of `self`."""
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets):
            if not (isinstance(stmt.value, (ast.Tuple, ast.List)) and not stmt.value.elts):
                return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(stmt):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                            return True
    return False


def stateful_inheritance(table: dict[str, list[tuple[Path, ast.ClassDef]]]) -> list[str]:
    """`module: Class(Base)` for each class of src/ykbus that inherits from a class of
    src/ykbus holding state, unless the base is a value (`VALUE_BASES`, `VALUE_CLASSES`, or
    built on them). Bases from libraries (argparse, logging, prometheus) are their design."""

    def is_value(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in VALUE_BASES or name in VALUE_CLASSES:
            return True
        defs = table.get(name.split(".")[-1], []) if name not in seen else []
        return bool(defs) and all(any(is_value(ast.unparse(b).split("[")[0], seen | {name}) for b in c.bases)
                                  for _, c in defs)

    found = []
    for name, defs in table.items():
        for path, cls in defs:
            for base in cls.bases:
                base_name = ast.unparse(base).split("[")[0]
                if is_value(base_name) or base_name not in table:
                    continue
                if any(holds_state(c) for _, c in table[base_name]):
                    found.append(f"{path.relative_to(SRC)}: {name}({base_name})")
    return sorted(found)


def test_no_stateful_class_inherits_from_another():
    """A partition, a core, a service are components held by reference, each owning its
    state (issue 41): no stateful class extends another (an interface without state, or a
    value, may be a base)."""
    found = stateful_inheritance(class_table())
    left = [f for f in found if f.split(": ")[1] not in STATEFUL_SUBCLASSES_LEFT]
    assert left == [], f"stateful classes inherit from stateful classes: {left}"
    stale = set(STATEFUL_SUBCLASSES_LEFT) - {f.split(": ")[1] for f in found}
    assert not stale, f"STATEFUL_SUBCLASSES_LEFT lists what no longer inherits: {sorted(stale)}"


def test_the_inheritance_finder_finds_stateful_bases(tmp_path):
    table = {}
    source = ("import msgspec\nclass A:\n    def __init__(self):\n        self.x = 1\nclass B(A):\n    pass\n"
              "class I:\n    def f(self): ...\nclass C(I):\n    def __init__(self):\n        self.y = 2\n"
              "class V(msgspec.Struct):\n    x: int\nclass W(V):\n    y: int\n")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            table.setdefault(node.name, []).append((SRC / "m.py", node))
    assert stateful_inheritance(table) == ["m.py: B(A)"]
