"""The cluster's ``status``, built in one place from one pass's results.

Conditions follow Kubernetes' rules (``core.status``): a condition's ``last_transition_time`` moves only when
its status or reason changes. Each resource step reports under its own key (``credentials``, ``topics``,
``acls``, ``quotas``, ``secrets``); docs/reference/cluster-status.md is the reference.
"""

from __future__ import annotations

from typing import Any

from controlplane.clusters.credentials import security_status
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.core.status import condition
from controlplane.reconcile.results import (
    AclsResult,
    CredentialsResult,
    PassResults,
    QuotasResult,
    StepResult,
    TopicsResult,
)

# How a pending change is named in the Ready condition's message.
_CHANGE_NAMES = {"credentials": "credential", "topics": "topic", "acls": "ACL", "quotas": "quota"}


def _common(result: StepResult) -> dict[str, Any]:
    fields: dict[str, Any] = {"pending": result.pending}
    if result.errors:
        fields["errors"] = list(result.errors)
    if result.drift:
        fields["drift"] = result.drift
    return fields


def _credentials(result: CredentialsResult) -> dict[str, Any]:
    return {"api_keys": result.keys, **_common(result)}


def _topics(result: TopicsResult) -> dict[str, Any]:
    return {"count": result.count, "under_replicated_partitions": result.under_replicated, **_common(result)}


def _acls(result: AclsResult) -> dict[str, Any]:
    fields = {"bindings": result.bindings, "from_roles": result.from_roles, "enforced": result.enforced,
              **_common(result)}
    return {**fields, "message": result.message} if result.message else fields


def _quotas(result: QuotasResult) -> dict[str, Any]:
    fields = {"entities": result.entities, "applied": result.applied, **_common(result)}
    return {**fields, "message": result.message} if result.message else fields


def pending_message(results: PassResults) -> str:
    parts = [f"{result.pending} {_CHANGE_NAMES[name]}" for name, result in results.changes() if result.pending]
    return f"{', '.join(parts)} change(s) pending."


def _conditions(cluster: Cluster, results: PassResults, nodes: list[BrokerNode]) -> list[dict[str, Any]]:
    view = results.nodes.view
    previous = {c["type"]: c for c in cluster.status.get("conditions", [])}
    active = [n for n in view.nodes if not n.retiring]
    down = [n.node_id for n in active if not n.registered]
    # Every broker had registered before: Ready, or a pass after that saw changes pending (a broker going away
    # fails the topic pass first) or brokers already down. Losing a broker then is BrokersDown and Degraded.
    was_ready = (previous.get("Ready", {}).get("status") == "True"
                 or previous.get("Ready", {}).get("reason") in ("ApplyingChanges", "BrokersDown"))
    brokers_ready = results.nodes.brokers_ready
    ready = brokers_ready and not results.pending
    if view.deleting:
        ready_c = condition("Ready", False, "Deleting", "The cluster's brokers are being stopped and removed.")
    elif results.nodes.problem:
        ready_c = condition("Ready", False, "NoAgentCapacity", results.nodes.problem)
    elif ready:
        ready_c = condition("Ready", True, "Running", f"{len(active)} broker(s) running.")
    elif brokers_ready:
        ready_c = condition("Ready", False, "ApplyingChanges", pending_message(results))
    elif any(n.retiring for n in view.nodes):
        ready_c = condition("Ready", False, "ScalingIn", "Moving replicas off the brokers being removed.")
    else:
        ready_c = condition("Ready", False, "Provisioning" if not was_ready else "BrokersDown",
                            f"Waiting for broker(s) {down or 'to be placed'} to register.")
    restarting = [n.node_id for n in nodes if n.removal_requested_at is None and n.process.get("restarts")
                  and n.process.get("state") != "Running"]
    under = results.topics.under_replicated if results.topics else 0
    drift = "; ".join(result.drift for _, result in results.changes() if result.drift)
    if view.deleting:
        degraded_c = condition("Degraded", False, "Deleting", "The cluster is being deleted.")
    elif (was_ready or restarting) and (down or restarting):
        degraded_c = condition("Degraded", True, "BrokersDown",
                               f"Broker(s) {sorted({*down, *restarting})} are not running; restarting.")
    elif under:
        degraded_c = condition("Degraded", True, "UnderReplicatedPartitions",
                               f"{under} partition(s) have replicas out of sync; they are catching up.")
    elif drift:
        degraded_c = condition("Degraded", True, "Drift", drift)
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
    return kept


def cluster_status(cluster: Cluster, results: PassResults, nodes: list[BrokerNode], *,
                   observed_generation: int) -> dict[str, Any]:
    view = results.nodes.view
    status: dict[str, Any] = {
        "observed_generation": observed_generation,
        "conditions": _conditions(cluster, results, nodes),
        "bootstrap_servers": ",".join(f"{n.agent.advertised_host}:{n.port}" for n in nodes
                                      if n.removal_requested_at is None),
        **security_status(),
        "kafka_cluster_id": cluster.kafka_cluster_id,
        "brokers": [{"node_id": n.node_id, "host": n.agent_id, "port": n.port, "rack": n.rack or None,
                     "registered": v.registered, "retiring": v.retiring, "process": n.process}
                    for n, v in zip(nodes, view.nodes, strict=True)],
    }
    if results.credentials is not None:
        status["credentials"] = _credentials(results.credentials)
    if results.topics is not None:
        status["topics"] = _topics(results.topics)
    if results.acls is not None:
        status["acls"] = _acls(results.acls)
    if results.quotas is not None:
        status["quotas"] = _quotas(results.quotas)
    if results.secrets is not None:  # the version and whether a rotation runs, never a value
        status["secrets"] = {"version": results.secrets.version, "rotating": results.secrets.rotating}
    elif "secrets" in cluster.status:  # a broker down (mid-roll, say): the last word stands
        status["secrets"] = cluster.status["secrets"]
    if results.rebalance is not None and results.rebalance.errors:
        status["rebalance"] = {"errors": list(results.rebalance.errors)}
    return status
