"""TYJob topology (issue 42, docs/tyjob.md "Topology"): `spec.topology` and a worker set's
`topology` in a manifest, checked with their paths; the SI messages the controller sends
for them (the application's tag, the task group's on its placeholders and pods); cluster
nodes with attributes; a job placed in one rack by a real core, one that waits naming the
closest rack, one naming a level the partition lacks; and `ykbus up`'s demo, whose GPU
gangs each land inside one rack."""

from __future__ import annotations

import msgspec
import pytest

from tests.tyjob.test_controller import Driver
from ykbus.core import Core
from ykbus.si import codec
from ykbus.si import messages as m
from ykbus.tyjob.cluster import ClusterError, parse_cluster
from ykbus.tyjob.controller import QUEUES, Controller
from ykbus.tyjob.manifest import ManifestError, Topology, check_job, parse_manifests
from ykbus.yamlload import load_yaml

REQUIRED, PREFERRED = "ykbus.io/topology-required", "ykbus.io/topology-preferred"
RACK, BLOCK = "ykbus.io/rack", "ykbus.io/block"


def manifest(name: str = "train", topology: str = "{required: ykbus.io/rack}", leader_gpu: int = 4,
             sets: tuple[tuple[str, int, int, str], ...] = (("worker", 2, 4, ""),), min_workers: int | None = None,
             policy: str = "Gang", seconds: str = "30") -> str:
    """A TYJob: leader `chief` and worker sets (name, counts, GPUs each, topology or "")."""
    lines = ["apiVersion: arranger.ykbus.io/v1", "kind: TYJob", f"metadata: {{name: {name}}}", "spec:",
             f"  minWorkersNum: {sum(s[1] for s in sets) if min_workers is None else min_workers}",
             f"  schedulerPolicy: {{basicPolicy: {policy}}}"]
    if topology:
        lines.append(f"  topology: {topology}")
    lines += ["  leader:", "    name: chief", "    template:",
              f'      metadata: {{annotations: {{ykbus.io/sim-duration: "{seconds}"}}}}',
              f"      spec: {{containers: [{{name: c, resources: {{requests: {{cpu: \"1\", nvidia.com/gpu: {leader_gpu}}}}}}}]}}",
              "  workerSets:"]
    for ws, counts, gpu, top in sets:
        lines += [f"    - name: {ws}", f"      counts: {counts}"]
        if top:
            lines.append(f"      topology: {top}")
        lines += ["      template:", f'        metadata: {{annotations: {{ykbus.io/sim-duration: "{seconds}"}}}}',
                  f"        spec: {{containers: [{{name: c, resources: {{requests: {{cpu: \"1\", nvidia.com/gpu: {gpu}}}}}}}]}}"]
    return "\n".join(lines) + "\n"


def errors(text: str) -> list[str]:
    with pytest.raises(ManifestError) as exc:
        parse_manifests(text, "jobs.yaml")
    return exc.value.errors


# --- the manifest ------------------------------------------------------------------------------


def test_a_job_and_a_worker_set_each_take_a_topology():
    [job] = parse_manifests(manifest(topology="{preferred: ykbus.io/block}",
                                     sets=(("ps", 2, 4, "{required: ykbus.io/rack}"), ("actor", 4, 1, ""))))
    assert job.topology == Topology("preferred", BLOCK)
    assert [ws.topology for ws in job.worker_sets] == [Topology("required", RACK), None]
    [plain] = parse_manifests(manifest(topology=""))
    assert plain.topology is None and plain.worker_sets[0].topology is None
    assert check_job(job) == [] and check_job(plain) == []


