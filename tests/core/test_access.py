"""ACLs, the recovery queue, child templates and user/group limits (seed:
scheduler-configuration; the issue's YuniKorn semantics)."""

import pytest

from tests.conftest import Harness, msgs, new_allocs, states
from ykbus.core.config import ConfigError, parse_acl, parse_config
from ykbus.core.configdump import dump_config
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask
from ykbus.yamlload import load_yaml

GB = 10**9


def part(h):
    return h.core.dump()["rms"]["rm-1"]["partitions"]["default"]


def placed(h, *apps):
    reply = msgs(h.do(h.log.apps(*apps)), "app")[0]
    found = part(h)["applications"]
    return ({a.applicationID: found[a.applicationID]["queue"] for a in reply.accepted},
            {r.applicationID: r.reason for r in reply.rejected})


# --- ACLs --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, user, groups, allowed", [
    ("*", "anyone", [], True),
    ("", "anyone", ["g"], False),                 # empty: nobody
    (" ", "anyone", ["g"], False),                # a single space: nobody
    ("alice,bob", "bob", [], True),
    ("alice,bob", "carol", ["alice"], False),     # a user list does not match groups
    ("alice dev,ops", "carol", ["x", "ops"], True),
    (" dev", "dev", [], False),                   # groups only
    (" dev", "carol", ["dev"], True),
    ("first.last@corp.example", "first.last@corp.example", [], True),
])
def test_acl_forms(text, user, groups, allowed):
    assert parse_acl(text).allows(user, groups) is allowed


@pytest.mark.parametrize("text, error", [
    ("alice bob carol", "more than one space"),
    ("alice, bob", "user name '' must match"),
    ("al ice!", "group name 'ice!' must match"),
    ("9lives", "user name '9lives' must match"),
])
def test_invalid_acls_are_config_errors(text, error):
    with pytest.raises(ValueError, match=error):
        parse_acl(text)


ACLS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: 'admin'
        queues:
          - name: open
            submitacl: '*'
          - name: team
            submitacl: 'alice data'
          - name: ops
            adminacl: 'bob'
          - name: closed
          - name: empty
            submitacl: ''
          - name: space
            submitacl: ' '
          - name: groupsonly
            submitacl: ' data'
"""


def test_submit_access_is_checked_from_the_leaf_up_to_root():
    h = Harness()
    h.setup(ACLS)
    ok, rejected = placed(h,
                          app("a", "root.open", user="anyone"),
                          app("b", "root.team", user="alice"),
                          app("c", "root.team", user="carol", groups=["data"]),
                          app("d", "root.ops", user="bob"),              # admin implies submit
                          app("e", "root.closed", user="admin"),         # root's ACL counts
                          app("f", "root.closed", user="alice"),
                          app("g", "root.team", user="carol", groups=["web"]))
    assert ok == {"a": "root.open", "b": "root.team", "c": "root.team", "d": "root.ops", "e": "root.closed"}
    assert rejected == {
        "f": "user 'alice' may not submit to queue root.closed: no submitacl or adminacl up to root lets them in",
        "g": "user 'carol' may not submit to queue root.team: no submitacl or adminacl up to root lets them in",
    }
    assert "f" not in part(h)["applications"]


def test_no_acl_anywhere_denies_everyone():
    h = Harness()
    h.setup("partitions: [{name: default, queues: [{name: root, queues: [{name: a}]}]}]")
    ok, rejected = placed(h, app("a1", "root.a", user="alice"))
    assert ok == {} and "may not submit to queue root.a" in rejected["a1"]


RULES_ACL = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        parent: {name: fixed, value: root.users}
      - name: fixed
        value: root.fallback
    queues:
      - name: root
        queues:
          - name: users
            parent: true
            submitacl: 'alice'
          - name: fallback
            submitacl: '*'
"""


