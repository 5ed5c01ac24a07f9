"""Simulated resource managers that speak to ykbus over NATS with the client library.

* `k8s`: a Kubernetes-like cluster: nodes, namespaces as queues, deployments of pods that
  run for a while and end.
* `batch`: a YARN-like batch RM: jobs of many identical containers, removed when done.
* `offline`: `ykbus up`'s demo RMs against an in-process core on a virtual clock, without
  NATS: a demo log in moments, the same every time (the tests replay it).

They are demo and load generators, not schedulers: every placement decision is the core's.
"""
