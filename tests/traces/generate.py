"""Writes the golden traces: `<name>.in.jsonl` (built here) and `<name>.out.jsonl` (replayed).

Run `python tests/traces/generate.py` after a deliberate behaviour change, read the diff of
the .out.jsonl files, and commit both. tests/test_traces.py fails when they drift.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ykbus.log.build import GB, LogBuilder, allocation, app, ask, node
from ykbus.log.jsonl import encode_entry, read_entries
from ykbus.log.replay import replay_file

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))  # the configurations the unit tests use, written once
from tests.core.test_access import ACLS, LIMITS, RULES_ACL, TEMPLATE  # noqa: E402
from tests.core.test_backfill import PREEMPTION as MINRUNTIME  # noqa: E402
from tests.core.test_gang import confirmation, gang, ph, real  # noqa: E402
from tests.core.test_gang_reserve import QUEUES as GANG_RESERVE  # noqa: E402
from tests.core.test_placement import RULES  # noqa: E402
from tests.core.test_topology_gangs import QUEUES as TOPOLOGY  # noqa: E402

BASIC = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
            resources: {guaranteed: {memory: 8G, vcore: 8}}
          - name: dev
            resources: {max: {memory: 4G, vcore: 4}}
            maxapplications: 2
"""


def registration(log: LogBuilder):
    yield log.register(BASIC)
    yield log.register("partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a.b}, {name: c, resources: {guaranteed: {vcore: 2}, max: {vcore: 1}}}]}]}]")
    yield log.register(BASIC, rm="rm-2", policy_group="batch")
    yield log.register("", rm="rm-3", policy_group="batch")
    yield log.entry("register", {"rmID": "bad.id"}, rm="")
    yield log.nodes(node("n1", vcore=4000, memory=4 * GB))
    yield log.apps(app("a1", "prod"))
    yield log.asks(ask("k1", "a1", vcore=1000, memory=GB))
    yield log.register(BASIC)  # wipes rm-1: a full resync is expected
    yield log.asks(ask("k2", "a1", vcore=1000))
    yield log.entry("unregister", {}, rm="rm-2")
    yield log.apps(app("x", "prod"), rm="rm-2")


def queues(log: LogBuilder):
    yield log.register("""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            resources: {max: {vcore: 3}}
            queues:
              - name: a
                resources: {guaranteed: {vcore: 1}}
              - name: b
                resources: {guaranteed: {vcore: 2}}
                maxapplications: 1
""")
    yield log.nodes(node("n1", vcore=8000, memory=8 * GB))
    yield log.apps(app("a1", "root.team.a"), app("b1", "root.team.b"), app("b2", "root.team.b"), app("p", "root.team"))
    yield log.asks(ask("ka", "a1", vcore=1000, max_allocations=3), ask("kb1", "b1", vcore=1000, max_allocations=2),
                   ask("kb2", "b2", vcore=1000))
    yield log.release("b1")
    yield log.release("a1")


def nodes(log: LogBuilder):
    yield log.register(BASIC)
    yield log.nodes(node("n1", vcore=4000, memory=4 * GB, attributes={"si/hostname": "n1"}),
                    node("n2", vcore=4000, memory=4 * GB, occupied={"vcore": 3000}),
                    node("n1", vcore=1), node("n3", action="UPDATE", vcore=1), {"nodeID": "n4"})
    yield log.apps(app("a1", "prod"))
    yield log.asks(ask("k", "a1", vcore=1000, memory=GB, max_allocations=6))
    yield log.nodes(node("n2", action="UPDATE", occupied={}))
    yield log.nodes(node("n1", action="DRAIN_NODE"), node("n1", action="DRAIN_NODE"))
    yield log.release("a1", key="k")
    yield log.asks(ask("k2", "a1", vcore=1000, max_allocations=2))
    yield log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE"), node("n2", action="DRAIN_TO_SCHEDULABLE"))
    yield log.nodes(node("n2", action="DECOMISSION"))
    yield log.nodes(node("n1", action="UPDATE", vcore=8000, memory=8 * GB))


def recovery(log: LogBuilder):
    yield log.register(BASIC)
    yield log.apps(app("spark", "prod"), app("nb", "dev"))  # applications first (seed)
    yield log.nodes(node("n1", vcore=8000, memory=8 * GB, existing=[
        allocation("rm-uuid-1", "driver", "spark", "n1", vcore=1000, memory=2 * GB),
        allocation("rm-uuid-2", "exec-1", "spark", "n1", vcore=2000, memory=2 * GB),
        allocation("rm-uuid-3", "kernel", "ghost", "n1", vcore=1000),
        allocation("rm-uuid-1", "dup", "spark", "n1", vcore=1000),
    ]))
    yield log.nodes(node("n2", vcore=8000, memory=8 * GB, existing=[
        allocation("rm-uuid-4", "kernel-1", "nb", "n2", vcore=4000, memory=4 * GB)]))
    yield log.asks(ask("kernel-2", "nb", vcore=1000, memory=GB), ask("exec-2", "spark", vcore=4000, memory=2 * GB))
    yield log.release("spark", uuid="rm-uuid-2")


def applications(log: LogBuilder):
    yield log.register(BASIC)
    yield log.nodes(node("n1", vcore=4000, memory=4 * GB))
    yield log.apps(app("a1", "prod"), app("a1", "prod"), app("a2", "nope"), app("a3", "root"), app("a4", ""),
                   app("t1", "prod", executionTimeoutMilliSeconds=2000))
    yield log.asks(ask("k1", "a1", vcore=1000), ask("t", "t1", vcore=1000))
    yield log.release("a1")
    yield log.asks(ask("k2", "a1", vcore=1000))
    yield log.release_ask("a1")
    yield log.tick(10**9)
    yield log.tick(2 * 10**9)
    yield log.tick(30 * 10**9)
    yield log.remove_apps("a1", "nope")
    yield log.tick(3 * 24 * 3600 * 10**9)


