"""Durations as the queue configuration writes them, and a queue's runtime properties.

Owned here (issue 43, docs/time.md; parsed and checked by core/config.py, not used by the
scheduling pass yet):
1. A **duration** is a number of seconds, or a string `500ms`, `2s`, `30m`, `2h`; from 0 to
   `MAX_DURATION_MS` (`parse_duration_ms`; every duration property and `reservationdelay`).
2. The **runtime properties** of a queue: `ykbus.io/runtime.default` (the runtime limit of
   an ask that sets no `executionTimeoutMilliSeconds`) and `ykbus.io/runtime.max` (the cap of
   every ask's limit, and the limit of an ask with none), durations above 0; and
   `preemption.minruntime` (an allocation younger than it is no victim; 0: none). The two
   limits are ykbus's own keys (YuniKorn has none), so they carry the `ykbus.io/` prefix of
   ykbus's tags, in YuniKorn's dotted `<area>.<setting>` form; the minimum runtime belongs
   to YuniKorn's `preemption.*` family, beside `preemption.delay`, and is named like it.
3. **Inherited** as `preemption.delay` is: each key from the nearest queue on the path that
   sets it (`runtime_limits`; an unmanaged queue's own properties are its child template's).
4. **Checked** (`check_runtimes`): where a queue or a child template sets one of the two
   limits, the default in force there may not exceed the maximum in force there; the error
   names the field set there and where the other one was set.

Standard library and msgspec only: core/config.py imports this module, never the reverse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import msgspec

PROP_RUNTIME_DEFAULT = "ykbus.io/runtime.default"
PROP_RUNTIME_MAX = "ykbus.io/runtime.max"
PROP_MIN_RUNTIME = "preemption.minruntime"
RUNTIME_PROPERTIES = (PROP_RUNTIME_DEFAULT, PROP_RUNTIME_MAX, PROP_MIN_RUNTIME)
DURATION_UNITS = {"ns": 0.000001, "us": 0.001, "µs": 0.001, "\u03bcs": 0.001, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|\u03bcs|ms|s|m|h)")  # one of Go's `1h30m5.5s` (µ: the micro sign or Greek mu)
DURATION_FORMS = "2s, 500ms, 1m30s, or seconds"
MAX_DURATION_MS = 10**12


class Properties(Protocol):
    """What has properties: a child template (core/config.py `ChildTemplate`)."""

    @property
    def properties(self) -> Mapping[str, str]: ...


class QueueTree(Protocol):
    """A configured queue as read here (core/config.py `QueueConfig`: this module does not
    import config, which imports it)."""

    @property
    def name(self) -> str: ...
    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def queues(self) -> Sequence[QueueTree]: ...
    @property
    def childtemplate(self) -> Properties | None: ...


def parse_duration_ms(obj: object) -> int:
    """Rule 1: a configured duration in ms (Go's form, as YuniKorn reads it: `90s`, `1m30s`,
    `1.5h`, `500ms`; or a number of seconds); ValueError says what is wrong with it."""
    if isinstance(obj, bool):
        raise ValueError(f"expected a duration ({DURATION_FORMS}), got {obj!r}")
    if isinstance(obj, (int, float)):
        ms = obj * 1000
    else:
        text = str(obj).strip()
        parsed = _go_duration_ms(text) if len(text) <= 64 else None
        if parsed is None:
            raise ValueError(f"expected a duration ({DURATION_FORMS}), got {text[:40]!r}")
        ms = parsed
    if ms < 0:
        raise ValueError(f"{obj!r} is negative: expected a duration from 0 to {MAX_DURATION_MS} ms")
    if not ms <= MAX_DURATION_MS:
        raise ValueError(f"expected a duration from 0 to {MAX_DURATION_MS} ms, got {obj!r}")
    return int(ms)


def _go_duration_ms(text: str) -> float | None:
    """`text` as Go's `time.ParseDuration` reads it (a sign, then number-unit pairs), in ms,
    or a bare number of seconds; None if it is neither."""
    try:
        return float(text) * 1000
    except ValueError:
        pass
    sign = -1.0 if text.startswith("-") else 1.0
    rest = text[1:] if text[:1] in ("-", "+") else text
    if not rest:
        return None
    total, pos = 0.0, 0
    while pos < len(rest):
        part = _DURATION_PART.match(rest, pos)
        if part is None:
            return None
        total += float(part.group(1)) * DURATION_UNITS[part.group(2)]
        pos = part.end()
    return sign * total


class RuntimeLimits(msgspec.Struct, frozen=True):
    """A queue's runtime properties in force, in ms (0: not set): `default_ms`, `max_ms`
    (core/timeline.py `runtime_limit_ms` takes both) and `min_runtime_ms` (`old_enough`)."""

    default_ms: int = 0
    max_ms: int = 0
    min_runtime_ms: int = 0


def _nearest(chain: Sequence[Mapping[str, str]], key: str) -> tuple[int, str] | None:
    """The first of `chain` (nearest queue first) that sets `key`: (its index, its text)."""
    for i, props in enumerate(chain):
        text = props.get(key)
        if text is not None:
            return i, text
    return None


def _ms(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError:
        return 0  # reported by the parser; a configuration with it is never in force


def runtime_limits(chain: Sequence[Mapping[str, str]]) -> RuntimeLimits:
    """Rule 3: the runtime properties in force for a queue, from the properties of its path
    nearest first (the queue, its parent, ..., root)."""
    values = [0, 0, 0]
    for i, key in enumerate(RUNTIME_PROPERTIES):
        hit = _nearest(chain, key)
        if hit is not None:
            values[i] = _ms(hit[1])
    return RuntimeLimits(default_ms=values[0], max_ms=values[1], min_runtime_ms=values[2])


def queue_runtime_limits(root: QueueTree, queue_path: str) -> RuntimeLimits:
    """`runtime_limits` of a configured queue of the tree under `root` (a partition's
    `root`), named by its full path (`root.a.b`); KeyError when there is no such queue."""
    parts = queue_path.lower().split(".")
    if parts[0] != root.name:
        raise KeyError(queue_path)
    node = root
    chain: list[Mapping[str, str]] = [node.properties]
    for name in parts[1:]:
        child = next((c for c in node.queues if c.name == name), None)
        if child is None:
            raise KeyError(queue_path)
        node = child
        chain.append(node.properties)
    return runtime_limits(chain[::-1])


def check_runtimes(q: QueueTree, path: str, add: Callable[[str, str], None],
                   above: Sequence[tuple[str, Mapping[str, str]]] = ()) -> None:
    """Rule 4 for `q` (at config `path`) and every queue below it; `add(path, reason)` takes
    each error; `above`: (queue name, properties) from root down to q's parent."""
    chain = [*above, (q.name, q.properties)]
    _check_one(chain, f"{path}.properties", add)
    if q.childtemplate is not None and q.childtemplate.properties:
        _check_one([*chain, ("", q.childtemplate.properties)], f"{path}.childtemplate.properties", add)
    for i, child in enumerate(q.queues):
        check_runtimes(child, f"{path}.queues[{i}]", add, chain)