@pytest.mark.parametrize(("topology", "path", "words"), [
    ("{required: ykbus.io/rack, preferred: ykbus.io/block}", "spec.topology", "has both required and preferred"),
    ("{}", "spec.topology", "names no level: give {required: <level>} or {preferred: <level>}"),
    ('{required: ""}', "spec.topology.required", "is empty: name a topology level"),
    ("{preferred: }", "spec.topology.preferred", "is empty: name a topology level"),
    ("{zone: a}", "spec.topology.zone", "unknown field (known: preferred, required)"),
    ("ykbus.io/rack", "spec.topology", "must be a mapping, {required: <level>} or {preferred: <level>} (got str)"),
    ("{required: 3}", "spec.topology.required", "must be a string"),
    ("{required: rack row}", "spec.topology.required", "'rack row' is not a node attribute name"),
    ("{required: Ykbus.IO/rack}", "spec.topology.required", "is not a node attribute name: its prefix must be"),
])
def test_a_broken_job_topology_is_refused_naming_its_path_and_why(topology, path, words):
    found = errors(manifest(topology=topology))
    assert any(e.startswith(f"jobs.yaml: {path}: ") and words in e for e in found), found


def test_a_broken_worker_set_topology_is_refused_naming_its_path():
    found = errors(manifest(topology="", sets=(("worker", 2, 4, "{required: ykbus.io/rack, preferred: x}"),)))
    assert found == ["jobs.yaml: spec.workerSets[0].topology: has both required and preferred: give one of them"]


def test_only_a_gang_job_may_ask_for_a_domain():
    found = errors(manifest(policy="BinPack", sets=(("worker", 2, 4, "{preferred: ykbus.io/block}"),)))
    assert found == [
        "jobs.yaml: spec.topology: only a Gang job is placed in one topology domain: set "
        "schedulerPolicy.basicPolicy: Gang (this job's is BinPack)",
        "jobs.yaml: spec.workerSets[0].topology: only a Gang job is placed in one topology domain: set "
        "schedulerPolicy.basicPolicy: Gang (this job's is BinPack)"]
    # a basic policy that is itself wrong is reported alone, not again as the topology's problem
    found = errors(manifest(policy="Spread"))
    assert len(found) == 1 and found[0].startswith("jobs.yaml: spec.schedulerPolicy.basicPolicy: must be one of")


def test_a_worker_set_topology_needs_workers_in_the_gang():
    found = errors(manifest(sets=(("actor", 2, 1, ""), ("ps", 2, 4, "{required: ykbus.io/rack}")), min_workers=2))
    assert found == ["jobs.yaml: spec.workerSets[1].topology: no worker of worker set ps is in the gang "
                     "(minWorkersNum 2 takes the first workers in worker-set order), so none would be placed in "
                     "its domain: raise minWorkersNum"]
    parse_manifests(manifest(sets=(("actor", 2, 1, ""), ("ps", 2, 4, "{required: ykbus.io/rack}")), min_workers=3))


def test_every_error_at_once_the_topology_among_them():
    found = errors(manifest(topology="{}").replace("  minWorkersNum: 2\n", "  minWorkersNum: 2\n  priority: 11\n"))
    assert sorted(e.split(": ")[1] for e in found) == ["spec.priority", "spec.topology"]


def test_a_stored_job_with_a_broken_topology_is_refused():
    """A value read back from the KV bucket is checked again: anyone with NATS may write one."""
    [job] = parse_manifests(manifest(sets=(("worker", 2, 4, "{preferred: ykbus.io/block}"),)))
    ws = job.worker_sets[0]
    for broken in (msgspec.structs.replace(job, topology=Topology("exactly", RACK)),
                   msgspec.structs.replace(job, topology=Topology("required", "")),
                   msgspec.structs.replace(job, topology=Topology("required", "not an attribute")),
                   msgspec.structs.replace(job, basic_policy="BinPack"),
                   msgspec.structs.replace(job, worker_sets=[msgspec.structs.replace(ws, topology=Topology("x", RACK))]),
                   msgspec.structs.replace(job, min_workers=0)):
        assert check_job(broken), broken


# --- the SI messages ------------------------------------------------------------------------