def asks(log: LogBuilder):
    yield log.register(BASIC)
    yield log.nodes(node("n1", vcore=3000, memory=3 * GB))
    yield log.apps(app("a1", "prod"))
    yield log.nodes(node("n1", action="DRAIN_NODE"))
    yield log.asks(ask("low", "a1", vcore=1000, priority=-5), ask("mid", "a1", vcore=1000, max_allocations=2),
                   ask("high", "a1", vcore=1000, priority=100), ask("bad", "a1", vcore=-1),
                   ask("none", "a1"), ask("orphan", "zz", vcore=1),
                   {"allocationKey": "nokey-app", "resourceAsk": {"resources": {"vcore": {"value": 1}}}})
    yield log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE"))
    yield log.asks(ask("mid", "a1", vcore=1000, max_allocations=1))
    yield log.release_ask("a1", "low")
    yield log.release_ask("a1", "low")
    yield log.nodes(node("n2", vcore=2000, memory=GB))
    yield log.asks({**ask("timed", "a1", vcore=1, memory=1), "executionTimeoutMilliSeconds": 100})
    yield log.tick(200_000_000)


def priority(log: LogBuilder):
    yield log.register("""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: system
          - name: tenant1
            properties: {priority.policy: fence}
            queues:
              - name: queueA
                properties: {priority.policy: fence}
              - name: queueB
          - name: tenant2
            properties: {priority.offset: 50}
            queues:
              - name: queue1
              - name: queue2
                properties: {application.sort.priority: disabled}
""")
    yield log.nodes(node("n1", vcore=1000))
    yield log.nodes(node("n1", action="DRAIN_NODE"))
    yield log.apps(app("sys", "system"), app("t1a", "tenant1.queueA"), app("t1b", "tenant1.queueB"),
                   app("t2q1", "tenant2.queue1"), app("t2q2-old", "tenant2.queue2"), app("t2q2-vip", "tenant2.queue2"))
    yield log.asks(ask("s", "sys", vcore=1000, priority=60), ask("a", "t1a", vcore=1000, priority=1000),
                   ask("b", "t1b", vcore=1000, priority=5), ask("q1", "t2q1", vcore=1000, priority=20),
                   ask("old", "t2q2-old", vcore=1000), ask("vip", "t2q2-vip", vcore=1000, priority=99))
    yield log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE"))
    # each winner finishes in turn: old, vip (tenant2 149 = 99 + 50), q1 (70), s (60), b, a
    for winner in ["t2q2-old", "t2q2-vip", "t2q1", "sys", "t1b"]:
        yield log.release(winner)


def nodesort(log: LogBuilder):
    yield log.register(BASIC)
    yield log.register(BASIC.replace("    queues:\n", "    nodesortpolicy: {type: binpacking}\n    queues:\n", 1), rm="rm-bp")
    for rm in ("rm-1", "rm-bp"):
        yield log.nodes(*[node(f"n{i}", vcore=4000, memory=4 * GB) for i in range(1, 4)], rm=rm)
        yield log.apps(app("a", "prod"), rm=rm)
        yield log.asks(ask("k", "a", vcore=1000, memory=GB, max_allocations=5), rm=rm)


def bad_input(log: LogBuilder):
    yield log.register(BASIC)
    yield log.entry("app", b"{not json")
    yield log.entry("node", b'{"nodes": 5}')
    yield log.entry("alloc", b"[1, 2]")
    yield log.entry("weird", {})
    yield log.entry("register", b'{"rmID": 7}')
    yield log.entry("node", {"nodes": [{"nodeID": "n1", "action": 1,
                                        "schedulableResource": {"resources": {"vcore": {"value": "4000"}}}}]})
    yield log.apps(app("a1", "prod"))
    yield log.entry("alloc", {"asks": [{"allocationKey": "k", "applicationID": "a1",
                                        "resourceAsk": {"resources": {"vcore": {"value": "1000"}}}}],
                              "releases": {"allocationsToRelease": [{"UUID": 5}]}})
    yield log.entry("alloc", {"rmID": "someone-else", "asks": [ask("k2", "a1", vcore=1)]})
    yield log.config("partitions: [{name: default, queues: [{name: root, submitacl: '*', resources: {max: {vcore: 1}}}]}]")
    yield log.apps(app("a2", "prod"))


def placement(log: LogBuilder):
    yield log.register(RULES)
    yield log.nodes(node("n1", vcore=8000, memory=8 * GB))
    yield log.apps(app("a", "root.prod", user="alice"), app("b", "", user="bob.smith"),
                   app("c", "", user="svc-etl", tags={"namespace": "etl"}),
                   app("d", "root.nope", user="svc-x", groups=["ml"]), app("e", "", user="svc-y"))
    yield log.asks(ask("kb", "b", vcore=1000), ask("kc", "c", vcore=1000))
    yield log.remove_apps("b", "c")
    yield log.apps(app("b2", "", user="bob.smith"))


def rules(log: LogBuilder):
    """The rules and filters the placement trace does not use: fixed as a rule, secondaryGroup,
    an allow filter with a user list and with a group regex, a tag-named parent."""
    yield log.register("""
partitions:
  - name: default
    placementrules:
      - name: fixed
        value: vip
        filter: {type: allow, users: [ceo, cto]}
      - name: secondaryGroup
        filter: {groups: ['team-.*']}
      - name: user
        create: true
        parent: {name: tag, value: department, create: true}
      - name: fixed
        value: root.default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: vip
          - name: default
          - name: team-x
""")
    yield log.nodes(node("n1", vcore=8000, memory=8 * GB))
    yield log.apps(app("a", "", user="ceo"),                                       # fixed, allowed
                   app("b", "", user="dev1", groups=["team-y", "team-z", "team-x"]),  # secondary: x exists
                   app("c", "", user="dev2", groups=["team-x"]),                    # only a primary group
                   app("d", "", user="ann.lee", tags={"department": "sales.eu"}),  # user under a tag parent
                   app("e", "", user="cto", groups=["ops"]))                        # fixed, allowed


