"""Plot allocations/s against node count (fair and binpacking) from benchmarks/results/core.jsonl.

    pip install matplotlib && python benchmarks/plot.py      # writes benchmarks/allocations-vs-nodes.png
"""

import json
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
rows = [json.loads(line) for line in (HERE / "results" / "core.jsonl").read_text().splitlines() if line.strip()]
fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
for sort, marker in (("fair", "o"), ("binpacking", "s")):
    pts = sorted((r["nodes"], r["allocations_per_s"], r["min"], r["max"]) for r in rows if r["node_sort"] == sort)
    if not pts:
        continue
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
    ax.errorbar(xs, ys, yerr=err, marker=marker, capsize=3, label=f"ykbus, {sort} (median of 5, min-max)")
ax.axhline(3700, color="grey", linestyle="--", linewidth=1, label="yunikorn-core, fair (~3,700/s)")
ax.plot([5000], [572], "x", color="grey", markersize=9, label="yunikorn-core, binpacking @5,000 (572/s)")
ax.set_xscale("log")
ax.set_xticks([500, 1000, 2000, 5000], labels=["500", "1,000", "2,000", "5,000"])
ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
ax.set_ylim(bottom=0)
ax.set_xlabel("nodes")
ax.set_ylabel("allocations / s")
ax.set_title("yunikorn-core BenchmarkScheduling workload, 10,000 asks, 2 cores")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=8, loc="center right")
fig.tight_layout()
fig.savefig(HERE / "allocations-vs-nodes.png")
print(HERE / "allocations-vs-nodes.png")
