import pytest

from ykbus.core import partition


@pytest.fixture(autouse=True)
def _no_purity_check(monkeypatch):
    """The fuzz checks bound each entry's CPU time (checks.APPLY_BUDGET_S): they time the
    core without the purity check (tests/conftest.py), which fingerprints the partition
    around every plan (an entry of thousands of plans is its worst case). The traces, the
    property machines and tests/core check purity."""
    monkeypatch.setattr(partition, "CHECK_PURE", False)
