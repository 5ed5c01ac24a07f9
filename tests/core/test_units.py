"""Quantities in the units people read (issue 40, section 3): one formatter
(core/resources.py `fmt_quantity`, `fmt_res`) for every text a person reads (reasons,
events, `ykbus explain`, the CLI's tables); the wire and the JSON API keep integers."""

from __future__ import annotations

import pytest

from tests.conftest import Harness, new_allocs, states
from ykbus.core.resources import fmt_bytes, fmt_cores, fmt_quantity, fmt_res
from ykbus.log.build import app, ask
from ykbus.tables import resources

GI = 2**30


@pytest.mark.parametrize(("millis", "text"), [
    (0, "0 cores"), (1, "0.001 cores"), (500, "0.5 cores"), (999, "0.999 cores"), (1000, "1 core"),
    (1001, "1.001 cores"), (1500, "1.5 cores"), (2000, "2 cores"), (2500, "2.5 cores"),
    (123_456, "123.456 cores"), (10**15, "1000000000000 cores"), (-1500, "-1.5 cores"),
])
def test_vcore_is_in_cores_singular_only_for_exactly_one(millis, text):
    assert fmt_cores(millis) == text == fmt_quantity("vcore", millis)


@pytest.mark.parametrize(("value", "text"), [
    (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1 Ki"), (1536, "1.5 Ki"), (1_000_000, "976.56 Ki"),
    (512 * 2**20, "512 Mi"), (2**20 - 1, "1 Mi"),  # 1023.999 Ki rounds to 1024 Ki: 1 Mi
    (2**20 + 5, "1 Mi"), (2**20 + 2**20 // 100 * 2, "1.02 Mi"), (GI, "1 Gi"), (GI * 3 // 2, "1.5 Gi"),
    (2 * GI, "2 Gi"), (128 * GI, "128 Gi"), (2**40, "1 Ti"), (2**50, "1 Pi"), (2**60, "1024 Pi"),
    (2**63 - 1, "8192 Pi"), (-(2 * GI), "-2 Gi"),
])
def test_memory_is_in_binary_units_up_to_two_decimals(value, text):
    assert fmt_bytes(value) == text == fmt_quantity("memory", value) == fmt_quantity("ephemeral-storage", value)


def test_other_resources_are_counts_and_a_vector_keeps_its_names_and_order():
    assert fmt_quantity("nvidia.com/gpu", 8) == "8"
    assert fmt_quantity("pods", 0) == "0"
    assert fmt_res({"vcore": 1000, "memory": 2 * GI}) == "{vcore: 1 core, memory: 2 Gi}"
    assert fmt_res({"memory": 512 * 2**20, "nvidia.com/gpu": 8, "vcore": 2500}) == (
        "{memory: 512 Mi, nvidia.com/gpu: 8, vcore: 2.5 cores}")
    assert fmt_res({}) == "{}"


def test_the_cli_tables_use_the_same_units():
    assert resources({"vcore": "2000", "memory": 4 * GI, "nvidia.com/gpu": 1}) == (
        "memory: 4 Gi, nvidia.com/gpu: 1, vcore: 2 cores")
    assert resources({}) == "-"


QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: small
            resources: {max: {vcore: 2, memory: 4Gi}}
"""


def test_the_reason_the_rm_gets_reads_in_units_and_the_wire_keeps_integers():
    h = Harness()
    h.setup(QUEUES, n1={"vcore": 8000, "memory": 64 * GI})
    h.do(h.log.apps(app("a", "root.small")))
    outs = h.do(h.log.asks(ask("big", "a", vcore=1500, memory=128 * GI)))
    assert [s.reason for s in states(outs)] == [
        "queue root.small max memory 4 Gi would be exceeded: 0 B used + 128 Gi asked"]
    outs = h.do(h.log.asks(ask("wide", "a", vcore=1000, memory=GI * 3 // 2)))
    assert [a.resourcePerAlloc.resources["memory"].value for a in new_allocs(outs)] == [GI * 3 // 2]  # the wire
    dump = h.core.dump()["rms"]["rm-1"]["partitions"]["default"]
    assert dump["nodes"]["n1"]["capacity"] == {"vcore": 8000, "memory": 64 * GI}  # the JSON API: integers
    why = dump["applications"]["a"]["asks"]["big"]["why"]
    assert why["details"] == {"queue": "root.small", "resource": "memory", "used": 0, "max": 4 * GI,
                              "asked": 128 * GI}


def test_a_preemption_delay_reads_as_its_queue_file_could_say_it():
    from ykbus.core.preemption import fmt_delay

    assert [fmt_delay(ms) for ms in (30_000, 1_500, 1_050, 250, 0)] == ["30 s", "1.5 s", "1.05 s", "250 ms", "0 ms"]
