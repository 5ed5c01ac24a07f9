"""One RM cannot act as another (issue 10): a real nats-server running the configuration
`ykbus nats-config` writes, the core service connected as its own user, and clients that
try every avenue. A denial is awaited as the server's permissions-violation error (nats-py
hands it to error_cb); a request the server refuses never gets an answer."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request

import anyio
import msgspec
import nats
import pytest
from nats.js import api

from tests.integration.conftest import Recorder, running_core
from ykbus.bus.client import NatsScheduler, ResourceManagerClient
from ykbus.bus.permissions import (
    RmIdentity,
    RmsConfig,
    UserIdentity,
    connect_options,
    encode_user_nkey,
    load_secrets,
    server_config,
    with_passwords,
)
from ykbus.bus.server import NatsServer, free_port
from ykbus.bus.service import CoreService
from ykbus.bus.settings import ServiceSettings, api_exposure_error
from ykbus.core.config import parse_acl
from ykbus.log.build import resource
from ykbus.si import messages as m

pytestmark = pytest.mark.anyio

QUEUES = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: q}]}]}]"


class Secured:
    def __init__(self, server: NatsServer, config: RmsConfig) -> None:
        self.server, self.config, self.url = server, config, server.url

    def password(self, name: str) -> str:
        for ident in [*self.config.rms]:
            if ident.id == name:
                return ident.password
        for ident in [*self.config.admins, *self.config.observers]:
            if ident.user == name:
                return ident.password
        raise KeyError(name)

    def options(self, name: str) -> dict:
        return connect_options(name, self.password(name))

    @property
    def core_options(self) -> dict:
        return {"user": self.config.core.user, "password": self.config.core.password}


@pytest.fixture
def secured(tmp_path):
    nkey = encode_user_nkey(os.urandom(32))  # an RM that would sign with its seed: the server loads it
    config = with_passwords(RmsConfig(
        rms=[RmIdentity("a"), RmIdentity("b"), RmIdentity("c", nkey=nkey)],
        admins=[UserIdentity("ops"), UserIdentity("eve")], observers=[UserIdentity("watch")]))
    server = NatsServer(store_dir=str(tmp_path / "nats"), extra_conf=server_config(config)).start()
    yield Secured(server, config)
    server.cleanup()


class Denials:
    """The permissions violations the server reported to one connection."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._changed = anyio.Event()

    async def error_cb(self, exc: Exception) -> None:
        self.seen.append(str(exc))
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, kind: str, subject: str, timeout: float = 5.0) -> None:
        text = f'permissions violation for {kind} to "{subject}"'.lower()  # nats-py lowercases it
        with anyio.fail_after(timeout):
            while not any(text in s.lower() for s in self.seen):
                await self._changed.wait()


async def connect(secured: Secured, name: str):
    denials = Denials()
    nc = await nats.connect(secured.url, error_cb=denials.error_cb, allow_reconnect=False,
                            **secured.options(name))
    return nc, denials


def rm(secured: Secured, name: str, rec: Recorder) -> tuple[NatsScheduler, ResourceManagerClient]:
    sched = NatsScheduler(secured.url, nats_options=secured.options(name))
    return sched, ResourceManagerClient(sched, name, config=QUEUES, callback=rec)


def node(n: str) -> m.NodeInfo:
    return m.NodeInfo(nodeID=n, action=m.ActionFromRM.CREATE, schedulableResource=resource(vcore=4000))


def app(a: str) -> m.AddApplicationRequest:
    return m.AddApplicationRequest(applicationID=a, queueName="root.q", partitionName="default",
                                   ugi=m.UserGroupInformation("u"))


def ask(a: str, key: str) -> m.AllocationAsk:
    return m.AllocationAsk(allocationKey=key, applicationID=a, partitionName="default",
                           resourceAsk=resource(vcore=1000))


async def input_subjects(secured: Secured) -> list[str]:
    """Every subject in the input log, read as the core user."""
    nc = await nats.connect(secured.url, **secured.core_options)
    js = nc.jetstream()
    last = (await js.stream_info("YK_IN")).state.last_seq
    subjects: list[str] = []
    if last:
        sub = await js.subscribe("yk.v1.in.>", ordered_consumer=True, stream="YK_IN",
                                 config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL))
        with anyio.fail_after(10):
            async for msg in sub.messages:
                subjects.append(msg.subject)
                if msg.metadata.sequence.stream >= last:
                    break
    await nc.close()
    return subjects