def access(log: LogBuilder):
    """ACL forms, a rule falling through on a denial, the recovery queue, child templates."""
    yield log.register(ACLS)
    yield log.nodes(node("n1", vcore=8000, memory=8 * GB))
    yield log.apps(app("a", "root.open", user="anyone"), app("b", "root.team", user="alice"),
                   app("c", "root.team", user="carol", groups=["data"]), app("d", "root.ops", user="bob"),
                   app("e", "root.closed", user="admin"), app("f", "root.closed", user="alice"),
                   app("r", "root.gone", user="x", tags={"application.create.force": "true"}),
                   app("g1", "root.empty", user="x"), app("g2", "root.space", user="x"),
                   app("g3", "root.groupsonly", user="data"), app("g4", "root.groupsonly", user="y", groups=["data"]),
                   app("g5", "root.empty", user="admin"))
    yield log.asks(ask("kr", "r", vcore=1000), ask("ka", "a", vcore=1000))
    yield log.config(RULES_ACL)
    yield log.apps(app("u1", "", user="alice"), app("u2", "", user="bob"))
    yield log.config(TEMPLATE)
    yield log.apps(app("t1", "", user="alice"))
    yield log.asks(ask("kt", "t1", vcore=1000, max_allocations=3))


def limits(log: LogBuilder):
    """User and group limits: maxresources, maxapplications, wildcards, first group, reload."""
    yield log.register(LIMITS)
    yield log.nodes(node("n1", vcore=32000, memory=32 * GB))
    yield log.apps(app("a1", "root.a", user="alice"), app("a2", "root.a", user="alice"),
                   app("b1", "root.b", user="bob"), app("d1", "root.a", user="dave", groups=["web", "data"]),
                   app("w1", "root.a", user="w1", groups=["web"]), app("w2", "root.a", user="w2", groups=["web"]),
                   app("w3", "root.a", user="w3", groups=["web"]))
    yield log.asks(ask("k1", "a1", vcore=1000, max_allocations=3), ask("k2", "a2", vcore=1000),
                   ask("kb", "b1", vcore=1000, max_allocations=5), ask("kd", "d1", vcore=1000, max_allocations=4),
                   ask("kw1", "w1", vcore=100), ask("kw2", "w2", vcore=100), ask("kw3", "w3", vcore=100))
    yield log.release("a1", uuid="4-0")
    yield log.config(LIMITS.replace("maxresources: {vcore: 2}", "maxresources: {vcore: 3}"))
    yield log.remove_apps("a1")


def queue_files(log: LogBuilder):
    """The service's queue files (entries with rm ""): per policy group and for every RM."""
    own = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: own}]}]}]"
    file1 = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: a}]}]}]"
    yield log.entry("config", {"policyGroup": "queues", "config": file1}, rm="")
    yield log.register(own)  # the file of its group wins over what the RM sends
    yield log.register(own, rm="rm-2", policy_group="other")
    yield log.config(own)  # refused while the file is in force
    yield log.entry("config", {"policyGroup": "queues", "config": file1.replace("name: a", "name: a.b")}, rm="")
    yield log.entry("config", {"policyGroup": "*", "config": file1.replace("name: a", "name: all")}, rm="")
    yield log.entry("config", {"policyGroup": "queues", "config": ""}, rm="")  # withdrawn: "*" now
    yield log.register(own)


GANGS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: jobs
          - name: small
            resources: {max: {vcore: 3}}
