"""Reconcile one managed cluster: observe, plan, act, write status.

Called by the ``clusters.reconcile`` task (after every spec change, on every
agent report, and from the periodic resync). A per-cluster Postgres advisory
lock keeps two workers apart; every step is idempotent, so a worker killed at
any point leaves work the next pass finishes. Only ``status`` is written here,
through a queryset update, so a concurrent spec change is never overwritten.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from controlplane.agent.processes import NodeSpec
from controlplane.agent.reporting import STOPPED_AT
from controlplane.clusters import internal_secrets, metadata, provisioning
from controlplane.clusters.credentials import security_status, tls_enabled
from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.clusters.plans import PLAN_LIMITS
from controlplane.clusters.provisioning import (
    AgentView,
    ClusterView,
    Drain,
    DropMetadata,
    Ensure,
    Finalize,
    Forget,
    NoCapacity,
    NodeView,
    Place,
    Repoint,
    Retire,
    Stop,
)
from controlplane.core.status import condition

log = logging.getLogger(__name__)

AGENT_LIVE_SECONDS = 10


@dataclass(frozen=True, slots=True)
class Outcome:
    done: bool  # nothing left to do until the spec or the world changes
    busy: bool = False  # another worker holds the cluster's lock


@contextmanager
def cluster_lock(cluster_id: uuid.UUID) -> Iterator[bool]:
    """A session-level advisory lock on the cluster; yields whether this worker got it."""
    key = int.from_bytes(cluster_id.bytes[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _agent_views() -> dict[str, AgentView]:
    fresh = timezone.now() - timedelta(seconds=AGENT_LIVE_SECONDS)
    ports: dict[str, set[int]] = {}
    for host, port in BrokerNode.objects.values_list("agent_id", "port"):
        ports.setdefault(host, set()).add(port)
    # multi-host: an agent silent past SLUICE_AGENT_LOST_SECONDS (not one that stopped cleanly) is lost.
    lost_before = timezone.now() - timedelta(seconds=settings.SLUICE_AGENT_LOST_SECONDS)
    return {a.host: AgentView(a.host, a.rack, a.last_seen >= fresh, a.port_min, a.port_max,
                              frozenset(ports.get(a.host, ())), len(ports.get(a.host, ())),
                              lost=STOPPED_AT < a.last_seen < lost_before)
            for a in Agent.objects.all()}


def cluster_view(cluster: Cluster, *, resync: bool = False) -> tuple[ClusterView, list[BrokerNode]]:
    nodes = list(BrokerNode.objects.filter(cluster=cluster).select_related("agent"))
    registration = metadata.registration(cluster.kafka_cluster_id) if nodes else metadata.Registration()
    views = tuple(NodeView(n.node_id, n.agent_id, n.port, n.rack, n.removal_requested_at is not None,
                           n.process.get("state"), registration.registered(n.node_id, n.process.get("started")),
                           registration.replicas.get(n.node_id, 0)) for n in nodes)
    return ClusterView(cluster.broker_count, cluster.deletion_requested_at is not None, views,
                       tuple(_agent_views().values()), resync), nodes


def node_spec(cluster: Cluster, node: BrokerNode) -> NodeSpec:
    # listen_host and the metadata URL are the agent's own (they differ per host); it fills them in.
    return NodeSpec(cluster=cluster.kafka_cluster_id, node_id=node.node_id, host=node.agent_id, listen_host="",
                    advertised_host=node.agent.advertised_host, port=node.port, metadata_url="",
                    rack=node.rack or None, secure=True, tls=tls_enabled(), secrets_version=node.secrets_version,
                    max_connections_per_key=PLAN_LIMITS[cluster.plan].max_connections_per_key)


def _send_ensure(cluster: Cluster, node: BrokerNode) -> None:
    from controlplane.agent.tasks import ensure_broker

    ensure_broker.apply_async(args=[asdict(node_spec(cluster, node))], queue=node.agent.queue)


def _send_remove(cluster: Cluster, node: BrokerNode) -> None:
    from controlplane.agent.tasks import remove_broker

    remove_broker.apply_async(args=[node.agent_id, cluster.kafka_cluster_id, node.node_id, True],
                              queue=node.agent.queue)


def _act(cluster: Cluster, actions: list[provisioning.Action], nodes: list[BrokerNode]) -> tuple[bool, str]:
    """Carry out the actions; returns (whether the cluster row was finalized, a capacity problem or '')."""
    by_id = {n.node_id: n for n in nodes}
    problem = ""
    for action in actions:
        if isinstance(action, Place):
            try:
                with transaction.atomic():
                    node = BrokerNode.objects.create(cluster=cluster, node_id=action.node_id, agent_id=action.host,
                                                     port=action.port, rack=action.rack,
                                                     secrets_version=internal_secrets.current_version(cluster))
            except IntegrityError:  # another cluster took the port meanwhile: the next pass places again
                continue
            node = BrokerNode.objects.select_related("agent").get(pk=node.pk)
            _send_ensure(cluster, node)
        elif isinstance(action, Repoint):
            try:
                with transaction.atomic():
                    BrokerNode.objects.filter(pk=by_id[action.node_id].pk).update(port=action.port)
            except IntegrityError:  # the port went to another node meanwhile: the next pass picks again
                continue
            by_id[action.node_id].port = action.port
        elif isinstance(action, Ensure):
            _send_ensure(cluster, by_id[action.node_id])
        elif isinstance(action, Retire):
            BrokerNode.objects.filter(cluster=cluster, node_id__in=action.node_ids,
                                      removal_requested_at__isnull=True).update(removal_requested_at=timezone.now())
        elif isinstance(action, Drain):
            from controlplane.clusters.draining import drain

            drain(cluster, set(action.node_ids))
        elif isinstance(action, Stop):
            _send_remove(cluster, by_id[action.node_id])
        elif isinstance(action, Forget):
            BrokerNode.objects.filter(pk=by_id[action.node_id].pk).delete()
        elif isinstance(action, DropMetadata):
            metadata.drop(cluster.kafka_cluster_id)
        elif isinstance(action, Finalize):
            Cluster.objects.filter(pk=cluster.pk).delete()
            return True, ""
        elif isinstance(action, NoCapacity):
            problem = action.message
    return False, problem


def _merged(topics: dict[str, Any], acls: dict[str, Any]) -> dict[str, Any]:
    """The topic summary with an ACL (or quota) pass's pending changes, errors and drift folded in."""
    merged = dict(topics)
    merged["pending"] = topics.get("pending", 0) + acls.get("pending", 0)
    if acls.get("errors"):
        merged["errors"] = [*topics.get("errors", []), *acls["errors"]]
    if acls.get("drift"):
        merged["drift"] = "; ".join(d for d in (topics.get("drift"), acls["drift"]) if d)
    for key in ("acls", "quotas"):
        if key in acls:
            merged[key] = acls[key]
    return merged


