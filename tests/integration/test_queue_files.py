"""Queue files the operator edits while the core runs, the admin API behind the scheduler
ACL, the service configuration file and the HTTP read API (real nats-server)."""

from __future__ import annotations

import getpass
import json
import logging
import subprocess
import sys
import urllib.request

import anyio
import nats.errors
import pytest

from tests.integration.conftest import Recorder, rm_client, running_core
from ykbus.bus.client import ResourceManagerClient
from ykbus.bus.server import NatsServer, free_port
from ykbus.core.config import parse_acl
from ykbus.log.build import resource
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

QUEUES = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources: {{max: {{vcore: {max}}}}}
"""
RM_OWN = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: own}]}]}]"


def node(n: str) -> m.NodeInfo:
    return m.NodeInfo(nodeID=n, action=m.ActionFromRM.CREATE, schedulableResource=resource(vcore=8000))


async def api(nc, verb: str, body: dict) -> dict:
    reply = await nc.request(f"yk.v1.{verb}", json.dumps(body).encode(), timeout=5)
    return json.loads(reply.data)


async def wait_until(predicate, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


async def test_an_edited_queue_file_reloads_the_running_core_and_a_bad_edit_changes_nothing(
        nats_server, tmp_path, caplog):
    qdir = tmp_path / "queues"
    qdir.mkdir()
    (qdir / "rm-1.yaml").write_text(QUEUES.format(max=1))
    async with running_core(nats_server.url, queues_dir=str(qdir), watch_interval_s=0.05) as core:
        await wait_until(lambda: "rm-1" in core.core.operator_configs)
        rec = Recorder()
        async with rm_client(nats_server.url) as sched:
            rm = ResourceManagerClient(sched, "rm-1", config=RM_OWN, callback=rec, policy_group="rm-1")
            await rm.start(nodes=[node("n1")])
            queues = core.read("queues", {"rm": "rm-1"})["queues"]["rm-1"]["default"]
            assert "root.a" in queues and "root.own" not in queues  # the operator's file wins
            await rm.add_applications([m.AddApplicationRequest(applicationID="app", queueName="root.a",
                                                       partitionName="default", ugi=m.UserGroupInformation("u"))])
            await rm.add_asks([m.AllocationAsk(allocationKey="k", applicationID="app", partitionName="default",
                                               resourceAsk=resource(vcore=1000), maxAllocations=2)])
            await rec.wait_for(lambda: len(rec.allocations) == 1 and rec.states)
            assert "queue root.a max vcore 1 core would be exceeded" in rec.states[-1].reason

            caplog.set_level(logging.ERROR, logger="ykbus.core")
            (qdir / "rm-1.yaml").write_text(QUEUES.format(max=2).replace("name: a", "name: a.b"))
            await wait_until(lambda: any("queue configuration rejected" in r.message for r in caplog.records))
            bad = next(r for r in caplog.records if "queue configuration rejected" in r.message)
            assert any("contains a dot" in e for e in bad.fields["errors"])
            assert core.core.operator_configs["rm-1"] == QUEUES.format(max=1)

            (qdir / "rm-1.yaml").write_text(QUEUES.format(max=2))
            await rec.wait_for(lambda: len(rec.allocations) == 2)  # the raised max lets the ask go
            assert any(e.message == "configuration updated" for e in rec.events)


async def test_a_queue_file_restored_after_a_rejected_edit_is_said_to_be_back_in_force(nats_server, tmp_path):
    """Issue 40, item 7: restoring the file after a rejected edit appended nothing (the text
    is what is in force) and said nothing, so the last word the operator saw was "rejected".
    Every change of the file gets a verdict."""
    from ykbus.bus.service import CoreService
    from ykbus.bus.settings import ServiceSettings

    qdir = tmp_path / "queues"
    qdir.mkdir()
    good = QUEUES.format(max=1)
    (qdir / "rm-1.yaml").write_text(good)
    said: list[str] = []
    service = CoreService(ServiceSettings(nats_url=nats_server.url, tick_interval_s=3600, queues_dir=str(qdir),
                                          watch_interval_s=0.05), notify=said.append)
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.run)
        try:
            with anyio.fail_after(15):
                await service.started.wait()
            await wait_until(lambda: "rm-1" in service.core.operator_configs)
            await wait_until(lambda: any(" in force" in text for text in said))
            said.clear()  # the start's own verdict
            (qdir / "rm-1.yaml").write_text(good.replace("name: a", "name: a.b"))
            await wait_until(lambda: any(": rejected, the active configuration stays" in text for text in said))
            (qdir / "rm-1.yaml").write_text(good)
            await wait_until(lambda: len(said) == 2)
            assert said[1] == "queue file of policy group 'rm-1' back in force", said
            (qdir / "rm-1.yaml").write_text(QUEUES.format(max=2))
            await wait_until(lambda: len(said) == 3)
            assert said[2] == "queue file of policy group 'rm-1' in force; reconfigured: no RM yet (an RM of the group takes it as it registers)", said
        finally:
            service.stop()


async def test_a_started_core_answers_the_admin_api_and_attaches_at_once(nats_server):
    """Regression: a lone core said "started" before its admin API and attach subjects had
    subscribers, so a request sent at once got "no responders" (CI, a slow machine)."""
    async with rm_client(nats_server.url) as sched:
        async with running_core(nats_server.url, scheduler_acl=parse_acl("ops")) as core:
            try:
                answer = await api(sched.nc, "admin.ops.nope", {})
            except nats.errors.NoRespondersError:  # intermittent in CI: say where the core stood
                lease = core.leadership.lease
                raise AssertionError(f"no responders: role {core.leadership.role}, on duty "
                                     f"{core.leadership.on_duty.is_set()}, term {lease and lease.term}, "
                                     f"holder {lease and lease.leader}") from None
            assert answer == {"error": "unknown admin verb 'nope': expected queues"}
            attached = await api(sched.nc, "attach.rm-1", {})
            assert attached["consumer"] and attached["start"] >= 1


async def test_admin_api_takes_a_queue_configuration_from_users_in_the_scheduler_acl(nats_server):
    """The user is the subject token (NATS permissions pin it to the caller, see
    test_permissions.py); what the body says about users and groups is not read."""
    acl = parse_acl("ops admins")
    async with running_core(nats_server.url, scheduler_acl=acl) as core:
        async with rm_client(nats_server.url) as sched:
            nc = sched.nc
            denied = await api(nc, "admin.mallory.queues", {"user": "ops", "config": QUEUES.format(max=1)})
            assert denied == {"error": "user 'mallory' is not in the scheduler ACL"}
            by_group = await api(nc, "admin.x.queues", {"groups": ["admins"], "config": QUEUES.format(max=1)})
            assert by_group == {"error": "user 'x' is not in the scheduler ACL"}  # groups cannot be verified
            moved = await api(nc, "admin.queues", {"user": "ops", "config": QUEUES.format(max=1)})
            assert moved == {"error": "the admin API moved to yk.v1.admin.<user>.<verb>: the user is the caller's "
                                      "NATS user, in the subject (not the body); got yk.v1.admin.queues"}
            assert await api(nc, "admin.ops.nope", {}) == {"error": "unknown admin verb 'nope': expected queues"}
            for group in (5, ["g"], {"g": 1}):  # was taken as the policy group "5"
                typed = await api(nc, "admin.ops.queues", {"policyGroup": group, "config": QUEUES.format(max=1)})
                assert typed == {"error": "policyGroup: expected the policy group's name as a string"}, typed
            bad = await api(nc, "admin.ops.queues", {"config": "partitions: []"})
            assert bad == {"accepted": False, "errors": ["partitions: at least one partition is required"]}
            ok = await api(nc, f"admin.{getpass.getuser()}.queues", {"policyGroup": "g",
                                                                    "config": QUEUES.format(max=3)})
            assert ok == {"accepted": True, "errors": []}
            await wait_until(lambda: core.core.operator_configs.get("g") == QUEUES.format(max=3))
            assert "h" not in core.core.operator_configs and "*" not in core.core.operator_configs


async def test_service_configuration_file_sets_credentials_and_the_http_read_api(tmp_path):
    server = NatsServer(store_dir=str(tmp_path / "nats"),
                        extra_conf="authorization { user: core, password: s3cret }\n").start()
    port = free_port()
    (tmp_path / "ykbus.yaml").write_text(
        f"nats: {{url: '{server.url}', user: core, password: s3cret}}\n"
        f"api: {{host: 127.0.0.1, port: {port}}}\ntick_interval: 3600\n")
    proc = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--config", str(tmp_path / "ykbus.yaml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def get(path: str):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())
            except OSError:
                return None, None

        with anyio.fail_after(20):
            while get("/api/health")[0] != 200:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                await anyio.sleep(0.1)
        status, body = get("/api/health")
        assert body["status"] == "ok" and body["lastSeq"] >= 0
        assert get("/api/nope") == (404, {"error": "unknown verb 'nope': expected health, state, wouldfit, partitions, "
                                                   "queues, applications, nodes, terminated, allocations, "
                                                   "topology"})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        server.cleanup()


def test_invalid_service_configuration_stops_the_start_naming_the_field(tmp_path):
    (tmp_path / "ykbus.yaml").write_text("nats: {url: x}\napi: {port: 70000}\n")
    proc = subprocess.run([sys.executable, "-m", "ykbus.cli", "core", "--config", str(tmp_path / "ykbus.yaml")],
                          capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert "invalid service configuration: Expected `int` <= 65535 - at `$.api.port`" in proc.stderr.decode()


async def test_service_configuration_tls_verifies_the_server_and_presents_a_client_certificate(tmp_path):
    import trustme

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("ykbus-core")
    paths = {}
    for name, blob in {"ca.pem": ca.cert_pem, "server.pem": server_cert.cert_chain_pems[0],
                       "server-key.pem": server_cert.private_key_pem, "client.pem": client_cert.cert_chain_pems[0],
                       "client-key.pem": client_cert.private_key_pem}.items():
        blob.write_to_path(str(tmp_path / name))
        paths[name] = tmp_path / name
    server = NatsServer(store_dir=str(tmp_path / "nats"), extra_conf=(
        f'tls {{ cert_file: "{paths["server.pem"]}", key_file: "{paths["server-key.pem"]}", '
        f'ca_file: "{paths["ca.pem"]}", verify: true }}\n')).start()
    port = free_port()
    config = tmp_path / "ykbus.yaml"
    config.write_text(f"nats: {{url: 'tls://127.0.0.1:{server.port}', tls: {{ca: '{paths['ca.pem']}', "
                      f"cert: '{paths['client.pem']}', key: '{paths['client-key.pem']}'}}}}\n"
                      f"api: {{port: {port}}}\ntick_interval: 3600\n")
    proc = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(20):
            while True:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                        assert json.loads(r.read())["status"] == "ok"
                        break
                except OSError:
                    await anyio.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        server.cleanup()


async def test_bad_http_requests_and_unreadable_queue_files_do_not_stop_the_service(nats_server, tmp_path, caplog):
    """Regressions: a request line urlsplit cannot parse, and a queue file that is not
    UTF-8, each stopped the whole service."""
    qdir = tmp_path / "queues"
    qdir.mkdir()
    (qdir / "g.yaml").write_bytes(b"\xff\xfe not utf-8")
    port = free_port()
    caplog.set_level(logging.ERROR, logger="ykbus.core")
    async with running_core(nats_server.url, queues_dir=str(qdir), watch_interval_s=0.05,
                            api_port=port) as core:
        await wait_until(lambda: any("queue file unreadable" in r.message for r in caplog.records))
        for raw in (b"GET //[x HTTP/1.1\r\n\r\n", b"\r\n\r\n", b"GARBAGE"):
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.send(raw)
            await stream.send_eof()
            with anyio.fail_after(5):
                try:
                    answer = await stream.receive()
                except anyio.EndOfStream:
                    answer = b""
            await stream.aclose()
            assert answer == b"" or answer.startswith(b"HTTP/1.1 400")

        def health():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                return json.loads(r.read())["status"]

        assert await anyio.to_thread.run_sync(health) == "ok"
        (qdir / "g.yaml").write_text(QUEUES.format(max=1))
        await wait_until(lambda: core.core.operator_configs.get("g") == QUEUES.format(max=1))
