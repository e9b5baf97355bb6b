"""A real managed-cluster stack: a Celery worker and two agents ("hosts") on this machine.

Started once per module on the session's test database (tests here use
``transactional_db`` so the worker and the agents see what the test writes), on
queues and port pools of their own, and stopped by pid. Each agent is a real
``sluice agent`` whose brokers are real ``sluice broker`` processes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from sluice.embedded import free_port_range
from tests.support.polling import wait_until
from tests.support.stack import Process, celery_worker, database_url

pytestmark = pytest.mark.xdist_group("heavy")


@dataclass
class Stack:
    """The worker and agents; ``hosts`` maps each agent's host name to its process."""

    env: dict[str, str]
    root: Path
    queue: str
    worker: Process
    agents: dict[str, Process] = field(default_factory=dict)
    pools: dict[str, tuple[int, int]] = field(default_factory=dict)

    def agent_argv(self, host: str, rack: str) -> list[str]:
        first, last = self.pools[host]
        return [sys.executable, "-m", "sluice", "agent", "--host", host, "--rack", rack, "--ports", f"{first}-{last}",
                "--root", str(self.root / "clusters"), "--concurrency", "4"]

    def broker_pids(self) -> list[int]:
        """Every broker process started from this stack's cluster directories."""
        marker = str(self.root / "clusters")
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(marker in part for part in cmdline) and "broker" in cmdline:
                found.append(proc.info["pid"])
        return found

    def logs(self) -> str:
        parts = [f"--- {p.name} ---\n{p.tail()}" for p in [self.worker, *self.agents.values()]]
        for log in sorted((self.root / "clusters").glob("*/*/broker.log")):
            lines = log.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"--- broker {log.parent.parent.name}/{log.parent.name} ---\n" + "\n".join(lines))
        return "\n".join(parts)


def wait_for(check: Callable[[], Any], timeout: float = 60, what: str = "condition",
             stack: Stack | None = None, detail: Callable[[], object] | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; on failure the stack's broker logs are shown too."""
    def described() -> object:
        return "\n".join(filter(None, [f"state: {detail()}" if detail else "", stack.logs() if stack else ""]))
    return wait_until(check, what, timeout, interval=0.1, detail=described if detail or stack else None)


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.conf import settings
    from django.db import connection

    from controlplane.celery_app import app

    with django_db_blocker.unblock():
        db_name = connection.settings_dict["NAME"]
    root = Path(tempfile.mkdtemp(prefix="sluice-managed-"))
    queue = f"test-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "DATABASE_URL": database_url(db_name), "CELERY_DEFAULT_QUEUE": queue,
           "SLUICE_VAR_DIR": str(root / "var"), "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO",
           # One deployment, one SECRET_KEY (sessions, signed values); no cluster's secrets follow from it.
           "SECRET_KEY": settings.SECRET_KEY}
    worker = celery_worker("worker", queue, env, root / "worker.log")
    suffix = uuid.uuid4().hex[:6]
    stack = Stack(env, root, queue, worker)
    first, _ = free_port_range(16)
    for i, (host, rack) in enumerate(((f"h1-{suffix}", "r1"), (f"h2-{suffix}", "r2"))):
        stack.pools[host] = (first + 8 * i, first + 8 * i + 7)
        stack.agents[host] = Process(f"agent {host}", stack.agent_argv(host, rack), env, root / f"{host}.log")
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    worker.start()
    for agent in stack.agents.values():
        agent.start()
    try:
        yield stack
    finally:
        app.conf.task_default_queue = previous
        for proc in [*stack.agents.values(), worker]:
            proc.stop()
        for pid in stack.broker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