"""


def gangs(log: LogBuilder):
    """All or nothing (incomplete, no room, queue max), rejection over the max, replacement in
    two steps, a second confirmation, a real ask larger than its placeholders, an unknown group."""
    yield log.register(GANGS)
    yield log.nodes(node("n1", vcore=2500), node("n2", vcore=1200))
    yield log.apps(gang("g", 4000), gang("big", 4000, queue="root.small"))  # big: rejected
    yield log.asks(ph("p", "g", n=3))  # incomplete: 3000 of 4000
    yield log.asks(ph("q", "g"))  # complete, but 3 of 4 fit: none placed
    yield log.nodes(node("n3", vcore=1000))  # all four in this entry
    yield log.asks(real("r1", "g", 800), real("x", "g", 100, group="nobody"))  # r1 replaces; x is ordinary
    yield confirmation(log, "g", "6-0")  # the RM's second step: r1 is placed on the placeholder's node
    yield confirmation(log, "g", "6-0")  # a second confirmation changes nothing
    yield log.asks(real("huge", "g", 1500))  # larger than every placeholder: the group is cancelled


def gang_timeouts(log: LogBuilder):
    """The placeholder timeout: a running gang keeps what it uses, a Soft gang not running
    resumes, a Hard one fails; recovered placeholders count and start the timer."""
    yield log.register(GANGS)
    yield log.nodes(node("n1", vcore=2000))
    yield log.apps(gang("run", 2000, timeout_ms=60_000))
    yield log.asks(ph("p", "run", n=2), real("r", "run", 900))
    yield confirmation(log, "run", "4-0")
    yield log.apps(gang("soft", 2000, timeout_ms=30_000), gang("hard", 2000, timeout_ms=30_000, hard=True))
    recovered = [{**allocation(f"u-{a}", "p", a, "n2", vcore=1000), "taskGroupName": "workers", "placeholder": True}
                 for a in ("soft", "hard")]
    yield log.nodes(node("n2", vcore=2000, existing=recovered))
    yield log.asks(ph("q", "soft"), ph("q", "hard"), real("s", "soft", 300))
    yield log.tick(31 * 10**9)  # soft and hard time out; soft resumes and places s
    yield log.tick(30 * 10**9)  # run times out: its unused placeholder goes, it stays Running


def waiting(log: LogBuilder):
    """Asks that must run on one node, and a Paused RM."""
    yield log.register(GANGS)
    yield log.nodes(node("n1", vcore=4000))
    yield log.apps(app("a", "root.jobs"))
    ds = {**ask("ds", "a", vcore=1000), "tags": {"yunikorn.apache.org/requiredNode": "n2"}}
    yield log.asks(ds)  # n2 is not there
    yield log.nodes(node("n2", vcore=500))  # too small
    yield log.nodes(node("n2", action="UPDATE", vcore=2000))  # placed on n2
    yield log.entry("rmstate", {"rmID": "rm-1", "event": "CONNECTION_LOST", "reason": "quiet"}, rm="")
    yield log.asks(ask("k", "a", vcore=1000))  # Paused: not placed
    yield log.entry("rmstate", {"rmID": "rm-1", "event": "RECONNECT", "reason": "back"}, rm="")


def reservations(log: LogBuilder):
    """Reservations taken after the delay, passed over by a small ask, honoured, and dropped:
    placed elsewhere first, its node shrunk, drained, the ask released."""
    yield log.register(GANGS.replace("  - name: default\n", "  - name: default\n    reservationdelay: 1s\n"))
    yield log.nodes(node("n1", vcore=4000), node("n2", vcore=4000))
    yield log.apps(app("smalls", "root.jobs"), app("large", "root.jobs"))
    yield log.asks(ask("s", "smalls", vcore=1000, max_allocations=8))
    yield log.asks(ask("L", "large", vcore=3000), ask("M", "large", vcore=2500))
    yield log.tick(1_000_000_000)  # L reserves n1, M reserves n2
    yield log.release("smalls", uuid="4-0")  # room on n1: not for a small ask
    yield log.asks(ask("s2", "smalls", vcore=1000))  # waits
    yield log.release("smalls", uuid="4-2")
    yield log.release("smalls", uuid="4-4")  # 3,000 free on n1: L takes its reserved node
    yield log.release_ask("smalls", "s2")
    yield log.nodes(node("n3", vcore=3000))  # M fits n3 first: placed there, n2 is free again
    yield log.asks(ask("N", "large", vcore=3500))
    yield log.tick(1_000_000_000)  # N reserves n1 (n1 and n2 miss as much: ties by node id)
    yield log.nodes(node("n2", action="UPDATE", vcore=3000))  # n2 shrinks below N: it could never hold it
    yield log.nodes(node("n1", action="DRAIN_NODE"))  # drained: dropped; no other node can take N
    yield log.nodes(node("n1", action="DRAIN_TO_SCHEDULABLE"))  # back: N reserves n1 again
    yield log.release_ask("large", "N")  # released: dropped


POLICY_QUEUES = GANGS.replace("          - name: jobs\n", "          - name: jobs\n          - name: capped\n"
                              "            resources: {max: {vcore: 6}}\n", 1)
GPU = "nvidia.com/gpu"


def _policy_cluster(log: LogBuilder, policy: str):
    """Three node shapes with some load already on them, then a job of one leader and
    workers under `policy` (one trace per node policy)."""
    yield log.register(POLICY_QUEUES)
    yield log.nodes(node("cpu-1", vcore=8000, memory=16 * GB), node("cpu-2", vcore=8000, memory=16 * GB),
                    node("mem-1", vcore=8000, memory=64 * GB),
                    node("gpu-1", vcore=16000, memory=32 * GB, **{GPU: 4}),
                    node("gpu-2", vcore=16000, memory=32 * GB, **{GPU: 4}))
    yield log.apps(app("other", "root.jobs"))
    load = [("cpu-2", {"vcore": 4000, "memory": 2 * GB}), ("mem-1", {"vcore": 1000, "memory": 40 * GB}),
            ("gpu-1", {"vcore": 2000, "memory": 4 * GB, GPU: 3})]
    yield log.asks(*[{**ask(f"load-{n}", "other", **size), "tags": {"yunikorn.apache.org/requiredNode": n}}
                     for n, size in load])
    yield log.apps(app("job", "root.jobs", tags={"ykbus.io/node-policy": policy}))
    leader = {**ask("leader", "job", vcore=2000, memory=4 * GB, **{GPU: 1}), "tags": {"ykbus.io/role": "leader"}}
    yield log.asks(leader)
    workers = {**ask("worker", "job", vcore=2000, memory=2 * GB, max_allocations=4), "tags": {"ykbus.io/role": "worker"}}
    yield log.asks(workers)
    yield log.asks(ask("big", "job", vcore=1000, memory=12 * GB, max_allocations=2))
    yield log.release("other", key="load-cpu-2")  # room on cpu-2: the next asks see it
    yield log.asks(ask("late", "job", vcore=2000, memory=2 * GB, max_allocations=2))


def policy_binpack(log: LogBuilder):
    """BinPack: the busiest node after placement; an unknown policy is rejected."""
    yield from _policy_cluster(log, "BinPack")
    yield log.apps(app("typo", "root.jobs", tags={"ykbus.io/node-policy": "binpack"}))
    yield log.apps(app("capped", "root.capped", tags={"ykbus.io/node-policy": "BinPack"}))
    yield log.asks(ask("c", "capped", vcore=2000, max_allocations=4))  # the queue max holds the fourth


def policy_leaderfirst(log: LogBuilder):
    """LeaderFirst: the leader to the quietest GPU-weighted node, workers to the busiest
    CPU-weighted ones; an unknown role is rejected."""
    yield from _policy_cluster(log, "LeaderFirst")
    yield log.asks({**ask("odd", "job", vcore=1000), "tags": {"ykbus.io/role": "learner"}})


def policy_minfragment(log: LogBuilder):
    """MinFragment: CPU and memory shares kept balanced."""
    yield from _policy_cluster(log, "MinFragment")


def policy_jobaffinity(log: LogBuilder):
    """JobAffinity: the job's pods together, then BinPack."""
    yield from _policy_cluster(log, "JobAffinity")


def policy_jobantiaffinity(log: LogBuilder):
    """JobAntiAffinity: the job's pods spread, then the least used node."""
    yield from _policy_cluster(log, "JobAntiAffinity")


SECOND = 10**9
PREEMPT = (True, True)  # allowPreemptSelf, allowPreemptOther
SIBLINGS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: under
            resources: {guaranteed: {vcore: 2000m}}
          - name: over
            resources: {guaranteed: {vcore: 1000m}}
          - name: plain
