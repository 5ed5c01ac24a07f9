"""Queue configuration: quantities, the tree rules, and the exact error of each invalid case."""

import pytest

from ykbus.core.config import ConfigError, parse_config
from ykbus.core.resources import parse_quantity
from ykbus.yamlload import load_yaml


@pytest.mark.parametrize("resource,value,expected", [
    ("vcore", 10, 10000), ("vcore", "500m", 500), ("vcore", "2", 2000), ("vcore", 0.5, 500),
    ("memory", "1G", 10**9), ("memory", "1Gi", 2**30), ("memory", 1024, 1024), ("memory", "1.5Gi", 3 * 2**29),
    ("memory", "64Mi", 64 * 2**20), ("nvidia.com/gpu", 2, 2), ("memory", "2k", 2000), ("memory", "3Ki", 3072),
])
def test_quantities_parse_as_yunikorn_does(resource, value, expected):
    assert parse_quantity(resource, value) == expected


@pytest.mark.parametrize("resource,value,reason", [
    ("memory", "-1", "invalid quantity '-1': a quantity is not negative"),
    ("vcore", -2, "invalid quantity -2: a quantity is not negative"),
    ("memory", "-", "invalid quantity '-'$"),
    ("memory", "10-0", "invalid quantity '10-0'$"),  # not said to be negative (a review)
    ("memory", "1.5", "not a whole number"),
    ("memory", "100m", "the milli suffix is only for vcore"),
    ("memory", "lots", "invalid quantity 'lots'"),
    ("memory", True, "expected a quantity, got bool"),
    ("vcore", "0.0001", "not a whole number"),
])
def test_bad_quantities_say_why(resource, value, reason):
    with pytest.raises(ValueError, match=reason):
        parse_quantity(resource, value)


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(load_yaml(text))
    return info.value.errors


def q(body: str) -> str:
    return "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n" + body


