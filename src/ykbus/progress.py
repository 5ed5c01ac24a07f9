"""Progress of long work on stderr (`ykbus replay`, `record`, `bench`): how much is done,
the rate and the time left, redrawn in place at most four times a second. Silent unless
stderr is a terminal, so pipes and logs stay clean."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, what: str, total: int | None = None, unit: str = "entries", stream: TextIO | None = None,
                 every_s: float = 0.25) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.shown = self.stream.isatty()
        self.every_s = every_s
        self.start = self._last = time.monotonic()
        self.drawn = False

    def update(self, done: int, total: int | None = None) -> None:
        """`done` units so far, of `total` if given (redrawn at most every quarter second)."""
        if total is not None:
            self.total = total
        if not self.shown:
            return
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        self.stream.write("\r\033[K" + self.line(done, now - self.start))
        self.stream.flush()
        self.drawn = True

    def line(self, done: int, elapsed: float) -> str:
        rate = done / elapsed if elapsed > 0 else 0.0
        text = f"{self.what}: {done:,}"
        if self.total:
            text += f" of {self.total:,} {self.unit} ({100 * done // self.total}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate:,.0f}/s"
        if self.total and rate > 0:
            text += f", {_duration((self.total - done) / rate)} left"
        return text

    def close(self) -> None:
        """Clear the line (what the command prints next starts on a clean line)."""
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
