"""`ykbus bench shards`: a cluster too big for one core, split over core shards (issue 24).

One log, as a NATS stream would hold it: R RMs, each with its share of the nodes and of the
asks, interleaved entry by entry; assign entries at its start spread the RMs over S shards
(round robin; S = 1: one core holds everything). Each shard is a core of its own in its own
process (forked, so the log is built once) that reads every entry of the log, as a live
shard does, applies its RMs' and skips the rest, and encodes every output. A shard's CPU
time is what it would take on a machine of its own; the deployment goes as fast as its
slowest shard: allocations/s = allocations / the slowest shard's CPU seconds. Run for
S = 1, 2, 4 it gives the cost curve.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from ykbus.core import Core, Entry
from ykbus.core.shards import DEFAULT_SHARD
from ykbus.log.build import LogBuilder, app, ask, node
from ykbus.log.jsonl import encode_output
from ykbus.yamlload import load_yaml

ASKS_PER_ENTRY = 100
NODES_PER_ENTRY = 500
APPS_PER_RM = 20


def shard_names(count: int) -> list[str]:
    return [DEFAULT_SHARD] + [f"s{i}" for i in range(2, count + 1)]


def sharded_log(nodes: int, allocations: int, rms: int, shards: int) -> list[Entry]:
    """The log: assignments, registrations, nodes, applications, then the asks of every RM
    interleaved (each fits: 32 cores a node, one core an ask)."""
    log = LogBuilder()
    names = shard_names(shards)
    ids = [f"rm-{i + 1}" for i in range(rms)]
    out = [log.entry("assign", {"rm": rm, "shard": names[i % shards]}, rm="")
           for i, rm in enumerate(ids) if names[i % shards] != DEFAULT_SHARD]
    per_rm = nodes // rms
    for rm in ids:
        out.append(log.register(rm=rm))
        for first in range(0, per_rm, NODES_PER_ENTRY):
            out.append(log.nodes(*[node(f"{rm}-n{i}", vcore=32_000, memory=128 * 1024)
                                   for i in range(first, min(per_rm, first + NODES_PER_ENTRY))], rm=rm))
        out.append(log.apps(*[app(f"{rm}-app{i}") for i in range(APPS_PER_RM)], rm=rm))
    per_rm_asks = allocations // rms
    for first in range(0, per_rm_asks, ASKS_PER_ENTRY):
        for rm in ids:
            out.append(log.asks(*[ask(f"{rm}-k{k}", f"{rm}-app{k % APPS_PER_RM}", vcore=1000, memory=1024)
                                  for k in range(first, min(per_rm_asks, first + ASKS_PER_ENTRY))], rm=rm))
    return out


_LOG: list[Entry] = []  # the log the forked shards read (built once, before the fork)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _run_shard(name: str) -> dict[str, Any]:
    """One shard over the whole log: CPU seconds, entries applied, allocations, state size."""
    gc.disable()  # the core makes no reference cycles on this path; the service freezes what lives
    core = Core(load_yaml=load_yaml, shard=name)
    before = _rss_mib()
    allocations = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for entry in _LOG:
        for out in core.apply(entry):
            encode_output(out)
            if out.kind == "alloc":
                allocations += len(out.msg.new)
    return {"shard": name, "cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - wall0,
            "allocations": allocations, "rms": len(core.rms),
            "state_mib": round(_rss_mib() - before, 1)}


def bench_shards(nodes: int, allocations: int, rms: int, counts: list[int],
                 progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per shard count."""
    global _LOG
    rows = []
    ctx = multiprocessing.get_context("fork")
    for count in counts:
        progress(f"shards: building the log for {count} shard(s): {nodes:,} nodes, {allocations:,} asks, {rms} RMs")
        _LOG = sharded_log(nodes, allocations, rms, count)
        with ctx.Pool(min(count, os.cpu_count() or 1)) as pool:
            progress(f"shards: {count} shard(s), each in its own process, over {len(_LOG):,} entries")
            runs = pool.map(_run_shard, shard_names(count), chunksize=1)
        entries, _LOG = len(_LOG), []
        slowest = max(r["cpu_s"] for r in runs)
        placed = sum(r["allocations"] for r in runs)
        rows.append({"bench": "shards", "shards": count, "rms": rms, "nodes": nodes, "entries": entries,
                     "allocations": placed, "slowest_shard_cpu_s": round(slowest, 2),
                     "allocations_per_s": round(placed / slowest),
                     "per_shard_cpu_s": " / ".join(f"{r['cpu_s']:.1f}" for r in runs),
                     "largest_state_mib": max(r["state_mib"] for r in runs)})
    return rows
