"""Ownership, tested (issue 41): for each stateful class of the core, docs/architecture.md
("Who writes what") names the modules allowed to write its attributes, and this test fails
on a write from any other module of src/ykbus/core.

A *write* to attribute `A` of an object `R` is, in the source:
- an assignment, augmented assignment or `del` of `R.A`, or of an item under it
  (`R.A[k] = v`, `R.A[k][j] += 1`, `del R.A[k]`);
- a mutating call on what `R.A` holds, or on an item under it: a container method
  (`R.A.append(x)`, `R.A[k].pop()`, `MUTATORS`), or one of the functions that change their
  first argument in place (`add_into(R.A, d)`, `heappush(R.A, x)`, `IN_PLACE`);
- `setattr(R, "A", v)` / `delattr(R, "A")` with a literal name.
A call of a component's own method (`part.waits.park(ask)`, `pool.close(...)`) is not a
write by the caller: it is the component's interface, and the writes inside it are checked
in the component's module. Calls on the core's containers (`SortedSeq`, `ChunkedDict`) are
container calls: `app.asks.pop(key)` writes `App.asks`.

Which class `R` has is a heuristic over the source alone (no type checker runs):
1. `self` is the class the method is defined in;
2. a name annotated in its function (`def f(node: Node)`, `x: App = ...`) or assigned a
   constructor call (`x = Queue(...)`) has that class; otherwise a name has the class its
   spelling conventionally means in this code base (`NAMES`: `part` a Partition, `q` a
   Queue, `alloc` an Alloc, ...);
3. `E.b` has the class of attribute `b` of `E`'s class, from that class's annotations and
   constructor calls assigned in its methods (`self.records = PartitionState(...)`,
   `records: PartitionState`), else the class the attribute name conventionally holds
   (`ATTRS`: `.app` an App, `.records` a PartitionState, ...);
4. `E[k]` has the class of the items of `E`'s annotation (`dict[str, Node]`: a Node);
5. if the class found does not declare `A` (in its `__slots__` or an assignment to
   `self.A` in its methods), or none was found, and exactly one stateful class of the
   core declares `A`, it is that class; otherwise the write is not attributed (left out).
Limits (what it cannot see): aliases (`nodes = part.records.nodes; nodes.pop(k)` writes
the records through a local name); containers passed to a helper as an argument other
than the first of `IN_PLACE` functions (`helper(part.records.nodes)` that pops inside);
attribute names shared by several classes on a receiver the rules above cannot type (a
loop variable named `x`); methods of the core's classes that mutate what they are given;
`getattr`/`setattr` with computed names. It reads src/ykbus/core only: rest/ is checked by
its fingerprint test (nothing there changes a record), bus/ holds the core through
`CoreService`, the one writer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from tests.core.test_layers import VALUE_BASES, holds_state

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ykbus"
CORE = SRC / "core"
DOC = ROOT / "docs" / "architecture.md"

MUTATORS = {"append", "appendleft", "add", "pop", "popleft", "popitem", "remove", "discard", "clear", "update",
            "setdefault", "insert", "extend", "sort", "reverse", "__setitem__", "__delitem__"}
IN_PLACE = {"add_into", "sub_into", "max_into", "heappush", "heappop", "heapify", "heapreplace", "heappushpop",
            "insort", "insort_left", "insort_right"}
CONTAINERS = {"SortedSeq", "ChunkedDict"}  # the core's own containers: their mutators write their holder
# a class whose attributes of the same names as another's are references to that one's
# containers: a write through them (an item, a mutating call) writes the other; binding
# the reference (`self.nodes = records.nodes`) is its own
REFERENCES = {"Partition": "PartitionState"}

# the class a name conventionally has in the core's code (rule 2), when not annotated
NAMES = {
    "part": "Partition", "partition": "Partition", "p": "Partition", "records": "PartitionState", "rec": "PartitionState",
    "node": "Node", "app": "App", "application": "App", "ask": "Ask", "alloc": "Alloc", "allocation": "Alloc",
    "victim": "Alloc", "ph": "Alloc", "queue": "Queue", "q": "Queue", "leaf": "Queue", "parent": "Queue",
    "child": "Queue", "root": "Queue", "tracker": "Tracker", "rm": "ResourceManager", "core": "Core",
    "registry": "RMRegistry", "intake": "Intake", "waits": "Waits", "ledger": "Ledger", "scheduler": "Scheduler",
    "changes": "Changes", "applier": "Applier", "pool": "RoomWaits", "parked": "WaitPlaces", "outbox": "Outbox",
    "summary": "PartitionSummary", "finder": "NodeFinder", "overlay": "GangOverlay", "policies": "NodePolicies",
}
# the class an attribute name conventionally holds (rule 3), when its holder's class does not say
ATTRS = {
    "records": "PartitionState", "waits": "Waits", "ledger": "Ledger", "changes": "Changes", "applier": "Applier",
    "scheduler": "Scheduler", "registry": "RMRegistry", "intake": "Intake", "pool": "RoomWaits",
    "parked": "WaitPlaces", "app": "App", "node": "Node", "ask": "Ask", "alloc": "Alloc", "queue": "Queue",
    "parent": "Queue", "root": "Queue", "summary": "PartitionSummary", "pending_codes": "PendingCodes",
    "finder": "NodeFinder", "policies": "NodePolicies", "core": "Core", "timers": "Timers",
}


# --- the classes ---------------------------------------------------------------------------

@dataclass
class ClassInfo:
    name: str
    module: str  # "core/model.py"
    attrs: set[str]  # declared: __slots__ and self.<attr> assigned in its methods
    types: dict[str, str]  # attribute -> class of what it holds (annotations, constructor calls)
    items: dict[str, str]  # attribute -> class of its items (dict[str, Node], list[Ask], ...)


def annotation_class(ann: ast.expr | None, known: set[str]) -> tuple[str | None, str | None]:
    """(the class, the class of its items) an annotation names, among `known`:
    `Node`, `Node | None`, `"Node"`, `dict[str, Node]`, `list[Ask]`, `ChunkedDict[Alloc]`."""
    if ann is None:
        return None, None
    text = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else ast.unparse(ann)
    text = text.replace("Optional[", "").replace(" | None", "").replace("None | ", "").strip()
    head = text.split("[", 1)[0].split(".")[-1]
    inner = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text.split("[", 1)[1]) if "[" in text else []
    item = next((n for n in reversed(inner) if n in known), None)
    return (head if head in known else None), item


def constructor_class(value: ast.expr | None, known: set[str]) -> str | None:
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func).split(".")[-1].split("[")[0]
        return name if name in known else None
    return None


def core_classes() -> dict[str, ClassInfo]:
    return classes_of([(f"core/{path.name}", ast.parse(path.read_text())) for path in sorted(CORE.glob("*.py"))])


def classes_of(modules: list[tuple[str, ast.Module]]) -> dict[str, ClassInfo]:
    """Every class of `modules` that holds state (test_layers.holds_state), unless an
    exception or a msgspec Struct, with what it declares."""
    found: dict[str, tuple[str, ast.ClassDef]] = {}
    for module, tree in modules:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and holds_state(node):
                if not any(ast.unparse(b).split("[")[0] in VALUE_BASES for b in node.bases):
                    found[node.name] = (module, node)
    known = set(found)
    table = {}
    for name, (module, cls) in found.items():
        info = ClassInfo(name, module, set(), {}, {})
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                    for t in stmt.targets):
                if isinstance(stmt.value, (ast.Tuple, ast.List)):
                    info.attrs.update(e.value for e in stmt.value.elts if isinstance(e, ast.Constant))
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                cls_of, item = annotation_class(stmt.annotation, known)
                if cls_of:
                    info.types[stmt.target.id] = cls_of
                if item:
                    info.items[stmt.target.id] = item
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg: a.annotation for a in stmt.args.args + stmt.args.kwonlyargs}
                for node in ast.walk(stmt):
                    if isinstance(node, (ast.Assign, ast.AnnAssign)):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for target in targets:
                            pairs = (zip(target.elts, node.value.elts, strict=False)
                                     if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                                     else [(target, node.value)])  # self.a, self.b = a, b
                            for one, value in pairs:
                                if not (isinstance(one, ast.Attribute) and isinstance(one.value, ast.Name)
                                        and one.value.id == "self"):
                                    continue
                                info.attrs.add(one.attr)
                                ann = node.annotation if isinstance(node, ast.AnnAssign) else None
                                if ann is None and isinstance(value, ast.Name):
                                    ann = params.get(value.id)
                                cls_of, item = annotation_class(ann, known)
                                cls_of = cls_of or constructor_class(value, known)
                                if cls_of:
                                    info.types.setdefault(one.attr, cls_of)
                                if item:
                                    info.items.setdefault(one.attr, item)
                    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                            for sub in ast.walk(target):  # a, self.b = ...: each element
                                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                                        and sub.value.id == "self":
                                    info.attrs.add(sub.attr)
        table[name] = info
    return table


# --- the writes ----------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Write:
    module: str  # "core/applier.py"
    line: int
    cls: str
    attr: str
    how: str  # the source of the write

    def key(self) -> tuple[str, str, str]:
        return (self.module, self.cls, self.attr)


class WriteFinder(ast.NodeVisitor):
    """The writes to attributes of the stateful classes of the core in one module, each
    with the class it is attributed to (the heuristic of the module's docstring)."""

    def __init__(self, module: str, classes: dict[str, ClassInfo]) -> None:
        self.module, self.classes = module, classes
        self.known = set(classes)
        self.declaring: dict[str, list[str]] = {}
        for info in classes.values():
            for attr in info.attrs:
                self.declaring.setdefault(attr, []).append(info.name)
        self.class_stack: list[str] = []
        self.env_stack: list[dict[str, tuple[str | None, str | None]]] = [{}]
        self.found: list[Write] = []

    # scopes
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        env = dict(self.env_stack[-1])
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            env[arg.arg] = annotation_class(arg.annotation, self.known)
        for sub in ast.walk(node):
            if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                env[sub.target.id] = annotation_class(sub.annotation, self.known)
            elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                made = constructor_class(sub.value, self.known)
                if made:
                    env[sub.targets[0].id] = (made, None)
        self.env_stack.append(env)
        self.generic_visit(node)
        self.env_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    # what has which class
    def class_of(self, expr: ast.expr) -> tuple[str | None, str | None]:
        """(the class of `expr`, the class of its items), each None when not known."""
        if isinstance(expr, ast.Name):
            if expr.id == "self":
                return (self.class_stack[-1] if self.class_stack and self.class_stack[-1] in self.known else None,
                        None)
            typed = self.env_stack[-1].get(expr.id)
            if typed and (typed[0] or typed[1]):
                return typed
            return NAMES.get(expr.id), None
        if isinstance(expr, ast.Attribute):
            holder, _ = self.class_of(expr.value)
            info = self.classes.get(holder) if holder else None
            if info and (expr.attr in info.types or expr.attr in info.items):
                return info.types.get(expr.attr), info.items.get(expr.attr)
            return ATTRS.get(expr.attr), None
        if isinstance(expr, ast.Subscript):
            return self.class_of(expr.value)[1], None
        return None, None

    def attribute(self, receiver: ast.expr, attr: str) -> str | None:
        """The class attribute `attr` of `receiver` is attributed to (rules 1-5), or None."""
        guess, _ = self.class_of(receiver)
        if guess and attr in self.classes[guess].attrs:
            return guess
        owners = self.declaring.get(attr, [])
        return owners[0] if len(owners) == 1 else None

    def written(self, expr: ast.expr, node: ast.AST, how: str, call: bool = False) -> None:
        """`expr` (a target, or what a mutating call changes) is written: find the attribute
        under it (items stripped: `R.A[k]` writes `A` of `R`)."""
        target = expr
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        if not isinstance(expr, ast.Attribute):
            return
        if call:  # a call on a component's own method is its interface, not a write by the caller
            holder, _ = self.class_of(expr.value)
            info = self.classes.get(holder) if holder else None
            held = info.types.get(expr.attr) if info else ATTRS.get(expr.attr)
            if held and held not in CONTAINERS:
                return
        cls = self.attribute(expr.value, expr.attr)
        if cls in REFERENCES and expr.attr in self.classes.get(REFERENCES[cls], ClassInfo("", "", set(), {}, {})).attrs:
            bound = expr is target and not call and not how.startswith("del ")  # self.nodes = records.nodes
            if not bound:
                cls = REFERENCES[cls]
        if cls is not None:
            self.found.append(Write(self.module, node.lineno, cls, expr.attr, how))

    # writes
    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.targets(target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.targets(node.target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.targets(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.targets(target, node, "del ")
        self.generic_visit(node)

    def targets(self, target: ast.expr, node: ast.AST, prefix: str = "") -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.targets(element, node, prefix)
        elif isinstance(target, ast.Starred):
            self.targets(target.value, node, prefix)
        else:
            self.written(target, node, prefix + ast.unparse(target))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if isinstance(func, ast.Attribute) and name in MUTATORS:
            self.written(func.value, node, ast.unparse(func) + "()", call=True)
        elif name in IN_PLACE and node.args:
            self.written(node.args[0], node, f"{name}({ast.unparse(node.args[0])}, ...)")
        elif name in ("setattr", "delattr") and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            attr = str(node.args[1].value)
            cls = self.attribute(node.args[0], attr)
            if cls is not None:
                self.found.append(Write(self.module, node.lineno, cls, attr, ast.unparse(node)))
        self.generic_visit(node)


def writes_in(source: str, module: str, classes: dict[str, ClassInfo]) -> list[Write]:
    finder = WriteFinder(module, classes)
    finder.visit(ast.parse(source))
    return sorted(finder.found)


def all_writes(classes: dict[str, ClassInfo]) -> list[Write]:
    return [w for path in sorted(CORE.glob("*.py"))
            for w in writes_in(path.read_text(), f"core/{path.name}", classes)]


# --- the owners, from docs/architecture.md -------------------------------------------------

def owners_from_doc(text: str) -> dict[str, set[str]]:
    """The table under "## Who writes what": `| class(es) | module(s) allowed to write | why |`,
    names in backticks, several per cell separated by commas."""
    section = text.split("## Who writes what", 1)[1].split("\n## ", 1)[0]
    owners: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        modules = set(re.findall(r"`([^`]+\.py)`", cells[1]))
        for name in re.findall(r"`([A-Za-z_]+)`", cells[0]):
            assert name not in owners, f"{name} is in the table twice"
            owners[name] = modules
    return owners


# writes from a module that does not own the class, known and left for now: (module, class)
# -> (the attributes it writes, why it is left)
KNOWN: dict[tuple[str, str], tuple[str, str]] = {
}


def violations() -> tuple[list[Write], dict[str, set[str]]]:
    classes = core_classes()
    owners = owners_from_doc(DOC.read_text())
    found = [w for w in all_writes(classes) if w.module not in owners.get(w.cls, set())]
    return found, owners


# --- the tests -----------------------------------------------------------------------------

def test_every_stateful_class_of_the_core_has_its_owners_in_the_docs():
    classes = core_classes()
    owners = owners_from_doc(DOC.read_text())
    assert sorted(set(classes) - set(owners)) == [], "stateful classes without a row in docs/architecture.md"
    assert sorted(set(owners) - set(classes)) == [], "rows in docs/architecture.md for no stateful class"
    for name, info in classes.items():
        assert info.module in owners[name], f"{name}: its own module {info.module} is not among its writers"


def test_only_the_owners_write_the_state():
    """Every write to an attribute of a stateful class of the core is in a module the table
    "Who writes what" of docs/architecture.md names for that class (or known, in `KNOWN`)."""
    found, _ = violations()
    known = {(module, cls, attr) for (module, cls), (attrs, _) in KNOWN.items() for attr in attrs.split()}
    left = sorted({f"{w.module}:{w.line}: {w.cls}.{w.attr} ({w.how})" for w in found if w.key() not in known})
    assert left == [], "writes from a module that does not own the class:\n" + "\n".join(left)
    stale = sorted(known - {w.key() for w in found})
    assert stale == [], f"KNOWN lists writes no longer there: {stale}"


def test_the_finder_finds_writes():
    source = '''
class Node:
    __slots__ = ("free", "reserved")

class Queue:
    __slots__ = ("children", "pending", "apps")
    def __init__(self, parent: "Queue | None") -> None:
        self.children: dict[str, Queue] = {}

class Waits:
    def __init__(self) -> None:
        self.pool = RoomWaits()
        self.nodes: dict[str, Node] = {}

class RoomWaits:
    def __init__(self) -> None:
        self.open = []

def f(node: Node, x, waits: Waits, mystery):
    node.free = {}                       # assignment
    del node.reserved                    # del
    x.reserved["a"] = 1                  # item, through the attribute only Node declares
    q = Queue(None)
    q.pending += 1                       # augmented, by constructor
    leaf.apps.append(x)                  # mutating call, by name
    leaf.children["a"].apps.pop()        # through an item's annotation
    add_into(q.pending, x)               # in place
    waits.pool.close(x)                  # a component's method: not a write
    waits.pool.open.clear()              # the component's container
    waits.nodes["n"].free = {}           # an item of a typed dict
    setattr(node, "free", {})            # setattr with a literal name
    mystery.apps = []                    # an untyped receiver: the one class declaring it
    local = []
    local.append(x)                      # a local: not a write
    x.unknown = 1                        # no class declares it
'''
    infos = classes_of([("core/m.py", ast.parse(source))])
    found = [(w.cls, w.attr, w.how) for w in writes_in(source, "core/other.py", infos) if w.line >= 19]
    assert found == [
        ("Node", "free", "node.free"), ("Node", "reserved", "del node.reserved"),
        ("Node", "reserved", "x.reserved['a']"), ("Queue", "pending", "q.pending"),
        ("Queue", "apps", "leaf.apps.append()"), ("Queue", "apps", "leaf.children['a'].apps.pop()"),
        ("Queue", "pending", "add_into(q.pending, ...)"), ("RoomWaits", "open", "waits.pool.open.clear()"),
        ("Node", "free", "waits.nodes['n'].free"), ("Node", "free", "setattr(node, 'free', {})"),
        ("Queue", "apps", "mystery.apps")]


def test_the_doc_table_parser_reads_several_classes_and_modules():
    text = ("## Who writes what\n\n| class | written by | why |\n|---|---|---|\n"
            "| `Node`, `Queue` | `core/model.py`, `core/ledger.py` | x |\n| `Ledger` | `core/ledger.py` | |\n"
            "\n## Next\n| `Other` | `core/x.py` | |\n")
    assert owners_from_doc(text) == {"Node": {"core/model.py", "core/ledger.py"},
                                     "Queue": {"core/model.py", "core/ledger.py"}, "Ledger": {"core/ledger.py"}}
