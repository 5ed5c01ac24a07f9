"""YuniKorn's router and handlers on the edges a script meets (docs/operations.md, "YuniKorn's
REST API"): what Apache YuniKorn answers (yunikorn-core `be3bb48`, pkg/webservice/handlers.go
and its router, julienschmidt/httprouter v1.3.0) for a trailing slash with a query, a method
other than GET, a path in the wrong case, a state or queue name in capitals, an empty
`?status=`, a bad user or group name. Over the preemption example's state (queues
root.under, root.over, root.plain; applications batch Running, urgent, polite, other Accepted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core
from ykbus.rest import router
from ykbus.rest.router import Request, RestState

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def state() -> RestState:
    guard = guarded_core(None)
    for entry in read_entries((ROOT / "examples" / "preemption.jsonl").read_bytes().splitlines(), "preemption.jsonl"):
        list(guard.apply(entry))
    return RestState(lambda: guard.core, 1)


def ask(state: RestState, path: str, method: str = "GET", query: str = "", accept: str = ""):
    params: dict[str, str] = {}
    for pair in query.split("&") if query else []:
        k, _, v = pair.partition("=")
        params.setdefault(k, v)
    return router.answer(state, Request(method, path, params, accept, b"", query))


def body(answer) -> object:
    return json.loads(answer[2])


def test_a_trailing_slash_redirects_with_the_query_kept(state):
    status, _, _, headers = ask(state, "/ws/v1/partition/default/applications/active/", query="status=running")
    assert (status, headers["Location"]) == (301, "/ws/v1/partition/default/applications/active?status=running")
    status, _, _, headers = ask(state, "/ws/v1/fullstatedump", query="x=1")
    assert (status, headers["Location"]) == (301, "/debug/fullstatedump?x=1")


def test_a_post_with_a_trailing_slash_is_redirected_307_so_it_stays_a_post(state):
    status, _, _, headers = ask(state, "/ws/v1/validate-conf/", "POST")
    assert (status, headers["Location"]) == (307, "/ws/v1/validate-conf")


def test_a_method_without_a_route_there_gets_404_not_a_redirect(state):
    for method, path in (("POST", "/ws/v1/clusters/"), ("OPTIONS", "/ws/v1/clusters/"),
                         ("HEAD", "/ws/v1/clusters/"), ("GET", "/ws/v1/validate-conf/")):
        status, _, payload, _ = ask(state, path, method)
        assert (status, payload) == (404, b"404 page not found\n"), (method, path)
    status, _, _, headers = ask(state, "/ws/v1/clusters", "HEAD")
    assert (status, headers["Allow"]) == (405, "GET, OPTIONS")


def test_a_path_in_the_wrong_case_or_with_doubled_slashes_is_redirected_to_the_route(state):
    for given, fixed in (("/ws/v1/Clusters", "/ws/v1/clusters"), ("/ws/v1//clusters", "/ws/v1/clusters"),
                         ("/WS/V1/PARTITION/default/queues", "/ws/v1/partition/default/queues"),
                         ("/ws/v1/partition/default/Queue/root.under/", "/ws/v1/partition/default/queue/root.under")):
        status, _, _, headers = ask(state, given)
        assert (status, headers["Location"]) == (301, fixed), given
    assert ask(state, "/ws/v1/Nope")[0] == 404


def test_states_and_queue_names_are_read_in_any_case(state):
    active = ask(state, "/ws/v1/partition/default/applications/ACTIVE")
    assert active[0] == 200 and sorted(a["applicationID"] for a in body(active)) == ["batch", "other", "polite", "urgent"]
    assert ask(state, "/ws/v1/partition/default/applications/Rejected")[0] == 200
    under = ask(state, "/ws/v1/partition/default/queue/ROOT.Under")
    assert under[0] == 200 and body(under)["queuename"] == "root.under"
    apps = ask(state, "/ws/v1/partition/default/queue/root.UNDER/applications/Active")
    assert sorted(a["applicationID"] for a in body(apps)) == ["polite", "urgent"]


def test_a_queue_is_named_from_root(state):
    for path in ("/ws/v1/partition/default/queue/under", "/ws/v1/partition/default/queue/under/applications",
                 "/ws/v1/partition/default/queue/under/application/urgent"):
        status, _, payload, _ = ask(state, path)
        assert (status, json.loads(payload)["message"]) == (404, "Queue not found"), path


def test_status_filters_only_the_state_route_and_an_empty_one_filters_nothing(state):
    everything = ["batch", "other", "polite", "urgent"]
    running = ask(state, "/ws/v1/partition/default/applications/active", query="status=RUNNING")
    assert [a["applicationID"] for a in body(running)] == ["batch"]
    empty = ask(state, "/ws/v1/partition/default/applications/active", query="status=")
    assert empty[0] == 200 and sorted(a["applicationID"] for a in body(empty)) == everything
    # /queue/{q}/applications (no state) reads no status, as YuniKorn's getQueueApplications
    over = ask(state, "/ws/v1/partition/default/queue/root.over/applications", query="status=bogus")
    assert over[0] == 200 and [a["applicationID"] for a in body(over)] == ["batch"]
    under = ask(state, "/ws/v1/partition/default/queue/root.under/applications/active", query="status=running")
    assert under[0] == 200 and body(under) == []



def test_the_queue_name_is_checked_before_the_partition_where_yunikorn_checks_it_first(state):
    status, _, payload, _ = ask(state, "/ws/v1/partition/nope/queue/root.a b/applications")
    assert status == 400 and json.loads(payload)["message"].startswith("invalid queue name")
    status, _, payload, _ = ask(state, "/ws/v1/partition/nope/queue/root.a b")
    assert (status, json.loads(payload)["message"]) == (404, "Partition not found")


def test_user_and_group_names_are_checked(state):
    for path, message in (("/ws/v1/partition/default/usage/user/bad name", "Invalid user name"),
                          ("/ws/v1/partition/default/usage/user/1abc", "Invalid user name"),
                          ("/ws/v1/partition/default/usage/group/bad name", "Invalid group name")):
        status, _, payload, _ = ask(state, path)
        assert (status, json.loads(payload)["message"]) == (400, message), path
    assert ask(state, "/ws/v1/partition/default/usage/user/user")[0] == 200
    assert ask(state, "/ws/v1/partition/default/usage/user/someone")[0] == 404


def test_config_is_json_only_for_exactly_application_json_and_then_ends_without_a_newline(state):
    status, content_type, payload, _ = ask(state, "/ws/v1/config", accept="application/json")
    assert status == 200 and content_type.startswith("application/json") and not payload.endswith(b"\n")
    assert "Partitions" in json.loads(payload)
    status, content_type, _, _ = ask(state, "/ws/v1/config", accept="application/json, text/plain")
    assert content_type.startswith("application/x-yaml")


def test_the_state_dump_gives_the_cores_log_level(state):
    import logging
    logger = logging.getLogger("ykbus")
    before = logger.level
    try:
        logger.setLevel(logging.WARNING)
        assert body(ask(state, "/debug/fullstatedump"))["logLevel"] == "warn"
        logger.setLevel(logging.DEBUG)
        assert body(ask(state, "/debug/fullstatedump"))["logLevel"] == "debug"
    finally:
        logger.setLevel(before)


def test_a_redirects_body_names_the_address_html_escaped_as_go_writes_it(state):
    status, content_type, payload, headers = ask(state, "/ws/v1/partition/default/nodes/", query="a=1&b=2")
    assert (status, headers["Location"]) == (301, "/ws/v1/partition/default/nodes?a=1&b=2")
    assert payload == b'<a href="/ws/v1/partition/default/nodes?a=1&amp;b=2">Moved Permanently</a>.\n\n'


def test_a_sum_past_int64_is_answered_at_int64s_largest_as_yunikorn_saturates():
    from ykbus.bench.run import fresh_core
    from ykbus.limits import INT64_MAX
    from ykbus.log.build import LogBuilder, app, node

    core = fresh_core()
    log = LogBuilder("rm-1")
    core.apply(log.register())
    core.apply(log.nodes(*[node(f"n{i}", vcore=INT64_MAX) for i in range(3)]))
    answer = router.answer(RestState(lambda: core, 1), Request("GET", "/ws/v1/partitions"))
    [partition] = json.loads(answer[2])
    assert partition["capacity"]["capacity"]["vcore"] == INT64_MAX
    # a queue's headroom (the partition's total less its usage) and a node's available room,
    # below zero past int64's least when a node recovers more than it has, likewise
    core.apply(log.apps(app("a1", "root.default")))
    big = {"UUID": "u1", "applicationID": "a1", "allocationKey": "k", "partitionName": "default",
           "resourcePerAlloc": {"resources": {"vcore": {"value": INT64_MAX}}}}
    small = {**big, "UUID": "u2", "resourcePerAlloc": {"resources": {"vcore": {"value": 5000}}}}
    core.apply(log.nodes({**node("small", vcore=1000), "existingAllocations": [big, small]}))
    state = RestState(lambda: core, 1)
    queues = json.loads(router.answer(state, Request("GET", "/ws/v1/partition/default/queues"))[2])
    assert queues["headroom"]["vcore"] == INT64_MAX
    small_node = json.loads(router.answer(state, Request("GET", "/ws/v1/partition/default/node/small"))[2])
    assert small_node["available"]["vcore"] == -INT64_MAX - 1


def test_a_user_given_no_groups_is_in_their_own_and_the_implicit_rule_is_listed(state):
    """As yunikorn-core be3bb48 writes them (security/usergroup.go `ConvertUGI`: a user the RM
    gives no groups is resolved, and with no resolver its group is its own name;
    placement.go's rules when none are configured: `provided`, then `recovery`). The
    preemption example's applications send no groups and its queue configuration has no
    placement rules."""
    apps = body(ask(state, "/ws/v1/partition/default/applications/active"))
    assert apps and all(a["groups"] == ["user"] for a in apps), [a.get("groups") for a in apps]
    one = body(ask(state, f"/ws/v1/partition/default/application/{apps[0]['applicationID']}"))
    assert one["groups"] == ["user"] and one["user"] == "user"
    rules = body(ask(state, "/ws/v1/partition/default/placementrules"))
    assert rules == [{"name": "provided", "parameters": {"create": "false"}},
                     {"name": "recovery", "parameters": {"queue": "root.@recovery@"}}]


def test_placeholders_none_replaced_leave_out_replaced_as_yunikorn_writes_it():
    """dao/application_info.go `replaced,omitempty` (review: nothing checked it)."""
    from tests.conftest import Harness
    from ykbus.log.build import app, ask

    h = Harness()
    h.setup("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
            "        queues:\n          - name: default\n", n1={"vcore": 8000})
    h.do(h.log.apps({**app("g", "root.default"), "placeholderAsk": {"resources": {"vcore": {"value": 2000}}}}))
    h.do(h.log.asks({**ask("ph", "g", vcore=1000, max_allocations=2), "taskGroupName": "w", "placeholder": True}))
    rest = RestState(lambda: h.core, 1)
    [data] = body(router.answer(rest, Request("GET", "/ws/v1/partition/default/application/g", {}, "", b"", "")))[
        "placeholderData"]
    assert data["count"] == 2 and "replaced" not in data and "timedout" not in data, data
    outs = h.do(h.log.asks({**ask("real", "g", vcore=1000), "taskGroupName": "w"}))
    [swapped] = [r for o in outs if o.kind == "alloc" for r in o.msg.released]  # the placeholder it replaces
    h.do(h.log.release("g", uuid=swapped.UUID, termination="PLACEHOLDER_REPLACED"))  # the RM confirms: replaced
    [data] = body(router.answer(rest, Request("GET", "/ws/v1/partition/default/application/g", {}, "", b"", "")))[
        "placeholderData"]
    assert data["replaced"] == 1, data


def test_empty_and_zero_fields_are_left_out_and_an_originator_is_said_as_yunikorn_writes_them():
    """Regression (an outside review, yunikorn-core's dao): PartitionInfo's totalNodes,
    applications, totalContainers (omitempty), PartitionCapacity's three maps, a queue's
    headroom and NodesUtilDAOInfo's utilizations are left out when empty; `originator` (an
    ask or allocation the RM marked as its application's originator, a Spark driver) is
    written, after `preempted` (an allocation) or `allocationLog` (an ask)."""
    from ykbus.bench.run import fresh_core
    from ykbus.log.build import LogBuilder, app, ask, node

    core = fresh_core()
    log = LogBuilder("rm-1")
    state = RestState(lambda: core, 1)

    def get(path: str):
        status, _, payload, _ = router.answer(state, Request("GET", path))
        assert status == 200, (path, payload)
        return json.loads(payload)

    assert get("/ws/v1/scheduler/node-utilizations") is None  # no RM yet: Go's nil slice, `null`
    state.check_every = 60  # a service that checks, before its first check: YuniKorn's words
    status, _, payload, _ = router.answer(state, Request("GET", "/ws/v1/scheduler/healthcheck"))
    assert (status, json.loads(payload)["message"]) == (404, "Health check is not available")
    core.apply(log.register())

    [partition] = get("/ws/v1/partitions")  # no node yet
    assert partition["capacity"] == {} and "totalNodes" not in partition and "totalContainers" not in partition
    assert partition["applications"] == {"total": 0}  # (YuniKorn's map always has its total)
    assert "headroom" not in get("/ws/v1/partition/default/queues")
    assert get("/ws/v1/scheduler/node-utilizations") == [{"clusterId": "rm-1", "partition": "default"}]
    core.apply(log.nodes(node("n0", vcore=4000, memory=1000)))
    [partition] = get("/ws/v1/partitions")  # one idle node
    assert partition["capacity"] == {"capacity": {"memory": 1000, "vcore": 4000}} and partition["totalNodes"] == 1
    assert "totalContainers" not in partition
    core.apply(log.apps(app("spark", "root.default")))
    core.apply(log.asks({**ask("driver", "spark", vcore=1000, memory=100), "Originator": True},
                        ask("exec", "spark", vcore=1000, memory=100),
                        {**ask("big", "spark", vcore=9000), "Originator": True}))
    got = get("/ws/v1/partition/default/application/spark")
    by_key = {a["allocationKey"]: a for a in got["allocations"]}
    assert by_key["driver"]["originator"] is True and "originator" not in by_key["exec"]
    assert list(by_key["driver"])[-1] == "originator"
    [pending] = got["requests"]
    assert pending["allocationKey"] == "big" and pending["originator"] is True
    keys = list(pending)
    assert keys.index("originator") == keys.index("allocationLog") + 1
    node_allocs = {a["allocationKey"]: a for a in get("/ws/v1/partition/default/node/n0")["allocations"]}
    assert node_allocs["driver"]["originator"] is True
