"""Every `ykbus bench` subcommand, tiny, checking the shape of its JSON output (never speed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

NUMBER = (int, float)


def bench(*args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "ykbus.cli", "bench", *args, "--json"], capture_output=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"machine:" in proc.stderr  # the table went to stderr
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def has(row: dict, **types: type | tuple[type, ...]) -> None:
    for key, t in types.items():
        assert isinstance(row.get(key), t), f"{key} missing or not {t}: {row}"


def test_core_yunikorn_perf_one_row_per_node_count_and_sort():
    rows = bench("core", "--workload", "yunikorn-perf", "--nodes", "10,20", "--node-sort", "fair,binpacking",
                 "--asks-per-app", "50", "--repeat", "2")
    assert [(r["nodes"], r["node_sort"]) for r in rows] == [(10, "fair"), (20, "fair"), (10, "binpacking"),
                                                           (20, "binpacking")]
    for r in rows:
        assert r["workload"] == "yunikorn-perf" and r["allocations"] == 100
        has(r, seconds=NUMBER, allocations_per_s=NUMBER, min=NUMBER, max=NUMBER, peak_rss_mib=NUMBER)
        assert r["min"] <= r["allocations_per_s"] <= r["max"]


def test_core_mixed():
    (r,) = bench("core", "--workload", "mixed", "--scale", "0.01", "--repeat", "1")
    assert r["workload"] == "mixed" and r["allocations"] > 0
    has(r, allocations_per_s=NUMBER, entry_p50_ms=NUMBER, entry_p99_ms=NUMBER, entries=int)


def test_core_policies_one_row_per_policy_and_yunikorn_perf_beside():
    rows = bench("core", "--workload", "policies", "--scale", "0.01", "--repeat", "1")
    assert [r["policy"] for r in rows] == ["default", "BinPack", "LeaderFirst", "MinFragment", "JobAffinity",
                                           "JobAntiAffinity", "yunikorn-perf (fair)"]
    for r in rows:
        assert r["nodes"] == 50 and r["pods"] > 0
        has(r, pods_per_s=NUMBER, seconds=NUMBER, min=NUMBER, max=NUMBER)


def test_replay():
    (r,) = bench("replay", "--entries", "3000", "--repeat", "1")
    assert r["entries"] >= 3000
    has(r, entries_per_s=NUMBER, seconds=NUMBER)


def test_replay_of_a_recorded_log_counts_its_entries_and_outputs_as_ykbus_replay_makes_them():
    from pathlib import Path

    trace = Path(__file__).parent / "traces" / "gangs.in.jsonl"
    (r,) = bench("replay", "--log", str(trace), "--repeat", "1")
    recorded = (Path(__file__).parent / "traces" / "gangs.out.jsonl").read_text().splitlines()
    assert r["log"] == str(trace) and r["entries"] == len(trace.read_text().splitlines())
    assert r["outputs"] == len(recorded)  # the same outputs `ykbus replay` writes
    has(r, entries_per_s=NUMBER, seconds=NUMBER)


def test_core_backlog_one_row_per_backlog_size_each_backlog_really_waiting():
    rows = bench("core", "--workload", "backlog", "--nodes", "50", "--pending", "40,400", "--entries", "20",
                 "--repeat", "1")
    assert [r["pending"] for r in rows] == [40, 400]  # every ask of the backlog waits, none was placed
    assert all(r["allocations"] == 100 for r in rows)  # 10 entries of 10 new pods, each placed in the freed room
    for r in rows:
        has(r, entries_per_s=NUMBER, entry_p99_ms=NUMBER)



def test_core_preemption_finds_victims_and_places_the_burst_on_the_confirmation():
    (r,) = bench("core", "--workload", "preemption", "--scale", "0.01", "--repeat", "1")
    assert r["workload"] == "preemption" and r["nodes"] == 50 and r["allocations"] == 1000 and r["burst"] == 10
    assert r["preemptions"] > 0 and r["placed"] == r["preemptions"]  # each ask of the burst took one victim's place
    has(r, search_p50_ms=NUMBER, search_p99_ms=NUMBER, search_max_ms=NUMBER, victims_per_s=NUMBER,
        seconds=NUMBER, confirm_seconds=NUMBER, core=str)
    assert r["search_p50_ms"] <= r["search_p99_ms"] <= r["search_max_ms"]

def test_core_topology_places_gangs_in_one_rack_more_often_than_topology_ignored():
    (r,) = bench("core", "--workload", "topology", "--scale", "0.02", "--repeat", "1")
    assert r["workload"] == "topology" and r["nodes"] == 500 and r["racks"] == 20 and r["gangs"] > 0
    has(r, placement_p99_ms=NUMBER, gangs_per_s=NUMBER, racks_wholly_free=int, ignored_racks_wholly_free=int)
    # every required gang is in one domain; preferred ones land in one rack far more often with it
    assert r["preferred_in_one_rack"] > r["ignored_preferred_in_one_rack"]


def test_core_gang_reserve_starts_gangs_that_starve_without_it():
    (r,) = bench("core", "--workload", "gang-reserve", "--scale", "0.1", "--repeat", "1")
    assert r["workload"] == "gang-reserve" and r["nodes"] == 50 and r["gangs"] == 8
    assert r["gangs_placed"] > 0 and r["without_gangs_placed"] == 0, r  # the small pods' stream starves them
    assert 0 < r["small_placed"] <= r["without_small_placed"] and r["entries_per_s"] > 0


def test_core_backfill_with_backfill_and_reservations_alone_side_by_side():
    (r,) = bench("core", "--workload", "backfill", "--scale", "0.025", "--repeat", "1")
    assert r["workload"] == "backfill" and r["nodes"] == 25 and r["racks"] == 1 and r["gangs"] > 0 and r["small"] > 0
    has(r, utilization=NUMBER, without_utilization=NUMBER, gang_wait_p50_min=NUMBER, gang_wait_p95_min=NUMBER,
        without_gang_wait_p50_min=NUMBER, without_gang_wait_p95_min=NUMBER, gangs_placed=int,
        without_gangs_placed=int, small_placed=int, without_small_placed=int, estimate_error_p50_min=NUMBER,
        estimate_error_p95_min=NUMBER, later_than_estimated=int, entry_p99_ms=NUMBER)
    assert r["domain_reservations"] > 0 and r["without_domain_reservations"] > 0  # the gangs reserve their rack
    assert r["backfilled"] > 0 and r["without_backfilled"] == 0  # only asks with a limit backfill
    assert r["estimates"] > 0 and r["estimate_error_p50_min"] <= r["estimate_error_p95_min"]
    assert r["gang_wait_p50_min"] <= r["gang_wait_p95_min"]
    assert r["utilization"] >= r["without_utilization"]


def test_restart():
    (r,) = bench("restart", "--nodes", "20", "--allocations", "500", "--tail", "5", "--repeat", "1")
    assert r["allocations"] == 500 and r["snapshot_bytes"] > 0
    has(r, seconds=NUMBER, load_seconds=NUMBER)


def test_memory():
    (r,) = bench("memory", "--nodes", "50", "--asks", "500", "--ended", "300")
    has(r, bytes_per_node=int, bytes_per_pending_ask=int, bytes_per_ended_application=int)
    assert r["bytes_per_node"] > 0 and r["bytes_per_pending_ask"] > 0 and r["bytes_per_ended_application"] > 0


def test_e2e():
    (r,) = bench("e2e", "--seconds", "0.5", "--nodes", "10", "--batch", "50", "--repeat", "1")
    has(r, sustained_allocations_per_s=NUMBER, latency_p50_ms=NUMBER, latency_p99_ms=NUMBER, allocations=NUMBER)
    assert r["allocations"] > 0


def test_e2e_with_dry_runs_times_each_answer_while_the_core_works():
    (r,) = bench("e2e", "--seconds", "1", "--nodes", "10", "--batch", "50", "--repeat", "1", "--dry-run", "0.2")
    assert r["dry_runs"] >= 3, r  # answered (status 200), one every 0.2 s through both phases
    assert 0 < r["dry_run_p50_ms"] <= r["dry_run_p99_ms"] <= r["dry_run_max_ms"]


def test_e2e_with_churn_and_limits_keeps_the_state_at_its_size_and_times_each_dry_run_job():
    """`--live N`: the RM releases its oldest allocations beyond N; `--limit-ms`: every ask
    has a runtime limit, so a dry run of a whole node gets an estimate to compute."""
    (r,) = bench("e2e", "--seconds", "1", "--nodes", "10", "--batch", "50", "--repeat", "1", "--dry-run", "0.1",
                 "--live", "200", "--limit-ms", "3600000")
    assert r["live"] == 200 and r["limit_ms"] == 3600000
    assert r["allocations"] > 400, r  # more than twice the live size went through
    for job in ("fits", "too_large", "whole_node"):
        assert r[f"dry_run_{job}_max_ms"] is not None and r[f"dry_run_{job}_max_ms"] > 0, r


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a CPU for the reader and one for the rest")
def test_e2e_with_a_reader_on_a_cpu_of_its_own_times_the_dry_runs_it_answers():
    """`--reader --reader-cpu N`: the reader alone on CPU N answers the dry runs (as a
    deployment gives a reader a core of its own); every answer timed, in order."""
    cpu = max(os.sched_getaffinity(0))
    (r,) = bench("e2e", "--seconds", "1", "--nodes", "10", "--batch", "50", "--repeat", "1", "--dry-run", "0.2",
                 "--reader", "--reader-cpu", str(cpu))
    assert r["reader"] is True and r["reader_cpu"] == cpu
    assert r["dry_runs"] >= 3 and len(r["dry_run_ms"]) == r["dry_runs"] and r["dry_run_ms"] == sorted(r["dry_run_ms"])
    proc = subprocess.run([sys.executable, "-m", "ykbus.cli", "bench", "e2e", "--reader-cpu", str(cpu)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"--reader-cpu {cpu}: only with --reader" in proc.stderr


def test_e2e_polled_fetches_what_a_dashboard_polls_from_the_core_while_it_works():
    (r,) = bench("e2e", "--seconds", "1", "--nodes", "10", "--batch", "50", "--repeat", "1", "--poll", "0.2")
    assert r["allocations"] > 0
    assert r["polls"] >= 3 and r["polled_bytes"] > r["polls"] * 1000  # every route, every time (a scrape alone is KBs)


def test_shards_one_row_per_shard_count_every_ask_placed_once():
    rows = bench("shards", "--nodes", "400", "--allocations", "4000", "--rms", "4", "--shards", "1,2,4")
    assert [r["shards"] for r in rows] == [1, 2, 4]
    for r in rows:
        assert r["allocations"] == 4000  # every ask of every RM, placed by exactly one shard
        assert len(r["per_shard_cpu_s"].split(" / ")) == r["shards"]
        has(r, slowest_shard_cpu_s=NUMBER, allocations_per_s=NUMBER, largest_state_mib=NUMBER, entries=int)
