"""`ykbus bench WHAT [--workload W]`: which measurement runs, and the columns of its table.

Each measurement is one function of the command's arguments that yields its rows (medians
over `--repeat` runs, bench/run.py and the modules beside it); `COLUMNS` names the columns
its table shows, in order. The command line (cli.py) only parses the arguments and calls
`bench`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ykbus.bench import run as b

Row = dict[str, Any]
Progress = Callable[[str], None]

COLUMNS: dict[str, list[str]] = {
    "core/yunikorn-perf": ["workload", "nodes", "node_sort", "allocations", "seconds", "allocations_per_s", "min",
                           "max", "peak_rss_mib"],
    "core/policies": ["workload", "policy", "nodes", "pods", "seconds", "pods_per_s", "min", "max", "peak_rss_mib"],
    "core/backlog": ["workload", "nodes", "pending", "entries", "allocations", "seconds", "entries_per_s", "min",
                     "max", "entry_p99_ms", "peak_rss_mib"],
    "core/gang": ["workload", "nodes", "gangs", "allocations", "entries", "seconds", "gangs_per_s",
                  "allocations_per_s", "min", "max", "peak_rss_mib"],
    "core/topology": ["workload", "nodes", "gangs", "allocations", "seconds", "gangs_per_s", "placement_p99_ms",
                      "preferred_in_one_rack", "ignored_preferred_in_one_rack", "racks", "racks_wholly_free",
                      "ignored_racks_wholly_free", "peak_rss_mib"],
    "core/backfill": ["workload", "nodes", "gangs", "small", "utilization", "without_utilization", "gangs_placed",
                      "without_gangs_placed", "gang_wait_p50_min", "without_gang_wait_p50_min", "gang_wait_p95_min",
                      "without_gang_wait_p95_min", "domain_reservations", "node_reservations", "backfilled",
                      "estimate_error_p50_min", "estimate_error_p95_min", "later_than_estimated", "entry_p99_ms",
                      "peak_rss_mib"],
    "core/gang-reserve": ["workload", "nodes", "entries", "gangs", "gangs_placed", "without_gangs_placed",
                          "gang_wait_p50_s", "without_gang_wait_p50_s", "gang_wait_p95_s", "without_gang_wait_p95_s",
                          "small_placed", "without_small_placed", "entries_per_s", "entry_p99_ms", "peak_rss_mib"],
    "core/preemption": ["workload", "nodes", "allocations", "burst", "search_p50_ms", "search_p99_ms",
                        "search_max_ms", "preemptions", "seconds", "victims_per_s", "min", "max", "confirm_seconds",
                        "placed", "peak_rss_mib"],
    "core/mixed": ["workload", "nodes", "allocations", "entries", "allocations_per_s", "min", "max", "entry_p50_ms",
                   "entry_p99_ms", "peak_rss_mib"],
    "replay": ["log", "entries", "outputs", "seconds", "entries_per_s", "min", "max", "peak_rss_mib"],
    "shards": ["shards", "rms", "nodes", "entries", "allocations", "slowest_shard_cpu_s", "allocations_per_s",
               "per_shard_cpu_s", "largest_state_mib"],
    "restart": ["nodes", "allocations", "tail_entries", "snapshot_bytes", "load_seconds", "seconds", "min", "max"],
    "memory": ["nodes", "pending_asks", "bytes_per_node", "bytes_per_pending_ask", "bytes_per_ended_application"],
    "e2e": ["sustained_allocations_per_s", "min", "max", "half_rate", "latency_p50_ms", "latency_p99_ms",
            "latency_p999_ms", "latency_max_ms", "p99_min", "p99_max", "allocations", "dry_runs", "dry_run_p50_ms",
            "dry_run_p99_ms", "dry_run_max_ms"],
    "failover": ["kills", "lease_ttl_s", "rate", "asks", "allocations", "lost", "duplicated", "failover_p50_ms",
                 "failover_min_ms", "failover_max_ms", "failover_ms"],
}

E2E_MEDIANS = ("sustained_allocations_per_s", "half_rate", "latency_p50_ms", "latency_p99_ms", "latency_p999_ms",
               "latency_max_ms", "allocations", "seconds")


def _e2e(args: argparse.Namespace, progress: Progress) -> Row:
    """The median of `--repeat` runs, with the spread of the rate and of the p99."""
    from ykbus.bench.e2e import bench_e2e

    runs = [bench_e2e(args.seconds, args.batch, args.nodes_n, progress, args.latency_batch, args.window,
                      args.poll, args.snapshot_every, args.reader, args.dry_run, args.live, args.limit_ms,
                      args.reader_cpu)
            for _ in range(args.repeat)]
    row = dict(runs[0])
    for key in E2E_MEDIANS:
        row[key] = statistics.median(r[key] for r in runs)
    rates = [r["sustained_allocations_per_s"] for r in runs]
    p99s = [r["latency_p99_ms"] for r in runs]
    row.update(min=min(rates), max=max(rates), p99_min=min(p99s), p99_max=max(p99s), repeat=args.repeat)
    return row


def rows(name: str, args: argparse.Namespace, progress: Progress) -> Iterator[Row]:
    """The rows of measurement `name` (a key of COLUMNS), each as soon as it is measured."""
    match name:
        case "core/yunikorn-perf":
            for sort in args.node_sort.split(","):
                for n in args.nodes:
                    yield b.bench_yunikorn_perf(n, sort, args.repeat, args.asks_per_app, progress)
        case "core/policies":
            yield from b.bench_policies(args.repeat, args.scale, progress)
        case "core/backlog":
            for pending in args.pending:
                yield b.bench_backlog(args.repeat, pending, args.nodes[-1], args.entries, progress)
        case "core/gang":
            yield b.bench_gang(args.repeat, args.scale, progress)
        case "core/topology":
            from ykbus.bench.topology import bench_topology

            yield bench_topology(args.repeat, args.scale, progress)
        case "core/gang-reserve":
            from ykbus.bench.gangreserve import bench_gang_reserve

            yield bench_gang_reserve(args.repeat, args.scale, progress)
        case "core/backfill":
            from ykbus.bench.backfill import bench_backfill

            yield bench_backfill(args.repeat, args.scale, progress)
        case "core/preemption":
            yield b.bench_preemption(args.repeat, args.scale, progress)
        case "core/mixed":
            yield b.bench_mixed(args.repeat, args.scale, progress)
        case "replay":
            yield b.bench_replay(args.entries, args.repeat, progress, args.log)
        case "shards":
            from ykbus.bench.shards import bench_shards

            yield from bench_shards(args.nodes_n, args.allocations, args.rms, args.shards, progress)
        case "restart":
            yield b.bench_restart(args.nodes_n, args.allocations, args.tail, args.repeat, progress)
        case "memory":
            yield b.bench_memory(args.nodes_n, args.asks, progress, args.ended)
        case "e2e":
            yield _e2e(args, progress)
        case "failover":
            from ykbus.bench.failover import bench_failover

            yield bench_failover(args.kills, args.lease_ttl, args.rate, args.nodes_n, args.every, progress)


def measurement(args: argparse.Namespace) -> str | None:
    """The key of COLUMNS that `ykbus bench` asks for (`core` runs `mixed` unless told)."""
    if args.what == "core":
        workload = args.workload if f"core/{args.workload}" in COLUMNS else "mixed"
        return f"core/{workload}"
    return args.what if args.what in COLUMNS else None


def bench(args: argparse.Namespace) -> int:
    """`ykbus bench`: progress and a table on stderr, with --json one object a row on stdout."""
    rep = b.Reporter(args.json)
    name = measurement(args)
    if name is None:
        return 0
    if name == "e2e":
        from ykbus.bench.e2e import reader_cpu_problem

        problem = reader_cpu_problem(args.reader, args.reader_cpu)
        if problem:
            print(f"ykbus bench e2e: {problem}", file=sys.stderr)
            return 2
    for row in rows(name, args, rep.progress):
        rep.row(row)
    rep.table(COLUMNS[name])
    return 0
