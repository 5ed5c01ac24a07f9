"""The argument parser of every `ykbus` command: `--help` shows each option's default."""

from __future__ import annotations

import argparse
import copy
import errno
import math
from collections.abc import Callable
from typing import Any


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

    def add_subparsers(self, **kwargs):  # type: ignore[no-untyped-def]
        """Each subcommand's parser is remembered in the arguments it parses (`_parser`), so
        that an option it does not know is said with its usage, not the top command's."""
        action = super().add_subparsers(**kwargs)
        add = action.add_parser

        def add_parser(name: str, **kw: Any) -> argparse.ArgumentParser:
            p = add(name, **kw)
            p.set_defaults(_parser=p)
            return p

        action.add_parser = add_parser  # type: ignore[method-assign]
        return action

    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # said by the subcommand that was given them: `ykbus up: error: ...`
            getattr(parsed, "_parser", self).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


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
LOG_LEVELS = ("debug", "info", "warning", "error")  # `--log-level`, as the service configuration's `log_level`

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


SIM_MOST_NODES = 100_000  # a simulated RM's nodes: each is built in memory, and a typo must not fill it


def rm_id(text: str) -> str:
    """An RM's id (`--rm-id`, `--rm`), as the core takes one: a NATS subject token."""
    from ykbus import limits
    from ykbus.core.registry import rm_id_problem  # the rule the core registers an RM by

    if rm_id_problem(text) or len(text) > limits.MAX_ID_CHARS:
        raise argparse.ArgumentTypeError(f"expected an rmID of 1 to {limits.MAX_ID_CHARS} characters with no '.', "
                                         f"'*', '>', space or control character (a NATS subject token), got "
                                         f"{limits.quoted(text)}")
    return text


def queue_names(text: str) -> tuple[str, ...]:
    """An option's type: a comma-separated list of queue names (`team-a,ml`), each as a
    queues.yaml takes it."""
    from ykbus.core.config import QUEUE_NAME

    names = tuple(part.strip() for part in text.split(","))
    bad = [name for name in names if not QUEUE_NAME.fullmatch(name)]
    if bad:
        raise argparse.ArgumentTypeError(f"expected queue names matching {QUEUE_NAME.pattern}, separated by commas; "
                                         f"got {bad[0]!r}")
    return names


def node_sorts(text: str) -> str:
    """`--node-sort` of `ykbus bench core`: fair, binpacking, or both, comma-separated."""
    bad = [part for part in text.split(",") if part not in ("fair", "binpacking")]
    if bad:
        raise argparse.ArgumentTypeError(f"expected fair, binpacking, or both (fair,binpacking), got {bad[0][:40]!r}")
    return text


def service_flags(p: argparse.ArgumentParser, embedded: bool = False) -> None:
    """The core service's flags; `embedded` (`ykbus up`: its own single nats-server, its own
    identities, its own log level) leaves out those it could not honour."""
    p.add_argument("--config", metavar="YKBUS.yaml",
                   help="the service configuration (static; docs/configuration.md); flags override it")
    p.add_argument("--queues", metavar="FILE.yaml",
                   help="queue configuration for every RM (overrides theirs); watched while running")
    p.add_argument("--queues-dir", metavar="DIR",
                   help="<policyGroup>.yaml: the queue configuration of that policy group; watched while running")
    p.add_argument("--prefix", default=None, help="subject prefix (default yk.v1)")
    p.add_argument("--tick", type=seconds(False), default=None, metavar="S", help="seconds between tick entries (1)")
    p.add_argument("--snapshot-every", type=whole(1), default=None, metavar="N", help="entries between snapshots (10000)")
    p.add_argument("--lease-ttl", type=seconds(False), default=None, metavar="S",
                   help="leader lease: a standby core takes over this long after the leader's last renewal (1.0)")
    p.add_argument("--rm-pause", type=seconds(False), default=None, metavar="S",
                   help="seconds without heartbeat before an RM is Paused (10)")
    p.add_argument("--rm-stop", type=seconds(False), default=None, metavar="S",
                   help="further seconds Paused before an RM is Stopped and its state removed (60)")
    p.add_argument("--in-max-bytes", type=whole(-1), default=None, metavar="B",
                   help="size limit of the input log stream YK_IN (-1, the default: unlimited; keep it above the last snapshot)")
    p.add_argument("--in-keep", type=whole(0), default=None, metavar="N",
                   help="after each snapshot stored, purge the input log's entries but the last N before it (the "
                        "default: keep every entry, so `ykbus record` gives the whole log; docs/reliability.md)")
    p.add_argument("--out-max-bytes", type=whole(-1), default=None, metavar="B", help="size limit of YK_OUT (1 GiB)")
    p.add_argument("--out-max-age", type=seconds(False), default=None, metavar="S", help="age limit of YK_OUT (7 days)")
    if not embedded:
        p.add_argument("--replicas", type=whole(1, 5), default=None, help="stream replicas (1; 3 on a NATS cluster)")
    p.add_argument("--start-wait", type=seconds(False), default=None, metavar="S",
                   help="at start, wait this long for JetStream to take the streams: a NATS cluster electing its "
                        "leaders or still forming (60)")
    p.add_argument("--snapshot-dir", metavar="DIR",
                   help="keep a copy of the latest snapshot here; a start reads it instead of downloading it "
                        "when its digest matches the object store's")
    p.add_argument("--api-host", default=None, help="bind host of the HTTP read API (127.0.0.1)")
    p.add_argument("--api-port", type=PORT, default=None,
                   help="port of the HTTP read API and web UI, 0: off (ykbus core: 0; ykbus up: 9080, or a free port "
                        "when 9080 is taken)")
    p.add_argument("--api-token", default=None, metavar="TOKEN",
                   help="HTTP read API: require `Authorization: Bearer TOKEN` (also YKBUS_API_TOKEN; "
                        "required when --api-host is not loopback)")
    if embedded:
        return
    p.add_argument("--nats-secrets", metavar="FILE",
                   help="connect as the core user of this secrets file (written by `ykbus nats-config`)")
    p.add_argument("--log-level", default=None, choices=LOG_LEVELS, help="info (default)")
