"""The TYJob controller's logic, without IO: jobs in, SI requests out.

The controller is an RM. Each TYJob becomes one SI application in queue `root.priority`
(`jobQueuePolicy: Priority`) or `root.drf` (`DRF`), with one ask per pod (leader and
workers; `ykbus.io/role` tags; the job's priority as the asks' priority; the basic policy
as `ykbus.io/node-policy`, or, for `Gang`, task groups with placeholders for the leader and
the first `minWorkersNum` workers; the job's `topology` as the application's
`ykbus.io/topology-required|preferred` tag, a worker set's on its placeholders and pods).
It then follows the core's decisions:

- an allocation creates its pod on that node: the leader at once, a worker once the
  leader exists (Arranger's workers need the leader's address);
- a pod runs for its template's `ykbus.io/sim-duration` seconds, then exits: it fails
  `ykbus.io/sim-failures` times (restarted in place each time) and then exits with
  `ykbus.io/sim-exit-code`; a pod that exited releases its allocation; one that failed
  more than `restartLimit` times is Failed, and the job with it (leader or worker);
- an allocation the core releases on its own (its node went) loses the pod: its ask is
  sent again and the job is Rescheduling until every lost pod is placed again;
- a placeholder the core releases with `PLACEHOLDER_REPLACED` is confirmed at once (the
  SI's two-step replacement), so the real pod takes its place.

Stages and schedule states move only through the tables of `ykbus.tyjob.stages`. At the
end (Succeeded or Failed) pods are cleaned per `cleanPodPolicy` and, once nothing of the
job holds resources, its application is removed. `now` (wall-clock seconds) is always
passed in; `drain()` hands the requests to send, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import msgspec

from ykbus.core.resources import add_into, fmt_res
from ykbus.core.tags import POLICY_TAG, ROLE_TAG
from ykbus.core.timeline import too_large
from ykbus.core.topology import path_of, short
from ykbus.si import messages as m
from ykbus.tyjob.manifest import PodSpec, TYJob, check_job, pod_names
from ykbus.tyjob.stages import FINAL, SCHEDULE, STAGE, ScheduleEvent, ScheduleState, Stage, StageEvent

# the stages in which a job waits for pods the core has not placed: its message says why
WAITING = (Stage.PENDING.value, Stage.STARTING.value, Stage.RESCHEDULING.value)

PARTITION = "default"
LEVELS = ("ykbus.io/block", "ykbus.io/rack")  # QUEUES' topology levels, broadest first
# The controller's queue configuration. Its topology levels are node attributes that a
# cluster file gives its nodes (`attributes:`): docs/tyjob.md, "Topology".
QUEUES = """partitions:
  - name: default
    topology:
      levels: [""" + ", ".join(LEVELS) + """]
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: priority
            properties: {application.sort.policy: fifo, application.sort.priority: enabled}
          - name: drf
            properties: {application.sort.policy: fair}
