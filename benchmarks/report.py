"""Markdown tables from benchmarks/results/*.jsonl (pasted into BENCHMARKS.md)."""

import json
from pathlib import Path

R = Path(__file__).parent / "results"


def rows(name):
    path = R / f"{name}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def n(v, digits=0):
    return f"{v:,.{digits}f}"


print("| nodes | node sort | allocations/s (median) | min | max | seconds | peak RSS MiB |")
print("|---:|---|---:|---:|---:|---:|---:|")
for r in rows("core"):
    print(f"| {n(r['nodes'])} | {r['node_sort']} | **{n(r['allocations_per_s'])}** | {n(r['min'])} | {n(r['max'])} "
          f"| {r['seconds']:.3f} | {r['peak_rss_mib']} |")
for r in rows("mixed"):
    print(f"\nmixed: {n(r['allocations'])} allocations in {n(r['entries'])} entries, **{n(r['allocations_per_s'])}"
          f"/s** (min {n(r['min'])}, max {n(r['max'])}), entry p50 {r['entry_p50_ms']:.2f} ms, "
          f"p99 {r['entry_p99_ms']:.2f} ms, repeat {r['repeat']}")
for r in rows("replay"):
    print(f"\nreplay: {n(r['entries'])} entries, **{n(r['entries_per_s'])}/s** (min {n(r['min'])}, max {n(r['max'])})")
for r in rows("restart"):
    print(f"\nrestart: {n(r['nodes'])} nodes, {n(r['allocations'])} allocations, snapshot {n(r['snapshot_bytes'])} B, "
          f"load {r['load_seconds']:.3f} s, to first decision **{r['seconds']:.3f} s** (min {r['min']:.3f}, "
          f"max {r['max']:.3f})")
for r in rows("memory"):
    print(f"\nmemory: **{r['bytes_per_node']} B/node**, **{r['bytes_per_pending_ask']} B/pending ask**")
for r in rows("e2e"):
    print(f"\ne2e: sustained **{n(r['sustained_allocations_per_s'])}/s** (min {n(r['min'])}, max {n(r['max'])}); "
          f"at {n(r['half_rate'])}/s: p50 **{r['latency_p50_ms']:.2f} ms**, p99 **{r['latency_p99_ms']:.1f} ms** "
          f"(runs {r['p99_min']:.1f}–{r['p99_max']:.1f})")
