"""A managed-cluster stack spread over dataplane hosts that are network namespaces (tests/support/netns.py).

The control plane (the session's Postgres and Redis, a Celery worker, this test process) stays in the root
namespace; each host runs a real ``sluice agent`` in its own namespace, with its own name, rack, address and
broker root, and reaches Postgres and Redis at the bridge address, as an agent on another machine would. Its
brokers bind and advertise the host's address; clients here reach them over the bridge.

Reconcile is nudged the way beat would (``clusters.resync_all``): losing a host changes nothing the agents
report, only the passing of time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest

from tests.support.netns import Host, Network, network
from tests.support.polling import wait_until
from tests.support.stack import Process, celery_worker, database_url

ROOT = Path(__file__).resolve().parents[2]
PORTS = (19092, 19099)  # every host has its own address, so every host can use the same pool
RESYNC_EVERY = 2.0


@dataclass
class Agent:
    name: str
    rack: str
    host: Host
    log: Path


@dataclass
class MultiHostStack:
    net: Network
    root: Path
    queue: str
    worker: Process
    agent_env: dict[str, str]
    agents: dict[str, Agent] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    _last_resync: float = 0.0

    def start_agent(self, name: str) -> None:
        """Start the agent of host ``name`` in its namespace (brokers bind and advertise its address)."""
        agent = self.agents[name]
        address = agent.host.address
        (self.root / name).mkdir(mode=0o700, exist_ok=True)
        agent.host.start([sys.executable, "-m", "sluice", "agent", "--host", agent.name, "--rack", agent.rack,
                          "--ports", f"{PORTS[0]}-{PORTS[1]}", "--listen-host", address,
                          "--advertise-host", address, "--root", str(self.root / name / "clusters"),
                          "--concurrency", "4"], env=self.agent_env, log=agent.log, cwd=ROOT)
        self.started.add(name)

    def lose(self, name: str) -> None:
        """Host ``name`` is gone for good (every process in it killed, its link down)."""
        self.agents[name].host.lose()
        self.lost.add(name)

    def live(self) -> list[str]:
        """Hosts whose agent was started and not lost."""
        return sorted(self.started - self.lost)

    def address(self, name: str) -> str:
        return self.agents[name].host.address

    def wait_registered(self) -> None:
        """Every live host's agent registered and heartbeating: placement sees them all.

        A transactional test's flush deletes the Agent rows; an agent re-creates its row on its next heartbeat,
        and a cluster created before that would be placed on fewer hosts.
        """
        from datetime import timedelta

        from django.utils import timezone

        from controlplane.clusters.models import Agent as AgentRow

        names = {self.agents[short].name for short in self.live()}

        def registered() -> bool:
            fresh = timezone.now() - timedelta(seconds=5)
            return set(AgentRow.objects.filter(host__in=names, last_seen__gte=fresh)
                       .values_list("host", flat=True)) == names
        self.wait(registered, 60, f"agents {sorted(names)} registered")

    def nudge(self) -> None:
        """What beat does every few seconds: a resync pass over every cluster (at most every RESYNC_EVERY s)."""
        from controlplane.clusters.tasks import resync_all

        if time.monotonic() - self._last_resync >= RESYNC_EVERY:
            self._last_resync = time.monotonic()
            resync_all.delay()

    def logs(self) -> str:
        parts = [f"--- worker ---\n{self.worker.tail()}"]
        for agent in self.agents.values():
            lines = agent.log.read_text(errors="replace").splitlines()[-40:] if agent.log.exists() else []
            parts.append(f"--- agent {agent.name} ({agent.host.address}) ---\n" + "\n".join(lines))
        for log in sorted(self.root.glob("*/clusters/*/*/broker.log")):
            lines = log.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"--- broker {log.parts[-5]} node {log.parent.name} ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def wait(self, check: Callable[[], Any], timeout: float, what: str,
             detail: Callable[[], object] | None = None) -> Any:
        """Poll ``check`` (nudging reconcile meanwhile); on failure show ``detail()`` and every log."""
        def checked() -> Any:
            self.nudge()
            return check()

        def described() -> object:
            return "\n".join(filter(None, [f"state: {detail()}" if detail else "", self.logs()]))
        return wait_until(checked, what, timeout, interval=0.1, detail=described)


def _relayed_database_url(net: Network, url: str, name: str) -> str:
    """The session database as a host reaches it: over TCP at the bridge address, relayed to its socket."""
    parts = urlsplit(url)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    port = parts.port or 5432
    target: str | tuple[str, int] = (f"{socket_dir}/.s.PGSQL.{port}" if socket_dir.startswith("/")
                                     else (parts.hostname or "127.0.0.1", port))
    host, relay_port = net.relay(target)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}{host}:{relay_port}", path=f"/{name}", query=""))


def _relayed_redis_url(net: Network, url: str) -> str:
    parts = urlsplit(url)
    host, relay_port = net.relay((parts.hostname or "127.0.0.1", parts.port or 6379))
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}{host}:{relay_port}"))


@contextlib.contextmanager
def multihost_stack(django_db_blocker: Any, hosts: dict[str, str], *, lost_seconds: float = 300,
                    start: tuple[str, ...] | None = None) -> Iterator[MultiHostStack]:
    """``hosts``: short name -> rack; the agents of ``start`` (default: all) are started at once.

    Host names get a suffix of this stack's own: agent queues live in the session's shared Redis.
    """
    from django.conf import settings
    from django.db import connection

    from controlplane.celery_app import app

    with django_db_blocker.unblock():
        db_name = connection.settings_dict["NAME"]
    suffix = uuid.uuid4().hex[:6]
    names = {short: f"{short}-{suffix}" for short in hosts}
    queue = f"test-{uuid.uuid4().hex[:10]}"
    previous = app.conf.task_default_queue
    # Left in this order: the network (every process in it) goes first, then the directories they wrote.
    with tempfile.TemporaryDirectory(prefix="sluice-multihost-", ignore_cleanup_errors=True) as tmp, \
            network(list(names.values())) as net:
        root = Path(tmp)
        common = {**os.environ, "CELERY_DEFAULT_QUEUE": queue, "SLUICE_VAR_DIR": str(root / "var"),
                  "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO", "SECRET_KEY": settings.SECRET_KEY,
                  "SLUICE_AGENT_LOST_SECONDS": str(lost_seconds), "PYTHONPATH": str(ROOT)}
        worker = celery_worker("worker", queue, {**common, "DATABASE_URL": database_url(db_name)},
                               root / "worker.log")
        agent_env = {**common, "DATABASE_URL": _relayed_database_url(net, os.environ["DATABASE_URL"], db_name),
                     "REDIS_URL": _relayed_redis_url(net, os.environ["REDIS_URL"])}
        stack = MultiHostStack(net, root, queue, worker, agent_env)
        for short, rack in hosts.items():
            stack.agents[short] = Agent(names[short], rack, net.hosts[names[short]], root / f"{short}.log")
        app.conf.task_default_queue = queue
        try:
            worker.start()
            for short in start if start is not None else tuple(hosts):
                stack.start_agent(short)
            yield stack
        finally:
            app.conf.task_default_queue = previous
            worker.stop()
            net.close()  # every agent and broker, by pid, in every namespace


@pytest.fixture(autouse=True)
def _db_access(transactional_db: None) -> None:
    """The worker and the agents see what a test writes: no test transaction around it."""
