"""The agent process: a Celery worker on ``agent.<host>`` plus the supervise loop.

``run`` owns the process: it builds the one ``BrokerProcesses`` of this host,
adopts the brokers already running, registers the host, and runs the worker in
the main thread while a daemon thread ticks supervision and heartbeats.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from controlplane.agent.processes import BrokerProcesses, BrokerSecrets, NodeSpec, NodeState, TlsFiles

log = logging.getLogger(__name__)

TICK_SECONDS = 0.5
HEARTBEAT_SECONDS = 2.0
FULL_REPORT_SECONDS = 5.0

_processes: BrokerProcesses | None = None
_listen_host = "127.0.0.1"


class WrongAgent(RuntimeError):
    """A task for another host reached this agent (a routing mistake, never acted on)."""


def listen_host() -> str:
    """The address this host's brokers bind (the control plane places by advertised address only)."""
    return _listen_host


def metadata_url() -> str:
    """The metadata store as this host reaches it (the same Postgres as the control plane's)."""
    from django.conf import settings

    return str(settings.DATABASE_URL)


def _secrets(kafka_cluster_id: str, version: int) -> BrokerSecrets:
    """A version of the cluster's secrets, read from the control plane's database as the config is written.

    KeyError (the version is gone: a stale spec) and database errors become ValueError, which backs the broker
    off; the next reconcile sends a spec with the version to use.
    """
    from django.core.exceptions import ObjectDoesNotExist
    from django.db import DatabaseError, close_old_connections

    from controlplane.clusters import internal_secrets

    try:
        return internal_secrets.of_version(kafka_cluster_id, version).broker_secrets
    except (KeyError, ObjectDoesNotExist) as exc:
        raise ValueError(f"no secrets of version {version} for cluster {kafka_cluster_id}") from exc
    except DatabaseError as exc:
        close_old_connections()
        raise ValueError(f"cannot read the cluster's secrets: {exc}") from exc


def _tls_files() -> TlsFiles | None:
    """This host's certificate and key for TLS listeners (the deployment's SLUICE_TLS_* settings), if any."""
    from django.conf import settings

    if not settings.SLUICE_TLS_CERT or not settings.SLUICE_TLS_KEY:
        return None
    return TlsFiles(settings.SLUICE_TLS_CERT, settings.SLUICE_TLS_KEY, settings.SLUICE_TLS_CA)


def processes_for(host: str) -> BrokerProcesses:
    if _processes is None:
        raise WrongAgent("this worker is not an agent: agent tasks must go to an agent.<host> queue")
    if _processes.host != host:
        raise WrongAgent(f"task for host {host!r} reached the agent of {_processes.host!r}")
    return _processes


@dataclass(frozen=True)
class AgentOptions:
    host: str
    rack: str
    listen_host: str
    advertised_host: str
    port_min: int
    port_max: int
    root: Path
    concurrency: int = 4
    stop_brokers_on_exit: bool = False  # `sluice up`: stopping the service stops its brokers


def _on_change(spec: NodeSpec, state: NodeState) -> None:
    from django.db import close_old_connections

    from controlplane.agent.reporting import node_report

    try:
        node_report(spec, state)
    except Exception:  # the periodic full report repairs a lost one
        log.exception("could not report broker %s/%d", spec.cluster, spec.node_id)
        close_old_connections()


def _supervise(processes: BrokerProcesses, options: AgentOptions, stop: threading.Event) -> None:
    import time

    from django.db import close_old_connections

    from controlplane.agent.reporting import agent_heartbeat, nodes_report

    last_beat = last_report = 0.0
    while not stop.wait(TICK_SECONDS):
        try:
            processes.tick()
            now = time.monotonic()
            if now - last_beat >= HEARTBEAT_SECONDS:
                agent_heartbeat(options.host, rack=options.rack, advertised_host=options.advertised_host,
                                port_min=options.port_min, port_max=options.port_max)
                last_beat = now
            if now - last_report >= FULL_REPORT_SECONDS:
                nodes_report(options.host, processes.states())
                last_report = now
        except Exception:
            log.exception("agent %s: supervise pass failed", options.host)
            close_old_connections()


def run(options: AgentOptions) -> int:
    """Run the agent until SIGTERM/SIGINT (Celery's warm shutdown)."""
    global _processes, _listen_host
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    django.setup()
    from controlplane.agent.reporting import agent_register
    from controlplane.celery_app import app

    _listen_host = options.listen_host
    processes = BrokerProcesses(options.root, options.host, on_change=_on_change,
                                secrets=_secrets, tls=_tls_files())
    _processes = processes
    adopted = processes.adopt()
    log.info("agent %s: %d broker(s) on disk", options.host, len(adopted))
    agent_register(host=options.host, rack=options.rack, advertised_host=options.advertised_host,
                   port_min=options.port_min, port_max=options.port_max)
    stop = threading.Event()
    thread = threading.Thread(target=_supervise, args=(processes, options, stop), name="agent-supervise",
                              daemon=True)
    thread.start()
    if options.stop_brokers_on_exit:
        from celery.signals import worker_shutting_down

        def _stop_brokers(**_: object) -> None:
            # At the start of shutdown, not after it: Redis may be going away with us (`sluice up` stopping).
            stop.set()
            processes.stop_all()

        worker_shutting_down.connect(_stop_brokers, weak=False)
    try:
        app.worker_main([
            "worker", "--queues", f"agent.{options.host}", "--pool", "threads",
            "--concurrency", str(options.concurrency), "--hostname", f"agent@{options.host}",
            "--loglevel", os.environ.get("LOG_LEVEL", "INFO"), "--without-gossip", "--without-mingle",
        ])
    finally:
        stop.set()
        thread.join(5)
        from django.db import close_old_connections

        from controlplane.agent.reporting import agent_gone

        try:
            close_old_connections()
            agent_gone(options.host)
        except Exception:  # the database may be going away with us; the heartbeat then simply lapses
            log.warning("agent %s: could not record its stop", options.host)
        if options.stop_brokers_on_exit:
            processes.stop_all()  # already done at shutdown's start; this covers a worker that failed to start
    return 0
