"""Resources as sparse dicts of name -> int64 quantity, and the few operations on them.

A missing name means zero. A `max` that does not name a resource does not limit it.
"""

from __future__ import annotations

Res = dict[str, int]


def add_into(target: Res, delta: Res) -> None:
    for name, value in delta.items():
        target[name] = target.get(name, 0) + value


def sub_into(target: Res, delta: Res) -> None:
    for name, value in delta.items():
        left = target.get(name, 0) - value
        if left:
            target[name] = left
        elif name in target:  # (not `pop`: compiled, a method call by name)
            del target[name]


def max_into(target: Res, other: Res) -> None:
    """`target` raised, per resource, to at least `other`."""
    for name, value in other.items():
        if value > target.get(name, 0):
            target[name] = value


def fits(ask: Res, free: Res) -> bool:
    """True when every quantity of `ask` is available in `free`."""
    for name, value in ask.items():
        if free.get(name, 0) < value:
            return False
    return True


def first_over(used: Res, ask: Res, limit: Res) -> str | None:
    """The first resource of `ask` that would take `used` above `limit`, or None."""
    for name, value in ask.items():
        cap = limit.get(name)
        if cap is not None and used.get(name, 0) + value > cap:
            return name
    return None


def share(used: Res, base: Res, fallback: Res) -> float:
    """Dominant share of `used`: max over resources of used / base, `fallback` where base is 0."""
    best = 0.0
    for name, value in used.items():
        denom = base.get(name) or fallback.get(name) or 0
        if denom > 0:
            ratio = value / denom
            if ratio > best:
                best = ratio
    return best


def fmt_res(res: Res) -> str:
    """A resource vector for a message: `{vcore: 1000, memory: 512}`, in its own order."""
    return "{" + ", ".join(f"{k}: {v}" for k, v in res.items()) + "}"


def scaled(res: Res, n: int) -> Res:
    """`res` times `n`: a new dict, or `res` itself for 1 (callers only read the result)."""
    return res if n == 1 else {k: v * n for k, v in res.items()}


def positive(res: Res) -> Res:
    """The entries of `res` that are not zero, in their order."""
    return {k: v for k, v in res.items() if v}
