"""Each cluster's internal secrets: random, its own, stored apart, never shown, rotated on an admin's request."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from controlplane.audit.models import AuditEvent
from controlplane.clusters import internal_secrets
from controlplane.clusters.credentials import client_config
from controlplane.clusters.models import Cluster, ClusterSecret
from controlplane.clusters.principals import cluster_token_key
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import make_world

pytestmark = pytest.mark.django_db


def _create(world: Any, name: str) -> dict[str, Any]:
    made = world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": name, "plan": "basic"}, format="json")
    assert made.status_code == 201, made.content
    return dict(made.json())


def test_secrets_are_random_per_cluster_and_do_not_follow_secret_key(settings: Any) -> None:
    world = make_world(f"s{uuid.uuid4().hex[:6]}")
    a, b = (Cluster.objects.get(pk=_create(world, n)["id"]) for n in ("a", "b"))
    sa, sb = ClusterSecret.objects.get(cluster=a), ClusterSecret.objects.get(cluster=b)
    assert sa.internal_password != sb.internal_password and sa.token_key != sb.token_key
    assert len(bytes.fromhex(sa.token_key)) == 32 and len(sa.internal_password) >= 40
    before = (client_config(a, bootstrap="x:1")["sasl.password"], cluster_token_key(a.kafka_cluster_id))
    settings.SECRET_KEY = "rotated-" + uuid.uuid4().hex
    assert (client_config(a, bootstrap="x:1")["sasl.password"], cluster_token_key(a.kafka_cluster_id)) == before
    assert before[0] == sa.internal_password and sa.internal_password not in repr(sa) + str(sa)


def test_no_api_shows_them_and_a_rotation_is_audited_without_them() -> None:
    world = make_world(f"s{uuid.uuid4().hex[:6]}")
    body = _create(world, "c")
    secret = ClusterSecret.objects.get(cluster_id=body["id"])
    url = f"{world.base}/clusters/{body['id']}/rotate-secrets"
    assert world.client(Role.MEMBER).post(url).status_code == 403
    rotated = world.client(Role.ADMIN).post(url)
    assert rotated.status_code == 202, rotated.content
    again = world.client(Role.ADMIN).post(url)  # during a roll: nothing new
    assert again.status_code == 202
    secret.refresh_from_db()
    assert secret.version == 1 and secret.next_version == 2 and secret.next_internal_password
    assert rotated.json()["generation"] == body["generation"] + 1 == again.json()["generation"]
    trail = list(AuditEvent.objects.filter(tenant=world.tenant, action="cluster.secrets_rotate"))
    assert len(trail) == 1 and trail[0].data == {"from_version": 1, "to_version": 2}
    everything = json.dumps([world.client(Role.OWNER).get(f"{world.base}/clusters/{body['id']}").json(),
                             world.client(Role.OWNER).get(f"{world.base}/clusters").json(), rotated.json(),
                             list(AuditEvent.objects.filter(tenant=world.tenant).values("data"))], default=str)
    for value in (secret.internal_password, secret.token_key, secret.next_internal_password, secret.next_token_key):
        assert value not in everything
    # The control plane keeps using the current version until reconcile promotes the next one.
    assert internal_secrets.current(Cluster.objects.get(pk=body["id"])).version == 1
    assert internal_secrets.of_version(secret.cluster.kafka_cluster_id, 2).password == secret.next_internal_password
    with pytest.raises(KeyError):
        internal_secrets.of_version(secret.cluster.kafka_cluster_id, 3)


def test_the_admin_does_not_register_them() -> None:
    from django.contrib import admin

    assert ClusterSecret not in admin.site._registry