"""


def _confirm(log: LogBuilder, app_id: str, uuid: str):
    return log.release(app_id, uuid=uuid, termination="PREEMPTED_BY_SCHEDULER")


def preemption_guarantee(log: LogBuilder):
    """Sibling queues under and over their guarantees (YuniKorn's case): nothing before the
    delay; after it each ask of the queue under its guarantee takes one allocation of the
    queue over its own, until its queue would go above its guarantee; each node held until
    the RM confirms (not echoed back); an ask that may not preempt, one whose queue has no
    guarantee, a retry 15 s later."""
    yield log.register(SIBLINGS)
    yield log.nodes(*[node(f"n{i}", vcore=1000) for i in range(1, 5)])
    yield log.apps(app("batch", "over"), app("urgent", "under"), app("polite", "under"), app("other", "plain"))
    yield log.asks(ask("b", "batch", vcore=1000, max_allocations=4))
    yield log.asks(ask("p", "polite", vcore=1000))  # may be preempted, may not preempt
    yield log.asks(ask("o", "other", vcore=1000, preemption=PREEMPT))  # no guarantee on its path
    yield log.asks(*[ask(f"u{i}", "urgent", vcore=1000, preemption=PREEMPT) for i in range(1, 4)])
    yield log.tick(29 * SECOND)
    yield log.tick(1 * SECOND)  # 30 s: u1 and u2 each take one of batch; u3 would take under above 2
    yield _confirm(log, "batch", "4-0")
    yield _confirm(log, "batch", "4-1")
    yield log.tick(15 * SECOND)  # u3 searches again: under is at its guarantee
    yield log.release("batch", uuid="4-3")  # batch ends one: p takes the node it reserved


FENCED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
            properties: {preemption.policy: fence}
            queues:
              - name: a
                resources: {guaranteed: {vcore: 2000m}}
                properties: {preemption.delay: 5s}
              - name: c
                properties: {priority.offset: '-10'}
          - name: b
            properties: {priority.offset: '100'}
          - name: d
            properties: {preemption.policy: disabled}
"""


def preemption_fence(log: LogBuilder):
    """A fence: asks inside take only from inside; offsets as the common parent sees them
    (b's +100 keeps it whatever the ask's priority); a disabled queue is never a victim; a
    queue's own preemption.delay."""
    yield log.register(FENCED)
    yield log.nodes(node("n1", vcore=2000), node("n2", vcore=2000), node("n3", vcore=1000))
    yield log.apps(app("bee", "b"), app("dee", "d"), app("cee", "team.c"), app("ay", "team.a"))
    yield log.asks(ask("b", "bee", vcore=1000, max_allocations=2))
    yield log.asks(ask("d", "dee", vcore=1000, max_allocations=2))
    yield log.asks(ask("c", "cee", vcore=1000, priority=5))
    yield log.asks(ask("a", "ay", vcore=1000, max_allocations=2, priority=1, preemption=PREEMPT))
    yield log.tick(5 * SECOND)  # c's 5 - 10 is below a's 1: taken; b and d never
    yield _confirm(log, "cee", "6-0")
    yield log.tick(15 * SECOND)


def preemption_required_node(log: LogBuilder):
    """An ask that must run on a full node preempts there at once, whatever its policy or
    queue: a placeholder first, then the lowest priority; never an allocation pinned to the
    node, never one of higher priority."""
    yield log.register(SIBLINGS)
    yield log.nodes(node("n1", vcore=4000))
    yield log.apps(app("batch", "plain"), app("daemon", "over"))
    yield log.asks({**ask("pinned", "batch", vcore=1000), "tags": {"yunikorn.apache.org/requiredNode": "n1"}})
    yield log.asks({**ask("ph", "batch", vcore=1000), "placeholder": True, "taskGroupName": "tg"})
    yield log.asks(ask("b", "batch", vcore=1000, max_allocations=2))
    yield log.asks({**ask("ds", "daemon", vcore=1000), "tags": {"yunikorn.apache.org/requiredNode": "n1"}})
    yield _confirm(log, "batch", "5-0")
    yield log.asks({**ask("ds2", "daemon", vcore=1000, priority=10), "tags": {"yunikorn.apache.org/requiredNode": "n1"}})
    yield _confirm(log, "batch", "6-0")
    yield log.asks({**ask("ds3", "daemon", vcore=1000, priority=-5), "tags": {"yunikorn.apache.org/requiredNode": "n1"}})


QUOTA = """
partitions:
  - name: default
    preemption: {{quotapreemptionenabled: true}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {{max: {{vcore: {max}}}}}
            properties: {{quota.preemption.delay: 10s, preemption.withinqueue: lowerpriority}}
"""


def preemption_quota(log: LogBuilder):
    """A reload lowers a max below usage: after quota.preemption.delay the queue is preempted
    down to it in one step, lowest priority and newest first."""
    yield log.register(QUOTA.format(max="4000m"))
    yield log.nodes(node("n1", vcore=4000))
    yield log.apps(app("x", "a"))
    yield log.asks(ask("hi", "x", vcore=1000, priority=9, max_allocations=2))
    yield log.asks(ask("lo", "x", vcore=1000, priority=1, max_allocations=2))
    yield log.config(QUOTA.format(max="2500m"))
    yield log.tick(9 * SECOND)
    yield log.tick(1 * SECOND)
    yield _confirm(log, "x", "5-1")
    yield _confirm(log, "x", "5-0")
    yield log.tick(30 * SECOND)


def preemption_within(log: LogBuilder):
    """preemption.withinqueue: lowerpriority: after its delay, an ask preempts a strictly
    lower-priority allocation of its own leaf; one of equal priority does not."""
    yield log.register(QUOTA.format(max="8000m"))
    yield log.nodes(node("n1", vcore=2000))
    yield log.apps(app("low", "a"), app("mid", "a"), app("top", "a"))
    yield log.asks(ask("l", "low", vcore=1000, priority=1))
    yield log.asks(ask("m", "mid", vcore=1000, priority=5))
    yield log.asks(ask("t", "top", vcore=1000, priority=5, max_allocations=2, preemption=PREEMPT))
    yield log.tick(30 * SECOND)
    yield _confirm(log, "low", "4-0")
    yield log.tick(30 * SECOND)


def preemption_found(log: LogBuilder):
    """The counterexamples tests/property/test_preemption_machine.py found, one registration
    each: (1) an ask judged again while its victims were being released kept its node; (2) a
    victim's queue is judged by what it holds, not by the asks coming to it; (3) a reserved ask
    a reload holds at a new max frees its node for the asks after it in the same walk."""
    yield log.register(SIBLINGS)
    yield log.nodes(node("n1", vcore=2000), node("n2", vcore=2000))
    yield log.apps(app("batch", "over"), app("urgent", "under"))
    yield log.asks(ask("b", "batch", vcore=1000, max_allocations=4))
    yield log.asks(ask("u", "urgent", vcore=1000, preemption=PREEMPT))
    yield log.tick(30 * SECOND)
    yield log.config(SIBLINGS)  # wakes every reserved ask: u keeps the node its victim frees
    yield _confirm(log, "batch", "4-3")
    yield log.register(SIBLINGS.replace("2000m", "1000m"))
    yield log.nodes(node("n1", vcore=500), node("n2", vcore=500), node("n3", vcore=500))
    yield log.apps(app("filler", "plain"), app("bee", "over"), app("ay", "under"))
    yield log.asks(ask("c", "filler", vcore=500, max_allocations=2))
    yield log.asks(ask("b0", "bee", vcore=500))
    yield log.asks(ask("b1", "bee", vcore=500, preemption=PREEMPT))
    yield log.tick(30 * SECOND)
    yield log.nodes(node("n4", vcore=500))
    yield log.asks(ask("b2", "bee", vcore=500))
    yield log.asks(ask("a0", "ay", vcore=500, preemption=PREEMPT))
    yield log.tick(30 * SECOND)  # a0 takes filler's, not bee's: bee holds its guarantee
    plain = SIBLINGS.replace("            resources: {guaranteed: {vcore: 2000m}}\n", "")
    yield log.register(plain)
    yield log.nodes(node("n1", vcore=1000), node("n2", vcore=1000))
    yield log.apps(app("filler", "plain"), app("ay", "under"), app("bee", "over"))
    yield log.asks(ask("half", "filler", vcore=500), ask("full", "filler", vcore=1000))
    yield log.asks(ask("A", "ay", vcore=1000))
    yield log.tick(3 * SECOND)
    yield log.asks(ask("B", "bee", vcore=500))
    yield log.tick(3 * SECOND)
    yield log.config(plain.replace("          - name: under\n", "          - name: under\n            resources: {max: {vcore: 500m}}\n"))


def _gpu_gang(app_id: str, members: int, tags: dict[str, str]) -> dict:
    return app(app_id, "root.jobs", placeholderAsk={"resources": {"gpu": {"value": members}}}, tags=tags)


def topology(log: LogBuilder):
    """docs/topology.md: a gang required in one rack takes the rack it fits best; one no rack
    holds waits, naming the closest, and is placed once a rack frees; a preferred gang goes to
    its block when no rack holds it; a level the partition lacks is refused."""
    yield log.register(TOPOLOGY)
    racks = {"r1": ("b1", 2), "r2": ("b1", 1), "r3": ("b2", 2)}  # 4-GPU hosts: racks of 8, 4 and 8 GPUs
    yield log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/block": b, "ykbus.io/rack": r}, gpu=4)
                      for r, (b, n) in racks.items() for i in range(n)])
    yield log.apps(_gpu_gang("small", 4, {"ykbus.io/topology-required": "ykbus.io/rack"}),
                   _gpu_gang("wide", 8, {"ykbus.io/topology-required": "ykbus.io/rack"}),
                   _gpu_gang("pref", 6, {"ykbus.io/topology-preferred": "ykbus.io/rack"}),
                   _gpu_gang("late", 8, {"ykbus.io/topology-required": "ykbus.io/rack"}),
                   _gpu_gang("big", 10, {"ykbus.io/topology-preferred": "ykbus.io/rack"}),
                   _gpu_gang("zoned", 2, {"ykbus.io/topology-required": "zone"}))  # zoned: refused

    def placeholders(app_id: str, n: int):
        return log.asks({**ask("p", app_id, gpu=1, max_allocations=n), "taskGroupName": "w", "placeholder": True})

    yield placeholders("small", 4)  # r2: the rack it fits best (none left)
    yield placeholders("wide", 8)  # r1 (r1 and r3 tie: by key, b1/r1 first)
    yield placeholders("pref", 6)  # r3
    yield placeholders("late", 8)  # no rack holds 8: it waits, r3 the closest (2)
    yield log.remove_apps("small")  # r2 frees 4: still no rack of 8 (r2 the closest now)
    yield log.remove_apps("wide")  # r1 whole again: late is placed there
    yield log.remove_apps("late", "pref")
    yield placeholders("big", 10)  # no rack holds 10: block b1 does (r1 and r2, 2 left)

