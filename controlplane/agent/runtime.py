"""The agent process: a Celery worker on ``agent.<host>`` plus the supervise loop.

``run`` owns the process: it builds the one ``BrokerProcesses`` of this host,
adopts the brokers already running, registers the host, and runs the worker in
the main thread while a daemon thread ticks supervision and heartbeats. The agent
is the control plane's bottom layer: what it reports and reads goes through the
``ControlPlane`` it is given (``controlplane.clusters.agents``), and orders reach it
as tasks sent by name.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from celery import Celery
from celery.signals import worker_shutting_down

from controlplane.agent.processes import (
    BrokerProcesses,
    BrokerSecrets,
    NodeSpec,
    NodeState,
    RemoteStorage,
    TlsFiles,
)

log = logging.getLogger(__name__)

TICK_SECONDS = 0.5
HEARTBEAT_SECONDS = 2.0
FULL_REPORT_SECONDS = 5.0

_processes: BrokerProcesses | None = None
_control_plane: ControlPlane | None = None
_listen_host = "127.0.0.1"


class WrongAgent(RuntimeError):
    """A task for another host reached this agent (a routing mistake, never acted on)."""


class ControlPlane(Protocol):
    """What the agent tells the control plane and reads from it, given to :func:`run` by the layer above
    (``controlplane.clusters.agents``): the agent sits below the control plane and never imports it."""

    def register(self, options: AgentOptions) -> None: ...

    def heartbeat(self, options: AgentOptions) -> None: ...

    def gone(self, host: str) -> None: ...

    def node_report(self, spec: NodeSpec, state: NodeState | None) -> None: ...

    def nodes_report(self, host: str, states: dict[tuple[str, int], NodeState]) -> None: ...

    def secrets(self, kafka_cluster_id: str, version: int) -> BrokerSecrets:
        """A version of the cluster's secrets; ValueError when it cannot be read (the broker backs off)."""
        ...

    def metadata_url(self) -> str:
        """The metadata store as this host reaches it (the same Postgres as the control plane's)."""
        ...

    def tls_files(self) -> TlsFiles | None:
        """This host's certificate and key for TLS listeners, if the deployment has them."""
        ...

    def remote_storage(self) -> RemoteStorage | None:
        """The deployment's object store for tiered storage, if it has one."""
        ...

    def release_connections(self) -> None:
        """Drop database connections a failure may have broken (the next call opens fresh ones)."""
        ...


def listen_host() -> str:
    """The address this host's brokers bind (the control plane places by advertised address only)."""
    return _listen_host


def control_plane() -> ControlPlane:
    if _control_plane is None:
        raise WrongAgent("this worker is not an agent: agent tasks must go to an agent.<host> queue")
    return _control_plane


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
    try:
        control_plane().node_report(spec, state)
    except Exception:  # the periodic full report repairs a lost one
        log.exception("could not report broker %s/%d", spec.cluster, spec.node_id)
        control_plane().release_connections()


def _supervise(processes: BrokerProcesses, options: AgentOptions, stop: threading.Event) -> None:
    reports = control_plane()
    last_beat = last_report = 0.0
    while not stop.wait(TICK_SECONDS):
        try:
            processes.tick()
            now = time.monotonic()
            if now - last_beat >= HEARTBEAT_SECONDS:
                reports.heartbeat(options)
                last_beat = now
            if now - last_report >= FULL_REPORT_SECONDS:
                reports.nodes_report(options.host, processes.states())
                last_report = now
        except Exception:
            log.exception("agent %s: supervise pass failed", options.host)
            reports.release_connections()


def run(options: AgentOptions, plane: ControlPlane, app: Celery) -> int:
    """Run the agent until SIGTERM/SIGINT (Celery's warm shutdown): ``app`` is the control plane's Celery
    application, whose ``agent.<host>`` queue this worker serves."""
    global _processes, _listen_host, _control_plane
    _control_plane = plane
    _listen_host = options.listen_host
    processes = BrokerProcesses(options.root, options.host, on_change=_on_change,
                                secrets=plane.secrets, tls=plane.tls_files(), remote_storage=plane.remote_storage())
    _processes = processes
    adopted = processes.adopt()
    log.info("agent %s: %d broker(s) on disk", options.host, len(adopted))
    plane.register(options)
    stop = threading.Event()
    thread = threading.Thread(target=_supervise, args=(processes, options, stop), name="agent-supervise",
                              daemon=True)
    thread.start()
    if options.stop_brokers_on_exit:
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
        try:
            plane.release_connections()
            plane.gone(options.host)
        except Exception:  # the database may be going away with us; the heartbeat then simply lapses
            log.warning("agent %s: could not record its stop", options.host)
        if options.stop_brokers_on_exit:
            processes.stop_all()  # already done at shutdown's start; this covers a worker that failed to start
    return 0