def test_the_job_topology_is_the_applications_tag_and_a_worker_sets_is_on_its_asks():
    [job] = parse_manifests(manifest(topology="{preferred: ykbus.io/block}", leader_gpu=1, min_workers=3,
                                     sets=(("ps", 2, 4, "{required: ykbus.io/rack}"), ("actor", 2, 1, ""))))
    ctl = Controller()
    ctl.apply(job, 1, 1000.0)
    out = ctl.drain()
    # as they go on the wire (JSON bodies of yk.v1.in.tyjob.app and .alloc)
    app_body = msgspec.json.decode(codec.encode(m.ApplicationRequest(new=out.apps, rmID="tyjob"), "json"))
    [app] = app_body["new"]
    assert app["tags"][PREFERRED] == BLOCK and REQUIRED not in app["tags"]
    assert app["placeholderAsk"]["resources"]["nvidia.com/gpu"]["value"] == 1 + 2 * 4 + 1  # leader, ps, one actor
    alloc_body = msgspec.json.decode(codec.encode(m.AllocationRequest(asks=out.asks, rmID="tyjob"), "json"))
    asks = {a["allocationKey"]: a for a in alloc_body["asks"]}
    assert asks["placeholder/ws-ps"]["tags"] == {REQUIRED: RACK}
    assert asks["placeholder/ws-ps"]["placeholder"] and asks["placeholder/ws-ps"]["maxAllocations"] == 2
    for key in ("train-ps-0", "train-ps-1"):  # the worker set's pods carry its tag beside their role
        assert asks[key]["tags"] == {"ykbus.io/role": "worker", REQUIRED: RACK}
        assert asks[key]["taskGroupName"] == "ws-ps"
    # the leader and the other worker set have no topology of their own: the job's applies
    assert not asks["placeholder/leader"].get("tags") and not asks["placeholder/ws-actor"].get("tags")
    assert asks["train-chief"]["tags"] == {"ykbus.io/role": "leader"}
    assert asks["train-actor-0"]["tags"] == asks["train-actor-1"]["tags"] == {"ykbus.io/role": "worker"}
    assert asks["train-actor-1"].get("taskGroupName", "") == ""  # past minWorkersNum: not in the gang


def test_a_job_without_topology_sends_no_topology_tag():
    [job] = parse_manifests(manifest(topology=""))
    ctl = Controller()
    ctl.apply(job, 1, 1000.0)
    out = ctl.drain()
    tags = [out.apps[0].tags, *(a.tags for a in out.asks)]
    assert not any(REQUIRED in t or PREFERRED in t for t in tags)


def test_the_controllers_partition_names_the_levels():
    config = Core(load_yaml=load_yaml).load_config(QUEUES)
    [partition] = config.partitions
    assert partition.topology.levels == (BLOCK, RACK)


# --- the cluster file -----------------------------------------------------------------------


def test_a_cluster_node_sends_its_attributes_as_they_are():
    [node] = parse_cluster("nodes:\n  - {name: g1, nvidia.com/gpu: 8, labels: {pool: gpu},\n"
                           "     attributes: {ykbus.io/block: b1, ykbus.io/rack: 3}}\n").values()
    assert node.info().attributes == {"si/hostname": "g1", "label/pool": "gpu", BLOCK: "b1", RACK: "3"}
    [moved] = parse_cluster("nodes:\n  - {name: g1, nvidia.com/gpu: 8, labels: {pool: gpu},\n"
                            "     attributes: {ykbus.io/block: b1, ykbus.io/rack: r4}}\n").values()
    assert moved != node  # the controller sends it again (UPDATE) when only its rack changed


@pytest.mark.parametrize(("attributes", "words"), [
    ("[b1]", "nodes[0].attributes: must map node attribute names to values"),
    ("{rack row: r1}", "nodes[0].attributes.rack row: 'rack row' is not a node attribute name"),
    ("{si/hostname: other}", "nodes[0].attributes.si/hostname: si/ attributes are the SI's own"),
    ('{ykbus.io/rack: ""}', "nodes[0].attributes.ykbus.io/rack: must be a value of 1 to 63 characters"),
    ("{ykbus.io/rack: [r1]}", "nodes[0].attributes.ykbus.io/rack: must be a value of 1 to 63 characters"),
])
def test_broken_attributes_are_refused_naming_the_path(attributes, words):
    with pytest.raises(ClusterError) as exc:
        parse_cluster(f"nodes:\n  - {{name: g1, cpu: 1, attributes: {attributes}}}\n", "cluster.yaml")
    assert f"cluster.yaml: {words}" in str(exc.value), str(exc.value)