INVALID = [
    ("dot in name", q("        queues:\n          - name: a.b\n"),
     ["partitions[0].queues[0].queues[0].name: queue name 'a.b' contains a dot"]),
    ("duplicate, case-insensitive", q("        queues:\n          - name: Team\n          - name: team\n"),
     ["partitions[0].queues[0].queues[1].name: duplicate queue name 'team' under partitions[0].queues[0]"]),
    ("resources on root", q("        resources: {max: {vcore: 1}}\n"),
     ["partitions[0].queues[0].resources: resources cannot be set on the root queue"]),
    ("guaranteed above max", q("        queues:\n          - name: a\n            resources: {guaranteed: {vcore: 2}, max: {vcore: 1}}\n"),
     ["partitions[0].queues[0].queues[0].resources: guaranteed vcore 2 cores exceeds max 1 core"]),
    ("child max above parent max", q(
        "        queues:\n          - name: p\n            resources: {max: {memory: 1G}}\n"
        "            queues:\n              - name: c\n                resources: {max: {memory: 2G}}\n"),
     ["partitions[0].queues[0].queues[0].queues[0].resources.max: memory 1.86 Gi exceeds the parent's max 953.67 Mi"]),
    ("children guaranteed above parent's", q(
        "        queues:\n          - name: p\n            resources: {guaranteed: {vcore: 2}}\n"
        "            queues:\n              - name: a\n                resources: {guaranteed: {vcore: 2}}\n"
        "              - name: b\n                resources: {guaranteed: {vcore: 1}}\n"),
     ["partitions[0].queues[0].queues[0].queues: the children's guaranteed vcore 3 cores exceeds the queue's 2 cores"]),
    # regressions (an outside review): guarantees that cannot be honoured, as YuniKorn refuses them
    ("children guaranteed above parent's max", q(
        "        queues:\n          - name: p\n            resources: {max: {vcore: 4}}\n"
        "            queues:\n              - name: a\n                resources: {guaranteed: {vcore: 3}}\n"
        "              - name: b\n                resources: {guaranteed: {vcore: 3}}\n"),
     ["partitions[0].queues[0].queues[0].queues: the children's guaranteed vcore 6 cores exceeds the queue's max 4 cores"]),
    ("grandchildren guaranteed above a guarantee, through a parent without one", q(
        "        queues:\n          - name: gp\n            resources: {guaranteed: {vcore: 2}}\n"
        "            queues:\n              - name: p\n"
        "                queues:\n                  - name: c\n                    resources: {guaranteed: {vcore: 3}}\n"),
     ["partitions[0].queues[0].queues[0].queues: the children's guaranteed vcore 3 cores exceeds the queue's 2 cores"]),
    # regressions (an outside review): a limit for someone below a lower limit for them, as YuniKorn refuses it
    ("a user's limit above theirs up the tree", q(
        "        queues:\n          - name: p\n            limits: [{users: [bob, amy], maxresources: {vcore: 2}, "
        "maxapplications: 3}]\n            queues:\n              - name: m\n                queues:\n"
        "                  - name: c\n                    limits: [{users: [bob], maxresources: {vcore: 4, memory: 1G}, "
        "maxapplications: 5}, {groups: [bob], maxresources: {vcore: 8}}]\n"),
     ["partitions[0].queues[0].queues[0].queues[0].queues[0].limits[0].maxresources: user 'bob': vcore 4 cores is above "
      "the limit for them up the tree, 2 cores",
      "partitions[0].queues[0].queues[0].queues[0].queues[0].limits[0].maxapplications: user 'bob': 5 is above the "
      "limit for them up the tree, 3"]),
    ("unknown sort policy", q("        queues:\n          - name: a\n            properties: {application.sort.policy: random}\n"),
     ["partitions[0].queues[0].queues[0].properties.application.sort.policy: unknown value 'random': expected one of fifo, fair, stateaware"]),
    ("unknown priority policy", q("        properties: {priority.policy: wall}\n"),
     ["partitions[0].queues[0].properties.priority.policy: unknown value 'wall': expected one of default, fence"]),
    ("unknown sort priority", q("        properties: {application.sort.priority: maybe}\n"),
     ["partitions[0].queues[0].properties.application.sort.priority: unknown value 'maybe': expected one of enabled, disabled"]),
    ("gang reserve neither true nor false", q("        properties: {ykbus.io/gang.reserve: sometimes}\n"),
     ["partitions[0].queues[0].properties.ykbus.io/gang.reserve: unknown value 'sometimes': expected one of true, false"]),
    ("unknown key", q("        maxapps: 3\n"), ["partitions[0].queues[0].maxapps: unknown key"]),
    ("bad quantity", q("        queues:\n          - name: a\n            resources: {max: {memory: 1.5}}\n"),
     ["partitions[0].queues[0].queues[0].resources.max.memory: invalid quantity 1.5: not a whole number"]),
    ("negative maxapplications", q("        maxapplications: -1\n"),
     ["partitions[0].queues[0].maxapplications: expected a non-negative integer, got -1"]),
    ("child maxapplications above parent's", q("        maxapplications: 2\n        queues:\n          - name: a\n            maxapplications: 3\n"),
     ["partitions[0].queues[0].queues[0].maxapplications: 3 exceeds the parent's 2"]),
    ("bad node sort", "partitions:\n  - name: default\n    nodesortpolicy: {type: random}\n",
     ["partitions[0].nodesortpolicy.type: unknown value 'random': expected one of fair, binpacking"]),
    ("no partitions", "other: 1\n", ["other: unknown key", "partitions: missing: at least one partition is required"]),
    ("duplicate partition", "partitions:\n  - name: a\n  - name: A\n", ["partitions[1].name: duplicate partition name 'a'"]),
    ("bad name characters", q("        queues:\n          - name: 'a b'\n"),
     ["partitions[0].queues[0].queues[0].name: queue name 'a b' must match ^[a-zA-Z0-9_:#/@-]{1,64}$"]),
    ("root as a leaf", q("        parent: false\n"), ["partitions[0].queues[0].parent: the root queue is always a parent"]),
    ("acl with two spaces", q("        adminacl: 'a b c'\n"),
     ["partitions[0].queues[0].adminacl: 'a b c': more than one space (expected 'users groups')"]),
    ("acl with a bad user name", q("        queues:\n          - name: a\n            submitacl: 'al!ce'\n"),
     ["partitions[0].queues[0].queues[0].submitacl: 'al!ce': user name 'al!ce' must match ^[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?$"]),
    ("acl not a string", q("        queues:\n          - name: a\n            submitacl: [a]\n"),
     ["partitions[0].queues[0].queues[0].submitacl: expected a string, got list"]),
    ("limit for nobody", q("        limits: [{maxapplications: 1}]\n"),
     ["partitions[0].queues[0].limits[0]: a limit needs users or groups"]),
    ("limit without a limit", q("        limits: [{users: [a], limit: x}]\n"),
     ["partitions[0].queues[0].limits[0]: a limit needs maxresources or maxapplications"]),
    ("limit above the queue's max", q("        queues:\n          - name: a\n            resources: {max: {vcore: 2}}\n"
                                      "            limits: [{groups: [g], maxresources: {vcore: 3}}]\n"),
     ["partitions[0].queues[0].queues[0].limits[0].maxresources: vcore 3 cores exceeds the queue's max 2 cores"]),
    ("limit maxapplications above the queue's", q("        maxapplications: 2\n        limits: [{users: ['*'], maxapplications: 3}]\n"),
     ["partitions[0].queues[0].limits[0].maxapplications: 3 exceeds the queue's 2"]),
    ("user in two limits", q("        limits: [{users: [a], maxapplications: 1}, {users: [b, a], maxapplications: 2}]\n"),
     ["partitions[0].queues[0].limits[1]: user 'a' already has a limit in partitions[0].queues[0].limits[0]"]),
    ("limits on partition and root", "partitions:\n  - name: default\n    limits: [{users: [a], maxapplications: 1}]\n"
     "    queues:\n      - name: root\n        limits: [{users: [b], maxapplications: 1}]\n",
     ["partitions[0].limits: limits are set on both the partition and partitions[0].queues[0]"]),
    ("template on a leaf", q("        queues:\n          - name: a\n            childtemplate: {maxapplications: 1}\n"),
     ["partitions[0].queues[0].queues[0].childtemplate: only a parent queue has a child template"]),
    ("template above the queue's max", q("        queues:\n          - name: p\n            parent: true\n"
                                         "            resources: {max: {vcore: 1}}\n"
                                         "            childtemplate: {resources: {max: {vcore: 2}}, maxapps: 1}\n"),
     ["partitions[0].queues[0].queues[0].childtemplate.maxapps: unknown key",
      "partitions[0].queues[0].queues[0].childtemplate.resources.max: vcore 2 cores exceeds the queue's max 1 core"]),
    ("topology: unknown key", "partitions:\n  - name: default\n    topology: {levels: [rack], zones: [a]}\n",
     ["partitions[0].topology.zones: unknown key"]),
    ("topology: not a mapping", "partitions:\n  - name: default\n    topology: [rack]\n",
     ["partitions[0].topology: expected a mapping, got list"]),
    ("topology: levels not a list", "partitions:\n  - name: default\n    topology: {levels: ykbus.io/rack}\n",
     ["partitions[0].topology.levels: expected a list, got str"]),
    ("topology: a repeated level",
     "partitions:\n  - name: default\n    topology: {levels: [ykbus.io/block, ykbus.io/rack, ykbus.io/block]}\n",
     ["partitions[0].topology.levels[2]: level 'ykbus.io/block' is repeated (levels[0])"]),
    ("topology: too many levels", "partitions:\n  - name: default\n    topology: {levels: [l1, l2, l3, l4, l5, l6, l7, l8, l9]}\n",
     ["partitions[0].topology.levels: 9 levels, at most 8"]),
    ("topology: not attribute names",
     "partitions:\n  - name: default\n    topology: {levels: ['rack row', Ykbus.io/rack, 7, /rack]}\n",
     ["partitions[0].topology.levels[0]: 'rack row' is not a valid attribute name: its name must be 1 to 63 letters, "
      "digits, '-', '_' or '.', starting and ending with a letter or digit",
      "partitions[0].topology.levels[1]: 'Ykbus.io/rack' is not a valid attribute name: its prefix must be a DNS "
      "subdomain (lower-case letters, digits, '-' and '.')",
      "partitions[0].topology.levels[2]: expected a node attribute name, got int",
      "partitions[0].topology.levels[3]: '/rack' is not a valid attribute name: its prefix must be a DNS subdomain "
      "(lower-case letters, digits, '-' and '.')"]),
    ("runtime: bad durations", q("        properties: {ykbus.io/runtime.default: soon, ykbus.io/runtime.max: 1d,\n"
                                 "                     preemption.minruntime: '5 minutes'}\n"),
     ["partitions[0].queues[0].properties.ykbus.io/runtime.default: expected a duration (2s, 500ms, 1m30s, or seconds), got 'soon'",
      "partitions[0].queues[0].properties.ykbus.io/runtime.max: expected a duration (2s, 500ms, 1m30s, or seconds), got '1d'",
      "partitions[0].queues[0].properties.preemption.minruntime: expected a duration (2s, 500ms, 1m30s, or seconds), "
      "got '5 minutes'"]),
    ("runtime: negative", q("        properties: {ykbus.io/runtime.max: -2h, preemption.minruntime: -1}\n"),
     ["partitions[0].queues[0].properties.ykbus.io/runtime.max: '-2h' is negative: expected a duration from 0 to "
      "1000000000000 ms",
      "partitions[0].queues[0].properties.preemption.minruntime: '-1' is negative: expected a duration from 0 to "
      "1000000000000 ms"]),
    ("runtime: a limit of 0", q("        properties: {ykbus.io/runtime.default: 0s}\n"),
     ["partitions[0].queues[0].properties.ykbus.io/runtime.default: '0s': a runtime limit must be more than 0 "
      "(leave it out for none)"]),
    ("runtime: default above max on one queue", q("        properties: {ykbus.io/runtime.default: 3h, ykbus.io/runtime.max: 2h}\n"),
     ["partitions[0].queues[0].properties.ykbus.io/runtime.default: '3h' is above the maximum runtime '2h' "
      "(ykbus.io/runtime.max set here)"]),
    ("runtime: default above an inherited max", q(
        "        properties: {ykbus.io/runtime.max: 1h}\n        queues:\n          - name: a\n"
        "            properties: {ykbus.io/runtime.default: 90m}\n"),
     ["partitions[0].queues[0].queues[0].properties.ykbus.io/runtime.default: '90m' is above the maximum runtime '1h' "
      "(ykbus.io/runtime.max set on root)"]),
    ("runtime: max below an inherited default", q(
        "        queues:\n          - name: p\n            properties: {ykbus.io/runtime.default: 30m}\n"
        "            queues:\n              - name: c\n                properties: {ykbus.io/runtime.max: 20m}\n"),
     ["partitions[0].queues[0].queues[0].queues[0].properties.ykbus.io/runtime.max: '20m' is below the default runtime "
      "'30m' (ykbus.io/runtime.default set on root.p): set ykbus.io/runtime.default beside it"]),
    ("runtime: a child template's max below the default", q(
        "        properties: {ykbus.io/runtime.default: 1h}\n        queues:\n          - name: t\n"
        "            parent: true\n            childtemplate: {properties: {ykbus.io/runtime.max: 10m}}\n"),
     ["partitions[0].queues[0].queues[0].childtemplate.properties.ykbus.io/runtime.max: '10m' is below the default "
      "runtime '1h' (ykbus.io/runtime.default set on root): set ykbus.io/runtime.default beside it"]),
]


