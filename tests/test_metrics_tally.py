"""The writer's histograms (rest/metrics.py `Tally`) expose what prometheus_client's own
Histogram exposes for the same observations: the same buckets, counts and sum."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from ykbus.rest.metrics import LATENCY_BUCKETS, Tally, TallyCollector

VALUES = [0.0, 0.0001, 0.00011, 0.001, 0.5, 1, 1.0000001, 10, 99.9, 100, 1000, 10000, 10000.5, 123456.0]


def exposition(observe_into) -> str:
    registry = CollectorRegistry()
    observe_into(registry)
    return "\n".join(line for line in generate_latest(registry).decode().splitlines()
                     if "_created" not in line)


def test_a_tally_exposes_what_prometheus_clients_histogram_does():
    def with_library(registry):
        h = Histogram("x_milliseconds", "help", registry=registry, buckets=LATENCY_BUCKETS)
        for v in VALUES:
            h.observe(v)

    def with_tally(registry):
        t = Tally(LATENCY_BUCKETS)
        for v in VALUES:
            t.observe(v)
        registry.register(TallyCollector([("x_milliseconds", "help", t)]))

    ours = exposition(with_tally)
    assert 'x_milliseconds_bucket{le="1.0"} 6.0' in ours  # a value on a bound counts in that bucket
    assert ours == exposition(with_library)
