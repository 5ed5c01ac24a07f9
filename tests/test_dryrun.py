"""A dry run of a job against the live state (issue 43, docs/time.md): where it would go now,
or why not, when it would start and what a smaller request would get; nothing written. In
process, from a log file (`ykbus explain --would-fit FILE --log LOG`), and over NATS and
HTTP (tests/integration/test_dryrun_bus.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import Harness
from ykbus.core.dryrun import DryRunError, would_fit
from ykbus.core.snapshot import dump_snapshot
from ykbus.log.build import app, ask, node
from ykbus.log.jsonl import encode_entry

QUEUES = """
partitions:
  - name: default
    topology: {levels: [ykbus.io/rack]}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
          - name: capped
            resources: {max: {gpu: 4}}
"""
MINUTE = 60 * 10**9


class Recording(Harness):
    """A harness that keeps the entries it applied: the log a file replays."""

    def __init__(self) -> None:
        super().__init__()
        self.entries = []

    def do(self, entry):
        self.entries.append(entry)
        return super().do(entry)


def cluster() -> Recording:
    """Two racks of two 8-GPU hosts; 6 GPUs taken on each host of r2 for 10 min, and 4 on r1-1."""
    h = Recording()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/rack": r}, gpu=8) for r in ("r1", "r2") for i in range(2)]))
    h.do(h.log.apps(app("busy", "root.jobs")))
    pinned = [("r2-0", 6), ("r2-1", 6), ("r1-1", 4)]
    h.do(h.log.asks(*[{**ask(f"b-{n}", "busy", gpu=g), "executionTimeoutMilliSeconds": 10 * 60_000,
                       "tags": {"yunikorn.apache.org/requiredNode": n}} for n, g in pinned]))
    return h


def job(members: int, gpus: int, queue: str = "root.jobs", **tags: str) -> dict:
    return {"application": {"applicationID": "try", "queueName": queue, "partitionName": "default",
                            "ugi": {"user": "me"}, "tags": dict(tags)},
            "asks": [{"allocationKey": "w", "applicationID": "try", "resourceAsk": {"resources": {"gpu": {"value": gpus}}},
                      "maxAllocations": members}]}


def test_it_says_where_a_job_would_go_and_changes_nothing():
    h = cluster()
    before = dump_snapshot(h.core)
    answer = would_fit(h.core, job(2, 4, **{"ykbus.io/topology-required": "ykbus.io/rack"}))
    assert answer["fits"] is True
    assert answer["domain"] == {"level": "ykbus.io/rack", "domain": "r1"}  # only r1 holds 2 × 4 GPUs
    assert [p["nodeID"] for p in answer["placement"]] == ["r1-0", "r1-0"]  # first fit: 8 GPUs free there
    assert dump_snapshot(h.core) == before  # a dry run writes nothing


def test_a_job_that_does_not_fit_gets_its_reason_its_estimate_and_what_fits_now():
    h = cluster()
    start = h.log.ts
    answer = would_fit(h.core, job(4, 4, **{"ykbus.io/topology-required": "ykbus.io/rack"}))
    assert answer["fits"] is False
    assert answer["reason"].startswith("no ykbus.io/rack domain has room for 4 × {gpu: 4}")
    # r1 holds 4 × 4 GPUs once r1-1's allocation ends at its 10-minute limit
    assert answer["estimate"]["start"] == start + 10 * MINUTE
    assert answer["estimate"]["text"].startswith("estimated start ")
    assert answer["smaller"]["members"] == 3  # r1: two on r1-0, one on r1-1
    one = would_fit(h.core, job(1, 12))
    assert one["fits"] is False and one["smaller"]["resource"] == {"gpu": 8}  # an empty host's 8 GPUs


def test_a_queue_max_and_bad_requests_are_named():
    h = cluster()
    capped = would_fit(h.core, job(2, 4, "root.capped"))
    assert capped["fits"] is False and capped["reason"].startswith("queue root.capped max gpu")
    bad = [({"application": {"applicationID": "x"}, "asks": [{"allocationKey": "k", "applicationID": "x",
                                                                "maxAllocations": "many"}]}, "asks[0].maxAllocations"),
           ({"asks": []}, "application"),
           (job(1, 1, "root.nope"), "application.queueName"),
           (job(1, 1, "root"), "application.queueName"),
           ({**job(1, 1), "rm": "other"}, "rm"),
           ({"application": job(1, 1)["application"], "asks": [job(1, 1)["asks"][0]] * 1001}, "asks"),
           (job(20_000, 1), "asks[0].maxAllocations")]
    ask = job(1, 1)["asks"][0]
    for key, quantity, field in (("gpu", {"value": -1}, "asks[0].resourceAsk.resources.gpu.value"),  # a key named
                                 ("g" * 1025, {"value": 1}, "asks[0].resourceAsk.resources")):  # (was `[...]`)
        resources = {"resources": {**ask["resourceAsk"]["resources"], key: quantity}}
        bad.append(({**job(1, 1), "asks": [{**ask, "resourceAsk": resources}]}, field))
    for request, field in bad:
        with pytest.raises(DryRunError, match=rf"^{field.replace('[', '.').replace(']', '.')}: "):
            would_fit(h.core, request)
    with pytest.raises(DryRunError, match=r", for the key 'ggg.*characters cut"):
        would_fit(h.core, bad[-1][0])


def test_ykbus_explain_would_fit_from_a_log_file(tmp_path):
    h = cluster()
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(encode_entry(e).rstrip(b"\n") + b"\n" for e in h.entries))
    request = tmp_path / "job.yaml"
    request.write_text(json.dumps(job(4, 4, **{"ykbus.io/topology-required": "ykbus.io/rack"})))
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", "--would-fit", str(request), "--log", str(log)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert "application try (rm rm-1, partition default, queue root.jobs): 4 allocation(s), {gpu: 16} in all" in text
    assert "would not fit now: no ykbus.io/rack domain has room for 4 × {gpu: 4}" in text
    assert "estimated start 2023-11-14 22:24 UTC, in 10 min, when 1 allocation on node r1-1 ends" in text
    assert "smaller: 3 of the 4 allocations would fit now" in text
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", "--would-fit", str(request), "--log", str(log),
                          "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(run.stdout)["smaller"]["members"] == 3
    request.write_text("application: {applicationID: x}\nasks: [{allocationKey: k, applicationID: x, maxAllocations: -1}]\n")
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", "--would-fit", str(request), "--log", str(log)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "asks[0].maxAllocations" in run.stderr
    request.write_text(json.dumps(job(1, 1)) + "\n---\n" + json.dumps(job(1, 2)))  # two jobs in one file
    for path, said in ((request, "more than one YAML document (a `---` line): a dry run asks about one job, one "
                                 "document"), (tmp_path / "nope.yaml", "No such file or directory")):
        run = subprocess.run([sys.executable, "-m", "ykbus.cli", "explain", "--would-fit", str(path), "--log",
                              str(log)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stderr.strip() == f"ykbus explain --would-fit: {path}: {said}"


def _dry_run_beside_an_rm(reads_first: bool) -> tuple[dict, list[int], Harness]:
    """A dry run on the live core (`would_fit_live`) looking for the largest shape that fits
    on 5,000 nodes, while an RM's entries (nodes leaving) are applied whenever the writer
    gets a turn: the answer, the entries applied before it came, the harness."""
    import anyio

    from ykbus.bus.live import LiveCore
    from ykbus.bus.readapi import would_fit_live
    from ykbus.core.guard import GuardedCore

    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"h{i:04d}", gpu=8) for i in range(5000)]))
    applied: list[int] = []

    async def main() -> dict:
        answer: dict = {}

        async def dry_run() -> None:
            answer.update(await would_fit_live(live, job(1, 16)))

        async def rm() -> None:  # an RM's entries, applied as the writer applies them whenever it gets a turn
            while True:
                await anyio.sleep(0)
                if answer:
                    return
                h.do(h.log.nodes(node(f"h{4999 - len(applied):04d}", action="DECOMISSION")))
                applied.append(len(applied))

        async with anyio.create_task_group() as tg:
            tg.start_soon(dry_run)
            tg.start_soon(rm)
        return answer["wouldfit"]

    live = LiveCore(GuardedCore(h.core, lambda _data: h.core), reads_first=reads_first)
    return anyio.run(main), applied, h


def test_on_the_live_core_the_writer_applies_entries_between_the_dry_runs_slices():
    """On the writer the dry run runs in slices: the largest shape that fits is looked for on
    5,000 nodes, 2,000 at a time, and an RM's entries are applied meanwhile, not held until
    it ends; nodes removed between two slices break nothing, and the answer says how many
    entries came between its slices."""
    answer, applied, h = _dry_run_beside_an_rm(reads_first=False)
    assert applied, "the writer waited for the dry run"
    assert answer["entriesBetween"] == len(applied) > 0
    assert answer["fits"] is False and answer["members"] == 1
    assert answer["smaller"]["text"] == "{gpu: 8} would fit now, on node h0000"
    assert len(h.core.rms["rm-1"].partitions["default"].nodes) == 5000 - len(applied)


def test_in_a_reader_a_dry_run_is_answered_at_once_on_one_state():
    """A reader (`ykbus core --reader`) answers reads and nobody waits for its entries: the
    dry run is not sliced, the entries that arrived wait for it, and the whole answer is of
    the state at `lastSeq`."""
    answer, applied, h = _dry_run_beside_an_rm(reads_first=True)
    assert answer["entriesBetween"] == 0 and answer["lastSeq"] == h.core.last_seq - len(applied)
    assert answer["smaller"]["text"] == "{gpu: 8} would fit now, on node h0000"


def test_the_readmes_example_job_gets_an_estimate_on_the_batch_demos_cluster():
    """README, "The first hour": `ykbus explain --would-fit examples/would-fit.yaml --rm batch`
    asks "would this job fit now? if not, when?" of `ykbus up`'s batch RM. On its cluster
    (10 hosts of 32 cores) kept full by etl containers with their 20 s limit, and a host
    reserved for an ask waiting past the reservation delay (the demo's backlog), the answer
    has a when."""
    from pathlib import Path

    from ykbus.sim.batch import BatchWorkload
    from ykbus.yamlload import load_yaml

    demo = BatchWorkload()
    h = Harness()
    h.setup(demo.queues_yaml())
    h.do(h.log.nodes(*[node(n.nodeID, vcore=demo.node_vcore, memory=demo.node_memory)
                       for n in demo.nodes("batch")]))
    h.do(h.log.apps(app("etl-1", "root.etl"), app("etl-2", "root.etl")))
    full = demo.nodes_count * demo.node_vcore // 1000
    h.do(h.log.asks({**ask("c", "etl-1", max_allocations=full, vcore=1000, memory=2 * 2**30),
                     "executionTimeoutMilliSeconds": 20_000}))
    h.do(h.log.asks({**ask("c", "etl-2", vcore=4000, memory=2**30), "executionTimeoutMilliSeconds": 20_000}))
    for _ in range(8):  # past the reservation delay: etl-2's ask reserves a host
        h.do(h.log.tick())
    assert sum(1 for n in h.core.rms["rm-1"].partitions["default"].nodes.values() if n.reserved) == 1

    example = load_yaml((Path(__file__).parent.parent / "examples" / "would-fit.yaml").read_text())
    answer = would_fit(h.core, example)
    assert answer["fits"] is False
    assert answer["estimate"]["text"].startswith("estimated start "), answer["estimate"]["text"]


def test_a_job_the_core_would_reject_is_answered_so_not_as_a_fit():
    """The dry run runs the core's own checks of an application's and its asks' tags and of
    a gang against its queue (core/intake.py): a job the core would refuse on submission is
    not told it would fit."""
    h = cluster()
    assert would_fit(h.core, job(1, 1, **{"ykbus.io/topology-required": "ykbus.io/rack"}))["fits"] is True
    refused = [({"ykbus.io/topology-required": "ykbus.io/rack", "ykbus.io/topology-preferred": "ykbus.io/rack"},
                "application.tags: the core would reject the application: tags ykbus.io/topology-required and "
                "ykbus.io/topology-preferred: only one of them may be set"),
               ({"ykbus.io/topology-required": "ykbus.io/zone"},
                "application.tags: the core would reject the application: tag ykbus.io/topology-required: "
                "'ykbus.io/zone' is not a topology level of the partition (its levels are ykbus.io/rack)"),
               ({"ykbus.io/node-policy": "Binpak"}, "application.tags: the core would reject the application: "
                "tag ykbus.io/node-policy: unknown node policy 'Binpak'")]
    for tags, said in refused:
        with pytest.raises(DryRunError) as caught:
            would_fit(h.core, job(1, 1, **tags))
        assert str(caught.value).startswith(said)
    gang = job(1, 1)
    gang["application"]["placeholderAsk"] = {"resources": {"gpu": {"value": 8}}}
    gang["application"]["queueName"] = "root.capped"
    with pytest.raises(DryRunError, match=r"^application.placeholderAsk: the core would reject the application: "
                                          r"placeholderAsk gpu 8 exceeds queue root.capped max 4"):
        would_fit(h.core, gang)
    other = job(1, 1)
    other["asks"][0]["applicationID"] = "other"
    with pytest.raises(DryRunError, match=r"^asks.0..applicationID: 'other', while the application is 'try'"):
        would_fit(h.core, other)


def test_a_misspelt_field_is_named_not_ignored():
    """A dry run is written by hand: a field its messages do not have changes the question
    (`maxAllocation: 8` asked one allocation), so it is an error naming the field."""
    h = cluster()
    typo = job(8, 1)
    typo["asks"][0]["maxAllocation"] = typo["asks"][0].pop("maxAllocations")
    for request, said in ((typo, "asks[0].maxAllocation: unknown field (did you mean maxAllocations?)"),
                          ({"application": {**job(1, 1)["application"], "queueNme": "root.jobs"}, "asks": []},
                           "application.queueNme: unknown field (did you mean queueName?)"),
                          ({"application": job(1, 1)["application"], "ask": job(1, 1)["asks"]},
                           "ask: unknown field (did you mean asks?)")):
        with pytest.raises(DryRunError) as caught:
            would_fit(h.core, request)
        assert str(caught.value) == said


def test_an_ask_may_leave_out_the_application_the_request_names():
    """Regression: an ask without `applicationID` was refused ("Object missing required field
    `applicationID`") though the request's application names it and the error for another
    one says "leave it out, or the same"."""
    h = cluster()
    request = job(2, 1)
    named = would_fit(h.core, request)
    for each in request["asks"]:
        del each["applicationID"]
    assert would_fit(h.core, request) == named


def test_a_job_no_domain_holds_even_empty_is_told_so_without_runtime_limits():
    """Where no allocation has a runtime limit there is no start to estimate; a job that no
    rack holds even empty is told it never fits as asked, not that limits are missing."""
    h = Recording()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/rack": r}, gpu=8) for r in ("r1", "r2") for i in range(2)],
                     node("loose", gpu=8)))
    h.do(h.log.apps(app("busy", "root.jobs")))
    h.do(h.log.asks(*[{**ask(f"b-{n}", "busy", gpu=8), "tags": {"yunikorn.apache.org/requiredNode": n}}
                      for n in ("r1-0", "r2-0")]))  # no limit: each holds a whole host of a rack for good
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
    never = would_fit(h.core, job(3, 8, **rack))  # a rack holds 2 hosts of 8
    assert never["fits"] is False
    assert never["estimate"]["text"] == ("no estimate: it does not fit the candidate nodes even when they are empty "
                                         "(3 × {gpu: 8})")
    later = would_fit(h.core, job(2, 8, **rack))  # a rack would hold it, but nothing has a limit to end by
    assert later["estimate"]["text"] == "no estimate: no allocation on the nodes it could use has a runtime limit"
    whole = would_fit(h.core, job(1, 16, **rack))
    assert whole["smaller"]["resource"] == {"gpu": 8} and whole["smaller"]["nodeID"] != "loose"


def test_a_job_of_an_application_that_exists_or_with_a_key_given_twice_is_refused_as_the_core_would():
    """The dry run said "would fit" of an application id the core would refuse ("already
    exists"), and counted two allocations for two asks of one key, where the core takes the
    second as a new request for the first."""
    h = cluster()
    existing = job(1, 1)
    existing["application"]["applicationID"] = "busy"
    for a in existing["asks"]:
        a["applicationID"] = "busy"
    with pytest.raises(DryRunError, match=r"^application.applicationID: the core would reject the application: "
                                          r"application busy already exists"):
        would_fit(h.core, existing)
    twice = job(1, 1)
    twice["asks"].append(dict(twice["asks"][0]))
    with pytest.raises(DryRunError, match=r"^asks\[1\].allocationKey: 'w' is the key of asks\[0\] too"):
        would_fit(h.core, twice)


def test_with_every_node_reserved_the_estimate_says_there_is_no_node_to_start_on():
    """It said "no allocation on the nodes it could use has a runtime limit" though every
    allocation had one: the only node was reserved for a waiting ask."""
    h = Recording()
    h.setup(QUEUES)
    h.do(h.log.nodes(node("n1", gpu=8)))
    h.do(h.log.apps(app("busy", "root.jobs"), app("big", "root.jobs")))
    h.do(h.log.asks({**ask("b", "busy", gpu=4), "executionTimeoutMilliSeconds": 10 * 60_000}))
    h.do(h.log.asks(ask("g", "big", gpu=8)))
    h.do(h.log.tick(3 * 10**9))  # past the reservation delay: big reserves n1
    assert h.core.registry.rms["rm-1"].partitions["default"].nodes["n1"].reserved is not None
    answer = would_fit(h.core, job(1, 6))
    assert answer["fits"] is False
    assert answer["estimate"]["text"] == ("no estimate: no candidate node (every schedulable node is reserved for "
                                          "another ask or by a gang)")


def test_an_asks_own_topology_tag_is_judged_as_the_core_judges_it():
    """Regression (an outside review): the dry run read only the application's tags. A gang
    whose task group asked for one rack was said to fit, split over two racks, and once
    submitted it waited. Each task group with its own tag goes into a domain of its own, as
    the core places it; the answer names each group's domain."""
    h = cluster()  # free GPUs: r1-0 8, r1-1 4; r2-0 2, r2-1 2
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}

    def gang(groups: dict[str, tuple[int, int, dict[str, str]]]) -> dict:
        total = sum(n * g for n, g, _ in groups.values())
        return {"application": {"applicationID": "try", "queueName": "root.jobs", "partitionName": "default",
                                "ugi": {"user": "me"}, "placeholderAsk": {"resources": {"gpu": {"value": total}}}},
                "asks": [{"allocationKey": f"ph-{g}", "applicationID": "try", "taskGroupName": g, "placeholder": True,
                          "resourceAsk": {"resources": {"gpu": {"value": gpus}}}, "maxAllocations": n, "tags": tags}
                         for g, (n, gpus, tags) in groups.items()]}

    # 8 × 2 GPUs fit the cluster (6 in r1, 2 in r2) but no one rack
    answer = would_fit(h.core, gang({"workers": (8, 2, rack)}))
    assert answer["fits"] is False, answer
    assert answer["reason"].startswith("task group workers: no ykbus.io/rack domain has room for 8 × {gpu: 2}")
    # submitted, the core says the same
    h.do(h.log.apps(app("try", "root.jobs", placeholderAsk={"resources": {"gpu": {"value": 16}}})))
    h.do(h.log.asks(*gang({"workers": (8, 2, rack)})["asks"]))
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["try"]["asks"]["ph-workers"]["why"]
    assert why["message"] == answer["reason"]

    h = cluster()
    # two roles, each in a rack of its own: 2 × 2 in r2 (2 GPUs free on each host), 3 × 4 in r1
    answer = would_fit(h.core, gang({"ps": (2, 2, rack), "workers": (3, 4, rack)}))
    assert answer["fits"] is True, answer
    assert answer["domains"] == [{"taskGroup": "ps", "level": "ykbus.io/rack", "domain": "r2"},
                                 {"taskGroup": "workers", "level": "ykbus.io/rack", "domain": "r1"}]
    racks = {p["allocationKey"]: {p["nodeID"][:2]} for p in answer["placement"]}
    assert racks == {"ph-ps": {"r2"}, "ph-workers": {"r1"}}
    h.do(h.log.apps(app("try", "root.jobs", placeholderAsk={"resources": {"gpu": {"value": 16}}})))
    outs = h.do(h.log.asks(*gang({"ps": (2, 2, rack), "workers": (3, 4, rack)})["asks"]))
    placed = sorted((a.allocationKey, a.nodeID) for o in outs if o.kind == "alloc" for a in o.msg.new)
    assert placed == sorted((p["allocationKey"], p["nodeID"]) for p in answer["placement"])


def test_explain_says_each_groups_domain(tmp_path):
    from ykbus.core.dryrun import lines

    h = cluster()
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
    request = {"application": {"applicationID": "try", "queueName": "root.jobs", "ugi": {"user": "me"}},
               "asks": [{"allocationKey": k, "applicationID": "try", "maxAllocations": n, "tags": rack,
                         "resourceAsk": {"resources": {"gpu": {"value": g}}}} for k, n, g in [("a", 2, 2), ("b", 3, 4)]]}
    # an application without placeholders: its asks of one request are one set, in one rack: none holds it
    assert lines(would_fit(h.core, request))[1].startswith(
        "  would not fit now: no ykbus.io/rack domain has room for 2 × {gpu: 2} + 3 × {gpu: 4}")
    for a in request["asks"]:  # a gang: each task group with its own tag in a rack of its own
        a.update(placeholder=True, taskGroupName=f"role-{a['allocationKey']}")
    said = lines(would_fit(h.core, request))
    assert said[1] == ("  would fit now, task group role-a in ykbus.io/rack r2, task group role-b in ykbus.io/rack r1: "
                       "on r2-0, r2-1, r1-0 (2), r1-1"), said


def test_asks_of_one_request_are_one_set_whether_their_tag_is_their_own_or_their_applications():
    """Regression (a review of the fix above): an application tagged for a rack, one ask
    with the same tag of its own and one without: the core places them as one set (the
    same request, sent together: core/gang.py `plan_sets`), in one rack; the dry run made
    two groups, each in a rack, and said it fits where the core waits."""
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
    h = cluster()  # free GPUs: r1-0 8, r1-1 4; r2-0 2, r2-1 2
    asks = [{"allocationKey": "k1", "applicationID": "try", "maxAllocations": 2, "tags": rack,
             "resourceAsk": {"resources": {"gpu": {"value": 2}}}},
            {"allocationKey": "k2", "applicationID": "try", "maxAllocations": 3,
             "resourceAsk": {"resources": {"gpu": {"value": 4}}}}]
    answer = would_fit(h.core, {"application": {"applicationID": "try", "queueName": "root.jobs",
                                                "ugi": {"user": "me"}, "tags": rack}, "asks": asks})
    h.do(h.log.apps(app("try", "root.jobs", tags=rack)))
    outs = h.do(h.log.asks(*asks))
    placed = [a for o in outs if o.kind == "alloc" for a in o.msg.new]
    assert answer["fits"] is bool(placed) is False, (answer, placed)
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["try"]["asks"]["k1"]["why"]
    assert answer["reason"] == why["message"]


def test_a_gang_whose_task_groups_each_ask_for_a_rack_is_estimated_group_by_group():
    """Review: a gang of two task groups, each to be placed in a rack of its own (4 and 1
    whole nodes, racks of 4), on a full cluster whose allocations end in 10 min, was told "no
    estimate: it does not fit the candidate nodes even when they are empty": its 5 members
    were judged as if in one rack. By the dry run and by the read of its waiting members."""
    h = Recording()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/rack": r}, gpu=8) for r in ("r1", "r2") for i in range(4)]))
    h.do(h.log.apps(app("busy", "root.jobs")))
    h.do(h.log.asks(*[{**ask(f"b-{r}-{i}", "busy", gpu=8), "executionTimeoutMilliSeconds": 10 * 60_000,
                       "tags": {"yunikorn.apache.org/requiredNode": f"{r}-{i}"}} for r in ("r1", "r2") for i in range(4)]))
    started = h.log.ts
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
    gang = {"applicationID": "pd", "queueName": "root.jobs", "partitionName": "default", "ugi": {"user": "me"},
            "tags": rack, "placeholderAsk": {"resources": {"gpu": {"value": 40}}}}
    asks = [{**ask("decode", "pd", max_allocations=4, gpu=8), "taskGroupName": "decode", "placeholder": True},
            {**ask("prefill", "pd", gpu=8), "taskGroupName": "prefill", "placeholder": True, "tags": rack}]
    answer = would_fit(h.core, {"application": gang, "asks": asks})
    assert answer["fits"] is False and answer["estimate"].get("start") == started + 10 * MINUTE, answer["estimate"]
    h.do(h.log.apps(gang))
    h.do(h.log.asks(*asks))
    why = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]["pd"]["asks"]["decode"]["why"]
    assert why["code"] == "TopologyNoDomain" and why["details"]["estimatedStart"] == started + 10 * MINUTE, why
