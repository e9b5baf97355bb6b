"""Every way a cluster's topics, ACL bindings and client quotas change."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.audit.services import audit_record
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.clusters.tasks import request_reconcile
from controlplane.clusters.tiering import remote_storage, tiering_enabled
from controlplane.core.actors import Actor, kafka_principal
from controlplane.core.errors import Conflict, QuotaExceeded, ValidationFailed
from controlplane.core.status import pending_status
from controlplane.resources.models import DEFAULT_PARTITIONS, AclBinding, ClientQuota, Topic
from controlplane.resources.selectors import cluster_partition_count
from controlplane.tenancy.models import Membership, ServiceAccount
from controlplane.tenancy.names import principal_hint
from dataplane.config.tiering import REMOTE_STORAGE_ENABLE, check_tiering
from dataplane.config.topic import ConfigError, validate_topic_configs
from dataplane.naming import InvalidTopicName, collision_key, validate_topic_name
from dataplane.security.acl import (
    WILDCARD,
    AclOperation,
    AclPermission,
    InvalidAcl,
    PatternType,
    ResourceType,
    validate_binding,
)


def _check_name(name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicName as exc:
        raise ValidationFailed({"name": [str(exc)]}) from exc
    if name.startswith("__"):
        raise ValidationFailed({"name": ["Names starting with '__' are reserved for internal topics."]})


def _check_configs(configs: Mapping[str, Any], replication_factor: int, cluster: Cluster,
                   previous: Mapping[str, str] | None = None) -> dict[str, str]:
    if not isinstance(configs, Mapping):
        raise ValidationFailed({"configs": ["Expected an object of config names to values."]})
    try:
        canonical = validate_topic_configs(configs)
        check_tiering(canonical, previous=previous, remote_storage_configured=True)
    except ConfigError as exc:
        raise ValidationFailed({f"configs.{exc.name}": [exc.message]}) from exc
    if canonical.get(REMOTE_STORAGE_ENABLE) == "true" and not tiering_enabled(cluster):
        raise ValidationFailed({f"configs.{REMOTE_STORAGE_ENABLE}": [
            "This cluster cannot tier to object storage: "
            + ("the deployment has no object store (SLUICE_REMOTE_STORAGE_ENDPOINT)." if remote_storage() is None
               else f"its plan ({cluster.plan}) does not include tiered storage.")]})
    min_isr = int(canonical.get("min.insync.replicas", "1"))
    if min_isr > replication_factor:
        raise ValidationFailed({"configs.min.insync.replicas": [
            f"min.insync.replicas ({min_isr}) cannot exceed the replication factor ({replication_factor})."]})
    return canonical


def _check_cluster_open(cluster: Cluster) -> None:
    if cluster.deletion_requested_at is not None:
        raise Conflict("The cluster is being deleted.", code="cluster_deleting")


def _check_not_deleting(topic: Topic) -> None:
    if topic.deletion_requested_at is not None:
        raise Conflict(f"Topic '{topic.name}' is being deleted.", code="topic_deleting")


def _check_partition_budget(cluster: Cluster, wanted: int, excluding: Topic | None = None) -> None:
    used = cluster_partition_count(cluster, excluding=excluding)
    if used + wanted > cluster.max_partitions:
        raise QuotaExceeded(
            f"The cluster allows {cluster.max_partitions} partitions; {used} are in use, so {wanted} more do not fit.",
            extra={"field": "partitions", "limit": cluster.max_partitions, "used": used})


@transaction.atomic
def topic_create(*, cluster: Cluster, name: str, actor: Actor, partitions: int | None = None,
                 replication_factor: int | None = None, configs: Mapping[str, Any] | None = None) -> Topic:
    # Serialise topic changes per cluster: the partition budget is a cluster-wide sum.
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    _check_cluster_open(cluster)
    _check_name(name)
    partitions = DEFAULT_PARTITIONS if partitions is None else partitions
    if partitions < 1:
        raise ValidationFailed({"partitions": ["A topic needs at least 1 partition."]})
    replication_factor = min(3, cluster.broker_count) if replication_factor is None else replication_factor
    if not 1 <= replication_factor <= cluster.broker_count:
        raise ValidationFailed({"replication_factor": [
            f"Must be between 1 and the cluster's broker count ({cluster.broker_count})."]})
    canonical = _check_configs(configs or {}, replication_factor, cluster)
    clash = Topic.objects.filter(cluster=cluster, collision_key=collision_key(name)).first()
    if clash is not None:
        message = (f"Topic '{name}' already exists." if clash.name == name else
                   f"Topic '{name}' collides with existing topic '{clash.name}' ('.' and '_' are interchangeable).")
        raise Conflict(message, code="topic_exists", extra={"field": "name"})
    _check_partition_budget(cluster, partitions)
    topic = Topic.objects.create(cluster=cluster, name=name, collision_key=collision_key(name),
                                 partitions=partitions, replication_factor=replication_factor, configs=canonical,
                                 status=pending_status("topic"))
    audit_record(tenant=cluster.tenant, actor=actor, action="topic.create", target_type="topic",
                 target_id=f"{cluster.id}/{name}",
                 data={"partitions": partitions, "replication_factor": replication_factor, "configs": canonical})
    request_reconcile(cluster)
    return topic


@transaction.atomic
def topic_update(*, topic: Topic, actor: Actor, partitions: int | None = None,
                 configs: Mapping[str, Any] | None = None, replace_configs: bool = False) -> Topic:
    """Grow partitions and change configs.

    With ``replace_configs`` the given configs become the whole override set;
    otherwise they merge, and a ``None`` value removes an override.
    """
    cluster = Cluster.objects.select_for_update().get(pk=topic.cluster_id)
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    _check_cluster_open(cluster)
    _check_not_deleting(topic)
    changes: dict[str, Any] = {}
    if partitions is not None and partitions != topic.partitions:
        if partitions < topic.partitions:
            raise ValidationFailed({"partitions": [
                f"Partitions can only grow: the topic has {topic.partitions}, asked for {partitions}."]})
        _check_partition_budget(cluster, partitions, excluding=topic)
        changes["partitions"] = [topic.partitions, partitions]
        topic.partitions = partitions
    if configs is not None:
        if not isinstance(configs, Mapping):
            raise ValidationFailed({"configs": ["Expected an object of config names to values."]})
        merged: dict[str, Any] = {} if replace_configs else dict(topic.configs)
        for key, value in configs.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        canonical = _check_configs(merged, topic.replication_factor, cluster, previous=topic.configs)
        if canonical != topic.configs:
            changes["configs"] = [topic.configs, canonical]
            topic.configs = canonical
    if changes:
        topic.generation += 1
        # Editing a topic a client created makes it managed: from now on its spec is the truth.
        topic.managed = True
        topic.save(update_fields=["partitions", "configs", "generation", "managed", "updated_at"])
        audit_record(tenant=cluster.tenant, actor=actor, action="topic.update", target_type="topic",
                     target_id=f"{cluster.id}/{topic.name}", data=changes)
        request_reconcile(cluster)
    return topic


@transaction.atomic
def topic_delete(*, topic: Topic, actor: Actor) -> bool:
    """Request deletion; reconcile deletes it from the cluster, then the row. Returns whether the row is gone.

    A topic that no reconcile ever created on a cluster that never had a broker goes at once.
    """
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    if topic.deletion_requested_at is not None:
        return False
    audit_record(tenant=topic.cluster.tenant, actor=actor, action="topic.delete", target_type="topic",
                 target_id=f"{topic.cluster_id}/{topic.name}")
    if not BrokerNode.objects.filter(cluster_id=topic.cluster_id).exists():
        topic.delete()
        return True
    topic.deletion_requested_at = timezone.now()
    topic.generation += 1
    topic.save(update_fields=["deletion_requested_at", "generation", "updated_at"])
    request_reconcile(topic.cluster)
    return False


def _known_principal(cluster: Cluster, principal: str) -> bool:
    """Only principals that exist in the cluster's tenant (or the wildcard) may be bound."""
    if principal == f"User:{WILDCARD}":
        return True
    kind, _, ident = principal.partition(":")
    if kind != "User":
        return False
    if ident.startswith("sa-"):
        try:
            account_id = uuid.UUID(ident[3:])
        except ValueError:
            return False
        return ServiceAccount.objects.filter(tenant=cluster.tenant_id, id=account_id).exists()
    if ident.startswith("u-") and ident[2:].isdigit():
        user_id = int(ident[2:])
        return (kafka_principal("user", user_id) == principal and
                Membership.objects.filter(tenant=cluster.tenant_id, user_id=user_id).exists()
                and get_user_model().objects.filter(pk=user_id).exists())
    return False


