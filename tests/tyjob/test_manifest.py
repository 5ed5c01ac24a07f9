"""TYJob manifests: the seed's defaults and bounds, every error with its document and path,
and all of a file or nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.tyjob.manifest import ManifestError, parse_manifests

MINIMAL = """
apiVersion: arranger.ykbus.io/v1
kind: TYJob
metadata: {name: job-a}
spec:
  leader:
    name: learner
    template:
      spec: {containers: [{name: l, resources: {requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: 1}}}]}
  workerSets:
    - name: actor
      template:
        metadata: {annotations: {ykbus.io/sim-duration: "1.5", ykbus.io/sim-failures: "2"}}
        spec:
          containers:
            - {name: a, resources: {requests: {cpu: "1", memory: 512Mi}}}
            - {name: sidecar, resources: {requests: {cpu: 250m}}}
"""


def errors(text: str) -> list[str]:
    with pytest.raises(ManifestError) as exc:
        parse_manifests(text, "jobs.yaml")
    return exc.value.errors


def test_defaults_are_the_seeds_kubebuilder_markers():
    [job] = parse_manifests(MINIMAL)
    assert (job.namespace, job.restart_limit, job.clean_pod_policy, job.terminating, job.min_workers,
            job.priority, job.job_queue_policy, job.basic_policy) == ("default", 3, "All", False, 1, 5, "Priority", "")
    assert job.worker_sets[0].counts == 1
    assert job.leader.resources == {"vcore": 500, "memory": 2**30, "nvidia.com/gpu": 1}
    actor = job.worker_sets[0].pod
    assert actor.resources == {"vcore": 1250, "memory": 512 * 2**20}  # summed over the containers
    assert (actor.duration_s, actor.failures, actor.exit_code) == (1.5, 2, 0)
    assert job.leader.duration_s == 2.0


def test_every_field_of_the_spec_is_read():
    text = MINIMAL.replace("spec:\n  leader:", """spec:
  restartLimit: 5
  volumes: [{name: data, emptyDir: {}}]
  cleanPodPolicy: Running
  terminating: true
  minWorkersNum: 1
  priority: 9
  schedulerPolicy: {jobQueuePolicy: DRF, basicPolicy: JobAntiAffinity}
  leader:""").replace("metadata: {name: job-a}", "metadata: {name: job-a, namespace: team-x}")
    [job] = parse_manifests(text)
    assert (job.namespace, job.restart_limit, job.clean_pod_policy, job.terminating, job.priority,
            job.job_queue_policy, job.basic_policy) == ("team-x", 5, "Running", True, 9, "DRF", "JobAntiAffinity")
    assert job.volumes == [{"name": "data", "emptyDir": {}}]


@pytest.mark.parametrize(("change", "path", "words"), [
    (("kind: TYJob", "kind: Job"), "kind", "must be TYJob"),
    (("metadata: {name: job-a}", "metadata: {name: Job_A}"), "metadata.name", "DNS-1123"),
    (("metadata: {name: job-a}", "metadata: {}"), "metadata.name", "is required"),
    (("  leader:\n", "  priority: 11\n  leader:\n"), "spec.priority", "at most 10"),
    (("  leader:\n", "  priority: 0\n  leader:\n"), "spec.priority", "at least 1"),
    (("  leader:\n", "  cleanPodPolicy: Some\n  leader:\n"), "spec.cleanPodPolicy", "one of Running, All, None"),
    (("  leader:\n", "  schedulerPolicy: {basicPolicy: Spread}\n  leader:\n"), "spec.schedulerPolicy.basicPolicy",
     "one of Gang, BinPack"),
    (("  leader:\n", "  minWorkersNum: 3\n  leader:\n"), "spec.minWorkersNum", "at most the number of workers"),
    # regression (an outside review): taken, then the job failed in the core (a gang in a fair queue)
    (("  leader:\n", "  schedulerPolicy: {jobQueuePolicy: DRF, basicPolicy: Gang}\n  leader:\n"),
     "spec.schedulerPolicy", "a Gang job runs in root.priority"),
    (("  leader:\n", "  terminating: yes please\n  leader:\n"), "spec.terminating", "true or false"),
    (("  leader:\n", "  replicas: 3\n  leader:\n"), "spec.replicas", "unknown field"),
    (("    - name: actor\n", "    - name: actor\n      counts: 0\n"), "spec.workerSets[0].counts", "at least 1"),
    (("cpu: 500m", "cpu: lots"), "spec.leader.template.spec.containers[0].resources.requests.cpu", "invalid quantity"),
    (("nvidia.com/gpu: 1", "amd.com/gpu: 1"), "spec.leader.template.spec.containers[0].resources.requests.amd.com/gpu",
     "unknown resource"),
    (('ykbus.io/sim-duration: "1.5"', 'ykbus.io/sim-duration: "soon"'),
     "spec.workerSets[0].template.metadata.annotations.ykbus.io/sim-duration", "number of seconds"),
])
def test_a_broken_manifest_is_refused_naming_the_path(change, path, words):
    found = errors(MINIMAL.replace(*change))
    assert any(e.startswith(f"jobs.yaml: {path}: ") and words in e for e in found), found


def test_required_leader_and_worker_sets():
    found = errors("apiVersion: v1\nkind: TYJob\nmetadata: {name: x}\nspec: {}\n")
    assert "jobs.yaml: spec.leader: is required" in found
    assert "jobs.yaml: spec.workerSets: is required" in found


def test_every_error_of_every_document_and_nothing_else():
    bad = MINIMAL.replace("kind: TYJob", "kind: Pod").replace("cpu: 500m", "cpu: -")
    found = errors(MINIMAL + "---" + bad + "---" + MINIMAL.replace("job-a", "job-b"))
    assert sorted(e.split(":")[1].strip() for e in found) == ["document 2", "document 2"]
    assert any("document 2: kind" in e for e in found) and any("document 2: spec.leader" in e for e in found)


def test_the_same_job_twice_in_one_file_is_refused():
    found = errors(MINIMAL + "---" + MINIMAL)
    assert any("document 2: metadata.name: default/job-a is also document 1" in e for e in found)


def test_several_documents():
    jobs = parse_manifests(MINIMAL + "---\n" + MINIMAL.replace("job-a", "job-b"))
    assert [j.name for j in jobs] == ["job-a", "job-b"]


@pytest.mark.parametrize("text", ["", "---\n", "[1, 2]", "kind: TYJob", "a: &x [*x]", "{" * 500])
def test_not_a_manifest(text):
    assert errors(text)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=30))
def test_any_document_is_a_job_or_errors_never_a_crash(doc):
    import yaml

    try:
        text = yaml.safe_dump({"apiVersion": "v1", "kind": "TYJob", "metadata": {"name": "x"}, "spec": doc})
    except yaml.YAMLError:
        return
    try:
        parse_manifests(text)
    except ManifestError as exc:
        assert exc.errors and all(isinstance(e, str) for e in exc.errors)


def test_pod_names_must_be_unique():
    """Leader `actor-0` and worker set `actor` named the same pod: the controller crashed."""
    found = errors(MINIMAL.replace("name: learner", "name: actor-0"))
    assert any("pod name job-a-actor-0 is both the leader and worker 0 of worker set actor" in e for e in found)


def test_a_stored_job_is_checked_again():
    import msgspec

    from ykbus.tyjob.manifest import check_job

    [job] = parse_manifests(MINIMAL)
    assert check_job(job) == []
    ws = job.worker_sets[0]
    for broken in (msgspec.structs.replace(job, worker_sets=[msgspec.structs.replace(ws, counts=10**9)]),
                   msgspec.structs.replace(job, priority=2**64),
                   msgspec.structs.replace(job, worker_sets=[ws, ws]),
                   msgspec.structs.replace(job, leader_name="actor-0"),
                   msgspec.structs.replace(job, leader=msgspec.structs.replace(job.leader, duration_s=-1.0)),
                   msgspec.structs.replace(job, leader=msgspec.structs.replace(job.leader, resources={"vcore": 2**64})),
                   msgspec.structs.replace(job, name="Not A Name")):
        assert check_job(broken), broken


def test_every_field_of_a_stored_job_has_the_manifest_path_a_refused_change_names():
    """`ykbus tyjob apply` of a changed job names what changed as the manifest does
    (`spec.minWorkersNum`), not the stored job's field (`min_workers`)."""
    import msgspec

    from ykbus.tyjob.cli import MANIFEST_PATHS
    from ykbus.tyjob.manifest import TYJob

    fields = {f.name for f in msgspec.structs.fields(TYJob)} - {"terminating", "uid"}  # (uid: set by apply, not in a manifest)
    assert fields == set(MANIFEST_PATHS)
    assert all(p == "apiVersion" or p.startswith(("metadata.", "spec.")) for p in MANIFEST_PATHS.values())



