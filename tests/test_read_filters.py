"""The read API's filters (docs/protocol.md, "Read API"): what a read asks for is applied by
the core before it builds anything, and a list of every application can be asked as rows
(`brief`), as `ykbus apps` and `ykbus explain` ask for it."""

from __future__ import annotations

import pytest

from tests.conftest import Harness
from ykbus.bus.readapi import read
from ykbus.core.projection import _applications, _why
from ykbus.log.build import app, ask, node

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            queues: [{name: x}, {name: y}]
          - name: b
"""


def cluster() -> Harness:
    h = Harness()
    h.setup(QUEUES)
    h.do(h.log.nodes(*[node(f"n{i}", vcore=2000) for i in range(4)]))
    h.do(h.log.apps(app("ax", "root.a.x"), app("ay", "root.a.y"), app("b1", "root.b"), app("gone", "root.b")))
    h.do(h.log.asks(ask("k", "ax", vcore=1000, max_allocations=3), ask("k", "ay", vcore=3000),
                    ask("k", "b1", vcore=1500, max_allocations=9)))
    h.do(h.log.remove_apps("gone"))
    return h


def apps_of(answer: dict, verb: str = "applications") -> dict:
    return answer[verb]["rm-1"]["default"]


def test_an_empty_filter_filters_nothing():
    """`?rm=` (an HTTP query's empty value) asks for every RM, as before the filters moved into
    the core; likewise an empty partition, application, queue or state."""
    h = cluster()
    everything = read(h.core, {}, "applications", {})
    for field in ("rm", "partition", "app", "queue", "state"):
        assert read(h.core, {}, "applications", {field: ""}) == everything, field


def test_one_application_asked_briefly_is_that_one_alone():
    """Regression (a review of this change): `brief` answered every application, `app` aside."""
    h = cluster()
    assert list(apps_of(read(h.core, {}, "applications", {"app": "ax", "brief": True}))) == ["ax"]
    assert apps_of(read(h.core, {}, "applications", {"app": "nope", "brief": True})) == {}


def test_a_queue_and_a_state_filter_applications_live_and_ended():
    h = cluster()
    assert sorted(apps_of(read(h.core, {}, "applications", {"queue": "root.a"}))) == ["ax", "ay"]
    assert sorted(apps_of(read(h.core, {}, "applications", {"queue": "a.x"}))) == ["ax"]  # from root, any case
    running = apps_of(read(h.core, {}, "applications", {"state": "running"}))
    assert sorted(running) == ["ax", "b1"] and all(a["state"] == "Running" for a in running.values())
    assert sorted(apps_of(read(h.core, {}, "terminated", {"state": "Completed"}), "terminated")) == ["gone"]
    assert apps_of(read(h.core, {}, "terminated", {"queue": "root.a"}), "terminated") == {}
    assert read(h.core, {}, "applications", {"rm": "nobody"}) == {"applications": {}}
    assert read(h.core, {}, "applications", {"partition": "other"}) == {"applications": {}}


def test_brief_rows_count_pending_asks_by_reason_and_name_the_applications_reason():
    h = cluster()
    full = apps_of(read(h.core, {}, "applications", {}))
    brief = apps_of(read(h.core, {}, "applications", {"brief": True}))
    assert apps_of(read(h.core, {}, "applications", {"brief": "true"})) == brief  # as an HTTP query gives it
    assert sorted(brief) == sorted(full)
    for app_id, row in brief.items():
        a = full[app_id]
        assert "asks" not in row and row["allocations"] == len(a["allocations"])
        codes: dict[str, int] = {}
        for k in a["asks"].values():
            if k["why"]:
                codes[k["why"]["code"]] = codes.get(k["why"]["code"], 0) + k["pending"]
        assert row["waiting"] == codes
        assert (row["why"] or {}).get("code") == (a["why"] or {}).get("code")
        assert {k: row[k] for k in ("queue", "state", "user", "allocated", "pending", "maxPriority")} == \
            {k: a[k] for k in ("queue", "state", "user", "allocated", "pending", "maxPriority")}
    assert brief["b1"]["waiting"] == {"NoNodeRoom": 7}


@pytest.mark.parametrize("request_, field", [
    ({"state": "Sleeping"}, "state: 'Sleeping' is not an application state (New, Accepted"),
    ({"brief": "yes"}, "brief: expected true or false, got 'yes'"),
    ({"queue": 3}, "queue: expected a string"),
])
def test_a_bad_filter_is_refused_naming_the_field(request_, field):
    with pytest.raises(ValueError, match=field.replace("(", r"\(")):
        read(cluster().core, {}, "applications", request_)


def test_the_node_figures_read_once_per_shape_are_those_of_each_ask():
    """`_room_figures` reads the nodes once per shape in a projection: what each ask's reason
    says is what a walk of the nodes for that ask alone says: with asks of one shape that
    reserve nodes and others that do not, and asks of a gang that reserved a rack beside
    asks of its shape that did not."""
    from tests.core.test_topology_gangs import RACK, gang_job
    from tests.core.test_topology_gangs import cluster as racks

    h = cluster()
    p = h.core.registry.rms["rm-1"].partitions["default"]
    h.do(h.log.apps(app("more", "root.b")))
    h.do(h.log.asks(ask("k2", "more", vcore=1500, max_allocations=2), ask("k3", "more", vcore=5000)))
    h.do(h.log.tick(3_000_000_000))  # past the reservation delay: some asks of a shape reserve nodes
    h.do(h.log.tick())
    assert any(n.reserved is not None for n in p.nodes.values())
    t = racks({"r1": ("b1", 2, 0), "r2": ("b1", 2, 0)})
    t.do(t.log.apps(app("busy", "root.jobs")))
    t.do(t.log.asks(ask("b", "busy", gpu=2, vcore=1000, max_allocations=3)))
    gang_job(t, "g", 4, 2, {"ykbus.io/topology-required": RACK})  # 8 GPUs in a rack: none now
    t.do(t.log.apps(app("other", "root.jobs")))
    t.do(t.log.asks({**ask("ph", "other", gpu=2, vcore=1000, max_allocations=4)}))  # the gang's shape, no hold
    t.do(t.log.tick(3_000_000_000))
    t.do(t.log.tick())
    tp = t.core.registry.rms["rm-1"].partitions["default"]
    assert tp.records.domain_holds
    for core, part in ((h.core, p), (t.core, tp)):
        listed = _applications(part, core.now)
        for a in part.apps.values():
            for k in a.asks.values():
                assert listed[a.id]["asks"][k.key]["why"] == _why(part, k, core.now), (a.id, k.key)


def test_ended_applications_of_a_queue_that_is_gone_are_listed(tmp_path):
    """Regression (a review of this change): `ykbus apps --state Completed --queue Q` refused
    a queue a placement rule had made and removed with its last application: the queue of
    applications that ended may be gone."""
    import subprocess
    import sys

    from tests.core.test_placement import RULES
    from ykbus.log.build import LogBuilder
    from ykbus.log.jsonl import encode_entry

    log = LogBuilder("rm-1")
    entries = [log.register(RULES), log.apps(app("done", "", user="alice")), log.remove_apps("done")]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "apps", "--log", str(path), "--state", "Completed",
                          "--queue", "root.users.alice"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert [line.split()[2:5] for line in run.stdout.splitlines()[1:]] == [["done", "root.users.alice", "Completed"]]


def test_any_request_is_answered_or_refused_naming_a_field():
    """The read API's request comes from outside (NATS, an HTTP query): whatever it holds,
    the answer is a projection or a ValueError naming the field, and the state is unchanged."""
    import random

    from ykbus.core.snapshot import dump_snapshot

    h = cluster()
    before = dump_snapshot(h.core)
    rng = random.Random(4848)
    values = [None, "", "a", "root.a", "ROOT.A.X", "Running", "completed", "rm-1", "default", "ax", "x" * 5000,
              "\x00\ud800", "true", "false", "yes", 0, 1, -1, 2**70, 1.5, True, False, [], {}, ["a"], {"a": 1}]
    fields = ["rm", "partition", "app", "queue", "state", "brief", "other"]
    for _ in range(3000):
        request = {f: rng.choice(values) for f in rng.sample(fields, rng.randint(0, len(fields)))}
        verb = rng.choice(["applications", "terminated", "queues", "nodes", "partitions", "allocations"])
        try:
            answer = read(h.core, {}, verb, request)
        except ValueError as exc:
            assert str(exc).split(":")[0] in fields, (request, exc)
            continue
        assert set(answer) == {verb}
    assert dump_snapshot(h.core) == before