def topology_groups(log: LogBuilder):
    """docs/topology.md: each task group with its own tag takes a rack of its own; a placed
    gang's lost member, asked again, goes back into the gang's rack, or waits naming it."""
    yield log.register(TOPOLOGY)
    racks = {"r1": "b1", "r2": "b1", "r3": "b2", "r4": "b2"}  # each of two 4-GPU hosts: 8 GPUs a rack
    yield log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/block": b, "ykbus.io/rack": r}, gpu=4)
                      for r, b in racks.items() for i in range(2)])
    rack = {"ykbus.io/topology-required": "ykbus.io/rack"}
    yield log.apps(_gpu_gang("disagg", 16, {}), _gpu_gang("train", 8, rack))
    yield log.asks({**ask("ph-prefill", "disagg", gpu=4, max_allocations=2), "taskGroupName": "prefill",
                    "placeholder": True, "tags": rack},
                   {**ask("ph-decode", "disagg", gpu=2, max_allocations=4), "taskGroupName": "decode",
                    "placeholder": True, "tags": rack})  # seq 4: prefill in r1, decode in r2
    yield log.asks({**ask("p", "train", gpu=2, max_allocations=4), "taskGroupName": "w", "placeholder": True})
    # seq 5: train in r3 (r3 and r4 tie: by key); its real asks replace the placeholders
    yield log.asks(*[{**ask(f"w{i}", "train", gpu=2), "taskGroupName": "w"} for i in range(4)])
    for i in range(4):  # seq 7-10: the RM releases each placeholder: the real ask takes its node
        yield log.release("train", uuid=f"5-{i}", termination="PLACEHOLDER_REPLACED")
    yield log.release("train", key="w3")  # w3's pod fails
    yield log.asks({**ask("w3b", "train", gpu=2), "taskGroupName": "w"})  # back into r3, not r4
    yield log.nodes(node("r3-0", action="DECOMISSION"))  # two members lost with their node
    yield log.asks({**ask("w0b", "train", gpu=2), "taskGroupName": "w"})  # r3 is full: it waits, naming it
    yield log.release("train", key="w2")  # room in r3 again: w0b takes it


