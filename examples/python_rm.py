"""A complete resource manager in Python: it registers with a queue configuration, brings
two nodes, submits one application of three pods, prints where each pod runs, releases them
and goes.

    python examples/python_rm.py                 # against the core `ykbus up` runs
    python examples/python_rm.py --nats URL      # against any core's NATS server

Without --nats it finds the server as every ykbus command does: $YKBUS_NATS, else the URL
a running `ykbus up` wrote, else nats://127.0.0.1:4222.
"""

from __future__ import annotations

import argparse

import anyio

from ykbus.bus.client import NatsScheduler, ResourceManagerCallback, ResourceManagerClient
from ykbus.bus.local import NatsUnreachable, default_url
from ykbus.si import messages as m

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: web
            resources: {max: {vcore: 8, memory: 16G}}  # cores and bytes (docs/configuration.md); the wire counts vcore in millicores
"""

PODS = 3


def resource(vcore: int, memory: int) -> m.Resource:
    return m.Resource(resources={"vcore": m.Quantity(vcore), "memory": m.Quantity(memory)})


class Printer(ResourceManagerCallback):
    """The core's answers: here, print them and count the pods placed."""

    def __init__(self) -> None:
        self.running: list[m.Allocation] = []
        self.placed = anyio.Event()

    def update_allocation(self, response: m.AllocationResponse) -> None:
        for a in response.new:
            print(f"run {a.allocationKey} on {a.nodeID} (allocation {a.UUID})")
            self.running.append(a)
        for r in response.rejected:
            print(f"rejected ask {r.allocationKey}: {r.reason}")
        if len(self.running) >= PODS:
            self.placed.set()

    def update_application(self, response: m.ApplicationResponse) -> None:
        for app in response.accepted:
            print(f"application {app.applicationID} accepted")
        for rejected in response.rejected:
            print(f"application {rejected.applicationID} rejected: {rejected.reason}")


async def main(url: str, rm_id: str) -> None:
    printer = Printer()
    async with NatsScheduler(url) as api:
        rm = ResourceManagerClient(api, rm_id, config=QUEUES, callback=printer)
        # register, then recover: no applications yet, two nodes (their running pods would go
        # in existingAllocations after a restart of this RM)
        await rm.start(nodes=[m.NodeInfo(nodeID=f"{rm_id}-node-{i}", action="CREATE",
                                         schedulableResource=resource(4000, 8_000_000_000))
                              for i in (1, 2)])
        await rm.add_applications([m.AddApplicationRequest(
            applicationID="web-1", queueName="root.web", partitionName="default",
            ugi=m.UserGroupInformation(user="alice"))])
        await rm.add_asks([m.AllocationAsk(
            allocationKey=f"web-1-pod-{i}", applicationID="web-1", partitionName="default",
            resourceAsk=resource(1500, 1_000_000_000), maxAllocations=1) for i in range(PODS)])
        with anyio.fail_after(30):
            await printer.placed.wait()
        # the pods finished: give their resources back, then the application
        await rm.release([m.AllocationRelease(partitionName="default", applicationID=a.applicationID,
                                              UUID=a.UUID, terminationType="STOPPED_BY_RM", message="done")
                          for a in printer.running])
        await rm.remove_applications(["web-1"])
        await api.unregister()  # and leave: its nodes go with it
        print(f"released {len(printer.running)} pods; done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--nats", default=None, help="NATS server (default: found as every ykbus command does)")
    parser.add_argument("--data", default=None, help="the data directory of the `ykbus up` to use, when several run")
    parser.add_argument("--rm-id", default="example-rm", help="this RM's id")
    args = parser.parse_args()
    try:
        url = args.nats or default_url(args.data)
    except NatsUnreachable as e:
        raise SystemExit(f"python_rm.py: {e}") from None
    anyio.run(main, url, args.rm_id)
