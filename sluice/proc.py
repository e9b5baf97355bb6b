"""Process helpers shared by the supervisor and the embedded servers."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """``preexec_fn``: the child gets ``sig`` when its parent dies (Linux; elsewhere a no-op).

    This is what keeps a SIGKILLed supervisor from leaving orphans behind.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig)
    except OSError:
        pass


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from ``/proc/<pid>/stat``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of ``pid``, as pid -> start time (so a reused pid is never mistaken for one)."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            parents.setdefault(stat[0], []).append((int(entry), stat[1]))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child, started in parents.get(todo.pop(), []):
            if child not in found:
                found[child] = started
                todo.append(child)
    return found


def _same(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == started and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return True
    return data[data.rindex(b")") + 2:].split()[0] == b"Z"


def kill_same(processes: dict[int, int], sig: int = signal.SIGKILL, wait: float = 2.0) -> None:
    """Send ``sig`` to each process still running with the start time it was seen with, then wait up to ``wait``
    seconds for them to be gone (a signal is delivered, not obeyed, when ``kill`` returns)."""
    for pid, started in processes.items():
        if _same(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
    deadline = time.monotonic() + wait
    while any(_same(pid, started) for pid, started in processes.items()) and time.monotonic() < deadline:
        time.sleep(0.02)
