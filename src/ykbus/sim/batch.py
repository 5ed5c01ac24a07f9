"""A YARN-like batch RM: jobs of many identical containers, in two queues."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ykbus.bus.local import DATA_HELP, FIND_URL, default_url
from ykbus.cliparse import SIM_MOST_NODES, Parser, positive, rm_id, whole
from ykbus.si import messages as m
from ykbus.sim.base import GiB, SimRM, nats_identity, resource, run_sim


@dataclass(frozen=True)
class BatchWorkload:
    """The batch RM's workload (a `sim.base.Workload`): its cluster and its job generator."""

    nodes_count: int = 10
    node_vcore: int = 32_000
    node_memory: int = 128 * GiB
    jobs_per_s: float = 5.0
    max_waiting: int = 200  # containers waiting per queue: a few seconds of the default cluster's work

    def queues_yaml(self) -> str:
        return """
partitions:
  - name: default
    nodesortpolicy: {type: binpacking}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: etl
            resources: {guaranteed: {vcore: 200}}
            properties: {application.sort.policy: fifo}
          - name: adhoc
            resources: {max: {vcore: 100}}
            maxapplications: 20
            # runtime limits (docs/time.md): a container that sets none gets 30 s, none may
            # run past 1 min; the core ends them there, and tells waiting asks when they start
            properties: {ykbus.io/runtime.default: 30s, ykbus.io/runtime.max: 1m}
"""

    def nodes(self, rm_id: str) -> list[m.NodeInfo]:
        return [m.NodeInfo(nodeID=f"{rm_id}-host-{i:03d}", action=m.ActionFromRM.CREATE,
                           schedulableResource=resource(vcore=self.node_vcore, memory=self.node_memory))
                for i in range(self.nodes_count)]

    async def arrivals(self, sim: SimRM) -> None:
        n = sim.state.submitted
        while True:
            queue = await sim.queue_with_room(["etl", "etl", "adhoc"], self.max_waiting)
            n += 1
            containers = sim.rng.randint(4, 40)
            job = f"{sim.rm_id}-{queue}-job-{n}"
            ask = m.AllocationAsk(allocationKey=f"{job}-container", applicationID=job, partitionName="default",
                                  resourceAsk=resource(vcore=1000, memory=2 * GiB), maxAllocations=containers,
                                  priority=sim.rng.choice([0, 10]),
                                  # etl's containers say how long they may run (they run 1 to 6 s)
                                  executionTimeoutMilliSeconds=20_000 if queue == "etl" else 0)
            am = m.AllocationAsk(allocationKey=f"{job}-am", applicationID=job, partitionName="default",
                                 resourceAsk=resource(vcore=1000, memory=GiB), maxAllocations=1, priority=100,
                                 Originator=True)
            await sim.submit(m.AddApplicationRequest(applicationID=job, queueName=f"root.{queue}",
                                                     partitionName="default",
                                                     ugi=m.UserGroupInformation(user="hadoop")),
                             [am, ask], duration_s=sim.rng.uniform(1.0, 6.0))
            await anyio.sleep(1 / self.jobs_per_s)


def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="ykbus sim batch")
    p.add_argument("--nats", default=None, metavar="URL", help=f"NATS server (default: {FIND_URL})")
    p.add_argument("--data", metavar="DIR", help=DATA_HELP)
    p.add_argument("--rm-id", type=rm_id, default="batch", help="the rmID it registers as (default batch)")
    p.add_argument("--nodes", type=whole(1, SIM_MOST_NODES), default=10, help="the nodes it has")
    p.add_argument("--rate", type=positive, default=5.0, help="jobs per second, while fewer than --max-waiting wait")
    p.add_argument("--max-waiting", type=whole(0), default=200,
                   help="submit no job to a queue while this many of its containers wait unplaced "
                        "(0: no bound, the backlog grows)")
    p.add_argument("--state", metavar="FILE", help="state file: recover running containers after a restart")
    p.add_argument("--nats-secrets", metavar="FILE",
                   help="connect as this RM's user of a secrets file written by `ykbus nats-config`")
    args = p.parse_args(argv)
    workload = BatchWorkload(nodes_count=args.nodes, jobs_per_s=args.rate, max_waiting=args.max_waiting)
    run_sim(SimRM(args.nats or default_url(args.data), args.rm_id, workload, state_path=args.state,
                  nats_options=nats_identity(args.nats_secrets, args.rm_id)), "ykbus sim batch")


if __name__ == "__main__":
    main()