@pytest.mark.parametrize("name,text,expected", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_configuration_gives_exact_errors(name, text, expected):
    assert errors_of(text) == expected


RULED = "partitions:\n  - name: default\n    placementrules:\n{rules}    queues:\n      - name: root\n" \
        "        submitacl: '*'\n        queues:\n          - name: leaf\n          - name: par\n" \
        "            parent: true\n"


@pytest.mark.parametrize("rules,expected", [
    ("      - {name: user, create: true, parent: {name: fixed, value: root.leaf}}\n",
     "partitions[0].placementrules[0].parent.value: queue root.leaf is a leaf queue: a parent rule names a parent"),
    ("      - {name: fixed, value: par}\n",
     "partitions[0].placementrules[0].value: queue root.par is a parent queue: a rule places in a leaf"),
    ("      - {name: fixed, value: 'root.a b'}\n",
     "partitions[0].placementrules[0].value: 'a b' is not a queue name (1 to 64 of letters, digits and _:#/@-)"),
])
def test_a_fixed_rule_that_can_never_place_is_refused(rules, expected):
    """Regression (an outside review): these were accepted, and every application then fell
    through the rule at run time (YuniKorn's checkPlacementRules refuses them)."""
    assert errors_of(RULED.format(rules=rules)) == [expected]
    fine = "      - {name: user, create: true, parent: {name: fixed, value: root.par}}\n      - {name: fixed, value: leaf}\n"
    parse_config(load_yaml(RULED.format(rules=fine)))


def test_every_error_is_listed_not_just_the_first():
    text = q("        resources: {max: {vcore: 1}}\n        queues:\n          - name: a.b\n          - name: c\n            properties: {priority.policy: x}\n")
    assert len(errors_of(text)) == 3


def test_implicit_root_wraps_top_level_queues():
    cfg = parse_config(load_yaml("partitions:\n  - name: default\n    queues:\n      - name: a\n      - name: b\n"))
    root = cfg.partitions[0].root
    assert root.name == "root" and root.parent and [c.name for c in root.queues] == ["a", "b"]


def test_names_are_lower_cased_and_yunikorn_keys_accepted():
    text = """
partitions:
  - name: Default
    placementrules:
      - name: provided
        create: true
    limits: []
    preemption: {enabled: false}
    queues:
      - name: root
        submitacl: '*'
        adminacl: ' '
        queues:
          - name: Prod
            parent: true
            childtemplate: {}
            limits: []
"""
    cfg = parse_config(load_yaml(text))
    assert cfg.partitions[0].name == "default"
    prod = cfg.partitions[0].root.queues[0]
    assert prod.name == "prod" and prod.parent


def test_unparsable_priority_offset_counts_as_zero():
    from ykbus.core.config import parse_offset
    assert parse_offset("100") == 100 and parse_offset("") == 0 and parse_offset("x") == 0
    assert parse_offset(str(2**31)) == 0 and parse_offset("-5") == -5


@pytest.mark.parametrize("weight", [".inf", "-.inf", ".nan", "-1"])
def test_a_resource_weight_that_is_not_a_finite_number_at_least_0_is_refused(weight):
    policy = "{type: fair, resourceweights: {vcore: " + weight + "}}"
    text = f"partitions:\n  - name: default\n    nodesortpolicy: {policy}\n    queues:\n      - name: root\n"
    [error] = errors_of(text)
    assert error.startswith("partitions[0].nodesortpolicy.resourceweights.vcore: expected a finite number >= 0")


def test_topology_levels_are_parsed_into_the_partition_config_and_default_to_none():
    from ykbus.core.config import TopologyConfig
    text = "partitions:\n  - name: default\n    topology:\n      levels: [ykbus.io/block, ykbus.io/rack, si/hostname]\n"
    cfg = parse_config(load_yaml(text))
    assert cfg.partitions[0].topology == TopologyConfig(levels=("ykbus.io/block", "ykbus.io/rack", "si/hostname"))
    plain = parse_config(load_yaml("partitions:\n  - name: default\n"))
    assert plain.partitions[0].topology == TopologyConfig() and plain.partitions[0].topology.levels == ()
    assert parse_config(load_yaml("partitions:\n  - name: default\n    topology: {}\n")).partitions[0].topology.levels == ()


def test_a_partition_config_stored_before_topology_reads_back_with_no_levels():
    """A snapshot written before the key existed (its PartitionConfig has no `topology`)."""
    import msgspec

    from ykbus.core.config import PartitionConfig, TopologyConfig
    cfg = parse_config(load_yaml("partitions:\n  - name: default\n")).partitions[0]
    stored = msgspec.json.decode(msgspec.json.encode(cfg))
    del stored["topology"]
    assert msgspec.json.decode(msgspec.json.encode(stored), type=PartitionConfig) == cfg
    assert msgspec.json.decode(msgspec.json.encode(stored), type=PartitionConfig).topology == TopologyConfig()


def test_yunikorns_dump_of_the_configuration_leaves_the_topology_out():
    """`GET /ws/v1/config` (YAML and JSON) is YuniKorn's: ykbus's own `topology` is not in it."""
    from types import SimpleNamespace

    from ykbus.rest import ops
    with_topology = ("partitions:\n  - name: default\n    topology: {levels: [ykbus.io/rack]}\n"
                     "    queues:\n      - name: root\n        submitacl: '*'\n")
    without = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
    parse_config(load_yaml(with_topology))

    def rm(text):
        return SimpleNamespace(config_text=text, partitions={}, extra_config={})

    yaml_dump = ops.config_yaml(rm(with_topology)).decode()
    assert "topology" not in yaml_dump and "rack" not in yaml_dump
    assert yaml_dump.replace(ops.checksum(with_topology), "X") == ops.config_yaml(rm(without)).decode().replace(
        ops.checksum(without), "X")
    json_dump = ops.config_json(rm(with_topology))
    assert "topology" not in json_dump["Partitions"][0]
    assert {k: v for k, v in json_dump.items() if k != "Checksum"} == \
        {k: v for k, v in ops.config_json(rm(without)).items() if k != "Checksum"}


def test_topology_levels_survive_a_dump_and_a_parse():
    """configdump writes the ykbus-only `topology` key back (YuniKorn's REST dump leaves it
    out: rest/ops.py), so a configuration with levels round-trips."""
    from ykbus.core.configdump import dump_config
    config = parse_config({"partitions": [{"name": "default", "queues": [{"name": "root"}],
                                           "topology": {"levels": ["ykbus.io/block", "ykbus.io/rack"]}}]})
    dumped = dump_config(config)
    assert dumped["partitions"][0]["topology"] == {"levels": ["ykbus.io/block", "ykbus.io/rack"]}
    assert parse_config(dumped) == config


RUNTIMES = q("        properties: {ykbus.io/runtime.default: 30m, preemption.minruntime: 5m}\n"
             "        queues:\n"
             "          - name: batch\n"
             "            properties: {ykbus.io/runtime.max: 2h}\n"
             "            queues:\n"
             "              - name: short\n"
             "                properties: {ykbus.io/runtime.default: 10m, ykbus.io/runtime.max: 1h, preemption.minruntime: 0}\n"
             "          - name: open\n")


def test_runtime_properties_are_inherited_from_the_nearest_queue_that_sets_them():
    from ykbus.core.runtimeprops import RuntimeLimits, queue_runtime_limits, runtime_limits
    part = parse_config(load_yaml(RUNTIMES)).partitions[0].root
    m = 60_000
    assert queue_runtime_limits(part, "root") == RuntimeLimits(30 * m, 0, 5 * m)
    assert queue_runtime_limits(part, "root.batch") == RuntimeLimits(30 * m, 120 * m, 5 * m)
    assert queue_runtime_limits(part, "root.batch.short") == RuntimeLimits(10 * m, 60 * m, 0)
    assert queue_runtime_limits(part, "root.open") == RuntimeLimits(30 * m, 0, 5 * m)
    assert runtime_limits([]) == RuntimeLimits()  # nothing set anywhere: no limits
    # an unmanaged queue: its template's properties, then its parent's path
    assert runtime_limits([{"ykbus.io/runtime.max": "45m"}, {"ykbus.io/runtime.default": "30m"}]) == \
        RuntimeLimits(30 * m, 45 * m, 0)
    with pytest.raises(KeyError):
        queue_runtime_limits(part, "root.nothere")


def test_runtime_properties_survive_a_dump_and_a_parse():
    from ykbus.core.configdump import dump_config
    config = parse_config(load_yaml(RUNTIMES))
    dumped = dump_config(config)
    props = dumped["partitions"][0]["queues"][0]["queues"][0]["queues"][0]["properties"]
    assert props == {"ykbus.io/runtime.default": "10m", "ykbus.io/runtime.max": "1h", "preemption.minruntime": "0"}
    assert parse_config(dumped) == config


def test_yunikorns_dump_shows_the_runtime_properties_as_strings():
    """Properties are strings in YuniKorn (map[string]string): a number or a boolean written
    in queues.yaml is dumped as its text, as YuniKorn does; ykbus's keys are kept as any
    property YuniKorn does not know."""
    from types import SimpleNamespace

    from ykbus.rest import ops
    text = q("        properties: {ykbus.io/runtime.max: 2h, preemption.minruntime: 300, x: true, y: 1.5}\n")
    parse_config(load_yaml(text))
    rm = SimpleNamespace(config_text=text, partitions={}, extra_config={})
    props = ops.config_json(rm)["Partitions"][0]["Queues"][0]["Properties"]
    assert props == {"ykbus.io/runtime.max": "2h", "preemption.minruntime": "300", "x": "true", "y": "1.5"}
    assert 'preemption.minruntime: "300"' in ops.config_yaml(rm).decode()  # quoted, as Go writes a string


@pytest.mark.parametrize("levels, name", [(["rack\n"], "rack\n"), (["ykbus.io/rack\n"], "ykbus.io/rack\n"),
                                          (["ykbus.io\n/rack"], "ykbus.io\n/rack")])
def test_a_topology_level_or_queue_name_with_a_trailing_newline_is_refused(levels, name):
    # regression (the fuzz suite): `$` matched before a trailing newline, so these were accepted
    with pytest.raises(ConfigError, match="topology.levels"):
        parse_config({"partitions": [{"name": "default", "queues": [{"name": "root"}], "topology": {"levels": levels}}]})
    with pytest.raises(ConfigError):
        parse_config({"partitions": [{"name": "default", "queues": [{"name": "root", "queues": [{"name": "a\n"}]}]}]})


def test_maxapplications_past_int64_is_refused_naming_the_field():
    """A maxapplications of 10^26 was taken, and every snapshot failed after it (msgpack
    writes at most 64-bit integers)."""
    text = q("        maxapplications: 99999999999999999999999999\n")
    with pytest.raises(ConfigError) as info:
        parse_config(load_yaml(text))
    assert "partitions[0].queues[0].maxapplications: at most 9223372036854775807" in str(info.value)


# --- an RM's own configuration while the service's queue file is in force --------------

OWN = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: %s}]}]}]"


