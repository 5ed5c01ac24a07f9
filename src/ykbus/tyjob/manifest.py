"""TYJob manifests (the CRD of Arranger's design document, as YAML): parsed, defaulted and checked.

`parse_manifests(text)` reads every document of a file and returns the jobs, or raises
`ManifestError` with every problem found, each with its document and path
(`document 2: spec.workerSets[0].counts: must be at least 1 (got 0)`), so that `ykbus tyjob
apply` stores all of a file or nothing. Defaults and bounds are Arranger's kubebuilder
markers (restartLimit 3, cleanPodPolicy All, terminating false, minWorkersNum 1, priority
5 within 1..10, counts 1 and at least 1; leader and workerSets required), plus bounds that
keep a hostile manifest small (names, counts, durations).

A pod template is a Kubernetes PodTemplateSpec; what ykbus reads of it: what Kubernetes
would request for the pod (cpu, memory, nvidia.com/gpu, Kubernetes quantities: the
containers' `resources.requests` summed, a limit standing for a request left out, at least
what each of `initContainers` requests) and three annotations of the simulated runtime, `ykbus.io/sim-duration`
(seconds, default 2), `ykbus.io/sim-exit-code` (default 0) and `ykbus.io/sim-failures`
(failures before the pod succeeds, default 0). Other template fields are kept as given
and not used.

Topology (docs/tyjob.md, "Topology"): `spec.topology` and a worker set's `topology` are
`{required: <level>}` or `{preferred: <level>}`, a level being a node attribute name
(`ykbus.io/rack`); only a Gang job is placed in one domain, so only a Gang job may have
one. Whether the level is one of the partition's is the core's to say (it refuses the
application, or the asks, naming the tag).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ykbus.core.config import attribute_name_problem
from ykbus.core.resources import add_into, parse_quantity
from ykbus.core.tags import NodePolicy
from ykbus.core.topology import PREFERRED_TAG, REQUIRED_TAG
from ykbus.yamlload import load_yaml_documents

KIND = "TYJob"
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS-1123 label, as Kubernetes names
MAX_NAME = 63
MAX_WORKER_SETS = 64
MAX_COUNTS = 10_000  # workers in one worker set
MAX_DOCUMENTS = 1_000
MAX_DURATION_S = 86_400.0
MAX_FAILURES = 1_000
MAX_RESTART_LIMIT = 1_000
RESOURCES = {"cpu": "vcore", "memory": "memory", "nvidia.com/gpu": "nvidia.com/gpu"}  # Kubernetes -> SI
CLEAN_POD_POLICIES = ("Running", "All", "None")
JOB_QUEUE_POLICIES = ("Priority", "DRF")
BASIC_POLICIES = ("Gang", *(p.value for p in NodePolicy))
SIM_DURATION = "ykbus.io/sim-duration"
SIM_EXIT_CODE = "ykbus.io/sim-exit-code"
SIM_FAILURES = "ykbus.io/sim-failures"
TOPOLOGY_MODES = {"required": REQUIRED_TAG, "preferred": PREFERRED_TAG}  # manifest key -> the SI tag


class ManifestError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


class PodSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one pod asks for and how its simulated run goes."""

    resources: dict[str, int]  # SI names: vcore (milli), memory (bytes), nvidia.com/gpu
    duration_s: float = 2.0
    exit_code: int = 0
    failures: int = 0