"""
LEADER, WORKER = "leader", "worker"
PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED = "Pending", "Scheduled", "Running", "Succeeded", "Failed"
HOLDING = (SCHEDULED, RUNNING)  # phases in which a pod holds its allocation
PLACEHOLDER_KEY = "placeholder/"  # + task group: the placeholders' ask (no pod name has a "/")


class Pod(msgspec.Struct):
    name: str
    role: str  # leader | worker
    worker_set: str  # "" for the leader
    group: str = ""  # its task group (Gang), else ""
    phase: str = PENDING
    node: str = ""
    uuid: str = ""
    restarts: int = 0
    ends_at: float = 0.0  # while Running: when this run ends (wall-clock seconds)
    placed: bool = False  # placed at least once

    def unplace(self) -> None:
        """It holds no allocation any more and waits to be placed (again)."""
        self.uuid, self.node, self.phase, self.ends_at = "", "", PENDING, 0.0


class Placeholder(msgspec.Struct):
    key: str
    group: str
    node: str
    resources: dict[str, int]


class JobRun(msgspec.Struct):
    """A job as the controller runs it; saved (JSON) so a restarted controller goes on."""

    job: TYJob
    app_id: str
    pods: dict[str, Pod]
    stage: str = Stage.PENDING.value
    schedule: str = ScheduleState.UNSCHEDULED.value
    restarts: int = 0
    message: str = ""
    never_fits: str = ""  # why it can never be scheduled
    waits: dict[str, str] = {}  # ask key -> why the core keeps it waiting, until it is placed
    outgrown: str = ""  # why no domain of the level it requires holds its gang, as the cluster stands
    lost: list[str] = []  # pods lost with their node, not placed again yet
    placeholders: dict[str, Placeholder] = {}  # uuid -> placeholder held
    cleaned: bool = False
    removed: bool = False  # its application is removed from the core

    def status(self) -> dict[str, Any]:
        return {"name": self.job.name, "namespace": self.job.namespace, "stage": self.stage,
                "scheduleState": self.schedule, "restarts": self.restarts,
                "pods": [{"name": p.name, "role": p.role, "workerSet": p.worker_set, "node": p.node, "phase": p.phase}
                         for p in self.pods.values()],
                "message": self.message, "application": self.app_id}


def consistent(run: JobRun) -> bool:
    """Whether a saved run is one this controller could have made of its job: its job
    keeps the manifest rules and its pods are the job's pods (a value read back from the
    bucket may have been written by anyone)."""
    if check_job(run.job):
        return False
    names = set(pod_names(run.job))
    sets = {ws.name for ws in run.job.worker_sets}
    leaders = [p for p in run.pods.values() if p.role == LEADER]
    return (set(run.pods) <= names and len(leaders) <= 1
            and all(p.name == k and (p.role == LEADER or (p.role == WORKER and p.worker_set in sets))
                    for k, p in run.pods.items()))


def pod_spec(job: TYJob, pod: Pod) -> PodSpec:
    if pod.role == LEADER:
        return job.leader
    return next(ws.pod for ws in job.worker_sets if ws.name == pod.worker_set)


def new_run(job: TYJob, app_id: str) -> JobRun:
    """The job's pods, with task groups for Gang: the leader's, and one per worker set for
    its first workers, up to minWorkersNum in worker-set order."""
    gang = job.basic_policy == "Gang"
    pods = {f"{job.name}-{job.leader_name}": Pod(f"{job.name}-{job.leader_name}", LEADER, "",
                                                 group=LEADER if gang else "")}
    members = job.min_workers
    for ws in job.worker_sets:
        for i in range(ws.counts):
            name = f"{job.name}-{ws.name}-{i}"
            in_gang = gang and members > 0
            members -= 1 if in_gang else 0
            pods[name] = Pod(name, WORKER, ws.name, group=f"ws-{ws.name}" if in_gang else "")
    return JobRun(job=job, app_id=app_id, pods=pods)


@dataclass
class Requests:
    """What the controller has to send, in this order."""

    apps: list[m.AddApplicationRequest] = field(default_factory=list)
    asks: list[m.AllocationAsk] = field(default_factory=list)
    releases: list[m.AllocationRelease] = field(default_factory=list)
    ask_releases: list[m.AllocationAskRelease] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.apps or self.asks or self.releases or self.ask_releases or self.removes)


class Controller:
    def __init__(self, node_capacities: dict[str, dict[str, int]] | None = None,
                 node_attributes: dict[str, dict[str, str]] | None = None) -> None:
        self.runs: dict[str, JobRun] = {}  # job key (namespace.name) -> run
        self.by_app: dict[str, JobRun] = {}
        self.capacities = node_capacities or {}  # the cluster's nodes: what can ever fit
        self.attributes = node_attributes or {}  # their attributes: the topology domains they are in
        self.out = Requests()
        self.changed: set[str] = set()  # job keys whose status changed since `take_changed`

    # --- jobs in ---------------------------------------------------------------------

    def apply(self, job: TYJob, revision: int, now: float) -> None:
        """A job stored (new, or changed: only `terminating` changes a running job)."""
        run = self.runs.get(job.key)
        if run is not None and msgspec.structs.replace(run.job, terminating=job.terminating) == job:
            run.job = job
            self._advance(run, now)
            return
        if run is not None:  # another job under the same name (deleted and applied again while away)
            self.delete(job.key, now)
        run = new_run(job, f"tyjob-{job.namespace}-{job.name}-{revision}")
        self._add(run)
        self._submit(run)
        self._advance(run, now)

    def delete(self, key: str, now: float) -> None:
        """A job deleted: everything of it released, its application removed."""
        run = self.runs.pop(key, None)
        if run is None:
            return
        self._clean(run, "All")
        if not run.removed:
            self.out.removes.append(run.app_id)
            run.removed = True
        self.by_app.pop(run.app_id, None)
        self.changed.add(key)

    def recover(self, runs: list[JobRun]) -> tuple[list[m.AddApplicationRequest], dict[str, list[m.Allocation]]]:
        """Runs saved by an earlier controller: what to recover with (its applications, and
        per node the allocations its pods and placeholders hold). A run that does not match
        its own job is skipped; pods on a node no longer in the cluster are lost (asked
        again), placeholders there dropped. The pending asks follow once recovery is done
        (`resend`)."""
        apps, held = [], {}
        for run in runs:
            if not consistent(run):
                continue
            self._add(run)
            if run.removed:
                continue
            if self.capacities:
                for pod in run.pods.values():
                    if pod.uuid and pod.node not in self.capacities:
                        pod.unplace()
                        if run.stage not in FINAL:
                            run.lost.append(pod.name)
                run.placeholders = {u: ph for u, ph in run.placeholders.items() if ph.node in self.capacities}
            apps.append(self._app_request(run))
            for pod in run.pods.values():
                if pod.uuid:
                    held.setdefault(pod.node, []).append(m.Allocation(
                        allocationKey=pod.name, UUID=pod.uuid, resourcePerAlloc=_resource(pod_spec(run.job, pod).resources),
                        nodeID=pod.node, applicationID=run.app_id, partitionName=PARTITION,
                        taskGroupName=pod.group, priority=run.job.priority))
            for uuid, ph in run.placeholders.items():
                held.setdefault(ph.node, []).append(m.Allocation(
                    allocationKey=ph.key, UUID=uuid, resourcePerAlloc=_resource(ph.resources), nodeID=ph.node,
                    applicationID=run.app_id, partitionName=PARTITION, taskGroupName=ph.group, placeholder=True,
                    priority=run.job.priority))
        return apps, held

    def set_capacities(self, capacities: dict[str, dict[str, int]], now: float,
                       attributes: dict[str, dict[str, str]] | None = None) -> None:
        """The cluster changed: a job it can no longer ever hold fails (ScheduledFailed)."""
        self.capacities = capacities
        if attributes is not None:
            self.attributes = attributes
        for run in list(self.runs.values()):
            if run.stage in FINAL or run.never_fits:
                continue
            problem = never_fits(run, self.capacities, self.attributes)
            if problem:
                run.never_fits = problem
                self._advance(run, now)
            else:
                self._outgrown(run)

    def resend(self) -> None:
        """After recovery: the asks of every pod (and placeholder) still waiting."""
        for run in self.runs.values():
            if run.removed or run.stage in FINAL:
                continue
            self.out.asks.extend(self._asks(run, only_pending=True))

    def _add(self, run: JobRun) -> None:
        self.runs[run.job.key] = run
        self.by_app[run.app_id] = run
        self.changed.add(run.job.key)

    # --- requests out ----------------------------------------------------------------

    def drain(self) -> Requests:
        out, self.out = self.out, Requests()
        return out

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def unsaved(self, keys: list[str]) -> None:
        """Runs taken to be saved whose save failed: saved at the next try."""
        self.changed.update(keys)

    def _app_request(self, run: JobRun) -> m.AddApplicationRequest:
        job = run.job
        tags = {"ykbus.io/tyjob": f"{job.namespace}/{job.name}"}
        if job.basic_policy and job.basic_policy != "Gang":
            tags[POLICY_TAG] = job.basic_policy
        if job.topology is not None:  # the whole gang in one domain
            tags.update(job.topology.tags())
        gang: dict[str, int] = {}
        if job.basic_policy == "Gang":
            for pod in run.pods.values():
                if pod.group:
                    add_into(gang, pod_spec(job, pod).resources)
        return m.AddApplicationRequest(
            applicationID=run.app_id, queueName="root.drf" if job.job_queue_policy == "DRF" else "root.priority",
            partitionName=PARTITION, ugi=m.UserGroupInformation(user=job.namespace), tags=tags,
            placeholderAsk=_resource(gang) if gang else None, gangSchedulingStyle="Soft")

    def _ask(self, run: JobRun, pod: Pod) -> m.AllocationAsk:
        return m.AllocationAsk(allocationKey=pod.name, applicationID=run.app_id, partitionName=PARTITION,
                               resourceAsk=_resource(pod_spec(run.job, pod).resources), maxAllocations=1,
                               priority=run.job.priority, tags={ROLE_TAG: pod.role, **_set_topology(run.job, pod)},
                               taskGroupName=pod.group)

    def _asks(self, run: JobRun, only_pending: bool = False) -> list[m.AllocationAsk]:
        """The job in its order: placeholders first (one ask per task group), then one ask
        per pod waiting, the leader before its workers. All are sent at once: the core
        places a worker only once its leader is placed (and, for Gang, a worker outside the
        task groups once the gang is), so workers never hold the room their leader needs and
        no later job is placed between a job's leader and its workers."""
        asks = []
        groups: dict[str, list[Pod]] = {}
        for pod in run.pods.values():
            if pod.group:
                groups.setdefault(pod.group, []).append(pod)
        for group, members in groups.items():
            held = sum(1 for ph in run.placeholders.values() if ph.group == group)
            wanted = sum(1 for p in members if not p.placed) - held
            if wanted > 0 and not (only_pending and run.stage != Stage.PENDING.value):
                asks.append(m.AllocationAsk(
                    allocationKey=f"{PLACEHOLDER_KEY}{group}", applicationID=run.app_id, partitionName=PARTITION,
                    resourceAsk=_resource(pod_spec(run.job, members[0]).resources), maxAllocations=wanted,
                    priority=run.job.priority, taskGroupName=group, placeholder=True,
                    tags=_set_topology(run.job, members[0])))
        waiting = [pod for pod in run.pods.values() if pod.phase == PENDING]
        asks.extend(self._ask(run, pod) for pod in sorted(waiting, key=lambda p: p.role != LEADER))
        return asks

    def _submit(self, run: JobRun) -> None:
        problem = never_fits(run, self.capacities, self.attributes)
        if problem:
            run.never_fits = problem
            run.removed = True  # nothing is sent for a job that can never run
            return
        self.out.apps.append(self._app_request(run))
        self.out.asks.extend(self._asks(run))
        self._outgrown(run)

    def _outgrown(self, run: JobRun) -> None:
        """Whether its gang is larger than every domain of the level it requires, as the
        cluster stands: it waits (the cluster file may grow), saying so."""
        outgrown = no_domain_ever(run, self.capacities, self.attributes)
        if outgrown != run.outgrown:
            run.outgrown = outgrown
            self._show_wait(run)

    # --- the core's decisions in -------------------------------------------------------

    def on_applications(self, response: m.ApplicationResponse, now: float) -> None:
        for r in response.rejected:
            run = self.by_app.get(r.applicationID)
            if run is not None:
                run.never_fits = f"the core rejected the job: {r.reason}"
                run.removed = True
                self._advance(run, now)
        for u in response.updated:
            run = self.by_app.get(u.applicationID)
            if run is not None and u.state in ("Failed", "Rejected") and run.stage not in FINAL:
                run.never_fits = f"the core ended the job's application: {u.message or u.state}"
                self._advance(run, now)

    def on_allocations(self, response: m.AllocationResponse, now: float) -> None:
        touched: dict[str, JobRun] = {}
        for a in response.new:
            run = self.by_app.get(a.applicationID)
            if run is None:
                continue
            touched[run.job.key] = run
            if run.waits.pop(a.allocationKey, None) is not None:
                self._show_wait(run)
            if a.placeholder:
                run.placeholders[a.UUID] = Placeholder(a.allocationKey, a.taskGroupName, a.nodeID,
                                                       {k: q.value for k, q in a.resourcePerAlloc.resources.items()})
                continue
            pod = run.pods.get(a.allocationKey)
            if pod is None or pod.phase != PENDING:  # not ours to run: give it back
                self.out.releases.append(_release(run, a.UUID, a.allocationKey, "no pod waits for it"))
                continue
            pod.uuid, pod.node, pod.phase, pod.placed = a.UUID, a.nodeID, SCHEDULED, True
            if pod.name in run.lost:
                run.lost.remove(pod.name)
            if run.stage in FINAL:
                self._end_pod(run, pod, "the job has ended")
                continue
            if pod.role == LEADER or _leader_created(run):
                self._start(run, pod, now)
        for r in response.released:
            run = self.by_app.get(r.applicationID)
            if run is None:
                continue
            touched[run.job.key] = run
            if r.terminationType in CONFIRMED:  # step two of a replacement or a preemption: the pod is deleted
                self.out.releases.append(_release(run, r.UUID, r.allocationKey, "pod deleted", r.terminationType))
            if run.placeholders.pop(r.UUID, None) is not None:
                continue
            pod = next((p for p in run.pods.values() if p.uuid == r.UUID), None)
            if pod is None:
                continue  # one it released itself
            pod.unplace()
            if run.stage in FINAL:  # left running after its job ended (cleanPodPolicy): gone with its node
                pod.phase = FAILED
                continue
            run.lost.append(pod.name)
            self.out.asks.append(self._ask(run, pod))
        for r in response.rejected:
            run = self.by_app.get(r.applicationID)
            if run is not None:
                touched[run.job.key] = run
                run.never_fits = f"the core rejected pod {r.allocationKey}: {r.reason}"
        for run in touched.values():
            self._advance(run, now)

    def on_states(self, states: list[m.UpdateContainerSchedulingStateRequest]) -> None:
        """Why the core keeps a pod waiting (its why-pending reason), shown as the job's
        message while the job waits for it (Pending, Starting or Rescheduling). A placeholder's reason
        (the gang's) says more than its members' (they wait for the placeholders)."""
        told: dict[str, JobRun] = {}
        for s in states:
            run = self.by_app.get(s.applicartionID)
            if run is None or run.stage not in WAITING or not s.reason:
                continue
            run.waits[s.allocationKey] = s.reason
            told[run.app_id] = run
        for run in told.values():
            self._show_wait(run)

    def _show_wait(self, run: JobRun) -> None:
        message = wait_message(run)
        if message is not None and message != run.message:
            run.message = message
            self.changed.add(run.job.key)

    # --- time --------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Pods whose run ended exit; jobs move on."""
        for run in list(self.runs.values()):
            ended = [p for p in run.pods.values() if p.phase == RUNNING and p.ends_at <= now]
            for pod in ended:
                self._exit(run, pod, now)
            if ended:
                self._advance(run, now)

    def _exit(self, run: JobRun, pod: Pod, now: float) -> None:
        spec = pod_spec(run.job, pod)
        failed = pod.restarts < spec.failures or spec.exit_code != 0
        self.changed.add(run.job.key)
        if not failed:
            self._end_pod(run, pod, "pod succeeded", SUCCEEDED)
            return
        pod.restarts += 1
        if pod.role == LEADER:
            run.restarts = pod.restarts
        if pod.restarts > run.job.restart_limit or run.stage in FINAL:
            self._end_pod(run, pod, f"pod failed {pod.restarts} times (restartLimit {run.job.restart_limit})", FAILED)
        else:
            pod.ends_at = now + spec.duration_s  # restarted in place

    def _start(self, run: JobRun, pod: Pod, now: float) -> None:
        pod.phase = RUNNING
        pod.ends_at = now + pod_spec(run.job, pod).duration_s
        if pod.role == LEADER:  # its workers may start now
            for worker in run.pods.values():
                if worker.phase == SCHEDULED:
                    self._start(run, worker, now)

    def _end_pod(self, run: JobRun, pod: Pod, message: str, phase: str = "") -> None:
        """The pod stops holding its allocation (released to the core)."""
        if pod.uuid:
            self.out.releases.append(_release(run, pod.uuid, pod.name, message))
        if phase:  # it ran: it keeps its node in the status
            pod.uuid, pod.phase, pod.ends_at = "", phase, 0.0
        else:
            pod.unplace()

    def _advance(self, run: JobRun, now: float) -> None:
        self.changed.add(run.job.key)
        event = schedule_event(run)
        state = ScheduleState(run.schedule)
        if event is not None and SCHEDULE.allows(state, event):
            run.schedule = SCHEDULE.advance(state, event).value
            if event is ScheduleEvent.NEVER_FITS:
                run.message = run.never_fits
        cleared = False
        while Stage(run.stage) not in FINAL:
            step = stage_event(run)
            if step is None or not STAGE.allows(Stage(run.stage), step):
                break
            run.stage = STAGE.advance(Stage(run.stage), step).value
            cleared = step in (StageEvent.LEADER_CREATED, StageEvent.WORKERS_READY, StageEvent.PODS_BACK)
            if cleared:
                run.message = ""  # what it waited for is there
            elif step is StageEvent.RESTARTS_EXCEEDED:
                worker = _failed_worker(run)
                run.message = (f"the leader failed {run.restarts} times, more than restartLimit {run.job.restart_limit}"
                               if worker is None else f"worker {worker.name} failed {worker.restarts} times, more than "
                               f"restartLimit {run.job.restart_limit}")
            elif step is StageEvent.LEADER_SUCCEEDED:
                run.message = "the leader succeeded"
            elif step is StageEvent.TERMINATING:
                run.message = "spec.terminating is set"
            elif step is StageEvent.PODS_LOST:
                run.message = f"pods lost with their node: {', '.join(run.lost)}"
        if cleared and run.stage in WAITING:  # what it waits for now, as the core said it (pods lost: that says more)
            self._show_wait(run)
        if Stage(run.stage) in FINAL:
            if not run.cleaned:
                self._clean(run, run.job.clean_pod_policy)
                run.cleaned = True
            self._remove_when_idle(run)

    def _clean(self, run: JobRun, policy: str) -> None:
        """The end of a job: waiting asks and placeholders go; pods per `policy` (All: every
        pod deleted; Running: the running ones deleted, finished ones kept; None: nothing
        deleted, running pods run to their end). A pod placed but not started (its leader
        never ran) is not created: it goes under every policy."""
        if any(p.phase == PENDING for p in run.pods.values()) or run.placeholders or run.job.basic_policy == "Gang":
            if not run.removed:
                self.out.ask_releases.append(m.AllocationAskRelease(
                    partitionName=PARTITION, applicationID=run.app_id,
                    terminationType=m.TerminationType.STOPPED_BY_RM, message="the job has ended"))
        for uuid, ph in list(run.placeholders.items()):
            self.out.releases.append(_release(run, uuid, ph.key, "the job has ended"))
            del run.placeholders[uuid]
        for name, pod in list(run.pods.items()):
            if pod.phase == PENDING:
                del run.pods[name]
            elif pod.phase == SCHEDULED or (pod.phase == RUNNING and policy in ("All", "Running")):
                self._end_pod(run, pod, f"the job has ended (cleanPodPolicy {policy})")
                del run.pods[name]
            elif policy == "All":
                del run.pods[name]
        run.lost = []

    def _remove_when_idle(self, run: JobRun) -> None:
        if not run.removed and not run.placeholders and not any(p.uuid for p in run.pods.values()):
            self.out.removes.append(run.app_id)
            run.removed = True