def _queues_of(h):
    return sorted(h.core.dump()["rms"]["rm-1"]["partitions"]["default"]["queues"])


def _noted(outs):
    return [e.message for o in outs if o.kind == "event" for e in o.msg.events]


def test_a_configuration_an_rm_sends_under_a_queue_file_comes_back_when_the_file_is_withdrawn():
    """Regression (an outside review): an RM's update sent while the service's queue file was
    in force was dropped, and withdrawing the file brought back the RM's older configuration."""
    from tests.conftest import Harness

    h = Harness()
    h.do(h.log.entry("config", {"policyGroup": "queues", "config": OWN % "file"}, rm=""))
    h.setup(OWN % "first")
    assert "root.file" in _queues_of(h)
    outs = h.do(h.log.config(OWN % "latest"))
    assert any("configuration kept, not applied" in t and "if the file is withdrawn" in t for t in _noted(outs))
    assert "root.file" in _queues_of(h)
    outs = h.do(h.log.config(""))  # "apply my own again": nothing kept
    assert _noted(outs) == ["configuration not applied: the service's queue file for policy group 'queues' is in force"]
    outs = h.do(h.log.config(OWN % "bad.name"))  # an invalid one is rejected, not kept
    assert any(t.startswith("configuration rejected: ") and "bad.name" in t for t in _noted(outs))
    h.do(h.log.entry("config", {"policyGroup": "queues", "config": ""}, rm=""))
    assert "root.latest" in _queues_of(h) and "root.first" not in _queues_of(h)


