"""Entry point: the YARN-like batch simulated RM (same as `ykbus sim batch ...`)."""

from ykbus.sim.batch import main

if __name__ == "__main__":
    main()