async def test_rms_register_get_allocations_and_come_back_through_the_client(secured, caplog):
    caplog.set_level(logging.INFO)
    async with running_core(secured.url, nats_options=secured.core_options, heartbeat_pause_s=600,
                            snapshot_every=3) as core:
        rec_a, rec_b = Recorder(), Recorder()
        sched_a, rm_a = rm(secured, "a", rec_a)
        sched_b, rm_b = rm(secured, "b", rec_b)
        async with sched_a, sched_b:
            await rm_a.start(nodes=[node("na")])
            await rm_b.start(nodes=[node("nb")])
            for client, name in ((rm_a, "a"), (rm_b, "b")):
                await client.add_applications([app(f"app-{name}")])
                await client.add_asks([ask(f"app-{name}", "k1")])
            await rec_a.wait_for(lambda: len(rec_a.allocations) == 1)
            await rec_b.wait_for(lambda: len(rec_b.allocations) == 1)
            assert rec_a.allocations[0].nodeID == "na" and rec_b.allocations[0].nodeID == "nb"
        # a comes back without re-registering (attach): it gets what it missed, and only its own
        async with NatsScheduler(secured.url, nats_options=secured.options("b")) as sched_b:
            await sched_b.publish("alloc", m.AllocationRequest(asks=[ask("app-b", "k2")], rmID="b"), rm="b")
        rec_a2 = Recorder()
        async with NatsScheduler(secured.url, nats_options=secured.options("a")) as sched_a:
            await sched_a.publish("alloc", m.AllocationRequest(asks=[ask("app-a", "k2")], rmID="a"), rm="a")
            await sched_a.attach("a", rec_a2)
            await rec_a2.wait_for(lambda: len(rec_a2.allocations) == 1)
            assert rec_a2.allocations[0].allocationKey == "k2" and rec_a2.allocations[0].applicationID == "app-a"
        assert set(core.core.rms) == {"a", "b"}
    # the core's own user has what it needs: nothing was denied to anyone (snapshots included)
    assert not [r for r in caplog.records if "permissions violation" in r.getMessage() + str(getattr(r, "fields", ""))]
    assert any("snapshot written" in r.getMessage() for r in caplog.records)


async def test_an_rm_cannot_publish_as_another_rm_or_as_the_core(secured):
    async with running_core(secured.url, nats_options=secured.core_options, heartbeat_pause_s=600):
        nc, denials = await connect(secured, "a")
        js = nc.jetstream(timeout=1)
        forged = {"yk.v1.in.b.alloc": m.AllocationRequest(rmID="b", releases=m.AllocationReleasesRequest(
                      allocationsToRelease=[m.AllocationRelease(partitionName="default", applicationID="x")])),
                  "yk.v1.in.b.register": m.RegisterResourceManagerRequest(rmID="b"),
                  "yk.v1.in._core.config": {"policyGroup": "*", "config": QUEUES},
                  "yk.v1.in._core.rmstate": {"rmID": "b", "event": "TIMEOUT"}}
        for subject, body in forged.items():
            with pytest.raises(nats.errors.TimeoutError):  # no ack: nothing was stored
                await js.publish(subject, msgspec.json.encode(body))
            await denials.wait_for("publish", subject)
        for subject in ("yk.v1.hb.b", "yk.v1.attach.b", "yk.v1.admin.a.queues", "yk.v1.api.state"):
            await nc.publish(subject, b"{}")
            await denials.wait_for("publish", subject)
        own = await js.publish("yk.v1.in.a.register", msgspec.json.encode(m.RegisterResourceManagerRequest(
            rmID="a", config=QUEUES)))
        await nc.close()
        subjects = await input_subjects(secured)
        assert subjects[-1] == "yk.v1.in.a.register" and len(subjects) == own.seq
        assert not [s for s in subjects if s.startswith(("yk.v1.in.b.", "yk.v1.in._core.config",
                                                         "yk.v1.in._core.rmstate"))]