def _bootstrap(nodes: list[BrokerNode]) -> str:
    return ",".join(f"{n.agent.advertised_host}:{n.port}" for n in nodes if n.removal_requested_at is None)


def _status(cluster: Cluster, view: ClusterView, nodes: list[BrokerNode], *, brokers_ready: bool,
            topics: dict[str, Any], problem: str, observed: int) -> dict[str, Any]:
    previous = {c["type"]: c for c in cluster.status.get("conditions", [])}
    active = [n for n in view.nodes if not n.retiring]
    down = [n.node_id for n in active if not n.registered]
    # Every broker had registered before: Ready, or a pass after that saw topics pending (a broker going away
    # fails the topic pass first) or brokers already down. Losing a broker then is BrokersDown and Degraded.
    was_ready = (previous.get("Ready", {}).get("status") == "True"
                 or previous.get("Ready", {}).get("reason") in ("ReconcilingTopics", "BrokersDown"))
    topics_ready = not topics.get("pending")
    ready = brokers_ready and topics_ready
    if view.deleting:
        ready_c = condition("Ready", False, "Deleting", "The cluster's brokers are being stopped and removed.")
    elif problem:
        ready_c = condition("Ready", False, "NoAgentCapacity", problem)
    elif ready:
        ready_c = condition("Ready", True, "Running", f"{len(active)} broker(s) running.")
    elif brokers_ready:
        ready_c = condition("Ready", False, "ReconcilingTopics", f"{topics.get('pending')} topic change(s) pending.")
    elif any(n.retiring for n in view.nodes):
        ready_c = condition("Ready", False, "ScalingIn", "Moving replicas off the brokers being removed.")
    else:
        ready_c = condition("Ready", False, "Provisioning" if not was_ready else "BrokersDown",
                            f"Waiting for broker(s) {down or 'to be placed'} to register.")
    restarting = [n.node_id for n in nodes if n.removal_requested_at is None and n.process.get("restarts")
                  and n.process.get("state") != "Running"]
    under = topics.get("under_replicated_partitions", 0)
    if view.deleting:
        degraded_c = condition("Degraded", False, "Deleting", "The cluster is being deleted.")
    elif (was_ready or restarting) and (down or restarting):
        degraded_c = condition("Degraded", True, "BrokersDown",
                               f"Broker(s) {sorted({*down, *restarting})} are not running; restarting.")
    elif under:
        degraded_c = condition("Degraded", True, "UnderReplicatedPartitions",
                               f"{under} partition(s) have replicas out of sync; they are catching up.")
    elif topics.get("drift"):
        degraded_c = condition("Degraded", True, "TopicDrift", topics["drift"])
    else:
        degraded_c = condition("Degraded", False, "AsExpected", "All brokers are running and in sync.")
    reconciling = not ready or view.deleting
    reconciling_c = condition("Reconciling", reconciling, "InProgress" if reconciling else "Reconciled",
                              "Changes are being applied." if reconciling else "The cluster matches its spec.")
    kept = []
    for new in (ready_c, degraded_c, reconciling_c):
        old = previous.get(new["type"])
        if old and old["status"] == new["status"] and old["reason"] == new["reason"]:
            new["last_transition_time"] = old["last_transition_time"]
        kept.append(new)
    return {
        "observed_generation": observed,
        "conditions": kept,
        "bootstrap_servers": _bootstrap(nodes),
        **security_status(),
        "kafka_cluster_id": cluster.kafka_cluster_id,
        "brokers": [{"node_id": n.node_id, "host": n.agent_id, "port": n.port, "rack": n.rack or None,
                     "registered": v.registered, "retiring": v.retiring, "process": n.process}
                    for n, v in zip(nodes, view.nodes, strict=True)],
        **({"topics": topics} if topics else {}),
    }


