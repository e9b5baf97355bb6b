"""Failed API key authentications are audited to the key's tenant, rate-limited, and only its admins see them."""

from __future__ import annotations

import uuid

import pytest
from django.db.models import Sum
from rest_framework.test import APIClient

from controlplane.audit.models import AuditEvent
from controlplane.audit.security import API_KEY_AUTH_FAILED, ROWS_PER_MINUTE, UNKNOWN_SUBJECT
from controlplane.kafkarest.access import clear_caches
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, key_client

pytestmark = pytest.mark.django_db

FLOOD = 1000


def failures(**filters: object) -> tuple[int, int]:
    """(rows, occurrences) of failed key authentications matching ``filters``."""
    rows = AuditEvent.objects.filter(action=API_KEY_AUTH_FAILED, **filters)
    return rows.count(), int(rows.aggregate(total=Sum("count"))["total"] or 0)


def test_a_flood_of_wrong_secrets_is_counted_in_a_bounded_number_of_rows(world_a: TenantWorld,
                                                                         world_b: TenantWorld) -> None:
    clear_caches()
    key, _secret = world_a.keys[Role.MEMBER]
    attacker = key_client(key.key_id, "x" * 64)
    for _ in range(FLOOD):
        assert attacker.get(f"{world_a.base}/clusters").status_code == 401
    rows, occurrences = failures(tenant=world_a.tenant, actor_id=key.key_id)
    assert occurrences == FLOOD
    assert rows <= 2 * ROWS_PER_MINUTE  # the flood may straddle one minute boundary

    listed = world_a.client(Role.ADMIN).get(f"{world_a.base}/audit-events", {"action": API_KEY_AUTH_FAILED})
    assert listed.status_code == 200
    events = listed.json()["results"]
    assert events and sum(e["count"] for e in events) == FLOOD
    assert {e["data"]["reason"] for e in events} == {"wrong_secret"}
    assert events[0]["data"]["principal"] == key.principal
    assert "x" * 64 not in listed.content.decode()  # never the secret tried

    other = world_b.client(Role.OWNER).get(f"{world_b.base}/audit-events", {"action": API_KEY_AUTH_FAILED})
    assert other.json()["results"] == []  # another tenant sees nothing of it
    assert world_a.client(Role.MEMBER).get(f"{world_a.base}/audit-events").status_code == 403  # admins only


def test_unknown_and_revoked_keys_are_audited_too(world_a: TenantWorld) -> None:
    clear_caches()
    for _ in range(3 * ROWS_PER_MINUTE):  # random key ids cannot multiply rows: they share one subject
        assert key_client(uuid.uuid4().hex[:16].upper(), "y" * 64).get(f"{world_a.base}/clusters").status_code \
            == 401
    rows, occurrences = failures(tenant__isnull=True, actor_id=UNKNOWN_SUBJECT)
    assert occurrences == 3 * ROWS_PER_MINUTE and rows <= 2 * ROWS_PER_MINUTE

    key, secret = world_a.keys[Role.VIEWER]
    owner = world_a.client(Role.OWNER)
    assert owner.delete(f"{world_a.base}/api-keys/{key.key_id}").status_code in (200, 204)
    assert key_client(key.key_id, secret).get(f"{world_a.base}/clusters").status_code == 401
    revoked = AuditEvent.objects.get(action=API_KEY_AUTH_FAILED, actor_id=key.key_id)
    assert revoked.tenant_id == world_a.tenant.pk and revoked.data["reason"] == "revoked"


def test_a_successful_key_writes_no_security_event(world_a: TenantWorld) -> None:
    assert world_a.client(Role.MEMBER).get(f"{world_a.base}/clusters").status_code == 200
    assert not AuditEvent.objects.filter(action__startswith="security.").exists()
    assert APIClient().get(f"{world_a.base}/clusters").status_code in (401, 403)  # no credentials: no event
    assert not AuditEvent.objects.filter(action__startswith="security.").exists()
