"""Every legal and every illegal transition of every lifecycle table."""

import itertools
from pathlib import Path

import pytest

from ykbus.core.lifecycle import LIFECYCLES, IllegalTransition, render_docs

CASES = [
    (lc, state, event)
    for lc in LIFECYCLES
    for state, event in itertools.product(
        type(next(iter(lc.table))[0]), type(next(iter(lc.table))[1]))
]


@pytest.mark.parametrize("lc,state,event", CASES, ids=[f"{c[0].name}:{c[1].name}:{c[2].name}" for c in CASES])
def test_transition(lc, state, event):
    if (state, event) in lc.table:
        assert lc.advance(state, event) is lc.table[(state, event)]
    else:
        with pytest.raises(IllegalTransition, match=event.name):
            lc.advance(state, event)


def test_lifecycle_docs_are_generated_from_the_tables():
    path = Path(__file__).parents[2] / "docs" / "lifecycles.md"
    assert path.read_text() == render_docs(), "run: python -m ykbus.core.lifecycle > docs/lifecycles.md"
