"""`ykbus tyjob controller | apply | get | delete` (docs/tyjob.md).

Every command takes `--nats URL`; without it: $YKBUS_NATS, else the URL a running
`ykbus up` wrote to ~/.ykbus/nats.url, else nats://127.0.0.1:4222.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import secrets
import sys
from typing import Any, NamedTuple

import anyio
import msgspec

from ykbus import logs
from ykbus.bus.local import DATA_HELP, FIND_URL, connect, default_url, up_secrets
from ykbus.cliparse import Parser, rm_id
from ykbus.tyjob import store
from ykbus.tyjob.manifest import ManifestError, TYJob, parse_manifests

COLUMNS = ("NAME", "NAMESPACE", "STAGE", "SCHEDULE", "RESTARTS", "PODS", "MESSAGE")


class Nats(NamedTuple):
    """Where a command connects: the server and its nats.connect keywords (an identity)."""

    url: str
    options: dict[str, Any] = {}


async def _open(nats: Nats) -> Any:
    """A connection for one command (a server that does not answer: NatsUnreachable, which
    `ykbus` reports as one line)."""
    return await connect(nats.url, allow_reconnect=False, **nats.options)


def _identity(secrets_path: str, rm: str | None = None) -> dict[str, Any]:
    """nats.connect keywords of the controller's RM (`rm`) or of the current user's admin
    identity, from a secrets file of `ykbus nats-config` or `ykbus up --secure`."""
    import getpass

    from ykbus.bus.permissions import connect_options
    from ykbus.bus.settings import StartError, identity_secret

    try:
        secret = identity_secret(secrets_path, "rms" if rm else "admins", rm or getpass.getuser())
    except StartError as exc:
        sys.exit(f"ykbus: {exc}")
    return connect_options(secret.user, secret.password)


# A stored job's fields as the manifest names them
MANIFEST_PATHS = {"namespace": "metadata.namespace", "name": "metadata.name", "leader_name": "spec.leader.name",
                  "leader": "spec.leader.template", "leader_template": "spec.leader.template",
                  "worker_sets": "spec.workerSets", "restart_limit": "spec.restartLimit",
                  "clean_pod_policy": "spec.cleanPodPolicy", "min_workers": "spec.minWorkersNum",
                  "priority": "spec.priority", "job_queue_policy": "spec.schedulerPolicy.jobQueuePolicy",
                  "basic_policy": "spec.schedulerPolicy.basicPolicy", "api_version": "apiVersion",
                  "volumes": "spec.volumes", "topology": "spec.topology"}


def _immutable_changes(old: TYJob, new: TYJob) -> list[str]:
    """Fields of a stored job that a new manifest changes, besides spec.terminating, as the
    manifest names them."""
    a, b = msgspec.to_builtins(old), msgspec.to_builtins(new)
    return sorted({MANIFEST_PATHS.get(k, k) for k in a if k not in ("terminating", "uid") and a[k] != b.get(k)})


async def apply(nats: Nats, files: list[str]) -> int:
    texts: list[tuple[str, str]] = []
    errors: list[str] = []
    for path in files:
        try:
            if path == "-":
                texts.append((sys.stdin.read(), "-"))
            else:
                with open(path, encoding="utf-8") as f:
                    texts.append((f.read(), path))
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
    return await _apply(nats, texts, errors)


async def apply_text(nats: Nats, text: str, source: str, quiet: bool = False) -> int:
    if quiet:
        with contextlib.redirect_stdout(io.StringIO()):
            return await _apply(nats, [(text, source)], [])
    return await _apply(nats, [(text, source)], [])


ENDED = ("Succeeded", "Failed")


async def rerun_ended(nats: Nats, text: str, source: str, settle_s: float = 5.0, whole: bool = False) -> list[str]:
    """The jobs of `text` that have ended, deleted and applied again (`ykbus up`'s example
    jobs run in rounds); the others stay as they are. With `whole`, only once every one of
    them has ended (a round like the first). Returns `namespace/name` of each run again.
    `settle_s`: the controller's time to take the deletions before the jobs come back."""
    wanted = {(j.namespace, j.name) for j in parse_manifests(text, source)}
    ended = sorted((s["namespace"], s["name"]) for s in await read_statuses(nats, None, None)
                   if (s["namespace"], s["name"]) in wanted and s["stage"] in ENDED)
    if not ended or (whole and len(ended) < len(wanted)):
        return []
    nc = await _open(nats)
    try:
        kv = await store.bucket(nc)
        for namespace, name in ended:
            await kv.delete(store.spec_key(namespace, name))
    finally:
        await nc.close()
    await anyio.sleep(settle_s)
    await apply_text(nats, text, source, quiet=True)
    return [f"{namespace}/{name}" for namespace, name in ended]


