"""Outputs described in words, for people watching a run."""

from __future__ import annotations

from ykbus.core.entries import Output
from ykbus.core.resources import fmt_quantity
from ykbus.si import messages as m


def _res(r: m.Resource) -> str:
    return ", ".join(f"{k}: {fmt_quantity(k, q.value)}" for k, q in r.resources.items())


def describe(out: Output) -> list[str]:
    msg, at = out.msg, f"[{out.seq:>4}] {out.rm or '-'}"
    lines = []
    if isinstance(msg, m.RegisterResourceManagerResponse):
        lines.append(f"{at} registration {'failed: ' + msg.error if msg.error else 'accepted'}")
    elif isinstance(msg, m.AllocationResponse):
        lines += [f"{at} allocated {a.allocationKey} ({a.applicationID}) on {a.nodeID}: {_res(a.resourcePerAlloc)} uuid={a.UUID}" for a in msg.new]
        lines += [f"{at} released {r.UUID} ({r.applicationID}) {r.terminationType}: {r.message}" for r in msg.released]
        lines += [f"{at} rejected ask {r.allocationKey} ({r.applicationID}): {r.reason}" for r in msg.rejected]
        lines += [f"{at} released ask {r.allocationKey} ({r.applicationID}): {r.message}" for r in msg.releasedAsks]
    elif isinstance(msg, m.ApplicationResponse):
        lines += [f"{at} application {a.applicationID} accepted" for a in msg.accepted]
        lines += [f"{at} application {a.applicationID} rejected: {a.reason}" for a in msg.rejected]
        lines += [f"{at} application {u.applicationID} -> {u.state} ({u.message})" for u in msg.updated]
    elif isinstance(msg, m.NodeResponse):
        lines += [f"{at} node {n.nodeID} accepted" for n in msg.accepted]
        lines += [f"{at} node {n.nodeID} rejected: {n.reason}" for n in msg.rejected]
    elif isinstance(msg, m.StateBatch):
        lines += [f"{at} ask {s.allocationKey} ({s.applicartionID}) {s.state}: {s.reason}" for s in msg.states]
    elif isinstance(msg, m.EventBatch):
        lines += [f"{at} event {e.type} {e.objectID}: {e.message}" for e in msg.events]
    return lines