def test_a_rule_whose_queue_denies_the_user_falls_through_and_leaves_no_queue():
    h = Harness()
    h.setup(RULES_ACL)
    ok, _ = placed(h, app("a", "", user="alice"), app("b", "", user="bob"))
    # bob may not submit under root.users (unmanaged queue: its parent's ACL), so the next rule
    assert ok == {"a": "root.users.alice", "b": "root.fallback"}
    assert "root.users.bob" not in part(h)["queues"]


def test_rejection_names_the_acl_when_every_rule_was_denied():
    h = Harness()
    h.setup(RULES_ACL.replace("submitacl: '*'", "submitacl: 'carol'"))
    _, rejected = placed(h, app("b", "", user="bob"))
    assert rejected["b"] == (
        "no placement rule placed the application (rules: user, fixed); denied by ACL: "
        "user 'bob' may not submit to queue root.users.bob: no submitacl or adminacl up to root lets them in; "
        "user 'bob' may not submit to queue root.fallback: no submitacl or adminacl up to root lets them in")


# --- recovery -------------------------------------------------------------------------

def test_recovered_application_whose_queue_is_gone_goes_to_the_recovery_queue():
    h = Harness()
    h.setup(ACLS, n1={"vcore": 4000})
    forced = {"application.create.force": "true"}
    ok, rejected = placed(h, app("r1", "root.removed", user="x", tags=forced),
                          app("r2", "root.closed", user="x", tags=forced),
                          app("n1", "root.removed", user="x"))
    assert ok == {"r1": "root.@recovery@", "r2": "root.@recovery@"}
    assert rejected == {"n1": "queue 'root.removed' does not exist"}
    # it keeps what it runs, but gets nothing new
    outs = h.do(h.log.asks(ask("k1", "r1", vcore=1000)))
    assert new_allocs(outs) == []
    assert [s.reason for s in states(outs)] == [
        "queue root.@recovery@ keeps recovered applications running and schedules nothing new"]
    h.do(h.log.remove_apps("r1", "r2"))
    assert "root.@recovery@" not in part(h)["queues"]


# --- child templates --------------------------------------------------------------------

TEMPLATE = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        parent: {name: fixed, value: root.tenants.users}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: tenants
            childtemplate:
              maxapplications: 1
              resources: {max: {vcore: 2}}
              properties: {application.sort.policy: fair}
            queues:
              - name: users
                parent: true
"""


def test_unmanaged_leaf_takes_the_nearest_child_template():
    h = Harness()
    h.setup(TEMPLATE, n1={"vcore": 8000})
    placed(h, app("a", "", user="alice"))
    q = part(h)["queues"]["root.tenants.users.alice"]
    assert (q["max"], q["maxApplications"], q["properties"]) == (
        {"vcore": 2000}, 1, {"application.sort.policy": "fair"})
    outs = h.do(h.log.asks(ask("k", "a", vcore=1000, max_allocations=3)))
    assert len(new_allocs(outs)) == 2  # the template's max holds the third
    # a reload with another template applies to the live unmanaged queue from the next decision
    h.do(h.log.config(TEMPLATE.replace("max: {vcore: 2}", "max: {vcore: 3}")))
    assert part(h)["queues"]["root.tenants.users.alice"]["max"] == {"vcore": 3000}
    assert len(part(h)["allocations"]) == 3


def test_childtemplate_on_a_leaf_is_an_error():
    with pytest.raises(ConfigError, match=r"queues\[0\].queues\[0\].childtemplate: only a parent queue"):
        parse_config(load_yaml("partitions: [{name: default, queues: [{name: root, queues: "
                               "[{name: a, childtemplate: {maxapplications: 1}}]}]}]"))


# --- user and group limits --------------------------------------------------------------

LIMITS = """
partitions:
  - name: default
    limits:
      - limit: everyone at most 4 vcores
        users: ['*']
        maxresources: {vcore: 4}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            limits:
              - limit: alice
                users: [alice]
                maxresources: {vcore: 2}
                maxapplications: 1
              - limit: data team
                groups: [data]
                maxresources: {vcore: 3}
              - limit: other groups
                groups: ['*']
                maxapplications: 2
          - name: b
