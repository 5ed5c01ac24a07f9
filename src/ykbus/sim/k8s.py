"""A Kubernetes-like simulated cluster: nodes, namespaces as queues, deployments of pods.

Work comes from a generator (arrival rate, pod counts, sizes, priorities) or from a trace
file (`--trace FILE`, JSON Lines, one deployment per line, see docs/simulators.md):

    {"at": 0.5, "namespace": "team-a", "app": "web-1", "pods": 3, "vcore": 500,
     "memory": 536870912, "priority": 0, "duration": 2.0}
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio
import msgspec

from ykbus.bus.local import DATA_HELP, FIND_URL, default_url
from ykbus.cliparse import SIM_MOST_NODES, Parser, positive, queue_names, rm_id, whole
from ykbus.si import messages as m
from ykbus.sim.base import GiB, SimRM, nats_identity, resource, run_sim

# node profiles: (share of the nodes, vcore milli, memory bytes, gpus)
PROFILES: dict[str, list[tuple[float, int, int, int]]] = {
    "uniform": [(1.0, 16_000, 64 * GiB, 0)],
    "mixed": [(0.6, 8_000, 32 * GiB, 0), (0.3, 16_000, 64 * GiB, 0), (0.1, 64_000, 256 * GiB, 8)],
}


class TraceLine(msgspec.Struct, forbid_unknown_fields=True):
    at: float
    namespace: str
    pods: int
    vcore: int
    memory: int
    duration: float
    app: str = ""
    priority: int = 0
    gpu: int = 0


@dataclass(frozen=True)
class K8sWorkload:
    """The k8s RM's workload (a `sim.base.Workload`): its nodes by profile, a namespace per
    queue, deployments from the generator or a trace file."""

    nodes_count: int = 20
    node_vcore: int = 16_000
    node_memory: int = 64 * GiB
    namespaces: tuple[str, ...] = ("team-a", "team-b", "ml")
    pods_per_s: float = 200.0
    max_waiting: int = 200  # pods waiting per namespace
    profile: str = "uniform"
    trace: str | None = None

    def queues_yaml(self) -> str:
        """A leaf queue per namespace, each guaranteed its share of the cluster. A namespace
        is a tenant: its queue is priority-fenced (the seed's `priority.policy: fence`), so
        its pods' priorities order its own pods and do not outrank another namespace's
        (without it, one namespace's waiting pods of priority 100 kept another at 0% of the
        cluster, far below its guarantee, for as long as they waited)."""
        share = max(1, self.nodes_count * self.node_vcore // 1000 // len(self.namespaces))
        leaves = "".join(
            f"          - name: {ns}\n"
            f"            resources: {{guaranteed: {{vcore: {share}}}}}\n"
            f"            properties: {{application.sort.policy: fair, priority.policy: fence}}\n"
            for ns in self.namespaces)
        return ("partitions:\n  - name: default\n    nodesortpolicy: {type: fair}\n    queues:\n"
                "      - name: root\n        submitacl: '*'\n        queues:\n" + leaves)

    def nodes(self, rm_id: str) -> list[m.NodeInfo]:
        out, i = [], 0
        for share, vcore, memory, gpus in PROFILES[self.profile]:
            for _ in range(max(1, round(share * self.nodes_count))):
                q = {"vcore": vcore, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
                out.append(m.NodeInfo(nodeID=f"{rm_id}-node-{i:03d}", action=m.ActionFromRM.CREATE,
                                      attributes={"si/hostname": f"{rm_id}-node-{i:03d}",
                                                  "si/instance-type": f"{vcore // 1000}c{memory // GiB}g"},
                                      schedulableResource=resource(**q)))
                i += 1
        return out[: max(self.nodes_count, len(PROFILES[self.profile]))]

    @staticmethod
    async def _deploy(sim: SimRM, app_id: str, ns: str, pods: int, vcore: int, memory: int, priority: int,
                      duration: float, gpu: int = 0) -> None:
        q = {"vcore": vcore, "memory": memory, **({"nvidia.com/gpu": gpu} if gpu else {})}
        asks = [m.AllocationAsk(allocationKey=f"{app_id}-pod-{i}", applicationID=app_id, partitionName="default",
                                resourceAsk=resource(**q), maxAllocations=1, priority=priority,
                                tags={"kubernetes.io/meta/namespace": ns})
                for i in range(pods)]
        await sim.submit(m.AddApplicationRequest(applicationID=app_id, queueName=f"root.{ns}",
                                                 partitionName="default", ugi=m.UserGroupInformation(user=ns),
                                                 tags={"namespace": ns}), asks, duration_s=duration)

    async def arrivals(self, sim: SimRM) -> None:
        if self.trace:
            await self._replay_trace(sim)
            await anyio.sleep_forever()
        n = sim.state.submitted
        while True:
            ns = await sim.queue_with_room(list(self.namespaces), self.max_waiting)
            n += 1
            pods = sim.rng.randint(1, 8)
            vcore = sim.rng.choice([250, 500, 1000, 2000])
            memory = sim.rng.choice([256, 512, 1024, 4096]) * 1024**2
            priority = sim.rng.choice([0, 0, 0, 100])
            gpu = 1 if ns == "ml" and self.profile == "mixed" and sim.rng.random() < 0.3 else 0
            await self._deploy(sim, f"{sim.rm_id}-{ns}-deploy-{n}", ns, pods, vcore, memory, priority,
                               sim.rng.uniform(0.5, 4.0), gpu)
            await anyio.sleep(pods / self.pods_per_s)

    async def _replay_trace(self, sim: SimRM) -> None:
        """Deployments at their `at` offsets (seconds from the start) from a JSONL trace."""
        assert self.trace is not None
        decoder = msgspec.json.Decoder(TraceLine)
        start = time.monotonic()
        with open(self.trace, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    t = decoder.decode(line)
                except msgspec.DecodeError as exc:
                    raise ValueError(f"{self.trace}:{number}: {exc}") from None
                wait = start + t.at - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                await self._deploy(sim, t.app or f"trace-{number}", t.namespace, t.pods, t.vcore, t.memory, t.priority,
                                   t.duration, t.gpu)


def main(argv: list[str] | None = None) -> None:
    p = Parser(prog="ykbus sim k8s")
    p.add_argument("--nats", default=None, metavar="URL", help=f"NATS server (default: {FIND_URL})")
    p.add_argument("--data", metavar="DIR", help=DATA_HELP)
    p.add_argument("--rm-id", type=rm_id, default="k8s", help="the rmID it registers as (default k8s)")
    p.add_argument("--nodes", type=whole(1, SIM_MOST_NODES), default=20, help="the nodes it has")
    p.add_argument("--rate", type=positive, default=200.0, help="pods per second, while fewer than --max-waiting wait")
    p.add_argument("--max-waiting", type=whole(0), default=200,
                   help="deploy nothing to a namespace while this many of its pods wait unplaced "
                        "(0: no bound, the backlog grows)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="uniform", help="node sizes")
    p.add_argument("--trace", metavar="FILE.jsonl", help="deployments from a trace file instead of the generator")
    p.add_argument("--state", metavar="FILE", help="state file: recover running pods after a restart")
    p.add_argument("--nats-secrets", metavar="FILE",
                   help="connect as this RM's user of a secrets file written by `ykbus nats-config`")
    p.add_argument("--namespaces", type=queue_names, default="team-a,team-b,ml",
                   help="its namespaces, each a queue under root, separated by commas")
    args = p.parse_args(argv)
    workload = K8sWorkload(nodes_count=args.nodes, pods_per_s=args.rate, max_waiting=args.max_waiting,
                           profile=args.profile, trace=args.trace, namespaces=args.namespaces)
    run_sim(SimRM(args.nats or default_url(args.data), args.rm_id, workload, state_path=args.state,
                  nats_options=nats_identity(args.nats_secrets, args.rm_id)), "ykbus sim k8s")


if __name__ == "__main__":
    main()
