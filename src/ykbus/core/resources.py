"""Resources as sparse dicts of name -> int64 quantity, and the few operations on them.

A missing name means zero. A `max` that does not name a resource does not limit it.

Every quantity a person reads (a reason, an event, `ykbus explain`, the CLI's tables) is
written by `fmt_quantity` / `fmt_res` here, one way: vcore (millicores) in cores, memory
and ephemeral-storage (bytes) in binary units, any other resource as a count. The wire and
the JSON read API keep the integers. A quantity as a configuration writes it (`vcore: 1.5`,
`memory: 8Gi`: the queue files, the TYJob manifests and cluster files) is read by
`parse_quantity`, as YuniKorn reads it.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING

from ykbus import limits

if TYPE_CHECKING:
    from ykbus.si import messages as m

Res = dict[str, int]


def resources_of(msg: m.Resource | None) -> Res:
    """The quantities of a wire `Resource` above zero (an empty dict for None)."""
    if msg is None:
        return {}
    return {k: q.value for k, q in msg.resources.items() if q.value}


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


# Quantities as people read them (issue 40): the one formatter of every text a person reads
# (reasons, events, `ykbus explain`, the CLI's tables); the wire and the JSON API keep integers.
BYTE_RESOURCES = ("memory", "ephemeral-storage")  # quantities in bytes
BINARY_UNITS = (("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def _decimal(value: int, unit: int, places: int) -> str:
    """`value / unit` (both >= 0, `unit` > 0) rounded half up to `places` decimals, trailing
    zeros dropped: integer arithmetic, exact and the same on every machine."""
    scale = 10**places
    scaled = (value * scale * 2 + unit) // (unit * 2)
    whole, frac = divmod(scaled, scale)
    if not frac:
        return str(whole)
    return f"{whole}.{str(frac).rjust(places, '0').rstrip('0')}"


def fmt_bytes(value: int) -> str:
    """`2 Gi`, `1.5 Gi`, `512 Mi`, `1023 B`: the largest binary unit the value reaches (up to
    Pi), to at most 2 decimals. A value that rounds up to 1024 of its unit is 1 of the next."""
    if value < 0:
        return "-" + fmt_bytes(-value)
    for i, (name, size) in enumerate(BINARY_UNITS):
        if value >= size:
            if i > 0 and (value * 200 + size) // (size * 2) >= 1024 * 100:  # 1023.999 Mi -> 1 Gi
                name, size = BINARY_UNITS[i - 1]
            return f"{_decimal(value, size, 2)} {name}"
    return f"{value} B"


def fmt_cores(millis: int) -> str:
    """vcore, given in millicores: `1 core`, `2.5 cores`, `0.001 cores`, `0 cores`."""
    if millis < 0:
        return "-" + fmt_cores(-millis)
    return "1 core" if millis == 1000 else f"{_decimal(millis, 1000, 3)} cores"


def fmt_quantity(name: str, value: int) -> str:
    """One quantity of resource `name` as a person reads it: vcore in cores, memory (and
    ephemeral-storage) in binary units, any other resource as a plain count."""
    if name == "vcore":
        return fmt_cores(value)
    if name in BYTE_RESOURCES:
        return fmt_bytes(value)
    return str(value)


def fmt_items(res: Res) -> str:
    """`vcore: 1 core, memory: 2 Gi`, in the vector's own order (`fmt_res` without braces)."""
    return ", ".join([f"{k}: {fmt_quantity(k, v)}" for k, v in res.items()])


def fmt_res(res: Res) -> str:
    """A resource vector for a message: `{vcore: 1 core, memory: 2 Gi}`, in its own order."""
    return "{" + fmt_items(res) + "}"


def scaled(res: Res, n: int) -> Res:
    """`res` times `n`: a new dict, or `res` itself for 1 (callers only read the result)."""
    return res if n == 1 else {k: v * n for k, v in res.items()}


def positive(res: Res) -> Res:
    """The entries of `res` that are not zero, in their order."""
    return {k: v for k, v in res.items() if v}


# --- quantities as a configuration writes them -------------------------------------------

_SUFFIX: dict[str, int] = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|[kMGTPE]i?|Ki)?\s*$")


def parse_quantity(resource: str, value: object) -> int:
    """Parse one configured quantity as YuniKorn does; ValueError says why it is invalid."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a quantity, got {type(value).__name__}")
    text = repr(value) if isinstance(value, float) else str(value)
    match = _QUANTITY.match(text)
    if match is None:
        if text.lstrip().startswith("-") and _QUANTITY.match(text.lstrip()[1:]) is not None:
            raise ValueError(f"invalid quantity {value!r}: a quantity is not negative")
        raise ValueError(f"invalid quantity {value!r}")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix == "m":
        if resource != "vcore":
            raise ValueError(f"invalid quantity {value!r}: the milli suffix is only for vcore")
        result = number
    else:
        result = number * _SUFFIX[suffix] * (1000 if resource == "vcore" else 1)
    if result.denominator != 1:
        raise ValueError(f"invalid quantity {value!r}: not a whole number")
    if result > limits.INT64_MAX:
        raise ValueError(f"invalid quantity {value!r}: larger than int64")
    return int(result)
