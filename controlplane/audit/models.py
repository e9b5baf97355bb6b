"""The audit trail: one row for every mutation, written in the same transaction, and the security failures
(refused credentials, denied requests), rate-limited: past a few rows a minute per (tenant, kind, subject),
repeats are counted into the last row's ``count`` instead of adding rows."""

from __future__ import annotations

import uuid

from django.db import models


class AuditEvent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Kept after the tenant is deleted: the trail outlives what it describes.
    tenant = models.ForeignKey("tenancy.Tenant", null=True, on_delete=models.SET_NULL, related_name="+")
    tenant_slug = models.CharField(max_length=63, db_index=True)
    actor_type = models.CharField(max_length=32)  # user | service_account | system
    actor_id = models.CharField(max_length=64)
    actor_display = models.CharField(max_length=200)
    action = models.CharField(max_length=64, db_index=True)  # e.g. "topic.create"
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=300)
    data = models.JSONField(default=dict, blank=True)
    count = models.PositiveIntegerField(default=1)  # occurrences this row stands for (rate-limited security events)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"