async def test_an_rm_cannot_read_or_consume_another_rms_outputs(secured):
    async with running_core(secured.url, nats_options=secured.core_options, heartbeat_pause_s=600):
        rec_b = Recorder()
        sched_b, rm_b = rm(secured, "b", rec_b)
        async with sched_b:
            await rm_b.start(nodes=[node("nb")])  # b's outputs are on YK_OUT, its consumer rm_b exists
            nc, denials = await connect(secured, "a")
            for subject in ("yk.v1.out.b.>", "yk.v1.out.>", ">", "_INBOX.>", "_INBOX_b.>", "$JS.ACK.YK_OUT.rm_b.>"):
                await nc.subscribe(subject)
                await denials.wait_for("subscription", subject)
            js = nc.jetstream(timeout=1)
            with pytest.raises(nats.errors.TimeoutError):
                await js.add_consumer("YK_OUT", api.ConsumerConfig(
                    durable_name="spy", filter_subject="yk.v1.out.b.>", ack_policy=api.AckPolicy.NONE))
            await denials.wait_for("publish", "$JS.API.CONSUMER.DURABLE.CREATE.YK_OUT.spy")
            spy = {"stream_name": "YK_OUT", "config": {"filter_subject": "yk.v1.out.b.>", "ack_policy": "none"}}
            requests = {"$JS.API.CONSUMER.CREATE.YK_OUT": spy,
                        "$JS.API.CONSUMER.CREATE.YK_OUT.spy.yk.v1.out.b.>": spy,
                        "$JS.API.CONSUMER.CREATE.YK_OUT.rm_a.yk.v1.out.b.>": spy,
                        "$JS.API.CONSUMER.INFO.YK_OUT.rm_b": {},
                        "$JS.API.CONSUMER.DELETE.YK_OUT.rm_b": {},
                        "$JS.API.CONSUMER.MSG.NEXT.YK_OUT.rm_b": {"batch": 1},
                        "$JS.API.DIRECT.GET.YK_OUT": {"last_by_subj": "yk.v1.out.b.register"},
                        "$JS.API.DIRECT.GET.YK_OUT.yk.v1.out.b.register": {},
                        "$JS.API.STREAM.MSG.GET.YK_OUT": {"last_by_subj": "yk.v1.out.b.register"},
                        "$JS.API.STREAM.INFO.YK_OUT": {"subjects_filter": ">"},
                        "$JS.API.CONSUMER.LIST.YK_OUT": {}}
            for subject, body in requests.items():
                with pytest.raises(nats.errors.TimeoutError):
                    await nc.request(subject, json.dumps(body).encode(), timeout=1)
                await denials.wait_for("publish", subject)
            await nc.close()
            # b's consumer is untouched: b still gets what is decided for it
            await rm_b.add_applications([app("app-b")])
            await rm_b.add_asks([ask("app-b", "k")])
            await rec_b.wait_for(lambda: len(rec_b.allocations) == 1)


async def test_clients_without_the_right_password_cannot_connect(secured):
    async def refused(**options):
        with pytest.raises(nats.errors.Error, match="(?i)authorization violation"):
            await nats.connect(secured.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2,
                               **options)

    await refused()
    await refused(user="a", password="wrong")
    await refused(user="a", password=secured.password("b"))
    await refused(user="c", password="")  # an nkey identity has no password
    nc = await nats.connect(secured.url, allow_reconnect=False, **secured.options("a"))
    await nc.close()


async def test_only_an_admin_calls_the_admin_api_and_only_as_itself(secured):
    async with running_core(secured.url, nats_options=secured.core_options,
                            scheduler_acl=parse_acl("ops")) as core:
        ops, ops_denials = await connect(secured, "ops")
        answer = json.loads((await ops.request("yk.v1.admin.ops.queues", json.dumps(
            {"policyGroup": "g", "config": QUEUES}).encode(), timeout=5)).data)
        assert answer == {"accepted": True, "errors": []}
        deep = b"[" * 100_000 + b"]" * 100_000  # regression: the answer was never sent (a RecursionError)
        answer = json.loads((await ops.request("yk.v1.admin.ops.queues", deep, timeout=5)).data)
        assert answer == {"error": "the request is nested too deep to read"}
        health = json.loads((await ops.request("yk.v1.api.health", b"{}", timeout=5)).data)
        assert health["status"] == "ok"
        for subject in ("yk.v1.admin.root.queues", "yk.v1.admin.queues", "yk.v1.in.a.alloc"):
            with pytest.raises(nats.errors.TimeoutError):
                await ops.request(subject, json.dumps({"user": "ops", "config": QUEUES}).encode(), timeout=1)
            await ops_denials.wait_for("publish", subject)

        # eve is an admin user of NATS but not in the scheduler ACL
        eve, _ = await connect(secured, "eve")
        denied = json.loads((await eve.request("yk.v1.admin.eve.queues", json.dumps(
            {"user": "ops", "config": QUEUES}).encode(), timeout=5)).data)
        assert denied == {"error": "user 'eve' is not in the scheduler ACL"}

        for name in ("a", "watch"):
            nc, denials = await connect(secured, name)
            for subject in ("yk.v1.admin.ops.queues", f"yk.v1.admin.{name}.queues"):
                with pytest.raises(nats.errors.TimeoutError):
                    await nc.request(subject, json.dumps({"config": QUEUES}).encode(), timeout=1)
                await denials.wait_for("publish", subject)
            await nc.close()
        watch, _ = await connect(secured, "watch")
        assert "health" not in json.loads((await watch.request("yk.v1.api.queues", b"{}", timeout=5)).data)
        assert core.core.operator_configs == {"g": QUEUES}
        for nc in (ops, eve, watch):
            await nc.close()


