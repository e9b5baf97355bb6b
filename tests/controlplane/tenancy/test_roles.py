"""Who may do what: viewer reads, member writes topics, admin manages keys/ACLs/clusters, owner members (invites)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.tenancy.models import Membership, Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory, UserFactory

pytestmark = pytest.mark.django_db

ORDER = [Role.VIEWER, Role.MEMBER, Role.ADMIN, Role.OWNER]


def _allowed(minimum: str) -> dict[str, bool]:
    return {role: ORDER.index(role) >= ORDER.index(minimum) for role in ORDER}


@pytest.mark.parametrize("role", ORDER)
def test_everyone_reads(world_a: TenantWorld, role: str) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    client = world_a.client(role)
    for path in ("", "/clusters", f"/clusters/{cluster.pk}", f"/clusters/{cluster.pk}/topics",
                 f"/clusters/{cluster.pk}/acls", "/service-accounts", "/members", "/api-keys"):
        assert client.get(world_a.base + path).status_code == 200, (role, path)


def test_write_matrix(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    cases = [
        (Role.MEMBER, "post", f"/clusters/{cluster.pk}/topics", lambda r: {"name": f"t-{r}", "partitions": 1}),
        (Role.ADMIN, "post", "/clusters", lambda r: {"name": f"c-{r}"}),
        (Role.ADMIN, "post", f"/clusters/{cluster.pk}/acls",
         lambda r: {"principal": "User:*", "resource_type": "TOPIC", "resource_name": f"t-{r}", "operation": "READ"}),
        (Role.ADMIN, "post", "/service-accounts", lambda r: {"name": f"sa-{r}"}),
        (Role.OWNER, "post", "/invitations", lambda r: {"email": f"new-{r}@example.com", "role": "viewer"}),
        (Role.OWNER, "patch", "", lambda r: {"name": f"Renamed by {r}"}),
        (Role.ADMIN, "get", "/audit-events", lambda r: {}),
    ]
    for minimum, method, path, body in cases:
        for role, allowed in _allowed(minimum).items():
            response = getattr(world_a.client(role), method)(world_a.base + path, body(role), format="json")
            if allowed:
                assert response.status_code in (200, 201), (role, method, path, response.json())
            else:
                assert response.status_code == 403, (role, method, path, response.status_code)
                assert response.json()["code"] == "permission_denied"


def test_members_see_and_revoke_only_their_own_keys(world_a: TenantWorld) -> None:
    member = world_a.client(Role.MEMBER)
    listed = member.get(f"{world_a.base}/api-keys").json()["results"]
    assert [k["key_id"] for k in listed] == [world_a.keys[Role.MEMBER][0].key_id]
    others = world_a.keys[Role.ADMIN][0].key_id
    assert member.delete(f"{world_a.base}/api-keys/{others}").status_code == 404
    created = member.post(f"{world_a.base}/api-keys", {"description": "mine"}, format="json")
    assert created.status_code == 201
    assert created.json()["owner"]["type"] == "user"
    assert world_a.client(Role.VIEWER).post(f"{world_a.base}/api-keys", {}, format="json").status_code == 403
    sa_key = member.post(f"{world_a.base}/api-keys", {"service_account": str(world_a.service_account.pk)},
                         format="json")
    assert sa_key.status_code == 403


def test_the_last_owner_cannot_leave_or_be_demoted(world_a: TenantWorld) -> None:
    owner = world_a.client(Role.OWNER)
    me = Membership.objects.get(tenant=world_a.tenant, role=Role.OWNER)
    response = owner.patch(f"{world_a.base}/members/{me.pk}", {"role": "admin"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "last_owner"
    assert owner.delete(f"{world_a.base}/members/{me.pk}").status_code == 400
    invited = owner.post(f"{world_a.base}/invitations", {"email": "second@example.com", "role": "owner"},
                         format="json")
    assert invited.status_code == 201
    second = APIClient()
    second.force_login(UserFactory(username="second", email="second@example.com"))
    assert second.post(f"/api/v1/invitations/{invited.json()['id']}/accept").status_code == 200
    assert owner.patch(f"{world_a.base}/members/{me.pk}", {"role": "admin"}, format="json").status_code == 200


def test_api_keys_cannot_create_tenants(world_a: TenantWorld) -> None:
    response = world_a.client(Role.OWNER).post("/api/v1/tenants", {"slug": "new-one"}, format="json")
    assert response.status_code == 403


def test_session_user_creates_a_tenant_and_owns_it(world_a: TenantWorld) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(world_a.users[Role.VIEWER])
    response = client.post("/api/v1/tenants", {"slug": "fresh", "name": "Fresh"}, format="json")
    assert response.status_code == 201 and response.json()["role"] == "owner"
    duplicate = client.post("/api/v1/tenants", {"slug": "fresh"}, format="json")
    assert duplicate.status_code == 409 and duplicate.json()["code"] == "conflict"


def test_login_and_logout_with_a_session(world_a: TenantWorld) -> None:
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    bad = client.post("/api/v1/auth/login", {"username": "alpha-owner", "password": "nope"}, format="json")
    assert bad.status_code == 401
    good = client.post("/api/v1/auth/login", {"username": "alpha-owner", "password": "correct horse battery staple"},
                       format="json")
    assert good.status_code == 200
    assert client.get("/api/v1/me").json()["display"] == "alpha-owner"
    # Unsafe methods with a session need the CSRF token.
    refused = client.post(f"{world_a.base}/clusters", {"name": "c"}, format="json")
    assert refused.status_code == 403
