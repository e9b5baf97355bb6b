"""Client quotas through the management API: who may change them, bad input, audit; and the pure plan."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from controlplane.reconcile.quota_plan import plan_quotas
from controlplane.resources.models import ClientQuota
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory

ALICE = (("user", "sa-1"),)
BOB = (("user", "sa-2"),)
DEFAULT = (("user", None),)


@pytest.mark.django_db
def test_admins_set_quotas_for_their_principals_and_every_change_is_audited(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/quotas"
    admin = world_a.client(Role.ADMIN)
    account = world_a.service_account.principal
    created = admin.post(base, {"principal": account, "producer_byte_rate": 1_048_576, "max_connections": 10},
                         format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["principal"] == account and body["client_id"] is None and body["producer_byte_rate"] == 1_048_576
    assert body["consumer_byte_rate"] is None and body["max_connections"] == 10
    default = admin.post(base, {"consumer_byte_rate": 2048}, format="json")
    assert default.status_code == 201 and default.json()["principal"] is None
    changed = admin.patch(f"{base}/{body['id']}", {"consumer_byte_rate": 4096, "max_connections": None},
                          format="json")
    assert changed.status_code == 200
    assert changed.json()["consumer_byte_rate"] == 4096 and changed.json()["max_connections"] is None
    assert changed.json()["producer_byte_rate"] == 1_048_576
    listed = world_a.client(Role.VIEWER).get(base).json()["results"]
    assert {q["id"] for q in listed} == {body["id"], default.json()["id"]}
    assert admin.delete(f"{base}/{default.json()['id']}").status_code == 204
    actions = list(AuditEvent.objects.filter(tenant=world_a.tenant, target_type="quota")
                   .order_by("created_at").values_list("action", flat=True))
    assert actions == ["quota.create", "quota.create", "quota.update", "quota.delete"]


@pytest.mark.django_db
def test_only_admins_change_quotas(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/quotas"
    for role in (Role.VIEWER, Role.MEMBER):
        response = world_a.client(role).post(base, {"producer_byte_rate": 1024}, format="json")
        assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert not ClientQuota.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [
    ({"principal": "User:sa-00000000-0000-0000-0000-000000000000", "producer_byte_rate": 1}, "principal"),
    ({"principal": "User:*", "producer_byte_rate": 1}, "principal"),
    ({"principal": "Group:x", "producer_byte_rate": 1}, "principal"),
    ({"producer_byte_rate": -5}, "producer_byte_rate"),
    ({"producer_byte_rate": 0}, "producer_byte_rate"),
    ({"consumer_byte_rate": "fast"}, "consumer_byte_rate"),
    ({"request_percentage": 0}, "request_percentage"),
    ({"max_connections": 0}, "max_connections"),
    ({"client_id": "", "producer_byte_rate": 1}, "client_id"),
    ({"principal": None}, "non_field_errors"),
])
def test_bad_quotas_are_refused_with_the_field_named(world_a: TenantWorld, body: dict[str, object],
                                                     field: str) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    response = world_a.client(Role.ADMIN).post(f"{world_a.base}/clusters/{cluster.pk}/quotas", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["extra"]["fields"], response.json()
    assert not ClientQuota.objects.exists()


@pytest.mark.django_db
def test_a_second_quota_for_the_same_entity_is_a_conflict(world_a: TenantWorld, world_b: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/quotas"
    admin = world_a.client(Role.ADMIN)
    assert admin.post(base, {"client_id": "app", "producer_byte_rate": 1}, format="json").status_code == 201
    again = admin.post(base, {"client_id": "app", "consumer_byte_rate": 1}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "quota_exists"
    # Another tenant's principal is not one of this tenant's.
    theirs = admin.post(base, {"principal": world_b.service_account.principal, "producer_byte_rate": 1},
                        format="json")
    assert theirs.status_code == 400


def test_the_plan_sets_differences_and_removes_or_reports_drift() -> None:
    desired = {ALICE: {"producer_byte_rate": 100.0, "max_connections": 5.0}, DEFAULT: {"consumer_byte_rate": 9.0}}
    observed = {ALICE: {"producer_byte_rate": 50.0, "request_percentage": 20.0}, BOB: {"producer_byte_rate": 1.0},
                DEFAULT: {"consumer_byte_rate": 9.0}}
    plan = plan_quotas(desired, observed, correct_drift=True)
    assert plan.changes == {ALICE: {"producer_byte_rate": 100.0, "max_connections": 5.0, "request_percentage": None},
                            BOB: {"producer_byte_rate": None}}
    report = plan_quotas(desired, observed, correct_drift=False)
    assert BOB not in report.changes and report.drift == (BOB,)
    assert not plan_quotas(desired, desired, correct_drift=True)
