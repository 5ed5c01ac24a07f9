"""Progress of long work on stderr (`ykbus replay`, `record`, `bench`): how much is done,
the rate and the time left, redrawn in place at most four times a second. Silent unless
stderr is a terminal, so pipes and logs stay clean. `Block`: a few lines redrawn in place at
the bottom of a terminal (`ykbus up`'s progress)."""

from __future__ import annotations

import shutil
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


class Block:
    """A few lines kept at the bottom of a terminal and redrawn in place (`ykbus up`'s progress):
    each draw moves the cursor back up over the last one and clears it, so nothing scrolls,
    and each line is folded at word boundaries to the terminal's width (read at every draw, so
    a resized window is followed), continuation lines indented. While it is shown, what else
    the program prints to the stream (`hold`) goes above it: the block is cleared, the text
    written, and the block drawn again below it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lines: list[str] = []
        self.height = 0  # lines on the screen now (0: not shown)

    def draw(self, lines: list[str]) -> None:
        self.lines = lines
        self._clear()
        self._show()

    def _clear(self) -> None:
        if self.height:
            self.stream.write(f"\033[{self.height}F\033[J")  # to the start of its first line; clear to the end
            self.height = 0

    def _show(self) -> None:
        width = max(20, shutil.get_terminal_size().columns - 1)  # a full line would wrap on some terminals
        shown = [piece for line in self.lines for piece in fold(line, width)]
        self.stream.write("".join(line + "\n" for line in shown))
        self.stream.flush()
        self.height = len(shown)

    def hold(self) -> TextIO:
        """A stream to put in the place of `self.stream` (sys.stdout) while the block is shown."""
        return _Above(self)


class _Above:
    """Writes that go above a `Block`: it is cleared first, and drawn again once a line ends."""

    def __init__(self, block: Block) -> None:
        self._block = block

    def write(self, text: str) -> int:
        block = self._block
        block._clear()
        n = block.stream.write(text)
        if text.endswith("\n") and block.lines:
            block._show()
        return n

    def flush(self) -> None:
        self._block.stream.flush()

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding...: the terminal's
        return getattr(self._block.stream, name)


def fold(line: str, width: int, indent: str = "    ") -> list[str]:
    """`line` in pieces of at most `width` characters, broken at spaces (a word longer than a
    line is cut); the pieces after the first indented by `indent` more than the line."""
    lead = line[:len(line) - len(line.lstrip(" "))]
    pieces: list[str] = []
    current = lead
    for word in line[len(lead):].split(" "):
        if current.strip() and len(current) + 1 + len(word) > width:
            pieces.append(current.rstrip())
            current = lead + indent
        elif current.strip():
            current += " "
        current += word
        while len(current) > width:
            pieces.append(current[:width])
            current = lead + indent + current[width:]
    pieces.append(current.rstrip())
    return pieces


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
