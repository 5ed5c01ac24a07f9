"""The TYJob controller over a real nats-server and core: jobs applied through the KV bucket
(`ykbus tyjob apply`), run through their stages by the controller RM, read back with
`ykbus tyjob get`: every policy to Succeeded, Failed (restart limit, can never fit),
cleanPodPolicy each way, a node removed mid-job, a gang waiting for room, a controller
restarted mid-job."""

from __future__ import annotations

import logging
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tests.integration.conftest import running_core
from ykbus.tyjob import cli
from ykbus.tyjob.service import ControllerService

pytestmark = pytest.mark.anyio

CLUSTER = """
nodes:
  - {name: cpu-1, cpu: 8, memory: 32Gi}
  - {name: cpu-2, cpu: 8, memory: 32Gi}
  - {name: gpu-1, cpu: 16, memory: 64Gi, nvidia.com/gpu: 4}
"""


def job(name: str, policy: str = "", workers: int = 2, leader: str = "0.3", worker: str = "0.3", extra: str = "",
        leader_annotations: str = "", cpu: str = "1", min_workers: int = 1) -> str:
    """A TYJob manifest: a leader and one worker set of `workers` pods, `cpu` each."""
    lines = [
        "apiVersion: arranger.ykbus.io/v1",
        "kind: TYJob",
        f"metadata: {{name: {name}}}",
        "spec:",
        f"  minWorkersNum: {min_workers}",
    ]
    if policy:
        lines.append(f"  schedulerPolicy: {{basicPolicy: {policy}}}")
    lines += [extra.rstrip("\n")] if extra else []
    lines += [
        "  leader:",
        "    name: learner",
        "    template:",
        f'      metadata: {{annotations: {{ykbus.io/sim-duration: "{leader}"{leader_annotations}}}}}',
        f'      spec: {{containers: [{{name: l, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]}}',
        "  workerSets:",
        "    - name: actor",
        f"      counts: {workers}",
        "      template:",
        f'        metadata: {{annotations: {{ykbus.io/sim-duration: "{worker}"}}}}',
        f'        spec: {{containers: [{{name: a, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]}}',
    ]
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def controller(url: str, cluster: Path, notify=None):
    service = ControllerService(url, str(cluster), notify=notify)
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.run)
        with anyio.fail_after(15):
            await service.ready.wait()
        try:
            yield service
        finally:
            tg.cancel_scope.cancel()


async def apply(url: str, tmp_path: Path, *docs: str) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("---\n".join(docs))
    assert await cli.apply(cli.Nats(url), [str(path)]) == 0


async def statuses(url: str) -> dict[str, dict]:
    return {s["name"]: s for s in await cli.read_statuses(cli.Nats(url), None, None)}


async def wait_for(url: str, predicate, timeout: float = 20.0) -> dict[str, dict]:
    with anyio.fail_after(timeout):
        while True:
            st = await statuses(url)
            if predicate(st):
                return st
            await anyio.sleep(0.1)


def tyjob_allocations(core) -> int:
    parts = core.read("partitions", {})["partitions"]
    return parts.get("tyjob", {}).get("default", {}).get("allocations", 0)


def cluster_file(tmp_path: Path, text: str = CLUSTER) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


async def test_jobs_of_every_policy_run_to_succeeded_and_leave_nothing_allocated(nats_server, tmp_path):
    url = nats_server.url
    policies = ["", "Gang", "BinPack", "LeaderFirst", "MinFragment", "JobAffinity", "JobAntiAffinity"]
    async with running_core(url) as core, controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, *[job(f"j{i}", p, min_workers=2) for i, p in enumerate(policies)])
        st = await wait_for(url, lambda s: len(s) == len(policies) and all(
            j["stage"] == "Succeeded" for j in s.values()))
        for s in st.values():
            assert s["scheduleState"] == "ScheduledSucceed" and s["restarts"] == 0
            assert s["pods"] == []  # cleanPodPolicy All: every pod deleted
        with anyio.fail_after(10):
            while tyjob_allocations(core):
                await anyio.sleep(0.05)


async def test_a_leader_failing_past_its_restart_limit_fails_the_job(nats_server, tmp_path):
    url = nats_server.url
    async with running_core(url), controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, job("crashy", extra="  restartLimit: 2\n", leader="0.2", worker="30",
                                       leader_annotations=', ykbus.io/sim-exit-code: "3"'))
        st = await wait_for(url, lambda s: s.get("crashy", {}).get("stage") == "Failed")
        assert st["crashy"]["restarts"] == 3 and "restartLimit 2" in st["crashy"]["message"]


