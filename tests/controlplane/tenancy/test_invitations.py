"""Joining a tenant is by invitation: inviting reveals nothing about accounts and enrols nobody; only the invitee,
signed in with an account of that address, accepts (or declines); invitations expire, are revoked, audited and
scoped to their tenant."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.audit.models import AuditEvent
from controlplane.tenancy.models import Invitation, Membership, Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import UserFactory

pytestmark = pytest.mark.django_db


def _invite(world: TenantWorld, email: str, role: str = "member", as_role: str = Role.OWNER) -> Any:
    return world.client(as_role).post(f"{world.base}/invitations", {"email": email, "role": role}, format="json")


def _signed_in(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _shape(body: dict[str, Any]) -> dict[str, Any]:
    """An invitation's answer without what differs by construction (id, address, times)."""
    return {k: v for k, v in body.items() if k not in ("id", "email", "created_at", "expires_at", "join_url")}


def test_inviting_answers_alike_whoever_the_address_belongs_to(world_a: TenantWorld) -> None:
    UserFactory(username="has-account", email="has-account@example.com")
    users_before = get_user_model().objects.count()
    answers = [_invite(world_a, email) for email in (
        "has-account@example.com",  # an account, not a member
        "nobody-here@example.com",  # no account at all
        "alpha-viewer@example.com",  # a member already
    )]
    assert [a.status_code for a in answers] == [201, 201, 201]
    shapes = [_shape(a.json()) for a in answers]
    assert shapes[0] == shapes[1] == shapes[2] == {"role": "member", "state": "pending", "invited_by": "alpha-owner",
                                                   "responded_at": None, "emailed": False}
    assert all("/join#" in a.json()["join_url"] for a in answers)  # every address gets a link alike
    assert get_user_model().objects.count() == users_before  # no account is made for an address
    assert not Membership.objects.filter(tenant=world_a.tenant, user__email="has-account@example.com").exists()


def test_the_invitee_accepts_and_only_then_is_a_member(world_a: TenantWorld) -> None:
    invitee = UserFactory(username="newcomer", email="Newcomer@Example.com")
    invitation = _invite(world_a, " newcomer@example.COM ", role="admin").json()
    assert invitation["email"] == "newcomer@example.com"
    client = _signed_in(invitee)
    assert client.get("/api/v1/me").json()["tenants"] == []
    mine = client.get("/api/v1/invitations").json()["results"]
    assert [(i["id"], i["tenant"], i["role"], i["invited_by"]) for i in mine] == [
        (invitation["id"], "alpha", "admin", "alpha-owner")]

    accepted = client.post(f"/api/v1/invitations/{invitation['id']}/accept")
    assert accepted.status_code == 200, accepted.json()
    assert accepted.json()["slug"] == "alpha" and accepted.json()["role"] == "admin"
    assert Membership.objects.get(tenant=world_a.tenant, user=invitee).role == Role.ADMIN
    assert client.get(f"{world_a.base}/clusters").status_code == 200
    assert client.get("/api/v1/invitations").json()["results"] == []
    again = client.post(f"/api/v1/invitations/{invitation['id']}/accept")
    assert again.status_code == 404  # no longer open
    listed = world_a.client(Role.OWNER).get(f"{world_a.base}/invitations").json()["results"]
    assert [(i["id"], i["state"]) for i in listed] == [(invitation["id"], "accepted")]
    actions = list(AuditEvent.objects.filter(tenant=world_a.tenant, target_type="invitation")
                   .order_by("created_at").values_list("action", "actor_display"))
    assert actions == [("invitation.create", "alpha-owner"), ("invitation.accept", "newcomer")]


def test_declining_enrols_nobody(world_a: TenantWorld) -> None:
    invitee = UserFactory(username="shy", email="shy@example.com")
    invitation = _invite(world_a, "shy@example.com").json()
    client = _signed_in(invitee)
    assert client.post(f"/api/v1/invitations/{invitation['id']}/decline").status_code == 204
    assert not Membership.objects.filter(user=invitee).exists()
    assert client.post(f"/api/v1/invitations/{invitation['id']}/accept").status_code == 404
    assert Invitation.objects.get(pk=invitation["id"]).state == "declined"
    assert AuditEvent.objects.filter(tenant=world_a.tenant, action="invitation.decline").count() == 1


def test_someone_else_cannot_see_or_answer_an_invitation(world_a: TenantWorld, world_b: TenantWorld) -> None:
    UserFactory(username="invitee", email="invitee@example.com")
    invitation = _invite(world_a, "invitee@example.com").json()
    stranger = _signed_in(world_b.users[Role.OWNER])
    assert stranger.get("/api/v1/invitations").json()["results"] == []
    for verb in ("accept", "decline"):
        answer = stranger.post(f"/api/v1/invitations/{invitation['id']}/{verb}")
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    # B's owner cannot read or revoke A's invitation through B's tenant or A's.
    for base in (world_a.base, world_b.base):
        url = f"{base}/invitations/{invitation['id']}"
        assert world_b.client(Role.OWNER).get(url).status_code == 404
        assert world_b.client(Role.OWNER).delete(url).status_code == 404
    assert Invitation.objects.get(pk=invitation["id"]).state == "pending"