def topology_reserve(log: LogBuilder):
    """docs/topology.md: a required gang no rack holds reserves, past the reservation delay,
    the rack closest to holding it; a small ask then leaves that rack alone, and the gang is
    placed there when it frees; two gangs never reserve the same room."""
    yield log.register(TOPOLOGY)
    racks = {"r1": "b1", "r2": "b1", "r3": "b2"}  # a 4-GPU host each
    yield log.nodes(*[node(f"{r}-0", attributes={"ykbus.io/block": b, "ykbus.io/rack": r}, gpu=4)
                      for r, b in racks.items()])
    yield log.apps(app("fill", "root.jobs"), app("small", "root.jobs"),
                   _gpu_gang("big", 4, {"ykbus.io/topology-required": "ykbus.io/rack"}),
                   _gpu_gang("other", 4, {"ykbus.io/topology-required": "ykbus.io/rack"}))
    yield log.asks(*[{**ask(f"f-{r}", "fill", gpu=n), "tags": {"yunikorn.apache.org/requiredNode": f"{r}-0"}}
                     for r, n in (("r1", 3), ("r2", 2), ("r3", 4))])  # free: 1, 2, 0
    yield log.asks({**ask("p", "big", gpu=1, max_allocations=4), "taskGroupName": "w", "placeholder": True})
    yield log.asks({**ask("p", "other", gpu=1, max_allocations=4), "taskGroupName": "w", "placeholder": True})
    yield log.tick(3 * SECOND)  # past the delay: big reserves r2 (the most free), other r1 (never r2)
    yield log.asks(ask("s", "small", gpu=1))  # room on r1 and r2, both reserved: it waits
    yield log.release("fill", key="f-r2")  # r2 whole again: big is placed there, its reservation ends
    yield log.remove_apps("other")  # other goes: its reservation with it, small takes r1's room


def gang_reserve(log: LogBuilder):
    """docs/gang.md: a gang of a queue with ykbus.io/gang.reserve waits past the reservation
    delay and reserves the nodes that would hold it; small asks that keep coming take only the
    room of the others; a reserved node drains and the gang reserves again; it is placed once
    its nodes hold it, and the reservation ends."""
    yield log.register(GANG_RESERVE.format(reserve="true"))
    yield log.nodes(*[node(f"n{i}", gpu=4, vcore=64000) for i in range(4)])
    yield log.apps(app("fill", "root.batch"), app("small", "root.batch"),
                   app("big", "root.train", placeholderAsk={"resources": {"gpu": {"value": 8}}}))
    yield log.asks(ask("f", "fill", gpu=2, max_allocations=8))  # every GPU taken
    yield log.asks({**ask("p", "big", gpu=4, vcore=1000, max_allocations=2), "taskGroupName": "w",
                    "placeholder": True})  # GangNoRoom
    yield log.tick(3 * SECOND)  # past the delay: it reserves n0 and n1
    yield log.asks(ask("s", "small", gpu=2, max_allocations=8))
    yield log.nodes(node("n1", action="DRAIN_NODE"))  # n1 drains: n0 and n2 now
    yield log.release("fill", uuid="4-0")
    yield log.release("fill", uuid="4-1")
    yield log.release("fill", uuid="4-4")  # n0 and n2 free of fill...
    yield log.release("fill", uuid="4-5")  # ...and the gang is placed on them


def topology_sets(log: LogBuilder):
    """docs/topology.md: an application without placeholders that asks for a rack places each
    set of asks it sends together whole in one rack; a set no rack holds waits, whole, and
    takes a rack when one frees."""
    yield log.register(TOPOLOGY)
    racks = {"r1": ("b1", 2), "r2": ("b1", 2), "r3": ("b2", 1)}  # 4-GPU hosts: racks of 8, 8 and 4 GPUs
    yield log.nodes(*[node(f"{r}-{i}", attributes={"ykbus.io/block": b, "ykbus.io/rack": r}, gpu=4)
                      for r, (b, n) in racks.items() for i in range(n)])
    yield log.apps(app("svc", "root.jobs", tags={"ykbus.io/topology-required": "ykbus.io/rack"}))
    yield log.asks(ask("a", "svc", gpu=2, max_allocations=2), ask("b", "svc", gpu=4))  # 8 GPUs: r1, whole
    yield log.asks(ask("c", "svc", gpu=4, max_allocations=2))  # a set of its own: r2
    yield log.asks(ask("d", "svc", gpu=3, max_allocations=2))  # no rack holds 6: it waits, naming r3
    yield log.release("svc", key="c")  # r2 frees: d takes it, whole


