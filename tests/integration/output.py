"""A child process's output, read as it is written (a pipe nobody reads fills and blocks the
writer), and waited on line by line: what the tests of `ykbus up` and of the services read."""

from __future__ import annotations

import re
import subprocess
import threading
import time


class Output:
    """The lines `proc` (stdout a text pipe) writes, read by a thread of their own."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def search(self, pattern: str, timeout: float) -> re.Match:
        """The first match of `pattern` in a line, waiting up to `timeout` s for it; fails
        with the output's tail when it does not come (or the process's output ends)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    found = re.search(pattern, line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                assert left > 0 and self._reader.is_alive(), f"no {pattern!r}:\n{''.join(self.lines)[-3000:]}"
                self._changed.wait(min(left, 1.0))
