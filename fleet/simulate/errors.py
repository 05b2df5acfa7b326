"""Input errors that point at the offending line, so a user can fix their file without guessing."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """A trace or fleet file cannot be read; the message starts with `file:line:`."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")
