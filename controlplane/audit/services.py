"""Writing the audit trail. Called inside a service's transaction."""

from __future__ import annotations

from typing import Any, Protocol

from controlplane.audit.models import AuditEvent
from controlplane.core.actors import Actor


class AuditedTenant(Protocol):
    """The tenant a row belongs to (tenancy's ``Tenant``: tenancy writes audit rows, so audit never imports it)."""

    @property
    def pk(self) -> Any: ...

    @property
    def slug(self) -> str: ...


def audit_record(*, tenant: AuditedTenant, actor: Actor, action: str, target_type: str, target_id: str,
                 data: dict[str, Any] | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        actor_type=actor.type,
        actor_id=actor.id,
        actor_display=actor.display,
        action=action,
        target_type=target_type,
        target_id=target_id,
        data=data or {},
    )