"""


def test_user_limit_holds_the_ask_with_a_reason_that_names_the_limit():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 16000})
    placed(h, app("a1", "root.a", user="alice"))
    outs = h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=3)))
    assert len(new_allocs(outs)) == 2
    assert [s.reason for s in states(outs)] == [
        "user alice limit (alice) in queue root.a: maxresources vcore 2 cores would be exceeded: 2 cores used + 1 core "
        "asked"]
    # a release of alice's in that queue lets the held ask go
    outs = h.do(h.log.release("a1", uuid=new_allocs(outs)[0].UUID))
    assert len(new_allocs(outs)) == 1


def test_limits_are_enforced_up_the_tree_and_per_wildcard_user():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("b1", "root.b", user="bob"), app("c1", "root.b", user="carol"))
    outs = h.do(h.log.asks(ask("kb", "b1", vcore=1000, max_allocations=6),
                           ask("kc", "c1", vcore=1000, max_allocations=6)))
    by_app = {}
    for a in new_allocs(outs):
        by_app[a.applicationID] = by_app.get(a.applicationID, 0) + 1
    assert by_app == {"b1": 4, "c1": 4}  # root's wildcard: 4 vcores for each user, not shared
    assert {s.reason for s in states(outs)} == {
        "user bob limit (everyone at most 4 vcores) in queue root: maxresources vcore 4 cores would be exceeded: "
        "4 cores used + 1 core asked",
        "user carol limit (everyone at most 4 vcores) in queue root: maxresources vcore 4 cores would be exceeded: "
        "4 cores used + 1 core asked"}


def test_first_matching_group_limit_applies():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("d1", "root.a", user="dave", groups=["web", "data"]))
    outs = h.do(h.log.asks(ask("k", "d1", vcore=1000, max_allocations=4)))
    assert len(new_allocs(outs)) == 3
    assert "group data limit (data team) in queue root.a" in states(outs)[0].reason


def test_user_maxapplications_keeps_the_next_application_accepted():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("a1", "root.a", user="alice"), app("a2", "root.a", user="alice"))
    outs = h.do(h.log.asks(ask("k1", "a1", vcore=1000), ask("k2", "a2", vcore=1000)))
    assert [a.applicationID for a in new_allocs(outs)] == ["a1"]
    assert [s.reason for s in states(outs)] == [
        "user alice limit (alice) in queue root.a: 1 of 1 applications running"]
    assert part(h)["applications"]["a2"]["state"] == "Accepted"
    outs = h.do(h.log.remove_apps("a1"))
    assert [a.applicationID for a in new_allocs(outs)] == ["a2"]


def test_the_wildcard_group_limit_holds_every_user_it_takes_together():
    # YuniKorn: "a wildcard for the group limit sets a cumulative limit for all users in that queue"
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("x0", "root.a", user="u0", groups=["web"]), app("x1", "root.a", user="u1", groups=["ops"]),
           app("x2", "root.a", user="u2"))  # no groups: the user's own name is its group, as YuniKorn resolves it
    outs = h.do(h.log.asks(*[ask(f"k{i}", f"x{i}", vcore=500) for i in range(3)]))
    assert sorted(a.applicationID for a in new_allocs(outs)) == ["x0", "x1"]
    assert states(outs)[0].reason == "group * limit (other groups) in queue root.a: 2 of 2 applications running"
    # a user of a named group is not held by it: the data team's own limit is theirs
    placed(h, app("d1", "root.a", user="dave", groups=["data"]))
    assert [a.applicationID for a in new_allocs(h.do(h.log.asks(ask("kd", "d1", vcore=500))))] == ["d1"]


def test_a_snapshot_of_the_rules_before_loads_and_holds_the_application_again():
    """Regression (a review): an application a `*` group limit held was blocked on
    `root.a|group|web` (the user's first group) in a snapshot of the rules before; that
    tracker is `root.a|group|*` now, and the load failed with a KeyError: no restart."""
    import msgspec

    from ykbus.core import snapshot as snap
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, *[app(f"x{i}", "root.a", user=f"u{i}", groups=["web"]) for i in range(3)])
    h.do(h.log.asks(*[ask(f"k{i}", f"x{i}", vcore=500) for i in range(3)]))
    data = msgspec.msgpack.decode(dump_snapshot(h.core), type=snap.Snapshot)
    [rm] = data.rms
    [p] = rm.partitions
    apps = [msgspec.structs.replace(a, blocked_on="root.a|group|web") if a.blocked_on else a for a in p.apps]
    assert apps != list(p.apps)  # x2 was held
    old = msgspec.structs.replace(data, rms=[msgspec.structs.replace(rm, partitions=[
        msgspec.structs.replace(p, apps=apps)])])
    restored = load_snapshot(msgspec.msgpack.encode(old), load_yaml)
    outs = restored.apply(h.log.tick())  # judged again under the rules of now: held by the shared limit
    assert new_allocs(outs) == [] and part_of(restored)["applications"]["x2"]["state"] == "Accepted"
    assert restored.apply(h.log.remove_apps("x0")) and part_of(restored)["applications"]["x2"]["state"] == "Running"


def part_of(core):
    return core.dump()["rms"]["rm-1"]["partitions"]["default"]


GROUPS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        limits:
          - {limit: data at root, groups: [data], maxresources: {vcore: 3}}
        queues:
          - name: a
            limits:
              - {limit: data in a, groups: [data], maxresources: {vcore: 2}}
              - {limit: web in a, groups: [web], maxresources: {vcore: 10}}
          - name: b
            limits:
              - {limit: web in b, groups: [web], maxresources: {vcore: 10}}
"""


@pytest.mark.parametrize("queue, groups, placed_vcores, reason", [
    # the limits' order picks the group, not the order the user's groups come in
    ("root.a", ["web", "data"], 2, "group data limit (data in a) in queue root.a"),
    # one group an application, found from its leaf up: web in b, so data's limit at root is not dave's
    ("root.b", ["web", "data"], 10, "group web limit (web in b) in queue root.b"),
])
def test_one_group_an_application_as_yunikorn_resolves_it(queue, groups, placed_vcores, reason):
    h = Harness()
    h.setup(GROUPS, n1={"vcore": 32000})
    placed(h, app("d1", queue, user="dave", groups=groups))
    outs = h.do(h.log.asks(ask("k", "d1", vcore=1000, max_allocations=12)))
    assert len(new_allocs(outs)) == placed_vcores
    assert states(outs)[0].reason.startswith(reason)


def test_the_rest_usage_of_users_and_groups_is_what_the_limits_count():
    """/ws/v1/partition/default/usage/users and /groups give each user the limit that holds
    them (their own before the `*` one, whatever the order in the file) and each group the
    applications the group limits count under it (regression: a review found the first
    limit listed given, and every group of every user listed)."""
    import json

    from ykbus.rest import router
    h = Harness()
    h.setup(LIMITS.replace("maxresources: {vcore: 4}", "maxresources: {vcore: 6}"), n1={"vcore": 32000})
    placed(h, app("d1", "root.a", user="dave", groups=["web", "data"]), app("a1", "root.a", user="alice"))
    h.do(h.log.asks(ask("kd", "d1", vcore=1000), ask("ka", "a1", vcore=1000)))
    state = router.RestState(lambda: h.core, 1)

    def get(path: str) -> object:
        return json.loads(router.answer(state, router.Request("GET", path, {}, "", b"", ""))[2])
    users = {u["userName"]: u["queues"] for u in get("/ws/v1/partition/default/usage/users")}
    assert users["alice"]["maxResources"] == {"vcore": 6000}  # root's '*' limit
    assert users["alice"]["children"][0]["maxResources"] == {"vcore": 2000}  # her own in root.a
    groups = {g["groupName"]: g["queues"] for g in get("/ws/v1/partition/default/usage/groups")}
    assert sorted(groups) == ["*", "data"]  # dave counted under data only; alice (group alice) under '*'
    assert groups["data"]["children"][0]["maxResources"] == {"vcore": 3000}
    assert groups["*"]["children"][0]["maxApplications"] == 2


def test_a_user_given_no_groups_is_in_the_group_of_their_name():
    h = Harness()
    h.setup(GROUPS.replace("groups: [web], maxresources: {vcore: 10}}\n          - name: b",
                           "groups: [web], maxresources: {vcore: 10}}\n              - {groups: [erin], maxapplications: 1}"
                           "\n          - name: b"), n1={"vcore": 32000})
    placed(h, app("e1", "root.a", user="erin"), app("e2", "root.a", user="erin"))
    outs = h.do(h.log.asks(ask("k1", "e1", vcore=1000), ask("k2", "e2", vcore=1000)))
    assert [a.applicationID for a in new_allocs(outs)] == ["e1"]
    assert states(outs)[0].reason == "group erin limit in queue root.a: 1 of 1 applications running"
    # and an ACL naming that group lets them in (and not another user given no groups)
    h2 = Harness()
    h2.setup("partitions: [{name: default, queues: [{name: root, queues: [{name: a, submitacl: ' erin'}]}]}]",
             n1={"vcore": 8000})
    outs = h2.do(h2.log.apps(app("e1", "root.a", user="erin"), app("f1", "root.a", user="frank")))
    reply = msgs(outs, "app")[0]
    assert [a.applicationID for a in reply.accepted] == ["e1"] and [r.applicationID for r in reply.rejected] == ["f1"]


def test_raising_a_limit_in_a_reload_releases_held_asks_and_snapshots_keep_trackers():
    h = Harness()
    h.setup(LIMITS, n1={"vcore": 32000})
    placed(h, app("a1", "root.a", user="alice"))
    h.do(h.log.asks(ask("k", "a1", vcore=1000, max_allocations=3)))
    # a snapshot taken while the ask waits for alice's limit resumes identically
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    reload = h.log.config(LIMITS.replace("maxresources: {vcore: 2}", "maxresources: {vcore: 3}"))
    outs, outs2 = h.core.apply(reload), restored.apply(reload)
    assert outs == outs2 and len(new_allocs(outs)) == 1
    assert h.core.dump() == restored.dump()


@pytest.mark.parametrize("limits, error", [
    ("[{maxapplications: 1}]", "limits[0]: a limit needs users or groups"),
    ("[{users: [a]}]", "limits[0]: a limit needs maxresources or maxapplications"),
    ("[{users: [a], maxapplications: 0}]", "limits[0].maxapplications: must be greater than 0"),
    ("[{users: [a], maxresources: {vcore: 0}}]", "limits[0].maxresources: sets no resource above zero"),
    ("[{users: [a], maxresources: {vcore: 9}}]", "limits[0].maxresources: vcore 9 cores exceeds the queue's max 8 cores"),
    ("[{users: [a], maxapplications: 1}, {users: [a], maxapplications: 2}]",
     "limits[1]: user 'a' already has a limit in partitions[0].queues[0].queues[0].limits[0]"),
    ("[{users: ['bad name'], maxapplications: 1}]", "limits[0].users[0]: 'bad name' must be * or match"),
    ("[{users: [a], maxapplications: 1, max: 3}]", "limits[0].max: unknown key"),
    # as YuniKorn's validator: the '*' after the named, a '*' group only beside a named group
    ("[{users: ['*'], maxapplications: 1}, {users: [a], maxapplications: 1}]",
     "limits[1].users[0]: 'a' comes after the '*' user limit (partitions[0].queues[0].queues[0].limits[0]): "
     "named users' limits go first"),
    ("[{groups: ['*'], maxapplications: 1}]", "limits[0].groups[0]: a '*' group limit needs a named group's limit"),
    ("[{groups: ['*', g], maxapplications: 1}]", "limits[0].groups[0]: a '*' group limit needs a named group's limit"),
    ("[{groups: ['a@b'], maxapplications: 1}]", "limits[0].groups[0]: 'a@b' must be * or match"),
    ("[{users: [on], maxapplications: 1}]", "limits[0].users[0]: True is a boolean in YAML: quote the name"),
    ("[{groups: [007], maxapplications: 1}]", "limits[0].groups[0]: 7 is a number in YAML: quote it"),
])
def test_invalid_limits(limits, error):
    text = ("partitions: [{name: default, queues: [{name: root, queues: "
            f"[{{name: a, resources: {{max: {{vcore: 8}}}}, limits: {limits}}}]}}]}}]")
    with pytest.raises(ConfigError) as exc:
        parse_config(load_yaml(text))
    assert any(error in e for e in exc.value.errors), exc.value.errors


def test_a_limit_above_a_max_set_higher_up_says_where_the_max_is():
    """Regression (a review): "exceeds the queue's max" for a queue with no max of its own."""
    text = ("partitions: [{name: default, queues: [{name: root, queues: [{name: p, resources: {max: {vcore: 10}}, "
            "maxapplications: 3, queues: [{name: c, limits: [{users: [a], maxresources: {vcore: 20}, maxapplications: 4}]}]}]}]}]")
    with pytest.raises(ConfigError) as exc:
        parse_config(load_yaml(text))
    assert exc.value.errors == [
        "partitions[0].queues[0].queues[0].queues[0].limits[0].maxresources: vcore 20 cores exceeds the max up the tree "
        "10 cores",
        "partitions[0].queues[0].queues[0].queues[0].limits[0].maxapplications: 4 exceeds the maxapplications up the "
        "tree, 3"]


def test_kubernetes_service_accounts_and_groups_can_be_limited():
    text = ("partitions: [{name: default, queues: [{name: root, queues: [{name: a, limits: ["
            "{users: ['system:serviceaccount:spark:spark-sa'], maxapplications: 2}, "
            "{groups: ['system:authenticated'], maxapplications: 3}, {groups: ['*'], maxapplications: 4}]}]}]}]")
    lims = parse_config(load_yaml(text)).partitions[0].root.queues[0].limits
    assert [(lim.users, lim.groups) for lim in lims] == [
        (("system:serviceaccount:spark:spark-sa",), ()), ((), ("system:authenticated",)), ((), ("*",))]


def test_a_named_limit_above_the_wildcard_one_up_the_tree_is_refused():
    text = ("partitions: [{name: default, limits: [{users: ['*'], maxresources: {vcore: 4}}], queues: [{name: root, "
            "queues: [{name: a, limits: [{users: [alice], maxresources: {vcore: 8}}]}]}]}]")
    with pytest.raises(ConfigError) as exc:
        parse_config(load_yaml(text))
    assert exc.value.errors == ["partitions[0].queues[0].queues[0].limits[0].maxresources: user 'alice': vcore 8 cores "
                                "is above the '*' user limit up the tree, 4 cores"]


def test_a_named_limit_under_a_wildcard_one_is_what_the_queues_below_are_held_to():
    """Regression (a review): a group with no limit of its own at root, held there to the '*'
    limit's 4 cores, was held to them further down too, where YuniKorn holds it to its own."""
    text = ("partitions: [{name: default, queues: [{name: root, limits: [{groups: [ops], maxapplications: 9}, "
            "{groups: ['*'], maxresources: {vcore: 4}}], queues: [{name: a, limits: [{groups: [web], maxapplications: 2}], "
            "queues: [{name: b, limits: [{groups: [web], maxresources: {vcore: 8}}]}]}]}]}]")
    parse_config(load_yaml(text))


def test_dump_of_a_parsed_configuration_parses_to_the_same():
    for text in (ACLS, RULES_ACL, TEMPLATE, LIMITS):
        config = parse_config(load_yaml(text))
        assert parse_config(dump_config(config)) == config


# --- regressions found in review ----------------------------------------------------------

def test_group_wildcard_acl_lets_everyone_in_and_a_wildcard_inside_a_list_is_an_error():
    assert parse_acl(" *").allows("bob", []) and parse_acl("alice *").allows("carol", [])
    with pytest.raises(ValueError, match="'\\*' must be the only entry of the user list"):
        parse_acl("alice,*")


def test_the_recovery_queue_is_reserved():
    with pytest.raises(ConfigError, match=r"queues\[0\].queues\[0\].name: root.@recovery@ is reserved"):
        parse_config(load_yaml("partitions: [{name: default, queues: [{name: root, queues: [{name: '@recovery@'}]}]}]"))
    h = Harness()
    h.setup("""
partitions:
  - name: default
    placementrules:
      - {name: user, create: true}
      - {name: fixed, value: root.other}
    queues:
      - name: root
        submitacl: '*'
        queues: [{name: other}]
""")
    ok, _ = placed(h, app("a", "", user="@recovery@"))  # a user rule may not make it
    assert ok == {"a": "root.other"}
    h2 = Harness()
    h2.setup(ACLS)
    _, rejected = placed(h2, app("b", "root.@recovery@", user="admin"))
    assert rejected == {"b": "queue root.@recovery@ is reserved for recovered applications"}


def test_child_template_sort_priority_is_applied():
    h = Harness()
    h.setup(TEMPLATE.replace("properties: {application.sort.policy: fair}",
                             "properties: {application.sort.priority: disabled}"))
    placed(h, app("a", "", user="alice"))
    leaf = h.core.rms["rm-1"].partitions["default"].queues["root.tenants.users.alice"]
    assert leaf.sort_priority is False


FILE_A = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]"
OWN = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: own}]}]}]"


