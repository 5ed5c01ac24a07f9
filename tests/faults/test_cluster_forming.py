"""A core started while its NATS cluster forms (issue 40): compose's `ha` profile starts the
cores beside the three nats-servers, and JetStream refuses 3-replica streams ("no suitable
peers for placement") until all three have joined. The core waits for them (bounded, one log
line) instead of crashing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from ykbus.bus.server import NatsCluster

WAIT_S = 120  # a loaded 2-core machine: generous


def test_a_core_waits_for_the_cluster_to_accept_its_streams(tmp_path):
    cluster = NatsCluster(str(tmp_path / "cluster"))
    try:
        for server in cluster.servers[:2]:  # a quorum elects JetStream's meta leader; 3 replicas need the third
            server.start()
        core = subprocess.Popen([sys.executable, "-m", "ykbus.cli", "core", "--nats", cluster.url, "--replicas", "3",
                                 "--tick", "3600", "--start-wait", str(WAIT_S)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[dict] = []
        changed = threading.Condition()

        def read() -> None:
            assert core.stderr is not None
            for line in core.stderr:
                with changed:
                    lines.append(json.loads(line) if line.startswith("{") else {"msg": line})
                    changed.notify_all()
            with changed:
                changed.notify_all()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def wait_for(msg: str) -> None:
            deadline = time.monotonic() + WAIT_S
            with changed:
                while not any(line.get("msg") == msg for line in lines):
                    left = deadline - time.monotonic()
                    assert left > 0 and core.poll() is None, f"no {msg!r}: {lines[-20:]}"
                    changed.wait(min(left, 1.0))

        try:
            wait_for("waiting for the NATS cluster to accept the streams: JetStream has not yet the servers their "
                     "replicas need")
            cluster.servers[2].start()
            wait_for("core started")
        finally:
            core.terminate()
            core.wait(timeout=60)
            reader.join(timeout=10)
    finally:
        cluster.cleanup()
    assert core.returncode == 0, lines[-20:]
    waits = [line for line in lines if line.get("msg", "").startswith("waiting for the NATS cluster")]
    assert len(waits) == 1, waits  # one line, however long it waits
    assert waits[0]["wait_s"] == WAIT_S
    assert not any("Traceback" in line.get("msg", "") for line in lines), lines