def test_api_keys_cannot_answer_invitations(world_a: TenantWorld, world_b: TenantWorld) -> None:
    invitation = _invite(world_a, "beta-owner@example.com").json()
    keyed = world_b.client(Role.OWNER)  # the invitee's own key, bound to tenant B
    assert keyed.get("/api/v1/invitations").status_code == 403
    assert keyed.post(f"/api/v1/invitations/{invitation['id']}/accept").status_code == 403
    assert not Membership.objects.filter(tenant=world_a.tenant, user=world_b.users[Role.OWNER]).exists()


def test_a_member_already_is_told_so_and_keeps_their_role(world_a: TenantWorld) -> None:
    invitation = _invite(world_a, "alpha-viewer@example.com", role="owner").json()
    answer = _signed_in(world_a.users[Role.VIEWER]).post(f"/api/v1/invitations/{invitation['id']}/accept")
    assert answer.status_code == 409 and answer.json()["code"] == "already_member"
    assert Membership.objects.get(tenant=world_a.tenant, user=world_a.users[Role.VIEWER]).role == Role.VIEWER


def test_expired_invitations_cannot_be_accepted(world_a: TenantWorld) -> None:
    invitee = UserFactory(username="late", email="late@example.com")
    invitation = _invite(world_a, "late@example.com").json()
    Invitation.objects.filter(pk=invitation["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    client = _signed_in(invitee)
    assert client.get("/api/v1/invitations").json()["results"] == []
    assert client.post(f"/api/v1/invitations/{invitation['id']}/accept").status_code == 404
    listed = world_a.client(Role.OWNER).get(f"{world_a.base}/invitations").json()["results"]
    assert [i["state"] for i in listed] == ["expired"]
    renewed = _invite(world_a, "late@example.com", role="viewer").json()  # inviting again renews it
    assert renewed["id"] == invitation["id"] and renewed["state"] == "pending"
    assert client.post(f"/api/v1/invitations/{invitation['id']}/accept").json()["role"] == "viewer"


def test_invitations_expire_after_the_configured_days(world_a: TenantWorld) -> None:
    before = timezone.now()
    with override_settings(SLUICE_INVITATION_TTL_DAYS=7):
        invitation = Invitation.objects.get(pk=_invite(world_a, "week@example.com").json()["id"])
    assert timedelta(days=7) <= invitation.expires_at - before < timedelta(days=7, minutes=1)


def test_owners_revoke_and_the_invitee_then_cannot_accept(world_a: TenantWorld) -> None:
    invitee = UserFactory(username="revoked", email="revoked@example.com")
    invitation = _invite(world_a, "revoked@example.com").json()
    url = f"{world_a.base}/invitations/{invitation['id']}"
    assert world_a.client(Role.ADMIN).delete(url).status_code == 403
    assert world_a.client(Role.OWNER).delete(url).status_code == 204
    assert world_a.client(Role.OWNER).delete(url).status_code == 204  # revoking again changes nothing
    assert _signed_in(invitee).post(f"/api/v1/invitations/{invitation['id']}/accept").status_code == 404
    assert world_a.client(Role.OWNER).get(url).json()["state"] == "revoked"
    assert AuditEvent.objects.filter(tenant=world_a.tenant, action="invitation.revoke").count() == 1


def test_who_may_invite_and_read_invitations(world_a: TenantWorld) -> None:
    for role in (Role.VIEWER, Role.MEMBER, Role.ADMIN):
        assert _invite(world_a, f"from-{role}@example.com", as_role=role).status_code == 403
    assert world_a.client(Role.MEMBER).get(f"{world_a.base}/invitations").status_code == 403
    assert world_a.client(Role.ADMIN).get(f"{world_a.base}/invitations").status_code == 200
    members = world_a.client(Role.OWNER).post(f"{world_a.base}/members", {"email": "x@example.com"}, format="json")
    assert members.status_code == 405  # members are no longer added directly


def test_bad_input_and_the_pending_cap(world_a: TenantWorld) -> None:
    assert _invite(world_a, "not-an-address").status_code == 400
    assert _invite(world_a, "ok@example.com", role="emperor").status_code == 400
    with override_settings(SLUICE_TENANT_MAX_PENDING_INVITATIONS=2):
        assert _invite(world_a, "one@example.com").status_code == 201
        assert _invite(world_a, "one@example.com").status_code == 201  # a renewal takes no new place
        assert _invite(world_a, "two@example.com").status_code == 201
        refused = _invite(world_a, "three@example.com")
        assert refused.status_code == 400 and refused.json()["code"] == "quota_exceeded"
        assert refused.json()["extra"]["limit"] == 2
    assert Invitation.objects.filter(tenant=world_a.tenant).count() == 2  # one@, two@


def test_a_role_invitation_is_per_tenant(world_a: TenantWorld, world_b: TenantWorld) -> None:
    invitee = UserFactory(username="both", email="both@example.com")
    _invite(world_a, "both@example.com", role="viewer")
    _invite(world_b, "both@example.com", role="admin")
    client = _signed_in(invitee)
    mine = {i["tenant"]: i for i in client.get("/api/v1/invitations").json()["results"]}
    assert {t: i["role"] for t, i in mine.items()} == {"alpha": "viewer", "beta": "admin"}
    client.post(f"/api/v1/invitations/{mine['beta']['id']}/accept")
    roles = {t["slug"]: t["role"] for t in client.get("/api/v1/me").json()["tenants"]}
    assert roles == {"beta": "admin"}