# --- through a real core ---------------------------------------------------------------------

RACKS = "nodes:\n" + "".join(
    f"  - {{name: {rack}-{i}, cpu: 16, memory: 64Gi, nvidia.com/gpu: 4, "
    f"attributes: {{ykbus.io/block: {block}, ykbus.io/rack: {rack}}}}}\n"
    for rack, block, n in (("r1", "b1", 2), ("r2", "b1", 3), ("r3", "b2", 2)) for i in range(1, n + 1))


def racks(status: dict) -> set[str]:
    return {p["node"].split("-")[0] for p in status["pods"] if p["node"]}


def test_a_required_job_runs_whole_in_the_one_rack_that_holds_it():
    d = Driver(RACKS)
    d.start()
    [job] = parse_manifests(manifest())  # 12 GPUs: only r2 (3 nodes of 4) holds them
    d.ctl.apply(job, 1, d.now)
    d.flush()
    st = d.status("default.train")
    assert st["stage"] == "Running" and st["scheduleState"] == "ScheduledSucceed"
    assert racks(st) == {"r2"} and len(st["pods"]) == 3


def test_a_job_no_rack_holds_even_empty_says_so_one_no_rack_holds_now_waits_naming_the_closest():
    """A gang required in a rack that no rack holds even empty (16 GPUs, the largest rack 12)
    waits (the cluster file may grow a rack) saying so: its message was that of a gang
    waiting for room (an outside review). A preferred one takes a block; one that a rack
    holds when empty waits naming the closest."""
    d = Driver(RACKS)
    d.start()
    [never] = parse_manifests(manifest("never", sets=(("worker", 3, 4, ""),)))  # 16 GPUs: no rack has them
    d.ctl.apply(never, 1, d.now)
    d.flush()
    st = d.status("default.never")
    assert st["stage"] == "Pending" and st["scheduleState"] == "Unscheduled" and racks(st) == set()
    assert st["message"].startswith("its gang (4 pods, {vcore: 4 cores, nvidia.com/gpu: 16}) fits in no rack of the "
                                    "cluster even when it is empty (the largest for it, rack b1/r2, has "), st
    assert st["message"].endswith("): it waits until the cluster has a rack that holds it"), st
    d.ctl.delete("default.never", d.now)
    d.flush()
    [wide] = parse_manifests(manifest("wide", topology="{preferred: ykbus.io/rack}", sets=(("worker", 3, 4, ""),)))
    d.ctl.apply(wide, 2, d.now)
    d.flush()
    st = d.status("default.wide")
    assert st["stage"] == "Running" and racks(st) == {"r1", "r2"}  # block b1: its two racks, 20 GPUs
    [big] = parse_manifests(manifest("big", sets=(("worker", 2, 4, ""),)))  # 12 GPUs: r2 when empty
    d.ctl.apply(big, 3, d.now)
    d.flush()
    st = d.status("default.big")
    assert st["stage"] == "Pending" and st["scheduleState"] == "Unscheduled" and racks(st) == set()
    assert "no ykbus.io/rack domain has room for 3 × {vcore: 1 core, nvidia.com/gpu: 4}; the fullest fit, " \
           "rack b2/r3, has room for 2" in st["message"], st["message"]


def test_a_level_the_partition_lacks_fails_the_job_with_the_cores_reason():
    d = Driver(RACKS)
    d.start()
    [job] = parse_manifests(manifest(topology="{required: ykbus.io/zone}"))
    d.ctl.apply(job, 1, d.now)
    d.flush()
    st = d.status("default.train")
    assert st["stage"] == "Failed" and st["scheduleState"] == "ScheduledFailed"
    assert st["message"] == ("the core rejected the job: tag ykbus.io/topology-required: 'ykbus.io/zone' is not a "
                             "topology level of the partition (its levels are ykbus.io/block, ykbus.io/rack)")


# --- `ykbus up`'s demo ----------------------------------------------------------------------