async def test_the_client_says_when_its_user_may_not_act_as_the_rm_it_names(secured):
    async with running_core(secured.url, nats_options=secured.core_options):
        async with NatsScheduler(secured.url, nats_options=secured.options("a")) as sched:
            with anyio.fail_after(20), pytest.raises(PermissionError, match="publish to yk.v1.attach.b"):
                await sched.register_resource_manager(m.RegisterResourceManagerRequest(rmID="b"), Recorder())


async def test_nats_config_command_output_loads_in_nats_server_and_its_secrets_connect(tmp_path):
    rms = tmp_path / "rms.yaml"
    rms.write_text("prefix: yk.v1\ncore: {user: core}\nrms: [{id: k8s}, {id: batch, password: given-pw}]\n"
                   "admins: [{user: ops}]\nobservers: [{user: grafana}]\n")
    (tmp_path / "nats").mkdir()
    out, secrets_file = tmp_path / "nats" / "auth.conf", tmp_path / "secrets.yaml"  # include: relative paths only
    proc = subprocess.run([sys.executable, "-m", "ykbus.cli", "nats-config", "--rms", str(rms), "--out", str(out),
                           "--secrets", str(secrets_file)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert stat.S_IMODE(out.stat().st_mode) == stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert "given-pw" not in out.read_text()  # hashes only
    found = load_secrets(str(secrets_file))
    assert found.rms["batch"].password == "given-pw" and len(found.rms["k8s"].password) >= 32
    server = NatsServer(store_dir=str(tmp_path / "nats"), extra_conf='include "auth.conf"\n').start()
    try:
        for section, name in (("rms", "k8s"), ("admins", "ops"), ("observers", "grafana")):
            secret = getattr(found, section)[name]
            nc = await nats.connect(server.url, allow_reconnect=False, **connect_options(name, secret.password))
            await nc.close()
        nc = await nats.connect(server.url, allow_reconnect=False, user="core", password=found.core.password)
        await nc.close()
        with pytest.raises(nats.errors.Error, match="(?i)authorization violation"):
            await nats.connect(server.url, allow_reconnect=False, max_reconnect_attempts=0, user="k8s",
                               password="given-pw")
    finally:
        server.cleanup()


# --- the HTTP read API's token ----------------------------------------------------------------


def http_get(port: int, path: str, token: str | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


async def test_http_read_api_with_a_token_answers_only_its_bearer(nats_server):
    port = free_port()
    async with running_core(nats_server.url, api_port=port, api_token="t0ken-s3cret") as core:
        with anyio.fail_after(10):
            await core.http_started.wait()
        for token in (None, "wrong", "t0ken-s3cre", "t0ken-s3cret-and-more", ""):
            status, headers, body = await anyio.to_thread.run_sync(http_get, port, "/api/health", token)
            assert status == 401, token
            assert body == {"error": "expected the header `Authorization: Bearer <api.token>`"}
            assert headers["WWW-Authenticate"].startswith("Bearer")
        status, _, body = await anyio.to_thread.run_sync(http_get, port, "/api/health", "t0ken-s3cret")
        assert status == 200 and body["status"] == "ok"


async def test_a_browser_opens_the_web_ui_with_the_token_once_in_the_address(nats_server):
    """Issue 40, item 7: with a token (compose sets one) a browser got 401 on the web UI, as
    it cannot send a header. `?token=` once gives it a cookie (HttpOnly, SameSite=Strict,
    derived from the token) and the page again without the token in its address."""
    import http.client

    def get(port: int, path: str, cookie: str = "") -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response

    port = free_port()
    async with running_core(nats_server.url, api_port=port, api_token="t0ken-s3cret") as core:
        with anyio.fail_after(10):
            await core.http_started.wait()
        for path in ("/", "/?token=wrong", "/?token=", "/api/health?token=t0ken-s3cre"):
            assert (await anyio.to_thread.run_sync(get, port, path)).status == 401, path
        entered = await anyio.to_thread.run_sync(get, port, "/api/health?rm=k8s&token=t0ken-s3cret")
        assert entered.status == 303 and entered.getheader("Location") == "/api/health?rm=k8s"
        cookie = entered.getheader("Set-Cookie")
        name_value, *attributes = [part.strip() for part in cookie.split(";")]
        assert name_value.startswith("ykbus_token=") and "t0ken-s3cret" not in cookie
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes), cookie
        for path in ("/", "/api/health", "/ws/v1/partitions"):
            assert (await anyio.to_thread.run_sync(get, port, path, name_value)).status == 200, path
        forged = name_value[:-1] + ("1" if name_value.endswith("0") else "0")
        assert (await anyio.to_thread.run_sync(get, port, "/", forged)).status == 401
        away = await anyio.to_thread.run_sync(get, port, "//evil.example/?token=t0ken-s3cret")
        assert away.status == 303 and away.getheader("Location") == "/evil.example/"  # never another host
        for path, kept in (("/%5Cevil.example/", "/%5Cevil.example/"), ("/%09/evil.example/", "/%09/evil.example/"),
                           ("/%2F%2Fevil.example/", "/%2F%2Fevil.example/")):  # (a browser read `/\host` as //host)
            away = await anyio.to_thread.run_sync(get, port, path + "?token=t0ken-s3cret")
            assert away.status == 303 and away.getheader("Location") == kept, (path, away.getheader("Location"))


async def test_http_read_api_off_loopback_needs_a_token(nats_server):
    message = ("api.host '0.0.0.0' is not a loopback address and api.token is not set: the HTTP read API would "
               "show every RM's state to anyone who can reach it; set api.token (or --api-token, or "
               "YKBUS_API_TOKEN), or bind api.host to 127.0.0.1")
    service = CoreService(ServiceSettings(nats_url=nats_server.url, api_host="0.0.0.0", api_port=free_port()))
    with pytest.raises(ValueError) as exc:
        await service.run()
    assert str(exc.value) == message
    env = {k: v for k, v in os.environ.items() if k != "YKBUS_API_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "ykbus.cli", "core", "--nats", nats_server.url, "--api-host",
                           "0.0.0.0", "--api-port", str(free_port())], capture_output=True, timeout=60, env=env)
    assert proc.returncode == 1 and proc.stderr.decode().strip() == f"ykbus core: {message}"
    # loopback by name or address needs none; the port 0 (off) needs none
    for host, port in (("localhost", free_port()), ("::1", free_port()), ("0.0.0.0", 0)):
        assert api_exposure_error(host, port, None) is None
    assert api_exposure_error("ykbus.example", 9080, None) is not None
    assert api_exposure_error("0.0.0.0", 9080, "x") is None


async def test_a_standby_core_takes_over_on_a_secured_server_with_the_core_users_rights_alone(secured, caplog):
    """Two cores as the core user: the lease bucket, the standby's read of the outputs' ids
    and the takeover need nothing the core user lacks."""
    caplog.set_level(logging.INFO)
    # (a lease of 5 s: two cores in one event loop, a stall of the loop must not hand it over)
    options = {"nats_options": secured.core_options, "heartbeat_pause_s": 600, "lease_ttl_s": 5.0}
    async with running_core(secured.url, **options) as first, running_core(secured.url, **options) as second:
        assert {first.leadership.role, second.leadership.role} == {"leader", "standby"}
        leader, standby = (first, second) if first.leadership.role == "leader" else (second, first)
        rec = Recorder()
        sched, client = rm(secured, "a", rec)
        async with sched:
            await client.start(nodes=[node("na")])
            await client.add_applications([app("app-a")])
            await client.add_asks([ask("app-a", "k1")])
            await rec.wait_for(lambda: len(rec.allocations) == 1)
            leader.stop()  # a clean stop frees the lease: the standby takes over at once
            with anyio.fail_after(10):
                while standby.leadership.role != "leader":
                    await anyio.sleep(0.05)
            await client.add_asks([ask("app-a", "k2")])
            await rec.wait_for(lambda: len(rec.allocations) == 2)
    assert [a.allocationKey for a in rec.allocations] == ["k1", "k2"]
    assert not [r for r in caplog.records if "permissions violation" in r.getMessage() + str(getattr(r, "fields", ""))]