def _leader_created(run: JobRun) -> bool:
    """Its leader's pod was created (it runs or ran)."""
    return any(p.role == LEADER and p.phase in (RUNNING, SUCCEEDED, FAILED) for p in run.pods.values())


def schedule_event(run: JobRun) -> ScheduleEvent | None:
    """What the core's decisions, as the run holds them, say of its schedule state (none
    once the job ended: its pods cleaned away say nothing of how they were placed)."""
    if run.stage in FINAL:
        return None
    if run.never_fits:
        return ScheduleEvent.NEVER_FITS
    if run.lost:
        return ScheduleEvent.LOST
    placed = sum(1 for p in run.pods.values() if p.placed)
    if placed == len(run.pods):
        return ScheduleEvent.PLACED_ALL
    return ScheduleEvent.PLACED_SOME if placed else None


def stage_event(run: JobRun) -> StageEvent | None:
    """What the run's pods say of its stage (its schedule state read first)."""
    stage = Stage(run.stage)
    leader = next((p for p in run.pods.values() if p.role == LEADER), None)
    if leader is None:  # cleaned away (cleanPodPolicy): the job has ended
        return None
    if run.schedule == ScheduleState.SCHEDULED_FAILED:
        return StageEvent.SCHEDULE_FAILED
    if run.job.terminating:
        return StageEvent.TERMINATING
    if leader.phase == SUCCEEDED:
        return StageEvent.LEADER_SUCCEEDED
    if leader.phase == FAILED or _failed_worker(run) is not None:
        return StageEvent.RESTARTS_EXCEEDED
    if stage is Stage.PENDING:
        return StageEvent.LEADER_CREATED if _leader_created(run) else None
    if stage is Stage.RESCHEDULING:
        return None if run.lost else StageEvent.PODS_BACK
    if run.lost:
        return StageEvent.PODS_LOST
    if stage is Stage.STARTING and leader.phase == RUNNING:
        ready = sum(1 for p in run.pods.values() if p.role == WORKER and p.phase in (RUNNING, SUCCEEDED))
        if ready >= run.job.min_workers:
            return StageEvent.WORKERS_READY
    return None


