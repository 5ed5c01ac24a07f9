"""YuniKorn's REST API over several RMs (docs/operations.md: an RM's partition is `[rm]name`
once more than one is registered), as an outside review of several RMs met it."""

from __future__ import annotations

import json

import pytest

from tests.test_rest_router_edges import ask
from ykbus.core.config import ConfigError, parse_config
from ykbus.log.build import LogBuilder
from ykbus.log.replay import guarded_core
from ykbus.rest.router import RestState
from ykbus.yamlload import load_yaml

OWN = "partitions: [{name: default, queues: [{name: root, submitacl: '*', queues: [{name: %s}]}]}]"


def test_the_configuration_shown_is_of_an_rm_still_registered_or_of_the_one_asked():
    """Regression: /ws/v1/config showed the first RM registered, after it had left."""
    guard = guarded_core(None)
    for rm, queue in (("rmA", "only_a"), ("rmB", "only_b")):
        list(guard.apply(LogBuilder(rm, seq=guard.core.last_seq).register(OWN % queue)))
    state = RestState(lambda: guard.core, 1)
    shown = ask(state, "/ws/v1/config")
    assert shown[0] == 200 and b"only_a" in shown[2]
    assert b"only_b" in ask(state, "/ws/v1/config", query="rm=rmB")[2]
    list(guard.apply(LogBuilder("rmA", seq=guard.core.last_seq).unregister()))
    shown = ask(state, "/ws/v1/config")
    assert shown[0] == 200 and b"only_b" in shown[2] and b"only_a" not in shown[2]
    gone = ask(state, "/ws/v1/config", query="rm=rmA")
    assert gone[0] == 404 and "rm 'rmA' is not registered (registered: rmB)" in json.loads(gone[2])["message"]
    assert b"only_a" not in ask(state, "/debug/fullstatedump")[2]


@pytest.mark.parametrize("name", ["[b]default", "a/b", "x]"])
def test_a_partition_name_the_rest_api_would_read_as_another_rms_is_refused(name):
    """Regression: RM a's partition `[b]default` answered for RM b's `default`."""
    with pytest.raises(ConfigError) as info:
        parse_config(load_yaml(f"partitions: [{{name: '{name}', queues: [{{name: root}}]}}]"))
    assert info.value.errors == [f"partitions[0].name: partition name {name!r} contains one of [ ] /"]


def test_an_rm_that_left_is_not_read_as_registered_by_the_tables(tmp_path):
    """Regression: `ykbus apps --rm rmA` of an RM that had unregistered printed an empty table
    (exit 0), and the registered RMs listed it."""
    import subprocess
    import sys

    from ykbus.log.jsonl import encode_entry

    a, b = LogBuilder("rmA"), LogBuilder("rmB", seq=1)
    entries = [a.register(OWN % "x"), b.register(OWN % "y")]
    a.seq = 2
    entries.append(a.unregister())
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(encode_entry(e) + b"\n" for e in entries))
    run = subprocess.run([sys.executable, "-m", "ykbus.cli", "apps", "--log", str(path), "--rm", "rmA"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "rm: 'rmA' is not registered (registered: rmB)" in run.stderr, run.stderr