def _refuse(errors: list[str]) -> int:
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    print(f"ykbus tyjob apply: {len(errors)} error(s); nothing stored", file=sys.stderr)
    return 1


async def _apply(nats: Nats, texts: list[tuple[str, str]], errors: list[str]) -> int:
    """Store the jobs of every text, all of them or none (every error printed)."""
    jobs: list[tuple[TYJob, str]] = []  # each with the file that gave it
    seen: dict[str, str] = {}  # a job's key -> the file that gave it
    for text, source in texts:
        try:
            jobs.extend((job, source) for job in parse_manifests(text, source))
        except ManifestError as exc:
            errors.extend(exc.errors)
    if errors:
        return _refuse(errors)
    nc = await _open(nats)
    try:
        kv = await store.bucket(nc)
        results = []
        for job, source in jobs:
            key = store.spec_key(job.namespace, job.name)
            old_data = await store.get_value(kv, key)
            try:
                old = store.decode_job(old_data) if old_data else None
            except (msgspec.DecodeError, msgspec.ValidationError):
                old = None  # not a job this program wrote: replaced
            if old is not None and _immutable_changes(old, job):
                errors.append(f"tyjob {job.namespace}/{job.name}: only spec.terminating may change on an existing job "
                              f"(changed: {', '.join(_immutable_changes(old, job))}); delete it first")
            if key in seen:  # two files naming one job: which would win is no answer
                errors.append(f"tyjob {job.namespace}/{job.name}: given twice ({seen[key]} and {source})")
            seen[key] = source
            job = msgspec.structs.replace(job, uid=old.uid if old is not None else secrets.token_hex(8))
            results.append((job, key, old))
        if errors:
            return _refuse(errors)
        for job, key, old in results:
            if old == job:
                verb = "unchanged"
            else:
                await kv.put(key, msgspec.json.encode(job))
                verb = "configured" if old is not None else "created"
            print(f"tyjob/{job.name} ({job.namespace}) {verb}")
    finally:
        await nc.close()
    return 0


async def read_statuses(nats: Nats, namespace: str | None, name: str | None) -> list[dict[str, Any]]:
    """The status of each job stored (one without a status yet: stage Pending, no pods)."""
    nc = await _open(nats)
    try:
        kv = await store.bucket(nc)
        out = []
        for key in await store.keys(nc, kv, "spec."):
            parts = key.split(".")
            if len(parts) != 3:
                continue  # not a key `apply` writes
            _, ns, job_name = parts
            if (namespace is not None and ns != namespace) or (name is not None and job_name != name):
                continue
            data = await store.get_value(kv, store.status_key(f"{ns}.{job_name}"))
            status = store.read_status(data) if data is not None else None
            if status is not None:
                out.append(status)
            else:
                out.append({"name": job_name, "namespace": ns, "stage": "Pending", "scheduleState": "Unscheduled",
                            "restarts": 0, "pods": [], "message": "no controller has taken it yet"})
        return out
    finally:
        await nc.close()


def print_table(statuses: list[dict[str, Any]]) -> None:
    rows = [COLUMNS] + [(s["name"], s["namespace"], s["stage"], s["scheduleState"], str(s["restarts"]),
                         f"{sum(1 for p in s['pods'] if p['phase'] == 'Running')}/{len(s['pods'])}",
                         s.get("message", "")) for s in statuses]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])


async def _not_found(nats: Nats, command: str, name: str, namespace: str) -> int:
    """A job not in `namespace`: say so, and where a job of that name is (kubectl's user
    would otherwise have to guess the namespace)."""
    elsewhere = sorted(s["namespace"] for s in await read_statuses(nats, None, name))
    hint = (f"; found in namespace {', '.join(elsewhere)}: use -n {elsewhere[0]}" if elsewhere
            else "; no namespace has a job of that name")
    print(f"ykbus tyjob {command}: tyjob {name} not found in namespace {namespace}{hint}", file=sys.stderr)
    return 1


async def get(nats: Nats, name: str | None, namespace: str | None, output: str) -> int:
    statuses = await read_statuses(nats, namespace if name is None else (namespace or "default"), name)
    if name is not None and not statuses:
        return await _not_found(nats, "get", name, namespace or "default")
    if name is None and namespace is not None and not statuses:  # a misspelt namespace: not an empty table
        known = sorted({s["namespace"] for s in await read_statuses(nats, None, None)})
        near = difflib.get_close_matches(namespace, known, n=1)
        hint = (f"did you mean -n {near[0]}? " if near else "") + (
            f"the namespaces with jobs: {', '.join(known)}" if known else "no namespace has a job")
        print(f"ykbus tyjob get: no job in namespace {namespace}; {hint}", file=sys.stderr)
        return 1
    if output == "json":
        print(json.dumps(statuses[0] if name is not None else statuses, indent=2))
    else:
        print_table(statuses)
        if not statuses:  # an empty table alone reads as a failure, or as the wrong server
            print(f"ykbus tyjob get: no job on {nats.url} (`ykbus tyjob apply -f FILE` adds one; the "
                  "controller runs in `ykbus up`, or as `ykbus tyjob controller`)", file=sys.stderr)
    return 0


