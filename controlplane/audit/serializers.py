from __future__ import annotations

from rest_framework import serializers

from controlplane.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    class Meta:
        model = AuditEvent
        fields = ["id", "action", "actor_type", "actor_id", "actor_display", "target_type", "target_id", "data",
                  "count", "created_at"]
        read_only_fields = fields
