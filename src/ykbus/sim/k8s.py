"""A Kubernetes-like simulated cluster: nodes, namespaces as queues, deployments of pods."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import anyio

from ykbus.si import messages as m
from ykbus.sim.base import GiB, SimRM, resource


@dataclass
class K8sSim(SimRM):
    nodes_count: int = 20
    node_vcore: int = 16_000
    node_memory: int = 64 * GiB
    namespaces: tuple[str, ...] = ("team-a", "team-b", "ml")
    pods_per_s: float = 200.0

    def queues_yaml(self) -> str:
        share = max(1, self.nodes_count * self.node_vcore // 1000 // len(self.namespaces))
        leaves = "".join(
            f"          - name: {ns}\n"
            f"            resources: {{guaranteed: {{vcore: {share}}}}}\n"
            f"            properties: {{application.sort.policy: fair}}\n"
            for ns in self.namespaces)
        return ("partitions:\n  - name: default\n    nodesortpolicy: {type: fair}\n    queues:\n"
                "      - name: root\n        submitacl: '*'\n        queues:\n" + leaves)

    def nodes(self) -> list[m.NodeInfo]:
        return [m.NodeInfo(nodeID=f"{self.rm_id}-node-{i:03d}", action=m.ActionFromRM.CREATE,
                           attributes={"si/hostname": f"{self.rm_id}-node-{i:03d}"},
                           schedulableResource=resource(vcore=self.node_vcore, memory=self.node_memory))
                for i in range(self.nodes_count)]

    async def arrivals(self) -> None:
        n = 0
        while True:
            n += 1
            ns = self.rng.choice(self.namespaces)
            pods = self.rng.randint(1, 8)
            vcore = self.rng.choice([250, 500, 1000, 2000])
            memory = self.rng.choice([256, 512, 1024, 4096]) * 1024**2
            priority = self.rng.choice([0, 0, 0, 100])
            app_id = f"{ns}-deploy-{n}"
            asks = [m.AllocationAsk(allocationKey=f"{app_id}-pod-{i}", applicationID=app_id, partitionName="default",
                                    resourceAsk=resource(vcore=vcore, memory=memory), maxAllocations=1,
                                    priority=priority, tags={"kubernetes.io/meta/namespace": ns})
                    for i in range(pods)]
            await self.submit(m.AddApplicationRequest(applicationID=app_id, queueName=f"root.{ns}",
                                                      partitionName="default", ugi=m.UserGroupInformation(user=ns),
                                                      tags={"namespace": ns}),
                              asks, duration_s=self.rng.uniform(0.5, 4.0))
            await anyio.sleep(pods / self.pods_per_s)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="ykbus sim k8s")
    p.add_argument("--nats", default="nats://127.0.0.1:4222")
    p.add_argument("--rm-id", default="k8s")
    p.add_argument("--nodes", type=int, default=20)
    p.add_argument("--rate", type=float, default=200.0, help="pods per second")
    args = p.parse_args(argv)
    anyio.run(K8sSim(args.nats, args.rm_id, nodes_count=args.nodes, pods_per_s=args.rate).run)


if __name__ == "__main__":
    main()
