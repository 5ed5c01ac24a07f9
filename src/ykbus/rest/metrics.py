"""Prometheus metrics (`/ws/v1/metrics` and `/metrics`), with prometheus_client: every
`yunikorn_*` family of YuniKorn's (`../shared/reference/yunikorn-rest/ws_v1_metrics.txt`),
with its type and label names, but Go's runtime ones (the Python process's instead:
`process_*`, `python_gc_*`, `python_info`), and ykbus's own (`ykbus_*`).

Gauges are read from the state at each scrape. Counts of decisions come from the log (the
partitions' counts, which snapshots keep), so a restarted core reports the same. Latencies
are the service's own measures of this process: an entry's apply (YuniKorn's scheduling
latency and cycle) and an output's publish. The core's pass is deterministic and keeps no
clock, so YuniKorn's per-node and per-sort timings (`trynode_*`, `node_sorting_*`,
`trypreemption_*`) are exposed with the same names and labels and have no observations.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ykbus.core.lifecycle import AppState, NodeState
from ykbus.core.partition import Partition
from ykbus.core.readmodel import NodeUsage
from ykbus.core.registry import ResourceManager
from ykbus.core.topology import path_of
from ykbus.core.why import PendingCode
from ykbus.rest.router import RestState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
# YuniKorn's latency buckets (prometheus.ExponentialBuckets(0.0001, 10, 8)): its families are
# named `_milliseconds` but observe seconds (pkg/metrics/scheduler.go, SinceInSeconds), and so
# do these, so a YuniKorn dashboard reads them right
LATENCY_BUCKETS = (0.0001, 0.001, 0.01, 0.1, 1, 10, 100, 1000, float("inf"))
PUBLISH_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, float("inf"))


class Tally:
    """A histogram for the writer's hot path: one bisection and two additions per
    observation (prometheus_client's Histogram takes a lock for each value it adds to).
    The writer and the HTTP server share one thread, so nothing is read half written."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = [b for b in buckets if b != float("inf")]
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1  # `le` bounds are inclusive
        self.sum += value

    def family(self, name: str, help_text: str) -> HistogramMetricFamily:
        cumulative, running = [], 0
        for bound, n in zip([*self.bounds, float("inf")], self.counts, strict=True):
            running += n
            cumulative.append((floatToGoString(bound), running))
        return HistogramMetricFamily(name, help_text, buckets=cumulative, sum_value=self.sum)


class TallyCollector(Collector):
    def __init__(self, tallies: list[tuple[str, str, Tally]]) -> None:
        self.tallies = tallies

    def collect(self) -> Iterator[Metric]:
        for name, help_text, tally in self.tallies:
            yield tally.family(name, help_text)
def _shared_paths(parts: list[tuple[ResourceManager, Partition]]) -> set[str]:
    """The queue paths (of queues, and of ended applications' queues) found in more than one
    partition."""
    seen: dict[str, int] = {}
    for _rm, p in parts:
        paths = {*p.queues, *(t.queue for t in p.terminated.values()), *(t.queue for t in p.rejected.values())}
        for path in paths:
            seen[path] = seen.get(path, 0) + 1
    return {path for path, n in seen.items() if n > 1}


class GoNamedCounter(CounterMetricFamily):
    """A counter whose name YuniKorn's Go client writes as registered, without `_total` (its
    per-queue `yunikorn_<queue>_queue_container`): the Python client's exposition adds
    `_total` to every counter, `text()` takes it off again."""


def text(family: Metric) -> bytes:
    """One family in the Prometheus text format, named as YuniKorn names it."""
    out = generate_latest(_Families(family))
    if isinstance(family, GoNamedCounter):
        out = out.replace(f"{family.name}_total".encode(), family.name.encode())
    return out


APP_TOTAL_STATES = {"running", "resuming", "failing", "completing", "completed", "failed"}  # its help text's
USAGE_RANGES = ("[0,10%]", "(10%,20%]", "(20%,30%]", "(30%,40%]", "(40%,50%]", "(50%,60%]", "(60%,70%]",
                "(70%,80%]", "(80%,90%]", "(90%,100%]")
NODE_USAGE_TYPES = ("memory", "pods", "vcore")  # YuniKorn's families always written; any other a node has too
ReadModel = tuple[int, dict[str, list[int]], dict[str, int]]  # schedulable nodes, nodes per usage tenth, asks per code
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def _state(s: AppState | str) -> str:
    return (s.value if isinstance(s, AppState) else s).lower()


def topology_families(parts: list[tuple[ResourceManager, Partition]],
                      name_of: Callable[[ResourceManager, Partition], str]) -> tuple[Metric, ...]:
    """Per topology level of each partition that has levels (docs/topology.md): the domains
    whose every node holds no allocation, and the largest free room of one domain per
    resource, from the schedulable nodes as they are (built on read: nothing is kept). None
    when no partition has levels. A partition is labelled as the REST paths name it
    (`name_of`: `[rm]default` where two RMs have a `default`)."""
    if not any(p.records.config.topology.levels for _rm, p in parts):
        return ()
    wholly = GaugeMetricFamily("ykbus_topology_domains_free", "Topology domains whose every schedulable node "
                               "holds no allocation, per partition and level.", labels=["partition", "level"])
    largest = GaugeMetricFamily("ykbus_topology_largest_free", "The largest free room of one topology domain, per "
                                "partition, level and resource.", labels=["partition", "level", "resource"])
    for rm, p in parts:
        levels = p.records.config.topology.levels
        name = name_of(rm, p)
        for i, level in enumerate(levels):
            domains: dict[tuple[str, ...], list[Any]] = {}
            for node in p.nodes.values():
                if node.state is NodeState.SCHEDULABLE:
                    path = path_of(levels, node.attributes)
                    if len(path) > i:
                        domains.setdefault(path[: i + 1], []).append(node)
            wholly.add_metric([name, level], sum(1 for ns in domains.values() if not any(n.allocations for n in ns)))
            best: dict[str, int] = {}
            for ns in domains.values():
                room: dict[str, int] = {}
                for n in ns:
                    for r, v in n.free.items():
                        room[r] = room.get(r, 0) + v
                for r, v in room.items():
                    best[r] = max(best.get(r, 0), v)
            for r, v in sorted(best.items()):
                largest.add_metric([name, level, r], v)
    return wholly, largest


class YunikornCollector(Collector):
    """The state's gauges and the log's counters, built at each scrape."""

    def __init__(self, rest: RestState, service: Callable[[], dict[str, Any]]) -> None:
        self.rest = rest
        self.service = service  # the service's figures of the moment (entries, lag, snapshot age, RMs)
        # the series of a queue's resources and applications written so far: one that falls to 0
        # stays, at 0, while its queue is there (YuniKorn's gauges do; the state keeps no zeros)
        self.written_res: dict[tuple[str, str, str], None] = {}
        self.written_apps: dict[tuple[str, str], None] = {}

    @staticmethod
    def read_model(parts: list[tuple[ResourceManager, Partition]]) -> ReadModel:
        """Schedulable nodes, nodes per tenth of usage by resource, and pending asks by why
        they wait (core/readmodel.py `NodeUsage`, `PendingCodes`): the usage built on read
        from the nodes (a reader changes nothing of the core's), no walk of the pending asks."""
        active = 0
        ranges = {t: [0] * 10 for t in NODE_USAGE_TYPES}
        codes = {c.value: 0 for c in PendingCode}
        for _rm, p in parts:
            usage = NodeUsage.of(p.nodes.values())
            active += usage.schedulable
            for t in sorted({*NODE_USAGE_TYPES, *usage.types()}):  # one family per resource, as YuniKorn's
                ranges[t] = [a + b for a, b in zip(ranges.get(t, [0] * 10), usage.counts(t), strict=True)]
            for code, n in p.pending_codes.counts(p.apps.values(), p.records.paused).items():
                codes[code.value] += n
        return active, ranges, codes

    def collect(self) -> Iterator[Metric]:
        """YuniKorn's families; a queue held by several partitions (the root of each RM) is
        labelled `<partition as the REST paths name it>/<path>`, each series its own."""
        parts = self.rest.partitions()
        queue_app = GaugeMetricFamily("yunikorn_queue_app", "Queue application metrics. State of the application "
                                      "includes `new`, `accepted`, `rejected`, `running`, `failing`, `failed`, "
                                      "`resuming`, `completing`, `completed`.", labels=["queue", "state"])
        queue_total = CounterMetricFamily("yunikorn_queue_app", "Total number of applications that reached a "
                                          "terminal state. State includes `completed`, `failed`, `rejected`.",
                                          labels=["queue", "state"])
        queue_res = GaugeMetricFamily("yunikorn_queue_resource", "Queue resource metrics. State of the resource "
                                      "includes `guaranteed`, `max`, `allocated`, `pending`, `preempting`, "
                                      "`maxRunningApps`.", labels=["queue", "resource", "state"])
        apps_total = GaugeMetricFamily("yunikorn_scheduler_application_total", "Total number of applications. State "
                                       "of the application includes `running`, `resuming`, `failing`, `completing`, "
                                       "`completed` and `failed`.", labels=["state"])
        submissions = CounterMetricFamily("yunikorn_scheduler_application_submission", "Total number of application "
                                          "submissions. State of the attempt includes `new`, `accepted` and "
                                          "`rejected`.", labels=["result"])
        attempts = CounterMetricFamily("yunikorn_scheduler_container_allocation_attempt", "Total number of attempts "
                                       "to allocate containers. State of the attempt includes `allocated`, "
                                       "`rejected`, `error`, `released`", labels=["state"])
        nodes = GaugeMetricFamily("yunikorn_scheduler_node", "Total number of nodes. State of the node includes "
                                  "`active` and `failed`.", labels=["state"])
        pending = GaugeMetricFamily("ykbus_pending_asks", "Pending asks by the code of why they wait.",
                                    labels=["code"])
        containers: dict[str, CounterMetricFamily] = {}

        by_queue_state: dict[tuple[str, str], int] = {}
        queues: dict[str, None] = {}  # every queue's label
        res_written: dict[tuple[str, str, str], None] = {}
        per_state: dict[str, int] = {}
        counted: dict[tuple[str, str, str], int] = {}
        active, ranges, codes = self.read_model(parts)
        usage = {t: GaugeMetricFamily(f"yunikorn_scheduler_{_NAME_CHARS.sub('_', t)}_node_usage_total",
                                      "Total resource usage of node, by resource name.", labels=["range"])
                 for t in sorted(ranges)}
        shared = _shared_paths(parts)
        for rm, p in parts:
            prefix = f"{self.rest.partition_name(rm, p)}/"
            label = {path: prefix + path for path in shared}  # a queue's label: its path, unless shared
            for (what, queue, outcome), n in p.records.summary.counts.items():
                key = (what, label.get(queue, queue), outcome)
                counted[key] = counted.get(key, 0) + n
            for app in p.apps.values():
                k = (label.get(app.queue.path, app.queue.path), _state(app.state))
                by_queue_state[k] = by_queue_state.get(k, 0) + 1
            for t in (*p.terminated.values(), *p.rejected.values()):
                k = (label.get(t.queue, t.queue), _state(t.state))
                by_queue_state[k] = by_queue_state.get(k, 0) + 1
            for state, n in p.records.summary.applications.items():
                per_state[_state(state)] = per_state.get(_state(state), 0) + n
            for q in p.queues.values():
                path = label.get(q.path, q.path)
                queues[path] = None
                for state, r in (("guaranteed", q.guaranteed), ("max", q.max if q.parent else p.total),
                                 ("allocated", q.allocated), ("pending", q.pending)):
                    for name, v in sorted(r.items()):
                        queue_res.add_metric([path, name, state], v)
                        if state in ("allocated", "pending"):
                            res_written[(path, name, state)] = None
                queue_res.add_metric([path, "apps", "maxRunningApps"], q.maxapps)
        for rm in self.rest.core.rms.values():  # what partitions that are gone counted: counters never go down
            for name, kept in rm.retired_counts.items():
                for (what, queue, outcome), n in kept.items():
                    key = (what, f"[{rm.id}]{name}/{queue}" if queue in shared else queue, outcome)
                    counted[key] = counted.get(key, 0) + n
        for key in self.written_res:  # fallen to 0, its queue still there
            if key not in res_written and key[0] in queues:
                queue_res.add_metric(list(key), 0)
                res_written[key] = None
        self.written_res = res_written
        for key in self.written_apps:
            if key not in by_queue_state and key[0] in queues:
                by_queue_state[key] = 0
        self.written_apps = dict.fromkeys(by_queue_state)
        for (queue, state), n in sorted(by_queue_state.items()):
            queue_app.add_metric([queue, state], n)
        for state, n in sorted(per_state.items()):
            if state in APP_TOTAL_STATES:
                apps_total.add_metric([state], n)
        accepted = sum(n for (what, _, outcome), n in counted.items() if what == "application" and outcome == "Accepted")
        rejected = sum(n for (what, _, outcome), n in counted.items() if what == "application" and outcome == "Rejected")
        # YuniKorn counts `new` as an application is added to its queue: a rejected one never is
        for result, n in (("new", accepted), ("accepted", accepted), ("rejected", rejected)):
            submissions.add_metric([result], n)
        for outcome in ("allocated", "error", "released"):  # (no allocation fails with an error here)
            attempts.add_metric([outcome], sum(n for (what, _, o), n in counted.items()
                                               if what == "container" and o == outcome))
        for (what, queue, outcome), n in sorted(counted.items()):
            if what == "application" and outcome != "Accepted":
                queue_total.add_metric([queue, _state(outcome)], n)
            elif what == "container":
                name = f"yunikorn_{_NAME_CHARS.sub('_', queue)}_queue_container"
                family = containers.setdefault(name, GoNamedCounter(
                    name, "Queue container metrics. State of the attempt includes `allocated`, `released`.",
                    labels=["state"]))
                family.add_metric([outcome], n)
        nodes.add_metric(["active"], active)
        nodes.add_metric(["failed"], 0)
        for t, counts in ranges.items():
            for label, n in zip(USAGE_RANGES, counts, strict=True):
                usage[t].add_metric([label], n)
        for code, n in sorted(codes.items()):
            pending.add_metric([code], n)
        yield from (queue_app, queue_total, queue_res, apps_total, submissions, attempts, nodes, *usage.values(),
                    *containers.values(), pending, *topology_families(parts, self.rest.partition_name))
        yield from self._service()

    def _service(self) -> Iterator[Metric]:
        figures = self.service()
        applied = CounterMetricFamily("ykbus_entries_applied", "Log entries this process applied.")
        applied.add_metric([], figures["entries"])
        yield applied
        for name, help_text in (("input_lag_entries", "Entries on the input stream not applied yet."),
                                ("last_applied_sequence", "The input log's sequence of the last entry applied."),
                                ("snapshot_age_seconds", "Seconds since the last snapshot was written (or loaded)."),
                                ("allocations_decided", "Allocations decided since the log began.")):
            gauge = GaugeMetricFamily(f"ykbus_{name}", help_text)
            gauge.add_metric([], figures[name])
            yield gauge
        leader = GaugeMetricFamily("ykbus_core_leader", "1 on the leader core process while its lease holds, 0 on "
                                   "a standby or a reader.")
        leader.add_metric([], 1 if figures.get("role") == "leader" else 0)
        yield leader
        present = GaugeMetricFamily("ykbus_leader_present", "1 while some core process leads (this one, or the "
                                    "leader whose lease this one sees renewed), 0 when none does: no decision is "
                                    "published.")
        present.add_metric([], 1 if figures.get("leader_present", figures.get("role") == "leader") else 0)
        yield present
        nats = GaugeMetricFamily("ykbus_nats_connected", "1 while this process is connected to NATS (0: its figures, "
                                 "the input lag among them, are as they were when it lost the connection).")
        nats.add_metric([], 1 if figures.get("nats_connected", True) else 0)
        yield nats
        failed = CounterMetricFamily("ykbus_failed_entries", "Entries whose application raised in this process (each a "
                                     "bug: docs/reliability.md), used up as failed.")
        failed.add_metric([], figures.get("failed_entries", 0))
        yield failed
        rejected = CounterMetricFamily("ykbus_rejections", "Asks, allocations, applications and nodes rejected, per RM, "
                                       "since this process started.", labels=["rm"])
        for rm, n in sorted(figures.get("rejections", {}).items()):
            rejected.add_metric([rm], n)
        yield rejected
        rms = GaugeMetricFamily("ykbus_rm_state", "Each RM's state (1 for the state it is in).", labels=["rm", "state"])
        for rm, state in sorted(figures["rms"].items()):
            rms.add_metric([rm, state], 1)
        yield rms


class Metrics:
    """The registry of one core process: YuniKorn's families, ykbus's, and the process's."""

    def __init__(self, rest: RestState, service: Callable[[], dict[str, Any]]) -> None:
        disable_created_metrics()  # no `_created` series: YuniKorn's exposition has none
        self.registry = CollectorRegistry()
        self.collector = YunikornCollector(rest, service)
        # what the registry holds, in its order: an exposition in slices formats them one family at a time
        self.collectors: list[Any] = [process_collector.ProcessCollector(registry=self.registry),
                                      platform_collector.PlatformCollector(registry=self.registry),
                                      gc_collector.GCCollector(registry=self.registry), self.collector]
        self.registry.register(self.collector)

        def histogram(name: str, help_text: str, labels: tuple[str, ...] = (), buckets: Any = LATENCY_BUCKETS) -> Histogram:
            made = Histogram(name, help_text, labels, registry=self.registry, buckets=buckets)
            self.collectors.append(made)
            return made

        # observed once per entry by the writer: tallies, not prometheus_client's Histogram
        self.entry_s = Tally(LATENCY_BUCKETS)
        self.publish = Tally(PUBLISH_BUCKETS)
        self.collectors.append(tallies := TallyCollector([
            ("yunikorn_scheduler_scheduling_latency_milliseconds", "Latency of the main scheduling routine, in seconds.",
             self.entry_s),
            ("yunikorn_scheduler_scheduling_cycle_milliseconds", "Time taken for a scheduling cycle, in seconds.",
             self.entry_s),
            ("ykbus_output_publish_seconds", "Time to publish one entry's outputs.", self.publish)]))
        self.registry.register(tallies)
        self.node_sorting = histogram("yunikorn_scheduler_node_sorting_latency_milliseconds",
                                      "Latency of all nodes sorting, in seconds.", ("level",))
        for level in ("app", "queue"):  # YuniKorn's levels, present with no observations
            self.node_sorting.labels(level)
        for name, help_text in (("trynode_evaluation", "Time taken to evaluate nodes for a pod, in seconds."),
                                ("trynode_latency", "Latency of node condition checks for container allocations, "
                                                    "such as placement constraints, in seconds."),
                                ("trypreemption_latency", "Latency of preemption condition checks for container "
                                                          "allocations, in seconds.")):
            histogram(f"yunikorn_scheduler_{name}_milliseconds", help_text)

    def applied(self, seconds: float) -> None:
        """One entry applied in `seconds` (the core's pass included)."""
        self.entry_s.observe(seconds)

    def exposition(self) -> bytes:
        """The whole exposition at once."""
        return b"".join(text(family) for collector in self.collectors for family in collector.collect())

    async def scrape(self, between: Callable[[], Awaitable[None]]) -> bytes:
        """The exposition as the HTTP server makes it: each collector's families, formatted
        one family at a time, `between()` awaited before each (on the writer it applies the
        entries that arrived: a whole exposition is about 1 ms of formatting, which once a
        second held every entry that arrived meanwhile; bus/live.py `between_slices`). The
        families of one collector are read together, so each is consistent within itself, as
        in an exposition at once."""
        parts = []
        for collector in self.collectors:
            for family in list(collector.collect()):
                await between()
                parts.append(text(family))
        return b"".join(parts)


class _Families:
    """One family, as `generate_latest` reads a registry."""

    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterator[Metric]:
        yield self.family