async def test_a_leader_that_fails_then_succeeds_restarts_in_place(nats_server, tmp_path):
    url = nats_server.url
    async with running_core(url), controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, job("flaky", leader="0.2", leader_annotations=', ykbus.io/sim-failures: "2"',
                                       extra="  cleanPodPolicy: None\n"))
        st = await wait_for(url, lambda s: s.get("flaky", {}).get("stage") == "Succeeded")
        assert st["flaky"]["restarts"] == 2
        leader = next(p for p in st["flaky"]["pods"] if p["role"] == "leader")
        assert leader["phase"] == "Succeeded" and leader["node"]


async def test_a_job_that_can_never_fit_fails(nats_server, tmp_path):
    url = nats_server.url
    async with running_core(url), controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, job("huge", cpu="64"))
        st = await wait_for(url, lambda s: s.get("huge", {}).get("stage") == "Failed")
        assert st["huge"]["scheduleState"] == "ScheduledFailed" and "fits no node" in st["huge"]["message"]


@pytest.mark.parametrize(("policy", "left"), [("All", set()), ("Running", {("learner", "Succeeded")}),
                                              ("None", {("learner", "Succeeded"), ("actor", "Running")})])
async def test_clean_pod_policy(nats_server, tmp_path, policy, left):
    url = nats_server.url
    async with running_core(url) as core, controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, job("c", leader="0.5", worker="60", extra=f"  cleanPodPolicy: {policy}\n"))
        st = await wait_for(url, lambda s: s.get("c", {}).get("stage") == "Succeeded")
        kinds = {(p["name"].split("-")[1], p["phase"]) for p in st["c"]["pods"]}
        assert kinds == left
        with anyio.fail_after(10):  # only the workers of None still hold their allocations
            while tyjob_allocations(core) != (2 if policy == "None" else 0):
                await anyio.sleep(0.05)


async def test_a_node_removed_mid_job_reschedules_its_pods(nats_server, tmp_path):
    url = nats_server.url
    cluster = cluster_file(tmp_path)
    async with running_core(url), controller(url, cluster):
        await apply(url, tmp_path, job("r", "JobAffinity", workers=3, leader="60", worker="60"))
        st = await wait_for(url, lambda s: s.get("r", {}).get("stage") == "Running")
        nodes = {p["node"] for p in st["r"]["pods"]}
        assert len(nodes) == 1  # JobAffinity: all together
        [gone] = nodes
        cluster.write_text("\n".join(line for line in CLUSTER.splitlines() if gone not in line) + "\n")

        def moved(s):
            return s["r"]["stage"] == "Running" and all(p["node"] and p["node"] != gone for p in s["r"]["pods"])

        st = await wait_for(url, moved)
        # (the stage passes through Rescheduling, tests/tyjob/test_controller.py; polled here
        # every 0.1 s it can be over before it is seen, now that a job's asks go together)
        assert st["r"]["scheduleState"] in ("ScheduledPartly", "ScheduledSucceed")


async def test_a_gang_waits_for_room_and_holds_nothing_meanwhile(nats_server, tmp_path):
    url = nats_server.url
    async with running_core(url) as core, controller(url, cluster_file(tmp_path)):
        await apply(url, tmp_path, job("blocker", workers=5, cpu="4", leader="6", worker="6", min_workers=5))  # (6 s: still running when checked, on a loaded machine too)
        await wait_for(url, lambda s: s.get("blocker", {}).get("stage") == "Running")
        held = tyjob_allocations(core)
        await apply(url, tmp_path, job("gang", "Gang", workers=4, cpu="4", min_workers=4))
        st = await wait_for(url, lambda s: "gang" in s)
        await anyio.sleep(0.5)  # time enough to place what fits: nothing of the gang does
        st = await statuses(url)
        assert st["blocker"]["stage"] == "Running"
        assert st["gang"]["stage"] == "Pending" and st["gang"]["scheduleState"] == "Unscheduled"
        assert all(p["phase"] == "Pending" for p in st["gang"]["pods"])
        assert tyjob_allocations(core) == held  # no placeholder holds anything meanwhile
        st = await wait_for(url, lambda s: s["gang"]["stage"] == "Succeeded" and s["blocker"]["stage"] == "Succeeded",
                            timeout=40)
        assert st["gang"]["scheduleState"] == "ScheduledSucceed"