def test_a_pod_asks_what_kubernetes_would_request_for_it():
    """Regression: a limits-only container was refused ("no container requests any cpu"),
    a memory limit beside a cpu request asked no memory, and an init container larger than
    the pod's containers was not counted. Kubernetes: a request left out is its limit; the
    pod's request is the most of its containers' sum and each init container's."""
    def leader(containers: str, init: str = "") -> dict[str, int]:
        text = MINIMAL.replace(
            "spec: {containers: [{name: l, resources: {requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: 1}}}]}",
            "spec: {containers: [" + containers + "]" + (", initContainers: [" + init + "]" if init else "") + "}")
        [job] = parse_manifests(text)
        return job.leader.resources

    assert leader("{name: l, resources: {limits: {cpu: '1', memory: 1Gi}}}") == {"vcore": 1000, "memory": 2**30}
    assert leader("{name: l, resources: {requests: {cpu: '1'}, limits: {cpu: '2', memory: 32Gi}}}") == {
        "vcore": 1000, "memory": 32 * 2**30}
    assert leader("{name: l, resources: {requests: {cpu: '1', memory: 1Gi}}}",
                  "{name: fetch, resources: {requests: {cpu: '8', memory: 8Gi}}}") == {"vcore": 8000, "memory": 8 * 2**30}
    assert leader("{name: l, resources: {requests: {cpu: '1', memory: 1Gi}}}, "
                  "{name: s, resources: {requests: {cpu: '1'}}}",
                  "{name: fetch, resources: {requests: {cpu: 1500m}}}") == {"vcore": 2000, "memory": 2**30}
    # an explicit request of 0 stays 0, whatever the limit (review); past 64 init containers: an error
    assert leader("{name: l, resources: {requests: {cpu: '0', memory: 1Gi}, limits: {cpu: '2'}}}") == {
        "memory": 2**30}
    with pytest.raises(ManifestError, match="initContainers: more than 64 containers"):
        leader("{name: l, resources: {requests: {cpu: '1'}}}", ", ".join(["{name: i, resources: {}}"] * 65))


def test_a_worker_set_of_no_workers_is_the_one_error_not_also_min_workers():
    """Regression: `counts: 0` also read "spec.minWorkersNum: must be at most the number of
    workers, 0 (got 1)", a field the user never wrote."""
    text = MINIMAL.replace("    - name: actor\n", "    - name: actor\n      counts: 0\n")
    assert errors(text) == ["jobs.yaml: spec.workerSets[0].counts: must be at least 1 (got 0)"]