async def delete(nats: Nats, name: str, namespace: str) -> int:
    nc = await _open(nats)
    try:
        kv = await store.bucket(nc)
        key = store.spec_key(namespace, name)
        if await store.get_value(kv, key) is None:
            return await _not_found(nats, "delete", name, namespace)
        await kv.delete(key)
        print(f"tyjob/{name} ({namespace}) deleted")
    finally:
        await nc.close()
    return 0


async def _until_stopped(controller: Any) -> None:
    """The controller until SIGINT or SIGTERM (a container's stop: Python as PID 1 ignores a
    SIGTERM it has no handler for, and Docker kills it 10 s later), then its last save."""
    import logging
    import signal

    from ykbus.bus.local import leaves

    try:
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                await controller.run()
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    logging.getLogger("ykbus.tyjob").info("tyjob controller stopping")
                    break
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the controller's one error as itself (a bad cluster file: one line)
        found = leaves(group)
        if len(found) == 1:
            raise found[0] from None
        raise


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="ykbus tyjob", description="TYJobs (Arranger) on ykbus: docs/tyjob.md")
    sub = p.add_subparsers(dest="cmd", required=True)

    def with_nats(q: argparse.ArgumentParser) -> argparse.ArgumentParser:
        q.add_argument("--nats", metavar="URL", default=None,
                       help=f"NATS server (default: {FIND_URL})")
        q.add_argument("--data", metavar="DIR", help=DATA_HELP)
        q.add_argument("--nats-secrets", metavar="FILE",
                       help="on a secured server (`ykbus up --secure`: DATA/secrets.yaml): connect as the identity of "
                            "this secrets file that may use the TYJob bucket: the RM `tyjob` for the controller, "
                            "else the admin named as the current user")
        return q

    c = with_nats(sub.add_parser("controller", help="run the controller: an RM with the nodes of CLUSTER.yaml"))
    c.add_argument("--cluster", required=True, metavar="CLUSTER.yaml")
    c.add_argument("--rm", type=rm_id, default="tyjob", help="its RM id")
    a = with_nats(sub.add_parser("apply", help="store the TYJobs of manifest files (all of them, or none)"))
    a.add_argument("-f", "--filename", action="append", required=True, metavar="FILE.yaml", help="'-': stdin")
    g = with_nats(sub.add_parser("get", help="job status: a table, or -o json"))
    g.add_argument("name", nargs="?")
    g.add_argument("-n", "--namespace", default=None,
                   help="only this namespace (default: every namespace; with NAME, namespace default)")
    g.add_argument("-o", "--output", choices=["table", "json"], default="table")
    d = with_nats(sub.add_parser("delete", help="delete a job: its pods and application go"))
    d.add_argument("name")
    d.add_argument("-n", "--namespace", default="default")
    args = p.parse_args(argv)
    url = args.nats or default_url(args.data)
    identity = args.rm if args.cmd == "controller" else None
    secrets = args.nats_secrets or up_secrets(args.nats, args.data)  # `ykbus up --secure`'s, found
    nats = Nats(url, _identity(secrets, identity) if secrets else {})
    if args.cmd == "controller":
        from ykbus.bus.service import asyncio_loop_policy
        from ykbus.tyjob.cluster import ClusterError
        from ykbus.tyjob.service import ControllerService, OtherController

        asyncio_loop_policy()
        logs.setup("info")  # what the controller does, on stderr (`docker compose logs`)
        try:
            anyio.run(_until_stopped, ControllerService(url, args.cluster, args.rm, nats.options))
        except ClusterError as exc:
            raise SystemExit(f"ykbus tyjob controller: {exc}") from None
        except OtherController as exc:  # one controller a server: said in one line, exit 2 (as a port taken)
            print(f"ykbus tyjob controller: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # the cluster file cannot be read (not a timeout: also an OSError, with no file)
            if exc.filename is None:
                raise
            raise SystemExit(f"ykbus tyjob controller: --cluster {args.cluster}: {exc.strerror}") from None
        except KeyboardInterrupt:
            pass
        return 0
    if args.cmd == "apply":
        return anyio.run(apply, nats, args.filename)
    if args.cmd == "get":
        return anyio.run(get, nats, args.name, args.namespace, args.output)
    return anyio.run(delete, nats, args.name, args.namespace)


if __name__ == "__main__":
    sys.exit(main())