def _binding_fields(**fields: Any) -> dict[str, Any]:
    try:
        resource_type = ResourceType[fields["resource_type"]]
        pattern_type = PatternType[fields["pattern_type"]]
        operation = AclOperation[fields["operation"]]
        AclPermission[fields["permission"]]
    except KeyError as exc:  # serializers check choices; this guards direct callers
        raise ValidationFailed({str(exc.args[0]): ["Not a valid choice."]}) from exc
    try:
        validate_binding(principal=fields["principal"], resource_type=resource_type, pattern_type=pattern_type,
                         resource_name=fields["resource_name"], operation=operation, host=fields["host"])
    except InvalidAcl as exc:
        raise ValidationFailed({exc.field: [exc.message]}) from exc
    return fields


@transaction.atomic
def acl_create(*, cluster: Cluster, actor: Actor, principal: str, resource_type: str, resource_name: str,
               operation: str, pattern_type: str = "LITERAL", permission: str = "ALLOW",
               host: str = WILDCARD) -> AclBinding:
    if not _known_principal(cluster, principal):  # first: its message names what is accepted, with examples
        raise ValidationFailed({"principal": [principal_hint(cluster.tenant_id, principal)]})
    fields = _binding_fields(principal=principal, resource_type=resource_type, pattern_type=pattern_type,
                             resource_name=resource_name, operation=operation, permission=permission, host=host)
    if AclBinding.objects.filter(cluster=cluster, **fields).exists():
        raise Conflict("An identical ACL binding already exists.", code="acl_exists")
    acl = AclBinding.objects.create(cluster=cluster, **fields)
    audit_record(tenant=cluster.tenant, actor=actor, action="acl.create", target_type="acl",
                 target_id=str(acl.id), data=fields)
    request_reconcile(cluster)
    return acl


