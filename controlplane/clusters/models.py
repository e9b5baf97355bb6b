"""Clusters: the tenant's desired state (spec) and what was last observed (status)."""

from __future__ import annotations

import uuid

from django.db import models


class Plan(models.TextChoices):
    BASIC = "basic", "Basic"
    STANDARD = "standard", "Standard"
    DEDICATED = "dedicated", "Dedicated"


class Cluster(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="clusters")
    name = models.CharField(max_length=64)
    plan = models.CharField(max_length=16, choices=Plan.choices, default=Plan.BASIC)
    # {"broker_count": int, "max_partitions": int}; see clusters.plans.
    spec = models.JSONField(default=dict)
    generation = models.PositiveBigIntegerField(default=1)
    status = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_cluster_name")]

    @property
    def broker_count(self) -> int:
        return int(self.spec["broker_count"])

    @property
    def max_partitions(self) -> int:
        return int(self.spec["max_partitions"])

    def __str__(self) -> str:
        return self.name
