"""The control plane's processes for tests: the one harness behind every stack fixture.

``Process`` is one child (a Celery worker, an agent, beat, ``sluice up``) in a session of its own, logging to a
file, stopped by its process group; ``celery_worker`` and ``celery_beat`` build the control plane's workers on a
queue of the test's own; ``database_url`` names a database on the session's Postgres server; ``kill_tree`` ends
a process and everything it started. The fixtures built on them: ``stack`` (tests/controlplane/managed: a worker
and two agents on the test database), ``reports_stack`` (tests/controlplane/reports: a reports worker and a
secured broker) and ``rest_stack`` (tests/kafkarest: ``sluice up`` on a database of its own).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil

ROOT = Path(__file__).resolve().parents[2]


def database_url(name: str) -> str:
    """The session's Postgres server (``DATABASE_URL``), database ``name``."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{name}"))


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process it started, and wait for them."""
    with contextlib.suppress(psutil.NoSuchProcess):
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=30)


@dataclass
class Process:
    """One child process of a test, in its own session (so its group can be signalled), logging to ``log``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def send(self, sig: int) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.send(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.send(signal.SIGKILL)
            self.proc.wait()

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


def celery_worker(name: str, queue: str, env: dict[str, str], log: Path, *, concurrency: int = 4) -> Process:
    """A control-plane Celery worker (threads pool) serving ``queue`` only (not started)."""
    return Process(name, [sys.executable, "-m", "celery", "-A", "controlplane.celery_app", "worker",
                          "--pool", "threads", "--concurrency", str(concurrency), "--queues", queue,
                          "--hostname", f"{queue}@%h", "--loglevel", "INFO", "--without-gossip",
                          "--without-mingle"], env, log)


def celery_beat(env: dict[str, str], log: Path) -> Process:
    """A real ``celery beat`` on the database scheduler (not started)."""
    return Process("beat", [sys.executable, "-m", "celery", "-A", "controlplane.celery_app", "beat",
                            "--loglevel", "INFO", "--pidfile=", "--max-interval", "1",
                            "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler"], env, log)
