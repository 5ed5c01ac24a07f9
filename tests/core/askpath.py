"""The path of one ask through the core, traced: the calls into src/ykbus while the guarded
core applies one `alloc` entry whose ask is allocated at once (docs/architecture.md, "One
ask, from the NATS message to its allocation"). Pure Python only (a compiled module's
functions make no Python frames); tests/core/test_ask_path.py runs it in a child process.

    YKBUS_PURE_PYTHON=1 python -m tests.core.askpath        # the counts, as the doc gives them
    YKBUS_PURE_PYTHON=1 python -m tests.core.askpath --json # every call: depth, module, function
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import yaml

import ykbus
from ykbus.core.core import Core
from ykbus.core.guard import GuardedCore
from ykbus.log.build import LogBuilder, app, ask, node

# Modules of values and arithmetic the walk in the doc leaves out ("helpers that only compute")
HELPERS = frozenset({"core/model.py", "core/sortedseq.py", "core/resources.py", "core/chunked.py",
                     "core/decisions.py", "core/step.py", "core/lifecycle.py", "core/deadlines.py"})


def trace() -> dict[str, Any]:
    """Register, three nodes, an application; then trace the entry of one ask that fits."""
    core = Core(load_yaml=yaml.safe_load)
    guard = GuardedCore(core, lambda _data: core)
    log = LogBuilder("rm-1")
    guard.apply(log.register(""))
    guard.apply(log.nodes(*[node(f"n{i}", memory=8 * 2**30, vcore=8000) for i in range(3)]))
    guard.apply(log.apps(app("a1")))
    guard.apply(log.tick())
    entry = log.asks(ask("k1", "a1", memory=2**30, vcore=1000))
    root = os.path.dirname(ykbus.__file__)
    stack: list[str | None] = []
    calls: list[tuple[int, str, str, list[str]]] = []

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(root + os.sep):
                module = os.path.relpath(path, root).replace(os.sep, "/")
                stack.append(module)
                calls.append((len(stack), module, frame.f_code.co_qualname, [m for m in stack if m]))
            else:
                stack.append(None)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(hook)
    try:
        outputs = guard.apply(entry)
    finally:
        sys.setprofile(None)
    allocated = [a.nodeID for o in outputs if o.kind == "alloc" for a in o.msg.new]
    return {"allocated": allocated, "calls": calls}


def steps_back(calls: list[tuple[int, str, str, list[str]]]) -> list[str]:
    """The chains of modules on the stack that enter a module again after leaving it (a call
    back into a module below on the stack), each once."""
    out: dict[str, None] = {}
    for _depth, _module, _name, on_stack in calls:
        chain: list[str] = []
        for module in on_stack:
            if not chain or chain[-1] != module:
                chain.append(module)
        if len(chain) != len(set(chain)):
            out[" > ".join(chain)] = None
    return list(out)


def counts(calls: list[tuple[int, str, str, list[str]]], helpers: bool) -> tuple[int, int]:
    """(functions, modules) called, comprehensions left out, and the helper modules unless
    `helpers`."""
    functions = {(module, name) for _d, module, name, _s in calls
                 if "<" not in name and (helpers or module not in HELPERS)}
    return len(functions), len({module for module, _ in functions})


def main() -> None:
    found = trace()
    if "--json" in sys.argv:
        print(json.dumps(found))
        return
    calls = found["calls"]
    every, every_modules = counts(calls, True)
    work, work_modules = counts(calls, False)
    print(f"allocated on {found['allocated']}: {every} functions of src/ykbus in {every_modules} modules; "
          f"{work} in {work_modules} without the helpers; {max(d for d, *_ in calls)} deep; "
          f"{len(steps_back(calls))} steps back")


if __name__ == "__main__":
    main()
