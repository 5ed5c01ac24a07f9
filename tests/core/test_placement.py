"""Placement rules and unmanaged queues (seed: scheduler-configuration)."""

import pytest

from tests.conftest import Harness, msgs
from ykbus.core.config import ConfigError, parse_config
from ykbus.core.snapshot import dump_snapshot, load_snapshot
from ykbus.log.build import app, ask
from ykbus.yamlload import load_yaml

RULES = """
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: user
        create: true
        parent: {name: fixed, value: root.users}
        filter: {type: deny, users: ['svc-.*']}
      - name: tag
        value: namespace
        create: true
      - name: primaryGroup
        create: true
        parent: {name: fixed, value: root.groups}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
          - name: users
            parent: true
          - name: groups
            parent: true
"""


def queues(h):
    return h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]


def placed(h, *apps):
    outs = h.do(h.log.apps(*apps))
    reply = msgs(outs, "app")[0]
    found = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["applications"]
    return {a.applicationID: found[a.applicationID]["queue"] for a in reply.accepted}, \
        {r.applicationID: r.reason for r in reply.rejected}


def test_first_matching_rule_wins_and_creates_unmanaged_queues():
    h = Harness()
    h.setup(RULES, n1={"vcore": 4000})
    ok, rejected = placed(h,
                          app("a", "root.prod", user="alice"),          # provided, exists
                          app("b", "", user="bob.smith"),               # user under root.users, dot replaced
                          app("c", "", user="svc-etl", tags={"namespace": "etl"}),  # user denied -> tag
                          app("d", "root.nope", user="svc-x", groups=["ml", "x"]),  # provided fails -> group
                          app("e", "", user="svc-y"))  # given no groups: its group is its name, as YuniKorn's
    assert ok == {"a": "root.prod", "b": "root.users.bob_dot_smith", "c": "root.etl", "d": "root.groups.ml",
                  "e": "root.groups.svc-y"}
    assert rejected == {}
    assert "root.nope" not in queues(h)


def test_a_rejection_says_why_each_rule_placed_nothing():
    """Regression (an outside review): every miss read "no placement rule placed the
    application (rules: provided)", whatever the cause; only ACL denials were named."""
    cfg = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
      - name: user
        create: true
        parent: {name: fixed, value: root.gone}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: p
            parent: true