@transaction.atomic
def acl_update(*, acl: AclBinding, actor: Actor, **changes: Any) -> AclBinding:
    current = {f: getattr(acl, f) for f in ("principal", "resource_type", "pattern_type", "resource_name",
                                           "operation", "permission", "host")}
    principal = changes.get("principal")
    if principal is not None and principal != current["principal"] and not _known_principal(acl.cluster, principal):
        raise ValidationFailed({"principal": [principal_hint(acl.cluster.tenant_id, principal)]})
    wanted = _binding_fields(**{**current, **{k: v for k, v in changes.items() if v is not None}})
    if wanted == current:
        return acl
    for field, value in wanted.items():
        setattr(acl, field, value)
    try:
        with transaction.atomic():
            acl.save()
    except IntegrityError as exc:
        raise Conflict("An identical ACL binding already exists.", code="acl_exists") from exc
    audit_record(tenant=acl.cluster.tenant, actor=actor, action="acl.update", target_type="acl",
                 target_id=str(acl.id), data={"from": current, "to": wanted})
    request_reconcile(acl.cluster)
    return acl


@transaction.atomic
def acl_delete(*, acl: AclBinding, actor: Actor) -> None:
    audit_record(tenant=acl.cluster.tenant, actor=actor, action="acl.delete", target_type="acl",
                 target_id=str(acl.id), data={"binding": str(acl)})
    cluster = acl.cluster
    acl.delete()
    request_reconcile(cluster)


# ---------------------------------------------------------------------------------------------------- client quotas

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "max_connections")


def _quota_fields(cluster: Cluster, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Checked quota fields: a principal of the tenant (or None, every principal), a client id, one key at least."""
    principal, client_id = fields.get("principal"), fields.get("client_id")
    if principal is not None and (principal == f"User:{WILDCARD}" or not _known_principal(cluster, principal)):
        hint = principal_hint(cluster.tenant_id, principal).replace(" or 'User:*' (everyone)", "")
        raise ValidationFailed({"principal": [f"{hint} Leave it null for every principal."]})
    if client_id == "":
        raise ValidationFailed({"client_id": ["Give a client id or null (any client)."]})
    if all(fields.get(key) is None for key in QUOTA_KEYS):
        raise ValidationFailed({"non_field_errors": [f"Set at least one of {', '.join(QUOTA_KEYS)}."]})
    return {"principal": principal, "client_id": client_id, **{key: fields.get(key) for key in QUOTA_KEYS}}


def _quota_conflict(cluster: Cluster, fields: Mapping[str, Any], exclude: uuid.UUID | None = None) -> None:
    same = ClientQuota.objects.filter(cluster=cluster, principal=fields["principal"], client_id=fields["client_id"])
    if exclude is not None:
        same = same.exclude(pk=exclude)
    if same.exists():
        raise Conflict("A quota for this principal and client id already exists; change that one.",
                       code="quota_exists")


@transaction.atomic
def quota_create(*, cluster: Cluster, actor: Actor, **given: Any) -> ClientQuota:
    fields = _quota_fields(cluster, given)
    _quota_conflict(cluster, fields)
    quota = ClientQuota.objects.create(cluster=cluster, **fields)
    audit_record(tenant=cluster.tenant, actor=actor, action="quota.create", target_type="quota",
                 target_id=str(quota.id), data=fields)
    request_reconcile(cluster)
    return quota


@transaction.atomic
def quota_update(*, quota: ClientQuota, actor: Actor, **changes: Any) -> ClientQuota:
    current = {f: getattr(quota, f) for f in ("principal", "client_id", *QUOTA_KEYS)}
    wanted = _quota_fields(quota.cluster, {**current, **changes})
    if wanted == current:
        return quota
    _quota_conflict(quota.cluster, wanted, exclude=quota.pk)
    for field, value in wanted.items():
        setattr(quota, field, value)
    quota.save()
    audit_record(tenant=quota.cluster.tenant, actor=actor, action="quota.update", target_type="quota",
                 target_id=str(quota.id), data={"from": current, "to": wanted})
    request_reconcile(quota.cluster)
    return quota


@transaction.atomic
def quota_delete(*, quota: ClientQuota, actor: Actor) -> None:
    audit_record(tenant=quota.cluster.tenant, actor=actor, action="quota.delete", target_type="quota",
                 target_id=str(quota.id), data={"quota": str(quota)})
    cluster = quota.cluster
    quota.delete()
    request_reconcile(cluster)
