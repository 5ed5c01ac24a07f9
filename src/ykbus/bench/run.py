"""`ykbus bench`: measured speed. Each subcommand prints progress and a table on stderr
and, with --json, one JSON object per line on stdout (medians over --repeat runs)."""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable
from typing import Any

from ykbus.core import Core, compiled
from ykbus.core.entries import Entry
from ykbus.yamlload import load_yaml


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Reporter:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.rows: list[dict[str, Any]] = []
        self.err = sys.stderr
        self._last = 0.0

    def progress(self, text: str) -> None:
        """What is running, redrawn in place on stderr when it is a terminal (ykbus.progress)."""
        if not self.err.isatty():
            return
        now = time.monotonic()
        if now - self._last < 0.25:
            return
        self._last = now
        self.err.write(f"\r\033[K{text}")
        self.err.flush()

    def row(self, row: dict[str, Any]) -> None:
        row = {**row, "core": compiled.mode}  # "compiled", or "python: <why>" (core/compiled.py)
        self.rows.append(row)
        if self.as_json:
            print(json.dumps(row), flush=True)

    def table(self, columns: list[str]) -> None:
        if self.err.isatty():
            self.err.write("\r\033[K")
        widths = [max(len(c), *(len(_fmt(r.get(c))) for r in self.rows)) for c in columns]
        self.err.write("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)) + "\n")
        for r in self.rows:
            self.err.write("  ".join(_fmt(r.get(c)).rjust(w) for c, w in zip(columns, widths, strict=True)) + "\n")
        self.err.write(f"machine: {machine()}\n")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if v < 100 else f"{v:,.0f}"
    return str(v)


def machine() -> str:
    import platform
    return f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}, core {compiled.mode}"


def fresh_core() -> Core:
    return Core(load_yaml=load_yaml)


def apply_all(core: Core, entries: Iterable[Entry]) -> int:
    allocations = 0
    for e in entries:
        for out in core.apply(e):
            if out.kind == "alloc":
                allocations += len(out.msg.new)
    return allocations


# --- core: yunikorn-perf -----------------------------------------------------------------

