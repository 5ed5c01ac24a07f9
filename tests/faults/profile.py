"""The fault suite's profile: short in CI (`make test`), long by hand (`make faults-long`,
YKBUS_FAULTS=long): more kills, every NATS server of the cluster in turn."""

from __future__ import annotations

import os

LONG = os.environ.get("YKBUS_FAULTS") == "long"
LEADER_KILLS = 10 if LONG else 3
NATS_KILLS = 3 if LONG else 1
