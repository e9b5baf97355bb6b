"""This process's report sandbox: one per worker process, made on first use.

Owned by the process; the runner (``runner``) takes it for each run, and the worker's signal hooks (``worker``)
start it early and stop it at shutdown. Guarded by a lock: the threads pool runs reports concurrently.
"""

from __future__ import annotations

import threading

from controlplane.reports.sandbox.launcher import Sandbox, hidden_paths

_lock = threading.Lock()
_sandbox: Sandbox | None = None


def sandbox() -> Sandbox:
    """This process's sandbox (made on first use; its runner starts with the first run or ``prestart``)."""
    global _sandbox
    with _lock:
        if _sandbox is None:
            _sandbox = Sandbox(hidden_paths())
        return _sandbox


def take() -> Sandbox | None:
    """Take the sandbox away (at shutdown): the caller stops it; a later ``sandbox()`` makes a new one."""
    global _sandbox
    with _lock:
        box, _sandbox = _sandbox, None
    return box