def _check_one(chain: list[tuple[str, Mapping[str, str]]], path: str, add: Callable[[str, str], None]) -> None:
    own = chain[-1][1]
    for key in (PROP_RUNTIME_DEFAULT, PROP_RUNTIME_MAX):
        text = own.get(key)
        if text is not None and _ms(text) == 0 and _valid(text):
            add(f"{path}.{key}", f"{text!r}: a runtime limit must be more than 0 (leave it out for none)")
            return
    if PROP_RUNTIME_DEFAULT not in own and PROP_RUNTIME_MAX not in own:
        return
    nearest_first = [props for _, props in reversed(chain)]
    default, maximum = _nearest(nearest_first, PROP_RUNTIME_DEFAULT), _nearest(nearest_first, PROP_RUNTIME_MAX)
    if default is None or maximum is None or not (_valid(default[1]) and _valid(maximum[1])):
        return
    if _ms(default[1]) <= _ms(maximum[1]):
        return
    names = [name for name, _ in chain]

    def where(i: int) -> str:  # i: how far up the chain it was set (0: here)
        return "here" if i == 0 else f"on {'.'.join(names[:len(names) - i])}"

    if default[0] == 0:
        add(f"{path}.{PROP_RUNTIME_DEFAULT}",
            f"{default[1]!r} is above the maximum runtime {maximum[1]!r} ({PROP_RUNTIME_MAX} set {where(maximum[0])})")
    else:
        add(f"{path}.{PROP_RUNTIME_MAX}",
            f"{maximum[1]!r} is below the default runtime {default[1]!r} ({PROP_RUNTIME_DEFAULT} set "
            f"{where(default[0])}): set {PROP_RUNTIME_DEFAULT} beside it")


def _valid(text: str) -> bool:
    try:
        parse_duration_ms(text)
    except ValueError:
        return False
    return True
