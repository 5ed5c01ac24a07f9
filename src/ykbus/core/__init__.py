"""The sans-IO scheduler core: `Core.apply(entry) -> outputs`.

This package imports the standard library, msgspec and sortedcontainers only (a test
enforces it): no IO, no clock, no randomness.
"""

from ykbus.core.core import Core, OutOfOrder
from ykbus.core.outbox import Entry, Output

__all__ = ["Core", "Entry", "Output", "OutOfOrder"]
