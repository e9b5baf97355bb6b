"""A cluster's Schema Registry: schemas with registry-wide ids, subjects' versions, configs and modes.

Registrations lock the cluster's :class:`Registry` row (``select_for_update``), so ids and version numbers
are assigned one at a time however many web processes serve the registry (decision 0026).
"""

from __future__ import annotations

from django.db import models

from dataplane.schemas import CompatibilityLevel, SchemaType


class Mode(models.TextChoices):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"


DEFAULT_COMPATIBILITY = CompatibilityLevel.BACKWARD.value


class Registry(models.Model):
    """One per cluster, made on first use; its row is the lock every write of the registry takes."""

    cluster = models.OneToOneField("clusters.Cluster", on_delete=models.CASCADE, related_name="schema_registry")
    compatibility = models.CharField(max_length=32, default=DEFAULT_COMPATIBILITY,
                                     choices=[(level.value, level.value) for level in CompatibilityLevel])
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.READWRITE)
    last_schema_id = models.PositiveIntegerField(default=0)  # ids are never reused, even after a hard delete
    created_at = models.DateTimeField(auto_now_add=True)


class Schema(models.Model):
    """A schema text (canonical form) with its id; shared by every subject version that registers it."""

    registry = models.ForeignKey(Registry, on_delete=models.CASCADE, related_name="schemas")
    schema_id = models.PositiveIntegerField()
    schema_type = models.CharField(max_length=16, choices=[(t.value, t.value) for t in SchemaType])
    text = models.TextField()
    references = models.JSONField(default=list)  # [{"name", "subject", "version"}], Confluent's shape
    fingerprint = models.CharField(max_length=64)  # sha256 of type, text and references: "the same schema"
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["registry", "schema_id"], name="registry_schema_id_unique"),
            models.UniqueConstraint(fields=["registry", "fingerprint"], name="registry_schema_fingerprint_unique"),
        ]


class SubjectVersion(models.Model):
    """Version ``version`` of ``subject``; ``deleted`` is Confluent's soft delete (hidden, not forgotten)."""

    registry = models.ForeignKey(Registry, on_delete=models.CASCADE, related_name="versions")
    subject = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    schema = models.ForeignKey(Schema, on_delete=models.PROTECT, related_name="versions")
    deleted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["registry", "subject", "version"],
                                               name="registry_subject_version_unique")]
        indexes = [models.Index(fields=["registry", "subject"])]


class SubjectConfig(models.Model):
    """A subject's own compatibility level and mode; null = follow the registry's."""

    registry = models.ForeignKey(Registry, on_delete=models.CASCADE, related_name="subject_configs")
    subject = models.CharField(max_length=255)
    compatibility = models.CharField(max_length=32, null=True, blank=True)
    mode = models.CharField(max_length=16, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["registry", "subject"], name="registry_subject_config_unique")]