TIMED = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: batch
            properties: {ykbus.io/runtime.default: 10m, ykbus.io/runtime.max: 30m}
          - name: open
"""
MINUTE = 60 * SECOND


def _timed(key: str, app_id: str, ms: int, **quantities: int) -> dict:
    return {**ask(key, app_id, **quantities), "executionTimeoutMilliSeconds": ms}


def backfill(log: LogBuilder):
    """docs/time.md: runtime limits (an ask's own, the queue's default, capped by its max) end
    allocations; a reserved ask is told its estimated start; an ask that ends before it takes
    the reserved room, one without a limit or one that would run past it waits; room freed on
    the reserved node goes to an ask with a limit waiting for it; the reserved ask starts by
    its estimate."""
    yield log.register(TIMED)
    yield log.nodes(node("n1", vcore=5000))
    yield log.apps(app("long", "root.batch"), app("big", "root.open"), app("short", "root.batch"),
                   app("free", "root.open"))
    yield log.asks(ask("l", "long", vcore=3000))  # the queue's default: 10 min
    yield log.asks(ask("B", "big", vcore=5000))  # waits for l
    yield log.tick(3 * SECOND)  # past the delay: B reserves n1, told it starts in 10 min
    yield log.asks(_timed("s", "short", 60_000, vcore=1000))  # 1 min: it takes the reserved room
    yield log.asks(ask("u", "free", vcore=1000), _timed("s40", "short", 40 * 60_000, vcore=1000))  # both wait
    yield log.asks(_timed("t", "short", 2 * 60_000, vcore=1000))  # 2 min: backfills too (n1 is full then)
    yield log.tick(61 * SECOND)  # s ends at its limit; its room is lent again, to a 1-min ask
    yield log.asks(_timed("r", "short", 60_000, vcore=1000))
    yield log.tick(10 * MINUTE)  # l ends at the queue's limit: B starts, before its estimate


def minruntime(log: LogBuilder):
    """docs/time.md: `preemption.minruntime` (root.b, 5 min): an allocation younger than its
    queue's minimum runtime is no victim. An ask of root.a under its guarantee may preempt;
    past `preemption.delay` every allocation of root.b is younger than 5 min, so it waits,
    told it cannot preempt; once the oldest passes 5 min it is the one victim, and the ask
    takes its node when the RM confirms."""
    yield log.register(MINRUNTIME)
    yield log.nodes(node("n1", vcore=2000), node("n2", vcore=2000))
    yield log.apps(app("batch", "root.b"), app("urgent", "root.a"))
    for i in range(4):  # a minute apart: b0 is 4 min old when the ask comes
        yield log.asks(ask(f"b{i}", "batch", vcore=1000))
        yield log.tick(60 * SECOND)
    yield log.asks(ask("u", "urgent", vcore=1000, preemption=PREEMPT))
    yield log.tick(31 * SECOND)  # past the delay: b0 is 4.5 min old, none is a victim yet
    yield log.tick(40 * SECOND)  # b0 is past 5 min: preempted, and only b0
    yield _confirm(log, "batch", "4-0")
    yield log.tick(1 * SECOND)


TRACES = {
    "backfill": backfill,
    "minruntime": minruntime,
    "preemption-found": preemption_found,
    "preemption-guarantee": preemption_guarantee, "preemption-fence": preemption_fence,
    "preemption-required-node": preemption_required_node, "preemption-quota": preemption_quota,
    "preemption-within": preemption_within,
    "policy-binpack": policy_binpack, "policy-leaderfirst": policy_leaderfirst,
    "policy-minfragment": policy_minfragment, "policy-jobaffinity": policy_jobaffinity,
    "policy-jobantiaffinity": policy_jobantiaffinity,
    "gangs": gangs, "reservations": reservations, "gang-timeouts": gang_timeouts, "waiting": waiting,
    "registration": registration, "queues": queues, "nodes": nodes, "recovery": recovery,
    "applications": applications, "asks": asks, "priority": priority, "nodesort": nodesort,
    "bad-input": bad_input, "placement": placement, "rules": rules, "access": access, "limits": limits,
    "queue-files": queue_files, "topology": topology, "topology-groups": topology_groups,
    "topology-reserve": topology_reserve, "topology-sets": topology_sets, "gang-reserve": gang_reserve,
}


def placements(inp: Path) -> bytes:
    """Where the trace's live applications sit at its end, as JSON: placement is not in the
    outputs (AcceptedApplication carries no queue), so these traces also keep this."""
    import json

    from ykbus.core import Core
    from ykbus.yamlload import load_yaml

    core = Core(load_yaml=load_yaml)
    for entry in read_entries(inp.read_bytes().splitlines()):
        core.apply(entry)
    dump = core.dump(sections=("applications",))
    where = {rm: {p: {a: v["queue"] for a, v in part["applications"].items()} for p, part in r["partitions"].items()}
             for rm, r in dump["rms"].items()}
    return json.dumps(where, indent=1, sort_keys=True).encode() + b"\n"


PLACED = ("placement", "rules", "access", "limits")


def main() -> None:
    for name, build in TRACES.items():
        inp = HERE / f"{name}.in.jsonl"
        inp.write_bytes(b"".join(encode_entry(e) + b"\n" for e in build(LogBuilder("rm-1"))))
        list(read_entries(inp.read_bytes().splitlines()))  # the file reads back
    shutil.copy(HERE.parents[2] / "shared" / "examples" / "two-queues.in.jsonl", HERE / "two-queues.in.jsonl") \
        if (HERE.parents[2] / "shared" / "examples" / "two-queues.in.jsonl").exists() else None
    for inp in sorted(HERE.glob("*.in.jsonl")):
        out = inp.with_name(inp.name.replace(".in.", ".out."))
        out.write_bytes(b"".join(line + b"\n" for line in replay_file(str(inp))))
        print(out, file=sys.stderr)
        name = inp.name.split(".")[0]
        if name in PLACED:
            inp.with_name(f"{name}.queues.json").write_bytes(placements(inp))


if __name__ == "__main__":
    main()
