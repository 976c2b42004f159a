"""Small helpers shared by the management commands."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TerminalProgress:
    """A one-line progress bar on stderr; a progress callback `(done, total, message)`."""

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30):
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.started = time.monotonic()
        self._last = 0.0
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if not self.enabled or (done < total and now - self._last < 0.1):
            return
        self._last = now
        filled = int(self.width * done / total) if total else 0
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} ({rate:.1f}/s) ")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
