"""The `ykbus` command."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from importlib import resources

from ykbus.bus.local import DATA_HELP, FIND_URL, SECRETS_HELP, NatsUnreachable, default_url, identity, leaves
from ykbus.cliparse import (
    SAID_ERRNOS,
    Parser,
    counts,
    node_sorts,
    positive,
    seconds,
    service_flags,
    shard_name,
    whole,
)
from ykbus.log.jsonl import LogError
from ykbus.progress import Progress
from ykbus.tables import shown


def _queues(path: str | None, command: str):
    """The queue file `--queues` names; a file that cannot be read or is not valid ends the
    command with exit code 2, as its other usage errors (1 means something for whatif)."""
    if path is None:
        return None
    from ykbus.bus.settings import StartError, queue_file

    try:
        return queue_file(path)
    except StartError as exc:
        print(f"ykbus {command}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_replay(args: argparse.Namespace) -> int:
    import time

    from ykbus.core.shards import check_shard_name
    from ykbus.log.jsonl import LogError
    from ykbus.log.replay import first_difference, replay_file, shards_named

    try:
        shard = check_shard_name(args.shard) if args.shard is not None else None
    except ValueError as exc:
        print(f"ykbus replay: --shard: {exc}", file=sys.stderr)
        return 2
    queues = _queues(args.queues, "replay")
    progress = Progress(f"ykbus replay {args.log}")
    entries = 0

    def applied(done: int, total: int) -> None:
        nonlocal entries
        entries = done
        progress.update(done, total)

    out = args.out if args.out is not None else (None if args.check else "-")  # --check alone: the verdict only
    try:  # before the replay, which may be long: a file that cannot be written or read is said at once
        if out and out != "-":
            open(out, "ab").close()
        if args.check:
            with open(args.check, "rb") as f:
                recorded = [line.rstrip(b"\n") for line in f if line.strip()]
    except OSError as exc:
        progress.close()
        print(f"ykbus replay: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    gaps: list[str] = []
    try:
        lines = list(replay_file(args.log, queues, applied, shard, gaps))
    except (LogError, OSError) as exc:
        progress.close()
        print(f"ykbus replay: {exc}", file=sys.stderr)
        return 2
    progress.close()
    # what it did, on stderr: stdout is the outputs alone (`--out -`, compared byte for byte)
    print(f"ykbus replay: {entries:,} entries, {len(lines):,} outputs in {time.monotonic() - started:.1f} s",
          file=sys.stderr)
    if shard is not None and shard not in (named := shards_named(args.log)):
        print(f"ykbus replay: warning: the log names no shard {shard!r} (it names {', '.join(named)}): no entry is "
              "its, and no output", file=sys.stderr)
    if gaps:  # replayed as it is; a live core would have stopped there
        more = f" (and {len(gaps) - 1} more gaps)" if len(gaps) > 1 else ""
        print(f"ykbus replay: warning: {gaps[0]}{more}: replayed as it is, from an empty state (a live core stops at a gap)",
              file=sys.stderr)
    if out == "-":
        sys.stdout.buffer.write(b"".join(line + b"\n" for line in lines))
    elif out:
        with open(out, "wb") as f:
            f.write(b"".join(line + b"\n" for line in lines))
    if args.check:
        diff = first_difference(lines, recorded)
        if diff is not None:
            print(f"ykbus replay: outputs differ from {args.check}: {diff}", file=sys.stderr)
            return 1
        print(f"ykbus replay: {len(lines)} outputs match {args.check}", file=sys.stderr)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """The decisions of a recorded log under another queue configuration, compared: exit 0
    when nothing changes, 1 when something does (docs/operations.md, "What if")."""
    import json

    from ykbus.log.jsonl import LogError, read_entries
    from ykbus.whatif import as_json, compare, outcome, policy_group, policy_groups, queues_missing, report

    queues = _queues(args.queues, "whatif")
    try:
        with open(args.log, "rb") as f:
            entries = list(read_entries(f, args.log))
        group = policy_group(entries, args.rm, args.policy_group)
    except (LogError, OSError, ValueError) as exc:
        print(f"ykbus whatif: {exc}", file=sys.stderr)
        return 2
    rms = [rm for rm, g in policy_groups(entries).items() if group is None or g == group]
    if group is not None:  # stdout is the report (or the JSON) alone
        print(f"ykbus whatif: {args.queues} in place of the queue configuration of policy group {group!r} "
              f"(RM {', '.join(rms)}); the other RMs' stay as recorded", file=sys.stderr)
    recorded = outcome(entries, None)
    missing = queues_missing(recorded, rms, queues)
    if missing:
        print(f"ykbus whatif: warning: {args.queues} has none of the queues the applications of RM {', '.join(rms)} "
              f"ran in ({', '.join(missing[:10])}{', ...' if len(missing) > 10 else ''}): is it that policy group's "
              "file?", file=sys.stderr)
    comparison = compare(recorded, outcome(entries, queues, group, recorded))
    if args.json:
        print(json.dumps(as_json(comparison), sort_keys=True))
    else:
        print(shown("\n".join(report(comparison, args.limit))))
    return 0 if comparison.same else 1


def _read_api(command: str, verbs: tuple[str, ...], args: argparse.Namespace,
              body: dict | None = None) -> dict | None:
    """The read API's answers to `verbs` (`{verb: {rm: {partition: ...}}}`; bus/readapi.py
    `read`), asked with `body` (by default `{"rm": args.rm}`): from `args.log`, replayed here,
    or from a live core over NATS (`args.nats`, `args.prefix`). None, said on stderr, when
    neither answers, or when `args.rm` names an RM not registered there (a filter matching
    nothing would look like an empty cluster)."""
    import json

    request = body if body is not None else ({"rm": args.rm} if args.rm else {})
    if args.rm:
        verbs = (*verbs, "health")  # its `rms`: those registered
    if args.log:
        from ykbus.bus.readapi import read
        from ykbus.log.jsonl import LogError, read_entries
        from ykbus.log.replay import guarded_core

        guard, gaps = guarded_core(), []
        try:
            with open(args.log, "rb") as f:
                for entry in read_entries(f, args.log, gaps):
                    guard.apply(entry)
            if gaps:  # as `ykbus replay` warns: the state read is of a log with entries missing
                print(f"ykbus {command}: warning: {gaps[0]}: read as it is", file=sys.stderr)
            answers: dict = {}
            for verb in verbs:
                answers.update(read(guard.core, {}, verb, request))
        except (LogError, OSError, ValueError) as exc:
            print(f"ykbus {command}: {exc}", file=sys.stderr)
            return None
        return _registered(command, args.rm, answers)

    import anyio

    from ykbus.bus.local import connect

    url = args.nats or default_url(args.data)
    options = identity(args.nats, args.data, args.nats_secrets)

    async def ask_core() -> dict:
        nc = await connect(url, allow_reconnect=False, **options)
        data = json.dumps(request).encode()
        try:
            answers = {}
            for verb in verbs:
                shard = f"{args.shard}." if args.shard else ""  # a shard's cores answer on <prefix>.api.<shard>.<verb>
                reply = await nc.request(f"{args.prefix}.api.{shard}{verb}", data, timeout=10)
                answers.update(json.loads(reply.data))
        finally:
            await nc.close()
        return answers

    try:
        answer = anyio.run(ask_core)
    except NatsUnreachable:
        raise
    except Exception as exc:  # noqa: BLE001 - a core that does not answer is reported, not raised
        import nats.errors

        why = (f"no core answers there on {args.prefix}.api" + (f".{args.shard}" if args.shard else "")
               + " (is a core or `ykbus up` running against it?"
               + ("" if args.shard else " Cores sharded by RM answer with --shard NAME: `ykbus shards list`") + ")"
               if isinstance(exc, nats.errors.NoRespondersError) else "no answer within 10 s (a core busy, or a "
               "large answer: ask for less, --rm, and of applications --queue, --state)"
               if isinstance(exc, (TimeoutError, nats.errors.TimeoutError)) else repr(exc))
        print(f"ykbus {command}: could not ask the core at {url}: {why}", file=sys.stderr)
        return None
    if "error" in answer:
        print(f"ykbus {command}: {answer['error']}", file=sys.stderr)
        return None
    return _registered(command, args.rm, answer)


def _registered(command: str, rm: str | None, answer: dict) -> dict | None:
    """`answer`, unless `rm` is not an RM registered there (`tables.unregistered`: said on stderr)."""
    from ykbus.tables import unregistered

    if problem := unregistered(rm, answer):
        print(f"ykbus {command}: {problem}", file=sys.stderr)
        return None
    return answer


def _would_fit(args: argparse.Namespace) -> int:
    """`ykbus explain --would-fit FILE`: a dry run of the application in FILE (JSON or YAML)
    on a live core (read API `wouldfit`) or on the state a log file ends in."""
    import json

    from ykbus.core.dryrequest import MAX_REQUEST_BYTES
    from ykbus.core.dryrun import lines
    from ykbus.yamlload import load_yaml

    try:
        with open(args.would_fit, "rb") as f:
            raw = f.read(MAX_REQUEST_BYTES + 1)
        if len(raw) > MAX_REQUEST_BYTES:
            raise ValueError(f"over {MAX_REQUEST_BYTES} bytes")
        request = load_yaml(raw.decode())  # JSON is YAML
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        said = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if "expected a single document" in said:  # PyYAML's words for a `---` between two
            said = "more than one YAML document (a `---` line): a dry run asks about one job, one document"
        print(f"ykbus explain --would-fit: {args.would_fit}: {said}", file=sys.stderr)
        return 2
    if isinstance(request, dict) and args.rm:
        request = {**request, "rm": args.rm}
    answer = _read_api("explain --would-fit", ("wouldfit",), args, request)
    if answer is None:
        return 2
    if args.json:
        print(json.dumps(answer["wouldfit"], indent=2))
    else:
        print(shown("\n".join(lines(answer["wouldfit"]))))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """Why APP's asks are pending: from a log file (replayed here) or a live core over NATS."""
    import json

    from ykbus.explain import explain, overview

    if args.would_fit:
        return _would_fit(args)

    # every RM's (explain picks, and names the RM of an application asked of another); of one
    # application when one is named: a whole cluster's ended ones fill no NATS message
    verbs = ("applications", "terminated") if args.app is not None else ("applications",)
    body = {"app": args.app} if args.app is not None else {"brief": True, **({"rm": args.rm} if args.rm else {})}
    answer = _read_api("explain", verbs, args, body)
    if answer is None:
        return 2
    applications, terminated = answer["applications"], answer.get("terminated", {})
    if args.json:  # the read API's answer, as `ykbus apps --json` gives it
        print(json.dumps({"applications": applications, "terminated": terminated}, sort_keys=True))
        return 0
    if args.app is None:
        print(shown("\n".join(overview(applications, args.rm))))
        return 0
    lines = explain(applications, args.app, args.ask, args.rm, terminated, args.all)
    if not lines:
        elsewhere = sorted(rm for section in (applications, terminated) for rm, parts in section.items()
                           if any(args.app in apps for apps in parts.values()))
        under = f" to RM {args.rm} (it is under RM {elsewhere[0]}: --rm {elsewhere[0]})" if elsewhere else ""
        print(f"ykbus explain: application {args.app} is not known{under}", file=sys.stderr)
        return 1
    print(shown("\n".join(lines)))
    return 1 if args.ask is not None and f"  ask {args.ask}: not known to this application" in lines else 0