def queue_file(h, group, text):
    return h.do(h.log.entry("config", {"policyGroup": group, "config": text}, rm=""))


def leaves(h):
    return sorted(p for p, q in part(h)["queues"].items() if q["leaf"] and not q["draining"])


def test_a_queue_file_that_does_not_fit_the_live_state_is_refused_whole():
    h = Harness()
    h.setup(OWN, n1={"vcore": 4000})
    placed(h, app("x", "root.own"))
    outs = queue_file(h, "queues", FILE_A.replace("{name: a}", "{name: own, queues: [{name: c}]}"))
    assert "rejected" in [e for e in msgs(outs, "event")][-1].events[-1].message
    assert h.core.operator_configs == {}
    outs = h.do(h.log.config(OWN.replace("name: own", "name: own2")))  # the RM still configures itself
    assert "configuration updated" in msgs(outs, "event")[0].events[0].message


def test_withdrawing_a_queue_file_hands_the_group_back():
    h = Harness()
    h.setup(OWN)
    queue_file(h, "*", FILE_A.replace("name: a", "name: all"))
    queue_file(h, "queues", FILE_A)
    assert leaves(h) == ["root.a"]
    queue_file(h, "queues", "")  # back to the file for every RM
    assert leaves(h) == ["root.all"]
    queue_file(h, "*", "")  # back to what the RM sent
    assert leaves(h) == ["root.own"]
    h.do(h.log.config(""))  # an empty update re-applies the RM's own, not a withdrawn file
    assert leaves(h) == ["root.own"]
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    assert restored.rms["rm-1"].own_config_text == h.core.rms["rm-1"].own_config_text == OWN
