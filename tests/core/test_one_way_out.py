"""One way out (issue 41): the applier, the intake and the registry return typed events
(core/events.py) in the entry's `Step`; after the entry, `derive` (core/effects.py) alone
turns them into outputs and timers, and the fold (core/fold.py) alone into the read models.

Checked over every module of src/ykbus/core and src/ykbus/rest (and the rest of src/ykbus
for the outbox), not a list of files:
- an `Outbox` is named (built, annotated, imported) only by core/effects.py, which defines
  and fills it: nobody else can put a message;
- a timer is built only by core/effects.py (core/timers.py defines them; a snapshot's load,
  core/snapshot.py, restores the ones a snapshot stored): nobody else can set one;
- a read model (the partition summary, the pending asks by code and the counts they keep on
  applications and asks) is changed only by core/fold.py and core/readmodel.py, which
  defines them.
"""

from __future__ import annotations

import ast

from tests.core.test_layers import SRC

OUTBOX_NAMERS = {"core/effects.py"}
TIMER_BUILDERS = {"core/effects.py", "core/timers.py", "core/snapshot.py"}
READ_MODEL_WRITERS = {"core/fold.py", "core/readmodel.py"}
TIMER_KINDS = {"AllocationTimeoutTimer", "AppTimeoutTimer", "CompletingTimer", "ExpireTimer", "PlaceholderTimer",
               "PreemptionTimer", "QuotaTimer", "ReservationTimer"}
READ_MODELS = ("summary", "pending_codes")  # what a partition's records call them
READ_MODEL_CALLS = {"tally", "app_entered", "app_left", "count"}  # their mutators (`count` on a summary only)
READ_MODEL_SLOTS = {"unparked", "tallied", "tallied_n"}  # PendingCodes' counts kept on applications and asks


def _receiver(node: ast.expr) -> str:
    """The last name of what an attribute or item is taken of: `summary` for
    `part.records.summary`, `records` for `records.summary[k]`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _written(target: ast.expr) -> list[ast.expr]:
    """The attribute targets an assignment writes, through items (`a.b[k] = v` writes `a.b`)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for e in target.elts for t in _written(e)]
    while isinstance(target, ast.Subscript):
        target = target.value
    return [target] if isinstance(target, ast.Attribute) else []


def ways_out(module: str, tree: ast.AST) -> list[str]:
    """Where `module` puts to an outbox, builds a timer, or changes a read model, outside
    the modules allowed to."""
    found: list[tuple[int, str]] = []
    building = [range(f.lineno, (f.end_lineno or f.lineno) + 1) for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef) and f.name == "__init__"]  # a constructor builds its own
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if module not in OUTBOX_NAMERS:
            if isinstance(node, ast.Name) and node.id == "Outbox" or \
                    isinstance(node, ast.alias) and node.name.split(".")[-1] == "Outbox":
                found.append((line, f"{module}:{line}: names Outbox"))
        if module not in TIMER_BUILDERS and isinstance(node, ast.Call):
            name = ast.unparse(node.func).split(".")[-1]
            if name in TIMER_KINDS:
                found.append((line, f"{module}:{line}: sets a {name}"))
        if module in READ_MODEL_WRITERS:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, holder = node.func.attr, _receiver(node.func.value)
            if attr in READ_MODEL_CALLS - {"count"} or attr == "count" and holder in READ_MODELS:
                found.append((line, f"{module}:{line}: {ast.unparse(node.func)}()"))
            elif holder in READ_MODELS and attr in ("update", "clear", "pop", "setdefault", "__setitem__"):
                found.append((line, f"{module}:{line}: {ast.unparse(node.func)}()"))
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _written(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = _written(node.target)
        elif isinstance(node, ast.Delete):
            targets = [t for target in node.targets for t in _written(target)]
        for t in targets:
            assert isinstance(t, ast.Attribute)
            if isinstance(t.value, ast.Name) and t.value.id == "self" and any(line in r for r in building):
                continue
            if t.attr in READ_MODEL_SLOTS or t.attr in READ_MODELS or _receiver(t.value) in READ_MODELS:
                found.append((line, f"{module}:{line}: writes {ast.unparse(t)}"))
    return [text for _, text in sorted(found)]


def test_only_derive_sends_or_sets_timers_and_only_the_fold_changes_a_read_model():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text())
        if module.startswith(("core/", "rest/")):
            found += ways_out(module, tree)
        else:  # the rest of the package: no outbox either
            found += [w for w in ways_out(module, tree) if "Outbox" in w]
    assert found == []


def test_the_check_catches_each_way_out():
    """A module that sends, sets a timer or changes a read model on its own is named."""
    src = ("from ykbus.core.effects import Outbox\n"
           "def f(part, ask, ctx):\n"
           "    ctx.put('rm', x)\n"
           "    part.timers.schedule(5, ExpireTimer(part, 'a', s))\n"
           "    part.records.summary.containers += 1\n"
           "    part.records.pending_codes.tally(ask)\n"
           "    summary.count('container', '', 'allocated')\n"
           "    ask.app.unparked -= 1\n"
           "    part.records.summary = None\n")
    found = ways_out("core/x.py", ast.parse(src))
    assert found == ["core/x.py:1: names Outbox", "core/x.py:4: sets a ExpireTimer",
                     "core/x.py:5: writes part.records.summary.containers",
                     "core/x.py:6: part.records.pending_codes.tally()", "core/x.py:7: summary.count()",
                     "core/x.py:8: writes ask.app.unparked", "core/x.py:9: writes part.records.summary"]
    assert ways_out("core/fold.py", ast.parse(src)) == ["core/fold.py:1: names Outbox",
                                                        "core/fold.py:4: sets a ExpireTimer"]

