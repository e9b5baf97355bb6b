"""Reading a child process's output until it says it is ready."""

from __future__ import annotations

import selectors
import subprocess
import threading
import time
from pathlib import Path


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float, what: str = "the process") -> str:
    """Lines up to and including the first holding ``marker``; fails with the last lines after ``timeout``."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if marker in line:
                return "".join(seen)
    raise AssertionError(f"{what} never got ready:\n" + "".join(seen[-80:]))


def drain_to(proc: subprocess.Popen[str], path: Path) -> threading.Thread:
    """Keep reading ``proc``'s output into ``path`` once it is ready.

    Nobody reading a child's stdout pipe lets it fill (64 KiB): the child's next log line then blocks, and with
    it every thread that logs (a web process stops answering). The file keeps the output for a failure's story.
    """
    assert proc.stdout is not None
    source = proc.stdout

    def copy() -> None:
        with path.open("a", encoding="utf-8") as sink:
            for line in source:
                sink.write(line)
                sink.flush()
    thread = threading.Thread(target=copy, name=f"drain-{proc.pid}", daemon=True)
    thread.start()
    return thread