def test_the_demo_runs_its_gpu_gangs_each_inside_one_rack(tmp_path):
    """The example cluster's GPU pool and jobs, as `ykbus up` runs them (sim/offline.py, on a
    virtual clock): each `train` gang required in a rack is placed whole in one; the
    preferred one too big for a rack in one block; rack-late waits naming the closest rack,
    then runs in one once rack-a has ended. The queue file `ykbus up` writes names the levels."""
    from ykbus.sim.batch import BatchWorkload
    from ykbus.sim.k8s import K8sWorkload
    from ykbus.sim.offline import demo_log
    from ykbus.up import _queue_files

    entries = demo_log(100.0, K8sWorkload(nodes_count=1, pods_per_s=5, max_waiting=5),
                       BatchWorkload(nodes_count=2, jobs_per_s=0.5, max_waiting=10))
    core = Core(load_yaml=load_yaml)
    placed: dict[str, dict[str, str]] = {}  # app -> pod -> node (real pods, as the controller runs them)
    waits: dict[str, str] = {}
    for entry in entries:
        for out in core.apply(entry):
            if out.rm != "tyjob":
                continue
            if out.kind == "alloc":
                for a in out.msg.new:
                    if a.applicationID.startswith("tyjob-train-") and not a.placeholder:
                        placed.setdefault(a.applicationID.rsplit("-", 1)[0], {})[a.allocationKey] = a.nodeID
            elif out.kind == "state":
                for s in out.msg.states:
                    if s.applicartionID.startswith("tyjob-train-rack-late") and s.reason:
                        waits.setdefault(s.applicartionID, s.reason)
    nodes = core.rms["tyjob"].partitions["default"].nodes

    def domains(app: str, level: str) -> set[str]:
        return {nodes[n].attributes[BLOCK] + ("/" + nodes[n].attributes[RACK] if level == RACK else "")
                for n in placed[app].values()}

    counts = {"rack-a": 4, "rack-b": 7, "rack-c": 13, "block-d": 8, "rack-late": 4}
    for job, pods in counts.items():
        assert len(placed[f"tyjob-train-{job}"]) == pods, (job, placed.get(f"tyjob-train-{job}"))
    for job in ("rack-a", "rack-b", "rack-c", "rack-late"):
        assert len(domains(f"tyjob-train-{job}", RACK)) == 1, (job, placed[f"tyjob-train-{job}"])
    assert len(domains("tyjob-train-block-d", BLOCK)) == 1 and len(domains("tyjob-train-block-d", RACK)) > 1
    assert len({frozenset(domains(f"tyjob-train-{j}", RACK)) for j in ("rack-a", "rack-b", "rack-c")}) == 3
    [reason] = waits.values()
    assert reason.startswith("no ykbus.io/rack domain has room for 4 × ") and "the fullest fit, rack " in reason

    queues = _queue_files(str(tmp_path))
    text = (tmp_path / "tyjob.yaml").read_text()
    assert queues == str(tmp_path) and text == QUEUES.lstrip()
    assert "levels: [ykbus.io/block, ykbus.io/rack]" in text


def test_up_says_when_a_kept_cluster_file_has_no_racks(tmp_path, capsys):
    """A data directory from before the GPU pool keeps its cluster file: `ykbus up` says why
    the train jobs would wait, and how to start with the pool."""
    from ykbus.up import _tyjob_cluster

    path = _tyjob_cluster(str(tmp_path / "new"))
    assert "has no node in a rack" not in capsys.readouterr().out
    assert len(parse_cluster(open(path).read())) == 30
    old = tmp_path / "old"
    old.mkdir()
    (old / "cluster.yaml").write_text("nodes:\n  - {name: gpu-1, cpu: 32, memory: 128Gi, nvidia.com/gpu: 8}\n")
    _tyjob_cluster(str(old))
    said = capsys.readouterr().out
    assert (f"ykbus up: {old}/cluster.yaml has no node in a rack (attribute ykbus.io/rack): the example jobs of "
            "namespace train need racks; `ykbus up --fresh` starts with the example cluster's GPU pool") in said
