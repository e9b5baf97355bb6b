"""Topics and ACL bindings of a cluster: the tenant's desired state."""

from __future__ import annotations

import uuid

from django.db import models

from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType

# A new topic's partition count when the request names none: the API's, published as the schema's default,
# which the console's create form reads (frontend/src/api/defaults.ts is checked against the schema).
DEFAULT_PARTITIONS = 6


def _choices(enum: type) -> list[tuple[str, str]]:
    return [(member.name, member.name) for member in enum]  # type: ignore[attr-defined]


class Topic(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=249)
    # Kafka refuses names that differ only by '.' vs '_' (they collide in metrics).
    collision_key = models.CharField(max_length=249)
    partitions = models.PositiveIntegerField()
    replication_factor = models.PositiveSmallIntegerField()
    configs = models.JSONField(default=dict, blank=True)  # overrides only, canonical strings
    generation = models.PositiveBigIntegerField(default=1)
    status = models.JSONField(default=dict)
    # False: a topic a Kafka client created, recorded as observed; reconcile never changes it.
    managed = models.BooleanField(default=True)
    # Finalizer: the row stays until reconcile has deleted the topic from the cluster.
    deletion_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="uniq_topic_name"),
            models.UniqueConstraint(fields=["cluster", "collision_key"], name="uniq_topic_collision_key"),
        ]

    def __str__(self) -> str:
        return self.name


class AclBinding(models.Model):
    """One Kafka ACL: (principal, host, operation, permission) on a resource pattern."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="acls")
    principal = models.CharField(max_length=300)
    resource_type = models.CharField(max_length=32, choices=_choices(ResourceType))
    pattern_type = models.CharField(max_length=16, choices=_choices(PatternType), default="LITERAL")
    resource_name = models.CharField(max_length=300)
    operation = models.CharField(max_length=32, choices=_choices(AclOperation))
    permission = models.CharField(max_length=8, choices=_choices(AclPermission), default="ALLOW")
    host = models.CharField(max_length=64, default="*")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "principal", "resource_type", "pattern_type", "resource_name", "operation",
                        "permission", "host"],
                name="uniq_acl_binding",
            )
        ]

    def __str__(self) -> str:
        return (f"{self.permission} {self.principal} {self.operation} on {self.resource_type}:"
                f"{self.pattern_type}:{self.resource_name} from {self.host}")


class ClientQuota(models.Model):
    """Kafka client quotas for one principal of the cluster's tenant (a service account or a member, whose API
    keys act as it), or for every principal without one of its own (``principal`` null: Kafka's default user),
    optionally narrowed to one ``client_id``. Reconciled into the cluster with AlterClientQuotas.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="quotas")
    principal = models.CharField(max_length=300, null=True, blank=True)
    client_id = models.CharField(max_length=255, null=True, blank=True)
    producer_byte_rate = models.BigIntegerField(null=True, blank=True)
    consumer_byte_rate = models.BigIntegerField(null=True, blank=True)
    request_percentage = models.FloatField(null=True, blank=True)
    max_connections = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "principal", "client_id"], name="uniq_client_quota_entity",
                                    nulls_distinct=False),
        ]

    def __str__(self) -> str:
        who = self.principal or "every principal"
        return f"{who} (client id {self.client_id})" if self.client_id else who