def test_an_rm_whose_own_configuration_is_invalid_registers_under_the_queue_file_in_force():
    """Regression (an outside review): the RM was refused outright, though the operator's file
    replaces what it sends: a broken shim configuration is when an operator reaches for one."""
    from tests.conftest import Harness

    h = Harness()
    h.do(h.log.entry("config", {"policyGroup": "queues", "config": OWN % "file"}, rm=""))
    outs = h.do(h.log.register(OWN % "bad.name"))
    reg = [o.msg for o in outs if o.kind == "register"]
    assert reg and not reg[0].error, reg
    assert any("its own configuration is invalid, the service's queue file for policy group 'queues' applies: "
               in t and "bad.name" in t for t in _noted(outs))
    assert "root.file" in _queues_of(h)
    h.do(h.log.entry("config", {"policyGroup": "queues", "config": ""}, rm=""))  # withdrawn: the default one
    assert _queues_of(h) == ["root", "root.default"]


def test_a_child_with_a_guarantee_of_its_own_counts_that_not_its_childrens():
    """As YuniKorn's checkQueueResource counts it (regression, a review: a child guaranteeing
    memory only passed its children's vcore up too, and a configuration YuniKorn takes was
    refused)."""
    text = q("        queues:\n          - name: a\n            resources: {max: {vcore: 10}}\n            queues:\n"
             + "".join(f"              - name: b{i}\n                resources: {{guaranteed: {{memory: 1G}}}}\n"
                       "                queues:\n"
                       + "".join(f"                  - name: c{j}\n                    resources: "
                                 "{guaranteed: {vcore: 4}}\n" for j in range(2)) for i in range(2)))
    parse_config(load_yaml(text))


def test_a_limit_below_a_lower_one_is_refused_but_the_least_on_the_way_is_what_counts():
    """A child's limit at or under the nearest above is fine, and a limit in between lowers
    what a queue further down is held to (the least on the way, as YuniKorn carries it)."""
    def tree(top: int, mid: int, low: int) -> str:
        def lim(v: int) -> str:
            return "limits: [{users: ['*'], maxresources: {vcore: " + str(v) + "}}]\n"
        return q(f"        {lim(top)}        queues:\n          - name: a\n            {lim(mid)}            queues:\n"
                 f"              - name: b\n                {lim(low)}")
    parse_config(load_yaml(tree(8, 4, 4)))
    assert errors_of(tree(8, 4, 6)) == ["partitions[0].queues[0].queues[0].queues[0].limits[0].maxresources: user '*': "
                                        "vcore 6 cores is above the limit for them up the tree, 4 cores"]