class Topology(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One topology domain for a job or a worker set: `mode` required or preferred, at
    `level` (a node attribute named in the partition's `topology.levels`)."""

    mode: str
    level: str

    def tags(self) -> dict[str, str]:
        """The SI tag that asks for it (`ykbus.io/topology-required: ykbus.io/rack`)."""
        return {TOPOLOGY_MODES[self.mode]: self.level}


class WorkerSet(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    counts: int
    pod: PodSpec
    template: dict[str, Any] = {}
    topology: Topology | None = None  # its task group's own domain (wins over the job's)


class TYJob(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One job, validated and defaulted (what the KV bucket stores)."""

    namespace: str
    name: str
    leader_name: str
    leader: PodSpec
    worker_sets: list[WorkerSet]
    restart_limit: int = 3
    clean_pod_policy: str = "All"
    terminating: bool = False
    min_workers: int = 1
    priority: int = 5
    job_queue_policy: str = "Priority"
    basic_policy: str = ""  # "": the partition's node order
    api_version: str = ""
    leader_template: dict[str, Any] = {}
    volumes: list[Any] = []
    topology: Topology | None = None  # the whole gang's domain
    # set by `ykbus tyjob apply` when it creates the job, kept when it updates it: a job deleted
    # and applied again (the same manifest) is another job, which runs again
    uid: str = ""

    @property
    def workers(self) -> int:
        return sum(ws.counts for ws in self.worker_sets)

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.name}"


class _Checker:
    """Collects errors with their path while a document is read."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.errors: list[str] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{self.where}{path}: {message}")

    def mapping(self, value: Any, path: str, required: bool = True) -> dict[str, Any]:
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            self.error(path, f"must be a mapping (got {_kind(value)})")
            return {}
        return value

    def only(self, value: dict[str, Any], path: str, allowed: set[str]) -> None:
        for key in value:
            if key not in allowed:
                self.error(f"{path}.{key}" if path else str(key), f"unknown field (known: {', '.join(sorted(allowed))})")

    def string(self, value: Any, path: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        if value is None:
            if default is None:
                self.error(path, "is required")
                return ""
            return default
        if not isinstance(value, str):
            self.error(path, f"must be a string (got {_kind(value)})")
            return default or ""
        if choices and value not in choices:
            self.error(path, f"must be one of {', '.join(choices)} (got {value[:64]!r})")
            return default or ""
        return value

    def name(self, value: Any, path: str, default: str | None = None) -> str:
        text = self.string(value, path, default)
        if text and (len(text) > MAX_NAME or not NAME.fullmatch(text)):
            self.error(path, f"must be a DNS-1123 label: lower-case letters, digits and '-', at most {MAX_NAME} "
                             f"characters, starting and ending with a letter or digit (got {text[:80]!r})")
        return text

    def integer(self, value: Any, path: str, default: int, low: int, high: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, f"must be an integer (got {_kind(value)})")
            return default
        if value < low:
            self.error(path, f"must be at least {low} (got {value})")
        elif value > high:
            self.error(path, f"must be at most {high} (got {value})")
        return value

    def boolean(self, value: Any, path: str, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(path, f"must be true or false (got {_kind(value)})")
            return default
        return value


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _requests(c: _Checker, container: Any, cpath: str) -> dict[str, int]:
    """What one container requests, as Kubernetes reads it: its `resources.requests`, and
    for a resource it limits without requesting, the limit."""
    cont = c.mapping(container, cpath)
    res = c.mapping(cont.get("resources"), f"{cpath}.resources", required=False)
    out: dict[str, int] = {}
    requested: set[str] = set()  # (an explicit request, 0 included, is not replaced by the limit)
    for part in ("requests", "limits"):
        for name, value in c.mapping(res.get(part), f"{cpath}.resources.{part}", required=False).items():
            where = f"{cpath}.resources.{part}.{name}"
            si = RESOURCES.get(name)
            if si is None:
                c.error(where, f"unknown resource (known: {', '.join(RESOURCES)})")
                continue
            try:
                q = parse_quantity(si, value)
            except ValueError as exc:
                c.error(where, str(exc))
                continue
            if q < 0:
                c.error(where, f"must not be negative (got {value!r})")
            elif part == "requests" or si not in requested:  # (requests are read first)
                requested.add(si)
                if q:
                    out[si] = q
    return out


def _pod(c: _Checker, template: Any, path: str) -> tuple[PodSpec, dict[str, Any]]:
    """The pod of a template: what Kubernetes would request for it (its containers' requests
    summed, a limit standing for a request left out, at least each init container's), and
    the runtime annotations."""
    if template is None:
        c.error(path, "is required")
        return PodSpec({}), {}
    tpl = c.mapping(template, path)
    meta = c.mapping(tpl.get("metadata"), f"{path}.metadata", required=False)
    annotations = c.mapping(meta.get("annotations"), f"{path}.metadata.annotations", required=False)
    spec = c.mapping(tpl.get("spec"), f"{path}.spec")
    containers = spec.get("containers")
    total: dict[str, int] = {}
    if not isinstance(containers, list) or not containers:
        c.error(f"{path}.spec.containers", "must be a non-empty list of containers")
        containers = []
    for i, container in enumerate(containers[:MAX_WORKER_SETS]):
        add_into(total, _requests(c, container, f"{path}.spec.containers[{i}]"))
    inits = spec.get("initContainers")
    if inits is not None and not isinstance(inits, list):
        c.error(f"{path}.spec.initContainers", f"must be a list of containers (got {_kind(inits)})")
    if isinstance(inits, list) and len(inits) > MAX_WORKER_SETS:
        c.error(f"{path}.spec.initContainers", f"more than {MAX_WORKER_SETS} containers")
    for i, container in enumerate(inits[:MAX_WORKER_SETS] if isinstance(inits, list) else []):
        for name, q in _requests(c, container, f"{path}.spec.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0), q)  # init containers run one at a time, before the rest
    if len(containers) > MAX_WORKER_SETS:
        c.error(f"{path}.spec.containers", f"more than {MAX_WORKER_SETS} containers")
    if containers and not total:
        c.error(f"{path}.spec.containers", "the pod requests no cpu, memory or nvidia.com/gpu above zero "
                                           "(nor limits one it leaves unrequested): a pod must ask for something")
    duration = _annotation_number(c, annotations, SIM_DURATION, f"{path}.metadata.annotations", 2.0, MAX_DURATION_S)
    exit_code = int(_annotation_number(c, annotations, SIM_EXIT_CODE, f"{path}.metadata.annotations", 0, 255,
                                       whole=True))
    failures = int(_annotation_number(c, annotations, SIM_FAILURES, f"{path}.metadata.annotations", 0, MAX_FAILURES,
                                      whole=True))
    return PodSpec(total, duration, exit_code, failures), tpl


def _annotation_number(c: _Checker, annotations: dict[str, Any], name: str, path: str, default: float,
                       high: float, whole: bool = False) -> float:
    value = annotations.get(name)
    if value is None:
        return default
    text = str(value).strip()
    try:
        number = int(text) if whole else float(text)
    except ValueError:
        c.error(f"{path}.{name}", f"must be {'a whole number' if whole else 'a number of seconds'} (got {text[:32]!r})")
        return default
    if not 0 <= number <= high or number != number:
        c.error(f"{path}.{name}", f"must be between 0 and {high:g} (got {text[:32]})")
        return default
    return number


def _topology(c: _Checker, value: Any, path: str) -> Topology | None:
    """`{required: <level>}` or `{preferred: <level>}` (None when absent or wrong)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        c.error(path, f"must be a mapping, {{required: <level>}} or {{preferred: <level>}} (got {_kind(value)})")
        return None
    c.only(value, path, set(TOPOLOGY_MODES))
    given = [mode for mode in TOPOLOGY_MODES if mode in value]
    if not given:
        c.error(path, "names no level: give {required: <level>} or {preferred: <level>}, "
                      "a level being a node attribute such as ykbus.io/rack")
        return None
    if len(given) > 1:
        c.error(path, "has both required and preferred: give one of them")
        return None
    mode = given[0]
    level = value[mode]
    where = f"{path}.{mode}"
    if level is None or level == "":
        c.error(where, "is empty: name a topology level, a node attribute such as ykbus.io/rack")
        return None
    if not isinstance(level, str):
        c.error(where, f"must be a string, a node attribute such as ykbus.io/rack (got {_kind(level)})")
        return None
    problem = attribute_name_problem(level)
    if problem:
        c.error(where, f"{level[:64]!r} is not a node attribute name: {problem}")
        return None
    return Topology(mode, level)


def _topology_problems(basic_policy: str, min_workers: int, topology: Topology | None,
                       worker_sets: list[WorkerSet]) -> list[tuple[str, str]]:
    """(path, message) for topologies a job cannot honour: only a Gang job is placed in one
    domain, and a worker set's domain is that of its workers in the gang (the first
    minWorkersNum workers in worker-set order): a set with none there would use it for nothing."""
    out: list[tuple[str, str]] = []
    given = [("spec.topology", topology), *((f"spec.workerSets[{i}].topology", ws.topology)
                                            for i, ws in enumerate(worker_sets))]
    if basic_policy != "Gang":
        return [(path, "only a Gang job is placed in one topology domain: set schedulerPolicy.basicPolicy: Gang "
                       f"(this job's is {basic_policy or 'not set'})") for path, t in given if t is not None]
    members = min_workers
    for i, ws in enumerate(worker_sets):
        if ws.topology is not None and members <= 0:
            out.append((f"spec.workerSets[{i}].topology",
                        f"no worker of worker set {ws.name} is in the gang (minWorkersNum {min_workers} takes the "
                        "first workers in worker-set order), so none would be placed in its domain: raise "
                        "minWorkersNum"))
        members -= ws.counts
    return out


def parse_document(doc: Any, where: str = "") -> tuple[TYJob | None, list[str]]:
    """One manifest: the job, or None and every error."""
    c = _Checker(where)
    top = c.mapping(doc, "(document)")
    if not top:
        return None, c.errors or [f"{where}(document): empty"]
    c.only(top, "", {"apiVersion", "kind", "metadata", "spec", "status"})
    api_version = c.string(top.get("apiVersion"), "apiVersion")
    kind = c.string(top.get("kind"), "kind")
    if kind and kind != KIND:
        c.error("kind", f"must be {KIND} (got {kind[:64]!r})")
    meta = c.mapping(top.get("metadata"), "metadata")
    name = c.name(meta.get("name"), "metadata.name")
    namespace = c.name(meta.get("namespace"), "metadata.namespace", default="default")
    spec = c.mapping(top.get("spec"), "spec")
    c.only(spec, "spec", {"restartLimit", "volumes", "leader", "workerSets", "cleanPodPolicy", "terminating",
                          "minWorkersNum", "priority", "schedulerPolicy", "topology"})
    restart_limit = c.integer(spec.get("restartLimit"), "spec.restartLimit", 3, 0, MAX_RESTART_LIMIT)
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list):
        c.error("spec.volumes", f"must be a list (got {_kind(volumes)})")
        volumes = []
    leader_raw = spec.get("leader")
    leader, leader_name, leader_tpl = PodSpec({}), "", {}
    if leader_raw is None:
        c.error("spec.leader", "is required")
    else:
        lead = c.mapping(leader_raw, "spec.leader")
        c.only(lead, "spec.leader", {"name", "template"})
        leader_name = c.name(lead.get("name"), "spec.leader.name")
        leader, leader_tpl = _pod(c, lead.get("template"), "spec.leader.template")
    sets_raw = spec.get("workerSets")
    worker_sets: list[WorkerSet] = []
    if sets_raw is None:
        c.error("spec.workerSets", "is required")
    elif not isinstance(sets_raw, list):
        c.error("spec.workerSets", f"must be a list of worker sets (got {_kind(sets_raw)})")
    elif not sets_raw:
        c.error("spec.workerSets", "must list at least one worker set")
    elif len(sets_raw) > MAX_WORKER_SETS:
        c.error("spec.workerSets", f"more than {MAX_WORKER_SETS} worker sets")
    else:
        seen: set[str] = set()
        for i, raw in enumerate(sets_raw):
            path = f"spec.workerSets[{i}]"
            ws = c.mapping(raw, path)
            c.only(ws, path, {"name", "template", "counts", "topology"})
            ws_name = c.name(ws.get("name"), f"{path}.name")
            if ws_name in seen or (ws_name and ws_name == leader_name):
                c.error(f"{path}.name", f"{ws_name!r} is used twice in this job")
            seen.add(ws_name)
            counts = c.integer(ws.get("counts"), f"{path}.counts", 1, 1, MAX_COUNTS)
            pod, tpl = _pod(c, ws.get("template"), f"{path}.template")
            worker_sets.append(WorkerSet(ws_name, counts, pod, tpl, _topology(c, ws.get("topology"),
                                                                              f"{path}.topology")))
    clean = c.string(spec.get("cleanPodPolicy"), "spec.cleanPodPolicy", "All", CLEAN_POD_POLICIES)
    terminating = c.boolean(spec.get("terminating"), "spec.terminating", False)
    workers = sum(ws.counts for ws in worker_sets)
    min_workers = c.integer(spec.get("minWorkersNum"), "spec.minWorkersNum", 1, 0, MAX_COUNTS * MAX_WORKER_SETS)
    if worker_sets and min_workers > workers and all(ws.counts >= 1 for ws in worker_sets):  # (else: counts' error)
        c.error("spec.minWorkersNum", f"must be at most the number of workers, {workers} (got {min_workers})")
    priority = c.integer(spec.get("priority"), "spec.priority", 5, 1, 10)
    policy = c.mapping(spec.get("schedulerPolicy"), "spec.schedulerPolicy", required=False)
    c.only(policy, "spec.schedulerPolicy", {"jobQueuePolicy", "basicPolicy"})
    queue_policy = c.string(policy.get("jobQueuePolicy"), "spec.schedulerPolicy.jobQueuePolicy", "Priority",
                            JOB_QUEUE_POLICIES)
    basic = c.string(policy.get("basicPolicy"), "spec.schedulerPolicy.basicPolicy", "", BASIC_POLICIES)
    if basic == "Gang" and queue_policy == "DRF":  # the core refuses task groups in a fair leaf (docs/gang.md)
        c.error("spec.schedulerPolicy", "jobQueuePolicy DRF with basicPolicy Gang: a Gang job runs in root.priority "
                "(jobQueuePolicy: Priority); root.drf sorts applications fair, where the core (as YuniKorn) "
                "takes no task groups")
    topology = _topology(c, spec.get("topology"), "spec.topology")
    if policy.get("basicPolicy") in (None, *BASIC_POLICIES):  # else its own error says what is wrong
        for path, problem in _topology_problems(basic, min_workers, topology, worker_sets):
            c.error(path, problem)
    if name and leader_name and worker_sets:  # checked with the rest: every error at once
        for problem in _name_collisions(name, leader_name, [(ws.name, ws.counts) for ws in worker_sets]):
            c.error("spec", problem)
    if c.errors:
        return None, c.errors
    job = TYJob(namespace=namespace, name=name, leader_name=leader_name, leader=leader, worker_sets=worker_sets,
                 restart_limit=restart_limit, clean_pod_policy=clean, terminating=terminating,
                 min_workers=min_workers, priority=priority, job_queue_policy=queue_policy, basic_policy=basic,
                 api_version=api_version, leader_template=leader_tpl, volumes=volumes, topology=topology)
    problems = check_job(job)
    if problems:
        return None, [f"{where}{e}" for e in problems]
    return job, []


def pod_names(job: TYJob) -> list[str]:
    """Every pod of the job: the leader `<job>-<leader>`, the workers `<job>-<worker set>-<i>`."""
    return [f"{job.name}-{job.leader_name}",
            *(f"{job.name}-{ws.name}-{i}" for ws in job.worker_sets for i in range(ws.counts))]


def check_job(job: TYJob) -> list[str]:
    """What a stored job breaks of the rules `parse_document` applies ([] when nothing):
    a value read back from the bucket is checked again (anyone with access to NATS may
    have written it), and every pod name must be unique."""
    errors: list[str] = []

    def bad(path: str, message: str) -> None:
        errors.append(f"{path}: {message}")

    for path, name in (("metadata.name", job.name), ("metadata.namespace", job.namespace),
                       ("spec.leader.name", job.leader_name), *((f"spec.workerSets[{i}].name", ws.name)
                                                               for i, ws in enumerate(job.worker_sets))):
        if not name or len(name) > MAX_NAME or not NAME.fullmatch(name):
            bad(path, f"must be a DNS-1123 label (got {name[:80]!r})")
    if not 1 <= len(job.worker_sets) <= MAX_WORKER_SETS:
        bad("spec.workerSets", f"must have 1 to {MAX_WORKER_SETS} worker sets")
    for i, ws in enumerate(job.worker_sets):
        if not 1 <= ws.counts <= MAX_COUNTS:
            bad(f"spec.workerSets[{i}].counts", f"must be 1 to {MAX_COUNTS} (got {ws.counts})")
    checks = [("spec.restartLimit", 0 <= job.restart_limit <= MAX_RESTART_LIMIT),
              ("spec.cleanPodPolicy", job.clean_pod_policy in CLEAN_POD_POLICIES),
              ("spec.priority", 1 <= job.priority <= 10),
              ("spec.schedulerPolicy.jobQueuePolicy", job.job_queue_policy in JOB_QUEUE_POLICIES),
              ("spec.schedulerPolicy.basicPolicy", job.basic_policy in ("", *BASIC_POLICIES))]
    for path, ok in checks:
        if not ok:
            bad(path, "out of bounds")
    if errors:
        return errors
    if not 0 <= job.min_workers <= job.workers:
        bad("spec.minWorkersNum", f"must be 0 to the number of workers, {job.workers} (got {job.min_workers})")
    for path, pod in (("spec.leader", job.leader), *((f"spec.workerSets[{i}]", ws.pod)
                                                    for i, ws in enumerate(job.worker_sets))):
        if not pod.resources or any(r not in RESOURCES.values() or not 0 <= v <= 2**63 - 1
                                    for r, v in pod.resources.items()):
            bad(f"{path}.template", "its requests must be cpu, memory or nvidia.com/gpu quantities")
        if not (0 <= pod.duration_s <= MAX_DURATION_S and 0 <= pod.exit_code <= 255
                and 0 <= pod.failures <= MAX_FAILURES):
            bad(f"{path}.template.metadata.annotations", "a runtime annotation is out of bounds")
    for path, topology in (("spec.topology", job.topology), *((f"spec.workerSets[{i}].topology", ws.topology)
                                                              for i, ws in enumerate(job.worker_sets))):
        if topology is not None and (topology.mode not in TOPOLOGY_MODES or not topology.level
                                     or attribute_name_problem(topology.level)):
            bad(path, "must be required or preferred, at a node attribute name")
    for path, problem in _topology_problems(job.basic_policy, job.min_workers, job.topology, job.worker_sets):
        bad(path, problem)
    for problem in _name_collisions(job.name, job.leader_name, [(ws.name, ws.counts) for ws in job.worker_sets]):
        bad("spec", problem)
    return errors


def _name_collisions(job: str, leader: str, sets: list[tuple[str, int]]) -> list[str]:
    """Pod names given twice (the leader `<job>-<leader>`, workers `<job>-<set>-<i>`)."""
    seen: dict[str, str] = {f"{job}-{leader}": "the leader"}
    out = []
    for ws, counts in sets:
        for i in range(counts):
            name, what = f"{job}-{ws}-{i}", f"worker {i} of worker set {ws}"
            if name in seen:
                out.append(f"pod name {name} is both {seen[name]} and {what}: rename the leader or a worker set")
            else:
                seen[name] = what
    return out


def parse_manifests(text: str, source: str = "") -> list[TYJob]:
    """Every TYJob of a YAML text (documents separated by `---`), or ManifestError with
    every error of every document."""
    prefix = f"{source}: " if source else ""
    try:
        docs = [d for d in load_yaml_documents(text) if d is not None]
    except ValueError as exc:
        raise ManifestError([f"{prefix}not valid YAML: {exc}"]) from None
    if not docs:
        raise ManifestError([f"{prefix}no TYJob in it"])
    if len(docs) > MAX_DOCUMENTS:
        raise ManifestError([f"{prefix}{len(docs)} documents, more than {MAX_DOCUMENTS}"])
    jobs, errors = [], []
    keys: dict[str, int] = {}
    for i, doc in enumerate(docs, 1):
        where = f"{prefix}document {i}: " if len(docs) > 1 else prefix
        job, errs = parse_document(doc, where)
        errors.extend(errs)
        if job is not None:
            if job.key in keys:
                errors.append(f"{where}metadata.name: {job.namespace}/{job.name} is also document {keys[job.key]}")
            keys[job.key] = i
            jobs.append(job)
    if errors:
        raise ManifestError(errors)
    return jobs