def never_fits(run: JobRun, caps: dict[str, dict[str, int]], attributes: dict[str, dict[str, str]]) -> str:
    """Why the job can never be scheduled on a cluster of nodes of `caps` (capacities by
    name) with `attributes` ("" when it can, or the cluster is not known yet): a pod no node
    holds, a gang larger than the cluster, or one required in a domain that no domain of its
    level holds even empty."""
    if not caps:
        return ""
    waiting = still_to_place(run, caps)
    for pod in waiting:
        res = pod_spec(run.job, pod).resources
        if not any(all(c.get(r, 0) >= v for r, v in res.items()) for c in caps.values()):
            return f"pod {pod.name} ({fmt_res(res)}) fits no node of the cluster"
    total: dict[str, int] = {}
    for c in caps.values():
        add_into(total, c)
    need: dict[str, int] = {}
    for pod in waiting:
        if pod.group or run.job.basic_policy != "Gang" and pod.role == LEADER:
            add_into(need, pod_spec(run.job, pod).resources)
    over = [r for r, v in need.items() if v > total.get(r, 0)]
    if over:
        return f"its gang ({fmt_res(need)}) is larger than the whole cluster ({fmt_res(total)})"
    return ""


def still_to_place(run: JobRun, caps: dict[str, dict[str, int]]) -> list[Pod]:
    """The pods of `run` the cluster must still find room for: those waiting, and those on a
    node the cluster file no longer has (they will be lost with it); not one that ended, nor
    one running where it stays."""
    return [pod for pod in run.pods.values()
            if pod.phase == PENDING or (pod.node and pod.node not in caps and pod.phase not in (SUCCEEDED, FAILED))]


