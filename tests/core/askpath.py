"""The path of one ask through the core, traced: the calls into src/ykbus while the guarded
core applies one `alloc` entry whose ask is allocated at once (docs/architecture.md, "One
ask, from the NATS message to its allocation"). Pure Python only (a compiled module's
functions make no Python frames); tests/core/test_ask_path.py runs it in a child process.

    YKBUS_PURE_PYTHON=1 python -m tests.core.askpath        # the counts, as the doc gives them
    YKBUS_PURE_PYTHON=1 python -m tests.core.askpath --json # every call: depth, module, function
    YKBUS_PURE_PYTHON=1 python -m tests.core.askpath --bus  # the frames, from the NATS message

`--bus` counts what the issue that asked for a short way (41) counted: the frames one ask
crosses from the NATS message to its published allocation. A real nats-server, the core
service and an RM client (bus/client.py, the RM's side: not counted); the frames of
src/ykbus on the stack at each moment the ask is handled (`MOMENTS`: its message read, its
body decoded, the ask built and placed, its node found, the decision, the allocation built
and booked, the outputs derived and folded, encoded, delivered and sent), each frame once.
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


# The moments of the ask's way (functions of src/ykbus): the stack at each is on the way
MOMENTS = frozenset({"CoreService._on_input", "decode_input", "Ask.__init__", "AskPlaces.move", "NodeFinder.first_fit",
                     "Allocate.__init__", "Alloc.__init__", "Ledger.book", "Outbox.put", "fold",
                     "OutputPublisher.encode", "OutputPublisher.send"})


def bus_trace() -> dict[str, Any]:
    """The frames of src/ykbus (the RM's client left out) on the stack at each of the ask's
    `MOMENTS`, from the NATS message on the core's input to its allocation's publish, in the
    order first seen: one ask on a live core over a real nats-server on loopback."""
    import tempfile

    import anyio

    from tests.integration.conftest import Recorder, rm_client, running_core
    from ykbus.bus.client import ResourceManagerClient
    from ykbus.bus.server import NatsServer
    from ykbus.si import messages as m

    root = os.path.dirname(ykbus.__file__) + os.sep
    client_file = os.path.join(root, "bus", "client.py")
    frames: dict[tuple[str, str], None] = {}

    def hook(frame: Any, event: str, _arg: Any) -> None:
        code = frame.f_code
        if event != "call" or code.co_qualname not in MOMENTS or not code.co_filename.startswith(root):
            return
        chain = []
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(root) and path != client_file and "<" not in frame.f_code.co_qualname:
                chain.append((os.path.relpath(path, root).replace(os.sep, "/"), frame.f_code.co_qualname))
            frame = frame.f_back
        for key in reversed(chain):
            frames.setdefault(key, None)

    def res(**q: int) -> m.Resource:
        return m.Resource(resources={k: m.Quantity(v) for k, v in q.items()})

    async def run(url: str) -> list[str]:
        async with running_core(url), rm_client(url) as api:
            rec = Recorder()
            client = ResourceManagerClient(api, "rm-1", config="", callback=rec)
            await client.start(nodes=[m.NodeInfo(nodeID="n0", action=m.ActionFromRM.CREATE,
                                                 schedulableResource=res(memory=8 * 2**30, vcore=8000))])
            await client.add_applications([m.AddApplicationRequest(
                applicationID="a1", queueName="root.default", partitionName="default",
                ugi=m.UserGroupInformation(user="u"))])
            await rec.wait_for(lambda: rec.app)  # its application accepted: only the ask is traced
            sys.setprofile(hook)
            try:
                await client.add_asks([m.AllocationAsk(allocationKey="k1", applicationID="a1", maxAllocations=1,
                                                       resourceAsk=res(memory=2**30, vcore=1000))])
                await rec.wait_for(lambda: rec.allocations)
            finally:
                sys.setprofile(None)
            return [a.nodeID for a in rec.allocations]

    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=os.path.join(tmp, "nats"))
        server.start()
        try:
            allocated = anyio.run(run, server.url)
        finally:
            server.cleanup()
    return {"allocated": allocated, "frames": [list(f) for f in frames]}


def frame_counts(frames: list[list[str]], helpers: bool) -> tuple[int, int]:
    """(frames, modules) of a `bus_trace`, the helper modules left out unless `helpers`."""
    kept = [(m, f) for m, f in frames if helpers or m not in HELPERS]
    return len(kept), len({m for m, _ in kept})


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
    if "--bus" in sys.argv:
        way = bus_trace()
        if "--json" in sys.argv:
            print(json.dumps(way))
            return
        every, every_modules = frame_counts(way["frames"], True)
        work, work_modules = frame_counts(way["frames"], False)
        print(f"allocated on {way['allocated']}: the ask crosses {every} frames of src/ykbus in {every_modules} "
              f"modules from the NATS message to its published allocation; {work} in {work_modules} "
              f"without the helpers")
        return
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
