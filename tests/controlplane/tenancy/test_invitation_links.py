"""An invitation's one-time link: shown to the inviter (for every address alike, so inviting still reveals
nothing), mailed to the address when e-mail is configured, and redeemed once by someone without an account to
make one with the invited address, set its password and join. It never sets an existing account's password."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import override_settings
from rest_framework.test import APIClient

from controlplane.tenancy.models import Membership
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import UserFactory

pytestmark = pytest.mark.django_db

JOIN = "/api/v1/auth/join"
PASSWORD = "a-fine-long-passphrase-9"


def _invite(world: TenantWorld, email: str, role: str = "member") -> Any:
    answer = world.client().post(f"{world.base}/invitations", {"email": email, "role": role}, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def _token(invitation: dict[str, Any]) -> str:
    url: str = invitation["join_url"]
    assert url.startswith("http://testserver/join#")
    return url.partition("#")[2]


def test_the_link_makes_an_account_with_the_invited_address_once(world_a: TenantWorld) -> None:
    invitation = _invite(world_a, "Newcomer@Example.com", "viewer")
    assert invitation["emailed"] is False  # no e-mail configured: the inviter passes the link on
    token = _token(invitation)
    client = APIClient()
    joined = client.post(JOIN, {"token": token, "username": "newcomer", "password": PASSWORD}, format="json")
    assert joined.status_code == 201, joined.content
    assert joined.json()["slug"] == world_a.tenant.slug and joined.json()["role"] == "viewer"
    user = get_user_model().objects.get(username="newcomer")
    assert user.email == "newcomer@example.com" and user.check_password(PASSWORD)
    assert Membership.objects.filter(tenant=world_a.tenant, user=user, role="viewer").exists()
    assert client.get("/api/v1/me").status_code == 200  # signed in
    again = APIClient().post(JOIN, {"token": token, "username": "second", "password": PASSWORD}, format="json")
    assert again.status_code == 404 and again.json()["code"] == "not_found"
    assert world_a.client().get(f"{world_a.base}/invitations/{invitation['id']}").json()["state"] == "accepted"


def test_the_link_never_sets_an_existing_accounts_password(world_a: TenantWorld) -> None:
    existing = UserFactory(username="has-one", email="has-one@example.com")
    token = _token(_invite(world_a, "has-one@example.com"))
    answer = APIClient().post(JOIN, {"token": token, "username": "takeover", "password": PASSWORD}, format="json")
    assert answer.status_code == 409 and answer.json()["code"] == "account_exists"
    existing.refresh_from_db()
    assert not existing.check_password(PASSWORD)
    assert not get_user_model().objects.filter(username="takeover").exists()


def test_weak_passwords_taken_usernames_and_bad_links_are_refused(world_a: TenantWorld) -> None:
    token = _token(_invite(world_a, "picky@example.com"))
    weak = APIClient().post(JOIN, {"token": token, "username": "picky", "password": "password"}, format="json")
    assert weak.status_code == 400
    assert "This password is too common." in weak.json()["extra"]["fields"]["password"]
    UserFactory(username="Taken")
    taken = APIClient().post(JOIN, {"token": token, "username": "taken", "password": PASSWORD}, format="json")
    assert taken.json()["extra"]["fields"] == {"username": ["This username is taken."]}
    bad = APIClient().post(JOIN, {"token": "nope", "username": "picky", "password": PASSWORD}, format="json")
    assert bad.status_code == 404


def test_renewing_or_revoking_kills_the_old_link(world_a: TenantWorld) -> None:
    first = _token(_invite(world_a, "twice@example.com"))
    second_invitation = _invite(world_a, "twice@example.com")
    answer = APIClient().post(JOIN, {"token": first, "username": "twice", "password": PASSWORD}, format="json")
    assert answer.status_code == 404
    world_a.client().delete(f"{world_a.base}/invitations/{second_invitation['id']}")
    answer = APIClient().post(JOIN, {"token": _token(second_invitation), "username": "twice",
                                     "password": PASSWORD}, format="json")
    assert answer.status_code == 404


@override_settings(SLUICE_EMAIL_ENABLED=True, EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
def test_with_email_configured_the_link_is_mailed(world_a: TenantWorld,
                                                   django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        invitation = _invite(world_a, "mailed@example.com", "admin")
    assert invitation["emailed"] is True
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["mailed@example.com"]
    assert invitation["join_url"] in message.body and "as admin" in message.body
