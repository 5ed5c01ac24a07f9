"""An ask waiting for room that passes its reservation delay when no node can be reserved
for its shape joins its shape's reservation gate at once, instead of being judged again
(Partition.reservation_due). That shortcut must change nothing anyone sees: the same
outputs, the same state and reasons after every entry, as judging each ask would give,
also when a limit or a new queue max holds some of them, some may preempt, some could
reserve, and a node that can be reserved comes later."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent('''
    import json, sys
    from tests.conftest import Harness
    from ykbus.core.partition import Partition
    from ykbus.log.build import app, ask, node
    from ykbus.log.jsonl import encode_output

    QUEUES = """
    partitions:
      - name: default
        limits:
          - limit: one user
            users: [bob]
            maxresources: {vcore: 20}
        queues:
          - name: root
            submitacl: '*'
            queues:
              - name: big
              - name: capped
              - name: filling
                resources: {max: {vcore: 20}}
    """
    LOWER = QUEUES.replace("          - name: capped", "          - name: capped\\n            resources: {max: {vcore: 5}}")
    SECOND = 10**9

    def run() -> list[str]:
        h = Harness()
        seen = []

        def do(entry):
            for o in h.do(entry):
                seen.append(encode_output(o).decode())
            seen.append(json.dumps(h.core.dump(), sort_keys=True, default=str))

        h.setup(QUEUES, n1={"vcore": 4000}, n2={"vcore": 4000})
        do(h.log.apps(app("fill", "root.big"), app("huge", "root.big"), app("cap", "root.capped"),
                      app("bob", "root.big", user="bob"), app("pre", "root.big"),
                      app("acc", "root.big")))
        do(h.log.asks(ask("f", "fill", vcore=1000, max_allocations=7), ask("hs", "huge", vcore=1000)))  # huge runs
        do(h.log.asks(*[ask(f"h{i}", "huge", vcore=9000 + i % 3) for i in range(30)]))  # larger than every node
        do(h.log.asks(*[ask(f"a{i}", "acc", vcore=9000) for i in range(10)]))  # of an application not running yet
        do(h.log.asks(*[ask(f"c{i}", "cap", vcore=6000) for i in range(5)]))
        do(h.log.asks(*[ask(f"b{i}", "bob", vcore=9000) for i in range(5)]))
        do(h.log.asks(ask("r", "huge", vcore=3000)))  # fits a node's capacity: it can reserve one
        do(h.log.asks(ask("p", "pre", vcore=9000, preemption=(True, True))))
        do(h.log.apps(app("x", "root.filling"), app("fills", "root.filling")))
        do(h.log.asks(ask("x", "x", vcore=9000)))  # waits for room; its queue has 11,000 left
        do(h.log.nodes(node("n4", vcore=4000), node("n5", vcore=4000), node("n6", vcore=4000)))
        do(h.log.asks(ask("s", "fills", vcore=1000, max_allocations=12)))  # now x would pass its queue's max
        do(h.log.tick(SECOND))
        do(h.log.config(LOWER))  # the capped asks are held by the new max before their delay passes
        for _ in range(4):
            do(h.log.tick(SECOND))  # past the reservation delay (2 s)
        do(h.log.nodes(node("n3", vcore=16000)))  # a node the huge asks can reserve
        for _ in range(3):
            do(h.log.tick(SECOND))
        return seen

    def held_later() -> list[str]:
        """x waits for room within its queue's max; then f's allocation leaves x over that max."""
        h = Harness()
        seen = []
        h.setup("""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: '*'
            queues:
              - name: q
                resources: {max: {vcore: 10}}
    """, n1={"vcore": 4000})
        for entry in (h.log.apps(app("x", "root.q"), app("f", "root.q")), h.log.asks(ask("x", "x", vcore=9000)),
                      h.log.asks(ask("f", "f", vcore=2000)), h.log.tick(SECOND), h.log.tick(SECOND), h.log.tick(SECOND)):
            seen += [encode_output(o).decode() for o in h.do(entry)]
            seen.append(json.dumps(h.core.dump(), sort_keys=True, default=str))
        return seen

    judged = run() + held_later()
    Partition._judged_would_wait_to_reserve = lambda self, ask: False  # judge every ask, as before the shortcut
    every = run() + held_later()
    print(json.dumps({"same": judged == every, "lines": len(judged),
                      "first": next((i for i, (a, b) in enumerate(zip(judged, every)) if a != b), None)}))
''')


def test_asks_joining_the_reservation_gate_at_their_delay_change_nothing_seen():
    """Pure Python in a subprocess: the shortcut is replaced there to judge every ask."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "YKBUS_PURE_PYTHON": "1", "PYTHONPATH": root}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["lines"] > 20 and result["same"], result