"""
    h = Harness()
    h.setup(cfg)
    long = "q" * 70
    _, rejected = placed(h, app("1", "root.x.y", user="u1"), app("2", "root.p", user="u2"),
                         app("3", f"root.p.{long}", user="u3"))
    assert rejected["1"] == (
        "no placement rule placed the application (rules: provided, user): provided: queue root.x.y does not exist "
        "and cannot be created: its parent root.x does not exist; fixed: queue root.gone does not exist (the rule "
        "creates no queue: create is false); user: its parent rule (fixed) placed no parent queue")
    assert rejected["2"].startswith("no placement rule placed the application (rules: provided, user): provided: "
                                    "queue root.p is a parent queue: applications go to leaf queues; ")
    assert f"provided: queue root.p.{long} cannot be created: '{long}' is not a queue name (1 to 64" in rejected["3"]


def test_a_queue_under_a_parent_removed_from_the_configuration_takes_no_new_application():
    """Regression (an outside review): a reload that removed root.users drained it, but its
    unmanaged child root.users.alice stayed open: `provided` (or no rules at all) placed new
    applications there for as long as they came, so root.users never finished draining;
    the `user` rule already refused it."""
    rules = RULES.replace(RULES[RULES.index("      - name: primaryGroup"):RULES.index("    queues:")], "")
    h = Harness()
    h.setup(rules, n1={"vcore": 4000})
    placed(h, app("a", "", user="alice"))
    h.do(h.log.asks(ask("k", "a", vcore=1000)))
    h.do(h.log.config(rules.replace("          - name: users\n            parent: true\n", "")))
    assert queues(h)["root.users"]["draining"] is True
    ok, rejected = placed(h, app("b", "root.users.alice", user="carol"))
    assert ok == {} and "provided: queue root.users.alice is under root.users, which is draining" in rejected["b"]
    no_rules = rules[:rules.index("    placementrules:")] + rules[rules.index("    queues:"):]
    h.do(h.log.config(no_rules.replace("          - name: users\n            parent: true\n", "")))
    ok, rejected = placed(h, app("c", "root.users.alice", user="carol"))
    assert rejected == {"c": "queue root.users.alice is under root.users, which is draining: it accepts no new "
                             "applications"}
    h.do(h.log.remove_apps("a"))  # its last application gone: the child goes, then the drained parent
    assert "root.users.alice" not in queues(h) and "root.users" not in queues(h)


def test_unmanaged_queue_goes_when_empty_and_a_reload_does_not_drain_it():
    h = Harness()
    h.setup(RULES, n1={"vcore": 4000})
    placed(h, app("b", "", user="bob"))
    h.do(h.log.asks(ask("k", "b", vcore=1000)))
    h.do(h.log.config(RULES))
    assert queues(h)["root.users.bob"]["draining"] is False
    h.do(h.log.remove_apps("b"))
    assert "root.users.bob" not in queues(h) and "root.users" in queues(h)


def test_failed_attempt_leaves_no_queue_behind():
    cfg = RULES.replace("      - name: provided\n", "      - name: user\n        create: true\n"
                        "        parent: {name: tag, value: team, create: true}\n"
                        "        filter: {users: ['nobody-matches-this']}\n      - name: provided\n")
    h = Harness()
    h.setup(cfg)
    # the first rule's filter does not match, the second places: no root.<team> appears
    ok, _ = placed(h, app("a", "root.prod", user="alice", tags={"team": "t1"}))
    assert ok == {"a": "root.prod"} and "root.t1" not in queues(h)


def test_placement_decides_without_changing_the_queue_tree():
    """Placing is a decision: the queues a rule would create are not in the tree until the
    application is added, and an application rejected after placement (a gang larger than
    the new queue's max) leaves none behind."""
    from ykbus.core.snapshot import dump_snapshot
    from ykbus.si import messages as m

    cfg = RULES.replace("          - name: users\n            parent: true\n",
                        "          - name: users\n            parent: true\n"
                        "            childtemplate: {resources: {max: {vcore: 2}}}\n")
    h = Harness()
    h.setup(cfg, n1={"vcore": 4000})
    part = h.core.rms["rm-1"].partitions["default"]
    before = dump_snapshot(h.core)
    queue, reason = part.changes.place(m.AddApplicationRequest(applicationID="x", queueName="", partitionName="default",
                                                       ugi=m.UserGroupInformation(user="carol")))
    assert queue is not None and queue.path == "root.users.carol" and reason == ""
    assert "root.users.carol" not in part.queues and "carol" not in part.queues["root.users"].children
    assert dump_snapshot(h.core) == before
    _, rejected = placed(h, app("g", "", user="carol", placeholderAsk={"resources": {"vcore": {"value": 3000}}}))
    assert "exceeds queue root.users.carol max" in rejected["g"] and "root.users.carol" not in queues(h)
    ok, _ = placed(h, app("a", "", user="carol"))
    assert ok == {"a": "root.users.carol"} and queues(h)["root.users.carol"]["max"] == {"vcore": 2000}


def test_secondary_group_takes_the_first_group_that_places():
    cfg = RULES.replace("      - name: primaryGroup\n        create: true\n", "      - name: secondaryGroup\n")
    cfg = cfg.replace("          - name: groups\n            parent: true\n",
                      "          - name: groups\n            queues: [{name: dev}]\n")
    h = Harness()
    h.setup(cfg)
    ok, _ = placed(h, app("a", "", user="svc-z", groups=["primary", "nothere", "dev"]))
    assert ok == {"a": "root.groups.dev"}


def test_snapshot_keeps_unmanaged_queues():
    h = Harness()
    h.setup(RULES, n1={"vcore": 4000})
    placed(h, app("b", "", user="bob"))
    h.do(h.log.asks(ask("k", "b", vcore=1000)))
    restored = load_snapshot(dump_snapshot(h.core), load_yaml)
    assert restored.dump() == h.core.dump()
    outs = restored.apply(h.log.remove_apps("b"))
    assert outs and "root.users.bob" not in restored.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"]


@pytest.mark.parametrize("rule,error", [
    ("{name: guess}", "unknown placement rule 'guess'"),
    ("{name: fixed}", "the fixed rule needs a value"),
    ("{name: user, filter: {type: maybe}}", "unknown value 'maybe': expected allow or deny"),
    ("{name: user, filter: {users: ['(']}}", "not a regular expression: missing ): ("),
    # RE2's syntax, Go's (YuniKorn's): no lookaround, no backreference
    ("{name: user, filter: {users: ['(?=svc)x']}}", "not a regular expression: invalid perl operator: (?="),
    ("{name: user, create: yes please}", "expected true or false"),
    ("{name: user, colour: red}", "unknown key"),
])
def test_invalid_rules_are_reported_with_their_path(rule, error):
    text = f"partitions:\n  - name: default\n    placementrules:\n      - {rule}\n"
    with pytest.raises(ConfigError) as info:
        parse_config(load_yaml(text))
    assert any(e.startswith("partitions[0].placementrules[0]") and error in e for e in info.value.errors), \
        info.value.errors


def test_a_filter_that_backtracks_takes_no_time_on_a_long_name():
    """Regression (a security review): filter `(a+)+` and one application of user `a...a!`
    (30 characters) froze the writer 18 s, each character more doubling it (40: about 5
    hours); a restart, replaying the entry, froze again. Matched in linear time now."""
    h = Harness()
    h.setup(RULES.replace("svc-.*", "(a+)+"), n1={"vcore": 4000})
    ok, rejected = placed(h, app("long", "", user="a" * 200 + "!"), app("svc", "", user="aaaa"))
    assert ok == {"svc": "root.groups.aaaa"}  # the deny filter matched `aaaa`: not placed by the user rule
    assert "user: queue root.users.aaaa" in rejected["long"]  # judged (not matched): the user rule was tried


QUALIFIED = """
partitions:
  - name: default
    placementrules:
      - {name: provided, create: true, parent: {name: fixed, value: root.p}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - {name: p, parent: true}
          - {name: a}
"""


def test_a_fully_qualified_provided_name_skips_the_parent_rule():
    """Regression: with a parent rule, `root.a` went to a new queue `root.p.root_dot_a`. As
    YuniKorn's provided rule: a name from root is the queue itself (the parent rule is not
    run); a partial one goes under the parent, its dots replaced."""
    h = Harness()
    h.setup(QUALIFIED, n1={"vcore": 4000})
    ok, rejected = placed(h, app("x", "root.a"), app("y", "team.one"), app("z", "ROOT.A"))
    assert (ok, rejected) == ({"x": "root.a", "y": "root.p.team_dot_one", "z": "root.a"}, {})
    assert not any("root_dot_" in q for q in queues(h))


def test_a_tag_from_root_skips_the_parent_rule_and_a_fixed_one_may_not_have_one():
    """Review: YuniKorn's tag rule takes a value from root as the queue; a fixed rule naming a
    queue from root with a parent rule is refused at load."""
    h = Harness()
    h.setup(QUALIFIED.replace("{name: provided, create: true, parent: {name: fixed, value: root.p}}",
                              "{name: tag, value: namespace, create: true, parent: {name: fixed, value: root.p}}"),
            n1={"vcore": 4000})
    ok, rejected = placed(h, app("x", "", tags={"namespace": "root.a"}), app("y", "", tags={"namespace": "etl.b"}))
    assert (ok, rejected) == ({"x": "root.a", "y": "root.p.etl_dot_b"}, {})
    with pytest.raises(ConfigError) as info:
        parse_config(load_yaml(QUALIFIED.replace("{name: provided, create: true, parent: {name: fixed, value: root.p}}",
                                                 "{name: fixed, value: root.a, parent: {name: fixed, value: root.p}}")))
    assert info.value.errors == ["partitions[0].placementrules[0].parent: a fixed rule naming a queue from root "
                                 "('root.a') has no parent rule (YuniKorn refuses it too)"]


def test_a_rejection_names_at_most_eight_reasons_an_acl_denial_among_them():
    rules = "".join(f"      - {{name: fixed, value: gone{i}}}\n" for i in range(9)) + "      - {name: fixed, value: shut}\n"
    cfg = ("partitions:\n  - name: default\n    placementrules:\n" + rules + "    queues:\n      - name: root\n"
           "        queues:\n          - name: shut\n            submitacl: carol\n")
    h = Harness()
    h.setup(cfg)
    _, rejected = placed(h, app("x", "", user="bob"))
    reason = rejected["x"]
    assert reason.count("fixed: queue root.gone") == 7 and "root.gone7 does not exist" not in reason
    assert reason.endswith("; denied by ACL: user 'bob' may not submit to queue root.shut: no submitacl or adminacl "
                           "up to root lets them in; and 2 more")
