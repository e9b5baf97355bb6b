"""A signed-in user changes their own password: the current one is required, the validators apply, the old one
stops working and the new one works, this session stays and the user's other sessions end."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from controlplane.tenancy.selectors import actor_for
from controlplane.tenancy.services import api_key_create, tenant_create
from tests.controlplane.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/auth/password"
OLD = "an-old-long-passphrase-1"
NEW = "a-brand-new-passphrase-2"


def _signed_in(username: str, password: str) -> APIClient:
    client = APIClient(enforce_csrf_checks=False)
    answer = client.post("/api/v1/auth/login", {"username": username, "password": password}, format="json")
    assert answer.status_code == 200, answer.content
    return client


@pytest.fixture
def user() -> Any:
    user = UserFactory(username="changer", email="changer@example.com")
    user.set_password(OLD)
    user.save()
    return user


def test_wrong_current_password_is_400(user: Any) -> None:
    answer = _signed_in("changer", OLD).post(URL, {"current_password": "not-it", "new_password": NEW},
                                             format="json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "validation_error"
    assert answer.json()["extra"]["fields"] == {"current_password": ["The current password is wrong."]}
    assert get_user_model().objects.get(username="changer").check_password(OLD)


@pytest.mark.parametrize(("weak", "message"), [
    ("short", "This password is too short. It must contain at least 8 characters."),
    ("password123", "This password is too common."),
    ("changer1", "The password is too similar to the username."),
])
def test_weak_new_password_is_400_with_the_validators_message(user: Any, weak: str, message: str) -> None:
    answer = _signed_in("changer", OLD).post(URL, {"current_password": OLD, "new_password": weak}, format="json")
    assert answer.status_code == 400
    assert message in answer.json()["extra"]["fields"]["new_password"]
    assert get_user_model().objects.get(username="changer").check_password(OLD)


def test_success_swaps_the_passwords_and_ends_other_sessions_only(user: Any) -> None:
    other = _signed_in("changer", OLD)
    assert other.get("/api/v1/me").status_code == 200
    this = _signed_in("changer", OLD)
    assert this.post(URL, {"current_password": OLD, "new_password": NEW}, format="json").status_code == 204
    assert this.get("/api/v1/me").status_code == 200  # this session kept
    assert other.get("/api/v1/me").status_code == 401  # the other session ended
    refused = APIClient().post("/api/v1/auth/login", {"username": "changer", "password": OLD}, format="json")
    assert refused.status_code == 401
    _signed_in("changer", NEW)


def test_signed_out_or_api_key_callers_cannot(user: Any) -> None:
    body = {"current_password": OLD, "new_password": NEW}
    assert APIClient().post(URL, body, format="json").status_code == 403
    tenant = tenant_create(slug="pw-keys", name="Keys", owner=user, actor=actor_for(user))
    issued = api_key_create(tenant=tenant, actor=actor_for(user), owner_user=user)
    with_key = APIClient()
    with_key.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.api_key.key_id}:{issued.secret}")
    assert with_key.get("/api/v1/me").status_code == 200  # the key works...
    assert with_key.post(URL, body, format="json").status_code == 403  # ...but not for this


def test_missing_fields_are_400(user: Any) -> None:
    answer = _signed_in("changer", OLD).post(URL, {}, format="json")
    assert answer.status_code == 400
    assert set(answer.json()["extra"]["fields"]) == {"current_password", "new_password"}
