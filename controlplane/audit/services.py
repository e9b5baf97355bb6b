"""Writing the audit trail. Called inside a service's transaction."""

from __future__ import annotations

from typing import Any

from controlplane.audit.models import AuditEvent
from controlplane.core.actors import Actor
from controlplane.tenancy.models import Tenant


def audit_record(*, tenant: Tenant, actor: Actor, action: str, target_type: str, target_id: str,
                 data: dict[str, Any] | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        tenant=tenant,
        tenant_slug=tenant.slug,
        actor_type=actor.type,
        actor_id=actor.id,
        actor_display=actor.display,
        action=action,
        target_type=target_type,
        target_id=target_id,
        data=data or {},
    )