def no_domain_ever(run: JobRun, caps: dict[str, dict[str, int]], attributes: dict[str, dict[str, str]]) -> str:
    """Why no domain of the level the job requires holds its gang even empty ("" when one
    does, or it requires none): the core keeps it waiting until the cluster file grows one."""
    topology = run.job.topology
    if topology is None or topology.mode != "required" or topology.level not in LEVELS or not attributes:
        return ""
    members = [pod_spec(run.job, pod).resources for pod in run.pods.values()
               if pod.group and not _set_topology(run.job, pod)]  # the gang, but task groups with their own
    if not members:
        return ""
    depth = LEVELS.index(topology.level) + 1
    domains: dict[tuple[str, ...], list[dict[str, int]]] = {}
    for name, cap in sorted(caps.items()):
        path = path_of(LEVELS, attributes.get(name, {}))
        if len(path) >= depth:
            domains.setdefault(path[:depth], []).append(cap)
    if any(not too_large(held, members) for held in domains.values()):
        return ""
    level = short(topology.level)
    need: dict[str, int] = {}
    for r in members:
        add_into(need, r)
    rooms: dict[tuple[str, ...], dict[str, int]] = {}
    for key, held in domains.items():
        room = rooms[key] = {}
        for c in held:
            add_into(room, c)
    # the largest for it: the most of the gang its room holds, by the scarcest resource
    largest = max(rooms, key=lambda k: (min(Fraction(rooms[k].get(r, 0), v) for r, v in need.items()), k),
                  default=None)
    where = f" (the largest for it, {level} {'/'.join(largest)}, has {fmt_res(rooms[largest])})" if largest else ""
    return (f"its gang ({len(members)} pods, {fmt_res(need)}) fits in no {level} of the cluster even when it is "
            f"empty{where}: it waits until the cluster has a {level} that holds it")


