"""The planner is pure, checked at run time: with `partition.CHECK_PURE` on (the tests switch
it on, tests/conftest.py; off, it costs one read of a flag per plan), every plan of every
pass runs through `planned`, which fingerprints the partition's whole object graph before
and after the plan (records, the waits with their gates and node index, the ledger, the
read models, every object reachable from them: not only what a snapshot holds) and raises
`PlannerWrote` if they differ. Excluded is only what is the planner's own
(`Scheduler` and the caches it holds: its node finder, its node policies' orders), which the
waits and the applier tell of changes through `Scheduler.state_changed`.

Not compiled (core/compiled.py): it walks objects by their attributes as Python sees them.
"""

from __future__ import annotations

import enum
import types
from typing import Any

CALLABLES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.BuiltinMethodType,
             types.MethodWrapperType)


class PlannerWrote(AssertionError):
    """A plan changed the state it should only read."""


def planner_own(part: Any) -> set[int]:
    """The ids of the planner's own objects: left out of the fingerprint."""
    scheduler = part.scheduler
    return {id(scheduler), id(scheduler.finder), id(scheduler.policies)}


def planned(part: Any) -> Any:
    """`part.scheduler.plan()`, checked to leave the partition as it was."""
    skip = planner_own(part)
    before = fingerprint(part, skip)
    plan = part.scheduler.plan()
    after = fingerprint(part, skip)
    if after != before:
        raise PlannerWrote(f"a plan of partition {part.name} changed the state: {difference(before, after)}")
    return plan


def difference(before: list[Any], after: list[Any]) -> str:
    """Where two fingerprints first differ, with what comes before it (the names of the
    attributes walked there)."""
    at = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))
    names = [v for v in before[max(0, at - 40):at] if isinstance(v, str)][-8:]
    return f"at {at} (after {' / '.join(names)}): {before[at:at + 6]!r} became {after[at:at + 6]!r}"


def attributes(kind: type) -> list[str]:
    """The attributes an object of `kind` may hold: its classes' `__slots__` (and
    `__mypyc_attrs__`, a compiled class's), each once, in their order."""
    names: dict[str, None] = {}
    for c in kind.__mro__:
        for name in (*getattr(c, "__slots__", ()), *getattr(c, "__mypyc_attrs__", ())):
            if name not in ("__dict__", "__weakref__"):
                names[name] = None
    return list(names)


ATOM, DICT, SEQUENCE, SET, OBJECT, CLASS, CALLABLE, OTHER = range(8)
_KINDS: dict[type, tuple[int, tuple[str, ...]]] = {}  # a type -> how it is walked, and its fixed attributes


def _kind(kind: type) -> tuple[int, tuple[str, ...]]:
    found = _KINDS.get(kind)
    if found is None:
        if kind in (type(None), bool, int, float, str, bytes) or issubclass(kind, enum.Enum):
            how = ATOM
        elif issubclass(kind, dict):
            how = DICT
        elif issubclass(kind, (list, tuple)):
            how = SEQUENCE
        elif issubclass(kind, (set, frozenset)):
            how = SET
        elif issubclass(kind, type):
            how = CLASS
        elif issubclass(kind, CALLABLES) or callable(kind) and \
                not kind.__module__.startswith("ykbus") and kind.__call__ is not object.__call__:
            how = CALLABLE
        elif kind.__module__.startswith(("ykbus", "msgspec")) or "__dict__" in dir(kind):
            how = OBJECT
        else:
            how = OTHER
        fixed = attributes(kind)
        if hasattr(kind, "__struct_fields__"):
            fixed += [n for n in kind.__struct_fields__ if n not in fixed]
        found = _KINDS[kind] = (how, tuple(fixed))
    return found


def fingerprint(root: Any, skip: set[int] | None = None) -> list[Any]:
    """Every value reachable from `root`, in a deterministic walk (objects by their slots
    and attributes, containers in their order; an object met again by its first index; an
    object whose id is in `skip` by its class name only)."""
    out: list[Any] = []
    append = out.append
    seen: dict[int, int] = {}
    keep: list[Any] = []  # alive while walking, so no id is reused
    stack = [root]
    push, pop, extend = stack.append, stack.pop, stack.extend
    skip = skip or set()
    kinds = _KINDS
    while stack:
        obj = pop()
        kind = type(obj)
        found = kinds.get(kind)
        how, fixed = found if found is not None else _kind(kind)
        if how == ATOM:
            append(obj)
            continue
        if how == CLASS:
            append(("class", obj.__qualname__))
            continue
        if how == CALLABLE:
            append(("callable", getattr(obj, "__qualname__", kind.__name__)))
            continue
        key = id(obj)
        if key in skip:
            append(("skipped", kind.__qualname__))
            continue
        if key in seen:
            append(("ref", seen[key]))
            continue
        seen[key] = len(seen)
        keep.append(obj)
        append(kind.__qualname__)
        if how == DICT:
            append(len(obj))
            for k, v in obj.items():
                push(v)
                push(k)
        elif how == SEQUENCE:
            append(len(obj))
            extend(reversed(obj))
        elif how == SET:
            append(sorted(map(repr, obj)))
        elif how == OBJECT:
            names = [n for n in fixed if hasattr(obj, n)]
            extra = getattr(obj, "__dict__", None)
            if extra:
                names += sorted(n for n in extra if n not in fixed)
            for name in reversed(names):
                push(getattr(obj, name))
                push(name)
        else:
            append(repr(obj))
    return out
