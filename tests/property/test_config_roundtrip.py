"""Any valid queue configuration round-trips: parse -> dump -> parse gives it unchanged,
and the dump survives YAML (what `ykbus config` writes is what it reads). That includes
ykbus's own `topology.levels` (docs/topology.md)."""

import os

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ykbus.core.config import ConfigError, parse_config
from ykbus.core.configdump import dump_config

NAMES = st.sampled_from(["a", "b", "c", "dev", "prod", "Team-1", "x_y", "@q"])
USERS = st.sampled_from(["alice", "bob", "carol", "svc.etl", "*"])
GROUPS = st.sampled_from(["dev", "ops", "data", "*"])
ACL = st.one_of(
    st.just("*"), st.just(""), st.just(" "),
    st.builds(lambda u, g: ",".join(u) + (" " + ",".join(g) if g else ""),
              st.lists(st.sampled_from(["alice", "bob", "a.b@corp"]), max_size=2, unique=True),
              st.lists(st.sampled_from(["dev", "ops"]), max_size=2, unique=True)),
)
QUANTITY = st.sampled_from([1, 2, "500m", "1500m"])
MEMORY = st.sampled_from([1024, "1Gi", "2G", "10M"])
PROPERTIES = st.dictionaries(
    st.sampled_from(["application.sort.policy", "application.sort.priority", "priority.offset", "custom",
                     "ykbus.io/runtime.default", "ykbus.io/runtime.max", "preemption.minruntime"]),
    st.sampled_from(["fifo", "fair", "enabled", "disabled", "5", "x", "30m", "2h", "90s"]), max_size=2)


def resources():
    return st.fixed_dictionaries({}, optional={"vcore": QUANTITY, "memory": MEMORY})


def limit():
    return st.fixed_dictionaries(
        {"limit": st.sampled_from(["", "l1", "team cap"])},
        optional={"users": st.lists(USERS, min_size=1, max_size=2, unique=True),
                  "groups": st.lists(GROUPS, min_size=1, max_size=2, unique=True),
                  "maxresources": st.fixed_dictionaries({"vcore": st.sampled_from([1, 2])}),
                  "maxapplications": st.integers(1, 3)})


def queue(depth: int):
    children = st.lists(st.deferred(lambda: queue(depth + 1)), max_size=2 if depth < 2 else 0,
                        unique_by=lambda q: q["name"].lower())
    return st.fixed_dictionaries(
        {"name": NAMES},
        optional={
            "resources": st.fixed_dictionaries({}, optional={"guaranteed": resources(), "max": resources()}),
            "maxapplications": st.integers(0, 5),
            "properties": PROPERTIES,
            "submitacl": ACL,
            "adminacl": ACL,
            "limits": st.lists(limit(), max_size=2),
            "queues": children,
            "childtemplate": st.fixed_dictionaries({}, optional={
                "maxapplications": st.integers(1, 3), "properties": PROPERTIES,
                "resources": st.fixed_dictionaries({}, optional={"max": resources()})}),
        })


RULE = st.recursive(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["provided", "user", "primaryGroup", "secondaryGroup"])},
        optional={"create": st.booleans(),
                  "filter": st.fixed_dictionaries({"type": st.sampled_from(["allow", "deny"])}, optional={
                      "users": st.lists(st.sampled_from(["alice", "svc-.*"]), max_size=2, unique=True),
                      "groups": st.lists(st.sampled_from(["dev", "ops"]), max_size=2, unique=True)})}),
    lambda inner: st.fixed_dictionaries({"name": st.just("user"), "parent": inner}),
    max_leaves=2,
)

# a partition's topology levels: node attribute names, broadest first (now and then one not
# valid, or repeated: such a configuration does not parse and is skipped)
LEVEL = st.sampled_from(["ykbus.io/block", "ykbus.io/rack", "topology.kubernetes.io/zone", "si/hostname", "rack",
                         "a.b_c-d", "Rack1"])
TOPOLOGY = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"levels": st.lists(LEVEL, max_size=4, unique=True)}),
    st.fixed_dictionaries({"levels": st.lists(st.one_of(LEVEL, st.sampled_from(["rack row", "-rack", "/rack"])),
                                              max_size=3)}),
)

CONFIG = st.fixed_dictionaries({"partitions": st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(["default", "gpu"]),
     "queues": st.builds(lambda kids, acl: [{"name": "root", "submitacl": acl, "queues": kids}],
                         st.lists(queue(1), max_size=3, unique_by=lambda q: q["name"].lower()), ACL)},
    optional={"placementrules": st.lists(RULE, max_size=2),
              "nodesortpolicy": st.fixed_dictionaries({"type": st.sampled_from(["fair", "binpacking"])}),
              "limits": st.lists(limit(), max_size=2),
              "topology": TOPOLOGY}),
    min_size=1, max_size=2, unique_by=lambda p: p["name"])})


@settings(max_examples=int(os.environ.get("YKBUS_EXAMPLES", "200")), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(CONFIG)
def test_valid_configuration_round_trips(obj):
    try:
        config = parse_config(obj)
    except ConfigError:
        assume(False)
        return
    dumped = dump_config(config)
    for p, out in zip(config.partitions, dumped["partitions"], strict=True):  # levels written back, none: no key
        assert out.get("topology") == ({"levels": list(p.topology.levels)} if p.topology.levels else None)
    assert parse_config(dumped) == config
    assert parse_config(yaml.safe_load(yaml.safe_dump(dumped))) == config
