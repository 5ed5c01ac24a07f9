"""The sans-IO scheduler core: `Core.apply(entry) -> outputs`.

This package imports the standard library and msgspec only (a test enforces it): no IO,
no clock, no randomness. The one exception runs once, at import: `compiled.select()` looks
at the files of the compiled modules to choose between them and their sources
(core/compiled.py).
"""

from ykbus.core import compiled

compiled.select()

from ykbus.core.core import Core, OutOfOrder  # noqa: E402  (after select: it chooses what these import)
from ykbus.core.entries import Entry, Output  # noqa: E402

__all__ = ["Core", "Entry", "Output", "OutOfOrder"]
