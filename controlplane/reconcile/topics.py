"""The topic step: make the cluster's topics the control plane's, and adopt those Kafka clients made.

Observes the pass's topic snapshot and one config description, plans with the pure :func:`plan_topics`,
applies with batched admin calls, and writes each topic's status (never its spec).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import IntegrityError, transaction

from controlplane.clusters.models import Cluster
from controlplane.core.status import condition
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.results import TopicsResult
from controlplane.reconcile.topic_plan import (
    AddPartitions,
    Adopt,
    AlterConfigs,
    CreateTopic,
    DeleteTopic,
    DesiredTopic,
    Drift,
    Forget,
    ObservedTopic,
    TopicAction,
    plan_topics,
)
from controlplane.resources.models import Topic
from dataplane.client.admin import AdminError, ClusterAdmin, NewTopic, TopicInfo, overrides
from dataplane.naming import collision_key

log = logging.getLogger(__name__)


def _reason(error: AdminError) -> str:
    """Kafka's error name as a CamelCase condition reason: INVALID_CONFIG -> InvalidConfig."""
    return "".join(part.capitalize() for part in re.split(r"[_\W]+", error.code) if part) or "AdminError"


def observe_topics(admin: ClusterAdmin, infos: dict[str, TopicInfo]) -> tuple[dict[str, ObservedTopic], int]:
    """The cluster's topics (internal ones aside) and how many partitions are under-replicated."""
    infos = {name: info for name, info in infos.items() if not info.internal}
    configs = admin.topic_configs(list(infos)) if infos else {}
    under = sum(1 for info in infos.values() for p in info.partitions if p.under_replicated or p.offline)
    return {name: ObservedTopic(name, len(info.partitions),
                                len(info.partitions[0].replicas) if info.partitions else 0,
                                {k: e.value for k, e in overrides(configs.get(name, {})).items()
                                 if e.value is not None})
            for name, info in infos.items()}, under


def desired_topic(row: Topic) -> DesiredTopic:
    return DesiredTopic(row.name, row.partitions, row.replication_factor, dict(row.configs), managed=row.managed,
                        deleting=row.deletion_requested_at is not None,
                        applied=row.status.get("observed_generation") == row.generation)


def _ready_status(row: Topic, drift: str = "") -> dict[str, Any]:
    conditions = [condition("Ready", True, "Created" if row.managed else "Observed",
                            "The topic matches its spec." if row.managed else "Created by a Kafka client."),
                  condition("Reconciling", False, "Reconciled", "Nothing to do.")]
    if drift:
        conditions.append(condition("Degraded", True, "Drift", drift))
    return {"observed_generation": row.generation, "conditions": conditions}


def _failed_status(row: Topic, error: AdminError) -> dict[str, Any]:
    return {"observed_generation": row.status.get("observed_generation", 0), "conditions": [
        condition("Ready", False, _reason(error), error.message),
        condition("Reconciling", True, "Retrying", "The cluster refused the change; retrying.")]}


def _adopt(cluster: Cluster, rows: dict[str, Topic], observed: ObservedTopic) -> None:
    row = rows.get(observed.name)
    if row is not None:
        Topic.objects.filter(pk=row.pk).update(partitions=observed.partitions,
                                               replication_factor=observed.replication_factor,
                                               configs=dict(observed.configs))
        return
    row = Topic(cluster=cluster, name=observed.name, collision_key=collision_key(observed.name),
                partitions=observed.partitions, replication_factor=observed.replication_factor,
                configs=dict(observed.configs), managed=False)
    row.status = _ready_status(row)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:  # a spec row was created meanwhile; the next pass sees both sides
        pass


def run(ctx: PassContext) -> TopicsResult:
    try:
        observed, under_replicated = observe_topics(ctx.admin(), ctx.topics())
        rows = {t.name: t for t in Topic.objects.filter(cluster=ctx.cluster)}
        actions = plan_topics([desired_topic(r) for r in rows.values()], observed,
                              correct_drift=ctx.cluster.drift_policy == "correct")
        result = apply(ctx, rows, actions)
    except AdminError as exc:
        log.warning("cluster %s: topic reconcile failed: %s", ctx.cluster.kafka_cluster_id, exc)
        return TopicsResult(pending=1, errors=(f"topics: {exc.code}: {exc.message}",))
    return TopicsResult(pending=result.pending, errors=result.errors, drift=result.drift, count=result.count,
                        under_replicated=under_replicated)


def apply(ctx: PassContext, rows: dict[str, Topic], actions: list[TopicAction]) -> TopicsResult:
    cluster, admin = ctx.cluster, ctx.admin()
    failed: dict[str, AdminError] = {}
    drift: dict[str, str] = {}
    changed = 0
    creates = [a for a in actions if isinstance(a, CreateTopic)]
    if creates:
        results = admin.create_topics([NewTopic(a.name, a.partitions, a.replication_factor, dict(a.configs))
                                       for a in creates])
        for name, error in results.items():
            if error is not None and error.code != "TOPIC_ALREADY_EXISTS":
                failed[name] = error
        changed += len(creates)
    deletes = [a.name for a in actions if isinstance(a, DeleteTopic)]
    if deletes:
        for name, error in admin.delete_topics(deletes).items():
            if error is not None and error.code != "UNKNOWN_TOPIC_OR_PART":
                failed[name] = error
        changed += len(deletes)
    for action in actions:
        if isinstance(action, AddPartitions | AlterConfigs):
            try:
                if isinstance(action, AddPartitions):
                    admin.create_partitions(action.name, action.total)
                else:
                    admin.alter_topic_configs(action.name, action.set, action.delete)
                changed += 1
            except AdminError as exc:
                failed[action.name] = exc
        elif isinstance(action, Forget):
            Topic.objects.filter(pk=rows[action.name].pk).delete()
            changed += 1
        elif isinstance(action, Adopt):
            _adopt(cluster, rows, action.topic)
            changed += 1
        elif isinstance(action, Drift):
            drift[action.name] = action.detail
    acted_on = {a.topic.name if isinstance(a, Adopt) else a.name for a in actions}
    for name, row in rows.items():
        if row.deletion_requested_at is not None or not row.managed:
            continue
        if name in failed:
            status = _failed_status(row, failed[name])
        elif name in acted_on or row.status.get("observed_generation") != row.generation or (
                bool(drift.get(name)) != any(c["type"] == "Degraded" for c in row.status.get("conditions", []))):
            status = _ready_status(row, drift.get(name, ""))
        else:
            continue
        Topic.objects.filter(pk=row.pk, generation=row.generation).update(status=status)
    if changed:
        ctx.forget_topics()
    return TopicsResult(
        pending=changed, count=len(rows),
        drift="; ".join(f"{name}: {detail}" for name, detail in sorted(drift.items())),
        errors=tuple(f"{name}: {err.code}: {err.message}" for name, err in sorted(failed.items())))
