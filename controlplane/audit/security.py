"""Security failures in the audit trail: refused API keys, REST/WebSocket requests refused by a role or by the
cluster's ACLs. Visible to the tenant's admins through the audit API (``action`` ``security.*``).

Rate-limited so a flood cannot fill the database: at most ``ROWS_PER_MINUTE`` rows per (tenant, action,
subject) per clock minute; every further occurrence in that minute adds one to the last row's ``count``
(one UPDATE, no new row). A flood of N failures therefore costs N small statements but at most
``ROWS_PER_MINUTE`` rows a minute per subject. Failures whose tenant is unknown (an API key id that does not
exist) are kept with no tenant, under one subject, so random key ids cannot multiply rows either; only
operators see them (Django admin).

Written in autocommit, outside any request transaction, so a refused request's rollback cannot lose them.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from controlplane.audit.models import AuditEvent

log = logging.getLogger(__name__)

ROWS_PER_MINUTE = 10
API_KEY_AUTH_FAILED = "security.api_key_auth_failed"
KAFKA_AUTH_FAILED = "security.kafka_auth_failed"  # a SASL login refused by a broker of the tenant's cluster
KAFKA_DENIED = "security.kafka_denied"  # a Kafka request refused by the cluster's ACLs
REST_DENIED = "security.rest_denied"  # a REST Proxy call refused (tenant role, or the cluster's ACLs)
WS_DENIED = "security.ws_denied"  # a WebSocket tail refused (tenant role, or the cluster's ACLs)
UNKNOWN_SUBJECT = "unknown"


def security_event_record(*, tenant_id: int | None, action: str, subject: str, subject_type: str,
                          target_type: str = "", target_id: str = "", data: dict[str, Any] | None = None,
                          count: int = 1) -> None:
    """Record ``count`` occurrences of one security failure (rate-limited, see the module docstring). Never
    raises: auditing a refusal must not turn it into a server error."""
    try:
        _record(tenant_id, action, subject[:64], subject_type, target_type, target_id[:300], data or {}, count)
    except DatabaseError:
        log.exception("could not audit %s for %s", action, subject)


def _record(tenant_id: int | None, action: str, subject: str, subject_type: str, target_type: str, target_id: str,
            data: dict[str, Any], count: int) -> None:
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    scope = AuditEvent.objects.filter(tenant__isnull=True) if tenant_id is None else \
        AuditEvent.objects.filter(tenant_id=tenant_id)
    recent = scope.filter(action=action, actor_id=subject, created_at__gte=minute,
                          created_at__lt=minute + timedelta(minutes=1))
    with transaction.atomic():
        if recent.count() >= ROWS_PER_MINUTE:
            last = recent.order_by("-created_at").values_list("pk", flat=True).first()
            if last is not None:
                AuditEvent.objects.filter(pk=last).update(count=F("count") + count)
                return
        tenants = apps.get_model("tenancy", "Tenant")._default_manager  # by name: tenancy sits above audit
        slug = tenants.filter(pk=tenant_id).values_list("slug", flat=True).first() if tenant_id else None
        AuditEvent.objects.create(tenant_id=tenant_id, tenant_slug=slug or "", actor_type=subject_type,
                                  actor_id=subject, actor_display=subject, action=action, target_type=target_type,
                                  target_id=target_id, data=data, count=count)