async def test_a_controller_restarted_mid_job_goes_on_where_it_was(nats_server, tmp_path):
    url = nats_server.url
    cluster = cluster_file(tmp_path)
    async with running_core(url) as core:
        async with controller(url, cluster):
            await apply(url, tmp_path, job("long", "Gang", workers=2, leader="6", worker="6", min_workers=2))  # running through the restart
            st = await wait_for(url, lambda s: s.get("long", {}).get("stage") == "Running")
            before = {p["name"]: p["node"] for p in st["long"]["pods"]}
            await anyio.sleep(0.3)  # its status is saved
        async with controller(url, cluster):
            st = await wait_for(url, lambda s: s["long"]["stage"] == "Running")
            assert {p["name"]: p["node"] for p in st["long"]["pods"]} == before  # recovered, not placed again
            assert tyjob_allocations(core) == 3
            st = await wait_for(url, lambda s: s["long"]["stage"] == "Succeeded")
            assert st["long"]["restarts"] == 0


async def test_jobs_that_ended_run_again_as_ykbus_ups_example_rounds_do(nats_server, tmp_path):
    """`ykbus up` runs its example jobs in rounds (its README's walkthrough finds a gang
    waiting only while one runs): the jobs of the file that ended are deleted and applied
    again, and run again; one still running is left alone."""
    url = nats_server.url
    text = "---\n".join([job("quick", leader="0.2", worker="0.2"), job("slow", leader="60", worker="60")])
    async with running_core(url) as core, controller(url, cluster_file(tmp_path)):
        assert await cli.apply_text(cli.Nats(url), text, "jobs.yaml") == 0
        await wait_for(url, lambda s: s.get("quick", {}).get("stage") == "Succeeded"
                       and s.get("slow", {}).get("stage") == "Running")
        decided = core.read("health", {})["stats"]["allocations"]
        assert await cli.rerun_ended(cli.Nats(url), text, "jobs.yaml", settle_s=0.5) == ["default/quick"]
        st = await wait_for(url, lambda s: s.get("quick", {}).get("stage") == "Succeeded"
                            and core.read("health", {})["stats"]["allocations"] >= decided + 3)
        assert st["slow"]["stage"] == "Running"  # not ended: left as it was
        assert await cli.rerun_ended(cli.Nats(url), text, "jobs.yaml", settle_s=0.5) == ["default/quick"]
        # a whole round waits for every job of the file to end
        assert await cli.rerun_ended(cli.Nats(url), text, "jobs.yaml", settle_s=0.5, whole=True) == []


async def test_an_edit_of_the_cluster_file_gets_a_verdict_in_words_and_again_once_undone(nats_server, tmp_path, caplog):
    """`ykbus up` prints the verdict on each edit of its TYJob cluster file, as on a queue
    file's: a typo was a JSON log line, and undoing it said nothing. Once, in words: with a
    listener the log keeps it below the warnings `ykbus up` shows (it was said twice)."""
    said: list[str] = []
    path = cluster_file(tmp_path)
    async with running_core(nats_server.url) as core, controller(nats_server.url, path, said.append):
        path.write_text(CLUSTER.replace("{name: cpu-2, cpu: 8", "{name: cpu-2, cpus: 8"))
        with anyio.fail_after(10):
            while not said:
                await anyio.sleep(0.1)
        assert said[0].startswith(f"cluster file {path} not applied, its nodes stay as they were: {path}: "
                                  "nodes[1].cpus: unknown field"), said
        path.write_text(CLUSTER + "  - {name: cpu-3, cpu: 8, memory: 32Gi}\n")
        with anyio.fail_after(10):
            while len(said) < 2:
                await anyio.sleep(0.1)
        assert said[1] == f"cluster file {path} back in force: 1 node added", said
        path.write_text(CLUSTER)
        with anyio.fail_after(10):
            while len(said) < 3:
                await anyio.sleep(0.1)
        assert said[2] == f"cluster file {path} applied: 1 node decommissioned", said
        racks = CLUSTER.replace("memory: 32Gi}", "memory: 32Gi, attributes: {ykbus.io/rack: r1}}")
        path.write_text(racks.replace("{name: gpu-1, cpu: 16, memory: 64Gi,",  # a misspelt attribute: no rack
                                      "{name: gpu-1, cpu: 16, memory: 64Gi, attributes: {ykbus.io/rakc: r1},"))
        with anyio.fail_after(10):
            while len(said) < 4:
                await anyio.sleep(0.1)
        assert said[3] == (f"cluster file {path} applied: 3 nodes resized; node gpu-1: attribute ykbus.io/rakc, where "
                           "2 other nodes have ykbus.io/rack (misspelt? the node is in no domain of it)"), said
        nodes = core.read("nodes", {"rm": "tyjob"})["nodes"]["tyjob"]["default"]
        assert sorted(nodes) == ["cpu-1", "cpu-2", "gpu-1"]
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "cluster file" in r.getMessage()]
    assert loud == []