def reconcile_cluster(cluster_id: uuid.UUID, *, resync: bool = False) -> Outcome:
    with cluster_lock(cluster_id) as got:
        if not got:
            return Outcome(done=False, busy=True)
        cluster = Cluster.objects.filter(pk=cluster_id).select_related("tenant").first()
        if cluster is None:
            return Outcome(done=True)
        generation = cluster.generation
        view, nodes = cluster_view(cluster, resync=resync)
        actions = provisioning.plan_nodes(view)
        finalized, problem = _act(cluster, actions, nodes)
        if finalized:
            log.info("cluster %s (%s) deleted", cluster.name, cluster.kafka_cluster_id)
            return Outcome(done=True)
        if actions:  # re-observe what the actions changed (new nodes, retirements)
            view, nodes = cluster_view(cluster, resync=False)
        brokers_ready = provisioning.converged(view)
        topics: dict[str, Any] = {}
        credentials: dict[str, Any] = {}
        secrets: dict[str, Any] = {}
        if brokers_ready:
            from controlplane.clusters.credential_reconcile import reconcile_credentials

            credentials = reconcile_credentials(cluster)
            # Before the topics: the brokers hold Kafka-protocol creates to the plan's limit too.
            if metadata.set_partition_limit(cluster.kafka_cluster_id, cluster.max_partitions):
                log.info("cluster %s: partition limit set to %d", cluster.name, cluster.max_partitions)
            from controlplane.streams.reconcile import reconcile_topics

            topics = reconcile_topics(cluster, bootstrap=_bootstrap(nodes), resync=resync)
            from controlplane.streams.acl_reconcile import reconcile_acls

            acls = reconcile_acls(cluster, bootstrap=_bootstrap(nodes))
            topics = _merged(topics, acls)
            from controlplane.streams.quota_reconcile import reconcile_quotas

            topics = _merged(topics, reconcile_quotas(cluster, bootstrap=_bootstrap(nodes)))
            topics = _merged(topics, {k: v for k, v in credentials.items() if k != "keys"})
            from controlplane.clusters.secret_reconcile import reconcile_secrets

            secrets = reconcile_secrets(cluster, view, nodes, in_sync=not topics.get("under_replicated_partitions"),
                                        ensure=lambda node: _send_ensure(cluster, node))
        rebalancing = False
        if brokers_ready and not topics.get("pending"):
            from controlplane.clusters.rebalancing import rebalance_pass

            rebalancing = rebalance_pass(cluster, _bootstrap(nodes))
        # Under-replicated partitions keep the passes coming until they are back in sync (Degraded clears).
        done = (brokers_ready and not topics.get("pending") and not topics.get("under_replicated_partitions")
                and not rebalancing and not view.deleting and not secrets.get("pending"))
        observed = generation if done else cluster.status.get("observed_generation", 0)
        status = _status(cluster, view, nodes, brokers_ready=brokers_ready, topics=topics, problem=problem,
                         observed=observed)
        if credentials:
            status["credentials"] = {"api_keys": credentials["keys"]}
        if secrets:  # the version and whether a rotation runs, never a value
            status["secrets"] = {"version": secrets["version"], "rotating": secrets["rotating"]}
        elif "secrets" in cluster.status:  # a broker down (mid-roll, say): the last word stands
            status["secrets"] = cluster.status["secrets"]
        Cluster.objects.filter(pk=cluster.pk).update(status=status)
        return Outcome(done=done)
