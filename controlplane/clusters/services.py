"""Every way a cluster's desired state changes.

Creating a cluster or growing one is checked against the tenant's limits (``plans.TenantLimits``) under a lock on
the tenant row, so concurrent requests cannot together exceed them.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from controlplane.audit.services import audit_record
from controlplane.clusters.models import (
    ACTIVE_REBALANCE_STATES,
    BrokerNode,
    Cluster,
    ClusterSecret,
    Rebalance,
    new_internal_password,
    new_token_key,
)
from controlplane.clusters.plans import PLAN_LIMITS, TenantLimits, TenantUsage, tenant_limit_refusal
from controlplane.clusters.rebalancing import rebalance_create
from controlplane.clusters.selectors import topic_max_replication_factor, topic_partition_count
from controlplane.clusters.tasks import request_reconcile
from controlplane.core.actors import Actor
from controlplane.core.errors import Conflict, QuotaExceeded, ValidationFailed
from controlplane.core.status import pending_status
from controlplane.tenancy.models import Tenant

CLUSTER_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}\Z")


def cluster_spec(*, plan: str, broker_count: int | None, max_partitions: int | None,
                 current_partitions: int = 0) -> dict[str, int]:
    """A complete spec for ``plan``, filling defaults; raises on values the plan forbids."""
    limits = PLAN_LIMITS[plan]
    brokers = limits.default_brokers if broker_count is None else broker_count
    if not limits.min_brokers <= brokers <= limits.max_brokers:
        span = (str(limits.min_brokers) if limits.min_brokers == limits.max_brokers
                else f"{limits.min_brokers}-{limits.max_brokers}")
        raise ValidationFailed({"broker_count": [f"The {plan} plan allows {span} brokers, not {brokers}."]})
    ceiling = limits.max_partitions_per_broker * brokers
    partitions = min(limits.default_partitions, ceiling) if max_partitions is None else max_partitions
    if not 1 <= partitions <= ceiling:
        raise ValidationFailed({"max_partitions": [f"Must be between 1 and {ceiling} for this plan and size."]})
    if partitions < current_partitions:
        raise ValidationFailed({"max_partitions": [
            f"The cluster already has {current_partitions} partitions; the limit cannot go below that."]})
    return {"broker_count": brokers, "max_partitions": partitions}


def _validate_name(name: str) -> None:
    if not CLUSTER_NAME_RE.match(name):
        raise ValidationFailed({"name": [
            "Use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."]})


def tenant_limits(tenant: Tenant) -> TenantLimits:
    """The tenant's limits: a staff override on the row, else the settings' default."""
    return TenantLimits(
        max_clusters=(settings.SLUICE_TENANT_MAX_CLUSTERS if tenant.max_clusters is None else tenant.max_clusters),
        max_brokers=settings.SLUICE_TENANT_MAX_BROKERS if tenant.max_brokers is None else tenant.max_brokers)


def _held_brokers(spec: dict[str, Any], placed: int) -> int:
    # Retiring and not-yet-stopped brokers (scale-in, deletion) still hold their ports.
    return max(int(spec.get("broker_count", 0)), placed)


def _tenant_usage(tenant_id: int) -> TenantUsage:
    """What the tenant holds: every cluster (those being deleted too, until their brokers are gone)."""
    rows = list(Cluster.objects.filter(tenant_id=tenant_id).annotate(placed=Count("nodes")).values_list(
        "spec", "placed"))
    return TenantUsage(clusters=len(rows), brokers=sum(_held_brokers(spec, placed) for spec, placed in rows))


def _lock_tenant(tenant_id: int) -> Tenant:
    """Serialise the tenant's cluster changes so two requests cannot both pass a limit check.

    NO KEY UPDATE: inserts of rows referencing the tenant (audit events, topics…) take KEY SHARE and go on;
    taken before any cluster row, always, so no two paths lock in opposite orders.
    """
    return Tenant.objects.select_for_update(no_key=True).get(pk=tenant_id)


def _check_tenant_limits(tenant: Tenant, *, add_clusters: int, add_brokers: int) -> None:
    """Refuse growth past the tenant's limits; call with the tenant row locked (:func:`_lock_tenant`)."""
    refusal = tenant_limit_refusal(limits=tenant_limits(tenant), usage=_tenant_usage(tenant.pk),
                                   add_clusters=add_clusters, add_brokers=add_brokers)
    if refusal is not None:
        # As a cluster's partition budget is refused: quota_exceeded, naming the limit and what is in use.
        extra: dict[str, Any] = {"quota": refusal.limit, "limit": refusal.allowed, "used": refusal.used,
                                 "requested": refusal.requested}
        if refusal.limit == "max_brokers":
            extra["field"] = "broker_count"
        raise QuotaExceeded(refusal.message, extra=extra)


@transaction.atomic
def cluster_create(*, tenant: Tenant, name: str, plan: str, actor: Actor, broker_count: int | None = None,
                   max_partitions: int | None = None) -> Cluster:
    _validate_name(name)
    spec = cluster_spec(plan=plan, broker_count=broker_count, max_partitions=max_partitions)
    tenant = _lock_tenant(tenant.pk)
    if Cluster.objects.filter(tenant=tenant, name=name).exists():
        raise Conflict(f"A cluster named '{name}' already exists.", extra={"field": "name"})
    _check_tenant_limits(tenant, add_clusters=1, add_brokers=spec["broker_count"])
    cluster = Cluster.objects.create(tenant=tenant, name=name, plan=plan, spec=spec, generation=1,
                                     status=pending_status("cluster"))
    ClusterSecret.objects.create(cluster=cluster)  # random password and token key (the model's defaults)
    audit_record(tenant=tenant, actor=actor, action="cluster.create", target_type="cluster",
                 target_id=str(cluster.id), data={"name": name, "plan": plan, "spec": spec})
    request_reconcile(cluster)
    return cluster


