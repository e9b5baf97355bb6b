"""Reading a child process's output until it says it is ready."""

from __future__ import annotations

import selectors
import subprocess
import time


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
