"""CLUSTER.yaml: nodes with Kubernetes quantities; every problem named with its path; any
text is nodes or a ClusterError, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.tyjob.cluster import ClusterError, parse_cluster


def test_nodes_with_quantities_and_labels():
    nodes = parse_cluster("nodes:\n  - {name: g1, cpu: 500m, memory: 2Gi, nvidia.com/gpu: 2, labels: {zone: a}}\n")
    [g1] = nodes.values()
    assert (g1.name, g1.capacity, g1.labels) == ("g1", {"vcore": 500, "memory": 2 * 2**30, "nvidia.com/gpu": 2},
                                                 {"zone": "a"})
    assert g1.info().attributes["label/zone"] == "a"


@pytest.mark.parametrize(("text", "words"), [
    ("nodes:\n  - {name: A_1, cpu: 1}\n", "nodes[0].name: must be a DNS-1123 label"),
    ("nodes:\n  - {name: a, cpu: lots}\n", "nodes[0].cpu: invalid quantity"),
    ("nodes:\n  - {name: a, disk: 1}\n", "nodes[0].disk: unknown field"),
    ("nodes:\n  - {name: a}\n", "nodes[0]: a node needs some cpu"),
    ("nodes:\n  - {name: a, cpu: 1}\n  - {name: a, cpu: 2}\n", "nodes[1].name: a is listed twice"),
    ("[]", "must be a mapping with a list `nodes`"),
])
def test_a_broken_cluster_names_the_problem(text, words):
    with pytest.raises(ClusterError) as exc:
        parse_cluster(text, "cluster.yaml")
    assert words in str(exc.value) and str(exc.value).startswith("cluster.yaml")


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                    max_leaves=30))
def test_any_document_is_nodes_or_an_error(doc):
    import yaml

    try:
        text = yaml.safe_dump({"nodes": doc if isinstance(doc, list) else [doc]})
    except yaml.YAMLError:
        return
    try:
        nodes = parse_cluster(text)
    except ClusterError as exc:
        assert str(exc)
    else:
        assert all(n.capacity for n in nodes.values())