def cmd_table(args: argparse.Namespace) -> int:
    """`ykbus queues|apps|nodes`: an aligned table (or the read API's JSON) of a core's state."""
    import json

    from ykbus.tables import TABLES, app_filter_problem, apps_request, queue_missing

    verb, table = TABLES[args.command]
    queue, body = getattr(args, "queue", None), None
    if args.command == "apps":
        if problem := app_filter_problem(args.state):
            print(f"ykbus apps: {problem}", file=sys.stderr)
            return 2
        verb, body = apps_request(args.rm, queue, args.state)  # filtered by the core
    answer = _read_api(args.command, (verb, "queues") if queue else (verb,), args, body)
    if answer is None:
        return 2
    if args.json:
        print(json.dumps(answer[verb], sort_keys=True))
        return 0
    if queue and verb != "terminated" and (problem := queue_missing(queue, answer["queues"])):  # (an ended one's may be gone)
        print(f"ykbus apps: {problem}", file=sys.stderr)
        return 2
    print(shown("\n".join(table(answer[verb], **({"ended": verb == "terminated"} if args.command == "apps" else {})))))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Replay the bundled example log and print each decision in words."""
    from ykbus.log.jsonl import read_entries
    from ykbus.log.replay import replay
    from ykbus.show import describe

    text = resources.files("ykbus.examples").joinpath("two-queues.in.jsonl").read_bytes()
    print("ykbus demo: replaying the bundled example log (one RM, two queues, two nodes)\n")
    for out in replay(read_entries(text.splitlines(), "two-queues.in.jsonl")):
        for line in describe(out):
            print(line)
    return 0


def cmd_config_validate(args: argparse.Namespace) -> int:
    """Validate a queues.yaml (or, with --service, a service configuration): every error
    with its path, exit 1 when there is any; warnings of what a valid one sets in vain."""
    import json

    from ykbus.configcheck import validate_file

    errors, warned = validate_file(args.file, args.service)
    if args.json:
        print(json.dumps({"file": args.file, "valid": not errors, "errors": errors, "warnings": warned}))
    elif errors:
        print(f"{args.file}: {len(errors)} error{'s' if len(errors) > 1 else ''}", file=sys.stderr)
        for error in errors:
            print(f"  {error}", file=sys.stderr)
    else:
        print(f"{args.file}: valid" + "".join(f"\n  warning: {w}" for w in warned))
    return 1 if errors else 0


def cmd_schema(args: argparse.Namespace) -> int:
    import os

    from ykbus.si.schema import schemas

    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        print(f"ykbus schema: --dir {args.dir}: not a directory", file=sys.stderr)
        return 2
    os.makedirs(args.dir, exist_ok=True)
    for name, text in schemas().items():
        path = os.path.join(args.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(path)
    return 0


def cmd_nats_config(args: argparse.Namespace) -> int:
    """Write nats-server's authorization block for RMS.yaml (and the generated passwords)."""
    from ykbus.bus.permissions import RmsConfigError, generate, load_rms_config

    try:
        config = load_rms_config(args.rms)
    except RmsConfigError as exc:
        print(f"ykbus nats-config: {args.rms}: {len(exc.errors)} error{'s' if len(exc.errors) > 1 else ''}",
              file=sys.stderr)
        for error in exc.errors:
            print(f"  {error}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"ykbus nats-config: {args.rms}: {exc}", file=sys.stderr)
        return 1
    try:
        done = generate(config, args.out, args.secrets)
    except (OSError, ValueError) as exc:
        print(f"ykbus nats-config: {exc}", file=sys.stderr)
        return 1
    c = done.config
    print(f"ykbus nats-config: {len(c.rms)} RMs, {len(c.admins)} admins, {len(c.observers)} observers, "
          f"core user {c.core.user!r}; wrote {', '.join(done.files)} (mode 0600)", file=sys.stderr)
    return 0


def _secret_of(path: str, section: str, name: str | None = None):
    """One identity's user and password from a secrets file of `ykbus nats-config`."""
    from ykbus.bus.settings import StartError, identity_secret

    try:
        return identity_secret(path, section, name)
    except StartError as exc:
        sys.exit(f"ykbus: {exc}")


def _service_settings(args: argparse.Namespace):
    """Settings from the service configuration file (`--config`), then the flags given; a
    setting the service cannot start with ends the command, named."""
    from ykbus.bus.settings import StartError, service_settings

    try:
        return service_settings(args)
    except StartError as exc:
        sys.exit(f"ykbus {args.command}: {exc}")


def cmd_core(args: argparse.Namespace) -> int:
    import anyio

    from ykbus import logs
    from ykbus.bus.service import LogGap, asyncio_loop_policy, serve
    from ykbus.bus.streams import OtherDeployment

    settings = _service_settings(args)
    logs.setup(args.log_level or settings.log_level)
    asyncio_loop_policy()
    gaps: list[BaseException] = []
    sharded: list[BaseException] = []
    try:
        anyio.run(serve, settings)
    except* LogGap as group:
        gaps += leaves(group)
    except* OtherDeployment as group:
        sharded += leaves(group)
    for exc in gaps:
        logging.getLogger("ykbus.core").error("stopped: the input log has a gap", extra={"fields": {"error": str(exc)}})
    for exc in sharded[:1]:
        logging.getLogger("ykbus.core").error("stopped: not this core's streams", extra={"fields": {"error": str(exc)}})
    return 3 if gaps else 2 if sharded else 0


def cmd_record(args: argparse.Namespace) -> int:
    import anyio

    from ykbus.bus.record import record, said

    try:  # before connecting: a file that cannot be written is said at once
        open(args.out, "ab").close()
    except OSError as exc:
        print(f"ykbus record: {exc}", file=sys.stderr)
        return 2
    progress = Progress(f"ykbus record {args.out}")
    n, first = anyio.run(record, args.nats or default_url(args.data), args.out, args.prefix, progress,
                         identity(args.nats, args.data, args.nats_secrets, core=True))
    progress.close()
    print(f"ykbus record: {said(n, first, args.out)}", file=sys.stderr)
    return 0


def cmd_shards(args: argparse.Namespace) -> int:
    import anyio

    from ykbus.bus.sharding import operate
    from ykbus.core.shards import RM_NAME, check_shard_name

    rm, shard = (args.rm, args.shard) if args.action == "assign" else (None, None)
    if args.action == "assign":
        if not rm or not shard:
            print("ykbus shards assign: give the RM and the shard: ykbus shards assign RM SHARD", file=sys.stderr)
            return 2
        try:
            check_shard_name(shard)
            if not RM_NAME.match(rm):
                raise ValueError(f"rm {rm!r}: not an rmID (a NATS token)")
        except ValueError as exc:
            print(f"ykbus shards assign: {exc}", file=sys.stderr)
            return 2
    found, leading = anyio.run(operate, args.nats or default_url(args.data), rm, shard,
                               identity(args.nats, args.data, args.nats_secrets, core=True))
    for name, to in found.items():
        print(f"{name}\t{to}")
    if not found and rm is None:  # (an empty list read as a failure)
        print("ykbus shards: no RM is assigned to a shard: every RM is served by the default one (docs/sharding.md)", file=sys.stderr)
    if leading.pop(None):  # an unsharded core: it serves every RM, and follows no assignment
        print("ykbus shards: not sharded: an unsharded core leads on this server and serves every RM; the "
              "assignments take effect once core shards replace it (docs/sharding.md)", file=sys.stderr)
        return 0
    if rm is not None:
        print(f"ykbus shards: {rm} assigned to {shard}; the shard that owns it moves it (docs/sharding.md)"
              + ("" if leading[shard] else f"; no process of shard {shard!r} leads now: it moves once one does"),
              file=sys.stderr)
    print(f"ykbus shards: leading now: {', '.join(str(n) for n, on in leading.items() if on) or 'none'}; no leader: "
          f"{', '.join(str(n) for n, on in leading.items() if not on) or 'none'}", file=sys.stderr)
    return 0


def cmd_tyjob(args: argparse.Namespace) -> int:
    from ykbus.tyjob.cli import main as run

    return run(args.rest)


def cmd_sim(args: argparse.Namespace) -> int:
    from ykbus import logs
    from ykbus.bus.service import asyncio_loop_policy

    logs.setup("info")  # warnings and errors on stderr (`docker compose logs`); progress on stdout
    asyncio_loop_policy()
    if args.kind == "k8s":
        from ykbus.sim.k8s import main as run
    else:
        from ykbus.sim.batch import main as run
    run(args.rest)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from ykbus.bench.ladder import bench

    return bench(args)


def cmd_up(args: argparse.Namespace) -> int:
    from ykbus import logs
    from ykbus.bus.service import asyncio_loop_policy
    from ykbus.up import up

    logs.setup("warning")
    asyncio_loop_policy()
    return up(args)


def stop_on_sigterm(name: str) -> None:
    """SIGTERM (`kill`, a job's timeout, `docker stop`) where a command takes no signals
    itself: it stops as on Ctrl-C, its `with` and `finally` blocks stopping its children
    (Python's default ends it at once, and they ran on, adopted by init). Where the signal
    lands inside an asyncio task (a NATS subscription's callback), the stop is kept on that
    task too, and asyncio would report it at exit as a task's error nobody retrieved, with a
    traceback: that report says nothing the one line has not."""

    def terminated(_signum: int, _frame: object) -> None:
        print(f"{name}: terminated", file=sys.stderr, flush=True)
        raise SystemExit(128 + signal.SIGTERM)

    def not_the_stop(record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], (SystemExit, KeyboardInterrupt)))

    signal.signal(signal.SIGTERM, terminated)
    logging.getLogger("asyncio").addFilter(not_the_stop)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name = f"ykbus {argv[0]}" if argv else "ykbus"

    stop_on_sigterm(name)  # (a command that takes signals replaces it while it runs)
    try:
        return _main(argv)
    except BrokenPipeError:  # `ykbus explain | head`: the reader left; no traceback (Python's own advice)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:  # Ctrl-C where a command takes no signals itself: its `with` blocks stopped its children
        print(f"\n{name}: interrupted", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT  # 130, as a shell reports a job ended by Ctrl-C
    except (OSError, BaseExceptionGroup) as exc:  # a port taken, a file missing or not allowed: one line
        said = [e for e in leaves(exc) if isinstance(e, OSError) and e.errno in SAID_ERRNOS]
        if not said or len(said) != len(leaves(exc)):
            raise  # anything else as it is: a full disk keeps its traceback
        print(f"ykbus {argv[0] if argv else ''}: {said[0]}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    unreachable: list[BaseException] = []
    try:
        if argv[:1] == ["tyjob"]:  # its own parser, flags and all (ykbus/tyjob/cli.py)
            from ykbus.tyjob.cli import main as tyjob

            return tyjob(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except* NatsUnreachable as group:  # one line, whichever task of the command met it
        unreachable += leaves(group)
    except* LogError as group:  # a log that does not read: one line too
        unreachable += leaves(group)
    print(f"ykbus {argv[0]}: {unreachable[0]}", file=sys.stderr)
    return 2


NATS_HELP = f"NATS server (default: {FIND_URL})"
SHARD_HELP = "ask the cores of this shard (cores sharded by RM: docs/sharding.md)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ykbus", description="A YuniKorn-style scheduler core over NATS.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="apply a JSONL log to a fresh core and write every output")
    p.add_argument("log", help="input log, JSON Lines")
    p.add_argument("--out", help="output file, - for standard output; none with --check (default: standard output)")
    p.add_argument("--check", metavar="RECORDED", help="exit 1 at the first difference from a recorded output file")
    p.add_argument("--queues", metavar="FILE.yaml", help="replace the queue configuration of every registration")
    p.add_argument("--shard", metavar="NAME", help="the outputs of this core shard of a sharded deployment "
                   "(every shard the log names is run; docs/sharding.md); default: one core applies everything")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("whatif", help="replay a log under another queue configuration and show what changes")
    p.add_argument("log", help="a recorded log, JSON Lines (`ykbus record`)")
    p.add_argument("--queues", required=True, metavar="NEW.yaml",
                   help="the queue configuration to try in place of one policy group's (the only one, or the one "
                   "--policy-group or --rm says)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--policy-group", metavar="GROUP",
                       help="the policy group NEW.yaml is for (a queue file's name: queues/GROUP.yaml); the other "
                       "RMs keep their configurations (needed when the log's RMs are of several groups)")
    scope.add_argument("--rm", metavar="RM", help="the RM NEW.yaml is for: its policy group's configuration")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    p.add_argument("--limit", type=whole(0), default=20, help="applications listed (most changed first)")
    p.set_defaults(func=cmd_whatif)

    p = sub.add_parser("explain", help="why an application's asks are pending, in words")
    p.add_argument("app", nargs="?", help="the application id (none: the applications that wait, most pending first)")
    p.add_argument("ask", nargs="?", help="only this ask (allocationKey)")
    p.add_argument("--all", action="store_true",
                   help="a line for every ask (by default, asks that wait for the same reason are one line with a count)")
    p.add_argument("--rm", help="only this RM's application of that id (--would-fit: the RM it is for)")
    p.add_argument("--would-fit", metavar="FILE", help="a dry run: where the application in FILE (JSON or YAML: "
                   '{"application": <AddApplicationRequest>, "asks": [<AllocationAsk>, ...]}) would go now, or why '
                   "not, when it would start, and what a smaller request would get (writes nothing)")
    p.add_argument("--json", action="store_true", help="the read API's JSON (the application's, and how it ended) instead of words; with --would-fit, its answer")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--log", help="replay this JSON Lines log and explain its final state")
    where.add_argument("--nats", metavar="URL", help="ask a live core over NATS (read API yk.v1.api.applications); "
                                                     + NATS_HELP)
    where.add_argument("--data", metavar="DIR", help=DATA_HELP)
    p.add_argument("--nats-secrets", metavar="FILE", help=SECRETS_HELP)
    p.add_argument("--prefix", default="yk.v1", help="subject prefix (default yk.v1)")
    p.add_argument("--shard", type=shard_name, help=SHARD_HELP)
    p.set_defaults(func=cmd_explain)

    for name, what in (("queues", "the queue tree: guarantees, max, usage, pending, applications"),
                       ("apps", "applications: queue, state, allocations, pending, why pending"),
                       ("nodes", "nodes: state, capacity, allocated, use")):
        p = sub.add_parser(name, help=f"{what}, as a table")
        source = p.add_mutually_exclusive_group()
        source.add_argument("--log", help="replay this JSON Lines log and show its final state")
        source.add_argument("--nats", metavar="URL", help="ask a live core over NATS (the read API); " + NATS_HELP)
        source.add_argument("--data", metavar="DIR", help=DATA_HELP)
        p.add_argument("--nats-secrets", metavar="FILE", help=SECRETS_HELP)
        p.add_argument("--rm", help="only this RM")
        p.add_argument("--prefix", default="yk.v1", help="subject prefix (default yk.v1)")
        p.add_argument("--shard", type=shard_name, help=SHARD_HELP)
        p.add_argument("--json", action="store_true", help="the read API's JSON instead of the table")
        if name == "apps":
            p.add_argument("--queue", help="only applications in this queue or below it")
            p.add_argument("--state", help="only applications in this state (Running, Accepted, ...)")
        p.set_defaults(func=cmd_table)

    p = sub.add_parser("demo", help="replay the bundled example log and print the decisions")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("config", help="queue configuration tools")
    config = p.add_subparsers(dest="action", required=True)
    v = config.add_parser("validate", help="check a queues.yaml: every error with its path, exit 1 if any")
    v.add_argument("file", metavar="FILE.yaml", help="the queue configuration (or with --service, the service's)")
    v.add_argument("--json", action="store_true", help='one JSON object: {"file", "valid", "errors", "warnings"}')
    v.add_argument("--service", action="store_true", help="the file is a service configuration (ykbus.yaml)")
    v.set_defaults(func=cmd_config_validate)

    p = sub.add_parser("schema", help="write the JSON Schemas of the wire messages")
    p.add_argument("--dir", default="schemas", help="where to write them (default schemas)")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("core", help="run the core service against a NATS server")
    p.add_argument("--nats", default=None, metavar="URL", help=NATS_HELP + " (or the service configuration's)")
    p.add_argument("--data", metavar="DIR", help=DATA_HELP)
    service_flags(p)
    p.add_argument("--reader", action="store_true", default=None,
                   help="a reader: apply the log and answer the read API, HTTP and metrics; never lead "
                        "(reads that never wait for the leader's writer: docs/operations.md)")
    p.add_argument("--no-reads", action="store_true", default=None,
                   help="answer no read API on NATS (leave reads to --reader processes)")
    p.add_argument("--shard", metavar="NAME", help="be this core shard: apply only the RMs assigned to it "
                   "(`ykbus shards assign`; RMs assigned nowhere belong to the shard 'default'); docs/sharding.md")
    p.set_defaults(func=cmd_core)

    p = sub.add_parser("nats-config", help="write nats-server users and permissions: one identity per RM")
    p.add_argument("--rms", required=True, metavar="RMS.yaml", help="the identities (docs/configuration.md)")
    p.add_argument("--out", required=True, metavar="nats.conf", help="nats-server configuration to write (0600)")
    p.add_argument("--secrets", metavar="FILE",
                   help="write every password here (0600), generated ones included: clients read theirs")
    p.set_defaults(func=cmd_nats_config)

    p = sub.add_parser("record", help="export the input stream to a JSON Lines log file")
    p.add_argument("--nats", default=None, metavar="URL", help=NATS_HELP)
    p.add_argument("--data", metavar="DIR", help=DATA_HELP)
    p.add_argument("--out", required=True, metavar="LOG.jsonl", help="the log file to write (replaced, if it exists)")
    p.add_argument("--prefix", default="yk.v1", help="subject prefix (default yk.v1)")
    p.add_argument("--nats-secrets", metavar="FILE", help=SECRETS_HELP + " (the core's identity: it reads the log)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("shards", help="cores sharded by RM: list the assignments, or assign an RM to a shard")
    p.add_argument("action", choices=["list", "assign"], help="list the assignments, or assign RM to SHARD")
    p.add_argument("rm", nargs="?", help="assign: the rmID")
    p.add_argument("shard", nargs="?", help="assign: the shard's name (`ykbus core --shard NAME`)")
    p.add_argument("--nats", default=None, metavar="URL", help=NATS_HELP)
    p.add_argument("--data", metavar="DIR", help=DATA_HELP)
    p.add_argument("--nats-secrets", metavar="FILE", help=SECRETS_HELP + " (the core's identity: it reads the shards' bucket)")
    p.set_defaults(func=cmd_shards)

    p = sub.add_parser("sim", help="run a simulated RM against a NATS server: k8s or batch")
    p.add_argument("kind", choices=["k8s", "batch"], help="a Kubernetes-like cluster, or a YARN-like batch RM")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="flags of the simulator (--nats URL, --nodes N, --rate R)")
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("tyjob", help="TYJobs (Arranger): controller, apply, get, delete (docs/tyjob.md)",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="controller, apply, get or delete, and their flags")
    p.set_defaults(func=cmd_tyjob)

    p = sub.add_parser("bench", help="benchmarks: core, replay, shards, restart, memory, e2e, failover (see BENCHMARKS.md)")
    bench = p.add_subparsers(dest="what", required=True)
    b = bench.add_parser("core", help="in-process scheduling speed")
    b.add_argument("--workload", choices=["yunikorn-perf", "mixed", "gang", "policies", "backlog", "preemption", "topology",
                                          "backfill", "gang-reserve"],
                   default="yunikorn-perf", help="the traffic: BENCHMARKS.md says what each is (default yunikorn-perf)")
    b.add_argument("--pending", type=counts, default="1000,10000,100000",
                   help="backlog: asks that cannot be placed, one run per count")
    b.add_argument("--entries", type=whole(1), default=2000, help="backlog: timed entries (releases and asks, alternating)")
    b.add_argument("--nodes", type=counts, default="500,1000,2000,5000", help="node counts (yunikorn-perf; backlog: the last)")
    b.add_argument("--node-sort", type=node_sorts, default="fair", help="fair, binpacking, or both: fair,binpacking")
    b.add_argument("--asks-per-app", type=whole(1), default=5000, help="yunikorn-perf: asks of each application")
    b.add_argument("--scale", type=positive, default=1.0, help="mixed, gang, preemption, topology, backfill, gang-reserve: scale nodes, apps (gangs) and asks (the burst)")
    b = bench.add_parser("replay", help="log entries per second replaying a long log")
    b.add_argument("--entries", type=whole(1), default=1_000_000, help="entries of the generated log")
    b.add_argument("--log", metavar="LOG.jsonl",
                   help="replay this recorded log instead (`ykbus record` of real traffic, e.g. ykbus up's demo)")
    b = bench.add_parser("shards", help="a cluster split over core shards: the slowest shard's cost, by shard count")
    b.add_argument("--nodes", dest="nodes_n", type=whole(1), default=50_000, help="nodes of the cluster, over every RM")
    b.add_argument("--allocations", type=whole(1), default=1_000_000, help="allocations to place, over every RM")
    b.add_argument("--rms", type=whole(1), default=8, help="RMs, spread over the shards round robin")
    b.add_argument("--shards", type=counts, default="1,2,4", help="shard counts to run")
    b = bench.add_parser("restart", help="snapshot load + tail to the first decision")
    b.add_argument("--nodes", dest="nodes_n", type=whole(1), default=5000, help="nodes in the snapshot")
    b.add_argument("--allocations", type=whole(1), default=100_000, help="allocations in the snapshot")
    b.add_argument("--tail", type=whole(0), default=1000, help="entries after the snapshot, applied before the first decision")
    b = bench.add_parser("memory", help="bytes per node, per pending ask and per application that ended")
    b.add_argument("--nodes", dest="nodes_n", type=whole(1), default=5000, help="nodes measured")
    b.add_argument("--asks", type=whole(1), default=20_000, help="pending asks (memory is traced: 20,000 take "
                   "about a minute)")
    b.add_argument("--ended", type=whole(1), default=5_000, help="applications that ended (kept 72 h)")
    b = bench.add_parser("e2e", help="NATS + core service + a publishing RM: sustained rate and latency")
    b.add_argument("--seconds", type=seconds(False), default=10.0, help="length of each measured phase")
    b.add_argument("--batch", type=whole(1), default=1000, help="asks per message in the throughput phase")
    b.add_argument("--latency-batch", type=whole(1), default=100, help="asks per message in the latency phase")
    b.add_argument("--window", type=whole(1), default=8, help="messages in flight in the throughput phase (each "
                   "awaited for its ack; a shim with a backlog of pods keeps many)")
    b.add_argument("--poll", type=seconds(True), default=0, help="every POLL seconds, fetch what a dashboard polls from "
                   "the core's HTTP API (YuniKorn's web UI overview; 0: none)")
    b.add_argument("--snapshot-every", type=whole(1), default=10_000, help="the core's snapshot interval in entries "
                   "(default: as `ykbus core` runs)")
    b.add_argument("--reader", action="store_true", help="run a reader process (`ykbus core --reader`) beside the "
                   "core, which answers no reads; --poll polls the reader")
    b.add_argument("--dry-run", type=seconds(True), default=0, metavar="SECONDS", help="every SECONDS, from another process, "
                   "ask the core for a dry run of a job (POST /api/wouldfit, docs/time.md) and time it (0: none)")
    b.add_argument("--live", type=whole(0), default=0, metavar="N", help="the RM keeps at most N allocations, releasing "
                   "its oldest as new ones arrive (churn at a steady size; 0: none is released)")
    b.add_argument("--limit-ms", type=whole(0), default=0, help="every ask carries this runtime limit "
                   "(executionTimeoutMilliSeconds; 0: none), so the core keeps end bounds to estimate from")
    b.add_argument("--reader-cpu", type=whole(0), default=None, metavar="CPU", help="with --reader: the reader on CPU "
                   "alone, everything else on the other CPUs (a reader with a core of its own, as deployed)")
    b.add_argument("--nodes", dest="nodes_n", type=whole(1), default=5000, help="nodes the RM registers")
    b = bench.add_parser("failover", help="kill -9 the leader core under load: time to the next decision")
    b.add_argument("--kills", type=whole(1), default=10, help="leaders killed, one after the other")
    b.add_argument("--lease-ttl", type=seconds(False), default=1.0, help="the cores' --lease-ttl")
    b.add_argument("--rate", type=positive, default=500, help="asks per second the RM publishes (10 a message)")
    b.add_argument("--every", type=seconds(False), default=3.0, help="seconds between kills")
    b.add_argument("--nodes", dest="nodes_n", type=whole(1), default=100, help="nodes the RM registers")
    for name, b in bench.choices.items():
        if name not in ("memory", "failover"):  # (bytes do not vary from run to run; failover repeats by --kills)
            b.add_argument("--repeat", type=whole(1), default=5, help="runs of each case: the median is reported")
        b.add_argument("--json", action="store_true", help="one JSON object per line on stdout")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("up", help="embedded nats-server + core + three demo RMs, with live progress")
    p.add_argument("--data", metavar="DIR", help="the data directory: the NATS store (the log, snapshots), queue files, "
                   "the demo RMs' state; kept, and resumed by the next `ykbus up` (default: ~/.ykbus/up)")
    p.add_argument("--fresh", action="store_true",
                   help="empty the data directory first (one `ykbus up` made) and start clean")
    p.add_argument("--duration", type=seconds(True), default=0, metavar="S", help="stop after S seconds (0: until Ctrl-C)")
    p.add_argument("--secure", action="store_true",
                   help="one NATS user per RM with allow-list permissions (written to the data directory, 0600)")
    p.add_argument("--sync-always", action="store_true",
                   help="nats-server fsyncs every write (sync_interval: always): slower, no acked loss on power failure")
    service_flags(p, embedded=True)
    p.set_defaults(func=cmd_up)

    return parser


if __name__ == "__main__":
    sys.exit(main())
