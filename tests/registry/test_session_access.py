"""The console's signed-in user reaches the registry with the session cookie: the tenant role applies, writes need
the CSRF token exactly as the management API's session callers do, and another tenant's cluster stays a 404."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils.crypto import get_random_string

from controlplane.tenancy.models import Role
from tests.registry.conftest import JSON, Registry

pytestmark = pytest.mark.django_db(transaction=True)

V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})


def browser(reg: Registry, role: str) -> tuple[Client, str]:
    """A signed-in browser of ``role`` with its CSRF cookie, and the token a page would send back."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(reg.world.users[role])  # type: ignore[arg-type]
    token = get_random_string(32)
    client.cookies["csrftoken"] = token
    return client, token


def test_session_reads_and_writes_with_the_csrf_token(reg: Registry) -> None:
    client, token = browser(reg, Role.MEMBER)
    path = f"{reg.base}/subjects/users-value/versions"
    assert client.get(f"{reg.base}/subjects").json() == []
    refused = client.post(path, json.dumps({"schema": V1}), content_type=JSON)
    assert refused.status_code == 403
    assert refused.json()["error_code"] == 40301 and "CSRF" in refused.json()["message"]
    done = client.post(path, json.dumps({"schema": V1}), content_type=JSON, headers={"X-CSRFToken": token})
    assert (done.status_code, done.json()) == (200, {"id": 1})
    assert client.get(f"{reg.base}/subjects").json() == ["users-value"]


def test_session_roles(reg: Registry) -> None:
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    viewer, token = browser(reg, Role.VIEWER)
    assert viewer.get(f"{reg.base}/subjects/s/versions").json() == [1]
    refused = viewer.post(f"{reg.base}/subjects/s/versions", json.dumps({"schema": V1}), content_type=JSON,
                          headers={"X-CSRFToken": token})
    assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
    assert "'member'" in refused.json()["message"]
    member, token = browser(reg, Role.MEMBER)
    config = member.put(f"{reg.base}/config/s", json.dumps({"compatibility": "NONE"}), content_type=JSON,
                        headers={"X-CSRFToken": token})
    assert (config.status_code, config.json()["error_code"]) == (403, 40301)
    admin, token = browser(reg, Role.ADMIN)
    config = admin.put(f"{reg.base}/config/s", json.dumps({"compatibility": "NONE"}), content_type=JSON,
                       headers={"X-CSRFToken": token})
    assert config.json() == {"compatibility": "NONE"}


def test_another_tenants_cluster_is_a_404_and_no_session_is_a_401(reg: Registry, reg_b: Registry) -> None:
    client, _ = browser(reg, Role.OWNER)
    missing = client.get(f"{reg_b.base}/subjects")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 404)
    assert client.get(f"{reg.base}/subjects").status_code == 200
    anonymous = Client().get(f"{reg.base}/subjects")
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 40101)
