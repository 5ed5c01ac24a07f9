"""`ykbus shards` as an operator meets it first, against a real nats-server."""

from __future__ import annotations

import subprocess
import sys


def test_shards_list_without_an_assignment_says_the_default_shard_serves_every_rm(nats_server):
    """An outside review: `ykbus shards list` with no RM assigned printed nothing, exit 0."""
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "shards", "list", "--nats", nats_server.url],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == ""
    assert "no RM is assigned to a shard: every RM is served by the default one" in run.stderr
