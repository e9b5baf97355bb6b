"""The control plane as a host's agent sees it: what the agent reports (that it is alive, how its brokers
are) and reads (a cluster's secrets, the metadata store), and the agent's entry point :func:`run_agent`.

The agent is the only writer of ``Agent`` rows and of ``BrokerNode.process``;
reconcile only reads them (status and spec never share a write path).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from controlplane.agent import runtime
from controlplane.agent.processes import BrokerSecrets, NodeSpec, NodeState, RemoteStorage, TlsFiles
from controlplane.agent.runtime import AgentOptions
from controlplane.celery_app import app
from controlplane.clusters import internal_secrets
from controlplane.clusters.models import Agent, BrokerNode
from controlplane.clusters.tasks import enqueue_reconcile_by_kafka_id
from controlplane.clusters.tiering import remote_storage

log = logging.getLogger(__name__)


def agent_register(*, host: str, rack: str, advertised_host: str, port_min: int, port_max: int) -> Agent:
    now = timezone.now()
    agent, _ = Agent.objects.update_or_create(host=host, defaults={
        "rack": rack, "advertised_host": advertised_host, "port_min": port_min, "port_max": port_max,
        "last_seen": now, "started_at": now})
    return agent


# ``last_seen`` of an agent that stopped cleanly: never placed on, and never taken for lost (it said goodbye,
# as a restart or an upgrade does, and comes back for its brokers).
STOPPED_AT = datetime(1970, 1, 1, tzinfo=UTC)


def agent_gone(host: str) -> None:
    """A stopping agent says so: placement must not pick it while its last heartbeat still looks fresh."""
    Agent.objects.filter(host=host).update(last_seen=STOPPED_AT)


def agent_heartbeat(host: str, *, rack: str, advertised_host: str, port_min: int, port_max: int) -> None:
    """Renew the registration; re-create it if it went missing (a database restored, a row deleted)."""
    if not Agent.objects.filter(host=host).update(last_seen=timezone.now()):
        agent_register(host=host, rack=rack, advertised_host=advertised_host, port_min=port_min, port_max=port_max)


def node_report(spec: NodeSpec, state: NodeState | None) -> None:
    """Record one node's process state (``None``: removed) and nudge its cluster's reconcile."""
    process = {"state": "Removed"} if state is None else asdict(state)
    updated = BrokerNode.objects.filter(cluster__kafka_cluster_id=spec.cluster, node_id=spec.node_id,
                                         agent_id=spec.host).update(process=process)
    if updated:
        transaction.on_commit(lambda: enqueue_reconcile_by_kafka_id(spec.cluster))


def nodes_report(host: str, states: dict[tuple[str, int], NodeState]) -> None:
    """The periodic full report: every node this agent runs (repairs any lost single report)."""
    for (cluster, node_id), state in states.items():
        BrokerNode.objects.filter(cluster__kafka_cluster_id=cluster, node_id=node_id, agent_id=host) \
            .exclude(process=asdict(state)).update(process=asdict(state))


def cluster_secrets(kafka_cluster_id: str, version: int) -> BrokerSecrets:
    """A version of the cluster's secrets, read from the control plane's database as the config is written.

    KeyError (the version is gone: a stale spec) and database errors become ValueError, which backs the broker
    off; the next reconcile sends a spec with the version to use.
    """
    try:
        return internal_secrets.of_version(kafka_cluster_id, version).broker_secrets
    except (KeyError, ObjectDoesNotExist) as exc:
        raise ValueError(f"no secrets of version {version} for cluster {kafka_cluster_id}") from exc
    except DatabaseError as exc:
        close_old_connections()
        raise ValueError(f"cannot read the cluster's secrets: {exc}") from exc


class DatabaseControlPlane:
    """``runtime.ControlPlane`` over the control plane's database: the agent's reports are row writes."""

    def register(self, options: AgentOptions) -> None:
        agent_register(host=options.host, rack=options.rack, advertised_host=options.advertised_host,
                       port_min=options.port_min, port_max=options.port_max)

    def heartbeat(self, options: AgentOptions) -> None:
        agent_heartbeat(options.host, rack=options.rack, advertised_host=options.advertised_host,
                        port_min=options.port_min, port_max=options.port_max)

    def gone(self, host: str) -> None:
        agent_gone(host)

    def node_report(self, spec: NodeSpec, state: NodeState | None) -> None:
        node_report(spec, state)

    def nodes_report(self, host: str, states: dict[tuple[str, int], NodeState]) -> None:
        nodes_report(host, states)

    def secrets(self, kafka_cluster_id: str, version: int) -> BrokerSecrets:
        return cluster_secrets(kafka_cluster_id, version)

    def metadata_url(self) -> str:
        return str(settings.DATABASE_URL)

    def tls_files(self) -> TlsFiles | None:
        if not settings.SLUICE_TLS_CERT or not settings.SLUICE_TLS_KEY:
            return None
        return TlsFiles(settings.SLUICE_TLS_CERT, settings.SLUICE_TLS_KEY, settings.SLUICE_TLS_CA)

    def remote_storage(self) -> RemoteStorage | None:
        return remote_storage()

    def release_connections(self) -> None:
        close_old_connections()


def run_agent(options: AgentOptions) -> int:
    """``sluice agent``: run this host's agent against the control plane (Django set up by the caller)."""
    return runtime.run(options, DatabaseControlPlane(), app)
