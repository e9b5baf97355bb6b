"""What ``sluice up`` shows on its terminal: progress lines, and of its children's logs only the errors.

The children's full output goes to ``var/log/<name>.log``; the terminal is for what needs the user.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

# A log record at ERROR or worse in the formats our children write: Python logging's "%(levelname)s" (Django,
# sluice), Celery's "[time: ERROR/MainProcess]", uvicorn's "ERROR:    ". Not a message that merely says "error".
_ERROR_RECORD = re.compile(r"(^|[\s\[:])(ERROR|CRITICAL|FATAL)([/:\]]|\s)")
_TRACEBACK = "Traceback (most recent call last)"


def is_error_line(line: str) -> bool:
    """Whether a child's output line starts an error worth a line on the terminal (a traceback's own lines are
    part of the record before them, or of a bare ``Traceback`` line: one summary each)."""
    return line.startswith(_TRACEBACK) or bool(_ERROR_RECORD.search(line[:120]))


def error_summary(name: str, line: str, log_path: str, width: int = 160) -> str:
    """One terminal line for an error in child ``name``'s log."""
    text = " ".join(line.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"sluice: {name}: {text}  (full log: {log_path})"


class Console:
    """The terminal, shared by threads: whole lines, and a progress line ("starting web … done") that other lines
    never split (one arriving meanwhile ends the open line first)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._open = False

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stdout

    def begin(self, text: str) -> None:
        with self._lock:
            self._close()
            self.stream.write(f"{text} … ")
            self.stream.flush()
            self._open = True

    def end(self, text: str) -> None:
        with self._lock:
            self.stream.write(f"{text}\n" if self._open else f"  … {text}\n")
            self.stream.flush()
            self._open = False

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        """A progress line around a block: "text … done", or "failed" if it raises."""
        self.begin(text)
        try:
            yield
        except BaseException:
            self.end("failed")
            raise
        self.end("done")

    def line(self, text: str) -> None:
        with self._lock:
            self._close()
            self.stream.write(f"{text}\n")
            self.stream.flush()

    def raw(self, text: str) -> None:
        """A child's output line as it is (``--verbose``)."""
        with self._lock:
            self._close()
            self.stream.write(text if text.endswith("\n") else text + "\n")
            self.stream.flush()

    def _close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False


class ConsoleHandler(logging.Handler):
    """Log records onto the console's terminal, as whole lines (a progress line is ended first, never split)."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.line(self.format(record))
        except Exception:  # logging must never take the caller down
            self.handleError(record)