async def test_a_job_deleted_and_applied_again_while_the_controller_is_away_runs_again(nats_server, tmp_path):
    """Regression (an outside review): docs/tyjob.md says a job applied again under the same
    name while the controller was away replaces the old run; the same manifest applied again
    after `delete` kept the old run (Succeeded, its old application): the controller took the
    stored job, equal to the one it ran, for the same one. A job created gets an id of its
    own (`uid`), which an update (`terminating`) keeps."""
    url = nats_server.url
    cluster = cluster_file(tmp_path)
    async with running_core(url):
        async with controller(url, cluster):
            await apply(url, tmp_path, job("again", leader="0.2", worker="0.2"))
            st = await wait_for(url, lambda s: s.get("again", {}).get("stage") == "Succeeded")
            first = st["again"]["application"]
            await anyio.sleep(0.3)  # its status is saved
        assert await cli.delete(cli.Nats(url), "again", "default") == 0  # the controller away
        await apply(url, tmp_path, job("again", leader="0.2", worker="0.2"))
        async with controller(url, cluster):
            st = await wait_for(url, lambda s: s.get("again", {}).get("application") not in (None, first)
                                and s["again"]["stage"] == "Succeeded")
            assert st["again"]["restarts"] == 0


async def test_one_job_in_two_files_of_one_apply_is_refused(nats_server, tmp_path):
    """Regression (an outside review): `apply -f a.yaml -f b.yaml` with the same new job in
    both said "created" twice and the second silently won (in one file, it is refused)."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(job("dup", workers=1))
    b.write_text(job("dup", workers=5))
    assert await cli.apply(cli.Nats(nats_server.url), [str(a), str(b)]) == 1
    assert await statuses(nats_server.url) == {}  # nothing stored


async def test_a_second_controller_on_the_server_is_refused_and_takes_over_from_a_killed_one(nats_server, tmp_path):
    """Regression (a review): `ykbus tyjob controller --rm other` started beside a running
    controller recovered every job as its own, under its RM: the jobs' pods ran twice, and
    `tyjob get` showed them restarted. One controller serves a server's TYJobs: a second one
    is refused while the first renews its claim, in one line, exit 2; a controller killed
    (no release) is taken over once its claim lapses."""
    url = nats_server.url
    cluster = cluster_file(tmp_path)

    def tyjob_controller(rm: str) -> list[str]:
        return [sys.executable, "-m", "ykbus.cli", "tyjob", "controller", "--nats", url, "--cluster", str(cluster),
                "--rm", rm]

    async with running_core(url) as core:
        first = subprocess.Popen(tyjob_controller("tyjob"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await apply(url, tmp_path, job("long", workers=1, leader="60", worker="60"))
            await wait_for(url, lambda s: s.get("long", {}).get("stage") == "Running")
            second = await anyio.run_process(tyjob_controller("other"), check=False)
            said = second.stderr.decode()
            assert second.returncode == 2, said[-2000:]
            assert said.startswith("ykbus tyjob controller: another TYJob controller serves the TYJobs of this "
                                   "server (rm 'tyjob', pid "), said
            assert "Traceback" not in said
            assert (await statuses(url))["long"]["restarts"] == 0  # the first one's job, untouched
            assert "other" not in core.read("partitions", {})["partitions"]  # nothing registered as the second
        finally:
            first.kill()  # kill -9: its claim is neither renewed nor released
            first.wait()
        t0 = anyio.current_time()
        async with controller(url, cluster) as third:  # the same RM id: it recovers the job, as a restart does
            assert anyio.current_time() - t0 < 8
            assert "default.long" in third.ctl.runs
            st = await wait_for(url, lambda s: s["long"]["stage"] == "Running")
            assert st["long"]["restarts"] == 0
