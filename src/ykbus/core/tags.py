"""The tags the core reads on applications and asks beyond YuniKorn's own: the node policy
an application chooses (`ykbus.io/node-policy`, core/policies.py) and the role of an ask
in its job (`ykbus.io/role`), with how each is validated.
"""

from __future__ import annotations

import enum
from typing import Final

POLICY_TAG = "ykbus.io/node-policy"
ROLE_TAG: Final = "ykbus.io/role"
LEADER_ROLE, WORKER_ROLE = "leader", "worker"
ROLES = (LEADER_ROLE, WORKER_ROLE)


class NodePolicy(enum.Enum):
    BINPACK = "BinPack"
    LEADER_FIRST = "LeaderFirst"
    MIN_FRAGMENT = "MinFragment"
    JOB_AFFINITY = "JobAffinity"
    JOB_ANTI_AFFINITY = "JobAntiAffinity"


AFFINITIES = (NodePolicy.JOB_AFFINITY, NodePolicy.JOB_ANTI_AFFINITY)


def policy_problem(tags: dict[str, str]) -> str:
    """Why an application's tags name no valid node policy ("" when they are fine)."""
    value = tags.get(POLICY_TAG)
    if value is None:
        return ""
    try:
        NodePolicy(value)
    except ValueError:
        names = ", ".join(p.value for p in NodePolicy)
        return f"tag {POLICY_TAG}: unknown node policy {value[:64]!r} (one of {names})"
    return ""


def role_problem(tags: dict[str, str]) -> str:
    """Why an ask's `ykbus.io/role` tag is not valid ("" when absent or valid)."""
    value = tags.get(ROLE_TAG)
    if value is None or value in ROLES:
        return ""
    return f"tag {ROLE_TAG}: unknown role {value[:64]!r} (leader or worker)"


