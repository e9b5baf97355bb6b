"""API key authentication: every failure is a 401 with a clear body; secrets never leak."""

from __future__ import annotations

import base64
import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.kafkarest.access import caller_for_authorization, clear_caches
from controlplane.tenancy.key_usage import api_keys_used
from controlplane.tenancy.keys import hash_secret
from controlplane.tenancy.models import ApiKey, Role
from tests.controlplane.conftest import TenantWorld, key_client

pytestmark = pytest.mark.django_db


def _get(client: APIClient, world: TenantWorld) -> tuple[int, dict[str, object]]:
    response = client.get(f"{world.base}/clusters")
    return response.status_code, response.json()


def test_valid_key_authenticates_and_records_last_use(world_a: TenantWorld) -> None:
    key, _ = world_a.keys[Role.VIEWER]
    assert key.last_used_at is None
    status, _ = _get(world_a.client(Role.VIEWER), world_a)
    assert status == 200
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_basic_auth_with_the_same_pair_works(world_a: TenantWorld) -> None:
    key, secret = world_a.keys[Role.VIEWER]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{key.key_id}:{secret}".encode()).decode())
    assert _get(client, world_a)[0] == 200


@pytest.mark.parametrize(("header", "fragment"), [
    ("Bearer", "Malformed"),
    ("Bearer nocolon", "Malformed"),
    ("Bearer :secret", "Malformed"),
    ("Bearer short:short", "Malformed"),
    ("Basic !!!notbase64", "Malformed"),
    ("Token abc", "Unsupported Authorization scheme"),
])
def test_malformed_headers_are_401_with_a_reason(world_a: TenantWorld, header: str, fragment: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    status, body = _get(client, world_a)
    assert status == 401
    assert body["code"] == "authentication_failed"
    assert fragment in str(body["message"])


def test_wrong_secret_and_unknown_key_get_the_same_401(world_a: TenantWorld) -> None:
    key, secret = world_a.keys[Role.OWNER]
    wrong = key_client(key.key_id, "A" * 64)
    unknown = key_client("ABCDEFGHJKLMNPQR", secret)
    for client in (wrong, unknown):
        status, body = _get(client, world_a)
        assert status == 401
        assert body == {"code": "authentication_failed", "message": "Invalid API key or secret.", "extra": {}}


def test_missing_credentials_are_401_not_403(world_a: TenantWorld) -> None:
    response = APIClient().get(f"{world_a.base}/clusters")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_revoked_key_is_refused(world_a: TenantWorld) -> None:
    key, _ = world_a.keys[Role.MEMBER]
    owner = world_a.client(Role.OWNER)
    assert owner.delete(f"{world_a.base}/api-keys/{key.key_id}").status_code == 204
    status, body = _get(world_a.client(Role.MEMBER), world_a)
    assert status == 401
    assert body["message"] == "This API key has been revoked."
    listed = owner.get(f"{world_a.base}/api-keys/{key.key_id}").json()
    assert listed["revoked"] is True


def test_removing_a_member_disables_their_keys(world_a: TenantWorld) -> None:
    from controlplane.tenancy.models import Membership

    membership = Membership.objects.get(tenant=world_a.tenant, role=Role.MEMBER)
    assert world_a.client(Role.OWNER).delete(f"{world_a.base}/members/{membership.pk}").status_code == 204
    assert _get(world_a.client(Role.MEMBER), world_a)[0] == 401


def test_secret_is_shown_once_stored_hashed_and_never_logged(world_a: TenantWorld,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    owner = world_a.client(Role.OWNER)
    created = owner.post(f"{world_a.base}/api-keys", {"description": "ci"}, format="json")
    assert created.status_code == 201
    secret = created.json()["secret"]
    key_id = created.json()["key_id"]
    assert len(secret) == 64
    stored = ApiKey.objects.get(key_id=key_id)
    assert stored.secret_hash == hash_secret(secret) and secret not in stored.secret_hash

    fresh = key_client(key_id, secret)
    wrong = key_client(key_id, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    bodies = [
        owner.get(f"{world_a.base}/api-keys").content,
        owner.get(f"{world_a.base}/api-keys/{key_id}").content,
        owner.patch(f"{world_a.base}/api-keys/{key_id}", {"description": "renamed"}, format="json").content,
        fresh.get("/api/v1/me").content,
        wrong.get("/api/v1/me").content,
        owner.get(f"{world_a.base}/audit-events").content,
    ]
    for body in bodies:
        assert secret.encode() not in body
        assert b"secret_hash" not in body
    assert secret not in caplog.text
    for record in caplog.records:
        assert secret not in str(record.args)


def test_key_of_one_tenant_grants_nothing_in_another_even_for_a_shared_user(world_a: TenantWorld,
                                                                           world_b: TenantWorld) -> None:
    from controlplane.tenancy.models import Membership

    # The same person owns both tenants, but the key was issued in A.
    Membership.objects.create(tenant=world_b.tenant, user=world_a.users[Role.OWNER], role=Role.OWNER)
    response = world_a.client(Role.OWNER).get(f"{world_b.base}/clusters")
    assert response.status_code == 404


def test_service_account_key_acts_with_the_account_role(world_a: TenantWorld) -> None:
    owner = world_a.client(Role.OWNER)
    assert world_a.service_account is not None
    created = owner.post(f"{world_a.base}/api-keys", {"service_account": str(world_a.service_account.pk)},
                         format="json").json()
    client = key_client(created["key_id"], created["secret"])
    me = client.get("/api/v1/me").json()
    assert me["type"] == "service_account" and me["principal"] == world_a.service_account.principal
    assert [t["role"] for t in me["tenants"]] == ["member"]
    # member role: may read clusters, may not create them (admin)
    assert client.get(f"{world_a.base}/clusters").status_code == 200
    denied = client.post(f"{world_a.base}/clusters", {"name": "c"}, format="json")
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"


def test_rest_proxy_and_websocket_resolution_records_last_use_coalesced(world_a: TenantWorld) -> None:
    """The raw REST produce path and the WebSocket tail resolve keys outside DRF (``caller_for_authorization``):
    their use is recorded too, and a second use within the window writes nothing."""
    key, secret = world_a.keys[Role.MEMBER]
    assert key.last_used_at is None
    caller_for_authorization(f"Bearer {key.key_id}:{secret}")
    key.refresh_from_db()
    first = key.last_used_at
    assert first is not None
    clear_caches()  # past the per-process cache: the key is looked up again, within the window
    caller_for_authorization(f"Bearer {key.key_id}:{secret}")
    key.refresh_from_db()
    assert key.last_used_at == first


def test_kafka_logins_move_last_used_at_once_per_window(world_a: TenantWorld) -> None:
    """Logins brokers report (``tenancy.key_usage``): only the tenant's keys, at most one write per window."""
    key, _ = world_a.keys[Role.ADMIN]
    now = timezone.now()
    assert api_keys_used(tenant_id=world_a.tenant.pk, used={key.key_id: now}) == 1
    assert api_keys_used(tenant_id=world_a.tenant.pk, used={key.key_id: now + timedelta(seconds=5)}) == 0
    assert api_keys_used(tenant_id=world_a.tenant.pk, used={key.key_id: now + timedelta(seconds=61)}) == 1
    assert api_keys_used(tenant_id=world_a.tenant.pk + 1000, used={key.key_id: now + timedelta(hours=1)}) == 0
    key.refresh_from_db()
    assert key.last_used_at == now + timedelta(seconds=61)
