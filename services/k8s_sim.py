"""Entry point: the Kubernetes-like simulated RM (same as `ykbus sim k8s ...`)."""

from ykbus.sim.k8s import main

if __name__ == "__main__":
    main()
