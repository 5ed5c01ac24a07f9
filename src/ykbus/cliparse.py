"""The argument parser of every `ykbus` command: `--help` shows each option's default."""

from __future__ import annotations

import argparse
import copy
import errno
import math
from collections.abc import Callable


class DefaultsShown(argparse.HelpFormatter):
    """Appends `(default: X)` to an option that has a default and whose help does not
    already say it; options without help get one that is only their default."""

    def _format_action(self, action: argparse.Action) -> str:
        default = action.default
        shown = (action.option_strings and default is not None and default is not argparse.SUPPRESS
                 and not isinstance(default, bool) and default != [] and "default" not in (action.help or ""))
        if shown:
            action = copy.copy(action)
            action.help = f"{action.help} (default: %(default)s)" if action.help else "(default: %(default)s)"
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser with DefaultsShown; subcommands' parsers are Parsers too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)


def whole(least: int, most: int | None = None) -> Callable[[str], int]:
    """An option's type: an integer from `least` (to `most`); argparse names the option in
    its one-line error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
        if value < least or (most is not None and value > most):
            raise argparse.ArgumentTypeError(
                f"expected an integer from {least} to {most}, got {value}" if most is not None
                else f"expected an integer of at least {least}, got {value}")
        return value
    return parse


def seconds(zero: bool) -> Callable[[str], float]:
    """An option's type: a finite number of seconds, above 0 (or 0 too, when `zero`)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text[:40]!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"expected a number of seconds {'from 0' if zero else 'above 0'}, "
                                             f"got {text[:40]}")
        return value
    return parse


def counts(text: str) -> list[int]:
    """An option's type: a comma-separated list of counts of at least 1 (`500,1000`)."""
    one = whole(1)
    return [one(part.strip()) for part in text.split(",")]


def positive(text: str) -> float:
    """An option's type: a finite number above 0 (a rate, a scale)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text[:40]}")
    return value


PORT = whole(0, 65535)

# the errors of a command a user acts on from one line (a port taken, a path missing or not
# allowed): said so; any other error keeps its traceback
SAID_ERRNOS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.ENOENT, errno.EACCES, errno.EPERM,
                         errno.EISDIR, errno.ENOTDIR})


def shard_name(text: str) -> str:
    """A shard's name (`--shard`), as `ykbus core --shard` takes it: argparse says why not."""
    from ykbus.core.shards import check_shard_name

    try:
        return check_shard_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
