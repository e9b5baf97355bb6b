"""Names beside ids for the console (ACLs, quotas, API keys, audit rows), the principals directory, the ACL
principal hint that leads to an accepted value, the audit log's filters and summaries, and the tenant sign-in
lands on."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.audit.models import AuditEvent
from controlplane.audit.security import KAFKA_DENIED, security_event_record
from controlplane.clusters.security_events import security_events_audit
from controlplane.tenancy.models import Role
from dataplane.security.events import SecurityEvent
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ClusterFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def _user_principal(world: TenantWorld, role: str) -> str:
    return f"User:u-{world.users[role].pk}"  # type: ignore[attr-defined]


def test_principals_directory_lists_everyone_an_acl_may_name_with_names(world_a: TenantWorld,
                                                                         world_b: TenantWorld) -> None:
    response = world_a.client(Role.VIEWER).get(f"{world_a.base}/principals")
    assert response.status_code == 200
    rows = {row["principal"]: row for row in response.json()}
    account = world_a.service_account
    assert account is not None
    assert rows["User:*"]["name"] == "All principals" and rows["User:*"]["kind"] == "wildcard"
    assert rows[account.principal] == {"principal": account.principal, "kind": "service_account",
                                       "id": str(account.pk), "name": "alpha-app", "email": None}
    member = rows[_user_principal(world_a, Role.MEMBER)]
    assert member["kind"] == "user" and member["name"] == member["email"] == "alpha-member@example.com"
    assert _user_principal(world_b, Role.MEMBER) not in rows  # another tenant's people are never named here
    assert world_b.client(Role.OWNER).get(f"{world_a.base}/principals").status_code == 404


def test_acls_and_quotas_show_principal_names(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    account = world_a.service_account
    assert account is not None
    AclFactory(cluster=cluster, principal=account.principal, resource_name="a")
    AclFactory(cluster=cluster, principal=_user_principal(world_a, Role.ADMIN), resource_name="b")
    AclFactory(cluster=cluster, principal="User:*", resource_name="c")
    AclFactory(cluster=cluster, principal="User:sa-00000000-0000-4000-8000-000000000000", resource_name="d")
    acls = world_a.client(Role.VIEWER).get(f"{world_a.base}/clusters/{cluster.pk}/acls").json()["results"]
    names = {a["resource_name"]: a["principal_name"] for a in acls}
    assert names == {"a": "alpha-app", "b": "alpha-admin@example.com", "c": "All principals", "d": None}
    admin = world_a.client(Role.ADMIN)
    quota = admin.post(f"{world_a.base}/clusters/{cluster.pk}/quotas",
                       {"principal": account.principal, "producer_byte_rate": 1000}, format="json")
    assert quota.status_code == 201 and quota.json()["principal_name"] == "alpha-app"
    listed = admin.get(f"{world_a.base}/clusters/{cluster.pk}/quotas").json()["results"]
    assert [q["principal_name"] for q in listed] == ["alpha-app"]


def test_the_acl_principal_hint_leads_to_an_accepted_value(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    account = world_a.service_account
    assert account is not None
    admin = world_a.client(Role.ADMIN)
    url = f"{world_a.base}/clusters/{cluster.pk}/acls"
    body = {"resource_type": "TOPIC", "resource_name": "orders", "operation": "READ"}

    def create(principal: str) -> Any:
        return admin.post(url, {**body, "principal": principal}, format="json")

    # What a user types first: the account's name, with or without the prefix, or a malformed principal.
    for first in ("alpha-app", "User:alpha-app"):
        refused = create(first)
        assert refused.status_code == 400
        hint = refused.json()["extra"]["fields"]["principal"][0]
        quoted = re.findall(r"'(User:[^']+)'", hint)
        assert account.principal in quoted, hint  # the hint names the accepted value ...
        assert create(account.principal).status_code in (201, 409)  # ... and following it works
    vague = create("sa-whoever").json()["extra"]["fields"]["principal"][0]
    assert "User:sa-<service account id>" in vague and "User:*" in vague
    example = re.findall(r"e\.g\. '(User:[^']+)'", vague)[0]
    assert create(example).status_code in (201, 409)
    # The form's help text says the same.
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    help_text = schema["components"]["schemas"]["AclWriteRequest"]["properties"]["principal"]["description"]
    assert "User:sa-<service account id>" in help_text


def test_api_keys_show_owner_and_cluster_names_and_scope_to_a_cluster(world_a: TenantWorld,
                                                                      world_b: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant, name="prod")
    account = world_a.service_account
    assert account is not None
    admin = world_a.client(Role.ADMIN)
    scoped = admin.post(f"{world_a.base}/api-keys", {"service_account": str(account.pk),
                                                     "cluster": str(cluster.pk)}, format="json")
    assert scoped.status_code == 201, scoped.content
    assert (scoped.json()["cluster"], scoped.json()["cluster_name"]) == (str(cluster.pk), "prod")
    assert scoped.json()["owner_name"] == "alpha-app"
    keys = {k["key_id"]: k for k in admin.get(f"{world_a.base}/api-keys").json()["results"]}
    assert keys[scoped.json()["key_id"]]["cluster_name"] == "prod"
    own = [k for k in keys.values() if k["owner"] == {"type": "user", "id": str(world_a.users[Role.ADMIN].pk)}]
    assert own and own[0]["owner_name"] == "alpha-admin@example.com" and own[0]["cluster_name"] is None
    other = ClusterFactory(tenant=world_b.tenant)
    refused = admin.post(f"{world_a.base}/api-keys", {"cluster": str(other.pk)}, format="json")
    assert refused.status_code == 400 and "cluster" in refused.json()["extra"]["fields"]


def _events(client: APIClient, world: TenantWorld, **query: Any) -> Any:
    return client.get(f"{world.base}/audit-events", query)


def test_audit_rows_have_names_a_summary_and_iso_times(world_a: TenantWorld) -> None:
    admin = world_a.client(Role.ADMIN)
    cluster = admin.post(f"{world_a.base}/clusters", {"name": "prod"}, format="json").json()
    admin.post(f"{world_a.base}/clusters/{cluster['id']}/topics", {"name": "orders", "partitions": 1},
               format="json")
    account = world_a.service_account
    assert account is not None
    admin.post(f"{world_a.base}/clusters/{cluster['id']}/acls", {
        "principal": account.principal, "resource_type": "TOPIC", "resource_name": "orders",
        "operation": "READ"}, format="json")
    now = timezone.now().timestamp()
    security_events_audit(cluster=ClusterFactory._meta.model.objects.get(pk=cluster["id"]), events=[
        SecurityEvent("acl_denied", account.principal, "WRITE TOPIC orders", "10.0.0.1", 3, now - 5, now)])
    AuditEvent.objects.create(tenant=world_a.tenant, tenant_slug="alpha", actor_type="principal",
                              actor_id=account.principal, actor_display=account.principal, action=KAFKA_DENIED,
                              target_type="topic", target_id="x", data={"first_at": now, "last_at": now})
    rows = _events(admin, world_a).json()["results"]
    by_action = {r["action"]: r for r in rows}
    topic = by_action["topic.create"]
    assert topic["actor_name"] == "alpha-admin@example.com"
    assert topic["target_name"] == "orders on prod"
    assert topic["summary"] == "alpha-admin@example.com created topic orders on prod"
    assert by_action["cluster.create"]["summary"] == "alpha-admin@example.com created cluster prod"
    acl = by_action["acl.create"]
    assert acl["target_name"] == "ALLOW READ on topic orders for alpha-app"
    denied = [r for r in rows if r["action"] == KAFKA_DENIED]
    assert {r["actor_name"] for r in denied} == {"alpha-app"}
    assert any(r["summary"].startswith("Kafka request denied by ACLs for alpha-app") for r in denied)
    for row in denied:  # epoch seconds never reach the console: ISO 8601, old rows included
        for key in ("first_at", "last_at"):
            assert isinstance(row["data"][key], str) and row["data"][key].startswith(str(timezone.now().year))


def test_audit_filters_page_and_refuse_bad_input(world_a: TenantWorld, world_b: TenantWorld) -> None:
    admin = world_a.client(Role.ADMIN)
    cluster = admin.post(f"{world_a.base}/clusters", {"name": "prod"}, format="json").json()
    for name in ("a", "b", "c"):
        admin.post(f"{world_a.base}/clusters/{cluster['id']}/topics", {"name": name, "partitions": 1},
                   format="json")
    world_a.client(Role.OWNER).post(f"{world_a.base}/service-accounts", {"name": "etl"}, format="json")
    security_event_record(tenant_id=world_a.tenant.pk, action=KAFKA_DENIED, subject="User:sa-x",
                          subject_type="principal", target_type="cluster", target_id=cluster["id"])
    topic_rows = _events(admin, world_a, action_prefix="topic.").json()
    assert topic_rows["count"] == 3 and {r["action"] for r in topic_rows["results"]} == {"topic.create"}
    page = _events(admin, world_a, action_prefix="topic.", limit=2, offset=2).json()
    assert len(page["results"]) == 1 and page["previous"] is not None
    assert _events(admin, world_a, target_id=f"{cluster['id']}/b").json()["count"] == 1
    by_owner = _events(admin, world_a, actor="alpha-owner").json()["results"]
    assert [r["action"] for r in by_owner] == ["service_account.create"]
    by_principal = _events(admin, world_a, actor=_user_principal(world_a, Role.ADMIN)).json()
    assert by_principal["count"] == 4  # the cluster and three topics
    assert _events(admin, world_a, actor="User:sa-x").json()["count"] == 1  # a security row's principal
    assert _events(admin, world_a, actor_type="principal").json()["count"] == 1
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert _events(admin, world_a, since=later).json()["count"] == 0
    assert _events(admin, world_a, until=later, target_type="cluster").json()["count"] == 2
    facets = admin.get(f"{world_a.base}/audit-events/facets").json()
    assert "topic.create" in facets["actions"] and "principal" in facets["actor_types"]
    for bad in ({"since": "yesterday"}, {"until": "2026-13-40"}, {"actor_type": "robot"},
                {"since": later, "until": timezone.now().isoformat()}):
        refused = _events(admin, world_a, **bad)
        assert refused.status_code == 400, bad
        body = refused.json()
        assert body["code"] == "validation_error" and set(body["extra"]["fields"]) & {"since", "until",
                                                                                     "actor_type"}, body
    # Another tenant's trail stays out of reach (404, not 403), and so does any row of it.
    assert world_b.client(Role.OWNER).get(f"{world_a.base}/audit-events").status_code == 404
    row = AuditEvent.objects.filter(tenant=world_a.tenant).first()
    assert row is not None
    assert world_b.client(Role.OWNER).get(f"{world_b.base}/audit-events/{row.pk}").status_code == 404


def test_sign_in_lands_on_the_last_tenant_chosen(world_a: TenantWorld, world_b: TenantWorld) -> None:
    user = UserFactory(username="roamer")
    MembershipFactory(tenant=world_a.tenant, user=user, role=Role.VIEWER)
    MembershipFactory(tenant=world_b.tenant, user=user, role=Role.VIEWER)
    client = APIClient()
    assert client.post("/api/v1/auth/login", {"username": "roamer", "password": "correct horse battery staple"},
                       format="json").status_code == 200
    assert client.get("/api/v1/me").json()["last_tenant"] is None  # never chosen: the console picks
    chosen = client.patch("/api/v1/me", {"last_tenant": "beta"}, format="json")
    assert chosen.status_code == 200 and chosen.json()["last_tenant"] == "beta"
    client.post("/api/v1/auth/logout")
    again = APIClient()
    again.post("/api/v1/auth/login", {"username": "roamer", "password": "correct horse battery staple"},
               format="json")
    assert again.get("/api/v1/me").json()["last_tenant"] == "beta"  # a new session lands there
    stranger = world_b.client(Role.OWNER)  # an API key: its tenant, and nothing to choose
    assert stranger.get("/api/v1/me").json()["last_tenant"] == "beta"
    assert stranger.patch("/api/v1/me", {"last_tenant": "beta"}, format="json").status_code == 403
    for bad in ({"last_tenant": "nowhere"}, {}, {"last_tenant": "alpha", "extra": 1}):
        refused = again.patch("/api/v1/me", bad, format="json")
        assert refused.status_code == 400, bad
    not_mine = UserFactory(username="loner")
    MembershipFactory(tenant=world_a.tenant, user=not_mine)
    solo = APIClient()
    solo.force_authenticate(not_mine)
    refused = solo.patch("/api/v1/me", {"last_tenant": "beta"}, format="json")  # exists, but not theirs
    assert refused.status_code == 400 and "not one of your tenants" in refused.json()["message"]
