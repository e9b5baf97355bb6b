"""Reading a child process's output until it says it is ready."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from pathlib import Path


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float, what: str = "the process") -> str:
    """Lines up to and including the first holding ``marker``; fails with the last lines after ``timeout``.

    A thread reads the lines, not ``select`` on the pipe: the stream is buffered, so two lines that arrive in one
    read (a busy machine) leave the second in the buffer, where ``select`` never sees it. The thread stops at the
    marker, so what follows stays in the stream for the next reader."""
    assert proc.stdout is not None
    source = proc.stdout
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in iter(source.readline, ""):
            lines.put(line)
            if marker in line:
                return
        lines.put(None)  # the end of the output
    threading.Thread(target=pump, name=f"read-until-{proc.pid}", daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
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