def _propose_after_scale_out(cluster: Cluster) -> None:
    """New brokers start empty: propose moving load onto them (computed once they have registered)."""
    if not Rebalance.objects.filter(cluster=cluster, state__in=ACTIVE_REBALANCE_STATES).exists():
        rebalance_create(cluster=cluster, actor=None, reason="scale-out")


def _deleting(cluster: Cluster) -> None:
    if cluster.deletion_requested_at is not None:
        raise Conflict("The cluster is being deleted.", code="cluster_deleting")


@transaction.atomic
def cluster_update(*, cluster: Cluster, actor: Actor, name: str | None = None, plan: str | None = None,
                   broker_count: int | None = None, max_partitions: int | None = None) -> Cluster:
    tenant = _lock_tenant(cluster.tenant_id)
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    _deleting(cluster)
    changes: dict[str, Any] = {}
    if name is not None and name != cluster.name:
        _validate_name(name)
        if Cluster.objects.filter(tenant=cluster.tenant_id, name=name).exclude(pk=cluster.pk).exists():
            raise Conflict(f"A cluster named '{name}' already exists.", extra={"field": "name"})
        changes["name"] = [cluster.name, name]
        cluster.name = name
    new_plan = plan or cluster.plan
    if plan is not None or broker_count is not None or max_partitions is not None:
        keep_brokers = broker_count if broker_count is not None else (
            cluster.broker_count if new_plan == cluster.plan else None)
        keep_partitions = max_partitions if max_partitions is not None else (
            cluster.max_partitions if new_plan == cluster.plan else None)
        spec = cluster_spec(plan=new_plan, broker_count=keep_brokers, max_partitions=keep_partitions,
                            current_partitions=topic_partition_count(cluster))
        if new_plan != cluster.plan:
            changes["plan"] = [cluster.plan, new_plan]
            cluster.plan = new_plan
        if spec != cluster.spec:
            if spec["broker_count"] < topic_max_replication_factor(cluster):
                raise ValidationFailed({"broker_count": [
                    "Topics with a higher replication factor exist; the cluster cannot shrink below it."]})
            placed = cluster.nodes.count()
            grows = _held_brokers(spec, placed) - _held_brokers(cluster.spec, placed)
            _check_tenant_limits(tenant, add_clusters=0, add_brokers=grows)
            changes["spec"] = [cluster.spec, spec]
            cluster.spec = spec
            cluster.generation += 1
    if changes:
        # Spec fields only: a reconcile writing status at the same moment keeps its write.
        cluster.save(update_fields=["name", "plan", "spec", "generation", "updated_at"])
        audit_record(tenant=cluster.tenant, actor=actor, action="cluster.update", target_type="cluster",
                     target_id=str(cluster.id), data=changes)
        if "spec" in changes and changes["spec"][1]["broker_count"] > changes["spec"][0]["broker_count"]:
            _propose_after_scale_out(cluster)
        request_reconcile(cluster)
    return cluster


@transaction.atomic
def cluster_delete(*, cluster: Cluster, actor: Actor) -> bool:
    """Request deletion; reconcile stops the brokers, removes their data and then the row.

    A cluster that never had a broker placed is removed at once (nothing ran). Returns whether the row
    is gone already. Asking again while the deletion runs changes nothing.
    """
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    if cluster.deletion_requested_at is not None:
        return False
    audit_record(tenant=cluster.tenant, actor=actor, action="cluster.delete", target_type="cluster",
                 target_id=str(cluster.id), data={"name": cluster.name})
    if not BrokerNode.objects.filter(cluster=cluster).exists():
        cluster.delete()
        return True
    cluster.deletion_requested_at = timezone.now()
    cluster.generation += 1
    cluster.save(update_fields=["deletion_requested_at", "generation", "updated_at"])
    request_reconcile(cluster)
    return False


@transaction.atomic
def cluster_secrets_rotate(*, cluster: Cluster, actor: Actor) -> int:
    """Ask for new internal secrets (password and token key); reconcile rolls the brokers onto them.

    Returns the version rotated to. Asking again while a rotation runs changes nothing (the same version).
    The audit row names the version only, never a value.
    """
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    _deleting(cluster)
    secret = ClusterSecret.objects.select_for_update().get(cluster=cluster)
    if secret.next_version is not None:
        return secret.next_version
    secret.next_internal_password, secret.next_token_key = new_internal_password(), new_token_key()
    secret.rotation_requested_at = timezone.now()
    secret.save(update_fields=["next_internal_password", "next_token_key", "rotation_requested_at"])
    cluster.generation += 1  # a change of desired state: observed_generation catches up when the roll is done
    cluster.save(update_fields=["generation", "updated_at"])
    version = secret.version + 1
    audit_record(tenant=cluster.tenant, actor=actor, action="cluster.secrets_rotate", target_type="cluster",
                 target_id=str(cluster.id), data={"from_version": secret.version, "to_version": version})
    request_reconcile(cluster)
    return version
