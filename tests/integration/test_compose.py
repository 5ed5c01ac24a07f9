"""docker-compose.yml as shipped: every service's command and flags as written, against the
files it mounts (tests/integration/compose.py), and the image those services run in.

Regressions of issue 20 (item 13), each seen under Docker: nats-server started with a flag
it does not have (`--max_payload`); the core crash-looping because the image had no
/var/lib/ykbus for its volume (a new volume was owned by root, the core runs as nobody);
sims and the TYJob controller silent in `docker compose logs`; no .dockerignore; the health
API's allocations reset by a restart.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

import pytest

from tests.integration.compose import ROOT, Compose, image_directories
from ykbus.bus.server import free_port

IMAGE_SERVICES = ("core", "k8s-sim", "batch-sim", "tyjob-controller", "nats-config", "core-secure",
                  "k8s-sim-secure", "batch-sim-secure", "core-a", "core-b", "reader-ha",
                  "k8s-sim-ha")


def test_every_volume_of_an_image_service_is_a_directory_of_the_image_its_user_owns():
    compose = Compose(ROOT / "unused")
    user, dirs = image_directories()
    assert user == "nobody"
    for service in IMAGE_SERVICES:
        assert "build" in compose.services[service], service
        for source, target, read_only in compose.mounts(service):
            if source.startswith(".") or read_only:
                continue  # a bind mount, or a volume it only reads
            assert dirs.get(target) == user, (
                f"{service} writes volume {source} at {target}: the image must make {target} owned by {user}, "
                "or a new volume is root's and the service cannot write it")


def test_long_running_services_restart_and_the_build_context_leaves_out_the_work_tree():
    compose = Compose(ROOT / "unused")
    for name, svc in compose.services.items():
        if name != "nats-config":  # a job that ends
            assert svc.get("restart") == "unless-stopped", name
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "build", "**/*.so"} <= set(ignored)


def _wait_for(predicate, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                raise AssertionError(f"{name} exited with {p.returncode}: {err[-3000:]}")
        try:
            found = predicate()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _health(port: int, token: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/health",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=2) as answer:
        return json.loads(answer.read())


def _stop(p: subprocess.Popen) -> tuple[str, str]:
    if p.poll() is None:
        p.terminate()
    try:
        return p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()


def test_the_default_profile_runs_as_written(tmp_path):
    """nats, core, both sims and the TYJob controller as compose starts them: NATS takes its
    flags, the core serves, writes its snapshot into its volume and keeps its allocation
    count across a restart, and every service says what it does on its own output."""
    compose = Compose(tmp_path)
    nats_port, api_port = free_port(), free_port()
    compose.hosts["nats"] = f"nats://127.0.0.1:{nats_port}"
    compose.ports[9080] = api_port
    token = "compose-test-token"
    env = {**os.environ, "YKBUS_API_TOKEN": token}
    procs = [("nats", compose.start("nats", "-p", str(nats_port)))]
    core = compose.start("core", env=env)
    procs.append(("core", core))
    try:
        _wait_for(lambda: _health(api_port, token)["status"] == "ok", 30, "the core's HTTP health", procs)
        for name in ("k8s-sim", "batch-sim", "tyjob-controller"):
            procs.append((name, compose.start(name, env=env)))
        health = _wait_for(lambda: (h := _health(api_port, token))["stats"]["allocations"] > 0
                           and set(h["rms"]) >= {"k8s", "batch", "tyjob"} and h, 60, "allocations", procs)
        before = _health(api_port, token)["stats"]["allocations"]
        assert before >= health["stats"]["allocations"] > 0
        _, core_err = _stop(core)
        assert core.returncode == 0, core_err[-3000:]
        snapshot = compose.volume("core-data") / "snapshots" / "core.snap"
        assert snapshot.stat().st_size > 0  # written into the volume, as the image lets nobody do
        again = compose.start("core", env=env)
        procs[1] = ("core", again)
        after = _wait_for(lambda: _health(api_port, token)["stats"]["allocations"], 30, "the restarted core", procs)
        assert after >= before  # counted since the log began, not since this process started
    finally:
        outputs = {name: _stop(p) for name, p in reversed(procs)}
    for sim in ("k8s-sim", "batch-sim"):
        out, err = outputs[sim]
        assert any(line.startswith("t=") and "allocated=" in line for line in out.splitlines()), (sim, out, err)
    _, controller_err = outputs["tyjob-controller"]
    assert '"msg": "tyjob controller running"' in controller_err, controller_err[-2000:]


def test_nats_refuses_a_flag_it_does_not_have_as_compose_would_show_it(tmp_path):
    """The check above is only as good as running nats-server's real command line: the
    flag shipped before fails at once, as it did under compose."""
    compose = Compose(tmp_path)
    compose.services["nats"]["command"] = ["--jetstream", "--store_dir", "/data", "--max_payload", "8MB"]
    run = compose.run("nats", timeout=30)
    assert "flag provided but not defined: -max_payload" in run.stderr  # and it exits at once (code 0)


@pytest.mark.parametrize("service", ["nats", "nats-secure"])
def test_nats_configuration_files_name_what_the_volumes_hold(tmp_path, service):
    compose = Compose(tmp_path)
    conf = compose.argv(service)[compose.argv(service).index("--config") + 1]
    text = open(conf).read()
    assert "max_payload: 8MB" in text and str(compose.root(service) / "data") in text
    if service == "nats-secure":  # the include is relative to the file: ../../secure is /secure
        include = text.split('include "')[1].split('"')[0]
        assert os.path.normpath(os.path.join(os.path.dirname(conf), include)) == str(
            compose.root(service) / "secure" / "auth.conf")


def test_the_ha_profile_runs_as_written_and_the_standby_takes_over(tmp_path):
    """Profile `ha`: three nats-servers joined as a cluster by their configuration files, two
    cores with 3 replicas that leave reads to a reader, a simulated RM on all three servers.
    Killing the leading core leaves the other leading, and the allocations go on, as the
    reader shows."""
    compose = Compose(tmp_path)
    servers = ("nats-1", "nats-2", "nats-3")
    ports = {name: free_port() for name in servers}
    compose.routes = {name: free_port() for name in servers}
    for name in servers:
        compose.hosts[name] = f"nats://127.0.0.1:{ports[name]}"
    api = {"core-a": free_port(), "core-b": free_port(), "reader-ha": free_port()}
    compose.ports[9080] = api["core-a"]
    token = "compose-test-token"
    env = {**os.environ, "YKBUS_API_TOKEN": token}
    procs = [(name, compose.start(name, "-a", "127.0.0.1", "-p", str(ports[name]))) for name in servers]
    try:
        cores = {"core-a": compose.start("core-a", env=env),
                 "core-b": compose.start("core-b", "--api-port", str(api["core-b"]), env=env)}
        procs += list(cores.items())
        procs.append(("reader-ha", compose.start("reader-ha", "--api-port", str(api["reader-ha"]), env=env)))

        def roles():
            return {name: _health(api[name], token)["role"] for name in cores}

        found = _wait_for(lambda: sorted((r := roles()).values()) == ["leader", "standby"] and r, 90,
                          "a leader and a standby", procs)
        leader = next(name for name, role in found.items() if role == "leader")
        standby = next(name for name in cores if name != leader)
        procs.append(("k8s-sim-ha", compose.start("k8s-sim-ha", env=env)))
        before = _wait_for(lambda: _health(api[leader], token)["stats"]["allocations"], 60, "allocations", procs)
        cores[leader].kill()
        procs = [(n, p) for n, p in procs if n != leader]
        _wait_for(lambda: _health(api[standby], token)["role"] == "leader", 30, "the standby leading", procs)
        _wait_for(lambda: _health(api[standby], token)["stats"]["allocations"] > before + 5, 60,
                  "allocations after the takeover", procs)
        read = _wait_for(lambda: (h := _health(api["reader-ha"], token))["stats"]["allocations"] > before + 5 and h,
                         60, "the reader following", procs)
        assert read["role"] == "reader" and read["stats"]["outputs"] == 0
    finally:
        for _, p in reversed(procs):
            _stop(p)