def _failed_worker(run: JobRun) -> Pod | None:
    """A worker that failed more than restartLimit times (the first by name): the job fails
    with it, as with its leader (Arranger: "some pods failed, job is also considered
    failed")."""
    return next((p for _, p in sorted(run.pods.items()) if p.role == WORKER and p.phase == FAILED), None)


def wait_message(run: JobRun) -> str | None:
    """A waiting job's message: the reason of a pod still waiting (the gang's placeholders'
    first, then a pod lost with its node), "" once none waits of what it said; None to
    leave it (not waiting, or not a wait it said)."""
    if run.stage not in WAITING:
        return None
    if run.outgrown:  # the core's reason (no domain has room now) says less
        return run.outgrown[:1024]
    lost = next((k for k in run.waits if k in run.lost), None)
    if run.lost and lost is None:
        return None  # "pods lost with their node" says more until the core says why a lost pod waits
    key = next((k for k in run.waits if k.startswith(PLACEHOLDER_KEY)),  # the gang's first,
               lost if lost is not None else next(iter(run.waits), None))  # then a lost pod's
    if key is not None:
        return f"{key} waits: {run.waits[key]}"[:1024]
    return "" if " waits: " in run.message or " it waits until " in run.message else None


def _set_topology(job: TYJob, pod: Pod) -> dict[str, str]:
    """The topology tag of the pod's worker set ({} when it has none): its task group's own
    domain, which wins over the job's."""
    if pod.role != WORKER:
        return {}
    topology = next((ws.topology for ws in job.worker_sets if ws.name == pod.worker_set), None)
    return topology.tags() if topology is not None else {}


def _release(run: JobRun, uuid: str, key: str, message: str,
             termination: m.TerminationType = m.TerminationType.STOPPED_BY_RM) -> m.AllocationRelease:
    return m.AllocationRelease(partitionName=PARTITION, applicationID=run.app_id, UUID=uuid, allocationKey=key,
                               terminationType=termination, message=message)


# releases of the core's that the RM confirms with one of the same type once the pod is gone
CONFIRMED = (m.TerminationType.PLACEHOLDER_REPLACED, m.TerminationType.PREEMPTED_BY_SCHEDULER)


def _resource(res: dict[str, int]) -> m.Resource:
    return m.Resource(resources={k: m.Quantity(v) for k, v in res.items()})