def bench_yunikorn_perf(nodes: int, node_sort: str, repeat: int, asks_per_app: int,
                        progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.workloads import yunikorn_perf

    runs = []
    for r in range(repeat):
        progress(f"core yunikorn-perf nodes={nodes} {node_sort}: run {r + 1}/{repeat}")
        setup, timed = yunikorn_perf(nodes, node_sort, asks_per_app)
        core = fresh_core()
        apply_all(core, setup)
        gc.collect()
        t0 = time.perf_counter()
        allocations = apply_all(core, timed)
        seconds = time.perf_counter() - t0
        assert allocations == 2 * asks_per_app, f"only {allocations} allocations"
        runs.append({"seconds": seconds, "allocations_per_s": allocations / seconds})
    per_s = [r["allocations_per_s"] for r in runs]
    return {"bench": "core", "workload": "yunikorn-perf", "nodes": nodes, "node_sort": node_sort,
            "allocations": 2 * asks_per_app, "seconds": statistics.median(r["seconds"] for r in runs),
            "allocations_per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s),
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- core: mixed ---------------------------------------------------------------------------

def bench_mixed(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.bench.workloads import Mixed

    runs = []
    for r in range(repeat):
        w = Mixed(nodes=max(10, int(5000 * scale)), apps=max(10, int(1000 * scale)), asks=max(100, int(100_000 * scale)))
        core = fresh_core()
        apply_all(core, w.setup())
        gc.collect()
        times, allocations, total = [], 0, 0.0
        for i, entry in enumerate(w.entries()):
            t0 = time.perf_counter()
            outs = core.apply(entry)
            dt = time.perf_counter() - t0
            times.append(dt)
            total += dt
            new = [(a.applicationID, a.UUID) for o in outs if o.kind == "alloc" for a in o.msg.new]
            allocations += len(new)
            w.observe(new)
            if i % 200 == 0:
                progress(f"core mixed: run {r + 1}/{repeat}, entry {i}, {allocations} allocations")
        times.sort()
        runs.append({"allocations_per_s": allocations / total, "allocations": allocations, "entries": len(times),
                     "p50_ms": 1000 * times[len(times) // 2], "p99_ms": 1000 * times[int(len(times) * 0.99)],
                     "seconds": total})
    per_s = [r["allocations_per_s"] for r in runs]
    return {"bench": "core", "workload": "mixed", "nodes": max(10, int(5000 * scale)),
            "allocations": runs[0]["allocations"], "entries": runs[0]["entries"],
            "seconds": statistics.median(r["seconds"] for r in runs),
            "allocations_per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s),
            "entry_p50_ms": statistics.median(r["p50_ms"] for r in runs),
            "entry_p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}


def bench_backlog(repeat: int, pending: int, nodes: int, entries: int, progress: Callable[[str], None]
                  ) -> dict[str, Any]:
    """Entries/s of steady churn on a full cluster with a backlog of `pending` asks that
    cannot be placed (workloads.Backlog); the entries are timed one by one, the set-up not."""
    from ykbus.bench.workloads import Backlog
    from ykbus.collector import FREEZE_EVERY  # the service's garbage-collector settings, as users run it

    runs = []
    for r in range(repeat):
        w = Backlog(nodes=nodes, pending=pending, entries=entries)
        core = fresh_core()
        progress(f"core backlog {pending:,}: run {r + 1}/{repeat}, setting up")
        for entry in w.setup():
            w.observe([(a.applicationID, a.UUID) for o in core.apply(entry) if o.kind == "alloc" for a in o.msg.new])
        while core.backlog:
            core.apply(w.log.tick())
        waiting = sum(k.pending for rm in core.rms.values() for p in rm.partitions.values()
                      for a in p.apps.values() for k in a.asks.values())
        gc.collect()
        gc.freeze()  # as the service keeps it (ykbus/collector.py): the backlog is long-lived
        total, allocations, times = 0.0, 0, []
        for i, entry in enumerate(w.entries()):
            if i and i % FREEZE_EVERY == 0:
                gc.freeze()
            t0 = time.perf_counter()
            outs = core.apply(entry)
            dt = time.perf_counter() - t0
            total += dt
            times.append(dt)
            new = [(a.applicationID, a.UUID) for o in outs if o.kind == "alloc" for a in o.msg.new]
            allocations += len(new)
            w.observe(new)
            if i % 200 == 0:
                progress(f"core backlog {pending:,}: run {r + 1}/{repeat}, entry {i}")
        gc.unfreeze()
        times.sort()
        runs.append({"entries_per_s": len(times) / total, "seconds": total, "allocations": allocations,
                     "waiting": waiting, "p99_ms": 1000 * times[int(len(times) * 0.99)]})
    per_s = [r["entries_per_s"] for r in runs]
    return {"bench": "core", "workload": "backlog", "nodes": nodes, "pending": runs[0]["waiting"],
            "entries": entries, "allocations": runs[0]["allocations"],
            "seconds": statistics.median(r["seconds"] for r in runs), "entries_per_s": statistics.median(per_s),
            "min": min(per_s), "max": max(per_s), "entry_p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- core: gang ----------------------------------------------------------------------------

def bench_gang(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Gangs placed whole, then replaced by their real asks (workloads.Gangs): gangs and
    allocations (placeholders and real ones) per second of `Core.apply`."""
    from ykbus.bench.workloads import Gangs

    runs = []
    for r in range(repeat):
        w = Gangs(nodes=max(10, int(5000 * scale)), gangs=max(10, int(1000 * scale)))
        core = fresh_core()
        apply_all(core, w.setup())
        gc.collect()
        total, allocations, gangs, entries = 0.0, 0, set(), 0
        for entry in w.entries():
            t0 = time.perf_counter()
            outs = core.apply(entry)
            total += time.perf_counter() - t0
            entries += 1
            for o in outs:
                if o.kind == "alloc":
                    allocations += len(o.msg.new)
                    gangs.update(a.applicationID for a in o.msg.new if a.placeholder)
            w.observe(outs)
            if entries % 100 == 0:
                progress(f"core gang: run {r + 1}/{repeat}, {len(gangs)} gangs placed, {allocations} allocations")
        expected = 2 * sum(w.members)
        assert allocations == expected and len(gangs) == w.gangs, f"{allocations} of {expected} allocations"
        runs.append({"seconds": total, "gangs_per_s": len(gangs) / total, "allocations_per_s": allocations / total,
                     "allocations": allocations, "entries": entries})
    per_s = [r["allocations_per_s"] for r in runs]
    return {"bench": "core", "workload": "gang", "nodes": max(10, int(5000 * scale)),
            "gangs": max(10, int(1000 * scale)), "allocations": runs[0]["allocations"], "entries": runs[0]["entries"],
            "seconds": statistics.median(r["seconds"] for r in runs),
            "gangs_per_s": statistics.median(r["gangs_per_s"] for r in runs),
            "allocations_per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s),
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- core: preemption ----------------------------------------------------------------------

def bench_preemption(repeat: int, scale: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Preemption on a full cluster (workloads.Preemption, issue 22). Two figures:
    - one victim search: `Preemptor(partition, ask).search()` timed call by call for each
      ask of the burst, over the state before anything is preempted (a what-if: it
      changes nothing), p50/p99/max;
    - end to end: the entry past the preemption delay, in which the core searches for
      every ask of the burst (victims found per second of `Core.apply`: the allocations
      released PREEMPTED_BY_SCHEDULER over its wall time), then the RM's confirmation of
      every release in one entry, in which the burst is placed."""
    from ykbus.bench.workloads import Preemption
    from ykbus.core.decisions import Preempt
    from ykbus.core.preemption import Preemptor

    nodes, burst = max(10, int(5000 * scale)), max(10, int(1000 * scale))
    runs = []
    for r in range(repeat):
        w = Preemption(nodes=nodes, burst=burst)
        core = fresh_core()
        progress(f"core preemption: run {r + 1}/{repeat}, filling {nodes:,} nodes")
        running = apply_all(core, w.setup())
        while core.backlog:
            running += apply_all(core, [w.log.tick()])
        assert running == w.allocations, f"{running} of {w.allocations} allocations to fill the cluster"
        placed = apply_all(core, [w.burst_entry()])
        assert placed == 0, f"{placed} asks of the burst found room in a full cluster"
        part = core.rms["bench"].partitions["default"]
        asks = [k for a in part.apps.values() if a.id.startswith("pre") for k in a.asks.values() if k.pending]
        assert len(asks) == burst, f"{len(asks)} of {burst} asks of the burst pending"
        gc.collect()
        gc.freeze()  # the loaded state is long-lived, as the service has it (bus/service.py): no gen-2 scans of it
        searches, found = [], 0
        for i, ask in enumerate(asks):
            t0 = time.perf_counter()
            decision = Preemptor(part.records, ask).search()
            searches.append(time.perf_counter() - t0)
            found += isinstance(decision, Preempt)
            if i % 50 == 0:
                progress(f"core preemption: run {r + 1}/{repeat}, search {i}/{burst}")
        assert found == burst, f"{found} of {burst} searches found victims"
        progress(f"core preemption: run {r + 1}/{repeat}, the delay passes: {burst:,} asks search")
        gc.collect()
        t0 = time.perf_counter()
        outs = core.apply(w.delay_tick())
        seconds = time.perf_counter() - t0
        victims = [(v.applicationID, v.UUID) for o in outs if o.kind == "alloc" for v in o.msg.released
                   if v.terminationType.name == "PREEMPTED_BY_SCHEDULER"]
        assert victims, "nothing preempted"
        progress(f"core preemption: run {r + 1}/{repeat}, confirming {len(victims):,} releases")
        gc.collect()
        t0 = time.perf_counter()
        outs = core.apply(w.confirm(victims))
        confirm_s = time.perf_counter() - t0
        burst_placed = sum(1 for o in outs if o.kind == "alloc" for a in o.msg.new if a.applicationID.startswith("pre"))
        gc.unfreeze()
        searches.sort()
        runs.append({"search_p50_ms": 1000 * searches[len(searches) // 2],
                     "search_p99_ms": 1000 * searches[int(len(searches) * 0.99)],
                     "search_max_ms": 1000 * searches[-1], "preemptions": len(victims), "seconds": seconds,
                     "victims_per_s": len(victims) / seconds, "confirm_seconds": confirm_s,
                     "placed": burst_placed})
    per_s = [r["victims_per_s"] for r in runs]
    p99s = [r["search_p99_ms"] for r in runs]
    return {"bench": "core", "workload": "preemption", "nodes": nodes, "allocations": nodes * Preemption.PER_NODE,
            "burst": burst, "search_p50_ms": statistics.median(r["search_p50_ms"] for r in runs),
            "search_p99_ms": statistics.median(p99s), "search_max_ms": max(r["search_max_ms"] for r in runs),
            "p99_min": min(p99s), "p99_max": max(p99s), "preemptions": runs[0]["preemptions"],
            "seconds": statistics.median(r["seconds"] for r in runs), "victims_per_s": statistics.median(per_s),
            "min": min(per_s), "max": max(per_s),
            "confirm_seconds": statistics.median(r["confirm_seconds"] for r in runs), "placed": runs[0]["placed"],
            "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- core: node policies ------------------------------------------------------------------

def bench_policies(repeat: int, scale: float, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Pods placed per second under each node policy (workloads.PolicyJobs), then
    yunikorn-perf (fair) at the same node count, in the same run, for comparison."""
    from ykbus.bench.workloads import POLICY_NAMES, PolicyJobs

    nodes, jobs = max(10, int(5000 * scale)), max(2, int(1000 * scale))
    rows = []
    for policy in POLICY_NAMES:
        runs = []
        for r in range(repeat):
            progress(f"core policies {policy}: run {r + 1}/{repeat}")
            w = PolicyJobs(policy, nodes=nodes, jobs=jobs)
            core = fresh_core()
            apply_all(core, w.setup())
            gc.collect()
            t0 = time.perf_counter()
            pods = apply_all(core, w.entries())
            seconds = time.perf_counter() - t0
            assert pods == w.pods, f"{policy}: {pods} of {w.pods} pods placed"
            runs.append({"seconds": seconds, "pods_per_s": pods / seconds})
        per_s = [r["pods_per_s"] for r in runs]
        rows.append({"bench": "core", "workload": "policies", "policy": policy, "nodes": nodes, "pods": jobs * 10,
                     "seconds": statistics.median(r["seconds"] for r in runs),
                     "pods_per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s),
                     "repeat": repeat, "peak_rss_mib": round(peak_rss_mib(), 1)})
    perf = bench_yunikorn_perf(nodes, "fair", repeat, max(10, int(5000 * scale)), progress)
    rows.append({**perf, "policy": "yunikorn-perf (fair)", "pods": perf["allocations"],
                 "pods_per_s": perf["allocations_per_s"]})
    return rows


# --- replay ---------------------------------------------------------------------------------

def bench_replay(entries: int, repeat: int, progress: Callable[[str], None], log: str | None = None
                 ) -> dict[str, Any]:
    """Entries/s replaying a log: a generated one of `entries` entries, or, with `log`, a
    recorded one (`ykbus record` of real traffic), as `ykbus replay` does it (the guarded
    core, every output encoded)."""
    from ykbus.bench.workloads import streaming_log
    from ykbus.log.jsonl import encode_entry, encode_output, read_entries
    from ykbus.log.replay import replay

    if log is not None:
        with open(log, "rb") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    else:
        progress(f"replay: building a {entries:,}-entry log")
        lines = [encode_entry(e) for e in streaming_log(entries, nodes=max(10, min(2000, entries // 500)))]
    runs = []
    for r in range(repeat):
        progress(f"replay: {len(lines):,} entries, run {r + 1}/{repeat}")
        core = fresh_core()
        gc.collect()
        t0 = time.perf_counter()
        n_out = 0
        if log is not None:
            for out in replay(read_entries(lines, log)):
                encode_output(out)
                n_out += 1
        else:
            for e in read_entries(lines):
                for out in core.apply(e):
                    encode_output(out)
                    n_out += 1
        seconds = time.perf_counter() - t0
        runs.append({"seconds": seconds, "entries_per_s": len(lines) / seconds, "outputs": n_out})
    per_s = [r["entries_per_s"] for r in runs]
    return {"bench": "replay", "log": log or "generated", "entries": len(lines),
            "seconds": statistics.median(r["seconds"] for r in runs), "outputs": runs[0]["outputs"],
            "entries_per_s": statistics.median(per_s), "min": min(per_s), "max": max(per_s), "repeat": repeat,
            "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- restart ----------------------------------------------------------------------------------

def big_state(nodes: int, allocations: int) -> tuple[Core, Any]:
    """A core with `nodes` nodes and `allocations` live allocations, and its log builder."""
    from ykbus.log.build import LogBuilder, app, ask, node

    log = LogBuilder("rm")
    core = fresh_core()
    per_node = allocations // nodes + 1
    apply_all(core, [
        log.register("partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}, {name: b}]}]}]"),
        log.nodes(*[node(f"n{i:05d}", vcore=1000 * per_node, memory=2**30 * per_node) for i in range(nodes)]),
        log.apps(*[app(f"app{i}", "root.a" if i % 2 else "root.b") for i in range(200)]),
    ])
    for start in range(0, allocations, 10_000):
        apply_all(core, [log.asks(*[ask(f"k{i}", f"app{i % 200}", vcore=1000, memory=2**30)
                                    for i in range(start, min(allocations, start + 10_000))])])
    return core, log


def bench_restart(nodes: int, allocations: int, tail: int, repeat: int, progress: Callable[[str], None]) -> dict[str, Any]:
    from ykbus.core.snapshot import dump_snapshot, load_snapshot
    from ykbus.log.build import ask

    progress(f"restart: building {nodes} nodes, {allocations:,} allocations")
    core, log = big_state(nodes, allocations)
    snapshot = dump_snapshot(core)
    tail_entries = [log.tick(1000) for _ in range(tail)]
    first = log.asks(ask("first-after-restart", "app0", vcore=1, memory=1))
    runs = []
    for r in range(repeat):
        progress(f"restart: run {r + 1}/{repeat}")
        gc.collect()
        t0 = time.perf_counter()
        restored = load_snapshot(snapshot, load_yaml)
        t_load = time.perf_counter() - t0
        for e in tail_entries:
            restored.apply(e)
        outs = restored.apply(first)
        seconds = time.perf_counter() - t0
        assert any(o.kind == "alloc" and o.msg.new for o in outs), "no decision after restart"
        runs.append({"seconds": seconds, "load_s": t_load})
    secs = [r["seconds"] for r in runs]
    return {"bench": "restart", "nodes": nodes, "allocations": allocations, "tail_entries": tail,
            "snapshot_bytes": len(snapshot), "seconds": statistics.median(secs), "min": min(secs), "max": max(secs),
            "load_seconds": statistics.median(r["load_s"] for r in runs), "repeat": repeat,
            "peak_rss_mib": round(peak_rss_mib(), 1)}


# --- memory -------------------------------------------------------------------------------------

def bench_memory(nodes: int, asks: int, progress: Callable[[str], None], ended: int = 5_000) -> dict[str, Any]:
    """Bytes per node, per pending ask, and per application that ended (one allocation, then
    removed: kept, with its history, until its terminated timer, 72 h)."""
    from ykbus.log.build import LogBuilder, app, ask, node

    progress("memory: nodes")
    log = LogBuilder("rm")
    core = fresh_core()
    apply_all(core, [log.register("partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]"),
                     log.apps(*[app(f"app{i}", "root.a") for i in range(100)])])
    node_entries = [log.nodes(*[node(f"n{i:05d}", vcore=16_000, memory=2**36, attributes={"si/hostname": f"n{i:05d}"})
                                for i in range(nodes)])]
    ask_entries = [log.asks(*[ask(f"k{i}", f"app{i % 100}", vcore=100_000, memory=2**30, priority=i % 5)
                              for i in range(start, min(asks, start + 10_000))]) for start in range(0, asks, 10_000)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    apply_all(core, node_entries)
    gc.collect()
    after_nodes = tracemalloc.get_traced_memory()[0]
    progress("memory: pending asks (none fit: each stays pending)")
    apply_all(core, ask_entries)
    gc.collect()
    after_asks = tracemalloc.get_traced_memory()[0]
    progress("memory: applications that ended (each ran one allocation)")
    for start in range(0, ended, 1_000):
        ids = [f"done{i}" for i in range(start, min(ended, start + 1_000))]
        apply_all(core, [log.apps(*[app(i, "root.a") for i in ids]),
                         log.asks(*[ask("k", i, vcore=10, memory=2**20) for i in ids]), log.remove_apps(*ids)])
    gc.collect()
    after_ended = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    kept = len(core.registry.rms["rm"].partitions["default"].terminated)
    assert kept == ended, f"{kept} ended applications kept"
    pending = sum(a["pending"] for p in [core.dump()["rms"]["rm"]["partitions"]["default"]]
                  for app_ in p["applications"].values() for a in app_["asks"].values())
    assert pending == asks, f"{pending} pending"
    return {"bench": "memory", "nodes": nodes, "pending_asks": asks,
            "bytes_per_node": round((after_nodes - before) / nodes), "bytes_per_pending_ask": round((after_asks - after_nodes) / asks),
            "ended_applications": ended, "bytes_per_ended_application": round((after_ended - after_asks) / max(1, ended))}
